"""What a suite's resets cost: env steps/s of `VecEnv.step` (S seeds x N environments, a random
action each step, 256 scanned steps, medians of 3) against the suite's raw step with no reset
at all. For raw environments of the Brax kind (common/suites/base.py: Brax, Playground). Run it
with another tree's Python to measure that tree's VecEnv. Optional: the scanned steps (256)
and the repeats (3), for a VecEnv that resets on every step, which is slow.

    python benchmarks/suite_reset_cost.py playground/CheetahRun 16 8
"""
import sys, time, jax, jax.numpy as jnp
from scanrl.common import envs, suites
env_id, n = sys.argv[1], int(sys.argv[2])
seeds, T, R = ([int(a) for a in sys.argv[3:6]] + [1, 256, 3][len(sys.argv[3:6]):])
env, params = suites.make(env_id)
vec = envs.VecEnv(env, params, n)
act = lambda k: jax.random.uniform(k, (n, *vec.action_shape), minval=-1, maxval=1)
def adapter_one(key):
    obs, st = vec.reset(key)
    def body(st, k):
        obs, st, info = vec.step(k, st, act(k)); return st, info.reward.sum()
    return jax.lax.scan(body, st, jax.random.split(key, T))[1].sum()
raw = env.env
def raw_one(key):
    st = jax.vmap(raw.reset)(jax.random.split(key, n))
    def body(st, k):
        st = jax.vmap(raw.step)(st, act(k)); return st, st.reward.sum()
    return jax.lax.scan(body, st, jax.random.split(key, T))[1].sum()
for name, one in (("VecEnv.step", adapter_one), ("raw step, no reset", raw_one)):
    f = jax.jit(lambda key: jax.vmap(one)(jax.random.split(key, seeds)))
    f(jax.random.key(0)).block_until_ready()
    times = []
    for r in range(R):
        t = time.perf_counter(); f(jax.random.key(r + 1)).block_until_ready(); times.append(time.perf_counter() - t)
    print(f"{env_id} {seeds} x {n} envs: {name}: {seeds * n * T / sorted(times)[R // 2]:,.0f} env steps/s (median of {R})",
          flush=True)
