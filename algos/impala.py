"""IMPALA: actor-critic with V-trace off-policy correction, synchronous and in one program.

Each update rolls out `num_steps` x `num_envs` steps with the behaviour policy (the current
parameters, or those of `actor_lag` updates ago), then runs `num_epochs` epochs over
minibatches of whole trajectories, recomputing V-trace targets with the current value
network in every minibatch. One epoch, one minibatch and no lag is A2C with lambda-returns.
Paper: Espeholt et al. 2018 (arXiv:1802.01561).

    python algos/impala.py --env CartPole-v1 --num-seeds 8
    python algos/impala.py --env CartPole-v1 --actor-lag 4     # behaviour policy 4 updates old

Prints a progress line every `--log-every` updates and a per-seed table at the end; writes
runs/impala__<env>__<time>/ with config.json, progress.jsonl, metrics.npz, params.npz,
summary.json. Seeds spread over devices; `--data-parallel D` splits each seed's
environments over D devices and `--distributed` spans several processes (README, Scaling).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from common import devices  # first: gives JAX one CPU device per core before anything computes
from common import envs
from common.logging import emit_metrics
from common.nets import mlp_apply, mlp_init
from common.run import parse_config, train_and_write

import distrax
import jax
import jax.numpy as jnp
import optax


# ---------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    """IMPALA hyperparameters and run settings (every field is a --flag)."""

    env: str = "CartPole-v1"
    """gymnax environment id; discrete and continuous (Box) action spaces both work."""
    seed: int = 0
    """first seed; seed i of the run uses jax.random.key(seed + i)."""
    num_seeds: int = 1
    """independent seeds trained together in one compiled program (vmapped, sharded over devices)."""
    total_timesteps: int = 1_000_000
    """environment steps per seed (rounded down to whole updates)."""
    num_envs: int = 64
    """parallel environments per seed (trajectories per rollout)."""
    num_steps: int = 64
    """trajectory length T: steps per environment in each rollout."""
    num_epochs: int = 2
    """passes over each rollout; later passes are off-policy and V-trace corrects them."""
    num_minibatches: int = 4
    """minibatches of whole trajectories per epoch (split along environments); must divide num_envs."""
    learning_rate: float = 5e-4
    """Adam step size (1e-3 let CartPole seeds drift and collapse under --actor-lag 4)."""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the run."""
    gamma: float = 0.99
    """discount factor."""
    vtrace_lambda: float = 1.0
    """lambda of the V-trace traces c = lambda * min(c_bar, rho) (1: the paper's V-trace)."""
    clip_rho_threshold: float = 1.0
    """rho_bar: truncation of the importance weights in the V-trace TD errors."""
    clip_c_threshold: float = 1.0
    """c_bar: truncation of the importance weights in the V-trace traces."""
    clip_pg_rho_threshold: float = 1.0
    """truncation of the importance weights on the policy-gradient advantage."""
    pg_advantage: Literal["official", "acme"] = "official"
    """policy-gradient bootstrap: official = next V-trace target; acme = lambda-mixed with V."""
    actor_lag: int = 0
    """the behaviour policy uses the parameters of this many updates ago (asynchronous IMPALA's lag)."""
    normalize_advantages: bool = False
    """normalise the policy-gradient advantages to zero mean, unit std within each minibatch."""
    ent_coef: float = 0.01
    """entropy bonus weight."""
    vf_coef: float = 0.5
    """value loss weight (value loss = 0.5 * mean squared error to the V-trace targets)."""
    max_grad_norm: float = 0.5
    """clip the global gradient norm to this (0: no clipping)."""
    normalize_obs: bool = False
    """normalise observations by running mean/std (statistics frozen during each rollout)."""
    normalize_reward: bool = True
    """scale rewards by the running std of the discounted return; keeps the advantages O(1),
    so ent_coef means the same whatever the reward scale (raw CartPole returns made 0.01 too weak)."""
    actor_hidden: tuple[int, ...] = (64, 64)
    """hidden layer sizes of the policy MLP."""
    critic_hidden: tuple[int, ...] = (64, 64)
    """hidden layer sizes of the value MLP."""
    activation: Literal["tanh", "relu", "elu", "swish"] = "tanh"
    """hidden-layer activation."""
    eval_every: int = 50
    """evaluate the deterministic policy every this many updates, and after the last (0: never)."""
    eval_episodes: int = 10
    """episodes per evaluation (run in parallel)."""
    eval_env_params: dict[str, float] = field(default_factory=dict)
    """override env parameters for evaluation only, e.g. --eval-env-params length 0.7."""
    log_every: int = 20
    """console / wandb / progress.jsonl line every this many updates (0: none; the program
    then has no host callback and JAX's persistent cache can store it)."""
    num_devices: int = 0
    """devices to use (0: all; on CPU one device per core)."""
    data_parallel: int = 1
    """devices that split each seed's num_envs environments, gradients and statistics averaged
    (1: none, seeds fill the devices; 0: automatic). On CPU splitting is slower than it saves."""
    distributed: bool = False
    """multi-process run: jax.distributed.initialize() before anything else (also implied by
    JAX_COORDINATOR_ADDRESS); only process 0 prints and writes. See README, Scaling."""
    compile_cache: bool = True
    """persistent compilation cache in ~/.cache/scanrl/jax: repeated runs skip compiling."""
    wandb_mode: Literal["disabled", "offline", "online"] = "disabled"
    """wandb logging: disabled (default, needs no account), offline (local files), online."""
    wandb_project: str = "scanrl"
    """wandb project name."""
    out_dir: str = "runs"
    """parent folder of the run folder."""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_envs(self) -> int:
        return self.num_envs // self.num_minibatches

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // self.batch_size

    def __post_init__(self):
        positive = ["num_seeds", "num_envs", "num_steps", "num_epochs", "num_minibatches", "eval_episodes"]
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}.")
        if not self.learning_rate > 0:
            raise ValueError(f"--learning-rate must be positive, got {self.learning_rate}.")
        if self.num_envs % self.num_minibatches:
            raise ValueError(
                f"--num-envs {self.num_envs} is not divisible by --num-minibatches {self.num_minibatches}; "
                "minibatches are whole trajectories, so pick a divisor of num_envs."
            )
        if self.total_timesteps < self.batch_size:
            raise ValueError(
                f"--total-timesteps {self.total_timesteps} is smaller than one rollout "
                f"(num_envs * num_steps = {self.batch_size}); raise it or shrink the rollout."
            )
        if not 0 < self.gamma <= 1 or not 0 <= self.vtrace_lambda <= 1:
            raise ValueError("--gamma must lie in (0, 1] and --vtrace-lambda in [0, 1].")
        for name in ("clip_rho_threshold", "clip_c_threshold", "clip_pg_rho_threshold"):
            if not getattr(self, name) > 0:
                raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}.")
        if min(self.actor_lag, self.eval_every, self.log_every, self.num_devices, self.max_grad_norm) < 0:
            raise ValueError(
                "--actor-lag, --eval-every, --log-every, --num-devices and --max-grad-norm must be 0 or positive."
            )
        envs.check_env_id(self.env)
        if self.eval_env_params:
            _, env_params = envs.make(self.env)
            envs.override_params(env_params, self.eval_env_params)
        plan_layout(self)  # raises if no device layout fits


# Settings for continuous-action envs, tried on Pendulum-v1 (2e6 steps): 16 envs give twice the
# updates of 32, so fewer seeds sit on the -1000 plateau; still 1 seed in 16 never leaves it.
CONTINUOUS_DEFAULTS = dict(
    total_timesteps=2_000_000,
    num_envs=16,
    num_steps=64,
    num_epochs=2,
    num_minibatches=4,
    learning_rate=1e-3,
    gamma=0.95,
    ent_coef=0.0,
    normalize_obs=True,
    normalize_reward=True,
    normalize_advantages=True,
    eval_every=25,
)


def default_config(env: str = "CartPole-v1", **overrides) -> Config:
    """The starting Config for `env`: the CartPole-tuned defaults if its actions are discrete,
    CONTINUOUS_DEFAULTS if they are continuous; `overrides` win over both."""
    base = {}
    if env in envs.registered_envs() and not envs.is_discrete(*envs.make(env)):
        base = dict(CONTINUOUS_DEFAULTS)
    return Config(**{**base, **overrides, "env": env})


def plan_layout(config: Config) -> devices.Layout:
    """The (seed, data) device mesh for this config (see common.devices.plan_layout)."""
    sizes = {"--num-envs": config.num_envs, "the trajectories per minibatch (num_envs / num_minibatches)": config.minibatch_envs}
    return devices.plan_layout(config.num_seeds, sizes, config.data_parallel, config.num_devices)


# ---------------------------------------------------------------------------------------------
# Network: separate policy and value MLPs; a state-independent log-std for continuous actions
# ---------------------------------------------------------------------------------------------
def init_params(key: jax.Array, config: Config, obs_dim: int, vec_env: envs.VecEnv) -> dict:
    k_actor, k_critic = jax.random.split(key)
    out_dim = vec_env.num_actions if vec_env.discrete else math.prod(vec_env.action_shape)
    params = {
        "actor": mlp_init(k_actor, (obs_dim, *config.actor_hidden, out_dim), output_gain=0.01),
        "critic": mlp_init(k_critic, (obs_dim, *config.critic_hidden, 1), output_gain=1.0),
    }
    if not vec_env.discrete:
        params["log_std"] = jnp.zeros(out_dim)
    return params


def policy(params: dict, obs: jax.Array, activation: str) -> distrax.Distribution:
    """obs [..., obs_dim] -> action distribution with batch shape [...]."""
    out = mlp_apply(params["actor"], obs, activation)
    if "log_std" not in params:
        return distrax.Categorical(logits=out)
    return distrax.MultivariateNormalDiag(out, jnp.exp(params["log_std"]))


def value(params: dict, obs: jax.Array, activation: str) -> jax.Array:
    """obs [..., obs_dim] -> V(obs) [...]."""
    return mlp_apply(params["critic"], obs, activation)[..., 0]


# ---------------------------------------------------------------------------------------------
# The math: pure functions, tested against rlax, GAE and a plain-Python loop in tests/test_impala.py
# ---------------------------------------------------------------------------------------------
def vtrace(
    values: jax.Array,
    next_values: jax.Array,
    rewards: jax.Array,
    rhos: jax.Array,
    terminated: jax.Array,
    done: jax.Array,
    gamma: float,
    lambda_: float = 1.0,
    clip_rho_threshold: float = 1.0,
    clip_c_threshold: float = 1.0,
) -> jax.Array:
    """V-trace targets v_s over a time-major trajectory; every input and the output [T, B].

    values V(x_t); next_values V(x'_t) of the observation step t reached (the final one,
    even where the env then reset); rhos pi(a_t|x_t) / mu(a_t|x_t); terminated: true
    ends (zero the bootstrap); done = terminated | truncated (cuts the trace).
        delta_t = min(rho_bar, rho_t) (r_t + gamma (1 - terminated_t) V(x'_t) - V(x_t))
        c_t     = lambda min(c_bar, rho_t)
        v_t - V(x_t) = delta_t + gamma (1 - done_t) c_t (v_{t+1} - V(x_{t+1})),  0 after T
    A truncated step bootstraps from V(final observation); no trace crosses an episode end.
    """
    dtype = values.dtype
    not_terminated = 1.0 - terminated.astype(dtype)
    not_done = 1.0 - done.astype(dtype)
    deltas = jnp.minimum(clip_rho_threshold, rhos) * (rewards + gamma * not_terminated * next_values - values)
    traces = lambda_ * jnp.minimum(clip_c_threshold, rhos)

    def backward(next_error, step):
        delta, trace, nd = step
        error = delta + gamma * nd * trace * next_error
        return error, error

    _, errors = jax.lax.scan(backward, jnp.zeros_like(values[0]), (deltas, traces, not_done), reverse=True)
    return errors + values


def pg_advantage(
    vs: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    rewards: jax.Array,
    terminated: jax.Array,
    done: jax.Array,
    gamma: float,
    lambda_: float = 1.0,
    mode: str = "official",
) -> jax.Array:
    """Policy-gradient advantage r_t + gamma (1 - terminated_t) q_t - V(x_t), inputs [T, B].

    q_t bootstraps the next state: official, the next V-trace target v_{t+1}; acme,
    lambda v_{t+1} + (1 - lambda) V(x_{t+1}). At the last step, and wherever the episode
    ended at t (done_t), q_t = V(x'_t) of the observation step t reached: a truncated step
    never reads the next episode's values. The caller multiplies by min(rho_bar_pg, rho).
    """
    next_vs = jnp.concatenate([vs[1:], next_values[-1:]])
    if mode == "official":
        bootstrap = next_vs
    elif mode == "acme":
        bootstrap = lambda_ * next_vs + (1.0 - lambda_) * next_values
    else:
        raise ValueError(f"pg_advantage mode must be 'official' or 'acme', got {mode!r}.")
    bootstrap = jnp.where(done, next_values, bootstrap)
    not_terminated = 1.0 - terminated.astype(values.dtype)
    return rewards + gamma * not_terminated * bootstrap - values


class Batch(NamedTuple):
    """Whole trajectories, leaves [T, B, ...] (time-major; B = environments)."""

    obs: jax.Array  # observations as the behaviour policy saw them (normalised if enabled)
    next_obs: jax.Array  # the observation each step reached (final one before a reset), same normalisation
    action: jax.Array
    log_prob: jax.Array  # log mu(action | obs), the behaviour policy
    reward: jax.Array  # scaled if normalize_reward
    terminated: jax.Array
    done: jax.Array


def impala_loss(params: dict, batch: Batch, config: Config, shards: int = 1) -> tuple[jax.Array, dict]:
    """Policy gradient with the clipped-rho V-trace advantage + vf_coef * value loss - ent_coef * entropy.

    V-trace targets are recomputed from the current value network and held fixed (no
    gradient flows through targets or importance weights). With normalize_advantages the
    advantage statistics cover the whole minibatch, i.e. all `shards` data shards' slices.
    """
    act = config.activation
    dist = policy(params, batch.obs, act)
    log_prob = dist.log_prob(batch.action)
    log_rho = log_prob - batch.log_prob
    rhos = jax.lax.stop_gradient(jnp.exp(log_rho))
    values = value(params, batch.obs, act)
    next_values = jax.lax.stop_gradient(value(params, batch.next_obs, act))
    fixed_values = jax.lax.stop_gradient(values)
    vs = vtrace(
        fixed_values, next_values, batch.reward, rhos, batch.terminated, batch.done, config.gamma,
        config.vtrace_lambda, config.clip_rho_threshold, config.clip_c_threshold,
    )
    advantage = pg_advantage(
        vs, fixed_values, next_values, batch.reward, batch.terminated, batch.done, config.gamma,
        config.vtrace_lambda, config.pg_advantage,
    )
    advantage = jnp.minimum(config.clip_pg_rho_threshold, rhos) * advantage
    if config.normalize_advantages:
        mean, mean_sq = devices.data_mean((advantage.mean(), (advantage**2).mean()), shards)
        advantage = (advantage - mean) / (jnp.sqrt(jnp.maximum(mean_sq - mean**2, 0.0)) + 1e-8)
    policy_loss = -(advantage * log_prob).mean()
    value_loss = 0.5 * ((values - vs) ** 2).mean()
    entropy = dist.entropy().mean()
    total = policy_loss + config.vf_coef * value_loss - config.ent_coef * entropy
    stats = {
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy,
        "rho_mean": rhos.mean(),
        "rho_clipped_fraction": (rhos > config.clip_rho_threshold).mean(),
        "max_abs_log_rho": jnp.abs(log_rho).max(),
        "approx_kl": (jnp.exp(-log_rho) - 1.0 + log_rho).mean(),  # KL(mu || pi) estimate, >= 0
    }
    return total, stats


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
def make_optimizer(config: Config) -> optax.GradientTransformation:
    """Global-norm clipping (if max_grad_norm > 0) then Adam's direction; learn() applies the step size."""
    clip = [optax.clip_by_global_norm(config.max_grad_norm)] if config.max_grad_norm > 0 else []
    return optax.chain(*clip, optax.scale_by_adam(eps=1e-5))


def minibatch_gradient(params: dict, minibatch: Batch, config: Config, shards: int = 1) -> tuple[dict, dict]:
    """Gradient of impala_loss over one minibatch of trajectories (leaves [T, b, ...]).

    With `shards` > 1 (inside the "data" axis) each device differentiates its 1/shards of
    the trajectories and the mean over shards is the whole minibatch's gradient.
    """
    local = jax.tree.map(lambda x: devices.shard_slice(x.swapaxes(0, 1), shards).swapaxes(0, 1), minibatch)
    # pcast + pmean: the mean over shards whatever check_vma is (jax-notes.md, trap 2).
    varying = jax.lax.pcast(params, devices.DATA, to="varying") if shards > 1 else params
    (_, stats), grads = jax.value_and_grad(impala_loss, has_aux=True)(varying, local, config, shards)
    return devices.data_mean((grads, stats), shards)


def learn(
    params: dict,
    opt_state: optax.OptState,
    batch: Batch,
    key: jax.Array,
    learning_rate: jax.Array,
    config: Config,
    optimizer: optax.GradientTransformation,
    shards: int = 1,
) -> tuple[dict, optax.OptState, dict]:
    """num_epochs epochs over the rollout [T, num_envs, ...]; each epoch shuffles the
    environments and takes num_minibatches Adam steps on [T, num_envs / num_minibatches]
    trajectory blocks (time order kept, as V-trace needs it). Stats [epochs, minibatches]."""

    def minibatch_step(carry, minibatch):
        params, opt_state = carry
        grads, stats = minibatch_gradient(params, minibatch, config, shards)
        updates, opt_state = optimizer.update(grads, opt_state)
        params = jax.tree.map(lambda p, u: p - learning_rate * u, params, updates)
        return (params, opt_state), stats

    def epoch(carry, epoch_key):
        order = jax.random.permutation(epoch_key, config.num_envs)

        def split(x):  # [T, N, ...] -> [num_minibatches, T, N / num_minibatches, ...]
            x = x[:, order].reshape((x.shape[0], config.num_minibatches, config.minibatch_envs) + x.shape[2:])
            return x.swapaxes(0, 1)

        return jax.lax.scan(minibatch_step, carry, jax.tree.map(split, batch))

    (params, opt_state), stats = jax.lax.scan(epoch, (params, opt_state), jax.random.split(key, config.num_epochs))
    return params, opt_state, stats


class Transition(NamedTuple):
    """One rollout, leaves [T, N, ...]."""

    obs: jax.Array
    next_obs: jax.Array
    action: jax.Array
    info: envs.StepInfo
    discounted_return: jax.Array  # running discounted return, for reward scaling


class TrainState(NamedTuple):
    params: dict
    lagged_params: dict  # leaves [max(actor_lag, 1), ...]: parameters of the last actor_lag updates, oldest first
    opt_state: optax.OptState
    env_state: envs.VecEnvState
    obs: jax.Array  # [N, *obs] raw observations the next rollout starts from
    obs_stats: envs.RunningStats
    return_stats: envs.RunningStats
    discounted_return: jax.Array  # [N]
    key: jax.Array


def make_train(config: Config, log_fn=None):
    """Build `train(keys[num_seeds]) -> {"params", "obs_stats", "metrics"}`, one jitted program.

    metrics: dict of [num_seeds, num_updates] arrays (NaN where a value does not exist).
    With data parallelism each device steps num_envs / D environments; rollouts are
    gathered and each device takes 1/D of every minibatch's trajectories, gradients averaged.
    """
    layout = plan_layout(config)
    shards = layout.data_parallel
    env, env_params = envs.make(config.env)
    vec_env = envs.VecEnv(env, env_params, config.num_envs, shards)
    eval_env = envs.VecEnv(
        env,
        envs.override_params(env_params, config.eval_env_params),
        math.ceil(config.eval_episodes / shards) * shards,
        shards,
    )
    obs_dim = math.prod(vec_env.obs_shape)
    num_updates, act = config.num_updates, config.activation
    optimizer = make_optimizer(config)

    def flatten_obs(obs):  # [..., *obs_shape] -> [..., obs_dim]
        return obs.reshape(obs.shape[: obs.ndim - len(vec_env.obs_shape)] + (obs_dim,))

    def observe(stats, obs):  # what the networks see
        obs = flatten_obs(obs)
        return envs.normalize(stats, obs) if config.normalize_obs else obs

    def update(state: TrainState, update_index: jax.Array, seed_index: jax.Array):
        # The behaviour policy: the parameters of actor_lag updates ago (clamped at the start).
        behaviour = jax.tree.map(lambda x: x[0], state.lagged_params) if config.actor_lag else state.params

        # 1. Rollout: num_steps steps of num_envs envs with the behaviour policy.
        def env_step(carry, step_key):
            env_state, obs, discounted_return = carry
            k_action, k_env = jax.random.split(step_key)
            policy_obs = observe(state.obs_stats, obs)
            # one key per environment: the same draws whatever the data-parallel split
            action = jax.vmap(lambda k, o: policy(behaviour, o, act).sample(seed=k))(
                devices.shard_split(k_action, config.num_envs, shards), policy_obs
            )
            next_obs, env_state, info = vec_env.step(k_env, env_state, action)
            discounted_return = discounted_return * config.gamma + info.reward
            transition = Transition(
                policy_obs, observe(state.obs_stats, info.final_obs), action, info, discounted_return
            )
            done = info.terminated | info.truncated
            return (env_state, next_obs, jnp.where(done, 0.0, discounted_return)), transition

        key, k_rollout, k_epochs, k_eval = jax.random.split(state.key, 4)
        (env_state, next_obs, discounted_return), traj = jax.lax.scan(
            env_step,
            (state.env_state, state.obs, state.discounted_return),
            jax.random.split(k_rollout, config.num_steps),
        )
        info = traj.info
        # log mu(a|x) over the whole [T, N] rollout, as the learner computes log pi: without
        # lag, one epoch and one minibatch the importance ratios are then exactly 1
        behaviour_log_prob = policy(behaviour, traj.obs, act).log_prob(traj.action)

        # 2. Normalisers (statistics cover every data shard), then the batch on every shard.
        stats_axis = devices.DATA if shards > 1 else None
        rewards, return_stats = info.reward, state.return_stats
        if config.normalize_reward:
            return_stats = envs.update_stats(return_stats, traj.discounted_return, stats_axis)
            rewards = envs.scale(return_stats, rewards)
        obs_stats = state.obs_stats
        if config.normalize_obs:  # new statistics take effect from the next rollout
            obs_stats = envs.update_stats(obs_stats, flatten_obs(info.final_obs), stats_axis)
        batch = Batch(
            traj.obs, traj.next_obs, traj.action, behaviour_log_prob, rewards, info.terminated,
            info.terminated | info.truncated,
        )
        batch = devices.gather_envs(batch, shards)  # [T, num_envs, ...] on every data shard

        # 3. num_epochs epochs of num_minibatches Adam steps; V-trace inside every loss.
        frac = 1.0 - update_index / num_updates if config.anneal_lr else 1.0
        learning_rate = config.learning_rate * frac
        params, opt_state, loss_stats = learn(
            state.params, state.opt_state, batch, k_epochs, learning_rate, config, optimizer, shards
        )
        lagged = state.lagged_params
        if config.actor_lag:  # drop the oldest, append the parameters this rollout's update started from
            lagged = jax.tree.map(lambda old, p: jnp.concatenate([old[1:], p[None]]), lagged, state.params)

        # 4. Metrics; evaluation every eval_every updates and after the last one.
        metrics = {k: v.mean() for k, v in loss_stats.items()}
        metrics["max_abs_log_rho"] = loss_stats["max_abs_log_rho"].max()
        metrics.update(envs.episode_metrics(info, shards))
        metrics["learning_rate"] = jnp.asarray(learning_rate, jnp.float32)
        if config.eval_every:
            due = ((update_index + 1) % config.eval_every == 0) | (update_index == num_updates - 1)
            act_fn = lambda obs: policy(params, observe(obs_stats, obs), act).mode()
            metrics["eval_return"] = jax.lax.cond(
                due, lambda: envs.evaluate(eval_env, act_fn, k_eval), lambda: jnp.float32(jnp.nan)
            )
        emit_metrics(log_fn, seed_index, update_index, num_updates, config.log_every, metrics)
        new_state = TrainState(
            params, lagged, opt_state, env_state, next_obs, obs_stats, return_stats, discounted_return, key
        )
        return new_state, metrics

    def train_one(key: jax.Array, seed_index: jax.Array):
        k_params, k_reset, key = jax.random.split(key, 3)
        params = init_params(k_params, config, obs_dim, vec_env)
        obs, env_state = vec_env.reset(k_reset)
        state = TrainState(
            params=params,
            lagged_params=jax.tree.map(lambda p: jnp.stack([p] * max(config.actor_lag, 1)), params),
            opt_state=optimizer.init(params),
            env_state=env_state,
            obs=obs,
            obs_stats=envs.init_stats((obs_dim,)),
            return_stats=envs.init_stats(),
            discounted_return=jnp.zeros(vec_env.num_envs),
            key=key,
        )
        state, metrics = jax.lax.scan(lambda s, u: update(s, u, seed_index), state, jnp.arange(num_updates))
        return {"params": state.params, "obs_stats": state.obs_stats, "metrics": metrics}

    return devices.seeds_over_devices(train_one, layout)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
def main(config: Config) -> dict:
    """Compile, train every seed, write the run folder; returns summary.json's content."""
    return train_and_write(
        "impala", config, make_train, plan_layout(config), config.batch_size, config.num_updates,
        saved=lambda out: {"params": out["params"], "obs_stats": out["obs_stats"]._asdict()},
    )


def cli(argv: list[str] | None = None) -> Config:
    """Parse flags; the --env given picks the defaults (see default_config) shown by --help."""
    return parse_config(Config, default_config, __doc__, argv)


if __name__ == "__main__":
    main(cli())
