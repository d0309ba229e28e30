"""scanrl-eval --gif's episode and its frames: the episode's end is drawn, captions match pictures."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrl.algos import ppo
from scanrl.common import suites
from scanrl.common.harness import evaluate, render


@pytest.mark.slow
def test_a_recorded_episode_ends_on_its_terminal_state():
    """An L-step episode is L + 1 states (the reset state, then the state after each step),
    their L + 1 observations and L rewards; the last state is the episode's end (CartPole: the
    pole fallen or the cart out), which gymnax's auto-resetting step would have replaced."""
    env, params = suites.make("CartPole-v1")
    algo = ppo.make_algorithm(ppo.default_config("CartPole-v1"), env, params)
    policy = algo.policy_params(algo.init(jax.random.key(0)))  # untrained: falls within tens of steps
    states, obs, rewards = evaluate.record_episode(algo, params, policy, jax.random.key(1), max_steps=500)
    length = len(rewards)
    assert 1 < length < 500 and obs.shape == (length + 1, 4) and states.x.shape == (length + 1,)
    at = lambda t: jax.tree.map(lambda x: x[t], states)  # noqa: E731
    assert bool(env.is_terminal(at(-1), params)) and not bool(env.is_terminal(at(-2), params))
    np.testing.assert_array_equal(obs, jax.vmap(lambda s: env.get_obs(s, params))(states))
    np.testing.assert_array_equal(rewards, 1.0)


@pytest.mark.slow
def test_a_traceable_renderer_draws_a_whole_episode_in_one_call_as_frame_by_frame():
    """Navix's picture is JAX: `frames` draws all states in one jitted, vmapped call; each frame
    is the one `frame` draws from that state alone, under its own title."""
    pytest.importorskip("navix", reason='the navix suite is not installed: pip install -e ".[navix]"')
    env, params = suites.make("navix/Navix-DoorKey-5x5-v0")
    obs, state = env.reset(jax.random.key(0), params)
    steps = [(obs, state)]
    for action in (0, 1, 2, 2):  # turn left, right, forward, forward: the agent moves
        obs, state, *_ = env.step(jax.random.key(1), state, action, params)
        steps.append((obs, state))
    obs, states = jax.device_get(jax.tree.map(lambda *x: jnp.stack(x), *steps))  # as record_episode gives them
    titles = [f"step {t}" for t in range(len(steps))]
    drawn = render.frames(env, params, states, obs, titles)
    for t, (o, s) in enumerate(jax.device_get(steps)):
        np.testing.assert_array_equal(np.asarray(drawn[t]), np.asarray(render.frame(env, params, s, o, titles[t])))
    assert len({np.asarray(f).tobytes() for f in drawn}) == len(steps)
