"""Recurrent PPO: PPO with a recurrent core, for tasks the agent must remember.

The network is an MLP encoder, a recurrent core (`--core`: a GRU, an LSTM, a linear
recurrent unit or a gated Transformer-XL), then policy and value heads; the core's state
resets to zeros where an episode starts. The rollout stores the state each step began with, so
the update replays whole sequences: each environment's rollout is cut into chunks of
`seq_len` steps (default: the whole rollout), each chunk starts from the state stored at
its first step, and minibatches are sets of chunks (time is never shuffled). `burn_in` B
first replays the B steps before a chunk (within the rollout) with the current parameters,
without loss or gradient, to refresh that stored state (R2D2, Kapturowski et al. 2019). The
Transformer-XL's state holds its memory window, so its rollout keeps the state only at the
steps a replay starts from, not at every step.

With `--critic-obs privileged_state` (recurrent MAPPO on JaxMARL's envs, where the privileged
part is the world state) the value head has an encoder and a GRU of its own over the
observation's privileged part, which the policy never reads; the two GRUs' states are stored
and replayed side by side, as one state [2H].

A truncated episode bootstraps from V(final observation) computed with the state the
agent had at that step, not the reset one. In rl8's terms (`recurrent=True`), `seq_len`
is rl8's `seq_len` (the length of the sequences a minibatch replays) and rl8's
`seqs_per_state_reset` corresponds to how many chunks a rollout holds per environment
(num_steps / seq_len): every chunk starts from the stored state at its first step here,
rather than carrying a state through several sequences.
Papers: PPO, Schulman et al. 2017 (arXiv:1707.06347); GRU, Cho et al. 2014 (arXiv:1406.1078);
MAPPO, Yu et al. 2022 (arXiv:2103.01955); LSTM, Hochreiter & Schmidhuber 1997; LRU, Orvieto
et al. 2023 (arXiv:2303.06349); Transformer-XL, Dai et al. 2019 (arXiv:1901.02860), gated as
GTrXL, Parisotto et al. 2020 (arXiv:1910.06764).

    python algos/ppo_rnn.py --env CartPole-v1 --hide-obs 1 3 --num-seeds 4
"""

from __future__ import annotations

# before the imports below (seconds): a Ctrl-C in them is one line, not a traceback
if __name__ == "__main__":
    from scanrl.common.harness import quiet_start
    quiet_start()

import sys
from dataclasses import dataclass
from functools import partial
from typing import Literal, NamedTuple

from scanrl.common import algorithm, envs
from scanrl.common.recurrent import CORES, core_inputs, lru_sequence, trxl_init, trxl_sequence
from scanrl.common.recurrent import state_width as state_width_of
from scanrl.common.nets import (ACTIVATIONS, actions_for, cnn_apply, cnn_init, entropy_of,
                                head_distribution, mlp_apply, mlp_init, use_cnn)
from scanrl.common.onpolicy import (approx_kl, clipped_surrogate_loss, gae, learn, lr_schedule,
                                    make_optimizer, normalize_advantages, value_loss)

import distrax
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import optax


# ---------------------------------------------------------------------------------------------
# Config: hyperparameters (the command line adds its run settings as flags of the same kind)
# ---------------------------------------------------------------------------------------------
ALGO = "ppo_rnn"  # its name in the suites' recipe tables: a copy of this file keeps the recipes
# the run settings it starts from (the command line's: common/harness/runconfig.py), by preset
# (None: every env)
RUN_DEFAULTS = {"continuous": dict(eval_every=25)}


@dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"
    """a gymnax id (CartPole-v1) or SUITE/NAME (brax/ant, navix/Navix-Empty-5x5-v0); discrete and
    continuous (Box) action spaces both work."""
    total_timesteps: int = 200_000
    """environment steps per seed (rounded down to whole updates; 0: until a --stop-* condition
    holds, with learning-rate annealing off)."""
    num_envs: int = 16
    """parallel environments per seed."""
    num_steps: int = 64
    """steps per environment in each rollout (rollout = num_envs x num_steps transitions)."""
    seq_len: int = 0
    """length of the sequences the update replays (0: the whole rollout); must divide num_steps."""
    burn_in: int = 0
    """steps replayed before each sequence, without loss, to refresh its stored core state."""
    num_epochs: int = 4
    """passes over each rollout."""
    num_minibatches: int = 4
    """minibatches per epoch, each a set of whole sequences; must divide
    num_envs * num_steps / seq_len."""
    learning_rate: float = 4e-3
    """Adam step size."""
    adam_eps: float = 1e-5
    """Adam's epsilon (CleanRL's and PureJaxRL's 1e-5; Brax's trainers use optax's 1e-8)."""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the run."""
    gamma: float = 0.99
    """discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda (0: one-step TD, 1: Monte-Carlo)."""
    clip_eps: float = 0.2
    """PPO ratio clip range: ratios outside [1 - eps, 1 + eps] get no gradient."""
    dual_clip_param: float | None = None
    """dual clip c > 1: for negative advantages the objective is bounded below by c * A
    (None: off)."""
    clip_value_loss: bool = True
    """PPO2 value clipping: the new value may move at most clip_eps from the rollout's value."""
    target_kl: float | None = None
    """stop the rest of an update's epochs once a minibatch's approx KL exceeds this (None: off)."""
    normalize_advantages: bool = True
    """normalise advantages to zero mean, unit std within each minibatch."""
    ent_coef: float = 0.01
    """entropy bonus weight."""
    vf_coef: float = 0.5
    """value loss weight."""
    max_grad_norm: float = 0.5
    """clip the global gradient norm to this (0: no clipping)."""
    normalize_obs: bool = False
    """normalise observations by running mean/std (statistics frozen during each rollout)."""
    normalize_reward: bool = False
    """scale rewards by the running std of the discounted return."""
    reward_scale: float = 1.0
    """multiply every reward by this constant before the advantages (Brax's `reward_scaling`); with
    --normalize-reward, before the running statistics."""
    encoder_hidden: tuple[int, ...] = (64,)
    """layer sizes of the MLP between the observation and the GRU."""
    core: Literal["gru", "lstm", "lru", "trxl"] = "gru"
    """the recurrent core: gru (Cho et al. 2014), lstm (Hochreiter & Schmidhuber 1997), lru, a
    linear recurrent unit replayed by an associative scan (Orvieto et al. 2023), or trxl, a gated
    Transformer-XL over a cached memory window (Dai et al. 2019, Parisotto et al. 2020)."""
    gru_size: int = 64
    """width H of the recurrent core's output (the GRU's state; the LSTM's h and c; the LRU's
    output and complex memory; the Transformer-XL's embedding)."""
    trxl_window: int = 64
    """trxl: the memory window M: each step attends the M steps before it, cached across
    sequences and rollouts; at least the gradient window (--seq-len, or the whole rollout)."""
    trxl_heads: int = 4
    """trxl: attention heads; must divide --gru-size."""
    trxl_layers: int = 2
    """trxl: gated attention layers."""
    trxl_positions: Literal["learned", "sinusoidal"] = "learned"
    """trxl: relative positions as a learned bias per head and distance, or Transformer-XL's
    sinusoids with their content and position biases u, v (Dai et al. 2019)."""
    head_hidden: tuple[int, ...] = (64,)
    """hidden layer sizes of the policy and value heads on the GRU's output."""
    activation: Literal["tanh", "relu", "elu", "swish"] = "tanh"
    """hidden-layer activation."""
    critic_obs: Literal["state", "privileged_state"] = "state"
    """what the value head reads: state, the GRU the policy reads; privileged_state, an encoder
    and GRU of its own over the observation's privileged part, which the policy never reads
    (JaxMARL's world state: recurrent MAPPO's centralised critic; Playground's privileged_state)."""
    torso: Literal["auto", "mlp", "cnn"] = "auto"
    """cnn: 3x3 convolutions read image observations [H, W, C] before the encoder MLP; mlp: flatten
    them; auto: cnn for images."""
    conv_channels: tuple[int, ...] = (16,)
    """output channels of each convolution of the cnn torso."""
    conv_kernel: int = 3
    """side of the cnn torso's square kernels."""
    obs_one_hot: int = 0
    """K > 0: every observation value is a code 0..K-1 (a symbolic grid's tile and colour ids, as
    XLand-MiniGrid's), read one-hot, as an embedding table reads it; 0: read the values as
    numbers."""
    action_dist: Literal["gaussian", "tanh_normal"] = "gaussian"
    """continuous (Box) actions only. gaussian: a normal with a state-independent log-std, its
    samples clipped to the env's bounds; tanh_normal: Brax PPO's default, a normal with a
    state-dependent std (softplus + min_std) squashed by tanh (Haarnoja et al. 2018) and rescaled
    to the bounds."""
    min_std: float = 0.001
    """tanh_normal: the smallest standard deviation (before tanh) the policy can reach."""

    batch_size = property(lambda self: self.num_envs * self.num_steps)
    sequence_length = property(lambda self: self.seq_len or self.num_steps)
    num_sequences = property(lambda self: self.batch_size // self.sequence_length)
    num_updates = property(lambda self: algorithm.updates_for(self, self.batch_size))

    def __post_init__(self):
        algorithm.check_values(
            self, positive=("num_envs", "num_steps", "num_epochs", "num_minibatches",
                            "learning_rate", "gru_size", "target_kl", "adam_eps", "min_std",
                            "reward_scale", "conv_kernel", "trxl_window", "trxl_heads",
                            "trxl_layers"),
            nonnegative=("seq_len", "burn_in", "ent_coef", "vf_coef", "max_grad_norm",
                         "obs_one_hot"),
            within={"gamma": "(0, 1]", "gae_lambda": "[0, 1]", "clip_eps": "(0, 1)"},
        )
        if self.num_steps % self.sequence_length:
            raise ValueError(f"--seq-len {self.seq_len} does not divide --num-steps "
                             f"{self.num_steps}.")
        if self.num_sequences % self.num_minibatches:
            raise ValueError(f"the rollout holds {self.num_sequences} sequences "
                             "(num_envs * num_steps / seq_len), not divisible by --num-minibatches "
                             f"{self.num_minibatches}.")
        algorithm.check_budget(self, self.batch_size, "rollout")
        if self.dual_clip_param is not None and self.dual_clip_param <= 1:
            raise ValueError(f"--dual-clip-param must be greater than 1, got "
                             f"{self.dual_clip_param}.")
        if self.core not in CORES:
            raise ValueError(f"--core must be gru, lstm, lru or trxl, got {self.core}.")
        if self.core == "trxl" and self.gru_size % self.trxl_heads:
            raise ValueError(f"--trxl-heads {self.trxl_heads} does not divide --gru-size "
                             f"{self.gru_size}, the embedding the heads split.")
        if self.core == "trxl" and self.trxl_positions == "sinusoidal" and self.gru_size % 2:
            raise ValueError(f"--gru-size {self.gru_size} is odd; --trxl-positions sinusoidal "
                             "pairs a sine and a cosine per frequency, so it needs an even size.")
        if self.core == "trxl" and self.trxl_window < self.sequence_length:
            raise ValueError(f"--trxl-window {self.trxl_window} is shorter than the gradient "
                             f"window (--seq-len, else --num-steps: {self.sequence_length}).")
        if self.core == "trxl" and self.critic_obs == "privileged_state":
            raise ValueError("--critic-obs privileged_state gives the critic a core of its own, "
                             "which --core trxl does not take; use gru, lstm or lru.")
        if self.obs_one_hot and self.normalize_obs:
            raise ValueError(f"--obs-one-hot {self.obs_one_hot} reads the observation as codes, "
                             "which --normalize-obs would turn into other numbers; use one of the "
                             "two.")


# Defaults: tuned on CartPole with its velocities hidden (--hide-obs 1 3) by learning-rate sweeps
# (benchmarks/HISTORY.md, 2026-11-23, evening). Continuous-action envs start from PPO's Pendulum
# settings, untuned here.
PRESETS = {
    "continuous": dict(total_timesteps=1_000_000, num_envs=16, num_steps=256, num_epochs=10,
                       num_minibatches=16, learning_rate=1e-3, gamma=0.95, ent_coef=0.0),
    # MinAtar: ppo.py's MinAtar rollout shape (conv torso) at a lower learning rate; not tuned
    "minatar": dict(total_timesteps=2_000_000, num_envs=64, num_steps=128, num_epochs=4,
                    num_minibatches=8, learning_rate=5e-4, activation="relu"),
}


def default_config(env: str = "CartPole-v1", recipe: str = "auto", **overrides) -> Config:
    """Config for `env` (PRESETS["continuous"] for Box actions, PRESETS["minatar"] for MinAtar),
    then the suite's published recipe for `env` where there is one (Craftax_Baselines' ppo_rnn.py,
    XLand-MiniGrid's single-task PPO; `recipe`: auto, published, cpu, none); `overrides`
    (hyperparameters) win."""
    # the env ids' registry and the suites' recipe tables load only here
    from scanrl.common.suites import recipes

    return Config(**{**recipes.config_fields(ALGO, env, recipe, PRESETS), **overrides, "env": env})


# ---------------------------------------------------------------------------------------------
# Network: (conv torso for image observations ->) encoder MLP -> recurrent core -> policy and
# value heads; continuous actions: a state-independent log-std (gaussian), or a state-dependent
# std before a tanh (tanh_normal: the policy head's output; common/nets.py's head_distribution,
# to_bounds, entropy_of). One core serves both heads (one state to store and replay); a privileged
# critic has its own, side by side with the policy's in that one state.
#
# The core (--core) is a GRU, an LSTM, a linear recurrent unit (LRU) or a gated Transformer-XL,
# common/recurrent.py's (pqn_rnn.py's too; their equations and papers are there).
# Its state is one array [..., S] that starts every episode at zeros: its first H (gru_size)
# columns are the core's output, which the heads read, and the rest its memory. gru: h (S = H);
# lstm: [h, c] (S = 2H); lru: [y, Re h, Im h] (S = 3H); trxl: [out, each layer's inputs at the
# last M steps, which of those M steps are valid] (S = H + layers M H + M). A core's input
# terms (x W + b) do not depend on the state, so a sequence's are one matmul (`encode`) before
# the recurrence.
# ---------------------------------------------------------------------------------------------
def state_width(config: "Config") -> int:
    """S, the width of one core's state: gru H, lstm 2H, lru 3H; trxl H + layers * M * H + M (its
    output, its memory of M steps' layer inputs and which of them are valid)."""
    return state_width_of(config.core, config.gru_size, config.trxl_layers, config.trxl_window)


def core_of(params: dict, critic: bool = False) -> tuple[str, dict]:
    """(kind, parameters) of the policy's core (critic: the privileged critic's own), found by
    the name the parameters are stored under: "gru", "lstm", "lru", "trxl" ("critic_gru", ...)."""
    return next((kind, params[name]) for kind in CORES
                if (name := ("critic_" if critic else "") + kind) in params)


def init_params(key: jax.Array, config: Config, vec_env: envs.VecEnv) -> dict:
    k = config.obs_one_hot or 1  # one-hot codes widen the last axis K times
    params, in_dim, shape = {}, vec_env.policy_obs_dim * k, \
        vec_env.obs_shape[:-1] + (vec_env.obs_shape[-1] * k,)
    if use_cnn(config.torso, vec_env.obs_shape):
        key, k_torso = jax.random.split(key)
        params["torso"], in_dim = cnn_init(k_torso, shape, config.conv_channels, config.conv_kernel)
    k_enc, k_gru, k_actor, k_critic = jax.random.split(key, 4)
    tanh_normal = config.action_dist == "tanh_normal" and not vec_env.discrete
    out_dim = vec_env.num_actions if vec_env.discrete \
        else vec_env.action_dim * (2 if tanh_normal else 1)
    enc_out = config.encoder_hidden[-1] if config.encoder_hidden else in_dim
    params["encoder"] = mlp_init(k_enc, (in_dim, *config.encoder_hidden)) \
        if config.encoder_hidden else []
    core_init = CORES[config.core][0] if config.core != "trxl" else partial(
        trxl_init, heads=config.trxl_heads, layers=config.trxl_layers, window=config.trxl_window,
        positions=config.trxl_positions)
    params[config.core] = core_init(k_gru, enc_out, config.gru_size)
    if config.critic_obs == "privileged_state":  # the value head's own encoder and core
        k_enc, k_gru = jax.random.split(jax.random.fold_in(key, 1))
        critic_in = (vec_env.obs_dim - vec_env.policy_obs_dim) * k
        params["critic_encoder"] = mlp_init(k_enc, (critic_in, *config.encoder_hidden)) \
            if config.encoder_hidden else []
        params["critic_" + config.core] = core_init(
            k_gru, config.encoder_hidden[-1] if config.encoder_hidden else critic_in,
            config.gru_size)
    params["actor"] = mlp_init(k_actor, (config.gru_size, *config.head_hidden, out_dim),
                               output_gain=0.01)
    params["critic"] = mlp_init(k_critic, (config.gru_size, *config.head_hidden, 1),
                                output_gain=1.0)
    if not vec_env.discrete and not tanh_normal:
        params["log_std"] = jnp.zeros(out_dim)
    return params


def encode(params: dict, obs: jax.Array, activation: str, one_hot: int = 0) -> jax.Array:
    """obs [..., obs_dim] or images [..., H, W, C] -> the core's input terms (torso, encoder MLP,
    `core_inputs`). one_hot K: obs holds codes 0..K-1, read one-hot ([..., C] -> [..., C * K]).
    With a privileged critic, obs is [policy part | privileged part] and the result both cores'
    input terms side by side."""
    if one_hot:
        obs = jax.nn.one_hot(obs.astype(jnp.int32), one_hot).reshape(obs.shape[:-1] + (-1,))
    kind, core_params = core_of(params)
    if "critic_encoder" in params:  # the policy part is as wide as the policy's first layer reads
        first = params["encoder"][0]["w"] if params["encoder"] else \
            core_params["w_in" if "w_in" in core_params else "D"]
        width = first.shape[0]
        return jnp.concatenate(
            [encode({"encoder": params["encoder"], kind: core_params}, obs[..., :width],
                    activation),
             encode({"encoder": params["critic_encoder"], kind: core_of(params, critic=True)[1]},
                    obs[..., width:], activation)], axis=-1)
    x = cnn_apply(params["torso"], obs, activation) if "torso" in params else obs
    x = ACTIVATIONS[activation](mlp_apply(params["encoder"], x, activation)) \
        if params["encoder"] else x
    return core_inputs(kind, core_params, x)


def recur(params: dict, hidden: jax.Array, inputs: jax.Array, start: jax.Array) -> jax.Array:
    """The recurrent half of a step: hidden [..., S], the step's `encode`d inputs, start [...]
    (the step begins an episode: the state resets to zeros first) -> the new state. With a
    privileged critic: both cores, states and inputs side by side."""
    hidden = jnp.where(start[..., None], 0.0, hidden)
    kind, core_params = core_of(params)
    cell = CORES[kind][1]
    if "critic_encoder" in params:
        (h, h_critic), (x, x_critic) = (jnp.split(hidden, 2, axis=-1),
                                        jnp.split(inputs, 2, axis=-1))
        return jnp.concatenate([cell(core_params, h, x),
                                cell(core_of(params, critic=True)[1], h_critic, x_critic)],
                               axis=-1)
    return cell(core_params, hidden, inputs)


def core(params: dict, hidden: jax.Array, obs: jax.Array, start: jax.Array, activation: str,
         one_hot: int = 0) -> jax.Array:
    """One recurrent step: hidden [..., S] (the state carried in), obs [..., obs_dim] or images
    [..., H, W, C], start [...] (obs begins an episode: the state resets to zeros first) -> the
    new state [..., S]. one_hot K: obs holds codes 0..K-1 (`encode`)."""
    return recur(params, hidden, encode(params, obs, activation, one_hot), start)


def policy(params: dict, hidden: jax.Array, activation: str, action_mask: jax.Array | None = None,
           action_dist: str = "gaussian", min_std: float = 0.001) -> distrax.Distribution:
    """The core's state [..., S] -> action distribution with batch shape [...] (the head reads
    the core's output, the state's first H columns); action_mask [..., A]: the valid discrete
    actions, where the env has an action mask. tanh_normal: the normal of the pre-tanh action u
    (the head outputs [loc, raw scale], scale = softplus(raw) + min_std); the env gets tanh(u)
    rescaled (`to_bounds`)."""
    if "critic_encoder" in params:  # the policy's half of the two cores' states
        hidden = hidden[..., :hidden.shape[-1] // 2]
    return head_distribution(mlp_apply(params["actor"], output(params, hidden), activation),
                             params, action_mask, action_dist, min_std)


def value(params: dict, hidden: jax.Array, activation: str) -> jax.Array:
    """The core's state [..., S] -> V [...] from its output (a privileged critic: from the second
    half of the state, its own core's)."""
    if "critic_encoder" in params:
        hidden = hidden[..., hidden.shape[-1] // 2:]
    return mlp_apply(params["critic"], output(params, hidden), activation)[..., 0]


def output(params: dict, state: jax.Array) -> jax.Array:
    """A core's output, what the heads read: the first H columns of its state [..., S] (a GRU's
    state is all output)."""
    size = params["critic"][0]["w"].shape[0]
    return state if state.shape[-1] == size else state[..., :size]


def unroll(params: dict, hidden: jax.Array, obs: jax.Array, start: jax.Array, activation: str,
           one_hot: int = 0) -> jax.Array:
    """Replay a sequence: hidden [N, S] before its first step, obs [L, N, obs_dim], start
    [L, N] -> the state after each step [L, N, S], resetting exactly where start is set (trxl:
    its output [L, N, H], all the heads read; `trxl_sequence`)."""
    def step(h, step_inputs):
        h = recur(params, h, *step_inputs)
        return h, h
    # Only the recurrence is sequential: the inputs of all L steps are one batch (one matmul each,
    # not L small ones, which vmapped seeds on a CPU run slowly: benchmarks/HISTORY.md, 2026-11-28)
    inputs = encode(params, obs, activation, one_hot)
    if "lru" in params and "critic_encoder" not in params:  # linear: an associative scan
        return lru_sequence(params["lru"], hidden, inputs, start)
    if "trxl" in params:  # attention: the whole sequence at once
        return trxl_sequence(params["trxl"], hidden, inputs, start)
    if "critic_encoder" in params:  # two cores, each its own carry: their states and inputs
        # split once here, not at every step, whose gradient copied every step's input terms
        # (a MAPPO update on SMAX 15% slower on a CPU: benchmarks/HISTORY.md, 2026-12-07)
        cores = [{kind: p} for kind, p in (core_of(params), core_of(params, critic=True))]
        halves = lambda x: tuple(jnp.split(x, 2, axis=-1))  # noqa: E731

        def step_both(hs, step_inputs):
            xs, start = step_inputs
            hs = tuple(recur(p, h, x, start) for p, h, x in zip(cores, hs, xs))
            return hs, hs
        states = jax.lax.scan(step_both, halves(hidden), (halves(inputs), start))[1]
        return jnp.concatenate(states, axis=-1)
    return jax.lax.scan(step, hidden, (inputs, start))[1]


# ---------------------------------------------------------------------------------------------
# The math: PPO's (gae, clipped_surrogate_loss, value_loss, approx_kl, learn) comes from
# common/onpolicy.py; here the sequences and their replay, tested in tests/test_ppo_rnn.py
# ---------------------------------------------------------------------------------------------
class Sequences(NamedTuple):
    """Training sequences, leaves [S, L, ...] (S sequences of L steps); burn-in steps
    [S, B, ...]."""

    hidden: jax.Array  # [S, width] core state stored at the first step (of the burn-in, if any)
    obs: jax.Array
    start: jax.Array  # obs begins an episode
    action: jax.Array  # tanh_normal: the pre-tanh sample u [S, L, A]
    # log pi_old(action | history); tanh_normal: of u (the tanh Jacobian cancels in the ratio)
    log_prob: jax.Array
    value: jax.Array  # V_old
    advantage: jax.Array
    target: jax.Array  # GAE value target
    burn_obs: jax.Array  # [S, B, obs_dim] the B steps before the sequence
    burn_start: jax.Array
    # [S, B] steps that exist (the rollout's first sequence has none before it)
    burn_valid: jax.Array
    action_mask: jax.Array | None = None  # [S, L, A] valid actions where the env has an action mask
    # tanh_normal: standard normal [S, L, A] for the entropy estimate
    noise: jax.Array | None = None


def replay(params: dict, seqs: Sequences, config: Config) -> jax.Array:
    """The core state after each step of each sequence [S, L, width], from its stored state,
    refreshed by the burn-in steps with the current parameters (no gradient through them)."""
    hidden = seqs.hidden
    if config.burn_in:
        def burn(h, inputs):
            obs, start, valid = inputs
            new = core(params, h, obs, start, config.activation, config.obs_one_hot)
            return jnp.where(valid[:, None], new, h), None
        swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
        hidden, _ = jax.lax.scan(burn, hidden, (swap(seqs.burn_obs), swap(seqs.burn_start),
                                                swap(seqs.burn_valid)))
        hidden = jax.lax.stop_gradient(hidden)
    states = unroll(params, hidden, jnp.swapaxes(seqs.obs, 0, 1), jnp.swapaxes(seqs.start, 0, 1),
                    config.activation, config.obs_one_hot)
    return jnp.swapaxes(states, 0, 1)


def ppo_loss(params: dict, seqs: Sequences, config: Config) -> tuple[jax.Array, dict]:
    """Total loss = clipped surrogate + vf_coef * value loss - ent_coef * entropy, over every step
    of the replayed sequences; seqs.advantage is used as given (minibatch_gradient normalises
    it)."""
    states = replay(params, seqs, config)  # [S, L, H]
    dist = policy(params, states, config.activation, seqs.action_mask, config.action_dist,
                  config.min_std)
    log_ratio = dist.log_prob(seqs.action) - seqs.log_prob
    ratio = jnp.exp(log_ratio).reshape(-1)
    advantage = seqs.advantage.reshape(-1)
    policy_loss = clipped_surrogate_loss(ratio, advantage, config.clip_eps, config.dual_clip_param)
    v_clip = config.clip_eps if config.clip_value_loss else None
    values = value(params, states, config.activation).reshape(-1)
    v_loss = value_loss(values, seqs.value.reshape(-1), seqs.target.reshape(-1), v_clip)
    entropy = entropy_of(dist, seqs.noise).mean()  # tanh_normal: a one-sample estimate
    stats = {"policy_loss": policy_loss, "value_loss": v_loss, "entropy": entropy,
             "approx_kl": approx_kl(log_ratio),
             "clip_fraction": (jnp.abs(ratio - 1.0) > config.clip_eps).mean(),
             # 0 at an update's first minibatch: the replay reproduces the rollout's
             # log-probabilities
             "max_abs_log_ratio": jnp.abs(log_ratio).max()}
    return policy_loss + config.vf_coef * v_loss - config.ent_coef * entropy, stats


def minibatch_gradient(params: dict, minibatch: Sequences, config: Config) -> tuple[dict, dict]:
    """Gradient of ppo_loss over one minibatch of sequences (leaves [S, ...]) and the loss stats.
    Advantages are normalised over the minibatch."""
    if config.normalize_advantages:
        minibatch = minibatch._replace(advantage=normalize_advantages(minibatch.advantage))
    (_, stats), grads = jax.value_and_grad(ppo_loss, has_aux=True)(params, minibatch, config)
    return grads, stats


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
def to_sequences(traj: "Transition", values, advantages, targets, config: Config,
                 kept: jax.Array | None = None) -> Sequences:
    """Cut a rollout (leaves [T, N, ...]) into N * T / L sequences of L steps (env-major),
    each with the core state stored at its first step and its B burn-in steps before it (from
    traj.hidden, or from `kept` [K, N, S], the states kept where a replay starts: replay_slots)."""
    L, B = config.sequence_length, config.burn_in
    T, N = traj.start.shape
    starts = jnp.arange(0, T, L)  # [T / L] first step of each sequence

    def cut(x):  # [T, N, ...] -> [N * T / L, L, ...]
        x = x.reshape((T // L, L) + x.shape[1:])  # [T/L, L, N, ...]
        x = jnp.moveaxis(x, 2, 0)  # [N, T/L, L, ...]
        return x.reshape((N * (T // L), L) + x.shape[3:])

    first = jnp.maximum(starts - B, 0)  # the state a sequence's replay starts from
    stored = traj.hidden[first] if kept is None else kept[jnp.asarray(replay_slots(config)[1])]
    hidden = jnp.moveaxis(stored, 1, 0).reshape(N * (T // L), -1)
    burn_index = starts[:, None] - B + jnp.arange(B)[None, :]  # [T/L, B]
    burn = lambda x: jnp.moveaxis(x[jnp.maximum(burn_index, 0)], 2, 0).reshape(  # noqa: E731
        (N * (T // L), B) + x.shape[2:])
    burn_valid = jnp.broadcast_to(burn_index >= 0, (N,) + burn_index.shape).reshape(N * (T // L), B)
    return Sequences(hidden=hidden, obs=cut(traj.obs), start=cut(traj.start),
                     action=cut(traj.action), log_prob=cut(traj.log_prob), value=cut(values),
                     advantage=cut(advantages), target=cut(targets), burn_obs=burn(traj.obs),
                     burn_start=burn(traj.start), burn_valid=burn_valid,
                     action_mask=jax.tree.map(cut, traj.action_mask),
                     noise=jax.tree.map(cut, traj.noise))


# Cores whose state holds a memory window: the rollout keeps it only where a replay starts
KEPT_AT_REPLAY_STARTS = ("trxl",)


def replay_slots(config: Config) -> tuple[list[int], list[int]]:
    """For a rollout that keeps the core state only where a replay starts (the Transformer-XL's):
    (each step's slot among the kept states, len(kept) where the step's is not kept [T]; each
    sequence's slot [T / L]). A sequence's replay starts B steps before it, at 0 at the
    earliest."""
    T, L, B = config.num_steps, config.sequence_length, config.burn_in
    firsts = [max(k * L - B, 0) for k in range(T // L)]
    steps = sorted(set(firsts))
    return [steps.index(t) if t in steps else len(steps) for t in range(T)], \
        [steps.index(t) for t in firsts]


class Transition(NamedTuple):
    """One rollout, leaves [T, N, ...]."""

    # [T, N, width] the core state carried into the step (before any reset); None where the
    # rollout keeps it only at the steps a replay starts from (the Transformer-XL)
    hidden: jax.Array | None
    # [T, N, width] the core state after the step, which the policy acted on (the Transformer-XL:
    # its output, the first H columns)
    state: jax.Array
    obs: jax.Array  # [T, N, obs_dim]
    start: jax.Array  # obs begins an episode (the state resets to zeros before this step)
    action: jax.Array  # tanh_normal: the pre-tanh sample u [T, N, A]
    log_prob: jax.Array
    info: envs.StepInfo
    action_mask: jax.Array | None = None  # [T, N, A] valid actions (None: no action mask)
    noise: jax.Array | None = None  # tanh_normal: the entropy estimate's noise [T, N, A]
    # [T, N] each env's running discounted return (normalize_reward)
    discounted_return: jax.Array | None = None
    # [T, N] V(final obs) from the state after the step, computed in the rollout (the
    # Transformer-XL); None: rollout_advantages computes it from traj.state
    final_value: jax.Array | None = None


def rollout_advantages(params: dict, traj: Transition, final_obs: jax.Array, rewards: jax.Array,
                       config: Config):
    """(V(s_t), advantages, value targets), each [T, N], for `rewards` [T, N] (the env's, scaled).
    V(s'_t) is one more GRU step on the final observation (final_obs [T, N, obs_dim], as the
    network reads it) from the state after step t, so a truncated episode bootstraps with the
    state it had, not the reset one."""
    info = traj.info
    values = value(params, traj.state, config.activation)
    if traj.final_value is None:
        # one time step at a time: the whole [T, N] batch at once held GBs of conv patches on
        # XLand's grids
        after = jax.lax.map(lambda x: core(params, *x, config.activation, config.obs_one_hot),
                            (traj.state, final_obs, jnp.zeros_like(traj.start)))
        final_values = value(params, after, config.activation)
    else:
        final_values = traj.final_value
    advantages, targets = gae(rewards, values, final_values,
                              info.terminated, info.terminated | info.truncated, config.gamma,
                              config.gae_lambda)
    return values, advantages, targets


class TrainState(NamedTuple):
    params: dict
    opt_state: optax.OptState
    env_state: envs.VecEnvState
    obs: jax.Array  # [N, *obs] observations the next rollout starts from
    start: jax.Array  # [N] those observations begin an episode
    hidden: jax.Array  # [N, width] the core state carried into the next rollout
    obs_stats: envs.RunningStats  # observation statistics (normalize_obs)
    return_stats: envs.RunningStats  # discounted-return statistics (normalize_reward)
    discounted_return: jax.Array  # [N] running discounted return of each env's episode
    key: jax.Array


def make_algorithm(config: Config, env=None, env_params=None) -> algorithm.Algorithm:
    """Recurrent PPO's pieces for one seed (common/harness/loop.py turns them into programs). `env`:
    a gymnax-style env object to train on instead of config.env."""
    env, env_params = algorithm.resolve_env(config.env, env, env_params)
    vec_env = envs.VecEnv(env, env_params, config.num_envs)
    optimizer = make_optimizer(config.max_grad_norm, config.adam_eps)
    act_fn = config.activation
    # before compiling: ValueError for tanh_normal without finite bounds, cnn without images
    actions = actions_for(config.action_dist, vec_env, config.env)
    image = use_cnn(config.torso, vec_env.obs_shape)
    algorithm.check_critic_obs(config.critic_obs, config.env, vec_env)
    privileged = config.critic_obs == "privileged_state"
    if privileged and (image or config.obs_one_hot):
        raise ValueError("--critic-obs privileged_state reads flat observations; --env "
                         f"{config.env} is read as {'images' if image else 'codes'}.")
    # the core's state; a privileged critic's core beside the policy's
    hidden_size = state_width(config) * (2 if privileged else 1)
    dist_of = lambda params, hidden, mask=None: policy(params, hidden, act_fn, mask,
                                                       config.action_dist, config.min_std)
    lean = config.core in KEPT_AT_REPLAY_STARTS  # keep the state only where a replay starts
    slots = replay_slots(config)
    # a run without a budget (--total-timesteps 0) has no end to anneal to
    schedule = lr_schedule(config.learning_rate, config.num_updates,
                           anneal=config.anneal_lr and config.total_timesteps > 0)

    def observe(stats, obs):  # what the network reads: flat vectors (a `state` part; all of them
        stats = stats if config.normalize_obs else None  # for a privileged critic), or images
        return vec_env.observe(obs, stats, image, policy_part=not privileged)

    def init(key: jax.Array) -> TrainState:
        k_params, k_reset, key = jax.random.split(key, 3)
        params = init_params(k_params, config, vec_env)
        obs, env_state = vec_env.reset(k_reset)
        return TrainState(params=params, opt_state=optimizer.init(params), env_state=env_state,
                          obs=obs, start=jnp.ones(vec_env.num_envs, bool),
                          hidden=jnp.zeros((vec_env.num_envs, hidden_size)),
                          obs_stats=envs.init_stats((vec_env.obs_dim,)),
                          return_stats=envs.init_stats(),
                          discounted_return=jnp.zeros(vec_env.num_envs), key=key)

    def update(state: TrainState, update_index: jax.Array) -> tuple[TrainState, dict]:
        params = state.params
        key, k_rollout, k_epochs = jax.random.split(state.key, 3)

        # 1. Rollout: num_steps steps of num_envs envs, carrying the core state (tanh_normal: the
        #    stored action is the pre-tanh sample u, the env gets tanh(u) rescaled; nets.Actions).
        #    The Transformer-XL's state holds M steps of memory (65,920 floats an env at its
        #    repository's Craftax config), so its rollout keeps that state only at the steps a
        #    replay starts from (`kept`) and stores its output and V(final obs) per step.
        def env_step(carry, step):
            env_state, obs, start, hidden, discounted_return, *kept = carry
            step_key, slot = step if lean else (step, None)
            k_action, k_env, k_noise = actions.step_keys(step_key)
            policy_obs = observe(state.obs_stats, obs)
            new_hidden = core(params, hidden, policy_obs, start, act_fn, config.obs_one_hot)
            action_mask = vec_env.action_mask(env_state)
            dist = dist_of(params, new_hidden, action_mask)
            action = jax.vmap(lambda k, h, m: dist_of(params, h, m).sample(seed=k))(
                jax.random.split(k_action, vec_env.num_envs), new_hidden, action_mask)
            # as the replay computes it, so that the ratio is exactly 1
            log_prob = dist.log_prob(action)
            next_obs, env_state, info = vec_env.step(k_env, env_state, actions.to_env(action))
            noise = actions.noise(k_noise, action.shape)
            discounted_return = discounted_return * config.gamma + info.reward * config.reward_scale
            transition = Transition(hidden=hidden, state=new_hidden, obs=policy_obs, start=start,
                                    action=action, log_prob=log_prob, action_mask=action_mask,
                                    info=info, noise=noise, discounted_return=discounted_return)
            if lean:  # V(final obs) as rollout_advantages computes it, from the state after
                after = core(params, new_hidden, observe(state.obs_stats, info.final_obs),
                             jnp.zeros_like(start), act_fn, config.obs_one_hot)
                transition = transition._replace(hidden=None, state=output(params, new_hidden),
                                                 final_value=value(params, after, act_fn))
                kept = [kept[0].at[slot].set(hidden, mode="drop")]  # slot len(kept): not kept
            done = info.terminated | info.truncated
            return (env_state, next_obs, done, new_hidden,
                    jnp.where(done, 0.0, discounted_return), *kept), transition

        carry = (state.env_state, state.obs, state.start, state.hidden, state.discounted_return)
        steps = jax.random.split(k_rollout, config.num_steps)
        if lean:
            carry += (jnp.zeros((max(slots[1]) + 1,) + state.hidden.shape),)
            steps = (steps, jnp.asarray(slots[0]))
        (env_state, next_obs, next_start, hidden, discounted_return, *kept), traj = jax.lax.scan(
            env_step, carry, steps)
        info = traj.info

        # 2. Advantages (bootstrapping with the pre-reset state), then sequences. New statistics
        #    take effect from the next rollout; this one's observations stay as the policy saw them.
        rewards, return_stats, obs_stats = \
            info.reward * config.reward_scale, state.return_stats, state.obs_stats
        if config.normalize_reward:
            return_stats = envs.update_stats(return_stats, traj.discounted_return)
            rewards = envs.scale(return_stats, rewards)
        if config.normalize_obs:
            obs_stats = envs.update_stats(obs_stats, vec_env.flat_obs(info.final_obs))
        final_obs = observe(state.obs_stats, info.final_obs)
        old_values, advantages, targets = rollout_advantages(params, traj, final_obs, rewards,
                                                             config)
        # Sequences with the states stored at their first steps.
        seqs = to_sequences(traj, old_values, advantages, targets, config, *kept)

        # 3. num_epochs epochs of num_minibatches Adam steps at this update's learning rate.
        learning_rate = schedule(update_index)
        params, opt_state, loss_stats = learn(
            params, state.opt_state, seqs, k_epochs, partial(minibatch_gradient, config=config),
            optimizer, learning_rate, config.num_epochs, config.num_minibatches,
            target_kl=config.target_kl)

        metrics = {k: v.mean() for k, v in loss_stats.items()}
        metrics.update(envs.episode_metrics(info, vec_env), learning_rate=learning_rate)
        return TrainState(params=params, opt_state=opt_state, env_state=env_state, obs=next_obs,
                          start=next_start, hidden=hidden, obs_stats=obs_stats,
                          return_stats=return_stats, discounted_return=discounted_return,
                          key=key), metrics

    def act(policy_params: dict, obs: jax.Array, key: jax.Array, deterministic: bool,
            hidden: jax.Array, mask=None):
        """obs [N, *obs], hidden [N, H] (zeros at an episode's first step), mask [N, A] or None
        -> (actions [N, ...], hidden); tanh_normal: tanh of the pre-tanh normal's mode or sample,
        rescaled to the bounds."""
        params = policy_params["params"]
        obs = observe(policy_params["obs_stats"], obs)
        hidden = core(params, hidden, obs, jnp.zeros(obs.shape[0], bool), act_fn,
                      config.obs_one_hot)
        return actions.act(dist_of(params, hidden, mask), key, deterministic), hidden

    return algorithm.Algorithm(
        init=init, update=update, act=act,
        policy_params=lambda state: {"params": state.params, "obs_stats": state.obs_stats},
        vec_env=vec_env, num_updates=config.num_updates,
        steps_per_update=config.batch_size,
        init_carry=lambda n: jnp.zeros((n, hidden_size)),
    )


def make_train(config: Config, env=None, env_params=None, num_devices: int = 0):
    """The command line runs these same pieces through common/harness/loop.py, in chunks with
    evaluation and checkpoints, bit for bit alike. Here they make the whole run one jitted
    program, `train(keys[num_seeds]) -> {"state", "policy", "metrics"}`: each seed's updates are
    one `lax.scan`, the seeds are vmapped, and `shard_map` spreads them over the devices (the
    first `num_devices`; 0: all). Metrics leaves [num_seeds, num_updates]."""
    env, env_params = algorithm.train_env(config, env, env_params)
    algo = make_algorithm(config, env, env_params)
    mesh_for = algorithm.seed_mesh(num_devices)

    def train(keys):  # keys [num_seeds]
        mesh = mesh_for(len(keys))
        per_device = len(keys) // mesh.size

        def train_block(keys):  # keys [per_device]: this device's seeds
            states = algorithm.vmap_seeds(algo.init, per_device)(keys)
            update = algorithm.vmap_seeds(algo.update, per_device, in_axes=(0, None))
            # metrics [U, seeds]
            states, metrics = jax.lax.scan(update, states, jnp.arange(algo.num_updates))
            return {"state": states, "policy": jax.vmap(algo.policy_params)(states),
                    "metrics": jax.tree.map(lambda m: jnp.moveaxis(m, 0, 1), metrics)}

        # check_vma=False: a parameter built from a constant (a zero log-std) is still per seed
        return jax.shard_map(train_block, mesh=mesh, in_specs=P("seed"), out_specs=P("seed"),
                             check_vma=False)(keys)

    return jax.jit(train, compiler_options=algorithm.compiler_options())


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict:
    """Flags -> Config -> the shared driver (common/harness/run.py), with this module (a copy of
    this file runs under its own name); returns summary.json's content."""
    from scanrl.common.harness import run  # the command line's driver: loaded only to run

    return run.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
