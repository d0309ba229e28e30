"""Recurrent PPO: the GRU and LSTM cells and the LRU's scan against their equations, each core's
state resetting exactly where an episode starts, the update's replay from stored states (ratio
exactly 1 before a gradient step), truncation bootstrapping with the pre-reset state,
partial observability (--hide-obs), and learning: the GRU on CartPole without its velocities, the
LSTM, the LRU and the Transformer-XL on MemoryChain."""

import textwrap
from functools import partial
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrl.algos import ppo, ppo_rnn
from scanrl.common import envs, recurrent, suites
from scanrl.common.harness import devices, envsettings
from scanrl.common.harness.run import train_and_write
from scanrl.common.harness.runconfig import compose
from conftest import assert_shards_match_one_device, check_run_tools, four_device_snippet
from test_nets import (EXTREME_ACTORS, bounded_env, check_entropy_stat, check_squashed_log_prob, constant_actor,
                       tanh_normal_program)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@pytest.mark.slow
def test_gru_cell_follows_its_equations():
    params = jax.tree.map(np.asarray, recurrent.gru_init(jax.random.key(0), 3, 5))
    params["b_in"] = np.random.default_rng(0).normal(size=15).astype(np.float32)  # non-zero biases
    params["b_rec"] = np.random.default_rng(1).normal(size=15).astype(np.float32)
    rng = np.random.default_rng(2)
    h, x = rng.normal(size=(4, 5)).astype(np.float32), rng.normal(size=(4, 3)).astype(np.float32)
    w_ir, w_iz, w_in = np.split(params["w_in"], 3, axis=1)
    w_hr, w_hz, w_hn = np.split(params["w_rec"], 3, axis=1)
    b_ir, b_iz, b_in = np.split(params["b_in"], 3)
    b_hr, b_hz, b_hn = np.split(params["b_rec"], 3)
    r = sigmoid(x @ w_ir + b_ir + h @ w_hr + b_hr)
    z = sigmoid(x @ w_iz + b_iz + h @ w_hz + b_hz)
    n = np.tanh(x @ w_in + b_in + r * (h @ w_hn + b_hn))
    np.testing.assert_allclose(recurrent.gru_cell(params, h, recurrent.gru_inputs(params, x)), (1 - z) * n + z * h, rtol=1e-5, atol=1e-6)


def small_params(config=None, env="CartPole-v1"):
    config = config or ppo_rnn.Config(gru_size=8, encoder_hidden=(16,), head_hidden=(16,))
    e, p = suites.make(env)
    return config, ppo_rnn.init_params(jax.random.key(1), config, envs.VecEnv(e, p, 2))


@pytest.mark.slow
def test_lstm_cell_follows_its_equations():
    params = jax.tree.map(np.asarray, recurrent.lstm_init(jax.random.key(0), 3, 5))
    assert (params["b"][5:10] == 1).all() and (params["b"][:5] == 0).all()  # forget gate at 1
    params["b"] = np.random.default_rng(0).normal(size=20).astype(np.float32)
    rng = np.random.default_rng(2)
    h, c, x = (rng.normal(size=(4, n)).astype(np.float32) for n in (5, 5, 3))
    pre = x @ params["w_in"] + params["b"] + h @ params["w_rec"]
    i, f, g, o = np.split(pre, 4, axis=1)
    c_new = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    state = recurrent.lstm_cell(params, np.concatenate([h, c], 1),
                              recurrent.core_inputs("lstm", params, x))
    np.testing.assert_allclose(state, np.concatenate([sigmoid(o) * np.tanh(c_new), c_new], 1),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_the_lru_scan_is_its_complex_recurrence_written_in_numpy():
    """The associative scan over a sequence (float32, real and imaginary parts apart) against
    h_t = lambda h_{t-1} + gamma (x_t B), y_t = Re(h_t C) + x_t D in complex128, a loop with the
    memory set to 0 where an episode starts; and the step form, one step at a time, against it."""
    params = jax.tree.map(np.asarray, recurrent.lru_init(jax.random.key(0), 3, 5))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(9, 2, 3)).astype(np.float32)
    start = np.zeros((9, 2), bool)
    start[4, 0] = start[1, 1] = True
    state = rng.normal(size=(2, 15)).astype(np.float32)
    lam = np.exp(-np.exp(params["nu_log"].astype(np.float64)) + 1j * np.exp(params["theta_log"]))
    assert (np.abs(lam) < 1).all()
    gamma = np.exp(params["gamma_log"].astype(np.float64))
    np.testing.assert_allclose(gamma, np.sqrt(1 - np.abs(lam) ** 2), rtol=1e-5)
    B, C = params["B_re"] + 1j * params["B_im"], params["C_re"] + 1j * params["C_im"]
    h, want = state[:, 5:10] + 1j * state[:, 10:], []
    for t in range(9):
        h = np.where(start[t][:, None], 0, h) * lam + gamma * (x[t] @ B)
        want.append(np.concatenate([(h @ C).real + x[t] @ params["D"], h.real, h.imag], 1))
    xi = recurrent.core_inputs("lru", params, x)
    scanned = recurrent.lru_sequence(params, state, xi, start)
    np.testing.assert_allclose(scanned, np.stack(want), rtol=1e-5, atol=1e-5)
    stepped, s = [], state
    for t in range(9):
        s = recurrent.lru_cell(params, np.where(start[t][:, None], 0, s), xi[t])
        stepped.append(s)
    np.testing.assert_allclose(np.stack(stepped), np.stack(want), rtol=1e-5, atol=1e-5)


def trxl_params(layers=2, window=3, key=3, positions="learned"):
    """A small Transformer-XL whose position biases are not zero (so positions matter)."""
    params = recurrent.trxl_init(jax.random.key(key), 5, 8, heads=2, layers=layers, window=window,
                                 positions=positions)
    for i, p in enumerate(params["layers"]):
        for j, name in enumerate(("rel", "u", "v")):
            if name in p:
                p[name] = jax.random.normal(jax.random.key(10 + 3 * i + j), p[name].shape)
    return params


def trxl_steps(params, state, xs, starts):
    """The acting form: one cached step at a time (the reset as `recur` does it: zeros)."""
    outs = []
    for t in range(len(xs)):
        state = recurrent.trxl_cell(params, jnp.where(starts[t][:, None], 0.0, state), xs[t])
        outs.append(state[:, :8])
    return state, np.stack(outs)


@pytest.mark.slow
@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_the_trxl_cached_steps_equal_its_sequence_form_and_nothing_crosses_an_episode_start(positions):
    """Acting steps through a cached memory; learning recomputes a whole sequence from the
    memory stored at its first step. With a memory carried in from 4 earlier steps, a window
    (3) shorter than the sequence (10) and starts planted in two rows, the two agree; a large
    signal planted before a row's start leaves that row's outputs from the start on exactly as
    they were."""
    params, (L, N) = trxl_params(positions=positions), (10, 3)
    rng = np.random.default_rng(5)
    xs = jnp.asarray(rng.normal(size=(L, N, 8)), jnp.float32)
    starts = jnp.zeros((L, N), bool).at[6, 1].set(True).at[0, 2].set(True)
    width = ppo_rnn.state_width(SimpleNamespace(core="trxl", gru_size=8, trxl_layers=2,
                                                trxl_window=3))  # 8 (1 + 2 * 3) + 3
    memory, _ = trxl_steps(params, jnp.zeros((N, width)), xs[:4] * 0.5, jnp.zeros((4, N), bool))
    _, stepped = trxl_steps(params, memory, xs, starts)
    sequence = np.asarray(recurrent.trxl_sequence(params, memory, xs, starts))
    np.testing.assert_allclose(sequence, stepped, rtol=1e-5, atol=1e-6)
    planted = np.asarray(recurrent.trxl_sequence(params, memory, xs.at[:6, 1].add(jnp.arange(8.0) * 9),
                                                starts))
    np.testing.assert_array_equal(planted[6:, 1], sequence[6:, 1])
    assert np.abs(planted[5, 1] - sequence[5, 1]).max() > 1e-2
    # a start at a row's first step: the carried memory is not read either
    np.testing.assert_allclose(sequence[:, 2], np.asarray(recurrent.trxl_sequence(
        params, jnp.zeros_like(memory), xs, starts))[:, 2], rtol=1e-6, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_the_trxl_sees_layers_times_window_steps_back_and_no_further(positions):
    """Each layer reaches M steps further back: the last step's output depends on the step
    layers * M before it, and on none earlier (masked keys weigh exactly 0)."""
    params, (L, N) = trxl_params(positions=positions), (12, 2)
    xs = jnp.asarray(np.random.default_rng(6).normal(size=(L, N, 8)), jnp.float32)
    starts, empty = jnp.zeros((L, N), bool), jnp.zeros((N, 8 * 7 + 3))
    base = np.asarray(recurrent.trxl_sequence(params, empty, xs, starts))
    reach, signal = 2 * 3, 10.0 * jnp.arange(8.0)  # not a constant: layer norm removes those
    far = recurrent.trxl_sequence(params, empty, xs.at[L - 2 - reach].add(signal), starts)
    np.testing.assert_array_equal(np.asarray(far)[L - 1], base[L - 1])
    near = recurrent.trxl_sequence(params, empty, xs.at[L - 1 - reach].add(signal), starts)
    assert np.abs(np.asarray(near)[L - 1] - base[L - 1]).max() > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_the_trxl_with_a_window_over_the_whole_episode_is_full_causal_attention(positions):
    """With M at least the episode's length and no memory, a layer is plain causal attention
    over the episode with relative positions (a bias per head and distance, or Transformer-XL's
    (q + u) k + (q + v) R W_r with sinusoids R), written out in numpy: pre-norm attention and
    MLP, each joined by GTrXL's gate."""
    L = 6
    params = trxl_params(layers=1, window=L, key=7, positions=positions)
    p = jax.tree.map(np.asarray, params["layers"][0])
    x = np.random.default_rng(7).normal(size=(L, 1, 8)).astype(np.float32)
    got = np.asarray(recurrent.trxl_sequence(params, jnp.zeros((1, 8 * (1 + L) + L)),
                                           jnp.asarray(x), jnp.zeros((L, 1), bool)))[:, 0]

    def norm(v, n):
        mu = v.mean(-1, keepdims=True)
        return (v - mu) / np.sqrt(((v - mu) ** 2).mean(-1, keepdims=True) + 1e-6) * n["scale"] \
            + n["offset"]

    def gate(g, a, y):
        r, z = sigmoid(y @ g["wr"] + a @ g["ur"]), sigmoid(y @ g["wz"] + a @ g["uz"] - g["bz"])
        return (1 - z) * a + z * np.tanh(y @ g["wg"] + (r * a) @ g["ug"])

    h, d = x[:, 0], 4  # [L, E]; 2 heads of 4
    n = norm(h, p["norm1"])
    q, k, v = [(n @ p[w]).reshape(L, 2, d) for w in ("wq", "wk", "wv")]
    out = np.zeros((L, 2, d))

    def position(t, s, head):  # the logit of query t for key s
        if positions == "learned":
            return q[t, head] @ k[s, head] / np.sqrt(d) + p["rel"][head, t - s]
        freq = 1 / 10000 ** (np.arange(0, 8, 2) / 8)
        r = (np.concatenate([np.sin((t - s) * freq), np.cos((t - s) * freq)]) @ p["w_r"])
        return ((q[t, head] + p["u"][head]) @ k[s, head]
                + (q[t, head] + p["v"][head]) @ r.reshape(2, d)[head]) / np.sqrt(d)

    for t in range(L):
        for head in range(2):
            logits = np.array([position(t, s, head) for s in range(t + 1)])
            w = np.exp(logits - logits.max())
            out[t, head] = (w / w.sum()) @ v[: t + 1, head]
    h = gate(p["gate1"], h, np.maximum(out.reshape(L, 8) @ p["wo"], 0))
    want = gate(p["gate2"], h, np.maximum(np.maximum(norm(h, p["norm2"]) @ p["w1"], 0) @ p["w2"], 0))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("overrides, message", [
    (dict(trxl_heads=3), r"^--trxl-heads 3 does not divide --gru-size 64, the embedding the heads "
                         r"split\.$"),
    (dict(trxl_window=16, seq_len=32), r"^--trxl-window 16 is shorter than the gradient window "
                                       r"\(--seq-len, else --num-steps: 32\)\.$"),
    (dict(critic_obs="privileged_state"), r"^--critic-obs privileged_state gives the critic a "
                                          r"core of its own, which --core trxl does not take"),
    (dict(gru_size=63, trxl_heads=3, trxl_positions="sinusoidal"),
     r"^--gru-size 63 is odd; --trxl-positions sinusoidal pairs a sine and a cosine per "
     r"frequency, so it needs an even size\.$"),
])
def test_the_trxl_refuses_sizes_that_do_not_fit_in_one_sentence(overrides, message):
    with pytest.raises(ValueError, match=message):
        ppo_rnn.Config(core="trxl", **overrides)


@pytest.mark.parametrize("core", ["gru", "lstm", "lru", "trxl"])
@pytest.mark.slow
def test_the_state_resets_exactly_where_an_episode_starts(core):
    """For each core: from an episode's first step on, the state no longer depends on what came
    before; one step earlier it still does (PureJaxRL's ppo_rnn resets one step off in its
    replay); and the sequence replay (the LRU's an associative scan, the Transformer-XL's
    attention over the whole sequence: their outputs) equals its steps. The Transformer-XL's
    window (4) is shorter than the 8 steps, so its cached memory rolls."""
    config, params = small_params(ppo_rnn.Config(
        core=core, gru_size=8, encoder_hidden=(16,), head_hidden=(16,), num_steps=8, seq_len=4,
        trxl_window=4, trxl_heads=2))
    width = ppo_rnn.state_width(config)
    rng = np.random.default_rng(0)
    obs = jnp.asarray(rng.normal(size=(8, 2, 4)), jnp.float32)
    start = np.zeros((8, 2), bool)
    start[3, 0] = start[5, 1] = True
    unroll = lambda h: np.asarray(ppo_rnn.unroll(params, h, obs, jnp.asarray(start), "tanh"))  # noqa: E731
    a = unroll(jnp.asarray(rng.normal(size=(2, width)), jnp.float32))
    b = unroll(jnp.asarray(rng.normal(size=(2, width)), jnp.float32))
    np.testing.assert_array_equal(a[3:, 0], b[3:, 0])
    np.testing.assert_array_equal(a[5:, 1], b[5:, 1])
    assert np.abs(a[2, 0] - b[2, 0]).max() > 1e-3 and np.abs(a[4, 1] - b[4, 1]).max() > 1e-3
    # the reset state is the zero state: the first step of an episode starts from zeros (the
    # LRU's scan of 5 steps groups its sums otherwise than its scan of 8: equal to rounding)
    fresh = np.asarray(ppo_rnn.unroll(params, jnp.zeros((2, width)), obs[3:],
                                      jnp.zeros((5, 2), bool), "tanh"))
    check = np.testing.assert_array_equal if core in ("gru", "lstm") else partial(
        np.testing.assert_allclose, rtol=1e-6, atol=1e-6)
    check(a[3:, 0], fresh[:, 0])
    h, steps = jnp.asarray(rng.normal(size=(2, width)), jnp.float32), []
    replayed = unroll(h)
    for t in range(8):
        h = ppo_rnn.core(params, h, obs[t], jnp.asarray(start[t]), "tanh")
        steps.append(h[..., :replayed.shape[-1]])
    np.testing.assert_allclose(replayed, np.stack(steps), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("core", ["lstm", "lru", "trxl"])
@pytest.mark.slow
def test_each_core_replays_its_rollout_from_stored_states(core):
    """As the GRU's test below, for the LSTM, the LRU and the Transformer-XL (16-step sequences
    after 8 burn-in steps): every replayed log-probability meets the rollout's within the same
    2e-7 (the LRU's replay is an associative scan, the Transformer-XL's attention over the
    sequence with the memory stored at its first step, their rollouts one step at a time:
    measured, up to 6e-8 each)."""
    config = ppo_rnn.default_config("CartPole-v1", num_envs=4, num_steps=64, seq_len=16, burn_in=8,
                                    num_epochs=1, num_minibatches=1, total_timesteps=4 * 64 * 3,
                                    gru_size=16, encoder_hidden=(16,), head_hidden=(16,), core=core,
                                    trxl_window=16, trxl_heads=2)
    metrics = jax.device_get(ppo_rnn.make_train(config)(devices.seed_keys(0, 1)))["metrics"]
    assert np.isfinite(metrics["episode_return"]).all()  # episodes ended in every rollout
    assert (metrics["max_abs_log_ratio"] <= 2e-7).all(), metrics["max_abs_log_ratio"]
    with pytest.raises(ValueError, match=r"^--core must be gru, lstm, lru or trxl, got gpt\.$"):
        ppo_rnn.default_config(core="gpt")


def test_replay_slots_name_the_steps_a_replay_starts_from():
    """Each sequence's replay starts B steps before it, at step 0 at the earliest: with T = 8,
    L = 4, B = 2 the rollout keeps steps 0 and 2; with T = 12, B = 6 the first two sequences
    both start from step 0. A step whose state is not kept gets the slot past the end."""
    slots = lambda T, L, B: ppo_rnn.replay_slots(  # noqa: E731
        SimpleNamespace(num_steps=T, sequence_length=L, burn_in=B))
    assert slots(8, 4, 2) == ([0, 2, 1, 2, 2, 2, 2, 2], [0, 1])
    assert slots(12, 4, 6) == ([0, 2, 1] + [2] * 9, [0, 0, 1])
    assert slots(8, 8, 0) == ([0] + [1] * 7, [0])


@pytest.mark.slow
def test_the_trxl_rollout_that_keeps_its_state_only_where_a_replay_starts_learns_the_same(
        monkeypatch):
    """The Transformer-XL's rollout keeps its state (which holds its memory window) only at the
    steps a replay starts from and computes V(final obs) as it goes. Two updates of it equal
    those of the rollout that stores the whole state at every step, as the other cores' do: on
    Pendulum cut by a 40-step time limit (every episode ends truncated, so every bootstrap
    counts), 16-step sequences after 8 burn-in steps."""
    env, env_params = suites.make("Pendulum-v1")
    env_params = env_params.replace(max_steps_in_episode=40)
    config = ppo_rnn.default_config("Pendulum-v1",
                                    num_envs=4, num_steps=64, seq_len=16, burn_in=8,
                                    num_epochs=1, num_minibatches=2, total_timesteps=4 * 64 * 2,
                                    gru_size=16, encoder_hidden=(16,), head_hidden=(16,),
                                    core="trxl", trxl_window=16, trxl_heads=2)
    train = lambda: jax.device_get(  # noqa: E731
        ppo_rnn.make_train(config, env, env_params)(devices.seed_keys(0, 1)))
    kept = train()
    monkeypatch.setattr(ppo_rnn, "KEPT_AT_REPLAY_STARTS", ())
    stored = train()
    assert np.isfinite(kept["metrics"]["episode_return"]).all()  # episodes ended in each rollout
    for tree in ("metrics", "policy"):
        jax.tree.map(partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-6), kept[tree],
                     stored[tree])


@pytest.mark.parametrize("seq_len, burn_in", [(0, 0), (16, 8)])
@pytest.mark.slow
def test_the_replay_from_stored_states_reproduces_the_rollout(seq_len, burn_in, monkeypatch):
    """One epoch of one minibatch: its loss is computed before any gradient step, so every
    replayed log-probability equals the rollout's: the ratio is 1, up to the last bit of a
    log-probability (6e-8). The rollout computes the GRU's input terms one step at a time and the
    replay all of a sequence's in one matmul (`unroll`), which rounds differently. A reset one
    step off, or sequences replayed from the neighbouring stored state, fail this: the second is
    built below, and its log-ratios are hundreds of times the bound. CartPole episodes end many
    times per rollout."""
    config = ppo_rnn.default_config("CartPole-v1", num_envs=4, num_steps=64, seq_len=seq_len, burn_in=burn_in,
                                    num_epochs=1, num_minibatches=1, total_timesteps=4 * 64 * 3, gru_size=16,
                                    encoder_hidden=(16,), head_hidden=(16,))
    out = jax.device_get(ppo_rnn.make_train(config)(devices.seed_keys(0, 1)))
    metrics = out["metrics"]
    assert np.isfinite(metrics["episode_return"]).all()  # episodes ended in every rollout
    assert (metrics["max_abs_log_ratio"] <= 2e-7).all(), metrics["max_abs_log_ratio"]
    np.testing.assert_array_equal(metrics["clip_fraction"], 0.0)

    to_sequences = ppo_rnn.to_sequences  # each sequence replayed from the next one's stored state
    monkeypatch.setattr(ppo_rnn, "to_sequences", lambda *args: (lambda seqs: seqs._replace(
        hidden=jnp.roll(seqs.hidden, 1, axis=0)))(to_sequences(*args)))
    shifted = jax.device_get(ppo_rnn.make_train(config)(devices.seed_keys(0, 1)))["metrics"]["max_abs_log_ratio"]
    assert shifted.max() > 100 * 2e-7, shifted


@pytest.mark.slow
def test_a_truncated_episode_bootstraps_with_the_state_before_the_reset():
    """A hand-built rollout of two episodes (one env): the first is cut by a time limit at step
    2, the second starts at step 3. V(final observation) at the cut comes from the state the
    agent had there; the next episode's first state starts from zeros."""
    config, params = small_params()
    config = ppo_rnn.Config(gru_size=8, encoder_hidden=(16,), head_hidden=(16,), gamma=0.9, gae_lambda=0.8)
    rng = np.random.default_rng(3)
    obs = jnp.asarray(rng.normal(size=(6, 1, 4)), jnp.float32)
    start = jnp.asarray([[True], [False], [False], [True], [False], [False]])
    states = ppo_rnn.unroll(params, jnp.zeros((1, 8)), obs, start, "tanh")
    final = np.asarray(obs[1:].tolist() + [rng.normal(size=(1, 4)).tolist()], np.float32)  # s'_t = s_{t+1} ...
    final[2] = rng.normal(size=(1, 4))  # ... except at the cut: the observation the episode ended on
    truncated = jnp.asarray([[False], [False], [True], [False], [False], [False]])
    reward = jnp.asarray(rng.normal(size=(6, 1)), jnp.float32)
    info = envs.StepInfo(reward=reward, terminated=jnp.zeros((6, 1), bool), truncated=truncated,
                         final_obs=jnp.asarray(final), episode_return=jnp.zeros((6, 1)),
                         episode_length=jnp.zeros((6, 1), jnp.int32))
    traj = ppo_rnn.Transition(hidden=jnp.zeros((6, 1, 8)), state=states, obs=obs, start=start,
                              action=jnp.zeros((6, 1), jnp.int32), log_prob=jnp.zeros((6, 1)), info=info)
    values, advantages, _ = ppo_rnn.rollout_advantages(params, traj, jnp.asarray(final), reward, config)

    value_after = lambda h, o: ppo_rnn.value(params, ppo_rnn.core(params, h, o, jnp.zeros(1, bool), "tanh"), "tanh")  # noqa: E731
    kept = value_after(states[2], jnp.asarray(final[2]))  # the state the agent had at the cut
    reset = value_after(jnp.zeros((1, 8)), jnp.asarray(final[2]))  # what a reset state would give
    assert abs(float(kept[0] - reset[0])) > 1e-3
    np.testing.assert_allclose(advantages[2], reward[2] + 0.9 * kept - values[2], rtol=1e-5, atol=1e-6)
    # before the cut, the trace continues into the step after: delta_1 + gamma lambda A_2
    delta_1 = reward[1] + 0.9 * ppo_rnn.value(params, states[2], "tanh") - values[1]
    np.testing.assert_allclose(advantages[1], delta_1 + 0.9 * 0.8 * advantages[2], rtol=1e-5, atol=1e-6)
    # the second episode's first state is the zero state's step: nothing of the first episode
    np.testing.assert_allclose(states[3], ppo_rnn.core(params, jnp.zeros((1, 8)), obs[3], jnp.zeros(1, bool), "tanh"),
                               rtol=1e-6)


@pytest.mark.slow
def test_normalisation_options_track_what_the_rollouts_saw():
    """--normalize-obs, --normalize-reward and --reward-scale, as PPO has them: the observation
    statistics count every final observation of every rollout, the return statistics every
    step's discounted return, and the run keeps finite losses; off (the default) is the plain
    run bit for bit."""
    small = dict(num_envs=4, num_steps=16, num_epochs=1, num_minibatches=2, total_timesteps=4 * 16 * 3, **NET)
    run = lambda **kw: jax.device_get(ppo_rnn.make_train(ppo_rnn.default_config("Pendulum-v1", **small, **kw))(
        devices.seed_keys(0, 1)))
    plain = run()
    off = run(reward_scale=1.0, normalize_obs=False, normalize_reward=False)
    for k in plain["metrics"]:
        np.testing.assert_array_equal(off["metrics"][k], plain["metrics"][k])
    on = run(normalize_obs=True, normalize_reward=True, reward_scale=0.1)
    state = on["state"]  # the algorithm's TrainState, leading axis = seed
    steps = 3 * 4 * 16
    np.testing.assert_allclose(state.obs_stats.count[0], steps + 1e-4, rtol=1e-6)
    np.testing.assert_allclose(state.return_stats.count[0], steps + 1e-4, rtol=1e-6)
    assert (state.obs_stats.var[0] > 0).all() and not np.allclose(state.obs_stats.mean[0], 0.0)
    assert np.isfinite(on["metrics"]["value_loss"]).all() and np.isfinite(on["metrics"]["policy_loss"]).all()
    assert not np.allclose(on["metrics"]["value_loss"], plain["metrics"]["value_loss"])


def test_hide_obs_drops_observation_components_for_every_algorithm(cli_error):
    env, params = suites.make("CartPole-v1")
    hidden = envsettings.HiddenObs(env, (1, 3), params)
    assert hidden.observation_space(params).shape == (2,) and hidden.name == "CartPole-v1"
    key = jax.random.key(0)
    full_obs, full_state = env.reset(key, params)
    obs, state = hidden.reset(key, params)
    np.testing.assert_array_equal(obs, full_obs[jnp.array([0, 2])])
    full = env.step(key, full_state, 1, params)
    part = hidden.step(key, state, 1, params)
    np.testing.assert_array_equal(part[0], full[0][jnp.array([0, 2])])
    np.testing.assert_array_equal(part[5]["final_observation"], full[5]["final_observation"][jnp.array([0, 2])])
    assert envs.VecEnv(hidden, params, 2).obs_dim == 2
    code, err = cli_error(ppo.main, ["--hide-obs", "1", "4"])
    assert code == 2 and "--hide-obs 1 4: the observation has 4 components (0-3)" in err


# --- tanh-squashed normal (--action-dist tanh_normal; shared pieces and checks: test_nets.py) ----------
# sequences of 8 steps with 4 burn-in steps; clip_eps 1e-6 makes clip_fraction count any ratio off 1
NET = dict(gru_size=16, encoder_hidden=(16,), head_hidden=(16,))
TANH = dict(clip_eps=1e-6, seq_len=8, burn_in=4, **NET)


@pytest.mark.slow
def test_tanh_normal_ratio_is_one_on_its_own_rollout():
    """1 epoch x 1 minibatch: the replay's log pi of the stored pre-tanh u meets the rollout's, also with
    the mean deep in saturation (tanh(30) = 1 in float32), where a ratio taken through atanh of the
    env's action would break (the policy head's weights zeroed: loc is 30 whatever the GRU state).
    The untrained policy's log-probabilities reach 7.4 in magnitude, where a float32 step is 4.8e-7;
    the bound is 4 such steps (1.9e-6): each side sums 4 terms (2 normal densities, 2 Jacobians)
    from a GRU state it rounds its own way, the replay a sequence's input terms in one matmul, the
    rollout one step at a time (`unroll`), and how far apart they land depends on the CPU's
    kernels (2 steps on the machines measured). A ratio through atanh fails by far more."""
    _, update, state = tanh_normal_program(ppo_rnn, **TANH)
    bound = 4 * float(np.spacing(np.float32(4.0)))
    for params in (state.params, constant_actor(state.params, [30.0, -30.0], [-3.0, -3.0])):
        _, metrics = update(state._replace(params=params), 0)
        assert float(metrics["max_abs_log_ratio"]) <= bound, metrics["max_abs_log_ratio"]
        assert float(metrics["clip_fraction"]) == 0.0
        assert np.isfinite(float(metrics["entropy"])) and np.isfinite(float(metrics["policy_loss"]))


@pytest.mark.slow
def test_tanh_normal_env_actions_stay_in_the_bounds():
    """The env (its VecEnv's clipping off) counts no action outside [-1, 3] x [0, 0.5] in a rollout, and
    act gives none, whatever the policy head's loc and scale."""
    algorithm, update, state = tanh_normal_program(ppo_rnn, **TANH)
    act = jax.jit(algorithm.act, static_argnums=3)
    env = bounded_env()
    obs, low, high = jax.random.normal(jax.random.key(1), (64, 3)), jnp.array(env.low), jnp.array(env.high)
    hidden = jax.random.normal(jax.random.key(3), (64, 16))
    for actor in (None, *EXTREME_ACTORS):
        params = state.params if actor is None else constant_actor(state.params, *actor)
        _, metrics = update(state._replace(params=params), 0)
        assert float(metrics["episodes"]) == 16 and float(metrics["episode_return"]) == 0.0, actor
        for deterministic in (False, True):
            actions, _ = act(algorithm.policy_params(state._replace(params=params)), obs, jax.random.key(2),
                             deterministic, hidden)
            assert actions.shape == (64, 2) and bool(((actions >= low) & (actions <= high)).all()), actor


@pytest.mark.slow
def test_tanh_normal_log_prob_of_the_squashed_action():
    """The policy head on the GRU state outputs [loc, raw scale] (2A, no log_std); log pi(u) - log|det J|
    is the density of the squashed action by distrax and by hand."""
    env = bounded_env()
    config = ppo_rnn.Config(action_dist="tanh_normal", **NET)
    vec_env = envs.VecEnv(env, env.default_params, 1)
    params = jax.jit(lambda k: ppo_rnn.init_params(k, config, vec_env))(jax.random.key(0))  # one compile, not one per op
    assert "log_std" not in params and params["actor"][-1]["w"].shape == (16, 4)
    params["actor"][-1]["w"] = 0.5 * jax.random.normal(jax.random.key(1), (16, 4))  # a spread of locs and scales
    hidden = jnp.tanh(jax.random.normal(jax.random.key(2), (64, 16)))  # GRU states lie in (-1, 1)
    dist = ppo_rnn.policy(params, hidden, "tanh", None, "tanh_normal", config.min_std)
    u = jnp.clip(dist.sample(seed=jax.random.key(3)), -4.0, 4.0)
    check_squashed_log_prob(dist, ppo_rnn.mlp_apply(params["actor"], hidden, "tanh"), config.min_std, u)


@pytest.mark.slow
def test_tanh_normal_entropy_bonus_is_the_squashed_estimate():
    """ppo_loss's entropy over replayed sequences: the one-sample estimate with the stored noise, which
    averages to H(u) + E[sum log(1 - tanh(u)^2)] (quadrature) and lies below the normal's entropy."""
    env = bounded_env()
    config = ppo_rnn.Config(action_dist="tanh_normal", **NET)
    loc, raw = [0.0, 1.0], [0.0, -1.0]
    vec_env = envs.VecEnv(env, env.default_params, 1)
    params = jax.jit(lambda k: ppo_rnn.init_params(k, config, vec_env))(jax.random.key(0))  # one compile, not one per op
    params = constant_actor(params, loc, raw)
    n = 100_000  # sequences of one step
    noise = jax.random.normal(jax.random.key(4), (n, 1, 2))
    zeros = jnp.zeros((n, 1))
    seqs = ppo_rnn.Sequences(hidden=jnp.zeros((n, 16)), obs=jnp.zeros((n, 1, 3)), start=jnp.ones((n, 1), bool),
                             action=jnp.zeros((n, 1, 2)), log_prob=zeros, value=zeros, advantage=zeros, target=zeros,
                             burn_obs=jnp.zeros((n, 0, 3)), burn_start=jnp.zeros((n, 0), bool),
                             burn_valid=jnp.zeros((n, 0), bool), noise=noise)
    _, stats = ppo_rnn.ppo_loss(params, seqs, config)
    check_entropy_stat(stats["entropy"], loc, raw, noise[:, 0])


def test_tanh_normal_on_discrete_actions_exits_2_before_compiling(cli_error):
    code, stderr = cli_error(ppo_rnn.main, ["--action-dist", "tanh_normal"])
    assert code == 2 and "--action-dist tanh_normal needs continuous (Box) actions and --env CartPole-v1" in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    code, stderr = cli_error(ppo_rnn.main, ["--env", "Pendulum-v1", "--action-dist", "tanh_normal", "--min-std", "0"])
    assert code == 2 and "--min-std must be positive" in stderr, stderr


@pytest.mark.slow
def test_one_hot_observations_are_the_codes_read_one_hot(cli_error):
    """--obs-one-hot K reads each value of a symbolic grid [H, W, C] as a code 0..K-1: the step
    equals the same network on the explicit one-hot grid [H, W, C * K] (what an embedding table
    reads), and two grids that differ in one code give different states. With --normalize-obs
    (which would change the codes) it is one sentence and exit 2, before compiling."""
    grid = SimpleNamespace(obs_dim=5 * 5 * 2, policy_obs_dim=5 * 5 * 2, obs_shape=(5, 5, 2), discrete=True, num_actions=3)
    config = ppo_rnn.Config(obs_one_hot=4, conv_kernel=2, conv_channels=(8, 6), gru_size=8, encoder_hidden=(16,),
                            head_hidden=(16,))
    params = ppo_rnn.init_params(jax.random.key(0), config, grid)
    assert params["torso"][0]["w"].shape == (2, 2, 2 * 4, 8) and params["torso"][1]["w"].shape == (2, 2, 8, 6)
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 4, size=(3, 5, 5, 2)).astype(np.float32)  # the adapters hand over float32
    one_hot = (codes[..., None] == np.arange(4)).reshape(3, 5, 5, 8).astype(np.float32)
    hidden, start = jnp.asarray(rng.normal(size=(3, 8)), jnp.float32), jnp.zeros(3, bool)
    state = ppo_rnn.core(params, hidden, jnp.asarray(codes), start, "tanh", one_hot=4)
    np.testing.assert_allclose(state, ppo_rnn.core(params, hidden, jnp.asarray(one_hot), start, "tanh"), atol=1e-6)
    changed = codes.copy()
    changed[0, 2, 2, 0] = (codes[0, 2, 2, 0] + 1) % 4
    moved = np.asarray(ppo_rnn.core(params, hidden, jnp.asarray(changed), start, "tanh", one_hot=4))
    assert not np.allclose(moved[0], state[0]) and np.array_equal(moved[1:], np.asarray(state)[1:])
    code, stderr = cli_error(ppo_rnn.main, ["--obs-one-hot", "13", "--normalize-obs"])
    assert code == 2 and "--obs-one-hot 13 reads the observation as codes" in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


DATA_PARALLEL = textwrap.dedent(
    """
    import json, sys
    import jax
    from scanrl.algos import ppo_rnn
    from scanrl.common.harness import devices, loop
    from scanrl.common.harness.runconfig import compose
    results = {}
    for shards in (1, 2, 4):
        config = compose(ppo_rnn, "CartPole-v1", num_envs=8, num_steps=32, seq_len=16, burn_in=4,
                         num_minibatches=4, num_epochs=2, total_timesteps=8 * 32 * 3, gru_size=16,
                         encoder_hidden=(16,), head_hidden=(16,), eval_every=3, eval_episodes=4,
                         log_every=0, hide_obs=(1, 3), data_parallel=shards)
        out = jax.device_get(loop.build(ppo_rnn.make_algorithm, config).train(devices.seed_keys(0, 1)))
        results[shards] = {k: v.tolist() for k, v in out["metrics"].items()}
    print("RESULT" + json.dumps(results))
    """
)


DATA_PARALLEL_ON_4 = four_device_snippet("test_ppo_rnn: data parallel", DATA_PARALLEL)


@pytest.mark.slow
def test_data_parallel_matches_one_device(four_devices):
    """Each device steps its share of the environments and replays its share of every
    minibatch's sequences (16 sequences of 16 steps, 4 per minibatch, over 2 and 4 devices);
    evaluation carries the GRU state on every device (masked CartPole)."""
    (results,) = four_devices(DATA_PARALLEL_ON_4)
    assert_shards_match_one_device(
        results, ("policy_loss", "value_loss", "entropy", "approx_kl", "episode_return", "eval_return"), atol=1e-5,
    )


# --- learning: CartPole with its velocities hidden ------------------------------------------------
# The defaults (tuned by two learning-rate sweeps, benchmarks/HISTORY.md, 2026-11-23, evening) over
# 2e5 steps per seed; feed-forward ppo.py with the same budget and mask ends near 50
# (benchmarks/learning.py: ppo_masked_cartpole).
@pytest.mark.slow
def test_learns_cartpole_without_velocities(tmp_path):
    config = compose(ppo_rnn, "CartPole-v1", num_seeds=4, seed=0, hide_obs=(1, 3), log_every=0,
                     out_dir=str(tmp_path))
    config = config.replace(eval_every=config.num_updates)
    assert config.total_timesteps <= 200_000
    summary = train_and_write("ppo_rnn", config, ppo_rnn.make_algorithm)
    final = np.array(summary["final_return_per_seed"])  # mean over the last 10% of updates
    assert final.mean() >= 400, final
    check_run_tools(summary["run_dir"])  # scanrl-eval replays the recurrent policy's evaluation


# --- learning: each other core remembers a cue over 20 steps -------------------------------------
# MemoryChain at memory_length 20 (the cue shows at the first step only; a memoryless agent scores
# 0 on average and feed-forward PPO stays below 0.2: benchmarks/learning.py ppo_memory_chain_20),
# at the GRU's defaults over 32 updates of 1,024 steps. The bar from 10 seeds (`python
# benchmarks/learning.py --seeds 10 ppo_rnn_lstm_memory_chain_20 ...`): means 0.949 (LSTM), 0.985
# (LRU), 0.919 (Transformer-XL), worst seeds 0.729, 0.958, 0.5.
@pytest.mark.slow
@pytest.mark.parametrize("core", ["lstm", "lru", "trxl"])
def test_each_core_learns_to_remember_a_cue_over_twenty_steps(tmp_path, core):
    config = compose(ppo_rnn, "MemoryChain-bsuite", num_seeds=4, seed=0, log_every=0, core=core,
                     env_params={"memory_length": 20}, total_timesteps=32_768,
                     out_dir=str(tmp_path))
    config = config.replace(eval_every=config.num_updates)
    assert config.num_updates == 32
    summary = train_and_write("ppo_rnn", config, ppo_rnn.make_algorithm)
    final = np.array(summary["final_return_per_seed"])  # mean over the last 10% of updates
    assert final.mean() >= 0.75, final


# --- learning: a maze whose goal it must remember ------------------------------------------------
# gymnax's MetaMaze-misc: the goal stays put for a 200-step episode while the agent, each time it
# reaches the goal (reward 10), respawns elsewhere; it sees a 3x3 view, its last action and
# reward, and the step count unscaled (0 to 200), which --normalize-obs brings to unit scale
# (without it no core leaves a random policy's 7.34: benchmarks/RESULTS.md). Recurrent PPO's
# defaults, 2e5 steps per seed. The bar from 10 seeds (`python benchmarks/learning.py --seeds 10
# ppo_rnn_metamaze ppo_metamaze`): 13.0 to 50.7 (mean 37.8; any 4 seeds average at least 28.5),
# where feed-forward ppo.py with the same flags and budget ends at 10.8 to 18.6 (mean 13.6). In
# this test's 4-seed program the seeds end at 21.7, 37.8, 32.3 and 42.8 (benchmarks/reference/
# learning/checks.json): not the 10-seed program's figures, as the seeds' vmap is another batch.
@pytest.mark.slow
def test_learns_to_return_to_a_remembered_goal_in_metamaze(tmp_path):
    config = compose(ppo_rnn, "MetaMaze-misc", num_seeds=4, seed=0, log_every=0, eval_every=0,
                     normalize_obs=True, out_dir=str(tmp_path))
    assert config.total_timesteps == 200_000
    summary = train_and_write("ppo_rnn", config, ppo_rnn.make_algorithm)
    final = np.array(summary["final_return_per_seed"])  # mean over the last 10% of updates
    assert final.mean() >= 25.0, final
