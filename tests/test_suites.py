"""Environment suites beyond gymnax (common/suites/): each adapter against the suite's own
API, its time limits, auto-reset and errors, and a short learning run. A suite that is not
installed is skipped with the reason; CI installs every suite's extra."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrl.algos import ppo
from scanrl.common import envs

brax_envs = pytest.importorskip("brax.envs", reason='the Brax suite is not installed: pip install -e ".[brax]"')

BRAX_ID = "brax/inverted_pendulum"


@pytest.fixture(scope="module")
def brax_pendulum():
    env, params = envs.make(BRAX_ID)
    return env, params, brax_envs.get_environment("inverted_pendulum", backend="generalized")


def test_brax_steps_equal_brax_itself_until_the_pole_falls(brax_pendulum):
    """Same keys, same actions: the adapter's observations, rewards and terminations are
    Brax's raw environment's; the termination is `terminated`, not `truncated`, its final
    observation is Brax's, and the next observation starts a fresh episode."""
    env, params, raw = brax_pendulum
    key = jax.random.key(3)
    obs, state = env.reset(key, params)
    raw_state = jax.jit(raw.reset)(key)
    np.testing.assert_array_equal(obs, raw_state.obs)
    step, raw_step = jax.jit(env.step), jax.jit(raw.step)
    action = jnp.zeros(1)  # the pole, started off balance, falls (after 31 steps from this key)
    for t in range(200):
        step_key = jax.random.fold_in(key, t)
        obs, state, reward, terminated, truncated, info = step(step_key, state, action, params)
        raw_state = raw_step(raw_state, action)
        np.testing.assert_allclose(info["final_observation"], raw_state.obs, rtol=1e-6, atol=1e-6)
        assert float(reward) == float(raw_state.reward) and bool(terminated) == bool(raw_state.done)
        if terminated:
            break
        np.testing.assert_array_equal(obs, info["final_observation"])
    assert terminated and not truncated and 5 < t < 200
    _, reset_key = jax.random.split(step_key)  # gymnax's auto-reset key
    np.testing.assert_array_equal(obs, jax.jit(raw.reset)(reset_key).obs)
    assert int(state.time) == 0


def test_a_brax_time_limit_is_truncated_with_the_true_final_observation(brax_pendulum):
    """At max_steps_in_episode (Brax's episode_length) the cut is `truncated`, never
    `terminated`; `final_observation` is the observation the step reached (what the value
    bootstraps from), and the returned one starts a fresh episode."""
    env, params, raw = brax_pendulum
    params = envs.override_params(params, {"max_steps_in_episode": 5})
    key = jax.random.key(0)
    _, state = env.reset(key, params)
    raw_state = jax.jit(raw.reset)(key)
    step, action = jax.jit(env.step), jnp.zeros(1)
    for t in range(5):
        obs, state, _, terminated, truncated, info = step(jax.random.fold_in(key, t), state, action, params)
        raw_state = jax.jit(raw.step)(raw_state, action)
        assert bool(truncated) == (t == 4) and not terminated
    np.testing.assert_allclose(info["final_observation"], raw_state.obs, rtol=1e-6, atol=1e-6)
    _, reset_key = jax.random.split(jax.random.fold_in(key, 4))
    np.testing.assert_array_equal(obs, jax.jit(raw.reset)(reset_key).obs)
    assert not np.allclose(obs, info["final_observation"]) and int(state.time) == 0


def test_brax_spaces_and_vectorised_stepping(brax_pendulum):
    env, params, raw = brax_pendulum
    vec = envs.VecEnv(env, params, num_envs=3)
    assert not vec.discrete and vec.action_shape == (raw.action_size,) and vec.obs_shape == (raw.observation_size,)
    obs, state = vec.reset(jax.random.key(1))
    obs, state, info = jax.jit(vec.step)(jax.random.key(2), state, jnp.full((3, 1), 5.0))  # clipped to 1
    assert obs.shape == (3, raw.observation_size) and info.final_obs.shape == obs.shape
    assert envs.is_continuous(BRAX_ID) and envs.preset_name(BRAX_ID) == "continuous"


def test_suite_ids_and_their_errors(cli_error):
    """gymnax/ ids are gymnax's; an unknown suite, an unknown name and a missing suite are
    one sentence each, exit 2, before compiling, with no run folder."""
    assert envs.make("gymnax/CartPole-v1")[0].name == envs.make("CartPole-v1")[0].name
    for args, message in [
        (["--env", "brax/invertedpendulum"], "--env 'brax/invertedpendulum' is not a brax environment. Did you mean "
                                             "'brax/inverted_pendulum'"),
        (["--env", "nope/ant"], "--env 'nope/ant': unknown suite 'nope'; the suites are gymnax (bare ids), brax/NAME."),
    ]:
        code, err = cli_error(ppo.main, args)
        assert code == 2 and message in err and err.count("error:") == 1, err


def test_a_missing_suite_names_its_install_command(monkeypatch, cli_error):
    from scanrl.common import suites

    monkeypatch.setitem(suites.SUITES, "brax", ("scanrl.common.suites.brax", "brax", "brax_not_installed_here"))
    code, err = cli_error(ppo.main, ["--env", "brax/ant"])
    assert code == 2 and 'needs the brax suite: pip install "scanrl[brax]"' in err, err


@pytest.mark.slow
def test_ppo_learns_brax_inverted_pendulum(tmp_path):
    """PPO's continuous preset, 2e5 steps, one seed (about 20 s of training and 16 s of
    compile here). A random policy lets the pole fall within about 5-30 steps (return
    about 5-30); balanced for Brax's whole 1000-step episode it scores 1000. The threshold,
    500, is half the maximum: far above chance, below what the run reached (1000 by 164k
    steps when this test was written)."""
    summary = ppo.main(["--env", BRAX_ID, "--total-timesteps", "200000", "--eval-every", "16", "--log-every", "16",
                        "--out-dir", str(tmp_path)])
    assert summary["eval_return_mean"] >= 500, summary


@pytest.mark.slow
def test_sac_learns_brax_inverted_pendulum(tmp_path):
    """SAC's defaults, 2e4 steps, one seed (about 40 s here, 860 env steps/s). The same
    threshold as PPO's, for the same reasons; the run reached 1000 from about 15k steps
    when this test was written."""
    from scanrl.algos import sac

    summary = sac.main(["--env", BRAX_ID, "--total-timesteps", "20000", "--eval-every", "25", "--log-every", "25",
                        "--out-dir", str(tmp_path)])
    assert summary["eval_return_mean"] >= 500, summary
