"""The return of a uniform random policy (over the valid actions, where the env has an action
mask): one episode in each of 64 environments, as the learning tests' thresholds quote it.

    python benchmarks/random_policy.py jumanji/Snake-v1 craftax/Craftax-Classic-Symbolic-v1
"""

import sys

import jax
import jax.numpy as jnp

from scanrl.common import envs, suites
from scanrl.common.harness import loop

for env_id in sys.argv[1:]:
    env, params = suites.make(env_id)
    vec = envs.VecEnv(env, params, 64)

    def act(obs, key, carry, mask=None):
        logits = jnp.zeros((obs.shape[0], vec.num_actions))
        return jax.random.categorical(key, logits if mask is None else jnp.where(mask, logits, -jnp.inf)), carry

    returns, lengths = jax.jit(lambda k: loop.run_episodes(vec, act, k))(jax.random.key(0))
    print(f"{env_id}: uniform random policy, 64 episodes: return {float(returns.mean()):.2f} "
          f"(std {float(returns.std()):.2f}), length {float(lengths.mean()):.0f}")
