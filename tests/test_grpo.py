"""GRPO: returns, masks, group advantages, KL to the reference, grouping modes, learning."""

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrl.algos import grpo
from scanrl.common import envs, suites
from scanrl.common.harness import sweeps
from scanrl.common.harness.run import train_and_write
from scanrl.common.harness.runconfig import compose
from conftest import assert_shards_match_one_device, check_run_tools, four_device_snippet
from test_nets import (EXTREME_ACTORS, bounded_env, check_entropy_stat, check_squashed_log_prob, constant_actor,
                       tanh_normal_program)

T, N, G = 12, 8, 4


def random_rollout(seed):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, N)).astype(np.float32)
    done = rng.random((T, N)) < 0.15
    return rewards, done


def test_step_returns_equal_a_plain_python_loop():
    rewards, done = random_rollout(0)
    expected = np.zeros((T, N))
    for i in range(N):
        running = 0.0
        for t in reversed(range(T)):
            running = rewards[t, i] + (0.0 if done[t, i] else 0.9 * running)
            expected[t, i] = running
    np.testing.assert_allclose(grpo.step_returns(rewards, done, 0.9), expected, rtol=1e-5, atol=1e-6)


def test_first_episode_mask_keeps_steps_up_to_the_first_done():
    done = np.zeros((5, 3), bool)
    done[1, 0] = done[3, 0] = True  # env 0: first end at t=1
    done[4, 1] = True  # env 1: ends at the last step; env 2 never ends
    mask = np.asarray(grpo.first_episode_mask(done))
    np.testing.assert_array_equal(mask[:, 0], [1, 1, 0, 0, 0])
    np.testing.assert_array_equal(mask[:, 1], [1, 1, 1, 1, 1])
    np.testing.assert_array_equal(mask[:, 2], [1, 1, 1, 1, 1])


def test_group_advantages_are_normalised_over_alive_members_per_step():
    rewards, done = random_rollout(1)
    returns = grpo.step_returns(rewards, done, 0.99)
    mask = grpo.first_episode_mask(done)
    adv = np.asarray(grpo.group_advantages(returns, mask, G))
    mask = np.asarray(mask)
    checked = 0
    for t in range(T):
        for g in range(N // G):
            members = slice(g * G, (g + 1) * G)
            alive = mask[t, members] > 0
            a = adv[t, members]
            assert (a[~alive] == 0).all()  # masked steps get no advantage
            if alive.sum() >= 2:
                assert abs(a[alive].mean()) < 1e-5  # zero masked mean
                assert abs(a[alive].std() - 1.0) < 1e-4  # unit population std
                checked += 1
            else:
                assert (a == 0).all()  # a lone member has no baseline
    assert checked > 10


def test_groups_are_contiguous_blocks():
    rewards, done = random_rollout(2)
    returns = grpo.step_returns(rewards, done, 0.99)
    ones = jnp.ones((T, N))
    adv = grpo.group_advantages(returns, ones, G)
    within = np.array([1, 0, 3, 2, 5, 4, 7, 6])  # swap members inside groups: advantages follow
    np.testing.assert_allclose(grpo.group_advantages(returns[:, within], ones, G), adv[:, within], atol=1e-6)
    across = np.array([4, 1, 2, 3, 0, 5, 6, 7])  # swap members between groups: advantages change
    assert not np.allclose(grpo.group_advantages(returns[:, across], ones, G), adv[:, across], atol=1e-3)


@pytest.mark.slow
def test_reference_kl_is_zero_at_the_reference_and_positive_elsewhere():
    log_prob = jnp.log(jnp.array([0.2, 0.5, 0.9]))
    np.testing.assert_array_equal(grpo.reference_kl(log_prob, log_prob), 0.0)
    assert (grpo.reference_kl(log_prob, jnp.log(jnp.array([0.3, 0.4, 0.5]))) > 0).all()
    # in the loss: zero value and zero gradient when the policy is the reference
    config = grpo.Config(kl_coef=1.0, ent_coef=0.0)
    params = {"actor": grpo.mlp_init(jax.random.key(0), (4, 8, 2), output_gain=1.0)}
    obs, action = jax.random.normal(jax.random.key(1), (6, 4)), jnp.array([0, 1, 0, 1, 1, 0])
    ref_lp = grpo.policy(params, obs, "tanh").log_prob(action)
    batch = grpo.Batch(obs, action, ref_lp, ref_lp, jnp.zeros(6), jnp.ones(6))
    (loss, stats), grads = jax.value_and_grad(grpo.grpo_loss, has_aux=True)(params, batch, config, 1 / 6)
    assert float(stats["reference_kl"]) == 0.0
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree.leaves(grads))
    moved = jax.tree.map(lambda p: p + 0.1, params)
    _, stats = grpo.grpo_loss(moved, batch, config, 1 / 6)
    assert float(stats["reference_kl"]) > 0


@pytest.mark.slow
def test_a_traced_kl_coef_equals_the_concrete_one_and_zero_leaves_the_loss_alone():
    """A sweep traces kl_coef: the loss then always takes the KL term, and a row at 0 gets the
    loss (and gradient) of the run without a reference policy."""
    params = {"actor": grpo.mlp_init(jax.random.key(0), (4, 8, 2), output_gain=1.0)}
    obs, action = jax.random.normal(jax.random.key(1), (6, 4)), jnp.array([0, 1, 0, 1, 1, 0])
    lp = grpo.policy(params, obs, "tanh").log_prob(action)
    batch = grpo.Batch(obs, action, lp, lp - 0.3, jnp.linspace(-1.0, 1.0, 6), jnp.ones(6))
    loss_grad = lambda config: jax.value_and_grad(grpo.grpo_loss, has_aux=True)(params, batch, config, 1 / 6)
    swept = lambda kl: sweeps.with_values(grpo.Config(), {"kl_coef": kl})  # as a sweep's row sees it
    traced = jax.vmap(lambda kl: loss_grad(swept(kl))[0][0])(jnp.array([0.0, 0.5]))
    for row, kl in enumerate([0.0, 0.5]):
        (loss, stats), _ = loss_grad(grpo.Config(kl_coef=kl))
        np.testing.assert_allclose(traced[row], loss, rtol=1e-6)
        assert ("reference_kl" in stats) == (kl > 0)  # concrete 0: no reference term at all
    grads = jax.vmap(lambda kl: loss_grad(swept(kl))[1])(jnp.array([0.0, 0.0]))
    for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(loss_grad(grpo.Config(kl_coef=0.0))[1])):
        np.testing.assert_allclose(a[0], b, rtol=1e-5, atol=1e-7)  # float32, summed in another order under vmap


@pytest.mark.slow  # over 5 s in the quick tier on a 2-core CI-kind machine (2026-12-02)
def test_masked_steps_contribute_nothing():
    config = grpo.Config(ent_coef=0.01)
    params = {"actor": grpo.mlp_init(jax.random.key(0), (4, 8, 2), output_gain=1.0)}
    obs = jax.random.normal(jax.random.key(1), (6, 4))
    action, adv = jnp.array([0, 1, 0, 1, 1, 0]), jnp.array([1.0, -1.0, 0.5, 2.0, -3.0, 0.7])
    lp = grpo.policy(params, obs, "tanh").log_prob(action) - 0.1
    mask = jnp.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    full = grpo.Batch(obs, action, lp, lp, adv, mask)
    first3 = jax.tree.map(lambda x: x[:3], full)
    gradient = jax.jit(jax.grad(lambda p, batch: grpo.grpo_loss(p, batch, config, 1 / 3)[0]))
    g_full, g_first = gradient(params, full), gradient(params, first3)
    for a, b in zip(jax.tree.leaves(g_full), jax.tree.leaves(g_first)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "kwargs,message",
    [({"group_size": 1}, "--group-size must be at least 2"), ({"num_envs": 10, "group_size": 4}, "not divisible by --group-size")],
)
def test_bad_groups_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        grpo.Config(**kwargs)


def test_bad_groups_exit_2_from_the_command_line(cli_error):
    code, stderr = cli_error(grpo.main, ["--num-envs", "10"])
    assert code == 2 and "not divisible by --group-size" in stderr, stderr


@pytest.mark.parametrize("shared", [False, True])
def test_shared_group_reset_gives_groups_one_first_observation(shared):
    config = grpo.Config(shared_group_reset=shared, num_envs=8, group_size=4)
    env, env_params = suites.make("CartPole-v1")
    vec_env = grpo.envs.VecEnv(env, env_params, 8)
    obs, _ = grpo.reset_groups(vec_env, jax.random.key(3), config)
    obs = np.asarray(obs)
    same_within = all(np.array_equal(obs[g * 4], obs[g * 4 + k]) for g in range(2) for k in range(1, 4))
    assert same_within == shared
    assert not np.array_equal(obs[0], obs[4])  # different groups start differently


# --- tanh-squashed normal (--action-dist tanh_normal; shared pieces and checks: test_nets.py) ----------
# every step trains (no first-episode mask), and clip_eps 1e-6 makes clip_fraction count any ratio off 1
TANH = dict(clip_eps=1e-6, kl_coef=0.1, truncate_at_first_done=False)


@pytest.mark.slow
def test_tanh_normal_ratio_is_one_on_its_own_rollout():
    """1 epoch x 1 minibatch: the loss's log pi of the stored pre-tanh u meets the rollout's, and the KL
    to the reference (the same parameters here) is 0, also with the mean deep in saturation
    (tanh(30) = 1 in float32), where a ratio taken through atanh of the env's action would break."""
    _, update, state = tanh_normal_program(grpo, **TANH)
    for params in (state.params, constant_actor(state.params, [30.0, -30.0], [-3.0, -3.0])):
        _, metrics = update(state._replace(params=params, ref_params=params), 0)
        assert float(metrics["clip_fraction"]) == 0.0
        assert float(metrics["approx_kl"]) < 1e-10 and float(metrics["reference_kl"]) < 1e-10
        assert float(metrics["valid_fraction"]) == 1.0
        assert np.isfinite(float(metrics["entropy"])) and np.isfinite(float(metrics["policy_loss"]))


@pytest.mark.slow
def test_tanh_normal_env_actions_stay_in_the_bounds():
    """The env (its VecEnv's clipping off) counts no action outside [-1, 3] x [0, 0.5] in a rollout, and
    act gives none, whatever the actor's loc and scale."""
    algorithm, update, state = tanh_normal_program(grpo, **TANH)
    act = jax.jit(algorithm.act, static_argnums=3)
    env = bounded_env()
    obs, low, high = jax.random.normal(jax.random.key(1), (64, 3)), jnp.array(env.low), jnp.array(env.high)
    for actor in (None, *EXTREME_ACTORS):
        params = state.params if actor is None else constant_actor(state.params, *actor)
        _, metrics = update(state._replace(params=params, ref_params=params), 0)
        assert float(metrics["episodes"]) == 16 and float(metrics["episode_return"]) == 0.0, actor
        for deterministic in (False, True):
            actions = act(algorithm.policy_params(state._replace(params=params)), obs, jax.random.key(2), deterministic)
            assert actions.shape == (64, 2) and bool(((actions >= low) & (actions <= high)).all()), actor


@pytest.mark.slow
def test_tanh_normal_log_prob_of_the_squashed_action():
    """The actor's 2A outputs are [loc, raw scale] (no log_std, no clamp); log pi(u) - log|det J| is the
    density of the squashed action by distrax and by hand."""
    env = bounded_env()
    config = grpo.Config(action_dist="tanh_normal")
    vec_env = envs.VecEnv(env, env.default_params, 1)
    params = jax.jit(lambda k: grpo.init_params(k, config, vec_env))(jax.random.key(0))  # one compile, not one per op
    assert "log_std" not in params and params["actor"][-1]["w"].shape == (64, 4)
    params["actor"][-1]["w"] = 0.3 * jax.random.normal(jax.random.key(1), (64, 4))  # a spread of locs and scales
    obs = jax.random.normal(jax.random.key(2), (64, 3))
    dist = grpo.policy(params, obs, "tanh", None, "tanh_normal", config.min_std)
    u = jnp.clip(dist.sample(seed=jax.random.key(3)), -4.0, 4.0)
    check_squashed_log_prob(dist, grpo.mlp_apply(params["actor"], obs, "tanh"), config.min_std, u)


@pytest.mark.slow  # over 5 s in the quick tier on a 2-core CI-kind machine (2026-12-02)
def test_tanh_normal_entropy_bonus_is_the_squashed_estimate():
    """grpo_loss's entropy: the one-sample estimate with the stored noise over the valid steps, which
    averages to H(u) + E[sum log(1 - tanh(u)^2)] (quadrature) and lies below the normal's entropy."""
    env = bounded_env()
    config = grpo.Config(action_dist="tanh_normal")
    loc, raw = [0.0, 1.0], [0.0, -1.0]
    vec_env = envs.VecEnv(env, env.default_params, 1)
    params = jax.jit(lambda k: grpo.init_params(k, config, vec_env))(jax.random.key(0))  # one compile, not one per op
    params = constant_actor(params, loc, raw)
    n = 100_000
    noise = jax.random.normal(jax.random.key(4), (n, 2))
    zeros = jnp.zeros(n)
    batch = grpo.Batch(obs=jnp.zeros((n, 3)), action=jnp.zeros((n, 2)), log_prob=zeros, ref_log_prob=zeros,
                       advantage=zeros, mask=jnp.ones(n), noise=noise)
    _, stats = grpo.grpo_loss(params, batch, config, 1.0 / n)
    check_entropy_stat(stats["entropy"], loc, raw, noise)


def test_tanh_normal_on_discrete_actions_exits_2_before_compiling(cli_error):
    code, stderr = cli_error(grpo.main, ["--action-dist", "tanh_normal"])
    assert code == 2 and "--action-dist tanh_normal needs continuous (Box) actions and --env CartPole-v1" in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    code, stderr = cli_error(grpo.main, ["--env", "Pendulum-v1", "--action-dist", "tanh_normal", "--min-std", "0"])
    assert code == 2 and "--min-std must be positive" in stderr, stderr


DATA_PARALLEL = textwrap.dedent(
    """
    import json, sys
    import jax
    from scanrl.algos import grpo
    from scanrl.common.harness import devices, loop
    from scanrl.common.harness.runconfig import compose
    results = {}
    for shards in (1, 2, 4):
        config = compose(grpo, sys.argv[1], num_envs=8, group_size=4, num_steps=64, num_minibatches=2,
                         num_epochs=2, total_timesteps=8 * 64 * 3, eval_every=3, eval_episodes=4,
                         log_every=0, data_parallel=shards, kl_coef=0.1)
        out = jax.device_get(loop.build(grpo.make_algorithm, config).train(devices.seed_keys(0, 1)))
        results[shards] = {k: v.tolist() for k, v in out["metrics"].items()}
    print("RESULT" + json.dumps(results))
    """
)


DATA_PARALLEL_ON_4 = four_device_snippet("test_grpo: data parallel", DATA_PARALLEL, ("CartPole-v1",))


@pytest.mark.slow
def test_data_parallel_matches_one_device(four_devices):
    """Groups span the data shards (8 envs in groups of 4 over 4 devices)."""
    (results,) = four_devices(DATA_PARALLEL_ON_4)
    assert_shards_match_one_device(
        results, ("policy_loss", "entropy", "reference_kl", "valid_fraction", "episode_return", "eval_return")
    )


@pytest.mark.slow
def test_cartpole_learns(tmp_path):
    """Default (EmbodiChain-style) groups at 2e6 of the documented 3e6 steps per seed. Over 10
    seeds at 2e6 (benchmarks/RESULTS.md) every final return was 480 to 487: the mean of 4
    must reach 475."""
    assert compose(grpo, "CartPole-v1").total_timesteps <= 5_000_000  # the documented budget
    config = compose(grpo, "CartPole-v1", num_seeds=4, total_timesteps=2_000_000, log_every=0, out_dir=str(tmp_path))
    summary = train_and_write("grpo", config, grpo.make_algorithm)
    assert summary["final_return_mean"] >= 475, summary["final_return_per_seed"]
    check_run_tools(summary["run_dir"])
