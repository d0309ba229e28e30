"""PPO: loss pieces by hand, reproducibility across seeds, and learning."""

import functools
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrl.algos import ppo
from scanrl.common.nets import SQUASH, to_bounds
from scanrl.common.harness.run import train_and_write
from conftest import check_run_tools
from scanrl.common.harness import devices, loop
from scanrl.common.harness.runconfig import compose


# --- loss pieces against hand computations ----------------------------------------------------
RATIO = jnp.array([0.5, 1.5, 1.1, 3.0])
ADV = jnp.array([1.0, 1.0, -2.0, -1.0])


def test_clipped_surrogate_by_hand():
    # min(rA, clip(r)A) per sample: 0.5, 1.2, -2.2, -3.0
    assert float(ppo.clipped_surrogate_loss(RATIO, ADV, 0.2)) == pytest.approx(-(0.5 + 1.2 - 2.2 - 3.0) / 4)


def test_dual_clip_by_hand():
    # negative advantages are bounded below by c * A = 2 * A: -2.2 stays, -3.0 becomes -2.0
    loss = ppo.clipped_surrogate_loss(RATIO, ADV, 0.2, dual_clip_param=2.0)
    assert float(loss) == pytest.approx(-(0.5 + 1.2 - 2.2 - 2.0) / 4)


def test_value_loss_by_hand():
    values, old, targets = jnp.array([1.0, 2.0]), jnp.array([0.5, 2.0]), jnp.array([2.0, 0.0])
    assert float(ppo.value_loss(values, old, targets)) == pytest.approx(0.5 * (1.0 + 4.0) / 2)
    # clipped value for sample 0: 0.5 + 0.2 = 0.7, (0.7 - 2)^2 = 1.69 > 1.0 is taken
    assert float(ppo.value_loss(values, old, targets, 0.2)) == pytest.approx(0.5 * (1.69 + 4.0) / 2)


def test_approx_kl_by_hand():
    log_ratio = jnp.log(jnp.array([2.0, 0.5]))
    expected = ((2 - 1 - math.log(2)) + (0.5 - 1 + math.log(2))) / 2
    assert float(ppo.approx_kl(log_ratio)) == pytest.approx(expected)
    assert float(ppo.approx_kl(jnp.zeros(3))) == 0.0


def _zero_params(params):
    return jax.tree.map(jnp.zeros_like, params)


def test_entropy_by_hand():
    obs = jnp.ones((3, 4))
    discrete = _zero_params({"actor": [{"w": jnp.ones((4, 5)), "b": jnp.ones(5)}]})
    np.testing.assert_allclose(ppo.policy(discrete, obs, "tanh").entropy(), math.log(5), rtol=1e-6)
    gaussian = {**discrete, "log_std": jnp.log(jnp.array([0.5, 1.0, 2.0, 1.0, 1.0]))}
    per_dim = 0.5 * math.log(2 * math.pi * math.e)
    np.testing.assert_allclose(
        ppo.policy(gaussian, obs, "tanh").entropy(), 5 * per_dim + math.log(0.5) + math.log(2.0), rtol=1e-6
    )


def test_ppo_loss_combines_the_pieces_by_hand():
    """Uniform 2-action policy, zero critic, ratio 1: every term is known in closed form."""
    config = ppo.Config(normalize_advantages=False, ent_coef=0.01, vf_coef=0.5)
    params = _zero_params(
        {
            "actor": [{"w": jnp.ones((4, 2)), "b": jnp.ones(2)}],
            "critic": [{"w": jnp.ones((4, 1)), "b": jnp.ones(1)}],
        }
    )
    batch = ppo.Batch(
        obs=jnp.ones((2, 4)),
        action=jnp.array([0, 1]),
        log_prob=jnp.full(2, -math.log(2)),
        value=jnp.zeros(2),
        advantage=jnp.array([1.0, 3.0]),
        target=jnp.array([1.0, -1.0]),
    )
    total, stats = ppo.ppo_loss(params, batch, config)
    assert float(stats["policy_loss"]) == pytest.approx(-2.0)
    assert float(stats["value_loss"]) == pytest.approx(0.5)
    assert float(stats["entropy"]) == pytest.approx(math.log(2))
    assert float(stats["approx_kl"]) == pytest.approx(0.0, abs=1e-7)
    assert float(total) == pytest.approx(-2.0 + 0.5 * 0.5 - 0.01 * math.log(2), rel=1e-6)


# --- tanh-squashed normal (--action-dist tanh_normal) ---------------------------------------
def _tanh_params(loc, raw_scale, obs_dim=3):
    """A one-layer actor whose output is [loc, raw scale] whatever the observation."""
    bias = jnp.concatenate([jnp.asarray(loc, jnp.float32), jnp.asarray(raw_scale, jnp.float32)])
    return {"actor": [{"w": jnp.zeros((obs_dim, bias.shape[0])), "b": bias}]}


def _tanh_policy(params, obs):
    return ppo.policy(params, obs, "tanh", action_dist="tanh_normal", min_std=0.001)


@pytest.mark.slow
def test_tanh_normal_log_prob_by_hand_up_to_saturation():
    """log pi(tanh(u)) = log N(u; loc, scale) - sum log(1 - tanh(u)^2), scale = softplus(raw) + min_std,
    against float64 with log(1 - tanh(u)^2) = -2 log cosh(u); distrax's Transformed (which inverts
    tanh with atanh) agrees where tanh(u) is not rounded to +-1."""
    loc, raw = np.array([0.3, -1.0]), np.array([0.0, -2.0])
    scale = np.log1p(np.exp(raw)) + 0.001
    u = np.array([[0.0, 0.0], [0.5, -2.0], [3.0, -4.0], [9.0, -12.0], [15.0, -20.0]])  # the last rows: tanh(u) = +-1 in float32
    dist = _tanh_policy(_tanh_params(loc, raw), jnp.ones((len(u), 3)))
    np.testing.assert_allclose(dist.scale_diag[0], scale, rtol=1e-6)
    log_prob = dist.log_prob(jnp.asarray(u, jnp.float32)) - SQUASH.forward_log_det_jacobian(jnp.asarray(u, jnp.float32))
    gaussian = (-0.5 * ((u - loc) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)).sum(-1)
    expected = gaussian + (2 * np.log(np.cosh(u))).sum(-1)
    assert np.isfinite(log_prob).all()
    np.testing.assert_allclose(log_prob, expected, rtol=1e-5)
    import distrax
    squashed = distrax.Transformed(dist, SQUASH)
    np.testing.assert_allclose(squashed.log_prob(jnp.tanh(jnp.asarray(u, jnp.float32)))[:3], log_prob[:3], rtol=1e-4)
    # the smallest std is min_std
    tiny = _tanh_policy(_tanh_params(loc, [-100.0, -100.0]), jnp.ones((1, 3)))
    np.testing.assert_allclose(tiny.scale_diag, 0.001, rtol=1e-6)


@pytest.mark.slow
def test_tanh_normal_entropy_estimate():
    """H(tanh(u)) = H(u) + E[sum log(1 - tanh(u)^2)]: the one-sample estimate averaged over many
    samples meets the expectation by quadrature; it is below the unsquashed normal's entropy,
    very negative for a tiny std, and its gradient pulls a saturating mean back towards 0."""
    n = 200_000
    noise = jax.random.normal(jax.random.key(0), (n, 1))
    obs = jnp.ones((n, 3))
    # init: loc 0, raw scale 0 (the actor's output layer starts near 0): scale = softplus(0) + min_std
    dist = _tanh_policy(_tanh_params([0.0], [0.0]), obs)
    samples = np.asarray(ppo.entropy_of(dist, noise), np.float64)
    scale = math.log(2.0) + 0.001
    grid = np.linspace(-12 * scale, 12 * scale, 200_001)
    density = np.exp(-0.5 * (grid / scale) ** 2) / (scale * math.sqrt(2 * math.pi))
    gaussian_entropy = 0.5 * math.log(2 * math.pi * math.e) + math.log(scale)
    expected = gaussian_entropy + np.sum(density * -2 * np.log(np.cosh(grid))) * (grid[1] - grid[0])
    # the estimate's mean over n samples has standard error std / sqrt(n) (about 1e-3 here); 5 of them
    # leave a false failure at odds of about 1 in 10^6, and the quadrature's own error is far smaller
    tolerance = 5 * samples.std() / math.sqrt(n)
    assert abs(samples.mean() - expected) < tolerance, (samples.mean(), expected, tolerance)
    assert expected < gaussian_entropy - 0.2  # the Jacobian term matters at the init std
    # a tiny std: the normal's entropy 0.5 log(2 pi e) + log(0.001) = -5.49, tanh adds nearly nothing at 0
    tiny = ppo.entropy_of(_tanh_policy(_tanh_params([0.0], [-100.0]), obs[:100]), noise[:100])
    np.testing.assert_allclose(tiny, 0.5 * math.log(2 * math.pi * math.e) + math.log(0.001), atol=1e-3)
    # saturated at tanh(5): another 2 log cosh(5) = 8.6 lower; the gradient in loc points back to 0
    def mean_entropy(loc):
        return ppo.entropy_of(_tanh_policy(_tanh_params(loc, [-100.0]), obs[:100]), noise[:100]).mean()
    saturated = float(mean_entropy(jnp.array([5.0])))
    assert saturated == pytest.approx(float(tiny.mean()) - 2 * math.log(math.cosh(5.0)), abs=1e-2)
    assert float(jax.grad(mean_entropy)(jnp.array([5.0]))[0]) < -1.0
    assert float(jax.grad(mean_entropy)(jnp.array([-5.0]))[0]) > 1.0


@pytest.mark.slow
def test_tanh_normal_actions_stay_in_the_bounds():
    low, high = jnp.array([-1.0, 0.0]), jnp.array([3.0, 0.5])
    u = jnp.array([[-1e30, -1e30], [-20.0, 20.0], [0.0, 0.0], [1e30, 1e30], [-jnp.inf, jnp.inf]])
    a = to_bounds(u, low, high)
    assert ((a >= low) & (a <= high)).all()
    np.testing.assert_array_equal(a[0], low)
    np.testing.assert_array_equal(a[3], high)
    np.testing.assert_allclose(a[2], (low + high) / 2)
    # through the algorithm's act (what evaluation gives the env), for a huge loc and scale
    config = compose(ppo, "Pendulum-v1", action_dist="tanh_normal", num_envs=4, num_steps=8, num_minibatches=1,
                     total_timesteps=32)
    algorithm = ppo.make_algorithm(config)
    state = jax.jit(algorithm.init)(jax.random.key(0))
    act = jax.jit(algorithm.act, static_argnums=3)
    params = {**state.params, "actor": jax.tree.map(lambda x: x * 0, state.params["actor"])}
    for loc, raw in ((1e4, 1e4), (-1e4, 1e4), (0.0, 1e4)):
        params["actor"][-1]["b"] = jnp.array([loc, raw])
        policy_params = algorithm.policy_params(state._replace(params=params))
        obs = jnp.ones((64, 3))
        for deterministic in (False, True):
            actions = act(policy_params, obs, jax.random.key(1), deterministic)
            assert actions.shape == (64, 1)
            assert bool(((actions >= -2.0) & (actions <= 2.0)).all()), actions


@pytest.mark.slow
def test_tanh_normal_ratio_is_one_on_its_own_rollout():
    """One update of 1 epoch x 1 minibatch: its loss stats are those at the rollout's own parameters,
    and with clip_eps 1e-6 clip_fraction counts every ratio further than 1e-6 from 1. Also with the
    mean deep in saturation (tanh(30) = 1 in float32), where a ratio taken through atanh(a) breaks;
    there the output layer's weights are zeroed, so that loc is exactly 30 in the rollout and the
    loss alike (near 30 one float32 ulp of loc, from matmuls of other shapes, moves log N(u) by 1e-5)."""
    config = compose(ppo, "Pendulum-v1", action_dist="tanh_normal", num_envs=4, num_steps=16, num_epochs=1,
                     num_minibatches=1, clip_eps=1e-6, total_timesteps=64)
    algorithm = ppo.make_algorithm(config)
    update = jax.jit(algorithm.update)
    state = jax.jit(algorithm.init)(jax.random.key(0))
    saturated = jax.tree.map(lambda x: x, state.params)
    saturated["actor"][-1] = {"w": jnp.zeros_like(saturated["actor"][-1]["w"]), "b": jnp.array([30.0, -3.0])}
    for params in (state.params, saturated):
        _, metrics = update(state._replace(params=params), 0)
        assert float(metrics["clip_fraction"]) == 0.0
        assert float(metrics["approx_kl"]) < 1e-10
        assert np.isfinite(float(metrics["entropy"])) and np.isfinite(float(metrics["policy_loss"]))


def test_tanh_normal_on_discrete_actions_exits_2_before_compiling(cli_error):
    code, stderr = cli_error(ppo.main, ["--action-dist", "tanh_normal"])
    assert code == 2 and "--action-dist tanh_normal needs continuous (Box) actions" in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    code, stderr = cli_error(ppo.main, ["--env", "Pendulum-v1", "--action-dist", "tanh_normal", "--min-std", "0"])
    assert code == 2 and "--min-std must be positive" in stderr, stderr


# --- reproducibility --------------------------------------------------------------------------
SMALL = dict(total_timesteps=4 * 32 * 6, num_envs=4, num_steps=32, eval_every=3, eval_episodes=2, log_every=0)


@functools.cache
def program(num_seeds, seed, env, kw_json):
    """One built program per distinct config in this process: tests that run the same config
    share it (built once, traced and lowered once)."""
    config = compose(ppo, env, num_seeds=num_seeds, seed=seed, **{**SMALL, **json.loads(kw_json)})
    return loop.build(ppo.make_algorithm, config)


def run(num_seeds, seed=0, env="CartPole-v1", fresh=False, **kw):
    """Train `num_seeds` seeds of a SMALL config (evaluated, padded); `fresh`: a program built
    anew rather than the shared one."""
    build = program.__wrapped__ if fresh else program
    out = build(num_seeds, seed, env, json.dumps(kw, sort_keys=True)).train(devices.seed_keys(seed, num_seeds))
    return jax.device_get(out)


@pytest.mark.slow
def test_same_key_gives_identical_metrics():
    a, b = run(2), run(2, fresh=True)  # two builds of one config, each run
    for k in a["metrics"]:
        np.testing.assert_array_equal(a["metrics"][k], b["metrics"][k])


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.slow
def test_seed_i_of_a_sweep_equals_a_single_seed_run(env):
    """Compared over 3 updates of 2 epochs x 4 minibatches: a vmapped batch rounds
    differently from a single seed (different matmul shapes), and every optimizer step
    amplifies the last bits (Pendulum's default 10 x 32 steps of 4-sample minibatches
    drifted to 2e-4 relative in 3 updates)."""
    short = dict(total_timesteps=4 * 32 * 3, num_epochs=2, num_minibatches=4)
    sweep = run(3, env=env, **short)  # 3 seeds on 2 devices: padded to 4, padding dropped
    train_one_seed = ppo.make_train(compose(ppo, env, **{**SMALL, **short}).config)
    for i in range(3):
        single = jax.device_get(train_one_seed(devices.seed_keys(i, 1)))
        for k in ("policy_loss", "value_loss", "approx_kl", "entropy"):
            np.testing.assert_allclose(sweep["metrics"][k][i], single["metrics"][k][0], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(
            jax.tree.leaves(sweep["policy"])[0][i], jax.tree.leaves(single["policy"])[0][0], rtol=1e-4, atol=1e-6
        )


@pytest.mark.slow
def test_different_seeds_differ():
    out = run(2)
    assert not np.allclose(out["metrics"]["policy_loss"][0], out["metrics"]["policy_loss"][1])


@pytest.mark.slow
def test_metrics_shapes_and_eval_schedule():
    out = run(2)
    num_updates = SMALL["total_timesteps"] // (SMALL["num_envs"] * SMALL["num_steps"])
    for v in out["metrics"].values():
        assert v.shape == (2, num_updates)
    evaluated = ~np.isnan(out["metrics"]["eval_return"][0])
    assert evaluated.tolist() == [False, False, True, False, False, True]  # every 3rd update and the last


@pytest.mark.slow
def test_target_kl_stops_the_update():
    """4 epochs x 4 minibatches (the defaults) with and without a KL target; the run without
    is the 2-seed run above (one compiled program for the tests that share it)."""
    out = run(1, target_kl=1e-9)
    # the first minibatch has KL 0 (ratio 1) and is applied; a later one exceeds 1e-9 and stops
    applied = out["metrics"]["applied"][0]
    assert (applied < 1).all() and (applied > 0).all()
    free = run(2)
    assert (free["metrics"]["applied"] == 1).all()


@pytest.mark.slow
def test_eval_env_params_override_only_changes_evaluation():
    base = run(2)  # evaluated after updates 3 and 6
    heavy = run(2, eval_env_params={"length": 5.0})
    for k in ("policy_loss", "episode_return"):
        np.testing.assert_array_equal(base["metrics"][k], heavy["metrics"][k])
    evaluated = ~np.isnan(base["metrics"]["eval_return"])
    np.testing.assert_array_equal(evaluated, ~np.isnan(heavy["metrics"]["eval_return"]))
    assert not np.array_equal(base["metrics"]["eval_return"][evaluated], heavy["metrics"]["eval_return"][evaluated])


@pytest.mark.slow
def test_tanh_normal_trains_on_pendulum_without_nan():
    """6 updates of the continuous preset (10 epochs x 32 minibatches) on 4 x 32 steps, 2 seeds: finite
    losses, parameters and evaluation returns (Pendulum's cost is at most 16.3 a step: returns in [-3260, 0])."""
    out = run(2, env="Pendulum-v1", action_dist="tanh_normal")
    for k in ("policy_loss", "value_loss", "entropy", "approx_kl"):  # no episode ends in 192 steps: see eval
        assert np.isfinite(out["metrics"][k]).all(), k
    evaluated = out["metrics"]["eval_return"][:, -1]
    assert np.isfinite(evaluated).all() and (evaluated <= 0).all() and (evaluated > -3260).all(), evaluated
    assert np.isfinite(jax.tree.leaves(out["policy"])[0]).all()


@pytest.mark.slow
def test_learn_prepares_each_epoch_from_the_params_it_starts_with():
    """learn's `prepare` (recompute_advantages) makes every epoch's samples from that epoch's
    starting params: 2 epochs with one full-batch minibatch equal two 1-epoch calls, each on
    the samples prepared from the params the previous one left (here the advantage is made
    V(obs), so it changes whenever the value net does)."""
    config = compose(ppo, "CartPole-v1", num_epochs=2, num_minibatches=1, learning_rate=1e-2)
    k = jax.random.split(jax.random.key(3), 6)
    params = ppo.init_params(k[0], config, _cartpole_vec_env())
    B = 64
    samples = ppo.Batch(obs=jax.random.normal(k[1], (B, 4)), action=jax.random.randint(k[2], (B,), 0, 2),
                        log_prob=jnp.full((B,), math.log(0.5)), value=jnp.zeros(B), advantage=jnp.zeros(B),
                        target=jax.random.normal(k[3], (B,)))
    prepare = lambda p, s: s._replace(advantage=ppo.value(p, s.obs, config.activation))
    optimizer = ppo.make_optimizer(config.max_grad_norm, config.adam_eps)
    grad, lr = functools.partial(ppo.minibatch_gradient, config=config), config.learning_rate
    learn = lambda params, state, samples, epochs, **kw: ppo.learn(  # noqa: E731
        params, state, samples, k[4], grad, optimizer, lr, epochs, 1, **kw)
    both, _, _ = learn(params, optimizer.init(params), samples, 2, prepare=prepare)
    p1, state1, _ = learn(params, optimizer.init(params), prepare(params, samples), 1)
    p2, _, _ = learn(p1, state1, prepare(p1, samples), 1)
    for a, b in zip(jax.tree.leaves(both), jax.tree.leaves(p2)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    # without prepare the second epoch reuses the first epoch's advantages: a different result
    stale, _, _ = learn(params, optimizer.init(params), prepare(params, samples), 2)
    assert not all(np.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(jax.tree.leaves(stale), jax.tree.leaves(p2)))


def _cartpole_vec_env():
    from scanrl.common import envs, suites
    env, env_params = suites.make("CartPole-v1")
    return envs.VecEnv(env, env_params, 1)


@pytest.mark.slow
def test_recompute_advantages_is_the_plain_update_for_one_epoch_and_changes_later_epochs():
    """With one epoch the recomputed advantages come from the rollout's own params, so the run is
    the plain one; with the default 4 epochs, epochs 2-4 learn from fresh advantages."""
    plain, fresh = run(2, num_epochs=1), run(2, num_epochs=1, recompute_advantages=True)
    for k in ("policy_loss", "value_loss", "entropy", "eval_return"):
        np.testing.assert_allclose(fresh["metrics"][k], plain["metrics"][k], rtol=1e-5, atol=1e-6)
    plain, fresh = run(2), run(2, recompute_advantages=True)  # run(2): the program the tests above share
    assert not np.allclose(fresh["metrics"]["policy_loss"], plain["metrics"]["policy_loss"])


def test_to_unrolls_cuts_each_envs_rollout_into_pieces_in_time_order():
    T, N, k = 12, 3, 4
    steps = np.arange(T)[:, None] * 100 + np.arange(N)[None, :]  # [T, N]: 100 t + n
    unrolls = np.asarray(ppo.to_unrolls(jnp.asarray(steps), k))
    assert unrolls.shape == (T // k * N, k)
    expected = [[100 * (piece * k + i) + n for i in range(k)] for piece in range(T // k) for n in range(N)]
    np.testing.assert_array_equal(unrolls, expected)


@pytest.mark.slow
def test_unroll_gradient_is_gae_within_each_unroll_then_the_minibatch_gradient():
    """--unroll-length: GAE runs over each unroll alone (its last step bootstraps from V of the
    observation it reached, and no trace crosses into the next piece), with the params being
    trained, then PPO's loss over the unrolls' transitions, differentiated with the advantages held constant."""
    from test_gae import reference_gae

    config = compose(ppo, "CartPole-v1", gamma=0.9, gae_lambda=0.8)
    rng = np.random.default_rng(5)  # inputs from numpy: each eager JAX op would compile a program of its own
    params = ppo.init_params(jax.random.key(5), config, _cartpole_vec_env())
    params = jax.tree.map(lambda x: x + 0.1 * rng.normal(size=x.shape).astype(np.float32), params)  # a non-trivial value net
    U, K = 3, 5
    terminated = rng.random((U, K)) < 0.15
    normal = lambda *shape: rng.normal(size=shape).astype(np.float32)
    minibatch = ppo.Unroll(obs=normal(U, K, 4), final_obs=normal(U, K, 4), action=rng.integers(0, 2, (U, K)),
                           log_prob=np.full((U, K), math.log(0.5), np.float32), value=np.zeros((U, K), np.float32),
                           reward=normal(U, K), terminated=terminated, done=terminated | (rng.random((U, K)) < 0.15))
    v = lambda obs: np.asarray(jax.jit(lambda o: ppo.value(params, o, config.activation))(obs)).T  # [U, K] -> time-major [K, U]
    tm = lambda x: x.T
    advantages, targets = reference_gae(tm(minibatch.reward), v(minibatch.obs), v(minibatch.final_obs),
                                        tm(minibatch.terminated), tm(minibatch.done), config.gamma, config.gae_lambda)
    flat = lambda x: np.swapaxes(x, 0, 1).reshape((U * K,) + x.shape[2:])  # time-major, as GAE ran
    batch = ppo.Batch(obs=flat(minibatch.obs), action=flat(minibatch.action), log_prob=flat(minibatch.log_prob),
                      value=flat(minibatch.value), advantage=advantages.reshape(-1).astype(np.float32),
                      target=targets.reshape(-1).astype(np.float32))
    expected, expected_stats = jax.jit(lambda p, b: ppo.minibatch_gradient(p, b, config))(params, batch)
    grads, stats = jax.jit(lambda p, m: ppo.unroll_gradient(p, m, config))(params, minibatch)
    for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(expected)):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(stats["value_loss"], expected_stats["value_loss"], rtol=1e-5)


@pytest.mark.slow
def test_one_unroll_per_env_and_one_minibatch_is_the_plain_update():
    """--unroll-length num_steps with one minibatch and one epoch: the unroll is the whole rollout and
    the params the GAE uses are the rollout's, so the run is the plain one; shorter unrolls change it."""
    small = dict(num_epochs=1, num_minibatches=1, total_timesteps=4 * 32 * 2, eval_every=0)
    plain, whole, cut = run(1, **small), run(1, **small, unroll_length=32), run(1, **small, unroll_length=8)
    for k in ("policy_loss", "value_loss", "entropy", "episode_return"):
        np.testing.assert_allclose(whole["metrics"][k], plain["metrics"][k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert not np.allclose(cut["metrics"]["value_loss"], plain["metrics"]["value_loss"])


@pytest.mark.slow
def test_fresh_obs_stats_changes_only_runs_that_normalise_observations():
    """Without --normalize-obs (CartPole's defaults) the option is the plain run bit for bit; with
    it (Pendulum's continuous preset) the epochs see the observations through the statistics that
    include them, so the first update already differs."""
    plain, fresh = run(2), run(2, fresh_obs_stats=True)  # run(2): the program the tests above share
    for k in plain["metrics"]:
        np.testing.assert_array_equal(fresh["metrics"][k], plain["metrics"][k])
    plain, fresh = run(2, env="Pendulum-v1"), run(2, env="Pendulum-v1", fresh_obs_stats=True)
    assert plain["metrics"]["value_loss"][0, 0] != fresh["metrics"]["value_loss"][0, 0]
    for out in (plain, fresh):
        assert np.isfinite(out["metrics"]["policy_loss"]).all()


# --- learning ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_cartpole_learns(tmp_path):
    config = compose(ppo, 
        "CartPole-v1", num_seeds=4, total_timesteps=500_000, log_every=0, out_dir=str(tmp_path)
    )
    summary = train_and_write("ppo", config, ppo.make_algorithm)
    assert summary["final_return_mean"] >= 475, summary["final_return_per_seed"]
    check_run_tools(summary["run_dir"])



@pytest.mark.slow
def test_minatar_conv_torso_beats_the_mlp_at_the_same_budget(tmp_path):
    """SpaceInvaders-MinAtar with the MinAtar preset, seeds 0-1, 163,840 steps each (20 updates):
    the conv torso (--torso auto) ends clearly above the same preset on the flattened frame
    (measured: 14.5 and 16.5 against 12.7 and 11.3)."""
    returns = {}
    for torso in ("auto", "mlp"):
        config = compose(ppo, "SpaceInvaders-MinAtar", torso=torso, num_seeds=2, total_timesteps=163_840,
                         log_every=0, eval_every=0, out_dir=str(tmp_path / torso))
        returns[torso] = train_and_write("ppo", config, ppo.make_algorithm)["final_return_per_seed"]
    assert min(returns["auto"]) > max(returns["mlp"]), returns
    assert np.mean(returns["auto"]) > np.mean(returns["mlp"]) + 2.0, returns
