"""PQN: parallel Q(lambda) learning without a replay buffer or a target network.

Collect `num_steps` x `num_envs` transitions epsilon-greedily from a Q-network with a layer
norm after each hidden layer, compute Q(lambda) returns backwards over the rollout, then run
`num_epochs` epochs of minibatch steps on the squared TD error. The normalisation is what
keeps online Q-learning stable without a target network (Gallici et al. 2025). As PPO's loop
with a Q(lambda) target in place of GAE:

    G_t = r_t + gamma * (1 - terminated_t) * [ q'_t + lambda * (1 - done_t) * (G_{t+1} - q'_t) ],
    q'_t = max_a Q(s'_t, a)
    loss = 0.5 * mean( (Q(s_t, a_t) - G_t)^2 )

where s'_t is the observation step t reached (the final one, where the env then reset) and
done = terminated | truncated: a termination zeroes the bootstrap, a time-limit cut bootstraps
from max_a Q(s'_t, a) and cuts the trace, and lambda = 0 is one-step Q-learning.
Papers: Gallici et al. 2025, "Simplifying Deep Temporal Difference Learning" (arXiv:2407.04811;
code: mttga/purejaxql); Q(lambda): Peng & Williams 1996; RAdam: Liu et al. 2020 (arXiv:1908.03265).

    python algos/pqn.py --env CartPole-v1 --num-seeds 8

Discrete actions only (an action mask, where the env has one, is respected).

Many agents (a multi-agent env, common/suites/jaxmarl.py): each agent's row acts on its own
observation with the one Q-network. Independently (the default), each row is its own
environment with its own target. With --vdn a team's Q-value is the sum of its agents'
(value decomposition, VDN: Sunehag et al. 2018), learned as one target per team from the team's
reward, as purejaxql's PQN-VDN does:

    Q_team(s, a) = sum_i Q(o_i, a_i),   q'_t = sum_i max_a Q(o'_i, a)

    python algos/pqn.py --env jaxmarl/MPE_simple_spread_v3 --vdn
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
from scanrl.common.nets import ACTIVATIONS, cnn_apply, cnn_init, layer_norm, mlp_init, use_cnn
from scanrl.common.onpolicy import learn, lr_schedule, make_optimizer
from scanrl.common.qlearning import (epsilon_greedy, epsilon_schedule, max_valid_q,
                                     q_lambda_returns, teams, vdn_returns)

import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec as P


# ---------------------------------------------------------------------------------------------
# Config: hyperparameters (the command line adds its run settings as flags of the same kind)
# ---------------------------------------------------------------------------------------------
ALGO = "pqn"  # its name in the suites' recipe tables: a copy of this file keeps the recipes
# the run settings it starts from (the command line's: common/harness/runconfig.py), by preset
RUN_DEFAULTS = {None: dict(log_every=10)}


@dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"
    """a gymnax id (CartPole-v1) or SUITE/NAME (craftax/Craftax-Classic-Symbolic-v1) with discrete
    actions."""
    total_timesteps: int = 500_000
    """environment steps per seed (rounded down to whole updates; 0: until a --stop-* condition
    holds, with --decay-timesteps giving the schedules' length)."""
    num_envs: int = 32
    """parallel environments per seed."""
    num_steps: int = 64
    """steps per environment in each rollout (rollout = num_envs x num_steps transitions)."""
    num_epochs: int = 4
    """passes over each rollout."""
    num_minibatches: int = 16
    """minibatches per epoch; must divide num_envs * num_steps."""
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
    """TD loss: 0.5 * error^2 (purejaxql's), or Huber with delta 1 (DQN's clipped error)."""
    reward_scale: float = 0.1
    """multiply every reward by this before the targets (purejaxql's REW_SCALE)."""
    normalize_obs: bool = False
    """normalise flat observations by their running mean/std before the network (frozen during
    each rollout, then updated with it): a counterpart of purejaxql's NORM_INPUT, which
    batch-renormalises the input."""
    norm: Literal["layer_norm", "none"] = "layer_norm"
    """normalisation after each hidden layer, before its activation; none: the paper's ablation."""
    hidden: tuple[int, ...] = (256, 256)
    """hidden layer sizes of the Q-network's MLP (after the conv torso for images)."""
    activation: Literal["tanh", "relu", "elu", "swish"] = "relu"
    """hidden-layer activation."""
    torso: Literal["auto", "mlp", "cnn"] = "auto"
    """cnn: 3x3 convolutions read image observations [H, W, C]; mlp: flatten them; auto: cnn for
    images."""
    conv_channels: tuple[int, ...] = (16,)
    """output channels of each convolution of the cnn torso."""
    vdn: bool = False
    """a multi-agent env's team Q-value is the sum of its agents' (VDN), one target per team;
    off: each agent learns alone (independent PQN)."""

    batch_size = property(lambda self: self.num_envs * self.num_steps)
    minibatch_size = property(lambda self: self.batch_size // self.num_minibatches)
    num_updates = property(lambda self: algorithm.updates_for(self, self.batch_size))
    decay_updates = property(lambda self: (self.decay_timesteps or self.total_timesteps)
                             // self.batch_size)

    def __post_init__(self):
        algorithm.check_values(
            self, positive=("num_envs", "num_steps", "num_epochs", "num_minibatches",
                            "learning_rate", "adam_eps", "reward_scale"),
            nonnegative=("max_grad_norm", "decay_timesteps"),
            within={"gamma": "(0, 1]", "q_lambda": "[0, 1]", "epsilon_start": "[0, 1]",
                    "epsilon_end": "[0, 1]", "epsilon_fraction": "[0, 1]",
                    "eval_epsilon": "[0, 1]"})
        if self.batch_size % self.num_minibatches:
            raise ValueError(f"num_envs * num_steps = {self.batch_size} is not divisible by "
                             f"--num-minibatches {self.num_minibatches}; pick a divisor of "
                             f"{self.batch_size}.")
        algorithm.check_budget(self, self.batch_size, "rollout")
        if 0 < self.decay_timesteps < self.batch_size:
            raise ValueError(f"--decay-timesteps {self.decay_timesteps} is smaller than one "
                             f"rollout (num_envs * num_steps = {self.batch_size}); raise it or "
                             "use 0.")


# The defaults are purejaxql's CartPole settings (purejaxql/config/alg/pqn_cartpole.yaml).
PRESETS = {
    # purejaxql/config/alg/pqn_minatar.yaml (and pqn_minatar.py's network): 1e7 steps, the conv
    # torso (16 channels 3x3, then 128 units), a layer norm after each layer
    "minatar": dict(total_timesteps=10_000_000, num_envs=128, num_steps=32, num_epochs=2,
                    num_minibatches=32, learning_rate=5e-4, q_lambda=0.65, epsilon_end=0.05,
                    epsilon_fraction=0.1, reward_scale=1.0, hidden=(128,)),
    # Navix's and XLand-MiniGrid's tasks: Navix's PPO rollout (16 envs x 128 steps), 64x64; the
    # step size, epsilon floor and lambda by a sweep on Navix-DoorKey-5x5 (seeds 0-4, 1e6 steps;
    # benchmarks/reference/pqn_presets/): a sparse reward is found with a higher floor
    "grid_world": dict(total_timesteps=1_000_000, num_envs=16, num_steps=128, num_epochs=2,
                       num_minibatches=8, learning_rate=1e-3, q_lambda=0.95, epsilon_end=0.3,
                       epsilon_fraction=0.1, reward_scale=1.0, hidden=(64, 64)),
    # Jumanji's tasks (no PQN recipe published): the rollout and widths of PPO's documented
    # Snake settings (64 envs x 64 steps, 128x128); the step size and epsilon floor by two sweeps
    # on Snake (seeds 0-4, 5e5 steps; benchmarks/reference/pqn_presets/jumanji/)
    "jumanji": dict(total_timesteps=500_000, num_envs=64, num_steps=64, learning_rate=1e-3,
                    epsilon_end=0.05, reward_scale=1.0, hidden=(128, 128)),
}


def default_config(env: str = "CartPole-v1", recipe: str = "auto", **overrides) -> Config:
    """Config for `env`: purejaxql's CartPole settings, or PRESETS["minatar"] for MinAtar,
    PRESETS["grid_world"] for Navix and XLand-MiniGrid and PRESETS["jumanji"] for Jumanji's
    tasks, then the suite's published recipe for `env` where one exists (`recipe`: auto,
    published, cpu, none); `overrides` (hyperparameters) win."""
    # the env ids' registry and the recipe tables load only here
    from scanrl.common.suites import recipes

    return Config(**{**recipes.config_fields(ALGO, env, recipe, PRESETS), **overrides, "env": env})


# ---------------------------------------------------------------------------------------------
# Q-network, this file's own: (conv torso ->) MLP -> Q [A]; every hidden layer, convolutions
# included, is dense -> layer norm -> activation (purejaxql's order; nets.mlp_apply, Brax's, puts
# the norm after the activation, so it would be another network on these parameters). The layer
# norm is common/nets.py's `layer_norm`. Weights orthogonal (gain sqrt 2; the output 1), biases 0.
# ---------------------------------------------------------------------------------------------
def init_q_network(key: jax.Array, config: Config, vec_env: envs.VecEnv) -> dict:
    """Parameters {"torso" (images only), "q"}: the conv layers and the MLP layers, each hidden
    one with a layer norm's "scale" (ones) and "offset" (zeros) unless config.norm is none."""
    params, normalized = {}, config.norm == "layer_norm"
    # an agent's Q reads its own observation (VecEnv's policy part), never the world state of
    # a multi-agent env: execution stays decentralised, as VDN's Q_team = sum_i Q(o_i, a_i)
    features = vec_env.policy_obs_dim
    if use_cnn(config.torso, vec_env.obs_shape):
        key, k_torso = jax.random.split(key)
        params["torso"], features = cnn_init(k_torso, vec_env.obs_shape, config.conv_channels)
        if normalized:
            for layer in params["torso"]:
                channels = layer["b"].shape[0]
                layer.update(scale=jnp.ones(channels), offset=jnp.zeros(channels))
    params["q"] = mlp_init(key, (features, *config.hidden, vec_env.num_actions), output_gain=1.0,
                           layer_norm=normalized)
    return params


def q_values(params: dict, obs: jax.Array, activation: str) -> jax.Array:
    """obs [..., obs_dim] or images [..., H, W, C] -> Q(obs, .) [..., A]: each hidden layer
    dense -> layer norm (where it has one) -> activation."""
    act = ACTIVATIONS[activation]
    x = cnn_apply(params["torso"], obs, activation, layer_norm) if "torso" in params else obs
    # rows [R, F] for the layers (a rollout's [T, N, F], VDN's teams [B, M, F]): XLA's CPU
    # matmuls, the gradient's above all, run faster on one batch axis than on two
    lead, x = x.shape[:-1], x.reshape(-1, x.shape[-1])
    for layer in params["q"][:-1]:
        x = act(layer_norm(layer, x @ layer["w"] + layer["b"]))
    return (x @ params["q"][-1]["w"] + params["q"][-1]["b"]).reshape(lead + (-1,))


def exploration_epsilon(config: Config, update_index: jax.Array) -> jax.Array:
    """epsilon_start -> epsilon_end linearly over the first epsilon_fraction of the decay's
    updates (config.decay_updates), then epsilon_end (`qlearning.epsilon_schedule`)."""
    return epsilon_schedule(config.epsilon_start, config.epsilon_end,
                            config.epsilon_fraction * config.decay_updates, update_index)


# ---------------------------------------------------------------------------------------------
# The math: Q(lambda) returns and VDN's team returns (common/qlearning.py's q_lambda_returns and
# vdn_returns), and the TD loss
# ---------------------------------------------------------------------------------------------
class Batch(NamedTuple):
    """Training samples, leaves [B, ...] (flattened [T * N])."""

    obs: jax.Array  # as the Q-network reads them
    action: jax.Array  # [B] int
    target: jax.Array  # [B] Q(lambda) return


def td_loss(params: dict, batch: Batch, config: Config) -> tuple[jax.Array, dict]:
    """0.5 * mean((Q(s, a) - G)^2), or Huber (delta 1) with config.loss == "huber". With VDN a
    sample is a team (obs [B, M, ...], action [B, M]) and Q(s, a) the sum of its agents'."""
    q = q_values(params, batch.obs, config.activation)
    q_taken = jnp.take_along_axis(q, batch.action[..., None], axis=-1)[..., 0]
    if config.vdn:
        q_taken = q_taken.sum(-1)
    if config.loss == "huber":
        loss = optax.huber_loss(q_taken, batch.target, delta=1.0).mean()
    else:
        loss = 0.5 * jnp.square(q_taken - batch.target).mean()
    return loss, {"td_loss": loss, "q_taken": q_taken.mean()}


def minibatch_gradient(params: dict, minibatch: Batch, config: Config) -> tuple[dict, dict]:
    """Gradient of td_loss over one minibatch (leaves [B, ...]) and its stats."""
    (_, stats), grads = jax.value_and_grad(td_loss, has_aux=True)(params, minibatch, config)
    return grads, stats


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
class Transition(NamedTuple):
    """One rollout, leaves [T, N, ...]."""

    obs: jax.Array  # as the Q-network read them
    action: jax.Array
    info: envs.StepInfo
    next_mask: jax.Array | None = None  # valid actions [T, N, A] at the step's next observation


class TrainState(NamedTuple):
    params: dict
    opt_state: optax.OptState
    env_state: envs.VecEnvState
    obs: jax.Array  # [N, *obs] observations the next rollout starts from
    key: jax.Array
    obs_stats: envs.RunningStats | None = None  # with normalize_obs: of the flat observations


def make_algorithm(config: Config, env=None, env_params=None) -> algorithm.Algorithm:
    """PQN's pieces for one seed (common/harness/loop.py turns them into programs). `env`: a
    gymnax-style env object to train on instead of config.env."""
    env, env_params = algorithm.resolve_env(config.env, env, env_params)
    if not envs.is_discrete(env, env_params):  # before compiling: Q-learning takes an argmax
        raise ValueError(f"PQN needs discrete actions and --env {config.env} has continuous (Box) "
                         "ones; ppo, ppo_rnn, impala, grpo, sac and td3 take continuous actions.")
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
    # the schedules run over decay_updates (the run's, or --decay-timesteps')
    schedule = lr_schedule(config.learning_rate, config.decay_updates, anneal=config.anneal_lr)

    def observe(obs, stats=None):  # what the network reads: flat vectors (an agent's own part,
        # normalised by `stats` where given), or images
        return vec_env.observe(obs, stats, image=image, policy_part=True)

    def init(key: jax.Array) -> TrainState:
        k_params, k_reset, key = jax.random.split(key, 3)
        params = init_q_network(k_params, config, vec_env)
        obs, env_state = vec_env.reset(k_reset)
        stats = envs.init_stats((vec_env.obs_dim,)) if config.normalize_obs else None
        return TrainState(params=params, opt_state=optimizer.init(params), env_state=env_state,
                          obs=obs, key=key, obs_stats=stats)

    def update(state: TrainState, update_index: jax.Array) -> tuple[TrainState, dict]:
        params, stats = state.params, state.obs_stats
        key, k_rollout, k_epochs = jax.random.split(state.key, 3)
        epsilon = exploration_epsilon(config, update_index)

        # 1. Rollout: num_steps epsilon-greedy steps of num_envs envs with the current Q-network.
        def env_step(carry, step_key):
            env_state, obs = carry
            k_action, k_env = jax.random.split(step_key)
            q_obs, mask = observe(obs, stats), vec_env.action_mask(env_state)
            action = epsilon_greedy(k_action, q_values(params, q_obs, config.activation), epsilon,
                                    mask)
            next_obs, env_state, info = vec_env.step(k_env, env_state, action)
            return (env_state, next_obs), Transition(obs=q_obs, action=action, info=info,
                                                     next_mask=vec_env.action_mask(env_state))

        (env_state, next_obs), traj = jax.lax.scan(
            env_step, (state.env_state, state.obs), jax.random.split(k_rollout, config.num_steps))
        info = traj.info

        # 2. Targets: max_a Q(s'_t, a) of the observation each step reached (the final one where
        #    an episode ended, so a truncation bootstraps), over the actions valid after the step
        #    where the env has a mask (where the episode ended, only a truncation's bootstrap
        #    reads it). Computed once per rollout with the network that acted.
        next_q = max_valid_q(q_values(params, observe(info.final_obs, stats), config.activation),
                             traj.next_mask)
        reward, done = info.reward * config.reward_scale, info.terminated | info.truncated
        if config.vdn:  # one target per team, learned by its agents' summed Q-values
            targets = vdn_returns(reward, next_q, info.terminated, done, vec_env.num_agents,
                                  vec_env.team_reward, config.gamma, config.q_lambda)
            samples = Batch(obs=teams(traj.obs, vec_env.num_agents),
                            action=teams(traj.action, vec_env.num_agents), target=targets)
        else:
            targets = q_lambda_returns(reward, next_q, info.terminated, done, config.gamma,
                                       config.q_lambda)
            samples = Batch(obs=traj.obs, action=traj.action, target=targets)
        samples = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), samples)

        # 3. num_epochs epochs of num_minibatches steps at this update's learning rate.
        learning_rate = schedule(update_index)
        params, opt_state, loss_stats = learn(
            params, state.opt_state, samples, k_epochs, partial(minibatch_gradient, config=config),
            optimizer, learning_rate, config.num_epochs, config.num_minibatches)

        metrics = {k: v.mean() for k, v in loss_stats.items() if k != "applied"}
        metrics.update(envs.episode_metrics(info, vec_env), learning_rate=learning_rate,
                       epsilon=epsilon)
        if config.normalize_obs:  # the next rollout reads this one's observations too
            stats = envs.update_stats(stats, vec_env.flat_obs(info.final_obs))
        return TrainState(params=params, opt_state=opt_state, env_state=env_state, obs=next_obs,
                          key=key, obs_stats=stats), metrics

    def act(policy_params: dict, obs: jax.Array, key: jax.Array, deterministic: bool = False,
            mask=None) -> jax.Array:
        """obs [N, *obs] (mask [N, A] or None) -> actions [N]: greedy, or epsilon-greedy with
        config.eval_epsilon."""
        epsilon = 0.0 if deterministic else config.eval_epsilon
        q = q_values(policy_params["params"], observe(obs, policy_params.get("obs_stats")),
                     config.activation)
        return epsilon_greedy(key, q, epsilon, mask)

    return algorithm.Algorithm(
        init=init, update=update, act=act,
        policy_params=lambda state: {"params": state.params} | (
            {"obs_stats": state.obs_stats} if config.normalize_obs else {}),
        vec_env=vec_env, num_updates=config.num_updates,
        steps_per_update=config.batch_size,
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
