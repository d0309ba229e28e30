"""GAE: against a plain-Python loop, and the termination / truncation semantics."""

import numpy as np
import pytest

from scanrl.common.onpolicy import gae


def reference_gae(rewards, values, next_values, terminated, done, gamma, lam):
    """The textbook recursion, one environment and one step at a time."""
    T, N = rewards.shape
    advantages = np.zeros((T, N))
    for n in range(N):
        running = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminated[t, n] else gamma * next_values[t, n]
            delta = rewards[t, n] + bootstrap - values[t, n]
            running = delta + (0.0 if done[t, n] else gamma * lam * running)
            advantages[t, n] = running
    return advantages, advantages + values


def random_rollout(rng, T=37, N=5):
    rewards = rng.normal(size=(T, N))
    values = rng.normal(size=(T, N))
    next_values = rng.normal(size=(T, N))
    terminated = rng.random((T, N)) < 0.1
    truncated = (rng.random((T, N)) < 0.1) & ~terminated
    return rewards, values, next_values, terminated, terminated | truncated


@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 1.0), (0.97, 0.0)])
def test_gae_matches_python_loop(gamma, lam):
    rng = np.random.default_rng(0)
    r, v, nv, term, done = random_rollout(rng)
    assert term.any() and (done & ~term).any()  # both kinds of episode end occur
    adv, targets = gae(*(np.float32(x) for x in (r, v, nv)), term, done, gamma, lam)
    ref_adv, ref_targets = reference_gae(r, v, nv, term, done, gamma, lam)
    np.testing.assert_allclose(adv, ref_adv, atol=1e-4)
    np.testing.assert_allclose(targets, ref_targets, atol=1e-4)


def test_truncation_bootstraps_termination_does_not():
    gamma, lam = 0.9, 0.95
    r = np.ones((1, 2), np.float32)
    v = np.full((1, 2), 0.5, np.float32)
    nv = np.full((1, 2), 10.0, np.float32)  # V(final observation)
    terminated = np.array([[True, False]])
    done = np.array([[True, True]])  # env 0 terminated, env 1 truncated
    adv, _ = gae(r, v, nv, terminated, done, gamma, lam)
    assert adv[0, 0] == pytest.approx(1.0 - 0.5)
    assert adv[0, 1] == pytest.approx(1.0 + gamma * 10.0 - 0.5)


@pytest.mark.parametrize("end", ["terminated", "truncated"])
def test_nothing_leaks_across_an_episode_boundary(end):
    """Changing anything after a step that ends an episode leaves that step and earlier untouched."""
    rng = np.random.default_rng(1)
    T, N, t_end = 12, 3, 5
    r, v, nv = (np.float32(rng.normal(size=(T, N))) for _ in range(3))
    terminated = np.zeros((T, N), bool)
    done = np.zeros((T, N), bool)
    done[t_end] = True
    if end == "terminated":
        terminated[t_end] = True
    before, _ = gae(r, v, nv, terminated, done, 0.99, 0.95)
    r2, v2, nv2 = r.copy(), v.copy(), nv.copy()
    r2[t_end + 1 :] += 100.0
    v2[t_end + 1 :] -= 50.0
    nv2[t_end + 1 :] += 7.0
    after, _ = gae(r2, v2, nv2, terminated, done, 0.99, 0.95)
    np.testing.assert_allclose(after[: t_end + 1], before[: t_end + 1], atol=1e-5)
    assert not np.allclose(after[t_end + 1 :], before[t_end + 1 :])


def test_lambda_one_no_dones_is_discounted_return_plus_bootstrap():
    rng = np.random.default_rng(2)
    T, gamma = 10, 0.95
    r = np.float32(rng.normal(size=(T, 1)))
    v = np.float32(rng.normal(size=(T, 1)))
    nv = np.float32(rng.normal(size=(T, 1)))
    nv[:-1] = v[1:]  # without episode ends, s'_t is s_{t+1}
    no = np.zeros((T, 1), bool)
    _, targets = gae(r, v, nv, no, no, gamma, 1.0)
    expected = sum(gamma**k * r[k, 0] for k in range(T)) + gamma**T * nv[-1, 0]
    assert targets[0, 0] == pytest.approx(expected, rel=1e-4)
