"""The return of a uniform random policy (over the valid actions, where the env has an action
mask): one episode in each of 64 environments, as the learning tests' thresholds quote it.
With `--all-actions`, uniform over every action, the mask ignored (as a policy that reads no
mask acts at first, e.g. PureJaxRL's PPO in benchmarks/purejaxrl_ppo.py).

    python benchmarks/random_policy.py jumanji/Snake-v1 craftax/Craftax-Classic-Symbolic-v1
    python benchmarks/random_policy.py --all-actions jumanji/Snake-v1
"""

import sys

import jax
import jax.numpy as jnp

from scanrl.common import envs, suites
from scanrl.common.harness import loop

all_actions = "--all-actions" in sys.argv
for env_id in [a for a in sys.argv[1:] if a != "--all-actions"]:
    env, params = suites.make(env_id)
    vec = envs.VecEnv(env, params, 64)

    def act(obs, key, carry, mask=None):
        logits = jnp.zeros((obs.shape[0], vec.num_actions))
        open_only = mask is not None and not all_actions
        return jax.random.categorical(key, jnp.where(mask, logits, -jnp.inf) if open_only else logits), carry

    returns, lengths, outcomes = jax.jit(lambda k: loop.run_episodes(vec, act, k))(jax.random.key(0))
    over = "every action" if all_actions else "the valid actions"
    ended = "".join(f", {name} {float(value.mean()):.2f}" for name, value in outcomes.items())
    print(f"{env_id}: uniform random policy over {over}, 64 episodes: return {float(returns.mean()):.2f} "
          f"(std {float(returns.std()):.2f}), length {float(lengths.mean()):.0f}{ended}")
