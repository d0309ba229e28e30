"""Craftax's reset strategies: env steps/s of 200 scanned steps of random actions, medians of
3, in one process, for
- `optimistic`: scanrl's adapter, `VecEnv` building ceil(N / 16) fresh worlds a step;
- `every step`: the same adapter stepped by gymnax's `Environment.step`, which builds a
  fresh world for every environment on every step and keeps it where an episode ended;
- `no reset`: Craftax's step alone (episodes that end are not restarted), the ceiling.

    python benchmarks/craftax_reset.py 16 64 256
"""

import sys
import time

import jax
from gymnax.environments import environment

from scanrl.common import envs
from scanrl.common.suites.craftax import CraftaxEnv

NAME, T = "Craftax-Classic-Symbolic-v1", 200


class EveryStep(CraftaxEnv):
    """The adapter with gymnax's own auto-resetting step."""

    restart_finished = None
    step = environment.Environment.step


def timed(f) -> float:
    f(jax.random.key(0)).block_until_ready()
    times = []
    for r in range(3):
        start = time.perf_counter()
        f(jax.random.key(r + 1)).block_until_ready()
        times.append(time.perf_counter() - start)
    return sorted(times)[1]


def scanned(vec: envs.VecEnv, n: int, reset: bool):
    @jax.jit
    def run(key):
        _, state = vec.reset(key)

        def body(state, k):
            action = jax.random.randint(k, (n,), 0, vec.num_actions)
            if reset:
                _, state, info = vec.step(k, state, action)
                return state, info.reward.sum()
            _, env_state, reward, *_ = jax.vmap(vec.env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(k, n), state.env_state, action, vec.env_params)
            return state._replace(env_state=env_state), reward.sum()  # used, so XLA keeps the steps

        return jax.lax.scan(body, state, jax.random.split(key, T))[1].sum()
    return run


for n in map(int, sys.argv[1:] or ["16", "64", "256"]):
    optimistic, params = CraftaxEnv(NAME), None
    params = optimistic.default_params
    for label, env, reset in (("optimistic", optimistic, True), ("every step", EveryStep(NAME), True),
                              ("no reset", optimistic, False)):
        vec = envs.VecEnv(env, params, n)
        seconds = timed(scanned(vec, n, reset))
        print(f"craftax/{NAME} {n} envs: {label}: {n * T / seconds:,.0f} env steps/s (median of 3)", flush=True)
