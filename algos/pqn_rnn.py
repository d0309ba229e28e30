"""Recurrent PQN: PQN's Q(lambda) learning with a recurrent core, for tasks the agent must
remember.

The Q-network is an MLP (each hidden layer dense -> layer norm -> activation, as PQN's), a
recurrent core (`--core`: a GRU, an LSTM, a linear recurrent unit or a gated Transformer-XL,
common/recurrent.py's, which ppo_rnn.py uses too), then a linear head Q [A] on the core's output.
The core's state resets to zeros where an episode starts. As purejaxql's recurrent PQN
(`pqn_rnn_gymnax.py`), the rollout carries the state from one rollout to the next, each
environment's whole rollout is one training sequence replayed from the state stored at its
first step, and a minibatch is a set of environments (time is never shuffled). The targets are
pqn.py's Q(lambda) returns (common/qlearning.py's):

    G_t = r_t + gamma * (1 - terminated_t) * [ q'_t + lambda * (1 - done_t) * (G_{t+1} - q'_t) ],
    q'_t = max_a Q(h'_t, a),   h'_t = core(h_t, s'_t)
    loss = 0.5 * mean( (Q(h_t, a_t) - G_t)^2 )

where h_t is the core's state after reading s_t (replayed with the current parameters) and h'_t
one more core step on the observation step t reached (the final one where an episode ended, so
a time-limit cut bootstraps from the state the agent had). As in pqn.py, the targets are
computed once per rollout with the network that acted.

With `--last-action` the core also reads the previous action, one-hot, beside the MLP's output
(purejaxql's ADD_LAST_ACTION); here it is zeros where an episode starts, and it is carried in
the stored state's last A columns, so a sequence's replay starts from both.

Where this differs from purejaxql's: its targets are recomputed in every minibatch from the
replayed sequence, it can prepend steps of the previous rollout (MEMORY_WINDOW), and its last
action carries over into the next episode; here the targets are the rollout's and the sequence
starts from the stored state (no burn-in).
Papers: PQN, Gallici et al. 2025 (arXiv:2407.04811; code: mttga/purejaxql); Q(lambda): Peng &
Williams 1996; the cores: common/recurrent.py's docstring.

    python algos/pqn_rnn.py --env MemoryChain-bsuite --core lstm --num-seeds 4

Discrete actions only (an action mask, where the env has one, is respected).

Many agents (a multi-agent env, common/suites/jaxmarl.py): each agent's row is its own sequence
with its own core state, read by the one Q-network from the agent's own observation. As in
pqn.py, each row learns alone by default, and with --vdn a team's Q-value is the sum of its
agents' (VDN: Sunehag et al. 2018), one target per team (common/qlearning.py's vdn_returns); a
minibatch is then a set of whole teams, whose agents' sequences are replayed together. This is
JaxMARL's recurrent PQN-VDN (`baselines/QLearning/pqn_vdn_rnn.py`), with the differences above.

    python algos/pqn_rnn.py --env jaxmarl/MPE_simple_spread_v3 --vdn
"""

from __future__ import annotations

if __name__ == "__main__":  # before the slow imports below: a Ctrl-C in them is one line
    from scanrl.common.harness import quiet_start
    quiet_start()

import sys
from dataclasses import dataclass
from functools import partial
from typing import Literal, NamedTuple

from scanrl.common import algorithm, envs
from scanrl.common.recurrent import CORES, core_inputs, lru_sequence, trxl_init, trxl_sequence
from scanrl.common.recurrent import state_width as state_width_of
from scanrl.common.nets import ACTIVATIONS, cnn_apply, cnn_init, layer_norm, mlp_init, use_cnn
from scanrl.common.onpolicy import learn, lr_schedule, make_optimizer
from scanrl.common.qlearning import (epsilon_greedy, epsilon_schedule, max_valid_q,
                                     q_lambda_returns, vdn_returns)

import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec as P


# ---------------------------------------------------------------------------------------------
# Config: hyperparameters (the command line adds its run settings as flags of the same kind)
# ---------------------------------------------------------------------------------------------
ALGO = "pqn_rnn"  # its name in the suites' recipe tables: a copy of this file keeps the recipes
# the run settings it starts from (the command line's: common/harness/runconfig.py), by preset
RUN_DEFAULTS = {None: dict(log_every=10)}


@dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"
    """a gymnax id (MemoryChain-bsuite) or SUITE/NAME with discrete actions."""
    total_timesteps: int = 500_000
    """environment steps per seed (rounded down to whole updates; 0: until a --stop-* condition
    holds, with --decay-timesteps giving the schedules' length)."""
    num_envs: int = 32
    """parallel environments per seed."""
    num_steps: int = 64
    """steps per environment in each rollout, each environment's training sequence."""
    num_epochs: int = 4
    """passes over each rollout."""
    num_minibatches: int = 16
    """minibatches per epoch, each a set of whole environments; must divide num_envs."""
    learning_rate: float = 1e-4
    """RAdam or Adam step size."""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over --decay-timesteps (once per update)."""
    optimizer: Literal["radam", "adam"] = "radam"
    """RAdam (purejaxql's) or Adam."""
    adam_eps: float = 1e-8
    """the optimizer's epsilon (optax's default)."""
    max_grad_norm: float = 10.0
    """clip the global gradient norm to this (0: no clipping)."""
    gamma: float = 0.99
    """discount factor."""
    q_lambda: float = 0.95
    """Q(lambda)'s lambda (0: one-step Q-learning; 1: returns to the rollout's end)."""
    epsilon_start: float = 1.0
    """exploration: the probability of a uniformly random action at the start."""
    epsilon_end: float = 0.2
    """exploration: the probability it decays to, linearly, and then keeps."""
    epsilon_fraction: float = 0.2
    """exploration: the fraction of --decay-timesteps over which epsilon decays."""
    decay_timesteps: int = 0
    """environment steps per seed over which epsilon and the learning rate decay (purejaxql's
    TOTAL_TIMESTEPS_DECAY; 0: --total-timesteps)."""
    eval_epsilon: float = 0.05
    """epsilon of the sampled evaluation return (the deterministic one is greedy)."""
    loss: Literal["squared", "huber"] = "squared"
    """TD loss: 0.5 * error^2 (purejaxql's), or Huber with delta 1."""
    reward_scale: float = 0.1
    """multiply every reward by this before the targets (purejaxql's REW_SCALE)."""
    norm: Literal["layer_norm", "none"] = "layer_norm"
    """normalisation after each hidden layer of the MLP, before its activation."""
    hidden: tuple[int, ...] = (128,)
    """hidden layer sizes of the MLP before the core (after the conv torso for images)."""
    activation: Literal["tanh", "relu", "elu", "swish"] = "relu"
    """hidden-layer activation."""
    torso: Literal["auto", "mlp", "cnn"] = "auto"
    """cnn: 3x3 convolutions read image observations [H, W, C]; mlp: flatten them; auto: cnn for
    images."""
    conv_channels: tuple[int, ...] = (16,)
    """output channels of each convolution of the cnn torso."""
    core: Literal["gru", "lstm", "lru", "trxl"] = "gru"
    """the recurrent core (common/recurrent.py's): gru, lstm, lru (a linear recurrent unit replayed
    by an associative scan) or trxl (a gated Transformer-XL over a cached memory window)."""
    gru_size: int = 128
    """the core's width H (its output; the Transformer-XL's embedding)."""
    trxl_window: int = 64
    """trxl: the steps of memory M each layer attends beyond the current one; at least
    --num-steps, the gradient window."""
    trxl_heads: int = 4
    """trxl: attention heads; must divide --gru-size."""
    trxl_layers: int = 2
    """trxl: attention layers (the receptive field is layers x M steps)."""
    trxl_positions: Literal["learned", "sinusoidal"] = "learned"
    """trxl: relative positions as a learned bias per head and distance, or Transformer-XL's
    sinusoids with their content and position biases u, v (Dai et al. 2019)."""
    last_action: bool = False
    """the core also reads the previous action, one-hot (zeros where an episode starts)."""
    vdn: bool = False
    """a multi-agent env's team Q-value is the sum of its agents' (VDN), one target per team;
    off: each agent learns alone (independent recurrent PQN)."""

    batch_size = property(lambda self: self.num_envs * self.num_steps)
    num_updates = property(lambda self: algorithm.updates_for(self, self.batch_size))
    decay_updates = property(lambda self: (self.decay_timesteps or self.total_timesteps)
                             // self.batch_size)

    def __post_init__(self):
        algorithm.check_values(
            self, positive=("num_envs", "num_steps", "num_epochs", "num_minibatches",
                            "learning_rate", "adam_eps", "reward_scale", "gru_size",
                            "trxl_window", "trxl_heads", "trxl_layers"),
            nonnegative=("max_grad_norm", "decay_timesteps"),
            within={"gamma": "(0, 1]", "q_lambda": "[0, 1]", "epsilon_start": "[0, 1]",
                    "epsilon_end": "[0, 1]", "epsilon_fraction": "[0, 1]",
                    "eval_epsilon": "[0, 1]"})
        if self.num_envs % self.num_minibatches:
            raise ValueError(f"--num-minibatches {self.num_minibatches} does not divide "
                             f"--num-envs {self.num_envs}: a minibatch is a set of whole "
                             "environments' sequences.")
        algorithm.check_budget(self, self.batch_size, "rollout")
        if 0 < self.decay_timesteps < self.batch_size:
            raise ValueError(f"--decay-timesteps {self.decay_timesteps} is smaller than one "
                             f"rollout (num_envs * num_steps = {self.batch_size}); raise it or "
                             "use 0.")
        if self.core not in CORES:
            raise ValueError(f"--core must be gru, lstm, lru or trxl, got {self.core}.")
        if self.core == "trxl" and self.gru_size % self.trxl_heads:
            raise ValueError(f"--trxl-heads {self.trxl_heads} does not divide --gru-size "
                             f"{self.gru_size}, the embedding the heads split.")
        if self.core == "trxl" and self.trxl_positions == "sinusoidal" and self.gru_size % 2:
            raise ValueError(f"--gru-size {self.gru_size} is odd; --trxl-positions sinusoidal "
                             "pairs a sine and a cosine per frequency, so it needs an even size.")
        if self.core == "trxl" and self.trxl_window < self.num_steps:
            raise ValueError(f"--trxl-window {self.trxl_window} is shorter than the gradient "
                             f"window (--num-steps {self.num_steps}).")


# The defaults are purejaxql's recurrent CartPole settings (config/alg/pqn_rnn_cartpole.yaml),
# with one hidden layer of 128 and a core of 128 in place of two of 256 and one of 256.
PRESETS = {
    # purejaxql/config/alg/pqn_rnn_memory_chain.yaml: a fixed step size, epsilon to 0.01
    "MemoryChain-bsuite": dict(total_timesteps=100_000, num_envs=32, num_steps=128,
                               num_minibatches=16, learning_rate=1e-3, anneal_lr=False,
                               epsilon_end=0.01, epsilon_fraction=0.1, reward_scale=1.0,
                               trxl_window=128),
}


def default_config(env: str = "CartPole-v1", recipe: str = "auto", **overrides) -> Config:
    """Config for `env`: purejaxql's recurrent CartPole settings, then the suite's published
    recipe for `env` where one exists (`recipe`: auto, published, cpu, none); `overrides`
    (hyperparameters) win."""
    from scanrl.common.suites import recipes  # the env ids' registry and the recipe tables

    return Config(**{**recipes.config_fields(ALGO, env, recipe, PRESETS), **overrides, "env": env})


# ---------------------------------------------------------------------------------------------
# Q-network: (conv torso ->) MLP -> core -> Q [A]. Each hidden layer is dense -> layer norm ->
# activation (pqn.py's order); the core is common/recurrent.py's (its state [..., S] starts every
# episode at zeros and its first H columns are its output); the head is linear on the output.
# ---------------------------------------------------------------------------------------------
def init_q_network(key: jax.Array, config: Config, vec_env: envs.VecEnv) -> dict:
    """Parameters {"torso" (images only), "mlp", config.core, "q"}."""
    params, normalized = {}, config.norm == "layer_norm"
    # an agent's Q reads its own observation (VecEnv's policy part), never a multi-agent env's
    # world state: execution stays decentralised
    features = vec_env.policy_obs_dim
    if use_cnn(config.torso, vec_env.obs_shape):
        key, k_torso = jax.random.split(key)
        params["torso"], features = cnn_init(k_torso, vec_env.obs_shape, config.conv_channels)
        if normalized:
            for layer in params["torso"]:
                channels = layer["b"].shape[0]
                layer.update(scale=jnp.ones(channels), offset=jnp.zeros(channels))
    k_mlp, k_core, k_q = jax.random.split(key, 3)
    sizes = (features, *config.hidden)
    core_in = sizes[-1] + vec_env.num_actions * config.last_action  # the previous action's too
    # the MLP's hidden layers alone (mlp_init's last layer would be a linear output)
    params["mlp"] = mlp_init(k_mlp, (*sizes, 1), layer_norm=normalized)[:-1] \
        if config.hidden else []
    core_init = CORES[config.core][0] if config.core != "trxl" else partial(
        trxl_init, heads=config.trxl_heads, layers=config.trxl_layers, window=config.trxl_window,
        positions=config.trxl_positions)
    params[config.core] = core_init(k_core, core_in, config.gru_size)
    params["q"] = mlp_init(k_q, (config.gru_size, vec_env.num_actions), output_gain=1.0)
    return params


def state_width(config: Config) -> int:
    """S, the width of the core's state (`recurrent.state_width`)."""
    return state_width_of(config.core, config.gru_size, config.trxl_layers, config.trxl_window)


def embed(params: dict, obs: jax.Array, activation: str, last=None) -> jax.Array:
    """obs [..., obs_dim] or images [..., H, W, C] (and with --last-action the previous action
    one-hot [..., A], joined to the MLP's output) -> the core's input terms (torso, MLP,
    recurrent.core_inputs): no state involved, so a whole sequence's are one batch."""
    act = ACTIVATIONS[activation]
    x = cnn_apply(params["torso"], obs, activation, layer_norm) if "torso" in params else obs
    for layer in params["mlp"]:
        x = act(layer_norm(layer, x @ layer["w"] + layer["b"]))
    if last is not None:
        x = jnp.concatenate([x, last], axis=-1)
    kind = next(kind for kind in CORES if kind in params)
    return core_inputs(kind, params[kind], x)


def q_head(params: dict, state: jax.Array) -> jax.Array:
    """The core's state [..., S] (or its output [..., H]) -> Q [..., A], from the output, the
    state's first H columns."""
    layer = params["q"][0]
    return state[..., :layer["w"].shape[0]] @ layer["w"] + layer["b"]


def step(params: dict, hidden: jax.Array, obs: jax.Array, start: jax.Array,
         activation: str, last=None) -> jax.Array:
    """One step for acting: hidden [N, S], obs [N, ...], start [N] (obs begins an episode: the
    state resets to zeros first), last [N, A] or None -> the new state [N, S]."""
    return recur(params, hidden, embed(params, obs, activation, last), start)


def recur(params: dict, hidden: jax.Array, inputs: jax.Array, start: jax.Array) -> jax.Array:
    """The core's step from its input terms: hidden [N, S], start [N] (zeros first) -> [N, S]."""
    kind = next(kind for kind in CORES if kind in params)
    return CORES[kind][1](params[kind], jnp.where(start[..., None], 0.0, hidden), inputs)


def sequence(params: dict, hidden: jax.Array, obs: jax.Array, start: jax.Array,
             activation: str, last=None) -> jax.Array:
    """Replay a sequence for learning: hidden [N, S] before its first step, obs [L, N, ...],
    start [L, N], last [L, N, A] or None -> Q after each step [L, N, A], resetting exactly where
    start is set (the LRU by an associative scan, the Transformer-XL all at once, the others
    step by step)."""
    inputs = embed(params, obs, activation, last)
    if "lru" in params:
        outputs = lru_sequence(params["lru"], hidden, inputs, start)
    elif "trxl" in params:
        outputs = trxl_sequence(params["trxl"], hidden, inputs, start)
    else:
        def one(h, step_inputs):
            h = recur(params, h, *step_inputs)
            return h, h
        outputs = jax.lax.scan(one, hidden, (inputs, start))[1]
    return q_head(params, outputs)


# ---------------------------------------------------------------------------------------------
# The math: Q(lambda) returns and exploration are common/qlearning.py's (tested in
# tests/test_pqn.py); here the sequences and the TD loss over their replay
# ---------------------------------------------------------------------------------------------
class Sequences(NamedTuple):
    """Training sequences, one per environment, leaves [N, T, ...]; with --vdn one per team,
    leaves [N, M, T, ...] and target [N, T]."""

    hidden: jax.Array  # [N, W] the state carried into the rollout (before any reset): split_state
    obs: jax.Array  # as the Q-network reads them
    start: jax.Array  # obs begins an episode
    action: jax.Array  # [N, T] int
    target: jax.Array  # [N, T] Q(lambda) return


def split_state(carried: jax.Array, config: Config) -> tuple[jax.Array, jax.Array | None]:
    """The state carried between steps [..., W] -> the core's state [..., S] and, with
    --last-action, the previous action one-hot [..., A] (W = S + A), else None (W = S)."""
    width = state_width(config)
    return (carried[..., :width], carried[..., width:]) if config.last_action else (carried, None)


def replay(params: dict, seqs: Sequences, config: Config) -> jax.Array:
    """Q after each step of the sequences [T, N, A], from the state stored for their first step;
    with --last-action each step reads the action before it (the stored one at the first)."""
    swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731  [N, T] <-> [T, N]
    hidden, last = split_state(seqs.hidden, config)
    if last is not None:  # [N, T, A]: the action before each step, zeros where an episode starts
        before = jax.nn.one_hot(seqs.action[:, :-1], last.shape[-1])
        last = jnp.concatenate([last[:, None], before], axis=1)
        last = swap(jnp.where(seqs.start[..., None], 0.0, last))
    return sequence(params, hidden, swap(seqs.obs), swap(seqs.start), config.activation, last)


def td_loss(params: dict, seqs: Sequences, config: Config) -> tuple[jax.Array, dict]:
    """0.5 * mean((Q(h_t, a_t) - G_t)^2) over every step of the replayed sequences, or Huber
    (delta 1) with config.loss == "huber". With --vdn a sample is a team's M sequences, replayed
    as rows, and Q(h_t, a_t) the sum of its agents'."""
    swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731  [N, T] <-> [T, N]
    if config.vdn:  # [N, M, ...] -> rows [N * M, ...], a team's agents adjacent (VecEnv's order)
        num_agents = seqs.action.shape[1]
        rows = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
        seqs = seqs._replace(hidden=rows(seqs.hidden), obs=rows(seqs.obs),
                             start=rows(seqs.start), action=rows(seqs.action))
    q = replay(params, seqs, config)
    q_taken = jnp.take_along_axis(q, swap(seqs.action)[..., None], axis=-1)[..., 0]
    if config.vdn:  # [T, N * M] -> the teams' [T, N]
        q_taken = q_taken.reshape(q_taken.shape[0], -1, num_agents).sum(-1)
    target = swap(seqs.target)
    if config.loss == "huber":
        loss = optax.huber_loss(q_taken, target, delta=1.0).mean()
    else:
        loss = 0.5 * jnp.square(q_taken - target).mean()
    return loss, {"td_loss": loss, "q_taken": q_taken.mean()}


def minibatch_gradient(params: dict, minibatch: Sequences, config: Config) -> tuple[dict, dict]:
    """Gradient of td_loss over one minibatch of sequences and its stats."""
    (_, stats), grads = jax.value_and_grad(td_loss, has_aux=True)(params, minibatch, config)
    return grads, stats


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
class Transition(NamedTuple):
    """One rollout, leaves [T, N, ...]."""

    obs: jax.Array  # as the Q-network read them
    start: jax.Array  # obs begins an episode (the state reset to zeros before this step)
    action: jax.Array
    next_q: jax.Array  # max_a Q(h'_t, a): one more core step on the observation step t reached
    info: envs.StepInfo


class TrainState(NamedTuple):
    params: dict
    opt_state: optax.OptState
    env_state: envs.VecEnvState
    obs: jax.Array  # [N, *obs] observations the next rollout starts from
    start: jax.Array  # [N] those observations begin an episode
    hidden: jax.Array  # [N, W] the state carried into the next rollout (split_state)
    key: jax.Array


def make_algorithm(config: Config, env=None, env_params=None) -> algorithm.Algorithm:
    """Recurrent PQN's pieces for one seed (common/harness/loop.py turns them into programs).
    `env`: a gymnax-style env object to train on instead of config.env."""
    env, env_params = algorithm.resolve_env(config.env, env, env_params)
    if not envs.is_discrete(env, env_params):  # before compiling: Q-learning takes an argmax
        raise ValueError(f"PQN needs discrete actions and --env {config.env} has continuous (Box) "
                         "ones; ppo_rnn takes continuous actions with a recurrent core.")
    if not config.decay_updates:  # --total-timesteps 0 alone: epsilon would never decay
        raise ValueError("--total-timesteps 0 (until a stop condition holds) needs "
                         "--decay-timesteps, the steps over which epsilon decays.")
    vec_env = envs.VecEnv(env, env_params, config.num_envs)
    if config.vdn and vec_env.num_agents is None:
        raise ValueError(f"--vdn sums a team's agents' Q-values and --env {config.env} has one "
                         "agent; use a multi-agent env (jaxmarl/NAME) or leave --vdn off.")
    image = use_cnn(config.torso, vec_env.obs_shape)  # ValueError before compiling for cnn
    scale_by = optax.scale_by_radam if config.optimizer == "radam" else optax.scale_by_adam
    optimizer = make_optimizer(config.max_grad_norm, config.adam_eps, scale_by)
    schedule = lr_schedule(config.learning_rate, config.decay_updates, anneal=config.anneal_lr)
    act_fn, num_actions = config.activation, vec_env.num_actions
    width = state_width(config) + num_actions * config.last_action  # W: split_state

    def carry_on(hidden, action):  # the core's state [N, S] (and the action taken) -> [N, W]
        if not config.last_action:
            return hidden
        return jnp.concatenate([hidden, jax.nn.one_hot(action, num_actions)], axis=-1)

    def observe(obs):  # what the network reads: flat vectors (an agent's own part), or images
        return vec_env.observe(obs, image=image, policy_part=True)

    def init(key: jax.Array) -> TrainState:
        k_params, k_reset, key = jax.random.split(key, 3)
        params = init_q_network(k_params, config, vec_env)
        obs, env_state = vec_env.reset(k_reset)
        return TrainState(params=params, opt_state=optimizer.init(params), env_state=env_state,
                          obs=obs, start=jnp.ones(vec_env.num_envs, bool),
                          hidden=jnp.zeros((vec_env.num_envs, width)), key=key)

    def update(state: TrainState, update_index: jax.Array) -> tuple[TrainState, dict]:
        params = state.params
        key, k_rollout, k_epochs = jax.random.split(state.key, 3)
        epsilon = epsilon_schedule(config.epsilon_start, config.epsilon_end,
                                   config.epsilon_fraction * config.decay_updates, update_index)

        # 1. Rollout: num_steps epsilon-greedy steps of num_envs envs, carrying the core state.
        #    Each step also takes max_a Q one core step on from the observation it reached (the
        #    final one where an episode ended), over the actions valid there: the bootstrap.
        def env_step(carry, step_key):
            env_state, obs, start, carried = carry
            k_action, k_env = jax.random.split(step_key)
            q_obs, mask = observe(obs), vec_env.action_mask(env_state)
            hidden, last = split_state(carried, config)
            if last is not None:  # no action before an episode's first step
                last = jnp.where(start[:, None], 0.0, last)
            hidden = step(params, hidden, q_obs, start, act_fn, last)
            action = epsilon_greedy(k_action, q_head(params, hidden), epsilon, mask)
            next_obs, env_state, info = vec_env.step(k_env, env_state, action)
            carried = carry_on(hidden, action)
            after = step(params, hidden, observe(info.final_obs), jnp.zeros_like(start), act_fn,
                         split_state(carried, config)[1])
            next_q = max_valid_q(q_head(params, after), vec_env.action_mask(env_state))
            done = info.terminated | info.truncated
            return (env_state, next_obs, done, carried), Transition(
                obs=q_obs, start=start, action=action, next_q=next_q, info=info)

        carry = (state.env_state, state.obs, state.start, state.hidden)
        (env_state, next_obs, next_start, hidden), traj = jax.lax.scan(
            env_step, carry, jax.random.split(k_rollout, config.num_steps))
        info = traj.info

        # 2. Targets, once per rollout with the network that acted; then one sequence per env.
        reward, done = info.reward * config.reward_scale, info.terminated | info.truncated
        swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731  [T, N] -> [N, T]
        seqs = Sequences(hidden=state.hidden, obs=swap(traj.obs), start=swap(traj.start),
                         action=swap(traj.action), target=None)
        if config.vdn:  # one target per team; its agents' rows [N * M, ...] -> [N, M, ...]
            m = vec_env.num_agents
            targets = vdn_returns(reward, traj.next_q, info.terminated, done, m,
                                  vec_env.team_reward, config.gamma, config.q_lambda)
            seqs = jax.tree.map(lambda x: x.reshape((-1, m) + x.shape[1:]), seqs)
        else:
            targets = q_lambda_returns(reward, traj.next_q, info.terminated, done, config.gamma,
                                       config.q_lambda)
        seqs = seqs._replace(target=swap(targets))

        # 3. num_epochs epochs of num_minibatches steps (sets of envs) at this update's rate.
        learning_rate = schedule(update_index)
        params, opt_state, loss_stats = learn(
            params, state.opt_state, seqs, k_epochs, partial(minibatch_gradient, config=config),
            optimizer, learning_rate, config.num_epochs, config.num_minibatches)

        metrics = {k: v.mean() for k, v in loss_stats.items() if k != "applied"}
        metrics.update(envs.episode_metrics(info, vec_env), learning_rate=learning_rate,
                       epsilon=epsilon)
        return TrainState(params=params, opt_state=opt_state, env_state=env_state, obs=next_obs,
                          start=next_start, hidden=hidden, key=key), metrics

    def act(policy_params: dict, obs: jax.Array, key: jax.Array, deterministic: bool,
            hidden: jax.Array, mask=None):
        """obs [N, *obs], hidden [N, W] (zeros at an episode's first step), mask [N, A] or None
        -> (actions [N], hidden): greedy, or epsilon-greedy with config.eval_epsilon."""
        params = policy_params["params"]
        core, last = split_state(hidden, config)
        core = step(params, core, observe(obs), jnp.zeros(obs.shape[0], bool), act_fn, last)
        epsilon = 0.0 if deterministic else config.eval_epsilon
        action = epsilon_greedy(key, q_head(params, core), epsilon, mask)
        return action, carry_on(core, action)

    return algorithm.Algorithm(
        init=init, update=update, act=act,
        policy_params=lambda state: {"params": state.params},
        vec_env=vec_env, num_updates=config.num_updates,
        steps_per_update=config.batch_size,
        init_carry=lambda n: jnp.zeros((n, width)),
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
            states, metrics = jax.lax.scan(update, states, jnp.arange(algo.num_updates))
            return {"state": states, "policy": jax.vmap(algo.policy_params)(states),
                    "metrics": jax.tree.map(lambda m: jnp.moveaxis(m, 0, 1), metrics)}

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
