"""Observations in parts: Playground's locomotion tasks observe {state, privileged_state}. The
adapter (common/suites/base.py) makes them one vector [state, privileged_state]; every
algorithm's policy reads only state, and PPO's value net reads privileged_state with
--critic-obs privileged_state (an asymmetric critic, Brax's value_obs_key). A Brax-kind raw env
of that shape stands in here for the locomotion tasks, whose models are not part of the package."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from scanrl.algos import grpo, impala, ppo, ppo_rnn, sac
from scanrl.common import envs
from scanrl.common.suites.base import RawStateEnv

STATE, PRIVILEGED = 2, 4  # the two parts' lengths


@struct.dataclass
class RawState:
    obs: dict
    reward: jax.Array
    done: jax.Array
    pos: jax.Array  # [3]: the policy observes the first two; the critic also the third and a double of it


class RawParts:
    """A point pushed in the plane: reward -|pos|^2, done when it leaves |x| <= 3."""

    action_size = 2

    def reset(self, key):
        pos = jax.random.normal(key, (3,))
        return RawState(self.observe(pos), jnp.float32(0.0), jnp.float32(0.0), pos)

    def step(self, state, action):
        pos = state.pos + 0.1 * jnp.concatenate([action, jnp.zeros(1)])
        return RawState(self.observe(pos), -jnp.sum(pos**2), (jnp.abs(pos[0]) > 3).astype(jnp.float32), pos)

    @staticmethod
    def observe(pos):
        return {"state": pos[:2], "privileged_state": jnp.concatenate([pos, 2.0 * pos[2:]])}


class PartsEnv(RawStateEnv):
    def __init__(self):
        super().__init__()
        self.env, self.suite, self.raw_name, self.episode_length = RawParts(), "test", "parts", 20


def with_privileged(obs, value):
    """obs [N, 6] with its privileged part (the last 4 features) set to `value`."""
    return obs.at[:, STATE:].set(value)


def test_the_parts_become_one_vector_and_the_policy_reads_state():
    env = PartsEnv()
    obs, _ = env.reset_env(jax.random.key(0), env.default_params)
    raw = RawParts().reset(jax.random.key(0)).obs
    np.testing.assert_array_equal(obs, jnp.concatenate([raw["state"], raw["privileged_state"]]))
    assert env.obs_shape == (STATE + PRIVILEGED,) and env.policy_obs_size == STATE
    vec_env = envs.VecEnv(env, env.default_params, 3)
    assert (vec_env.obs_dim, vec_env.policy_obs_dim) == (STATE + PRIVILEGED, STATE)
    # an env without parts: the policy reads everything
    from scanrl.common import suites
    pendulum = envs.VecEnv(*suites.make("Pendulum-v1"), 3)
    assert pendulum.policy_obs_dim == pendulum.obs_dim == 3


@pytest.mark.slow
def test_ppo_value_net_reads_the_privileged_part_only_when_asked():
    env = PartsEnv()
    vec_env = envs.VecEnv(env, env.default_params, 5)
    obs = jax.random.normal(jax.random.key(1), (5, STATE + PRIVILEGED))
    for critic_obs, critic_in in (("state", STATE), ("privileged_state", PRIVILEGED)):
        config = ppo.default_config("Pendulum-v1", recipe="none", critic_obs=critic_obs)
        params = jax.jit(lambda key: ppo.init_params(key, config, vec_env))(jax.random.key(0))
        assert params["actor"][0]["w"].shape[0] == STATE and params["critic"][0]["w"].shape[0] == critic_in
        inputs = lambda o: ppo.network_inputs(vec_env, o, critic_obs=critic_obs)  # noqa: E731
        mean = jax.jit(lambda o: ppo.policy(params, inputs(o)[0], config.activation).mode())
        # the value net reads the privileged part where there is one, else the policy's
        v = jax.jit(lambda o: ppo.value(params, [x for x in inputs(o) if x is not None][-1],
                                        config.activation))
        np.testing.assert_array_equal(mean(obs), mean(with_privileged(obs, 7.0)))
        if critic_obs == "state":
            np.testing.assert_array_equal(v(obs), v(with_privileged(obs, 7.0)))
        else:
            assert not np.allclose(v(obs), v(with_privileged(obs, 7.0)))
            np.testing.assert_array_equal(v(obs), v(obs.at[:, :STATE].set(7.0)))


@pytest.mark.parametrize("module", [ppo, impala, grpo, sac, ppo_rnn], ids=lambda m: m.__name__.rsplit(".", 1)[-1])
@pytest.mark.slow
def test_every_policy_acts_on_the_state_part_alone(module):
    """Each algorithm's first policy layer takes the state part, and (where acting needs no
    memory) its actions do not change with the privileged part."""
    env = PartsEnv()
    config = module.default_config("Pendulum-v1", recipe="none", num_envs=16)
    algo = module.make_algorithm(config, env, env.default_params)
    state = jax.jit(algo.init)(jax.random.key(0))
    policy_params = algo.policy_params(state)
    first = policy_params["params"]["encoder" if module is ppo_rnn else "actor"][0]["w"]  # [in, out]
    assert first.shape[0] == STATE, first.shape
    if module is ppo_rnn:
        return
    obs = jax.random.normal(jax.random.key(1), (16, STATE + PRIVILEGED))
    act = jax.jit(lambda o: algo.act(policy_params, o, jax.random.key(2), deterministic=True))
    np.testing.assert_array_equal(act(obs), act(with_privileged(obs, 7.0)))


@pytest.mark.slow
def test_ppo_trains_with_a_privileged_critic():
    """Two updates on the parts env with Brax's unroll minibatches: the value net learns from the
    privileged part (its first layer moves), the losses stay finite."""
    env = PartsEnv()
    config = ppo.default_config("Pendulum-v1", recipe="none", critic_obs="privileged_state", num_envs=4,
                                num_steps=10, num_minibatches=2, unroll_length=5, total_timesteps=80)
    out = jax.device_get(ppo.make_train(config, env, env.default_params)(jax.random.split(jax.random.key(0), 1)))
    for k in ("policy_loss", "value_loss", "entropy", "approx_kl"):
        assert np.isfinite(out["metrics"][k]).all(), k
    start = jax.device_get(jax.jit(ppo.make_algorithm(config, env, env.default_params).init)(
        jax.random.split(jax.random.key(0), 1)[0]).params)
    trained = out["state"].params
    assert trained["critic"][0]["w"].shape[1:] == (PRIVILEGED, config.critic_hidden[0])
    assert not np.allclose(trained["critic"][0]["w"][0], start["critic"][0]["w"])


def test_a_privileged_critic_needs_an_env_that_observes_one(cli_error):
    code, stderr = cli_error(ppo.main, ["--env", "Pendulum-v1", "--critic-obs", "privileged_state"])
    assert code == 2 and "--critic-obs privileged_state: --env Pendulum-v1 observes no privileged_state" in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
