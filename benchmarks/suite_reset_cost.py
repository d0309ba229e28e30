"""What a suite adapter's reset costs: env steps/s of `VecEnv.step` on a suite env (gymnax's
step, which computes a fresh reset on every step and keeps it where an episode ended)
against the suite's raw step with no reset at all, 200 scanned steps, medians of 3.
For raw environments of the Brax kind (common/suites/base.py).

    python benchmarks/suite_reset_cost.py brax/ant 16
"""
import sys, time, jax, jax.numpy as jnp
from scanrl.common import envs
env_id, n, T = sys.argv[1], int(sys.argv[2]), 200
env, params = envs.make(env_id)
vec = envs.VecEnv(env, params, n)
act = lambda k: jax.random.uniform(k, (n, *vec.action_shape), minval=-1, maxval=1)
@jax.jit
def adapter(key):
    obs, st = vec.reset(key)
    def body(st, k):
        obs, st, info = vec.step(k, st, act(k)); return st, info.reward.sum()
    return jax.lax.scan(body, st, jax.random.split(key, T))[1].sum()
raw = env.env
@jax.jit
def raw_only(key):
    st = jax.vmap(raw.reset)(jax.random.split(key, n))
    def body(st, k):
        st = jax.vmap(raw.step)(st, act(k)); return st, st.reward.sum()
    return jax.lax.scan(body, st, jax.random.split(key, T))[1].sum()
for name, f in (("adapter (gymnax step, reset every step)", adapter), ("raw step, no reset", raw_only)):
    f(jax.random.key(0)).block_until_ready()
    times = []
    for r in range(3):
        t = time.perf_counter(); f(jax.random.key(r + 1)).block_until_ready(); times.append(time.perf_counter() - t)
    print(f"{env_id} {n} envs: {name}: {n * T / sorted(times)[1]:,.0f} env steps/s (median of 3)", flush=True)
