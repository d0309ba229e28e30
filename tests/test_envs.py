"""common.envs: truncation-aware stepping, episode statistics, running statistics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrl.common import envs, suites
from scanrl.common.nets import mlp_apply, mlp_init, orthogonal
from scanrl.common.harness import envsettings


def test_unknown_env_suggests_close_names():
    with pytest.raises(ValueError, match="Did you mean 'CartPole-v1'"):
        suites.check_env_id("CartPol-v1")


def test_override_params_checks_names_and_keeps_int_types():
    _, params = suites.make("CartPole-v1")
    changed = envsettings.override_params(params, {"length": 0.7, "max_steps_in_episode": 50.0})
    assert changed.length == 0.7 and changed.max_steps_in_episode == 50
    assert isinstance(changed.max_steps_in_episode, int)
    with pytest.raises(ValueError, match="Unknown environment parameter"):
        envsettings.override_params(params, {"lenght": 0.7})


@pytest.mark.slow
def test_time_limit_is_truncation_with_final_observation():
    """Pendulum never terminates: at its 200-step limit it is truncated, and final_obs is
    the observation reached (not the reset one), which the next obs is not."""
    env, params = suites.make("Pendulum-v1")
    vec = envs.VecEnv(env, params, 3)
    obs, state = vec.reset(jax.random.key(0))

    def step(carry, key):
        obs, state = carry
        next_obs, state, info = vec.step(key, state, jnp.full((3, 1), 5.0))  # beyond the bound: clipped
        return (next_obs, state), (obs, next_obs, info)

    _, (obs_seq, next_seq, info) = jax.lax.scan(step, (obs, state), jax.random.split(jax.random.key(1), 201))
    assert not info.terminated.any()
    assert info.truncated[199].all() and not info.truncated[:199].any()
    np.testing.assert_allclose(info.final_obs[:199], next_seq[:199])  # no reset: identical
    assert not np.allclose(info.final_obs[199], next_seq[199])  # reset obs differs from final
    np.testing.assert_array_equal(info.episode_length[199], 200)
    np.testing.assert_allclose(info.episode_return[199], info.reward[:200].sum(0), rtol=1e-5)
    assert (info.episode_return[:199] == 0).all()
    m = envs.episode_metrics(info)
    assert int(m["episodes"]) == 3
    assert np.isnan(envs.episode_metrics(jax.tree.map(lambda x: x[:10], info))["episode_return"])


def test_cartpole_termination_is_not_truncation():
    env, params = suites.make("CartPole-v1")
    vec = envs.VecEnv(env, params, 4)
    obs, state = vec.reset(jax.random.key(0))

    def step(carry, key):
        next_obs, state, info = vec.step(key, carry, jnp.zeros(4, jnp.int32))  # always push left: falls
        return state, info

    _, info = jax.lax.scan(step, state, jax.random.split(jax.random.key(1), 40))
    assert info.terminated.any() and not info.truncated.any()


def test_running_stats_match_numpy_over_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(50, 3)) for _ in range(4)]
    stats = envs.init_stats((3,))
    for b in batches:
        stats = envs.update_stats(stats, jnp.asarray(b, jnp.float32))
    data = np.concatenate(batches)
    np.testing.assert_allclose(stats.mean, data.mean(0), rtol=1e-3)
    np.testing.assert_allclose(stats.var, data.var(0), rtol=1e-3)
    z = envs.normalize(stats, jnp.asarray(data, jnp.float32))
    np.testing.assert_allclose(z.mean(0), 0.0, atol=1e-3)
    np.testing.assert_allclose(z.std(0), 1.0, atol=1e-3)


@pytest.mark.parametrize("shape", [(4, 64), (64, 64), (64, 2)])
def test_orthogonal_init_is_orthogonal_with_gain(shape):
    w = orthogonal(jax.random.key(3), shape, gain=2.0)
    small = min(shape)
    gram = w.T @ w if shape[0] >= shape[1] else w @ w.T
    np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-4)


def test_mlp_shapes_and_output_gain():
    params = mlp_init(jax.random.key(0), (4, 32, 32, 3), output_gain=0.01)
    assert mlp_apply(params, jnp.ones((7, 4))).shape == (7, 3)
    assert float(jnp.abs(params[-1]["w"]).max()) < 0.02


@pytest.mark.slow
def test_importing_scanrl_changes_no_jax_setting_until_asked(python_process):
    """Importing every algorithm and the kit starts no JAX backend and sets no device count;
    `devices.use_cpu_cores()` then gives one CPU device per core. gymnax's rendering imports
    (seaborn, matplotlib.pyplot) are the real modules."""
    proc = python_process(["-c", """
import jax
from jax._src import xla_bridge
from scanrl.algos import grpo, impala, ppo, ppo_rnn, sac
from scanrl.common import envs, suites
print(bool(xla_bridge._backends), jax.config.jax_num_cpu_devices)
from scanrl.common.harness import devices
devices.use_cpu_cores()
suites.make("Pong-misc")
print(jax.local_device_count() == devices.cpu_count())
from gymnax.environments.misc import pong
import seaborn
print(callable(pong.plt.subplots), type(seaborn).__name__, hasattr(seaborn, "heatmap"))
"""])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:3] == ["False -1", "True", "True module True"]


@pytest.mark.slow
def test_default_config_then_make_train_keeps_one_cpu_device_per_core(python_process):
    """The Python API's order (docs/api.md): building a Config on a gymnax id starts no JAX
    backend, for every algorithm. A suite's id imports its adapter, and so gymnax, whose import
    computes arrays: JAX then starts with one CPU device per core, first. `make_train` gets one
    CPU device per core either way, and asking it for more devices than JAX has is one sentence
    naming the flag."""
    proc = python_process(["-c", """
import jax
from jax._src import xla_bridge
from scanrl.algos import grpo, impala, ppo, ppo_rnn, pqn, sac
from scanrl.common.harness import devices
algos = (grpo, impala, ppo, ppo_rnn, pqn, sac)
configs = {(m.__name__, e): m.default_config(e) for m in algos for e in ["CartPole-v1", "Pendulum-v1", "Breakout-MinAtar"]}
print(bool(xla_bridge._backends), configs["scanrl.algos.ppo", "Pendulum-v1"].gamma,
      configs["scanrl.algos.ppo", "CartPole-v1"].gamma)
suite_ids = ["navix/Navix-DoorKey-5x5-v0", "brax/ant", "playground/CheetahRun", "craftax/Craftax-Classic-Symbolic-v1",
             "xminigrid/MiniGrid-Empty-5x5"]
configs = {(m.__name__, e): m.default_config(e) for m in algos for e in suite_ids}
print(jax.local_device_count() == devices.cpu_count(), configs["scanrl.algos.ppo", "brax/ant"].gamma)
config = ppo.default_config("CartPole-v1")
print(jax.local_device_count() == devices.cpu_count(), ppo.make_train(config) is not None)
try:
    ppo.make_train(ppo.default_config("CartPole-v1"), num_devices=devices.cpu_count() + 1)
except ValueError as error:
    print(error)
"""])
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "False 0.95 0.99"  # no backend, and Pendulum still got the continuous preset
    assert lines[1] == "True 0.97"  # a device per core, and brax/ant got its recipe's discount
    assert lines[2] == "True True"
    assert lines[3].startswith("--num-devices ") and "more devices than the" in lines[3], lines[3:]
    assert "use fewer cores" not in proc.stderr


@pytest.mark.slow
def test_building_a_config_leaves_no_tracer_in_gymnax(python_process):
    """gymnax's modules compute arrays when imported (FrozenLake's directions). An id's action
    type was once read by building the env inside a trace, which imported gymnax there and left
    a tracer in FrozenLake's module: every FrozenLake step after it failed."""
    proc = python_process(["-c", """
import jax
from scanrl.algos import ppo
from scanrl.common import suites
ppo.default_config("CartPole-v1")
ppo.default_config("navix/Navix-DoorKey-5x5-v0")
env, params = suites.make("FrozenLake-misc")
import gymnax.environments.misc.frozen_lake as lake
obs, state = env.reset(jax.random.key(0), params)
obs, state, reward, terminated, truncated, info = env.step(jax.random.key(1), state, 1, params)
print(any(isinstance(v, jax.core.Tracer) for v in vars(lake).values()), obs.shape == ())
"""])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[0] == "False True"


@pytest.mark.parametrize("call", ["devices.use_cpu_cores()", "ppo.make_train(ppo.default_config('CartPole-v1'))"])
@pytest.mark.slow
def test_use_cpu_cores_and_make_train_warn_once_jax_has_started_with_fewer_devices(python_process, call):
    proc = python_process(["-c", f"""
import jax, jax.numpy as jnp
jnp.zeros(3).block_until_ready()  # the backend starts with JAX's default: one CPU device
from scanrl.algos import ppo
from scanrl.common.harness import devices
{call}
print(jax.local_device_count(), devices.cpu_count())
"""])
    assert proc.returncode == 0, proc.stderr[-2000:]
    count, cores = map(int, proc.stdout.split())
    assert count == 1
    warning = "call scanrl.common.cores.use_cpu_cores() before computing anything"
    assert (warning in proc.stderr) == (cores > 1), proc.stderr[-2000:]


def test_is_continuous_answers_as_the_built_env_does_for_every_gymnax_env():
    """`suites.is_continuous` reads gymnax ids from its table (no JAX backend); its answer is the
    built env's action space for every registered env (MNISTBandit needs a download: left out)."""
    import gymnax

    ids = [e for e in gymnax.registered_envs if e != "MNISTBandit-bsuite"]
    assert len(ids) > 20
    answers = {e: suites.is_continuous(e) for e in ids}
    assert answers == {e: not envs.is_discrete(*suites.make(e)) for e in ids}
    assert answers["Pendulum-v1"] and answers["MountainCarContinuous-v0"] and not answers["CartPole-v1"]
