"""JaxMARL's multi-agent environments (common/suites/jaxmarl.py) and the learners on them: the
adapter against JaxMARL's own step, time limits as truncations that bootstrap, masks, the
centralised critic's inputs, VDN's target, and a one-agent team that trains bit for bit as the
single-agent env. Skipped with the reason where the suite is not installed."""

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrl.algos import ppo, ppo_rnn, pqn, pqn_rnn
from scanrl.common import envs, suites
from scanrl.common.onpolicy import gae

SPREAD = "jaxmarl/MPE_simple_spread_v3"


@pytest.fixture(scope="module")
def jaxmarl():
    return pytest.importorskip(
        "jaxmarl", reason='the jaxmarl suite is not installed: pip install -e ".[jaxmarl]"')


@pytest.mark.slow
def test_mpe_steps_equal_jaxmarl_itself_and_its_time_limit_is_truncated(jaxmarl):
    """Same keys, same actions: each agent's row starts with JaxMARL's own observation of it and
    ends with the world state (every agent's observation); rewards are JaxMARL's. MPE ends only
    at its time limit (JaxMARL's `step >= max_steps` read before the step counts: the 26th step
    of max_steps 25): that step is `truncated` for every agent, never `terminated`, its final
    observation is JaxMARL's, and the next one a fresh episode's. With
    time_limit_as_termination 1 (JaxMARL's baselines' reading) the same step terminates."""
    env, params = suites.make(SPREAD)
    raw = jaxmarl.make("MPE_simple_spread_v3")
    assert env.num_agents == 3 and env.policy_obs_size == 18 and env.obs_dim == 18 + 54
    key = jax.random.key(0)
    obs, state = env.reset(key, params)
    raw_obs, raw_state = raw.reset(key)
    step, raw_step = jax.jit(env.step), jax.jit(raw.step_env)
    for t in range(26):
        action = jax.random.randint(jax.random.key(t), (3,), 0, 5)
        k_step, _ = jax.random.split(jax.random.fold_in(key, t))
        obs, state, reward, terminated, truncated, info = step(jax.random.fold_in(key, t), state,
                                                               action, params)
        raw_obs, raw_state, raw_reward, dones, _ = raw_step(
            k_step, raw_state, {a: action[i] for i, a in enumerate(raw.agents)})
        own = np.stack([raw_obs[a] for a in raw.agents])
        # equal up to float rounding: one side is jitted whole, the other step by step
        close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)  # noqa: E731
        close(info["final_observation"][:, :18], own)
        close(info["final_observation"][:, 18:], np.broadcast_to(own.reshape(-1), (3, 54)))
        close(reward, [raw_reward[a] for a in raw.agents])
        assert not terminated.any()
        assert truncated.tolist() == [bool(dones["__all__"])] * 3 == [t == 25] * 3
    fresh, _ = env.reset(jax.random.split(jax.random.fold_in(key, 25))[1], params)
    np.testing.assert_allclose(obs, fresh, rtol=1e-6, atol=1e-6)

    ended, _ = suites.make(SPREAD, {"time_limit_as_termination": "1"})
    _, state = ended.reset(key, params)
    ended_step = jax.jit(ended.step)  # one program for the 26 steps
    for t in range(26):
        _, state, _, terminated, truncated, _ = ended_step(
            jax.random.fold_in(key, t), state, jnp.zeros(3, jnp.int32), params)
    assert terminated.all() and not truncated.any()


def test_every_mpe_task_the_suite_names_builds_with_discrete_actions_and_its_mask(jaxmarl):
    """Each MPE task in the suite's names builds and its reset and step trace (shapes only),
    with JaxMARL's discrete actions even where its default is continuous (simple_world_comm:
    its lead adversary's 20 actions, moves times messages, the others' 5); the mask gives each
    agent exactly its own actions."""
    from jaxmarl.environments.mpe.default_params import DISCRETE_ACT

    from scanrl.common.suites import jaxmarl as adapter
    names = [n for n in adapter.NAMES() if n.startswith("MPE_")]
    assert len(names) == len(adapter.MPE) and "MPE_simple_world_comm_v3" in names
    key = jax.random.key(0)
    for name in names:
        env, params = suites.make(f"jaxmarl/{name}")
        raw = jaxmarl.make(name, action_type=DISCRETE_ACT)
        assert env.action_counts == [raw.action_space(a).n for a in raw.agents], name
        obs, state = jax.eval_shape(env.reset, key, params)
        assert obs.shape == (env.num_agents, env.obs_dim), name
        action = jnp.zeros(env.num_agents, jnp.int32)
        assert jax.eval_shape(env.step, key, state, action, params)[0].shape == obs.shape, name
    env, params = suites.make("jaxmarl/MPE_simple_world_comm_v3")
    mask = np.asarray(env.action_mask(env.reset(key, params)[1]))
    np.testing.assert_array_equal(mask.sum(1), [20, 5, 5, 5, 5, 5])
    assert mask[:, :5].all() and not mask[1:, 5:].any()


def test_agents_of_different_sizes_share_rows_zero_padded_and_masked(jaxmarl):
    """MPE simple_tag: the adversaries see 16 numbers and the runner 14; each row is the agent's
    own observation from JaxMARL, zeros up to the widest, then (agent_id 1) its one-hot id.
    simple_speaker_listener: the speaker's 3 actions and the listener's 5, the speaker's other 2
    masked."""
    env, params = suites.make("jaxmarl/MPE_simple_tag_v3", {"agent_id": "1", "world_state": "0"})
    raw = jaxmarl.make("MPE_simple_tag_v3")
    key = jax.random.key(4)
    rows, _ = env.reset(key, params)
    raw_obs, _ = raw.reset(key)
    assert env.obs_dims == [16, 16, 16, 14] and rows.shape == (4, 16 + 4)
    for i, agent in enumerate(raw.agents):
        d = env.obs_dims[i]
        np.testing.assert_array_equal(rows[i, :d], raw_obs[agent])
        assert not rows[i, d:16].any()
        np.testing.assert_array_equal(rows[i, 16:], np.eye(4)[i])
    env, params = suites.make("jaxmarl/MPE_simple_speaker_listener_v4")
    mask = np.asarray(env.action_mask(env.reset(key, params)[1]))
    np.testing.assert_array_equal(mask, [[True] * 3 + [False] * 2, [True] * 5])


@pytest.mark.slow
def test_an_mpe_time_limit_bootstraps_where_jaxmarls_baseline_does_not(jaxmarl):
    """PPO's advantages over a VecEnv rollout of MPE that crosses the time limit equal a Python
    loop that bootstraps the cut from V(final observation): at the episode's last step t = 25,
    A = r + gamma V(s'_25) - V(s_25); JaxMARL's ippo_ff_mpe.py multiplies that V by
    (1 - done) = 0."""
    vec_env = envs.VecEnv(*suites.make(SPREAD), 2)
    assert vec_env.num_envs == 6 and vec_env.num_agents == 3
    w = jax.random.normal(jax.random.key(1), (vec_env.obs_dim,))
    v = lambda obs: obs @ w  # noqa: E731  a fixed value function [..., obs] -> [...]
    obs, state = vec_env.reset(jax.random.key(2))
    rows, step = [], jax.jit(vec_env.step)
    for t in range(30):
        action = jax.random.randint(jax.random.key(10 + t), (6,), 0, 5)
        next_obs, state, info = step(jax.random.key(100 + t), state, action)
        rows.append((obs, info))
        obs = next_obs
    values = jnp.stack([v(o) for o, _ in rows])
    info = jax.tree.map(lambda *x: jnp.stack(x), *[i for _, i in rows])
    next_values = v(info.final_obs)
    gamma, lam = 0.99, 0.95
    advantages, _ = gae(info.reward, values, next_values, info.terminated,
                        info.terminated | info.truncated, gamma, lam)
    assert info.truncated[25].all() and not info.terminated.any() and not info.truncated[:25].any()
    expected, following = np.zeros((30, 6)), np.zeros(6)
    for t in reversed(range(30)):
        r, d = np.asarray(info.reward[t]), np.asarray(info.truncated[t], float)
        delta = r + gamma * np.asarray(next_values[t]) - np.asarray(values[t])
        following = delta + gamma * lam * (1 - d) * following
        expected[t] = following
    np.testing.assert_allclose(advantages, expected, rtol=1e-5, atol=1e-5)
    cut = np.asarray(info.reward[25]) - np.asarray(values[25])  # JaxMARL's: no bootstrap
    assert np.abs(np.asarray(advantages[25]) - cut).min() > 1e-3


@pytest.mark.slow
def test_smax_steps_equal_jaxmarl_itself_with_its_masks_and_world_state(jaxmarl):
    """SMAX 2s3z against JaxMARL's heuristic enemies: rows carry JaxMARL's observations and its
    own world_state, the mask is its available actions, a battle's end is `terminated` and its
    time limit `truncated`, and a battle won is a win where JaxMARL's own logs count one."""
    from jaxmarl.environments.smax import map_name_to_scenario
    env, params = suites.make("jaxmarl/SMAX_2s3z")
    raw = jaxmarl.make("HeuristicEnemySMAX", scenario=map_name_to_scenario("2s3z"))
    key = jax.random.key(3)
    obs, state = env.reset(key, params)
    raw_obs, raw_state = raw.reset(key)
    own = env.policy_obs_size
    step, raw_step = jax.jit(env.step), jax.jit(raw.step_env)
    for t in range(40):
        avail = raw.get_avail_actions(raw_state)
        mask = np.stack([avail[a] for a in raw.agents]).astype(bool)
        np.testing.assert_array_equal(env.action_mask(state, params), mask)
        action = jax.random.categorical(jax.random.key(t), jnp.where(mask, 0.0, -jnp.inf))
        k_step, _ = jax.random.split(jax.random.fold_in(key, t))
        obs, state, reward, terminated, truncated, info = step(jax.random.fold_in(key, t), state,
                                                               action, params)
        raw_obs, raw_state, raw_reward, dones, _ = raw_step(
            k_step, raw_state, {a: action[i] for i, a in enumerate(raw.agents)})
        final = info["final_observation"]
        np.testing.assert_allclose(final[:, :own], np.stack([raw_obs[a] for a in raw.agents]))
        np.testing.assert_allclose(final[:, own:], np.broadcast_to(raw_obs["world_state"],
                                                                   final[:, own:].shape))
        np.testing.assert_allclose(reward, [raw_reward[a] for a in raw.agents])
        if dones["__all__"]:
            assert terminated.all() != truncated.all()
            break
    # a battle's three ends from a fresh start, every ally standing still: the time limit (the
    # step that finds 100 taken) is truncated; every enemy down a win, terminated, where
    # JaxMARL's own logs count a win (each agent's reward at least 1 on the battle's last
    # step); every ally down a loss, terminated
    _, start = env.reset(key, params)
    smax, allies, stop = start.inner.state, raw.num_allies, jnp.full(env.num_agents, 4)
    health = smax.unit_health
    for change, ends in ((dict(step=raw.max_steps - 1), (False, False, 0.0)),
                         (dict(step=raw.max_steps), (False, True, 0.0)),
                         (dict(unit_health=health.at[allies:].set(0.0)), (True, False, 1.0)),
                         (dict(unit_health=health.at[:allies].set(0.0)), (True, False, 0.0))):
        begun = start.replace(inner=start.inner.replace(state=smax.replace(**change)))
        assert env.action_mask(begun, params)[:, 4].all()  # standing still is allowed
        _, _, reward, terminated, truncated, info = step(key, begun, stop, params)
        won = np.asarray(info["outcomes"]["win_rate"])
        assert (terminated.all(), truncated.all(), won[0]) == ends, change
        assert not (terminated.any() ^ terminated.all() or truncated.any() ^ truncated.all())
        np.testing.assert_array_equal(won, np.asarray(reward) >= 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["jaxmarl/SMAX_2s3z", "jaxmarl/hanabi"])
def test_masks_are_never_violated_over_10000_steps(jaxmarl, env_id):
    """PPO's sampled actions (its `act`, as its rollouts sample them) through VecEnv over 10,240
    steps of 64 envs: every agent's action is one its mask allows, and the masks do forbid some
    (SMAX's dead or out-of-range units, Hanabi's other player's turn)."""
    config = ppo.default_config(env_id, num_envs=64, total_timesteps=10_240, num_steps=160)
    alg = ppo.make_algorithm(config)
    vec_env = alg.vec_env
    state = alg.init(jax.random.key(0))
    policy_params = alg.policy_params(state)

    def step(carry, key):
        env_state, obs = carry
        mask = vec_env.action_mask(env_state)
        action = alg.act(policy_params, obs, key, False, mask)
        obs, env_state, _ = vec_env.step(jax.random.fold_in(key, 1), env_state, action)
        return (env_state, obs), (jnp.take_along_axis(mask, action[:, None], -1)[:, 0],
                                  mask.all())

    obs, env_state = vec_env.reset(jax.random.key(1))
    _, (allowed, unmasked) = jax.jit(lambda k: jax.lax.scan(
        step, (env_state, obs), jax.random.split(k, 160)))(jax.random.key(2))
    assert allowed.shape == (160, 64 * vec_env.num_agents) and bool(allowed.all())
    assert not bool(unmasked.all())


@pytest.mark.slow
def test_the_centralised_critic_reads_the_world_state_and_the_policy_never_does(jaxmarl):
    """ppo.py with --critic-obs privileged_state on a JaxMARL env is MAPPO: changing the world
    state changes V and not the policy; changing an agent's own observation changes its policy
    and not V."""
    config = ppo.default_config("jaxmarl/SMAX_2s3z", critic_obs="privileged_state")
    vec_env = envs.VecEnv(*suites.make(config.env), 2)
    params = ppo.init_params(jax.random.key(0), config, vec_env)
    obs, _ = vec_env.reset(jax.random.key(1))
    own = vec_env.policy_obs_dim
    noise = jax.random.normal(jax.random.key(2), obs.shape)
    world_changed = obs.at[:, own:].add(noise[:, own:])
    own_changed = obs.at[:, :own].add(noise[:, :own])

    def read(o):
        policy_obs, value_obs = ppo.network_inputs(vec_env, o, critic_obs=config.critic_obs)
        return (ppo.policy(params, policy_obs, config.activation).logits,
                ppo.value(params, value_obs, config.activation))

    logits, v = read(obs)
    logits_w, v_w = read(world_changed)
    logits_o, v_o = read(own_changed)
    np.testing.assert_array_equal(logits_w, logits)
    np.testing.assert_array_equal(v_o, v)
    assert not np.allclose(v_w, v) and not np.allclose(logits_o, logits)


@pytest.mark.slow
def test_the_recurrent_centralised_critic_reads_the_world_state_and_the_policy_never_does(jaxmarl):
    """ppo_rnn.py with --critic-obs privileged_state is recurrent MAPPO: over 6 steps through both
    GRUs, a changed world state changes V and never the policy; a changed own observation
    changes the policy and never V. Its replay reproduces the rollout's log-probabilities (one
    epoch of one minibatch: the ratio is 1 to the rounding of a log-probability)."""
    from scanrl.common.harness import devices

    config = ppo_rnn.default_config(SPREAD, critic_obs="privileged_state", recipe="none",
                                    num_envs=4, num_steps=32, num_epochs=1, num_minibatches=1,
                                    total_timesteps=4 * 32 * 2)
    vec_env = envs.VecEnv(*suites.make(config.env), 2)
    params = ppo_rnn.init_params(jax.random.key(0), config, vec_env)
    own = vec_env.policy_obs_dim
    obs = jax.random.normal(jax.random.key(1), (6, vec_env.num_envs, vec_env.obs_dim))
    noise = jax.random.normal(jax.random.key(2), obs.shape)
    start = jnp.zeros(obs.shape[:2], bool).at[0].set(True)

    def read(o):
        states = ppo_rnn.unroll(params, jnp.zeros((vec_env.num_envs, 2 * config.gru_size)), o,
                                start, config.activation)
        return (ppo_rnn.policy(params, states, config.activation).logits,
                ppo_rnn.value(params, states, config.activation))

    logits, v = read(obs)
    logits_w, v_w = read(obs.at[..., own:].add(noise[..., own:]))
    logits_o, v_o = read(obs.at[..., :own].add(noise[..., :own]))
    np.testing.assert_array_equal(logits_w, logits)
    np.testing.assert_array_equal(v_o, v)
    assert not np.allclose(v_w, v) and not np.allclose(logits_o, logits)

    metrics = jax.device_get(ppo_rnn.make_train(config)(devices.seed_keys(0, 1)))["metrics"]
    assert np.isfinite(metrics["team_return"]).all()
    # two float32 steps of a log-probability in (-2, -1] (MPE's 5 actions start near -1.6): the
    # rollout computes each step's GRU inputs alone, the replay a sequence's in one matmul
    bound = np.spacing(np.float32(2.0))
    assert (metrics["max_abs_log_ratio"] <= bound).all(), metrics["max_abs_log_ratio"]
    with pytest.raises(ValueError, match=r"^--critic-obs privileged_state: --env CartPole-v1 "):
        ppo_rnn.make_algorithm(ppo_rnn.default_config(critic_obs="privileged_state"))


@pytest.mark.slow
def test_without_the_world_state_the_rows_are_the_policy_part_and_ippo_trains_the_same(jaxmarl):
    """world_state 0 (the IPPO and PQN recipes' option): each row is the policy's part of the
    full row and nothing else, step by step; IPPO (ppo.py, the critic on the policy's part)
    trains on it to the same parameters and metrics, bit for bit; a centralised critic is
    refused in one sentence naming the option. Overcooked's and MPE's recipes set it, SMAX's
    (MAPPO's) does not."""
    from scanrl.common.harness.runconfig import compose

    full, params = suites.make(SPREAD, {"agent_id": "1"})
    rows, _ = suites.make(SPREAD, {"agent_id": "1", "world_state": "0"})
    own = full.policy_obs_size
    assert rows.policy_obs_size == rows.obs_dim == own == 18 + 3 < full.obs_dim
    key = jax.random.key(0)
    (obs_f, state_f), (obs_r, state_r) = full.reset(key, params), rows.reset(key, params)
    step_f, step_r = jax.jit(full.step), jax.jit(rows.step)
    # equal up to float rounding: XLA may fuse an observation's arithmetic otherwise when the
    # step no longer builds the world state beside it
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)  # noqa: E731
    for t in range(27):  # past the time limit: a reset's rows too
        close(obs_r, obs_f[:, :own])
        action = jax.random.randint(jax.random.key(t), (3,), 0, 5)
        obs_f, state_f, *out_f = step_f(jax.random.fold_in(key, t), state_f, action, params)
        obs_r, state_r, *out_r = step_r(jax.random.fold_in(key, t), state_r, action, params)
        close(out_r[-1].pop("final_observation"), out_f[-1].pop("final_observation")[:, :own])
        for a, b in zip(jax.tree.leaves(out_r), jax.tree.leaves(out_f)):
            close(a, b)

    config = ppo.default_config(SPREAD, total_timesteps=4 * 16 * 3, num_envs=4, num_steps=16,
                                num_minibatches=2, actor_hidden=(16,), critic_hidden=(16,))
    keys = jax.random.split(jax.random.key(1), 2)
    got = ppo.make_train(config, rows, params, num_devices=1)(keys)
    want = ppo.make_train(config, full, params, num_devices=1)(keys)
    for a, b in zip(jax.tree.leaves((got["policy"]["params"], got["metrics"])),
                    jax.tree.leaves((want["policy"]["params"], want["metrics"]))):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"^--critic-obs privileged_state: --env .* world_state 0"):
        ppo.make_algorithm(dataclasses.replace(config, critic_obs="privileged_state"), rows, params)

    assert ("world_state", "0") in zip(*[iter(compose(
        ppo, "jaxmarl/overcooked_cramped_room", recipe="cpu").run.env_options)] * 2)
    assert "world_state" not in compose(ppo_rnn, "jaxmarl/SMAX_2s3z", recipe="cpu").run.env_options


@pytest.mark.slow
def test_an_agents_q_values_read_its_own_observation_and_never_the_world_state(jaxmarl):
    """PQN-VDN (Q_team = sum_i Q(o_i, a_i)) acts on each agent's own observation: the
    Q-network's first layer is as wide as the policy's part, a changed world state never
    changes an action, and a changed own observation does."""
    config = pqn.default_config(SPREAD, recipe="none", vdn=True, num_envs=64, num_steps=4,
                                total_timesteps=64 * 4)
    algo = pqn.make_algorithm(config)
    vec_env, own = algo.vec_env, algo.vec_env.policy_obs_dim
    policy = algo.policy_params(algo.init(jax.random.key(0)))
    assert own < vec_env.obs_dim and policy["params"]["q"][0]["w"].shape[0] == own
    obs, _ = vec_env.reset(jax.random.key(1))
    noise = 10 * jax.random.normal(jax.random.key(2), obs.shape)
    greedy = lambda o: algo.act(policy, o, jax.random.key(3), True)  # noqa: E731
    actions = greedy(obs)
    np.testing.assert_array_equal(greedy(obs.at[:, own:].add(noise[:, own:])), actions)
    assert (greedy(obs.at[:, :own].add(noise[:, :own])) != actions).any()


@pytest.mark.slow
@pytest.mark.parametrize("name, steps, bar", [("ppo", 500_000, -25.0), ("pqn", 80_000, -22.0)])
def test_ippo_and_pqn_vdn_learn_to_spread(jaxmarl, tmp_path, name, steps, bar):
    """IPPO (ppo.py at JaxMARL's ippo_ff_mpe.yaml) and PQN-VDN (pqn.py at its pqn_vdn_ff_mpe.yaml,
    the cpu form) on MPE spread, seeds 0-3: the greedy evaluation after the last update averages
    at least `bar`, where a uniform random policy returns -27.81 (64 episodes,
    benchmarks/random_policy.py). Budgets and bars from 10 seeds (seeds 0-9, RESULTS.md section
    3, `python benchmarks/learning.py --seeds 10 ippo_spread pqn_vdn_spread`): IPPO at 5e5
    steps ends at -22.19 to -24.04 (any 4 seeds average at least -23.54; at 4e5 -24.10),
    PQN-VDN at 8e4 steps at -17.71 to -22.65 (any 4 at least -20.61)."""
    from scanrl.common.harness.run import train_and_write
    from scanrl.common.harness.runconfig import compose

    module = {"ppo": ppo, "pqn": pqn}[name]
    config = compose(module, SPREAD, recipe="cpu", num_seeds=4, total_timesteps=steps,
                     eval_episodes=64, log_every=0, out_dir=str(tmp_path))
    summary = train_and_write(name, config, module.make_algorithm)
    assert summary["eval_return_deterministic_mean"] >= bar, summary


def test_the_vdn_target_equals_a_loop_over_agents():
    """common/qlearning.py's vdn_returns (pqn.py's and pqn_rnn.py's) against plain Python: per team, the reward its agents share (MPE: their
    sum), the bootstrap sum_i max_a Q(o'_i, a), and Q(lambda)'s recursion over the team's
    episode ends; rows are agent-minor ([T, N * M], VecEnv's)."""
    T, N, M, gamma, lam = 7, 3, 2, 0.9, 0.3
    k = jax.random.split(jax.random.key(0), 3)
    rewards = jax.random.normal(k[0], (T, N * M))
    next_q = jax.random.normal(k[1], (T, N * M))
    ends = jax.random.bernoulli(k[2], 0.3, (T, N))
    terminated = jnp.repeat(ends & (jnp.arange(T)[:, None] % 2 == 0), M, axis=1)
    done = jnp.repeat(ends, M, axis=1)
    got = pqn.vdn_returns(rewards, next_q, terminated, done, M, lambda r: r.sum(-1), gamma, lam)
    r, q = np.asarray(rewards), np.asarray(next_q)
    for n in range(N):
        agents = [n * M + i for i in range(M)]
        following = sum(q[T - 1, i] for i in agents)
        for t in reversed(range(T)):
            team_r = sum(r[t, i] for i in agents)
            team_q = sum(q[t, i] for i in agents)
            term, d = float(terminated[t, agents[0]]), float(done[t, agents[0]])
            following = team_r + gamma * (1 - term) * (team_q + lam * (1 - d) *
                                                       (following - team_q))
            assert got[t, n] == pytest.approx(following, rel=1e-5, abs=1e-5)


@pytest.mark.slow
def test_a_vdn_loss_sums_each_teams_agents_q_values():
    """td_loss with --vdn reads a team [B, M, obs] and compares sum_i Q(o_i, a_i) with its
    target; without it, each row is its own sample. pqn_rnn.py's alike reads a team's M
    sequences [B, M, T, ...] (target [B, T]), against each agent's sequences replayed alone."""
    rng = np.random.default_rng(1)  # numpy's draws: no program to compile for each
    normal = lambda *shape: rng.normal(size=shape).astype(np.float32)  # noqa: E731
    vec_env = envs.VecEnv(*suites.make("CartPole-v1"), 1)
    config = pqn.Config(vdn=True, hidden=(8,))
    params = jax.jit(lambda key: pqn.init_q_network(key, config, vec_env))(jax.random.key(0))
    obs, action, target = normal(5, 3, 4), rng.integers(0, 2, (5, 3)), normal(5)
    loss = jax.jit(lambda p, b, c: pqn.td_loss(p, b, c)[0], static_argnums=2)
    q = np.asarray(jax.jit(pqn.q_values, static_argnums=2)(params, obs, config.activation))
    taken = np.take_along_axis(q, action[..., None], -1)[..., 0]  # [B, M]
    assert float(loss(params, pqn.Batch(obs, action, target), config)) == pytest.approx(
        0.5 * np.mean((taken.sum(-1) - target) ** 2), rel=1e-5)
    rows = pqn.Batch(obs.reshape(15, 4), action.reshape(15), normal(15))
    assert float(loss(params, rows, dataclasses.replace(config, vdn=False))) == pytest.approx(
        0.5 * np.mean((taken.reshape(15) - rows.target) ** 2), rel=1e-5)

    config = pqn_rnn.Config(vdn=True, hidden=(8,), gru_size=8)
    params = jax.jit(lambda key: pqn_rnn.init_q_network(key, config, vec_env))(jax.random.key(0))
    seqs = pqn_rnn.Sequences(hidden=normal(5, 3, 8), obs=normal(5, 3, 6, 4),
                             start=rng.random((5, 3, 6)) < 0.2,
                             action=rng.integers(0, 2, (5, 3, 6)), target=normal(5, 6))
    loss, _ = jax.jit(lambda p, s: pqn_rnn.td_loss(p, s, config))(params, seqs)

    def agents_q(params, seqs):  # Q(h_t, a_t) [T, B, M], each agent's sequences replayed alone
        taken = []
        for i in range(3):
            agent = seqs._replace(**{f: getattr(seqs, f)[:, i]
                                     for f in ("hidden", "obs", "start", "action")})
            q = pqn_rnn.replay(params, agent, config)  # [T, B, A]
            taken.append(jnp.take_along_axis(q, agent.action.T[..., None], -1)[..., 0])
        return jnp.stack(taken, -1)

    team_q = np.asarray(jax.jit(agents_q)(params, seqs)).sum(-1)
    assert float(loss) == pytest.approx(0.5 * np.mean((team_q - seqs.target.T) ** 2), rel=1e-5)


@pytest.mark.slow
def test_vdn_and_grpo_refuse_what_they_cannot_train(jaxmarl):
    """--vdn needs a team; GRPO's groups are one agent's episodes; --env-options names the
    suite's switches: one sentence each, before compiling."""
    for algo in (pqn, pqn_rnn):
        with pytest.raises(ValueError, match=r"^--vdn sums a team's agents' Q-values and --env "
                                             r"CartPole-v1 has one agent"):
            algo.make_algorithm(algo.Config(vdn=True))
    from scanrl.algos import grpo
    with pytest.raises(ValueError, match=rf"^GRPO trains one agent and --env {SPREAD} has 3; "):
        grpo.make_algorithm(grpo.default_config(SPREAD, recipe="none"))
    # an option the suite does not know, or a value it does not take, is never silently off
    with pytest.raises(ValueError, match=r"^--env-options shapng: jaxmarl envs take agent_id, "):
        suites.make(SPREAD, {"shapng": "1"})
    with pytest.raises(ValueError, match=r"^--env-options shaping yes: give 0 or 1\.$"):
        suites.make(SPREAD, {"shaping": "yes"})
    with pytest.raises(ValueError, match=r"^--env-options shaping_anneal 1e6: give a whole "):
        suites.make("jaxmarl/overcooked_cramped_room", {"shaping_anneal": "1e6"})
    with pytest.raises(ValueError, match=r"^--env-options shaping 0 shaping_anneal 5: an anneal "):
        suites.make("jaxmarl/overcooked_cramped_room", {"shaping": "0", "shaping_anneal": "5"})
    for option in ("shaping", "shaping_anneal"):  # on an env without a shaped reward
        with pytest.raises(ValueError, match=rf"^--env-options {option}: jaxmarl/MPE_simple_"):
            suites.make(SPREAD, {option: "1"})
    # an unknown SMAX map or Overcooked layout: the nearest names the suite has
    for wrong, near in (("SMAX_2s3y", "SMAX_2s3z"), ("overcooked_cramped", "overcooked_cramped_")):
        with pytest.raises(ValueError, match=rf"^--env 'jaxmarl/{wrong}' is not a jaxmarl "
                                             rf"environment\. Did you mean 'jaxmarl/{near}"):
            suites.make(f"jaxmarl/{wrong}")


@pytest.mark.slow
def test_overcookeds_shaped_reward_anneals_per_environment_and_evaluations_score_the_task(
        jaxmarl):
    """shaping_anneal N: the reward is JaxMARL's task reward plus its shaped reward weighed
    1 - steps / N (0 from N on), steps counted over every episode of the environment; each
    episode's unshaped return is its `task_return`; an evaluation weighs the shaping 0. The
    rows are JaxMARL's own uint8 observations as floats: its step's as `final_observation`,
    and as the next observation its step's, or its reset's where the time limit ended the
    episode (the adapter chooses between them before making rows)."""
    from types import SimpleNamespace

    from scanrl.common.harness import loop
    env, params = suites.make("jaxmarl/overcooked_cramped_room", {"shaping_anneal": "300"})
    n, steps = 32, 500  # an episode is 400 steps: the clock runs on through the reset

    def rows(obs):  # JaxMARL's dicts -> [n, 2, own | world state]: each agent's, then both
        own = jnp.stack([obs[a].reshape(n, -1) for a in ("agent_0", "agent_1")], 1)
        world = jnp.broadcast_to(own.reshape(n, 1, -1), (n, 2, 2 * own.shape[-1]))
        return jnp.concatenate([own, world], -1).astype(jnp.float32)

    def step(state, key):
        k_act, k_env = jax.random.split(key)
        action = jax.random.randint(k_act, (n, 2), 0, 6)
        keys = jax.random.split(k_env, n)
        # JaxMARL's own step from the key the adapter's step_env gets
        own = jax.vmap(lambda k, s, a: env.env.step_env(
            jax.random.split(k)[0], s.inner, {"agent_0": a[0], "agent_1": a[1]}))(
            keys, state, action)
        started = jax.vmap(lambda k: env.env.reset(jax.random.split(k)[1])[0])(keys)
        task = own[2]["agent_0"]
        shaped = jnp.stack([own[4]["shaped_reward"][a] for a in ("agent_0", "agent_1")], -1)
        obs, new, reward, _, truncated, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            keys, state, action, params)
        ended = truncated[:, :1, None]
        same = ((info["final_observation"] == rows(own[0])).all()
                & (obs == jnp.where(ended, rows(started), rows(own[0]))).all())
        return new, (reward, task, shaped, state.steps, truncated[:, 0],
                     info["outcomes"]["task_return"], same)

    _, state = jax.vmap(env.reset_env, in_axes=(0, None))(jax.random.split(jax.random.key(0), n),
                                                          params)
    _, (reward, task, shaped, clock, ended, task_return, same) = jax.jit(
        lambda s: jax.lax.scan(step, s, jax.random.split(jax.random.key(1), steps)))(state)
    reward, task, shaped, clock = map(np.asarray, (reward, task, shaped, clock))
    np.testing.assert_array_equal(clock, np.broadcast_to(np.arange(steps)[:, None], (steps, n)))
    weight = np.clip(1 - clock.astype(np.float32) / np.float32(300), 0, 1)[..., None]
    np.testing.assert_allclose(reward, task[..., None] + weight * shaped, rtol=0, atol=1e-6)
    assert (shaped[:300] > 0).sum() > 10, "random play shapes some steps: the check bites"
    assert (shaped[300:] > 0).any() and (reward[300:] == task[300:, :, None]).all()
    # the first episodes end at step 400, their task return the sum of the task rewards
    assert np.asarray(ended)[399].all() and not np.asarray(ended)[:399].any()
    np.testing.assert_allclose(np.asarray(task_return)[399],
                               np.repeat(task[:400].sum(0)[:, None], 2, -1), rtol=1e-6)
    assert np.asarray(same).all()
    # an evaluation scores the task alone, with --eval-env-params on top
    run = SimpleNamespace(env_params={"shaping": 0.5}, eval_env_params={})
    assert loop.evaluation_params(run, env, params).shaping == 0.0
    run = SimpleNamespace(env_params={}, eval_env_params={"shaping": 0.5})
    assert loop.evaluation_params(run, env, params).shaping == 0.5


class OneAgent:
    """CartPole as a team of one: every leaf gains an agent axis [1, ...] (suites.EnvHooks'
    num_agents), nothing else changes."""

    num_agents = 1

    def __init__(self):
        self.inner, self.default_params = suites.make("CartPole-v1")

    def reset(self, key, params):
        obs, state = self.inner.reset(key, params)
        return obs[None], state

    def step(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = self.inner.step(key, state, action[0],
                                                                          params)
        info = {**info, "final_observation": info["final_observation"][None]}
        return obs[None], state, reward[None], terminated[None], truncated[None], info

    def action_space(self, params):
        return self.inner.action_space(params)

    def observation_space(self, params):
        return self.inner.observation_space(params)


@pytest.mark.slow
@pytest.mark.parametrize("algo, team_fields", [
    (ppo, dict(num_steps=128)), (ppo_rnn, dict(num_steps=32, num_minibatches=2)),
    (pqn, dict(num_steps=128)), (pqn_rnn, dict(num_steps=32, num_minibatches=2, vdn=True))],
    ids=["ppo", "ppo_rnn", "pqn", "pqn_rnn"])
def test_a_one_agent_team_trains_bit_for_bit_as_the_single_agent_env(algo, team_fields):
    """The agent axis is only a batch axis: PPO (IPPO), recurrent PPO (recurrent IPPO), PQN
    and recurrent PQN with --vdn (a team of one is its agent: its sequences replayed as a
    team's) on CartPole as a team of one end with the same parameters and metrics, bit for
    bit, as on CartPole."""
    fields = {k: v for k, v in team_fields.items() if k != "vdn"}
    config = algo.default_config("CartPole-v1", total_timesteps=4 * fields["num_steps"] * 4,
                                 num_envs=4, **fields)
    keys = jax.random.split(jax.random.key(0), 2)
    single = algo.make_train(config, num_devices=1)(keys)
    vdn = team_fields.get("vdn", False)
    team = algo.make_train(dataclasses.replace(config, vdn=True) if vdn else config, OneAgent(),
                           OneAgent().default_params, num_devices=1)(keys)
    assert set(team["metrics"]) == set(single["metrics"]) | {"team_return", "agent_0_return"}
    np.testing.assert_array_equal(team["metrics"]["team_return"],
                                  single["metrics"]["episode_return"])
    team["metrics"] = {k: team["metrics"][k] for k in single["metrics"]}
    for a, b in zip(jax.tree.leaves((single["policy"], single["metrics"])),
                    jax.tree.leaves((team["policy"], team["metrics"]))):
        np.testing.assert_array_equal(a, b)


def test_episode_metrics_of_a_team_report_the_teams_and_each_agents_return():
    """envs.episode_metrics with a VecEnv of agents: rows are agent-minor; `team_return` is the
    team reward of the agents' returns (here their sum, the default), `agent_i_return` each
    agent's, over the episodes that ended; an env's outcome (win_rate) is averaged over the
    episodes that ended."""
    class Team:  # only what VecEnv reads to size its rows
        num_agents = 2
        team_reward = staticmethod(lambda r: r.sum(-1))

    vec_env = envs.VecEnv.__new__(envs.VecEnv)
    vec_env.env, vec_env.num_agents, vec_env.team_reward = Team(), 2, Team.team_reward
    # two steps of 2 games x 2 agents: game 0 ends at step 0, game 1 at step 1
    done = jnp.array([[True, True, False, False], [False, False, True, True]])
    returns = jnp.array([[1.0, 3.0, 0.0, 0.0], [0.0, 0.0, 5.0, 7.0]])
    won = jnp.array([[1.0, 1.0, 9.0, 9.0], [9.0, 9.0, 0.0, 0.0]])  # 9: not at an end, ignored
    info = envs.StepInfo(reward=jnp.zeros((2, 4)), terminated=done, truncated=jnp.zeros_like(done),
                         final_obs=jnp.zeros((2, 4, 1)), episode_return=returns,
                         episode_length=jnp.where(done, 10, 0), outcomes={"win_rate": won})
    m = envs.episode_metrics(info, vec_env)
    assert float(m["episode_return"]) == 4.0 and int(m["episodes"]) == 4
    assert float(m["team_return"]) == (4.0 + 12.0) / 2
    assert float(m["agent_0_return"]) == 3.0 and float(m["agent_1_return"]) == 5.0
    assert float(m["win_rate"]) == 0.5
    assert set(envs.episode_metrics(info._replace(outcomes=None))) == {
        "episode_return", "episode_length", "episodes"}


def test_vecenv_rows_are_agent_minor_and_games_inverts_them():
    """VecEnv.rows: [N, M, ...] -> [N * M, ...] with a game's agents adjacent; games inverts
    it; an env without agents passes through both unchanged."""
    vec_env = envs.VecEnv.__new__(envs.VecEnv)
    vec_env.num_agents, vec_env.num_games = 3, 2
    x = jnp.arange(2 * 3 * 4).reshape(2, 3, 4)
    rows = vec_env.rows(x)
    np.testing.assert_array_equal(rows[4], x[1, 1])
    np.testing.assert_array_equal(vec_env.games(rows), x)
    vec_env.num_agents = None
    assert vec_env.rows(x) is x and vec_env.games(x) is x


@pytest.mark.slow
def test_a_three_agent_team_trains_evaluates_draws_and_resumes_through_the_command_line(
        jaxmarl, tmp_path):
    """IPPO on MPE spread (3 agents: each update's rollout is 4 games x 3 agents = 12 rows, which
    a team of one cannot show) through ppo's command line: the run records the team's and each
    agent's return, scanrl-eval reproduces its last evaluation, curves.png and an episode's GIF
    are drawn, and a run cut short and resumed ends bit for bit as the one that never stopped."""
    from conftest import assert_same_run, check_run_tools
    from PIL import Image

    from scanrl import algos
    from scanrl.common.harness import evaluate

    args = ["--env", SPREAD, "--num-envs", "4", "--num-steps", "16", "--num-minibatches", "2",
            "--total-timesteps", str(4 * 16 * 6), "--num-seeds", "2", "--eval-every", "3",
            "--eval-episodes", "4", "--log-every", "1", "--checkpoint-every", "2"]
    ref = ppo.main([*args, "--out-dir", str(tmp_path / "ref")])["run_dir"]
    metrics = np.load(f"{ref}/metrics.npz")
    assert {"team_return", "agent_0_return", "agent_2_return"} <= set(metrics.files)
    assert metrics["team_return"].shape == metrics["episode_return"].shape == (2, 6)
    check_run_tools(ref)
    # the run's own episode count: the evaluation program check_run_tools compiled serves again
    result = evaluate.main([ref, "--episodes", "4", "--gif", str(tmp_path / "spread.gif"),
                            "--cross-play", "--out", str(tmp_path / "eval.json")], algos)
    assert result["gif"] == str(tmp_path / "spread.gif")
    # cross-play: the diagonal is each seed's own last evaluation; off it, agent 0 and the
    # others follow different policies (MPE's returns are continuous: no tie by chance)
    played = json.loads((tmp_path / "cross_play.json").read_text())
    matrix = np.array(played["matrix"])
    np.testing.assert_allclose(np.diag(matrix), metrics["eval_return"][:, -1], rtol=1e-6)
    assert matrix[0, 1] not in (matrix[0, 0], matrix[1, 1]) and matrix[1, 0] not in np.diag(matrix)
    assert played["seeds"] == [0, 1] and (tmp_path / "cross_play.png").stat().st_size > 0
    with Image.open(tmp_path / "spread.gif") as gif:
        assert gif.n_frames == 26  # the start, the states after 25 of its 26 steps

    ppo.main([*args, "--out-dir", str(tmp_path / "cut"), "--stop-minutes", "1e-9"])
    (cut,) = list((tmp_path / "cut").iterdir())
    summary = json.loads((cut / "summary.json").read_text())
    assert summary["stopped_by"] == "stop_minutes" and summary["updates"] < 6
    ppo.main(["--resume", str(cut), "--stop-minutes", "None"])
    assert_same_run(Path(ref), cut)
