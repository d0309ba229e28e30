"""`scanrl-eval RUN_DIR`: reload a run's policy, evaluate it, optionally render an episode.

The policy is rebuilt from the folder alone: config.json gives the algorithm's Config (the
algorithm's name comes from config.json, summary.json, or the folder's name
`<algo>__<env>__<time>`), params.npz the final policy of every seed, or `--checkpoint N` the one
saved at update N. All seeds run `--episodes` episodes each in one jitted program, on the env the
run evaluated on (its `--eval-env-params`, else its `--env-params`), with `--env-params KEY
VALUE ...` on top to test how the policy generalises.

Both policies run: the deterministic one (the mode) and the sampled one. By default each
seed's evaluation keys are those the run's own evaluation after its last update used, and the
episode count is the run's `--eval-episodes`; so, unchanged, this reproduces the run's last
`eval_return` and `eval_return_sampled` per seed (same policy, same program). The table shows
the deterministic policy (`--sample`: the sampled one), a line gives the other's mean. `--key K`
draws other episodes.

Writes `eval.json` (or `--out`) and prints a per-seed table; `--gif FILE` renders one episode
of seed `--seed-index` (common/harness/render.py).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from scanrl.common import envs
from scanrl.common.algorithm import Algorithm
from scanrl.common.harness import (
    checkpoint, configs, console, crossplay, devices, envsettings, loop, runconfig,
)
from scanrl.common.harness.stats import differ_widely


def load_algorithm(run_dir: str | Path, algorithms: Any) -> Any:
    """The algorithm module that trained a run folder: the file config.json records for a copy
    of an algorithm file (RunFolderError, one sentence, where that file is gone), else the
    algorithm of that name in the registry `algorithms` (scanrl.algos: get(name) -> module)."""
    path = configs.algorithm_file(run_dir)
    if path is None:
        return algorithms.get(configs.run_algorithm(run_dir, required=True))
    if not Path(path).is_file():
        raise configs.RunFolderError(
            f"{run_dir} was trained by {path}, which is gone; put that file back to use this run."
        )
    import importlib.util
    import sys

    name = f"scanrl_run_algorithm_{Path(path).stem}"
    if name not in sys.modules:  # dataclasses look their module up in sys.modules while it executes
        spec = importlib.util.spec_from_file_location(name, path)
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def load_config(run_dir: str | Path, algorithms: Any) -> tuple[Any, Any]:
    """(algorithm module, its Job) of a run folder, as the run was configured (`algorithms`:
    as in load_algorithm)."""
    module = load_algorithm(run_dir, algorithms)
    saved = configs.read_config_file(Path(run_dir) / "config.json", module.Config)
    if saved.get("sweep") and not saved.get("pbt"):
        raise configs.RunFolderError(
            f"{run_dir} is a sweep of several configs; train one of them (e.g. "
            f"--config {run_dir}/best_config.json) and evaluate that run."
        )
    env = saved.pop("env", module.Config.__dataclass_fields__["env"].default)
    return module, runconfig.compose(module, env, **saved)


def load_policy(run_dir: str | Path, algo: Algorithm, num_seeds: int, update: int | None = None,
                rows: list[int] | None = None, hparams: tuple[str, ...] = ()) -> tuple[Any, int]:
    """A run's policy (leaves [num_seeds, ...]) and the update it comes from: the final one
    (params.npz) or, with `update`, the one in checkpoints/update_<update>.npz. `rows`: which
    rows of a PBT run's population to take (one per seed), whose swept fields are `hparams`."""
    from scanrl.common.harness import pbt

    run_dir = Path(run_dir)
    rows = list(range(num_seeds)) if rows is None else rows
    def template(k):
        if not hparams:
            return loop.SeedState(train=algo.init(k), eval_key=k, hparams={})
        return loop.PopulationState(
            train=algo.init(k), eval_key=k, hparams={name: jnp.float32(0) for name in hparams},
            pbt=pbt.initial_record(),
        )

    one_seed = jax.eval_shape(template, jax.random.key(0))
    if update is None:
        path = run_dir / "params.npz"
        if not path.is_file():
            raise configs.RunFolderError(
                f"{run_dir} has no params.npz yet (a run writes it when it ends or is interrupted);"
                " pass --checkpoint N to use a checkpoint."
            )
        template = jax.eval_shape(algo.policy_params, one_seed.train)
        flat, treedef = jax.tree_util.tree_flatten_with_path(template)
        with np.load(path) as saved:
            leaves = [saved[jax.tree_util.keystr(p, simple=True, separator="/")] for p, _ in flat]
        if hparams:  # a population's params.npz is [members, seeds, ...]
            leaves = [x.reshape((-1,) + x.shape[2:])[rows] for x in leaves]
        summary = json.loads((run_dir / "summary.json").read_text())
        return treedef.unflatten([jnp.asarray(x) for x in leaves]), int(summary["updates"])
    path = run_dir / "checkpoints" / f"update_{update}.npz"
    if not path.is_file():
        have = ", ".join(
            str(checkpoint.update_of(p))
            for p in checkpoint.all_checkpoints(run_dir / "checkpoints")
        )
        raise configs.RunFolderError(
            f"--checkpoint {update}: {run_dir} has no checkpoint at update {update} "
            f"(it has: {have or 'none'})."
        )
    fingerprint, raw = checkpoint.read(path)
    leaves, treedef = jax.tree.flatten(one_seed)
    if fingerprint["treedef"] != str(treedef):
        raise configs.RunFolderError(
            f"--checkpoint {update}: {path} does not hold this algorithm's state "
            "(the algorithm file changed since the run)."
        )

    def seeds_only(a: np.ndarray, t) -> jax.Array:
        is_key = jnp.issubdtype(t.dtype, jax.dtypes.prng_key)
        a = a[rows]  # drop the padding seeds (and the members not asked for)
        return jax.random.wrap_key_data(a) if is_key else jnp.asarray(a)

    train = treedef.unflatten([seeds_only(a, t) for a, t in zip(raw, leaves)]).train
    return jax.vmap(algo.policy_params)(train), update


def evaluation_keys(
    first_seed: int, num_seeds: int, update: int, key: int | None = None
) -> jax.Array:
    """[num_seeds] keys: those of the run's evaluation after update `update` (0-based), or
    with `key`, the seeds' evaluation streams folded with `key` instead (other episodes)."""
    streams = jax.vmap(loop.eval_key)(devices.seed_keys(first_seed, num_seeds))
    tag = update if key is None else 2**31 - 1 - key  # evaluations use tags 0..updates-1
    return jax.vmap(lambda k: jax.random.fold_in(k, tag))(streams)


def episode_returns(algo: Algorithm, env_params: Any, policy: Any, keys: jax.Array, episodes: int,
                    deterministic: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Returns and lengths [num_seeds, episodes]: one program, seeds vmapped."""
    vec_env = envs.VecEnv(algo.env, env_params, episodes)

    def one(policy, key):
        carry, act = loop.acting(algo, policy, deterministic, vec_env.num_envs)
        return loop.run_episodes(vec_env, act, key, carry)[:2]

    returns, lengths = jax.jit(jax.vmap(one))(policy, keys)
    return np.asarray(returns, np.float64), np.asarray(lengths)


QUICK_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def record_episode(
    algo: Algorithm, env_params: Any, policy: Any, key: jax.Array, deterministic: bool = True,
    max_steps: int = 1000,
) -> tuple[Any, np.ndarray, np.ndarray]:
    """One episode of one seed's policy (leaves unbatched), at most `max_steps` steps: the
    L + 1 states it passes through (leaves [L + 1, ...]: the reset state, then the state after
    each step, the last one the episode's end), their observations [L + 1, *obs] and the
    rewards [L]. One jitted scan; the env does not start a new episode when this one ends
    (`_KeepEnd`), so the end is kept (an env that resets inside its own `step` in another
    way ends on its last state before the end: L states, L - 1 rewards drawn)."""
    env = _keep_end(algo.env)
    vec_env = envs.VecEnv(algo.env if env is None else env, env_params, 1)

    def rollout(policy, key):
        k_reset, k_steps = jax.random.split(key)
        obs, state = vec_env.reset(k_reset)
        policy_carry, act = loop.acting(algo, policy, deterministic, vec_env.num_envs)

        def step(carry, k):
            obs, state, policy_carry = carry
            k_act, k_step = jax.random.split(k)
            action, policy_carry = act(obs, k_act, policy_carry, vec_env.action_mask(state))
            next_obs, next_state, info = vec_env.step(k_step, state, action)
            return (next_obs, next_state, policy_carry), (
                state.env_state, obs, info.reward, info.terminated | info.truncated,
            )

        (obs, state, _), (states, observations, rewards, done) = jax.lax.scan(
            step, (obs, state, policy_carry), jax.random.split(k_steps, max_steps))
        last = lambda xs, x: jnp.concatenate(
            [xs, x[None]]
        )  # noqa: E731 - the state after the last step
        return jax.tree.map(last, states, state.env_state), last(observations, obs), rewards, done

    lowered = jax.jit(rollout).lower(policy, key)
    # the episode runs in milliseconds, its compile took seconds: compile it with less optimisation
    try:
        compiled = lowered.compile(compiler_options=QUICK_COMPILE)
    except Exception:  # noqa: BLE001 - a backend without these options compiles as usual
        compiled = lowered.compile()
    states, obs, rewards, done = jax.device_get(compiled(policy, key))
    ends = np.nonzero(done[:, 0])[0]
    length = int(ends[0]) + 1 if ends.size else max_steps
    kept = length + 1 if env is not None else length
    return jax.tree.map(lambda x: x[:kept, 0], states), obs[:kept, 0], rewards[:kept - 1, 0]


class _KeepEnd:
    """`env` whose step does not reset when an episode ends (gymnax's `step` replaces the end
    state by a fresh start), so a recording can draw the end. Every other step gives exactly
    what `env.step` gives: the same step key (gymnax splits the key into step and reset keys)
    and the same values."""

    def __init__(self, env: Any, resets: bool):
        self.env, self.resets = env, resets
        self.restart_finished = self.cached_starts = None  # VecEnv's own resets off

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def step(self, key: jax.Array, state: Any, action: Any, params: Any = None):
        if (
            not self.resets
        ):  # a `restart_finished` or `cached_starts` env: its own step does not reset
            return self.env.step(key, state, action, params)
        params = self.env.default_params if params is None else params
        obs, state, reward, terminated, info = self.env.step_env(
            jax.random.split(key)[0], state, action, params
        )
        truncated = self.env.is_truncated(state, params)
        return obs, state, reward, terminated, truncated, {**info, "final_observation": obs}


def _keep_end(env: Any) -> Any:
    """`env` (or the env inside --hide-obs) stepping without resets; None if scanrl does not
    know how its step resets."""
    if isinstance(env, envsettings.HiddenObs):
        inner = _keep_end(env.env)
        return (
            None
            if inner is None
            else envsettings.HiddenObs(inner, env.hidden, inner.default_params)
        )
    from gymnax.environments import environment

    if getattr(type(env), "step", None) is environment.Environment.step and callable(
        getattr(env, "step_env", None)
    ):
        return _KeepEnd(env, resets=True)
    if envs.hook(env, "restart_finished") is not None or envs.hook(env, "cached_starts"):
        return _KeepEnd(env, resets=False)
    return None


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = configs.ToolParser(prog="scanrl-eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a run folder (runs/<algo>__<env>__<time>)")
    parser.add_argument(
        "--episodes", type=int, help="episodes per seed (default: the run's --eval-episodes)"
    )
    parser.add_argument(
        "--checkpoint",
        type=int,
        metavar="N",
        help="use the checkpoint at update N, not the final policy",
    )
    parser.add_argument(
        "--sample",
        action="store_true",
        help=(
            "show the sampled policy's table (default: the deterministic policy's); both policies'"
            " means are printed and saved"
        ),
    )
    parser.add_argument(
        "--env-params",
        nargs="+",
        default=[],
        metavar="KEY VALUE",
        help=(
            "change env parameters on top of the run's evaluation env, e.g. --env-params length 0.7"
        ),
    )
    parser.add_argument(
        "--key", type=int, help="draw other episodes (default: the run's last evaluation's key)"
    )
    parser.add_argument("--gif", metavar="FILE", help="render one episode of one seed to this GIF")
    parser.add_argument(
        "--seed-index", type=int, default=0, help="which seed of the run --gif shows (0-based)"
    )
    parser.add_argument(
        "--cross-play", action="store_true",
        help="an env of agents: pair every seed's policy (agent 0) with every other seed's (the"
        " other agents) and write the matrix of returns, cross_play.json and cross_play.png",
    )
    parser.add_argument(
        "--member",
        type=int,
        help=(
            "a --pbt run: evaluate this member of the population (0-based; "
            "default: each run's winner, as pbt.json names it)"
        ),
    )
    parser.add_argument(
        "--out", metavar="FILE", help="where to write the results (default: RUN_DIR/eval.json)"
    )
    args = parser.parse_args(argv)
    if args.episodes is not None and args.episodes < 1:
        parser.error(f"--episodes must be at least 1, got {args.episodes}")
    try:
        configs.check_pairs(["--env-params", *args.env_params], "--env-params")
    except ValueError as e:
        parser.error(str(e).rstrip("."))
    args.env_params = {k: float(v) for k, v in zip(args.env_params[::2], args.env_params[1::2])}
    return args


def main(argv: list[str] | None, algorithms: Any) -> dict[str, Any]:
    """`scanrl-eval`: returns what it writes to eval.json. `algorithms`: the registry of the
    runs that no copied file trained (the console script passes scanrl.algos)."""

    args = _arguments(argv)
    try:
        module, config = load_config(args.run_dir, algorithms)
        run = config.run
        devices.enable_compile_cache(
            run.compile_cache
        )  # as the run does: a second look compiles nothing
        if not 0 <= args.seed_index < run.num_seeds:
            configs.fail(
                f"--seed-index {args.seed_index} is not a seed of this run (it has {run.num_seeds}:"
                f" 0..{run.num_seeds - 1})."
            )
        env, base_params, _ = loop.environment(config)
        if args.cross_play:
            crossplay.check(env, config.env, run.num_seeds)
        train_params = envsettings.override_params(base_params, run.env_params, "--env-params")
        eval_params = envsettings.override_params(
            loop.evaluation_params(run, env, base_params), args.env_params, "--env-params"
        )
        algo = module.make_algorithm(config.config, env, train_params)
        rows, members = population_rows(args, run)
        policy, update = load_policy(
            args.run_dir,
            algo,
            run.num_seeds,
            args.checkpoint,
            rows,
            (
                tuple(sorted(f.split("=")[0].strip().replace("-", "_") for f in run.sweep))
                if run.pbt
                else ()
            ),
        )
    except ValueError as e:
        configs.fail(str(e))
    episodes = args.episodes or run.eval_episodes
    keys = evaluation_keys(run.seed, run.num_seeds, update - 1, args.key)
    # both policies, each on the keys of its evaluation in the run (the sampled one's fold in
    # SAMPLED_TAG)
    sampled_keys = jax.vmap(lambda k: jax.random.fold_in(k, loop.SAMPLED_TAG))(keys)
    returns, lengths = episode_returns(
        algo, eval_params, policy, sampled_keys if args.sample else keys, episodes, not args.sample
    )
    other, _ = episode_returns(
        algo, eval_params, policy, keys if args.sample else sampled_keys, episodes, args.sample
    )
    sampled, deterministic = (returns, other) if args.sample else (other, returns)

    rows = [
        {
            "seed": run.seed + i,
            "mean": float(r.mean()),
            "std": float(r.std()),
            "min": float(r.min()),
            "max": float(r.max()),
            "mean_length": float(l.mean()),
            "returns": r.tolist(),
        }
        for i, (r, l) in enumerate(zip(returns, lengths))
    ]
    if members is not None:
        for row, member in zip(rows, members):
            row["member"] = member
    result = {
        "run_dir": str(args.run_dir),
        "algo": configs.run_algorithm(args.run_dir, required=True),
        "env": config.env,
        **({"pbt_members": members} if members is not None else {}),
        "update": update,
        "policy": "params.npz" if args.checkpoint is None else f"checkpoints/update_{update}.npz",
        "episodes": episodes,
        "deterministic": not args.sample,
        "env_params": args.env_params,
        "key": "the run's last evaluation" if args.key is None else args.key,
        "mean_return": float(returns.mean()),
        "per_seed": rows,
        # both policies' mean over seeds and episodes, whichever the table shows
        "mean_return_deterministic": float(deterministic.mean()),
        "mean_return_sampled": float(sampled.mean()),
    }
    if members is not None:
        chosen_by = "--member" if args.member is not None else "each run's winner, pbt.json"
        console.say(
            f"PBT population: member {', '.join(map(str, members))} of the"
            f" run{'s' if len(members) > 1 else ''} ({chosen_by})"
        )
    console.say(
        f"{result['algo']} on {config.env}, policy after update {update}: {episodes} episode(s) per"
        f" seed, {'deterministic' if not args.sample else 'sampled'} actions"
        + (f", env params {args.env_params}" if args.env_params else "")
    )
    print(f"  {'seed':>4} {'mean':>10} {'std':>9} {'min':>10} {'max':>10} {'length':>8}")
    for row in rows:
        print(
            f"  {row['seed']:>4} {row['mean']:10.2f} {row['std']:9.2f} {row['min']:10.2f}"
            f" {row['max']:10.2f} {row['mean_length']:8.1f}"
        )
    print(f"  mean {result['mean_return']:10.2f}")
    shown, hidden = ("sampled", "deterministic") if args.sample else ("deterministic", "sampled")
    console.say(f"{hidden} actions instead: mean {result[f'mean_return_{hidden}']:.2f}"
                + (f" (the {shown} table above: {result['mean_return']:.2f}; they differ widely)"
                   if differ_widely(result["mean_return"], result[f"mean_return_{hidden}"])
                   else ""), indent="  ")
    out = Path(args.out) if args.out else Path(args.run_dir) / "eval.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    console.say(f"wrote {out}", indent="  ")
    if args.gif:
        result["gif"] = write_episode_gif(args, algo, config, eval_params, policy, keys)
    if args.cross_play:
        matrix = crossplay.matrix(algo, eval_params, policy, sampled_keys if args.sample else keys,
                                  episodes, not args.sample)
        played = crossplay.write(out.parent, matrix, [row["seed"] for row in rows], {
            k: result[k] for k in ("run_dir", "algo", "env", "update", "episodes", "deterministic",
                                   "key")})
        console.say(f"cross-play of {len(rows)} seeds, {episodes} games a pair: self-play (the"
                    f" diagonal) {played['self_play_mean']:.2f}, with another seed's policy"
                    f" {played['cross_play_mean']:.2f}")
        console.say(f"wrote {out.parent / 'cross_play.json'} and cross_play.png", indent="  ")
        result["cross_play"] = played
    return result


def population_rows(
    args: argparse.Namespace, run: Any
) -> tuple[list[int] | None, list[int] | None]:
    """(rows of params.npz, members): for a --pbt run, per seed the member --member names or the
    winner pbt.json names; (None, None) otherwise."""
    if not run.pbt:
        if args.member is not None:
            configs.fail(f"--member {args.member}: {args.run_dir} is not a --pbt run.")
        return None, None
    if args.member is not None:
        if not 0 <= args.member < run.pbt_population:
            configs.fail(
                f"--member {args.member} is not a member of this population (it has"
                f" {run.pbt_population}: 0..{run.pbt_population - 1})."
            )
        members = [args.member] * run.num_seeds
    else:
        path = Path(args.run_dir) / "pbt.json"
        if not path.is_file():
            configs.fail(
                f"{args.run_dir} has no pbt.json yet (a PBT run writes it when it ends); pass"
                " --member K."
            )
        members = [r["winner"] for r in json.loads(path.read_text())["runs"]]
    return [m * run.num_seeds + s for s, m in enumerate(members)], members


def _track(titles: list[str]) -> Any:
    """rich's progress bar over the frames on a terminal (a suite's renderer can take a second a
    frame: Brax's MuJoCo); nothing off one."""
    if not console.interactive():
        return iter
    from rich.progress import track

    return lambda steps: track(steps, total=len(titles), description="  drawing frames",
                               transient=True)


def write_episode_gif(
    args: argparse.Namespace, algo: Algorithm, config: Any, env_params: Any, policy: Any,
    keys: jax.Array,
) -> str | None:
    """Render one episode of seed `--seed-index` to `--gif`; None (with a sentence) if it cannot be
    drawn."""
    from scanrl.common.harness import render

    obs_shape = algo.env.observation_space(env_params).shape
    if not render.can_draw(algo.env, obs_shape):
        console.say(
            f"--gif: scanrl cannot draw {config.env} (only classic control and image/grid"
            " observations); no GIF written, the numbers above stand.", indent="  ",
        )
        return None
    try:
        return _draw_episode(args, algo, config, env_params, policy, keys)
    except KeyboardInterrupt:  # eval.json and the table above are written; the GIF is not
        Path(f"{args.gif}.part").unlink(missing_ok=True)
        print()
        console.say(f"--gif: stopped by Ctrl-C; {args.gif} not written, the numbers above stand.",
                    indent="  ")
        raise SystemExit(130) from None


def _draw_episode(
    args: argparse.Namespace, algo: Algorithm, config: Any, env_params: Any, policy: Any,
    keys: jax.Array,
) -> str | None:
    from scanrl.common.harness import render

    start = time.perf_counter()
    i = args.seed_index
    one = jax.tree.map(lambda x: x[i], policy)
    # a recording's scan runs every step it may need, so it takes the env's own limit where the
    # params' is open (JaxMARL's 1e6 would record for a minute an episode of 25 steps)
    max_steps = int(envs.hook(algo.env, "episode_limit")
                    or getattr(env_params, "max_steps_in_episode", 1000))
    states, obs, rewards = record_episode(
        algo, env_params, one, keys[i], not args.sample, max_steps
    )
    returns = np.concatenate(
        [[0.0], np.cumsum(rewards, dtype=np.float64)]
    )  # [t]: after t steps, as frame t shows
    titles = [
        f"{config.env}  seed {config.run.seed + i}  step {t}  return {r:.1f}"
        for t, r in enumerate(returns)
    ]
    try:  # a suite's own renderer may need what this machine lacks (MuJoCo: an EGL or X display)
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", UserWarning
            )  # matplotlib's "non-interactive backend" (Jumanji)
            frames = render.frames(algo.env, env_params, states, obs, titles, _track(titles))
    except (
        Exception
    ) as error:  # noqa: BLE001 - any renderer failure is reported, the evaluation stands
        first = (str(error).strip().splitlines() or [""])[0][:160]
        console.say(
            f"--gif: {config.env} cannot be drawn on this machine ({type(error).__name__}:"
            f" {first}); no GIF written, the numbers above stand.", indent="  ",
        )
        return None
    render.write_gif(args.gif, frames, 50 if config.env in render.CLASSIC else 100)
    console.say(
        f"wrote {args.gif}: {len(frames)} frames (the start, then the state after each of"
        f" {len(frames) - 1} steps), return {returns[-1]:.1f}"
        f" ({time.perf_counter() - start:.1f} s)", indent="  ",
    )
    return str(args.gif)
