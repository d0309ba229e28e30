"""SAC: soft actor-critic, twin critics, automatic temperature, on-device replay.

Every step each of `num_envs` environments acts (uniformly at random for the first
`learning_starts` env steps, then from the tanh-squashed Gaussian policy), the transitions
go into a circular replay buffer held in the train state, and `updates_per_step`
gradient steps each sample a batch and update the twin critics (towards
r + gamma (1 - terminated) (min Q_target(s', a') - alpha log pi(a'|s'))), the actor, the
temperature alpha and the Polyak-averaged target critics. A time-limit cut bootstraps from
the final observation the buffer stores; only a true termination zeroes the bootstrap.
Three of FastSAC's and FastTD3's knobs, off by default: n-step returns (`n_step`; a window never
crosses an episode's end), a distributional critic (`num_atoms`: C51's categorical critic on
[v_min, v_max], trained by cross-entropy to the projected soft target) and AdamW weight decay.
Papers: Haarnoja et al. 2018 (arXiv:1801.01290), automatic temperature: Haarnoja et al.
2018 (arXiv:1812.05905); twin critics: Fujimoto et al. 2018 (arXiv:1802.09477); C51:
Bellemare et al. 2017 (arXiv:1707.06887); the fast recipe's knobs: Seo et al. 2025, FastTD3
(arXiv:2505.22642) and FastSAC (arXiv:2512.01996).

    python algos/sac.py --env Pendulum-v1 --num-seeds 4

The whole loop, buffer included, runs inside the compiled program: seeds are vmapped and
spread over devices. One "update" is an iteration of `num_steps` env steps (the unit of
metrics, --log-every and --eval-every). Continuous (Box) actions only.
"""

from __future__ import annotations

# before the imports below (seconds): a Ctrl-C in them is one line, not a traceback
if __name__ == "__main__":
    from scanrl.common.harness import quiet_start
    quiet_start()

import math
import sys
from dataclasses import dataclass
from typing import Literal, NamedTuple

from scanrl.common import algorithm, envs
from scanrl.common.offpolicy import (ReplayBuffer, Transitions, buffer_add, buffer_init,
                                     buffer_sample, categorical_projection,
                                     smaller_mean_distribution, transitions_from_step)
from scanrl.common.nets import mlp_apply, mlp_init

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import optax


# ---------------------------------------------------------------------------------------------
# Config: hyperparameters (the command line adds its run settings as flags of the same kind)
# ---------------------------------------------------------------------------------------------
ALGO = "sac"  # its name in the suites' recipe tables: a copy of this file keeps the recipes
# the run settings it starts from (the command line's: common/harness/runconfig.py), by preset
# (None: every env)
RUN_DEFAULTS = {None: dict(eval_every=10, log_every=5)}


@dataclass(frozen=True)
class Config:
    env: str = "Pendulum-v1"
    """a gymnax id (Pendulum-v1) or SUITE/NAME (brax/ant, playground/CheetahRun) with continuous
    (Box) actions."""
    total_timesteps: int = 20_000
    """environment steps per seed (all its environments together; rounded down to whole
    iterations; 0: until a --stop-* condition holds)."""
    num_envs: int = 1
    """parallel environments per seed; each step adds num_envs transitions to the buffer."""
    num_steps: int = 200
    """steps per environment in one iteration, the unit of metrics, --log-every and
    --eval-every."""
    buffer_size: int = 1_000_000
    """replay capacity in transitions per seed (capped at total_timesteps: a larger buffer would
    never fill)."""
    batch_size: int = 256
    """transitions sampled (uniformly, with replacement) for each gradient step."""
    learning_starts: int = 1_000
    """env steps per seed of uniformly random actions before the first gradient step."""
    updates_per_step: int = 1
    """gradient steps each time the num_envs environments take one step (update-to-data ratio
    = updates_per_step / num_envs)."""
    learning_rate: float = 1e-3
    """Adam step size of the actor, the critics and the temperature."""
    weight_decay: float = 0.0
    """decoupled weight decay of the actor and the critics (AdamW; 0: Adam; FastTD3 and
    FastSAC use 0.1); never of the temperature."""
    gamma: float = 0.99
    """discount factor."""
    n_step: int = 1
    """the critic's target sums up to n_step rewards before it bootstraps (cut short at an
    episode's end and at the newest stored step; the entropy term enters at the bootstrap
    only)."""
    num_atoms: int = 0
    """0: a scalar critic; else C51's categorical critic with this many atoms."""
    v_min: float = -10.0
    """the categorical critic's smallest atom (returns below it count as v_min)."""
    v_max: float = 10.0
    """the categorical critic's largest atom."""
    tau: float = 0.005
    """Polyak rate: target <- tau * online + (1 - tau) * target after every gradient step."""
    autotune_alpha: bool = True
    """learn the temperature alpha so the policy's entropy tracks target_entropy (else alpha is
    fixed)."""
    alpha: float = 1.0
    """initial temperature when autotuned; the fixed temperature otherwise."""
    target_entropy: float | None = None
    """entropy the temperature aims at, in nats (None: -target_entropy_scale x action_dim)."""
    target_entropy_scale: float = 1.0
    """without --target-entropy, the target is -scale x the action dimension (Haarnoja et al.'s
    -A at 1; Brax's SAC uses 0.5)."""
    reward_scale: float = 1.0
    """multiply every reward by this constant in the critic's target (Brax's `reward_scaling`)."""
    log_std_min: float = -5.0
    """lower bound of the actor's log standard deviation (before tanh)."""
    log_std_max: float = 2.0
    """upper bound of the actor's log standard deviation (before tanh)."""
    max_grad_norm: float = 0.0
    """clip each network's global gradient norm to this (0: no clipping)."""
    normalize_obs: bool = False
    """normalise observations by a running mean/std (the buffer stores raw observations)."""
    actor_hidden: tuple[int, ...] = (64, 64)
    """hidden layer sizes of the policy MLP."""
    critic_hidden: tuple[int, ...] = (64, 64)
    """hidden layer sizes of each of the two Q MLPs."""
    critic_layer_norm: bool = False
    """a layer norm after each hidden activation of the Q MLPs (Brax's q_network_layer_norm,
    which Playground's DM Control SAC recipe sets:
    mujoco_playground/config/dm_control_suite_params.py)."""
    activation: Literal["tanh", "relu", "elu", "swish"] = "relu"
    """hidden-layer activation."""

    # env steps per seed
    steps_per_iteration = property(lambda self: self.num_envs * self.num_steps)
    # iterations
    num_updates = property(lambda self: algorithm.updates_for(self, self.steps_per_iteration))

    @property
    def buffer_rows(self) -> int:
        """Rows of the circular buffer; a row holds one step of every environment."""
        return max(1, min(self.buffer_size, self.num_updates * self.steps_per_iteration)
                   // self.num_envs)

    def __post_init__(self):
        algorithm.check_values(
            self, positive=("num_envs", "num_steps", "buffer_size", "batch_size",
                            "updates_per_step", "n_step", "learning_rate", "alpha",
                            "target_entropy_scale", "reward_scale"),
            nonnegative=("learning_starts", "max_grad_norm", "weight_decay"),
            within={"gamma": "(0, 1]", "tau": "(0, 1]"},
        )
        if self.log_std_min >= self.log_std_max:
            raise ValueError(f"--log-std-min {self.log_std_min} must be smaller than "
                             f"--log-std-max {self.log_std_max}.")
        if self.num_atoms == 1 or self.num_atoms < 0:
            raise ValueError(f"--num-atoms must be 0 (a scalar critic) or at least 2, got "
                             f"{self.num_atoms}.")
        if self.num_atoms and self.v_min >= self.v_max:
            raise ValueError(f"--v-min {self.v_min} must be smaller than --v-max {self.v_max}.")
        algorithm.check_budget(self, self.steps_per_iteration, "iteration")
        if self.n_step > self.buffer_rows:
            raise ValueError(f"--n-step {self.n_step} is longer than the buffer's "
                             f"{self.buffer_rows} steps per environment.")
        if self.buffer_size < self.num_envs:
            raise ValueError(f"--buffer-size {self.buffer_size} cannot hold one step of "
                             f"{self.num_envs} environments.")


def default_config(env: str = "Pendulum-v1", recipe: str = "auto", **overrides) -> Config:
    """Config for `env`: the dataclass defaults (tuned on Pendulum-v1), then the suite's published
    recipe for `env` where there is one (`recipe`: auto, published, cpu, none; or fast,
    fast-published, fast-cpu: FastTD3's arguments); `overrides` (hyperparameters) win."""
    # the env ids' registry and the suites' recipe tables load only here
    from scanrl.common.suites import recipes

    return Config(**{**recipes.hyperparameters(ALGO, env, recipe), **overrides, "env": env})


# ---------------------------------------------------------------------------------------------
# Networks: a tanh-squashed Gaussian actor and two Q networks evaluated as one stacked ensemble
# (each a scalar Q, or C51's logits over num_atoms atoms)
# ---------------------------------------------------------------------------------------------
def init_params(key: jax.Array, config: Config, obs_dim: int, action_dim: int) -> dict:
    """{"actor": MLP obs -> (mean, raw log-std), "critic": two Q MLPs stacked on a leading
    axis of 2, each with max(num_atoms, 1) outputs, "log_alpha": scalar}."""
    k_actor, k_critic = jax.random.split(key)
    critic_sizes = (obs_dim + action_dim, *config.critic_hidden, max(config.num_atoms, 1))
    return {
        "actor": mlp_init(k_actor, (obs_dim, *config.actor_hidden, 2 * action_dim),
                          output_gain=0.01),
        "critic": jax.vmap(lambda k: mlp_init(k, critic_sizes, output_gain=1.0,
                                              layer_norm=config.critic_layer_norm))(
            jax.random.split(k_critic)),
        "log_alpha": jnp.log(jnp.float32(config.alpha)),
    }


def actor_outputs(actor: list, obs: jax.Array, config: Config) -> tuple[jax.Array, jax.Array]:
    """obs [..., obs_dim] -> (mean, log_std), each [..., action_dim]; the log-std is squashed
    smoothly into [log_std_min, log_std_max] (bounded so the Gaussian never degenerates)."""
    mean, raw = jnp.split(mlp_apply(actor, obs, config.activation), 2, axis=-1)
    low, high = config.log_std_min, config.log_std_max
    log_std = low + 0.5 * (high - low) * (jnp.tanh(raw) + 1.0)
    return mean, log_std


def critic_outputs(critic: list, obs: jax.Array, action: jax.Array, activation: str) -> jax.Array:
    """Both critics' outputs: obs [B, obs_dim], action [B, action_dim] in [-1, 1] -> [2, B, K]
    (K = 1: Q; K = num_atoms: logits)."""
    inputs = jnp.concatenate([obs, action], axis=-1)
    return jax.vmap(lambda p: mlp_apply(p, inputs, activation))(critic)


def q_values(critic: list, obs: jax.Array, action: jax.Array, activation: str,
             support: jax.Array | None = None) -> jax.Array:
    """Twin Q values [2, B]: the scalar critics', or (support [K]: the atoms) each categorical
    critic's expected value."""
    out = critic_outputs(critic, obs, action, activation)
    return out[..., 0] if support is None else jax.nn.softmax(out) @ support


def support_of(num_atoms: int, v_min: float, v_max: float) -> jax.Array | None:
    """A categorical critic's atoms [num_atoms], evenly spaced on [v_min, v_max]; None for
    num_atoms 0 (a scalar critic)."""
    return jnp.linspace(v_min, v_max, num_atoms) if num_atoms else None


# ---------------------------------------------------------------------------------------------
# The math: pure functions, tested in tests/test_sac.py
# ---------------------------------------------------------------------------------------------
def tanh_log_det_jacobian(u: jax.Array) -> jax.Array:
    """log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), exact and finite for any u [...]."""
    return 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))


def squashed_gaussian_log_prob(u: jax.Array, mean: jax.Array, log_std: jax.Array) -> jax.Array:
    """log pi(tanh(u)) for u ~ N(mean, exp(log_std)) per dimension; u, mean, log_std [..., A]
    -> [...].

    The density of a = tanh(u) in [-1, 1]^A: the Gaussian log-density of u minus the tanh
    log-Jacobian. Computed from u, never from a, so saturated actions (|a| = 1 in float32)
    keep a finite log-prob.
    """
    z = (u - mean) * jnp.exp(-log_std)
    gaussian = -0.5 * z**2 - log_std - 0.5 * math.log(2.0 * math.pi)
    return (gaussian - tanh_log_det_jacobian(u)).sum(-1)


def squashed_sample(mean: jax.Array, log_std: jax.Array,
                    noise: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Reparameterised sample a = tanh(mean + std * noise) in [-1, 1]^A and its log-prob.

    mean, log_std, noise (standard normal) [..., A] -> (action [..., A], log_prob [...]);
    gradients flow through mean and log_std (the reparameterisation the actor loss uses).
    """
    u = mean + jnp.exp(log_std) * noise
    return jnp.tanh(u), squashed_gaussian_log_prob(u, mean, log_std)


def sample_action(key: jax.Array, mean: jax.Array,
                  log_std: jax.Array) -> tuple[jax.Array, jax.Array]:
    """squashed_sample with fresh standard-normal noise drawn from `key`."""
    return squashed_sample(mean, log_std, jax.random.normal(key, mean.shape))


def critic_target(reward, terminated, next_q, next_log_prob, alpha, discount) -> jax.Array:
    """Soft Bellman target
    y = R + discount (1 - terminated) (min_j Q'_j(s', a') - alpha log pi(a'|s')).

    reward R [B]: the window's discounted sum of rewards (r for one step); discount [B] or
    scalar: gamma ** its length (gamma for one step); terminated [B]: of the window's last
    step; next_log_prob [B]; next_q [2, B] from the target critics at that step's stored next
    observation s' (the final observation where a time limit cut the episode, so truncated
    steps bootstrap) and a fresh action a' ~ pi(.|s'). Returns [B].
    """
    soft_value = next_q.min(axis=0) - alpha * next_log_prob
    return reward + discount * (1.0 - terminated.astype(reward.dtype)) * soft_value


def critic_loss(critic: list, obs, action, target, activation: str) -> tuple[jax.Array, jax.Array]:
    """Sum over the two critics of the mean squared error to the (constant) target [B]."""
    q = q_values(critic, obs, action, activation)  # [2, B]
    return ((q - target) ** 2).mean(axis=1).sum(), q.mean()


def categorical_target(reward, terminated, next_logits, next_log_prob, alpha, discount,
                       support) -> jax.Array:
    """The categorical critics' soft target distribution [B, K]: of the two target critics'
    distributions at (s', a') (next_logits [2, B, K]), the one with the smaller expected value
    (clipped double-Q), its atoms z moved to R + discount (1 - terminated)
    (z - alpha log pi(a'|s')) and projected onto the support [K]; the other inputs [B] as
    `critic_target`'s."""
    chosen = smaller_mean_distribution(next_logits, support)  # [B, K]
    bootstrap = discount * (1.0 - terminated.astype(reward.dtype))  # [B]
    atoms = support - (alpha * next_log_prob)[:, None]  # [B, K]
    return categorical_projection(reward[:, None] + bootstrap[:, None] * atoms, chosen, support)


def categorical_loss(critic: list, obs, action, target, activation: str,
                     support: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Sum over the two critics of the mean cross-entropy to the (constant) target
    distribution [B, K]; also the mean expected Q."""
    log_probs = jax.nn.log_softmax(critic_outputs(critic, obs, action, activation))  # [2, B, K]
    loss = -(target * log_probs).sum(-1).mean(axis=1).sum()
    return loss, (jnp.exp(log_probs) @ support).mean()


def actor_loss(actor: list, critic: list, alpha, obs, noise, config: Config,
               support: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """mean(alpha log pi(a~|s) - min_j Q_j(s, a~)) with a~ = tanh(mean + std * noise) [B, A]
    (a categorical critic: its expected value); returns (loss, log-probs [B]). Only the actor
    is differentiated (critic and alpha held constant)."""
    mean, log_std = actor_outputs(actor, obs, config)
    action, log_prob = squashed_sample(mean, log_std, noise)
    q = q_values(jax.lax.stop_gradient(critic), obs, action, config.activation,
                 support).min(axis=0)
    return (jax.lax.stop_gradient(alpha) * log_prob - q).mean(), log_prob


def alpha_loss(log_alpha: jax.Array, log_prob: jax.Array, target_entropy: float) -> jax.Array:
    """mean(-alpha (log pi + target_entropy)), log-probs constant: when the policy's entropy
    (-log pi) exceeds the target the gradient lowers alpha, otherwise it raises it."""
    return -(jnp.exp(log_alpha) * jax.lax.stop_gradient(log_prob + target_entropy)).mean()


def polyak(online, target, tau: float):
    """target <- tau * online + (1 - tau) * target, leafwise."""
    return optax.incremental_update(online, target, tau)


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
def make_optimizer(config: Config) -> optax.GradientTransformation:
    max_norm = algorithm.grad_norm_bound(config.max_grad_norm)  # 0: no clipping
    # weight decay skips scalars: the temperature log_alpha shares this optimizer
    decayed = lambda params: jax.tree.map(lambda x: x.ndim > 0, params)
    return optax.chain(optax.clip_by_global_norm(max_norm),
                       optax.adamw(config.learning_rate, weight_decay=config.weight_decay,
                                   mask=decayed))


class Learner(NamedTuple):
    params: dict
    target_critic: list
    opt_states: tuple  # (actor, critic, alpha) optimizer states


def sac_update(learner: Learner, batch: Transitions, discount: jax.Array, key: jax.Array,
               config: Config, optimizer: optax.GradientTransformation,
               target_entropy: float) -> tuple[Learner, dict]:
    """One gradient step: the critics, then the actor (against the updated critics), then
    the temperature, then the Polyak-averaged target critics.

    batch: leaves [B, ...] with observations as the networks see them, rewards summed over
    each n-step window; discount [B]: gamma ** each window's length (gamma itself for
    one-step windows).
    Returns the new learner and the step's stats (scalars).
    """
    params, target_critic, (actor_opt, critic_opt, alpha_opt) = learner
    k_next, k_actor = jax.random.split(key)
    act, alpha = config.activation, jnp.exp(params["log_alpha"])
    support = support_of(config.num_atoms, config.v_min, config.v_max)

    def noise(k):  # standard-normal noise [B, A] for the reparameterised samples
        return jax.random.normal(k, batch.action.shape)

    def apply(grads, params, opt_state):
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    next_mean, next_log_std = actor_outputs(params["actor"], batch.next_obs, config)
    next_action, next_log_prob = squashed_sample(next_mean, next_log_std, noise(k_next))
    reward = batch.reward * config.reward_scale
    # the target (a value or a distribution) is computed outside the gradient
    if support is None:
        y = critic_target(reward, batch.terminated,
                          q_values(target_critic, batch.next_obs, next_action, act),
                          next_log_prob, alpha, discount)
        loss = lambda critic: critic_loss(critic, batch.obs, batch.action, y, act)
    else:
        y = categorical_target(reward, batch.terminated,
                               critic_outputs(target_critic, batch.next_obs, next_action, act),
                               next_log_prob, alpha, discount, support)
        loss = lambda critic: categorical_loss(critic, batch.obs, batch.action, y, act, support)
    (c_loss, q_mean), c_grads = jax.value_and_grad(loss, has_aux=True)(params["critic"])
    critic, critic_opt = apply(c_grads, params["critic"], critic_opt)

    (a_loss, log_prob), a_grads = jax.value_and_grad(actor_loss, has_aux=True)(
        params["actor"], critic, alpha, batch.obs, noise(k_actor), config, support
    )
    actor, actor_opt = apply(a_grads, params["actor"], actor_opt)

    log_alpha = params["log_alpha"]
    if config.autotune_alpha:
        alpha_grad = jax.grad(alpha_loss)(log_alpha, log_prob, target_entropy)
        log_alpha, alpha_opt = apply(alpha_grad, log_alpha, alpha_opt)

    stats = {"critic_loss": c_loss, "actor_loss": a_loss, "q_mean": q_mean, "alpha": alpha,
             "entropy": -log_prob.mean()}
    new_params = {"actor": actor, "critic": critic, "log_alpha": log_alpha}
    new_learner = Learner(new_params, polyak(critic, target_critic, config.tau),
                          (actor_opt, critic_opt, alpha_opt))
    return new_learner, stats


def gradient_steps(learner: Learner, buffer: ReplayBuffer, observe, key: jax.Array,
                   config: Config, optimizer: optax.GradientTransformation,
                   target_entropy: float) -> tuple[Learner, dict]:
    """updates_per_step replayed gradient steps (`sac_update` on a batch sampled from the
    buffer), stats averaged over them. `observe`: raw observations [B, obs_dim] -> what the
    networks see."""

    def replay_step(learner, step_key):
        k_sample, k_update = jax.random.split(step_key)
        batch, discount = buffer_sample(buffer, k_sample, config.batch_size, config.n_step,
                                        config.gamma)
        batch = batch._replace(obs=observe(batch.obs), next_obs=observe(batch.next_obs))
        return sac_update(learner, batch, discount, k_update, config, optimizer, target_entropy)

    learner, stats = jax.lax.scan(replay_step, learner,
                                  jax.random.split(key, config.updates_per_step))
    return learner, jax.tree.map(jnp.mean, stats)


class TrainState(NamedTuple):
    learner: Learner
    buffer: ReplayBuffer
    env_state: envs.VecEnvState
    obs: jax.Array  # [N, *obs] raw observations the next step starts from
    obs_stats: envs.RunningStats
    key: jax.Array


def make_algorithm(config: Config, env=None, env_params=None) -> algorithm.Algorithm:
    """SAC's pieces for one seed (common/harness/loop.py turns them into programs); an update is
    one iteration of num_steps env steps (metrics averaged over it; losses NaN before
    learning_starts). `env`: a gymnax-style env object to train on instead of config.env."""
    env, env_params = algorithm.resolve_env(config.env, env, env_params)
    if envs.is_discrete(env, env_params):
        raise ValueError(f"SAC needs continuous (Box) actions and --env {config.env} has "
                         "discrete ones; use algos/ppo.py, algos/ppo_rnn.py, algos/impala.py, "
                         "algos/pqn.py or algos/pqn_rnn.py for it.")
    vec_env = envs.VecEnv(env, env_params, config.num_envs)
    obs_dim, action_dim = vec_env.obs_dim, vec_env.action_dim
    # actions live in [-1, 1]^A for the networks and the buffer; the env sees them rescaled
    action_scale = (vec_env.action_high - vec_env.action_low).reshape(-1) / 2.0
    action_offset = (vec_env.action_high + vec_env.action_low).reshape(-1) / 2.0
    target_entropy = (-config.target_entropy_scale * action_dim if config.target_entropy is None
                      else config.target_entropy)
    optimizer = make_optimizer(config)

    def to_env(unit_action):  # [N, A] in [-1, 1] -> [N, *action_shape] in the env's bounds
        return (unit_action * action_scale + action_offset).reshape((-1, *vec_env.action_shape))

    def observe(stats, obs):  # what the networks see: a Playground locomotion task's `state` part
        return vec_env.observe(obs, stats if config.normalize_obs else None, policy_part=True)

    def learning(step_index):
        """Whether vector step `step_index` (from 0) learns: once more than learning_starts
        env steps per seed have been taken, counting this step's."""
        return (step_index + 1) * config.num_envs > config.learning_starts

    def init(key: jax.Array) -> TrainState:
        k_params, k_reset, key = jax.random.split(key, 3)
        params = init_params(k_params, config, vec_env.policy_obs_dim, action_dim)
        obs, env_state = vec_env.reset(k_reset)
        opt_states = tuple(optimizer.init(params[k]) for k in ("actor", "critic", "log_alpha"))
        return TrainState(
            learner=Learner(params=params, target_critic=params["critic"], opt_states=opt_states),
            buffer=buffer_init(config.buffer_rows, vec_env.num_envs, obs_dim, action_dim),
            env_state=env_state, obs=obs, obs_stats=envs.init_stats((obs_dim,)), key=key,
        )

    def update(state: TrainState, update_index: jax.Array) -> tuple[TrainState, dict]:
        """num_steps env steps, each followed by updates_per_step gradient steps once learning."""
        def env_step(state: TrainState, step_index: jax.Array):
            """Act, store the step in the buffer, then learn (if due). step_index counts vector
            steps from 0, the same for every seed: under vmap the branch stays a real one."""
            # act: uniformly at random before learning_starts env steps, then the policy's sample
            key, k_random, k_policy, k_env, k_learn = jax.random.split(state.key, 5)
            random = jax.random.uniform(k_random, (config.num_envs, action_dim),
                                        minval=-1.0, maxval=1.0)
            mean, log_std = actor_outputs(state.learner.params["actor"],
                                          observe(state.obs_stats, state.obs), config)
            policy_action, _ = jax.vmap(sample_action)(
                jax.random.split(k_policy, config.num_envs), mean, log_std)
            action = jnp.where(step_index * config.num_envs < config.learning_starts,
                               random, policy_action)
            next_obs, env_state, info = vec_env.step(k_env, state.env_state, to_env(action))
            # store
            step = transitions_from_step(state.obs, action, info)
            buffer = buffer_add(state.buffer, step)
            obs_stats = state.obs_stats
            if config.normalize_obs:
                obs_stats = envs.update_stats(obs_stats, step.next_obs)
            # learn: replayed gradient steps once learning has started (stats NaN before)
            learner, stats = jax.lax.cond(
                learning(step_index),
                lambda: gradient_steps(state.learner, buffer, lambda x: observe(obs_stats, x),
                                       k_learn, config, optimizer, target_entropy),
                lambda: (state.learner, no_stats),
            )
            return TrainState(learner=learner, buffer=buffer, env_state=env_state, obs=next_obs,
                              obs_stats=obs_stats, key=key), (info, stats)

        no_stats = {k: jnp.float32(jnp.nan)
                    for k in ("critic_loss", "actor_loss", "q_mean", "alpha", "entropy")}
        step_indices = update_index * config.num_steps + jnp.arange(config.num_steps)
        state, (info, stats) = jax.lax.scan(env_step, state, step_indices)
        metrics = {k: jnp.nanmean(v) for k, v in stats.items()}
        metrics["gradient_steps"] = learning(step_indices).sum() * config.updates_per_step
        metrics.update(envs.episode_metrics(info))
        return state, metrics

    def act(policy_params: dict, obs: jax.Array, key: jax.Array,
            deterministic: bool = False) -> jax.Array:
        """obs [N, *obs] -> actions [N, *action_shape] in the env's bounds: tanh(mean), or a
        sample."""
        mean, log_std = actor_outputs(policy_params["params"]["actor"],
                                      observe(policy_params["obs_stats"], obs), config)
        return to_env(jnp.tanh(mean) if deterministic else sample_action(key, mean, log_std)[0])

    return algorithm.Algorithm(
        init=init, update=update, act=act,
        policy_params=lambda state: {"params": state.learner.params, "obs_stats": state.obs_stats},
        vec_env=vec_env, num_updates=config.num_updates,
        steps_per_update=config.steps_per_iteration,
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
