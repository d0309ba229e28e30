"""The return of a uniform random policy, for the reference points in points.json: one
episode in each of N environments (default 1,000), actions drawn uniformly over the valid
actions of a discrete env (as benchmarks/random_policy.py) or uniformly within the bounds of
a continuous (Box) one, which benchmarks/random_policy.py does not handle.

    python benchmarks/reference/random_returns.py CartPole-v1 Pendulum-v1 brax/inverted_pendulum
    python benchmarks/reference/random_returns.py --episodes 4000 Catch-bsuite
"""

import argparse

import jax
import jax.numpy as jnp

from scanrl.common import envs, suites
from scanrl.common.harness import loop


def random_returns(env_id: str, episodes: int, seed: int = 0) -> tuple[jax.Array, jax.Array]:
    """Return [episodes] and length [episodes] of the uniform random policy on env_id."""
    env, params = suites.make(env_id)
    vec = envs.VecEnv(env, params, episodes)

    def act(obs, key, carry, mask=None):
        if vec.discrete:
            logits = jnp.zeros((obs.shape[0], vec.num_actions))
            return jax.random.categorical(key, logits if mask is None else jnp.where(mask, logits, -jnp.inf)), carry
        u = jax.random.uniform(key, (obs.shape[0], *vec.action_shape))
        return vec.action_low + u * (vec.action_high - vec.action_low), carry

    return jax.jit(lambda k: loop.run_episodes(vec, act, k)[:2])(jax.random.key(seed))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("env_ids", nargs="+", metavar="ENV")
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for env_id in args.env_ids:
        returns, lengths = random_returns(env_id, args.episodes, args.seed)
        sem = float(returns.std()) / args.episodes ** 0.5
        print(f"{env_id}: uniform random policy, {args.episodes} episodes: return {float(returns.mean()):.2f} "
              f"(std {float(returns.std()):.2f}, standard error {sem:.2f}), length {float(lengths.mean()):.0f}")
