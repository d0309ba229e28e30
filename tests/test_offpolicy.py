"""The off-policy kit (common/offpolicy.py) that sac.py and td3.py share: the replay buffer,
its n-step windows against a plain-Python loop, and C51's projection against rlax."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrl.common import offpolicy


# --- replay buffer ------------------------------------------------------------------------------
def _step(i: int, num_envs: int = 3, obs_dim: int = 2, action_dim: int = 1) -> offpolicy.Transitions:
    """Step i of num_envs environments, every value encoding (i, env)."""
    code = i * 10.0 + jnp.arange(num_envs, dtype=jnp.float32)
    return offpolicy.Transitions(
        obs=jnp.repeat(code[:, None], obs_dim, 1),
        action=jnp.repeat(-code[:, None], action_dim, 1),
        reward=code + 0.5,
        next_obs=jnp.repeat(code[:, None] + 0.25, obs_dim, 1),
        terminated=(jnp.arange(num_envs) + i) % 2 == 0,
        truncated=(jnp.arange(num_envs) + i) % 3 == 0,
    )


def test_buffer_holds_exactly_the_latest_steps_after_wrapping_around():
    rows, inserted = 5, 13
    buffer = offpolicy.buffer_init(rows, 3, 2, 1)
    for i in range(inserted):
        buffer = offpolicy.buffer_add(buffer, _step(i))
    assert int(buffer.filled_rows) == rows and int(buffer.next_row) == inserted % rows
    for row in range(rows):
        latest = max(i for i in range(inserted) if i % rows == row)  # 10, 11, 12, 8, 9
        for name, stored, expected in zip(offpolicy.Transitions._fields, buffer.data, _step(latest)):
            np.testing.assert_array_equal(stored[row], expected, err_msg=f"{name}, row {row}")


@pytest.mark.slow
def test_buffer_samples_only_written_slots_and_covers_them_uniformly():
    buffer = offpolicy.buffer_init(10, 3, 2, 1)
    for i in range(4):
        buffer = offpolicy.buffer_add(buffer, _step(i + 1))  # codes 10..42, never 0 like the empty rows
    batch, discount = offpolicy.buffer_sample(buffer, jax.random.key(0), 24_000, 1, 0.9)
    codes = np.asarray(batch.obs[:, 0])
    written = {i * 10.0 + e for i in range(1, 5) for e in range(3)}
    assert set(np.unique(codes)) == written  # every written slot, nothing else
    counts = np.array([np.sum(codes == c) for c in sorted(written)])
    np.testing.assert_allclose(counts / len(codes), 1 / 12, rtol=0.1)
    # fields of one sampled transition stay together
    np.testing.assert_array_equal(batch.next_obs[:, 0], batch.obs[:, 0] + 0.25)
    np.testing.assert_array_equal(batch.reward, batch.obs[:, 0] + 0.5)
    assert discount == 0.9  # one step: gamma itself


@pytest.mark.slow
def test_buffer_stores_the_final_observation_and_only_true_terminations():
    """Pendulum's 200-step time limit: the step that hits it stores the observation it
    reached (not the reset one) with terminated False, so its target bootstraps, and
    truncated True, so an n-step window stops there."""
    from scanrl.common import envs, suites

    env, env_params = suites.make("Pendulum-v1")
    vec_env = envs.VecEnv(env, env_params, 2)
    obs, state = vec_env.reset(jax.random.key(0))
    buffer = offpolicy.buffer_init(256, 2, 3, 1)
    for t in range(200):
        action = jnp.full((2, 1), 0.5)
        next_obs, state, info = vec_env.step(jax.random.key(t + 1), state, action * 2.0)
        buffer = offpolicy.buffer_add(buffer, offpolicy.transitions_from_step(obs, action, info))
        previous_obs, obs = obs, next_obs
    assert bool(info.truncated.all()) and not bool(info.terminated.any())
    last = jax.tree.map(lambda x: x[199], buffer.data)
    np.testing.assert_array_equal(last.next_obs, info.final_obs)
    assert not np.allclose(last.next_obs, obs)  # obs is already the reset observation
    np.testing.assert_array_equal(last.obs, previous_obs)
    assert not bool(buffer.data.terminated[:200].any())
    assert bool(buffer.data.truncated[199].all()) and not bool(buffer.data.truncated[:199].any())
    # consecutive stored steps chain: next_obs of step t is obs of step t + 1 within the episode
    np.testing.assert_array_equal(buffer.data.next_obs[:198], buffer.data.obs[1:199])


def test_a_true_termination_is_stored_as_terminated():
    """MountainCarContinuous ends for real at the goal: that step is stored as terminated."""
    from scanrl.common import envs, suites

    env, env_params = suites.make("MountainCarContinuous-v0")
    vec_env = envs.VecEnv(env, env_params, 1)
    _, state = vec_env.reset(jax.random.key(0))
    # start just below the goal, moving right: the first full-throttle step terminates
    state = state._replace(env_state=state.env_state.replace(
        position=jnp.array([0.449]), velocity=jnp.array([0.05])))
    obs = jnp.array([[0.449, 0.05]])
    _, _, info = vec_env.step(jax.random.key(1), state, jnp.ones((1, 1)))
    step = offpolicy.transitions_from_step(obs, jnp.ones((1, 1)), info)
    assert bool(step.terminated[0]) and not bool(info.truncated[0])
    assert float(step.next_obs[0, 0]) >= 0.45  # the goal position it reached, not a reset


@pytest.mark.slow  # over 5 s in the quick tier on a 2-core CI-kind machine (2026-12-03)
def test_categorical_projection_equals_rlax():
    """Random atoms, some at and beyond the support's ends, and random probabilities, onto 11
    evenly spaced atoms on [-2, 3]: rlax's categorical_l2_project, row by row; mass kept."""
    rlax = pytest.importorskip("rlax")
    support = jnp.linspace(-2.0, 3.0, 11)
    keys = jax.random.split(jax.random.key(0), 2)
    atoms = jax.random.uniform(keys[0], (32, 7), minval=-4.0, maxval=5.0)
    atoms = atoms.at[0, :3].set(jnp.array([-2.0, 3.0, 0.5]))  # exactly on support atoms and ends
    probs = jax.nn.softmax(jax.random.normal(keys[1], (32, 7)) * 2)
    got = offpolicy.categorical_projection(atoms, probs, support)
    want = jax.vmap(rlax.categorical_l2_project, in_axes=(0, 0, None))(atoms, probs, support)
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_allclose(got.sum(-1), 1.0, rtol=1e-6)


def _episodes_buffer(rows=12, num_envs=2):
    """A buffer of `rows` steps of 2 environments, step t of env e with reward 10 e + t + 1,
    next_obs (t, e); env 0 terminates at step 3, is truncated at step 7; env 1 terminates at
    step 5. Written in order, wrapping once when rows < 12 (then the oldest are overwritten)."""
    buffer = offpolicy.buffer_init(rows, num_envs, 2, 1)
    steps = []
    for t in range(12):
        e = jnp.arange(num_envs)
        step = offpolicy.Transitions(obs=jnp.stack([jnp.full(num_envs, t - 0.5), e], 1).astype(jnp.float32),
                               action=jnp.zeros((num_envs, 1)), reward=(10.0 * e + t + 1),
                               next_obs=jnp.stack([jnp.full(num_envs, float(t)), e], 1).astype(jnp.float32),
                               terminated=(e == 0) & (t == 3) | (e == 1) & (t == 5),
                               truncated=(e == 0) & (t == 7))
        buffer = offpolicy.buffer_add(buffer, step)
        steps.append(jax.tree.map(np.asarray, step))
    return buffer, steps


def _n_step_by_hand(steps, t, e, n, gamma):
    """The window from step t of env e as a Python loop: (reward, next_obs, terminated, discount)."""
    total, k = 0.0, 0
    while True:
        s = steps[t + k]
        total += gamma**k * float(s.reward[e])
        k += 1
        if s.terminated[e] or s.truncated[e] or k == n or t + k == len(steps):
            return total, s.next_obs[e], bool(s.terminated[e]), gamma**k


@pytest.mark.parametrize("rows", [12, 9])
@pytest.mark.slow  # over 5 s in the quick tier on a 2-core CI-kind machine (2026-12-02)
def test_n_step_windows_equal_a_python_loop_and_never_cross_an_episode_end(rows):
    """Every start of both environments with n = 4 (sampled 1,000 times): the window's
    discounted rewards, its last step's next observation and end flag, and gamma ** its length,
    as a Python loop over the stored steps that stops after a termination, a truncation, n
    steps or the newest step. With 9 rows the 3 oldest steps were overwritten: none is drawn."""
    buffer, steps = _episodes_buffer(rows)
    batch, discount = jax.tree.map(np.asarray, offpolicy.buffer_sample(buffer, jax.random.key(0), 1000, 4, 0.9))
    starts = set()
    for i in range(1000):
        t, e = int(round(float(batch.obs[i, 0]) + 0.5)), int(batch.obs[i, 1])
        starts.add((t, e))
        reward, next_obs, terminated, disc = _n_step_by_hand(steps, t, e, 4, 0.9)
        np.testing.assert_allclose(batch.reward[i], reward, rtol=1e-6, err_msg=(t, e))
        np.testing.assert_array_equal(batch.next_obs[i], next_obs, err_msg=str((t, e)))
        assert bool(batch.terminated[i]) == terminated, (t, e)
        np.testing.assert_allclose(discount[i], disc, rtol=1e-6, err_msg=(t, e))
    assert starts == {(t, e) for t in range(12 - rows, 12) for e in range(2)}
    one, one_discount = offpolicy.buffer_sample(buffer, jax.random.key(0), 1000, 1, 0.9)  # n = 1: one step
    t1, e1 = np.round(np.asarray(one.obs[:, 0]) + 0.5).astype(int), np.asarray(one.obs[:, 1]).astype(int)
    np.testing.assert_array_equal(one.reward, [steps[t].reward[e] for t, e in zip(t1, e1)])
    np.testing.assert_array_equal(one.next_obs, [steps[t].next_obs[e] for t, e in zip(t1, e1)])
    np.testing.assert_allclose(one_discount, 0.9, rtol=1e-7)
