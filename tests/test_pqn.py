"""PQN: Q(lambda) returns against a plain loop, epsilon-greedy with and without masks, the
epsilon schedule, the layer-normed Q-network against flax, errors, determinism and learning."""

import dataclasses
import json
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrl.algos import pqn
from scanrl.common import envs
from scanrl.common.harness import devices
from scanrl.common.harness.runconfig import compose
from scanrl.common.harness.run import train_and_write
from conftest import check_run_tools
from test_loop import as_flags


# --- Q(lambda) returns -------------------------------------------------------------------------
def q_lambda_by_loop(rewards, next_q, terminated, truncated, gamma, lam):
    """The returns, one env and one step at a time, from the definition: a termination ends the
    return at r; a truncation or the rollout's end bootstraps from max Q(s'); otherwise the
    return mixes the one-step bootstrap and the next return, (1 - lambda) : lambda."""
    T, N = rewards.shape
    returns = np.zeros((T, N))
    for n in range(N):
        for t in reversed(range(T)):
            if terminated[t, n]:
                returns[t, n] = rewards[t, n]
            elif truncated[t, n] or t == T - 1:
                returns[t, n] = rewards[t, n] + gamma * next_q[t, n]
            else:
                mixed = (1 - lam) * next_q[t, n] + lam * returns[t + 1, n]
                returns[t, n] = rewards[t, n] + gamma * mixed
    return returns


def random_rollout(seed, T=9, N=6):
    rng = np.random.default_rng(seed)
    terminated = rng.random((T, N)) < 0.2
    truncated = ~terminated & (rng.random((T, N)) < 0.2)
    return rng.normal(size=(T, N)), rng.normal(size=(T, N)), terminated, truncated


@pytest.mark.parametrize("lam", [0.0, 0.65, 0.95, 1.0])
def test_q_lambda_returns_equal_a_plain_python_loop(lam):
    rewards, next_q, terminated, truncated = random_rollout(0)
    assert terminated.any() and truncated.any()  # both kinds of end are in the data
    got = pqn.q_lambda_returns(jnp.asarray(rewards, jnp.float32), jnp.asarray(next_q, jnp.float32),
                               jnp.asarray(terminated), jnp.asarray(terminated | truncated), 0.97, lam)
    want = q_lambda_by_loop(rewards, next_q, terminated, truncated, 0.97, lam)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_q_lambda_returns_equal_rlax_lambda_returns_with_the_trace_cut_at_episode_ends():
    """DeepMind's rlax: G_t = r_t + d_t ((1 - l_t) v_t + l_t G_{t+1}) with d_t = gamma (1 -
    terminated_t), v_t = max Q(s'_t) and l_t = lambda (1 - done_t) is Peng's Q(lambda) as PQN
    computes it."""
    import rlax

    rewards, next_q, terminated, truncated = (jnp.asarray(x) for x in random_rollout(2))
    rewards, next_q = rewards.astype(jnp.float32), next_q.astype(jnp.float32)
    done = terminated | truncated

    @jax.jit  # one program: eager, each operation would compile on its own
    def both():
        ours = pqn.q_lambda_returns(rewards, next_q, terminated, done, 0.97, 0.65)
        theirs = jax.vmap(rlax.lambda_returns, in_axes=1, out_axes=1)(
            rewards, 0.97 * (1.0 - terminated), next_q, 0.65 * (1.0 - done))
        return ours, theirs

    ours, theirs = both()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_lambda_zero_is_the_one_step_q_learning_target():
    rewards, next_q, terminated, truncated = random_rollout(1)
    got = pqn.q_lambda_returns(jnp.asarray(rewards), jnp.asarray(next_q), jnp.asarray(terminated),
                               jnp.asarray(terminated | truncated), 0.9, 0.0)
    np.testing.assert_allclose(got, rewards + 0.9 * (1 - terminated) * next_q, rtol=1e-5, atol=1e-6)


def test_a_truncation_bootstraps_from_the_final_observation_and_cuts_the_trace():
    """One env, 3 steps, lambda 1: step 1 is a time-limit cut, so its return is r + gamma q'
    (q' of its final observation), and step 0's return sees step 1's, not step 2's; a
    termination in its place gives r alone."""
    rewards, next_q = jnp.array([[1.0], [2.0], [4.0]]), jnp.array([[10.0], [20.0], [40.0]])
    cut = jnp.array([[False], [True], [False]])
    g = pqn.q_lambda_returns(rewards, next_q, jnp.zeros_like(cut), cut, 0.5, 1.0)[:, 0]
    np.testing.assert_allclose(g, [1 + 0.5 * (2 + 0.5 * 20), 2 + 0.5 * 20, 4 + 0.5 * 40])
    g = pqn.q_lambda_returns(rewards, next_q, cut, cut, 0.5, 1.0)[:, 0]
    np.testing.assert_allclose(g, [1 + 0.5 * 2, 2, 4 + 0.5 * 40])


# --- exploration -------------------------------------------------------------------------------
def test_epsilon_greedy_takes_the_argmax_over_valid_actions_and_explores_only_them():
    @jax.jit  # one program: eager, each operation would compile on its own
    def choices(key):
        k = jax.random.split(key, 6)
        q = jax.random.normal(k[0], (4096, 5)).at[:, 0].set(9.0)  # action 0: every row's argmax
        mask = (jax.random.uniform(k[1], (4096, 5)) < 0.5).at[:, 4].set(True)  # one valid at least
        return q, mask, [pqn.epsilon_greedy(k[2], q, 0.0, mask), pqn.epsilon_greedy(k[2], q, 0.0),
                         pqn.epsilon_greedy(k[3], q, 1.0, mask), pqn.epsilon_greedy(k[4], q, 1.0),
                         pqn.epsilon_greedy(k[5], q, 0.5)]

    q, mask, (greedy, unmasked_greedy, explored, unmasked, half) = jax.device_get(choices(jax.random.key(0)))
    np.testing.assert_array_equal(greedy, np.where(mask, q, -np.inf).argmax(-1))
    np.testing.assert_array_equal(unmasked_greedy, np.zeros(4096, int))
    assert np.take_along_axis(mask, explored[:, None], -1).all()  # never a masked action
    # uniform over each row's valid actions: the share of action 4 is E[1 / #valid]
    share = (explored == 4).mean()
    assert abs(share - (1.0 / mask.sum(-1)).mean()) < 0.03, share
    np.testing.assert_allclose(np.bincount(unmasked, minlength=5) / 4096, 0.2, atol=0.03)
    assert abs((half != 0).mean() - 0.5 * 0.8) < 0.03  # a random pick is another action 4/5 of the time


def test_the_bootstrap_is_the_max_over_valid_actions_and_over_all_where_none_is():
    q = jnp.array([[1.0, 5.0, 3.0], [1.0, 5.0, 3.0], [1.0, 5.0, 3.0]])
    mask = jnp.array([[True, False, True], [False, False, False], [True, True, True]])
    np.testing.assert_array_equal(jax.jit(pqn.max_valid_q)(q, mask), [3.0, 5.0, 5.0])
    np.testing.assert_array_equal(jax.jit(pqn.max_valid_q)(q), [5.0, 5.0, 5.0])


def test_epsilon_decays_linearly_over_its_fraction_of_the_decay_then_stays():
    config = pqn.Config(total_timesteps=2048 * 100, epsilon_start=1.0, epsilon_end=0.1,
                        epsilon_fraction=0.2)  # 100 updates: epsilon reaches 0.1 at update 20
    eps = [float(pqn.exploration_epsilon(config, jnp.float32(u))) for u in (0, 10, 20, 60, 99)]
    np.testing.assert_allclose(eps, [1.0, 0.55, 0.1, 0.1, 0.1], rtol=1e-6)
    longer = dataclasses.replace(config, decay_timesteps=2048 * 200)  # purejaxql's TOTAL_TIMESTEPS_DECAY
    np.testing.assert_allclose(float(pqn.exploration_epsilon(longer, jnp.float32(20))), 0.55, rtol=1e-6)
    never = dataclasses.replace(config, epsilon_fraction=0.0)
    assert float(pqn.exploration_epsilon(never, jnp.float32(0))) == pytest.approx(0.1)


# --- the Q-network -----------------------------------------------------------------------------
def test_the_grid_world_preset_starts_navix_and_xland_tasks_only():
    """Navix's and XLand-MiniGrid's ids start from PRESETS["grid_world"] (no recipe of theirs is
    PQN's); CartPole keeps the Config defaults, and flags still win over the preset."""
    preset = pqn.PRESETS["grid_world"]
    for env in ("navix/Navix-DoorKey-5x5-v0", "xminigrid/MiniGrid-Empty-5x5"):
        config = pqn.default_config(env)
        assert {field: getattr(config, field) for field in preset} == preset, env
    assert pqn.default_config("CartPole-v1") == pqn.Config(env="CartPole-v1")
    assert pqn.default_config("navix/Navix-Empty-5x5-v0", learning_rate=3e-4).learning_rate == 3e-4


@pytest.mark.slow
def test_q_network_is_flax_conv_dense_and_layer_norm_on_the_same_weights():
    """Images: conv 3x3 (VALID) -> LayerNorm -> relu -> flatten -> Dense -> LayerNorm -> relu ->
    Dense, purejaxql's order; --norm none leaves the norms out."""
    import flax.linen as nn

    vec_env = envs.VecEnv(*envs.gymnax().make("Breakout-MinAtar"), 2)
    config = pqn.default_config("Breakout-MinAtar")

    def flax_q(params, x, norm):
        ln = (lambda layer, x: nn.LayerNorm().apply(
            {"params": {"scale": layer["scale"], "bias": layer["offset"]}}, x)) if norm else \
            (lambda layer, x: x)
        conv = params["torso"][0]
        x = nn.Conv(16, (3, 3), padding="VALID").apply(
            {"params": {"kernel": conv["w"], "bias": conv["b"]}}, x.astype(jnp.float32))
        x = jax.nn.relu(ln(conv, x)).reshape(x.shape[0], -1)
        hidden, out = params["q"]
        x = nn.Dense(128).apply({"params": {"kernel": hidden["w"], "bias": hidden["b"]}}, x)
        x = jax.nn.relu(ln(hidden, x))
        return nn.Dense(3).apply({"params": {"kernel": out["w"], "bias": out["b"]}}, x)

    @partial(jax.jit, static_argnums=1)  # one program: eager, each operation would compile alone
    def both(key, norm):
        k_init, k_scale, k_offset, k_obs = jax.random.split(key, 4)
        params = pqn.init_q_network(k_init, config if norm else
                                    dataclasses.replace(config, norm="none"), vec_env)
        layers = (*params["torso"], *params["q"][:-1])
        assert all(("scale" in layer) == norm for layer in layers)  # --norm none: no norms
        assert "scale" not in params["q"][-1]  # the output layer never has one
        for layer in layers if norm else ():  # scales and offsets away from 1 and 0
            layer["scale"] = jax.random.normal(k_scale, layer["b"].shape)
            layer["offset"] = jax.random.normal(k_offset, layer["b"].shape)
        obs = jax.random.uniform(k_obs, (7, 10, 10, 4)) < 0.3
        return pqn.q_values(params, obs, "relu"), flax_q(params, obs, norm)

    for norm in (True, False):
        ours, theirs = both(jax.random.key(0), norm)
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-5)


def test_td_loss_is_half_the_squared_error_of_the_taken_action_or_huber():
    config = pqn.Config(hidden=(8,))
    rng = np.random.default_rng(0)
    params = {"q": [{"w": rng.normal(size=(4, 8)), "b": rng.normal(size=8), "scale": rng.normal(size=8),
                     "offset": rng.normal(size=8)}, {"w": rng.normal(size=(8, 2)), "b": rng.normal(size=2)}]}
    params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), params)
    action = jnp.array([0, 1, 1, 0, 1, 0])
    target = jnp.array([0.0, 3.0, -3.0, 0.5, 0.0, 1.0])

    @jax.jit  # one program: eager, each operation would compile on its own
    def losses(key):
        obs = jax.random.normal(key, (6, 4))
        batch = pqn.Batch(obs=obs, action=action, target=target)
        huber = dataclasses.replace(config, loss="huber")
        return (pqn.q_values(params, obs, "relu")[jnp.arange(6), action],
                pqn.td_loss(params, batch, config)[0], pqn.td_loss(params, batch, huber)[0])

    taken, loss, huber = jax.device_get(losses(jax.random.key(0)))
    error = taken - np.asarray(target)
    assert np.abs(error).max() > 1 > np.abs(error).min()  # both branches of Huber are met
    np.testing.assert_allclose(loss, 0.5 * np.mean(error**2), rtol=1e-6)
    abs_error = np.abs(error)
    np.testing.assert_allclose(huber, np.mean(np.where(abs_error <= 1, 0.5 * abs_error**2,
                                                       abs_error - 0.5)), rtol=1e-6)


# --- command line ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args,message",
    [
        (["--env", "Pendulum-v1"], "PQN needs discrete actions and --env Pendulum-v1 has continuous"),
        (["--q-lambda", "1.5"], "--q-lambda must lie in [0, 1], got 1.5"),
        (["--epsilon-end", "-0.1"], "--epsilon-end must lie in [0, 1], got -0.1"),
        (["--num-minibatches", "3"], "is not divisible by --num-minibatches 3"),
        (["--total-timesteps", "0", "--stop-minutes", "1"], "needs --decay-timesteps"),
    ],
)
def test_user_errors_exit_2_before_compiling(cli_error, args, message):
    code, stderr = cli_error(pqn.main, args)
    assert code == 2 and message in stderr, stderr


# --- runs ----------------------------------------------------------------------------------------
SMALL = dict(num_envs=8, num_steps=16, num_minibatches=4, num_epochs=2, hidden=(32,),
             total_timesteps=8 * 16 * 6)


@pytest.mark.slow
def test_seeds_differ_and_the_same_seed_repeats_bit_for_bit():
    """Two builds of make_train, seeds 0-1: seed 0 twice alike to the bit, seeds 0 and 1 apart;
    the logged epsilon is the schedule's."""
    config = pqn.default_config("CartPole-v1", **SMALL)
    bits = lambda x: jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x
    first = jax.device_get(jax.tree.map(bits, pqn.make_train(config)(devices.seed_keys(0, 2))))
    again = jax.device_get(jax.tree.map(bits, pqn.make_train(config)(devices.seed_keys(0, 2))))
    for got, want in zip(jax.tree.leaves(again), jax.tree.leaves(first)):  # state, policy, metrics
        np.testing.assert_array_equal(got, want)
    q = first["policy"]["params"]["q"][0]["w"]
    assert not np.array_equal(q[0], q[1])
    assert not np.array_equal(first["metrics"]["td_loss"][0], first["metrics"]["td_loss"][1])
    np.testing.assert_allclose(first["metrics"]["epsilon"][0],
                               [pqn.exploration_epsilon(config, jnp.float32(u)) for u in range(6)],
                               rtol=1e-6)


@pytest.mark.slow
def test_learns_cartpole_at_its_preset(tmp_path):
    """purejaxql's CartPole settings (the file's defaults) at 3e5 of their 5e5 steps, seeds 0-3:
    the greedy evaluation after the last update averages at least 475 (10 seeds at 3e5 steps,
    benchmarks/RESULTS.md: every seed's last greedy evaluation 500, on two machines; at 2e5 one
    machine's 4-seed program fell to 453.4)."""
    config = compose(pqn, "CartPole-v1", num_seeds=4, total_timesteps=300_000, log_every=0, out_dir=str(tmp_path))
    summary = train_and_write("pqn", config, pqn.make_algorithm)
    assert summary["total_timesteps"] == 299_008  # 146 whole updates of 2,048 steps
    assert summary["eval_return_deterministic_mean"] >= 475, summary
    check_run_tools(summary["run_dir"])


@pytest.mark.slow
def test_epsilon_and_the_learning_rate_sweep_in_one_program(tmp_path):
    """--sweep over epsilon_end and learning_rate (PBT's natural targets) traces both: each
    row's logged epsilon ends at its epsilon_end and its learning rate starts at its own."""
    summary = pqn.main([*as_flags(SMALL), "--sweep", "epsilon_end=0.05,0.5", "--sweep", "learning_rate=1e-4,1e-3",
                        "--log-every", "0", "--eval-every", "0", "--out-dir", str(tmp_path)])
    run_dir = Path(summary["run_dir"])
    rows = json.loads((run_dir / "sweep.json").read_text())["configs"]
    metrics = np.load(run_dir / "metrics.npz")  # [configs, seeds, updates]
    assert metrics["epsilon"].shape[:2] == (4, 1) and len(rows) == 4
    for row in rows:
        i = row["config"]
        np.testing.assert_allclose(metrics["epsilon"][i, 0, -1], row["values"]["epsilon_end"], rtol=1e-6)
        np.testing.assert_allclose(metrics["learning_rate"][i, 0, 0], row["values"]["learning_rate"], rtol=1e-6)


@pytest.mark.slow
def test_normalize_obs_reads_the_running_statistics_of_the_rollouts():
    """--normalize-obs: with statistics that change nothing (mean 0, variance 1) an update
    computes what one without the flag does, to the bit, and its statistics take in the
    rollout's N x T reached observations; acting reads observations through the statistics
    (the greedy action is the argmax of Q(normalize(stats, obs))). Without the flag the state
    holds no statistics and the policy only its parameters."""
    config = pqn.default_config("CartPole-v1", **SMALL, normalize_obs=True)
    normed, plain = pqn.make_algorithm(config), pqn.make_algorithm(
        dataclasses.replace(config, normalize_obs=False))
    key = jax.random.key(3)
    assert plain.init(key).obs_stats is None and set(plain.policy_params(plain.init(key))) == {"params"}
    start = normed.init(key)
    assert float(start.obs_stats.count) == np.float32(1e-4)
    identity = envs.RunningStats(jnp.zeros(4), jnp.ones(4), jnp.float32(1e-4))
    after, _ = jax.jit(normed.update)(start._replace(obs_stats=identity), jnp.int32(0))
    want, _ = jax.jit(plain.update)(plain.init(key), jnp.int32(0))
    for got, expected in zip(jax.tree.leaves(after.params), jax.tree.leaves(want.params)):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(after.obs_stats.count, 1e-4 + config.batch_size, rtol=1e-6)
    assert np.abs(np.asarray(after.obs_stats.mean)).max() > 1e-3  # it took the observations in
    # acting: shift and scale the statistics far enough to change some greedy actions
    stats = envs.RunningStats(jnp.array([1.0, -2.0, 0.1, 3.0]), jnp.array([4.0, 0.25, 9.0, 1.0]),
                              jnp.float32(10.0))
    policy = {"params": after.params, "obs_stats": stats}
    obs = jnp.asarray(np.random.default_rng(0).normal(size=(64, 4)), jnp.float32)
    acted = normed.act(policy, obs, jax.random.key(0), deterministic=True)
    q = pqn.q_values(after.params, envs.normalize(stats, obs), config.activation)
    np.testing.assert_array_equal(acted, q.argmax(-1))
    assert (acted != pqn.q_values(after.params, obs, config.activation).argmax(-1)).any()


def test_craftax_recipe_is_purejaxqls_with_the_input_normalised():
    """Craftax's symbolic tasks take purejaxql's pqn_craftax.yaml as their published recipe:
    1,024 envs x 1 step, one full-batch step, one-step targets, a 4 x 1,024 layer-normed MLP on
    normalised input (its NORM_INPUT); the cpu form divides the envs and the budget by 32."""
    env = "craftax/Craftax-Symbolic-v1"
    config = pqn.default_config(env, recipe="published")
    assert (config.num_envs, config.num_steps, config.num_epochs, config.num_minibatches) == \
        (1024, 1, 1, 1)
    assert (config.hidden, config.norm, config.normalize_obs, config.q_lambda) == \
        ((1024,) * 4, "layer_norm", True, 0.0)
    assert (config.learning_rate, config.epsilon_start, config.epsilon_end,
            config.epsilon_fraction, config.max_grad_norm, config.total_timesteps) == \
        (1e-4, 0.1, 0.005, 0.2, 1.0, 1_000_000_000)
    cpu = pqn.default_config(env, recipe="cpu")
    assert (cpu.num_envs, cpu.total_timesteps, cpu.normalize_obs) == (32, 31_250_000, True)
    assert not pqn.default_config(env, recipe="none").normalize_obs


@pytest.mark.slow  # Jumanji's import and an env build
def test_jumanji_ids_start_from_the_jumanji_preset_and_other_files_keep_theirs():
    """Jumanji's discrete tasks start PQN from PRESETS["jumanji"] (Jumanji publishes no PQN
    recipe); PPO, which has no such preset, keeps its Config defaults there."""
    pytest.importorskip("jumanji")
    from scanrl.algos import ppo
    from scanrl.common import suites

    preset = pqn.PRESETS["jumanji"]
    assert suites.preset_name("jumanji/Snake-v1") == "jumanji"
    config = pqn.default_config("jumanji/Snake-v1")
    assert {field: getattr(config, field) for field in preset} == preset
    assert pqn.default_config("jumanji/Snake-v1", learning_rate=3e-4).learning_rate == 3e-4
    assert ppo.default_config("jumanji/Snake-v1") == ppo.Config(env="jumanji/Snake-v1")


@pytest.mark.slow
def test_a_masked_env_bootstraps_finite_values_through_its_episode_ends():
    """Jumanji's Snake (action masks): 8 updates of 2 seeds end episodes, and every TD loss
    stays finite (a mask with no valid action after an episode's end once gave a -inf
    bootstrap, and 0 x -inf a NaN)."""
    pytest.importorskip("jumanji")
    # the Config defaults (not the jumanji preset): their 8 updates end episodes in both seeds
    config = pqn.Config(env="jumanji/Snake-v1", total_timesteps=2048 * 8)
    metrics = jax.device_get(pqn.make_train(config)(devices.seed_keys(0, 2))["metrics"])
    assert metrics["episodes"].sum() > 0
    assert np.isfinite(metrics["td_loss"]).all() and np.isfinite(metrics["q_taken"]).all()
