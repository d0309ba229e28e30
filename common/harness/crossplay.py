"""Cross-play, `scanrl-eval RUN_DIR --cross-play`: for an env of agents (JaxMARL's; Overcooked
is the zero-shot coordination benchmark), every seed's policy paired with every other seed's.

Cell [i, j] of the S x S matrix: seed i's policy acts for agent 0 and seed j's for every other
agent, in the games seed i's evaluation draws (its key, the run's episode count), scored as an
evaluation is: the mean over the games and the agents of each agent's first-episode return. So
the diagonal is each seed's own evaluation (self-play), and a row holds one policy's return
with each partner. The S x S games run as one program, both seed axes vmapped. Writes
`cross_play.json` and `cross_play.png` beside the evaluation's JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from scanrl.common import envs
from scanrl.common.algorithm import Algorithm
from scanrl.common.harness import loop


def check(env: Any, env_id: str, num_seeds: int) -> None:
    """ValueError (one sentence) where the env is not one of two or more agents, or the run has
    one seed."""
    if (envs.hook(env, "num_agents") or 1) < 2:
        raise ValueError(f"--cross-play: {env_id} is not an env of two or more agents (JaxMARL's "
                         "jaxmarl/...), so there are no partners to pair.")
    if num_seeds < 2:
        raise ValueError("--cross-play: this run has 1 seed, so there is no other policy to pair "
                         "with; train with --num-seeds 2 or more.")


def matrix(algo: Algorithm, env_params: Any, policy: Any, keys: jax.Array, episodes: int,
           deterministic: bool = True) -> np.ndarray:
    """[S, S] returns (module docstring) of the policies `policy` (leaves [S, ...]), seed i's
    games drawn by keys[i] ([S] keys)."""
    vec_env = envs.VecEnv(algo.env, env_params, episodes)
    # rows are agent-minor (game g's agent m is row g * M + m): agent 0's rows take the row seed's
    first = jnp.arange(vec_env.num_envs) % vec_env.num_agents == 0

    def pair(mine: Any, theirs: Any, key: jax.Array) -> jax.Array:
        carry_a, act_a = loop.acting(algo, mine, deterministic, vec_env.num_envs)
        carry_b, act_b = loop.acting(algo, theirs, deterministic, vec_env.num_envs)

        def act(obs, key, carry, mask=None):
            a, carry_a = act_a(obs, key, carry[0], mask)
            b, carry_b = act_b(obs, key, carry[1], mask)
            pick = first.reshape(first.shape + (1,) * (a.ndim - 1))
            return jnp.where(pick, a, b), (carry_a, carry_b)

        return loop.run_episodes(vec_env, act, key, (carry_a, carry_b)).returns.mean()

    partners = jax.vmap(pair, in_axes=(None, 0, None))  # one row: seed i with each seed j
    return np.asarray(jax.jit(jax.vmap(partners, in_axes=(0, None, 0)))(policy, policy, keys),
                      np.float64)


def write(out_dir: Path, returns: np.ndarray, seeds: list[int], record: dict) -> dict:
    """cross_play.json (the matrix, its seeds and how it was drawn) and cross_play.png; returns
    the JSON's content."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    count = len(seeds)
    off = returns[~np.eye(count, dtype=bool)]
    result = {**record, "seeds": seeds, "matrix": returns.tolist(),
              "self_play_mean": float(np.diag(returns).mean()),
              "cross_play_mean": float(off.mean()) if off.size else None}
    (out_dir / "cross_play.json").write_text(json.dumps(result, indent=2) + "\n")
    figure = Figure(figsize=(3.2 + 0.6 * count, 1.8 + 0.6 * count), dpi=100)
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    image = ax.imshow(returns, cmap="viridis")
    figure.colorbar(image, ax=ax, label="return")
    ax.set_xticks(range(count), seeds), ax.set_yticks(range(count), seeds)
    ax.set_xlabel("seed of the other agents"), ax.set_ylabel("seed of agent 0")
    ax.set_title("cross-play (diagonal: self-play)", fontsize=10)
    if count <= 12:  # the numbers fit in their squares; dark on viridis' light end
        light = image.norm(returns) > 0.6
        for (i, j), value in np.ndenumerate(returns):
            ax.text(j, i, f"{value:.3g}", ha="center", va="center", fontsize=8,
                    color="black" if light[i, j] else "white")
    figure.tight_layout()
    figure.savefig(out_dir / "cross_play.png")
    return result
