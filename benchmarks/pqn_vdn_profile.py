"""Where an update of PQN-VDN goes on MPE spread at JaxMARL's `pqn_vdn_ff_mpe.yaml` (256 games x
16 steps, 4 epochs x 16 minibatches, 2 x 256 with layer norm), 5 seeds vmapped on one CPU
device, as in RESULTS.md row 28: seconds per update of scanrl's `pqn.py --vdn` at 1 and 4
epochs (the difference over 3 is one epoch; the rest is the rollout and its targets), with and
without scanrl's CPU compiler options, without the Q-values of the final observations that
the targets read (its forward left to XLA's dead-code elimination), and the env's 16 steps
alone against JaxMARL's own env stepped the same way. Compiling is left out of every figure.

    python benchmarks/pqn_vdn_profile.py

With `--jaxmarl` (in a virtualenv with JaxMARL's baselines' packages, JAXMARL_DIR a checkout
of FLAIROx/JaxMARL, as for benchmarks/jaxmarl_side_by_side.sh) it times JaxMARL's own
`baselines/QLearning/pqn_vdn_ff.py` instead, run from its file at the same YAML with its tests
off: a whole train of 8 and of 24 updates, the difference over 16 per update.
"""

import copy
import importlib.util
import os
import sys
import time

import jax
import jax.numpy as jnp

SPREAD = "MPE_simple_spread_v3"
SEEDS, GAMES = 5, 256


def seconds(fn, *args, repeats=1):
    compiled = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    start = time.perf_counter()
    for _ in range(repeats):
        out = compiled(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / repeats


def scanrl_side():
    from scanrl.common import algorithm, cores, envs, suites
    cores.use_cpu_cores()
    from scanrl.algos import pqn

    # the recipe's env options: ids in the rows, no world state
    env, env_params = suites.make("jaxmarl/" + SPREAD, {"agent_id": "1", "world_state": "0"})

    def per_update(epochs, options, n=8):
        config = pqn.default_config("jaxmarl/" + SPREAD, recipe="published",
                                    total_timesteps=4096 * 100, num_epochs=epochs)
        algo = pqn.make_algorithm(config, env, env_params)
        states = jax.jit(jax.vmap(algo.init))(jax.random.split(jax.random.key(0), SEEDS))

        def updates(states, first):
            step = lambda s, u: jax.vmap(algo.update, in_axes=(0, None))(s, u)  # noqa: E731
            return jax.lax.scan(lambda s, u: (step(s, u)[0], None), states, first + jnp.arange(n))

        compiled = jax.jit(updates, compiler_options=options).lower(states, 0).compile()
        states, _ = compiled(states, 0)
        jax.block_until_ready(states)
        start = time.perf_counter()
        jax.block_until_ready(compiled(states, n))
        return (time.perf_counter() - start) / n

    cpu = dict(algorithm.CPU_COMPILER_OPTIONS)
    for name, options in (("scanrl's CPU options", cpu), ("XLA's defaults", {})):
        for epochs in (1, 4):
            print(f"scanrl, {name}, {epochs} epoch(s): {per_update(epochs, options):.3f} s/update",
                  flush=True)
    real = pqn.max_valid_q
    pqn.max_valid_q = lambda q, mask: jnp.zeros(q.shape[:-1])  # the final obs' forward unused
    print(f"scanrl, 1 epoch, without the final observations' Q-values: "
          f"{per_update(1, cpu):.3f} s/update", flush=True)
    pqn.max_valid_q = real

    vec_env = envs.VecEnv(env, env_params, GAMES * SEEDS)
    _, state = vec_env.reset(jax.random.key(0))

    def steps(state, key):
        def step(state, key):
            action = jax.random.randint(key, (vec_env.num_envs,), 0, vec_env.num_actions)
            obs, state, info = vec_env.step(key, state, action)
            return state, (obs, info.reward)
        return jax.lax.scan(step, state, jax.random.split(key, 16))

    print(f"scanrl's VecEnv, 16 steps of {GAMES * SEEDS} games: "
          f"{seconds(steps, state, jax.random.key(1), repeats=5):.3f} s", flush=True)
    import jaxmarl
    raw = jaxmarl.make(SPREAD)
    _, raw_state = jax.vmap(raw.reset)(jax.random.split(jax.random.key(0), GAMES * SEEDS))

    def raw_steps(state, key):
        def step(state, key):
            action = {a: jax.random.randint(key, (GAMES * SEEDS,), 0, 5) for a in raw.agents}
            obs, state, reward, _, _ = jax.vmap(raw.step)(
                jax.random.split(key, GAMES * SEEDS), state, action)
            return state, (obs, reward)
        return jax.lax.scan(step, state, jax.random.split(key, 16))

    print(f"JaxMARL's env (its own auto-resetting step, vmapped), the same 16 steps: "
          f"{seconds(raw_steps, raw_state, jax.random.key(1), repeats=5):.3f} s", flush=True)


def jaxmarl_side():
    import wandb
    from omegaconf import OmegaConf

    base = os.path.join(os.environ.get("JAXMARL_DIR", "JaxMARL"), "baselines")
    spec = importlib.util.spec_from_file_location("baseline",
                                                  os.path.join(base, "QLearning/pqn_vdn_ff.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    wandb.init(mode="disabled")
    yaml = lambda path: OmegaConf.to_container(OmegaConf.load(os.path.join(base, path)))  # noqa
    keys = jax.random.split(jax.random.PRNGKey(0), SEEDS)

    def train_seconds(updates, epochs):
        config = {**yaml("QLearning/config/config.yaml"),
                  **yaml("QLearning/config/alg/pqn_vdn_ff_mpe.yaml"),
                  "TEST_DURING_TRAINING": False, "TOTAL_TIMESTEPS": 4096 * updates,
                  "NUM_SEEDS": SEEDS, "NUM_EPOCHS": epochs, "WANDB_MODE": "disabled"}
        env, _ = module.env_from_config(copy.deepcopy(config))
        return seconds(jax.vmap(module.make_train(config, env)), keys)

    for epochs in (1, 4):
        per = (train_seconds(24, epochs) - train_seconds(8, epochs)) / 16
        print(f"JaxMARL's pqn_vdn_ff.py, {epochs} epoch(s): {per:.3f} s/update", flush=True)


if __name__ == "__main__":
    jaxmarl_side() if "--jaxmarl" in sys.argv else scanrl_side()
