"""Memory for recurrent networks: four recurrent cores behind one interface, shared by
algos/ppo_rnn.py and algos/pqn_rnn.py (each file's network puts one between its encoder and its
heads).

A core's state is one array [..., S] that starts every episode at zeros: its first H columns
are the core's output, which the heads read, and the rest its memory. gru: h (S = H); lstm:
[h, c] (S = 2H); lru: [y, Re h, Im h] (S = 3H); trxl: [out, each layer's inputs at the last M
steps, which of those M steps are valid] (S = H + layers M H + M). Each core has

    init(key, in_dim, H) -> params                       (CORES[kind][0]; trxl takes its sizes)
    core_inputs(kind, params, x) -> input terms           no state: a sequence's are one matmul
    cell(params, state [N, S], terms [N, .]) -> state     (CORES[kind][1]) acting, step by step

and the LRU and the Transformer-XL a whole-sequence form for learning (`lru_sequence`, an
associative scan; `trxl_sequence`, attention over the sequence from the memory stored at its
first step), equal to their steps. Resets (zeros where an episode starts) are the caller's:
the state is set to zeros before the step that starts an episode.
Papers: GRU, Cho et al. 2014 (arXiv:1406.1078); LSTM, Hochreiter & Schmidhuber 1997; LRU,
Orvieto et al. 2023 (arXiv:2303.06349); Transformer-XL, Dai et al. 2019 (arXiv:1901.02860),
gated as GTrXL, Parisotto et al. 2020 (arXiv:1910.06764).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from scanrl.common.nets import layer_norm, orthogonal


def gru_init(key: jax.Array, in_dim: int, hidden: int) -> dict[str, jax.Array]:
    """A GRU cell's parameters: input and recurrent weights for the reset, update and
    candidate gates side by side ([in, 3H] and [H, 3H], orthogonal), zero biases."""
    k_in, k_rec = jax.random.split(key)
    w_in = jnp.concatenate([orthogonal(k, (in_dim, hidden)) for k in jax.random.split(k_in, 3)],
                           axis=1)
    w_rec = jnp.concatenate([orthogonal(k, (hidden, hidden)) for k in jax.random.split(k_rec, 3)],
                            axis=1)
    zeros = jnp.zeros(3 * hidden, jnp.float32)
    return {"w_in": w_in, "w_rec": w_rec, "b_in": zeros, "b_rec": zeros}


def gru_inputs(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """The gates' input terms x [..., in] -> x W_i + b_i [..., 3H]. They do not depend on the
    state, so `unroll` computes a whole sequence's in one matmul before its scan."""
    return x @ params["w_in"] + params["b_in"]


def gru_cell(params: dict[str, jax.Array], h: jax.Array, xi: jax.Array) -> jax.Array:
    """One GRU step (Cho et al. 2014, the cuDNN/PyTorch form) from the input terms xi = x W_i + b_i
    [..., 3H] (`gru_inputs`): h [..., H] -> h' [..., H].
        r = sigmoid(x W_ir + b_ir + h W_hr + b_hr),  z = sigmoid(x W_iz + b_iz + h W_hz + b_hz)
        n = tanh(x W_in + b_in + r * (h W_hn + b_hn)),  h' = (1 - z) * n + z * h
    """
    hi = h @ params["w_rec"] + params["b_rec"]
    x_r, x_z, x_n = jnp.split(xi, 3, axis=-1)
    h_r, h_z, h_n = jnp.split(hi, 3, axis=-1)
    r, z = jax.nn.sigmoid(x_r + h_r), jax.nn.sigmoid(x_z + h_z)
    n = jnp.tanh(x_n + r * h_n)
    return (1.0 - z) * n + z * h


def lstm_init(key: jax.Array, in_dim: int, hidden: int) -> dict[str, jax.Array]:
    """An LSTM cell's parameters: input and recurrent weights for the input, forget, cell and
    output gates side by side ([in, 4H] and [H, 4H], orthogonal); biases 0 but the forget
    gate's, 1 (Jozefowicz et al. 2015), so the cell keeps its memory at first."""
    k_in, k_rec = jax.random.split(key)
    w_in = jnp.concatenate([orthogonal(k, (in_dim, hidden)) for k in jax.random.split(k_in, 4)],
                           axis=1)
    w_rec = jnp.concatenate([orthogonal(k, (hidden, hidden)) for k in jax.random.split(k_rec, 4)],
                            axis=1)
    return {"w_in": w_in, "w_rec": w_rec,
            "b": jnp.zeros(4 * hidden, jnp.float32).at[hidden:2 * hidden].set(1.0)}


def lstm_cell(params: dict[str, jax.Array], state: jax.Array, xi: jax.Array) -> jax.Array:
    """One LSTM step (Hochreiter & Schmidhuber 1997, PyTorch's gate order) from the input terms
    xi = x W_i + b [..., 4H]: state [h, c] [..., 2H] -> [h', c'].
        i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of (xi + h W_h), split in four
        c' = f * c + i * g,  h' = o * tanh(c')
    """
    h, c = jnp.split(state, 2, axis=-1)
    i, f, g, o = jnp.split(xi + h @ params["w_rec"], 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    return jnp.concatenate([jax.nn.sigmoid(o) * jnp.tanh(c), c], axis=-1)


def lru_init(key: jax.Array, in_dim: int, hidden: int) -> dict[str, jax.Array]:
    """A linear recurrent unit's parameters (Orvieto et al. 2023): a diagonal complex recurrence
    with eigenvalues lambda = exp(-exp(nu_log) + i exp(theta_log)) spread uniformly (in area) over
    the unit disk, the input normalisation gamma = sqrt(1 - |lambda|^2), complex B [in, H] and
    C [H, H] as real and imaginary parts, and a real skip D [in, H]."""
    k_u1, k_u2, k_b, k_c, k_d = jax.random.split(key, 5)
    u1 = jax.random.uniform(k_u1, (hidden,), minval=1e-4)  # away from 0: |lambda| below 1
    u2 = jax.random.uniform(k_u2, (hidden,), minval=1e-4)
    nu_log = jnp.log(-0.5 * jnp.log(u1))  # |lambda|^2 = u1: uniform in area
    normal = lambda k, shape, fan: jax.random.normal(k, shape) / jnp.sqrt(fan)  # noqa: E731
    (k_br, k_bi), (k_cr, k_ci) = jax.random.split(k_b), jax.random.split(k_c)
    return {"nu_log": nu_log, "theta_log": jnp.log(2 * jnp.pi * u2),
            "gamma_log": 0.5 * jnp.log1p(-u1),
            "B_re": normal(k_br, (in_dim, hidden), 2 * in_dim),
            "B_im": normal(k_bi, (in_dim, hidden), 2 * in_dim),
            "C_re": normal(k_cr, (hidden, hidden), hidden),
            "C_im": normal(k_ci, (hidden, hidden), hidden),
            "D": normal(k_d, (in_dim, hidden), in_dim)}


def lru_lambda(params: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
    """The recurrence's eigenvalues lambda [H] as (real, imaginary) parts."""
    modulus, phase = jnp.exp(-jnp.exp(params["nu_log"])), jnp.exp(params["theta_log"])
    return modulus * jnp.cos(phase), modulus * jnp.sin(phase)


def lru_cell(params: dict[str, jax.Array], state: jax.Array, xi: jax.Array) -> jax.Array:
    """One LRU step from the input terms xi = [gamma Re(x B), gamma Im(x B), x D] [..., 3H]:
    state [y, Re h, Im h] [..., 3H] -> [y', Re h', Im h'] with
        h' = lambda * h + gamma * x B (complex, elementwise in lambda),  y' = Re(h' C) + x D
    """
    _, h_re, h_im = jnp.split(state, 3, axis=-1)
    b_re, b_im, skip = jnp.split(xi, 3, axis=-1)
    l_re, l_im = lru_lambda(params)
    h_re, h_im = l_re * h_re - l_im * h_im + b_re, l_re * h_im + l_im * h_re + b_im
    return lru_output(params, h_re, h_im, skip)


def lru_output(params: dict, h_re: jax.Array, h_im: jax.Array, skip: jax.Array) -> jax.Array:
    """[y, Re h, Im h] with y = Re(h C) + x D."""
    y = h_re @ params["C_re"] - h_im @ params["C_im"] + skip
    return jnp.concatenate([y, h_re, h_im], axis=-1)


def lru_sequence(params: dict, state: jax.Array, xi: jax.Array, start: jax.Array) -> jax.Array:
    """The LRU over a whole sequence at once: state [N, 3H] before it, input terms xi [L, N, 3H],
    start [L, N] -> the state after each step [L, N, 3H]. h_t = a_t h_{t-1} + b_t with a_t =
    lambda (0 where step t starts an episode: the memory resets) is an associative scan of the
    pairs (a, b) under (a1, b1) then (a2, b2) = (a2 a1, a2 b1 + b2), in O(log L) depth."""
    b_re, b_im, skip = jnp.split(xi, 3, axis=-1)
    l_re, l_im = lru_lambda(params)
    a_re = jnp.where(start[..., None], 0.0, l_re)
    a_im = jnp.where(start[..., None], 0.0, l_im)
    _, h_re, h_im = jnp.split(state, 3, axis=-1)  # the carried memory enters the first b
    b_re = b_re.at[0].add(a_re[0] * h_re - a_im[0] * h_im)
    b_im = b_im.at[0].add(a_re[0] * h_im + a_im[0] * h_re)

    def combine(first, then):
        (ar1, ai1, br1, bi1), (ar2, ai2, br2, bi2) = first, then
        return (ar2 * ar1 - ai2 * ai1, ar2 * ai1 + ai2 * ar1,
                ar2 * br1 - ai2 * bi1 + br2, ar2 * bi1 + ai2 * br1 + bi2)

    _, _, h_re, h_im = jax.lax.associative_scan(combine, (a_re, a_im, b_re, b_im))
    return lru_output(params, h_re, h_im, skip)


def trxl_init(key: jax.Array, in_dim: int, embed: int, *, heads: int, layers: int,
              window: int, positions: str = "learned") -> dict:
    """A gated Transformer-XL's parameters: an input projection [in, E], then per layer the
    attention's query, key, value and output weights [E, E] (glorot), its relative positions, a
    ReLU MLP E -> 4E -> E, two layer norms and two GRU-type gates whose update bias 2 keeps each
    layer near the identity at first (Parisotto et al. 2020). Positions: learned, a bias "rel"
    [heads, M + 1] per head and distance 0..M (zero at first); sinusoidal, Transformer-XL's
    (Dai et al. 2019, section 3.3): a projection "w_r" [E, E] of the distance's sinusoids and
    the content and position biases "u", "v" [heads, E / heads] (zero at first). The sizes are
    read back from the shapes and the state's width (`trxl_sizes`)."""
    glorot = jax.nn.initializers.glorot_uniform()
    k_in, *k_layers = jax.random.split(key, layers + 1)
    norm = {"scale": jnp.ones(embed), "offset": jnp.zeros(embed)}

    def gate(k):  # the stream's weights u_*, the sublayer's w_*
        ks = jax.random.split(k, 6)
        return {name: glorot(k, (embed, embed))
                for name, k in zip(("wr", "ur", "wz", "uz", "wg", "ug"), ks)} | \
            {"bz": jnp.full(embed, 2.0)}

    def relative(k):
        if positions == "learned":
            return {"rel": jnp.zeros((heads, window + 1))}
        bias = jnp.zeros((heads, embed // heads))
        return {"w_r": glorot(jax.random.fold_in(k, 8), (embed, embed)), "u": bias, "v": bias}

    def layer(k):
        ks = jax.random.split(k, 8)
        return {"norm1": norm, "norm2": norm, **relative(k),
                **{name: glorot(k, (embed, embed))
                   for name, k in zip(("wq", "wk", "wv", "wo"), ks)},
                "w1": glorot(ks[4], (embed, 4 * embed)), "w2": glorot(ks[5], (4 * embed, embed)),
                "gate1": gate(ks[6]), "gate2": gate(ks[7])}

    return {"w_in": glorot(k_in, (in_dim, embed)), "b": jnp.zeros(embed),
            "layers": [layer(k) for k in k_layers]}


def trxl_sizes(params: dict, width: int) -> tuple[int, int, int, int]:
    """(E, layers, window M, heads) of a Transformer-XL's parameters and its state's width S =
    E + M (layers E + 1)."""
    embed, layers = params["w_in"].shape[1], len(params["layers"])
    first = params["layers"][0]
    heads = first["rel"].shape[0] if "rel" in first else first["u"].shape[0]
    return embed, layers, (width - embed) // (layers * embed + 1), heads


def trxl_memory(params: dict, state: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Its state [..., S] = [out E | memory layers * M * E | valid M] -> (memory [..., layers, M,
    E]: each layer's inputs at the last M steps, oldest first; valid [..., M] bool: the slot holds
    a step of the running episode). The zero state is an empty memory."""
    embed, layers, window, _ = trxl_sizes(params, state.shape[-1])
    memory = state[..., embed:embed + layers * window * embed]
    return memory.reshape(state.shape[:-1] + (layers, window, embed)), state[..., -window:] > 0.5


def trxl_gate(g: dict, x: jax.Array, y: jax.Array) -> jax.Array:
    """GTrXL's GRU-type gate joining what a sublayer adds, y, to the stream x (Parisotto et al.
    2020, eq. 7-10): r = sigmoid(y Wr + x Ur), z = sigmoid(y Wz + x Uz - bz),
    h = tanh(y Wg + (r * x) Ug), out = (1 - z) * x + z * h."""
    r = jax.nn.sigmoid(y @ g["wr"] + x @ g["ur"])
    z = jax.nn.sigmoid(y @ g["wz"] + x @ g["uz"] - g["bz"])
    return (1 - z) * x + z * jnp.tanh(y @ g["wg"] + (r * x) @ g["ug"])


def sinusoids(distance: jax.Array, embed: int) -> jax.Array:
    """Transformer-XL's position embedding of distances [...] -> [..., E]: sin(d / 10000^(2i/E))
    for i < E/2, then the cosines (Vaswani et al. 2017's frequencies)."""
    angle = distance[..., None] / 10000.0 ** (jnp.arange(0, embed, 2) / embed)
    return jnp.concatenate([jnp.sin(angle), jnp.cos(angle)], -1)


def trxl_layer(p: dict, heads: int, x: jax.Array, kv: jax.Array, distance: jax.Array,
               allowed: jax.Array) -> jax.Array:
    """One gated layer: queries from x [..., Q, E], keys and values from kv [..., K, E] (the
    memory, then x), distance [Q, K] (query step - key step), allowed [..., Q, K] -> [..., Q, E].
    Pre-norm attention with relative positions, then a pre-norm ReLU MLP, each through its gate.
    Positions: a learned bias per head and distance (as Shaw et al. 2018 and T5), or
    Transformer-XL's logits (q + u) k + (q + v) (R W_r), R the distance's sinusoids."""
    embed = x.shape[-1]
    split = lambda t: t.reshape(t.shape[:-1] + (heads, embed // heads))  # noqa: E731
    q_in, kv_in = layer_norm(p["norm1"], x), layer_norm(p["norm1"], kv)
    q, k, v = split(q_in @ p["wq"]), split(kv_in @ p["wk"]), split(kv_in @ p["wv"])
    if "rel" in p:
        logits = jnp.einsum("...qhd,...khd->...hqk", q, k) / jnp.sqrt(embed // heads)
        logits = logits + p["rel"][:, jnp.clip(distance, 0, p["rel"].shape[1] - 1)]
    else:  # content and position terms; a distance outside the window is masked below
        r = split(sinusoids(distance.astype(x.dtype), embed) @ p["w_r"])  # [Q, K, heads, E/h]
        logits = (jnp.einsum("...qhd,...khd->...hqk", q + p["u"], k)
                  + jnp.einsum("...qhd,qkhd->...hqk", q + p["v"], r)) / jnp.sqrt(embed // heads)
    # a key outside the window or the episode weighs exactly 0 (exp underflows)
    logits = jnp.where(allowed[..., None, :, :], logits, -1e30)
    attended = jnp.einsum("...hqk,...khd->...qhd", jax.nn.softmax(logits, axis=-1), v)
    x = trxl_gate(p["gate1"], x, jax.nn.relu(attended.reshape(x.shape) @ p["wo"]))
    y = jax.nn.relu(jax.nn.relu(layer_norm(p["norm2"], x) @ p["w1"]) @ p["w2"])
    return trxl_gate(p["gate2"], x, y)


def trxl_cell(params: dict, state: jax.Array, xi: jax.Array) -> jax.Array:
    """One Transformer-XL step for acting, from its cached memory: state [..., S], the projected
    input xi [..., E] -> the new state, whose memory drops its oldest step and keeps this one's
    layer inputs. Each layer's query attends its memory's valid slots and the step itself."""
    embed, layers, window, heads = trxl_sizes(params, state.shape[-1])
    memory, valid = trxl_memory(params, state)
    allowed = jnp.concatenate([valid, jnp.ones(valid.shape[:-1] + (1,), bool)], -1)[..., None, :]
    distance = jnp.arange(window, -1, -1)[None, :]  # [1, M + 1]: the oldest slot is M steps back
    h, inputs = xi[..., None, :], []
    for i, p in enumerate(params["layers"]):
        inputs.append(h[..., 0, :])
        h = trxl_layer(p, heads, h, jnp.concatenate([memory[..., i, :, :], h], -2), distance,
                       allowed)
    memory = jnp.concatenate([memory[..., 1:, :], jnp.stack(inputs, -2)[..., None, :]], -2)
    valid = jnp.concatenate([valid[..., 1:], allowed[..., 0, -1:]], -1)
    return jnp.concatenate([h[..., 0, :], memory.reshape(state.shape[:-1] + (-1,)),
                            valid.astype(state.dtype)], -1)


def trxl_sequence(params: dict, state: jax.Array, xi: jax.Array, start: jax.Array) -> jax.Array:
    """The Transformer-XL over a whole sequence at once, for learning: state [N, S] before it
    (its memory, which gets no gradient), projected inputs xi [L, N, E], start [L, N] -> the
    output after each step [L, N, E]. The keys are the M memory slots, then the L steps; step t
    attends the M steps before it and itself, of its own episode, as `trxl_cell` steps do, so
    the gradient flows through attention across the whole sequence (the gradient window)."""
    _, _, window, heads = trxl_sizes(params, state.shape[-1])
    memory, valid = trxl_memory(params, jax.lax.stop_gradient(state))
    length = xi.shape[0]
    position = jnp.arange(window + length)  # of the keys; the queries are the last L
    distance = position[window:, None] - position[None, :]  # [L, M + L]
    # each query's episode began at its last start (its absolute position; 0: before the memory)
    last = jax.lax.cummax(jnp.where(start, jnp.arange(length)[:, None], -1), axis=0)  # [L, N]
    first = jnp.where(last >= 0, last + window, 0)
    key_valid = jnp.concatenate([valid.T, jnp.ones((length,) + valid.shape[:1], bool)])
    allowed = ((distance >= 0) & (distance <= window))[:, :, None] \
        & (position[None, :, None] >= first[:, None, :]) & key_valid[None]  # [L, M + L, N]
    h = jnp.swapaxes(xi, 0, 1)  # [N, L, E]
    for i, p in enumerate(params["layers"]):
        h = trxl_layer(p, heads, h, jnp.concatenate([memory[:, i], h], 1), distance,
                       allowed.transpose(2, 0, 1))
    return jnp.swapaxes(h, 0, 1)


# each core: (init, its step from the input terms)
CORES = {"gru": (gru_init, gru_cell), "lstm": (lstm_init, lstm_cell), "lru": (lru_init, lru_cell),
         "trxl": (trxl_init, trxl_cell)}


def core_inputs(kind: str, params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """A core's input terms from its input x [..., in]: gru [..., 3H], lstm [..., 4H], lru
    [..., 3H], trxl the projected input [..., H]."""
    if kind == "gru":
        return gru_inputs(params, x)
    if kind in ("lstm", "trxl"):
        return x @ params["w_in"] + params["b"]
    gamma = jnp.exp(params["gamma_log"])
    return jnp.concatenate([gamma * (x @ params["B_re"]), gamma * (x @ params["B_im"]),
                            x @ params["D"]], axis=-1)


def state_width(core: str, size: int, layers: int = 0, window: int = 0) -> int:
    """S, the width of a core's state: gru H, lstm 2H, lru 3H; trxl H + layers * M * H + M (its
    output, its memory of M steps' layer inputs and which of them are valid)."""
    if core == "trxl":
        return size * (1 + layers * window) + window
    return size * {"gru": 1, "lstm": 2, "lru": 3}[core]
