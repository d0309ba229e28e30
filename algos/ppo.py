"""PPO: clipped-surrogate policy optimisation with GAE and correct time-limit bootstrapping.

Collect `num_steps` x `num_envs` transitions, estimate advantages with GAE (a time-limit
cut bootstraps from V(final observation); only a true termination zeroes it), then run
`num_epochs` epochs of minibatch Adam steps on the clipped surrogate + value + entropy loss.
Papers: Schulman et al. 2017 (arXiv:1707.06347); GAE: Schulman et al. 2016 (arXiv:1506.02438);
dual clip: Ye et al. 2020 (arXiv:1912.09729).

    python algos/ppo.py --env CartPole-v1 --num-seeds 8

Prints a progress line every `--log-every` updates and a per-seed table at the end; writes
runs/ppo__<env>__<time>/ with config.json, progress.jsonl, metrics.npz, params.npz, summary.json.
Discrete envs start from PureJaxRL's CartPole settings, continuous ones from settings tuned
for Pendulum-v1 (`default_config`); every flag overrides them. Seeds spread over devices;
`--data-parallel D` splits each seed's environments over D devices and `--distributed`
spans several processes (README, Scaling).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from common import devices  # first: gives JAX one CPU device per core before anything computes
from common import envs
from common.logging import emit_metrics
from common.run import parse_config, train_and_write
from common.nets import mlp_apply, mlp_init

import distrax
import jax
import jax.numpy as jnp
import optax


# ---------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    """PPO hyperparameters and run settings (every field is a --flag)."""

    env: str = "CartPole-v1"
    """gymnax environment id; discrete and continuous (Box) action spaces both work."""
    seed: int = 0
    """first seed; seed i of the run uses jax.random.key(seed + i)."""
    num_seeds: int = 1
    """independent seeds trained together in one compiled program (vmapped, sharded over devices)."""
    total_timesteps: int = 500_000
    """environment steps per seed (rounded down to whole updates)."""
    num_envs: int = 4
    """parallel environments per seed."""
    num_steps: int = 128
    """steps per environment in each rollout (rollout = num_envs x num_steps transitions)."""
    num_epochs: int = 4
    """passes over each rollout."""
    num_minibatches: int = 4
    """minibatches per epoch; must divide num_envs * num_steps."""
    learning_rate: float = 2.5e-4
    """Adam step size."""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the run."""
    gamma: float = 0.99
    """discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda (0: one-step TD, 1: Monte-Carlo)."""
    clip_eps: float = 0.2
    """PPO ratio clip range: ratios outside [1 - eps, 1 + eps] get no gradient."""
    dual_clip_param: float | None = None
    """dual clip c > 1: for negative advantages the objective is bounded below by c * A (None: off)."""
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
    """clip the global gradient norm to this."""
    normalize_obs: bool = False
    """normalise observations by running mean/std (statistics frozen during each rollout)."""
    normalize_reward: bool = False
    """scale rewards by the running std of the discounted return."""
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
    log_every: int = 10
    """console / wandb / progress.jsonl line every this many updates (0: none; the program
    then has no host callback and JAX's persistent cache can store it)."""
    num_devices: int = 0
    """devices to use (0: all; on CPU one device per core)."""
    data_parallel: int = 1
    """devices that split each seed's num_envs environments, gradients and statistics averaged
    (1: none, seeds fill the devices; 0: automatic, devices left over by too few seeds split
    environments). On CPU splitting is slower than it saves (benchmarks/RESULTS.md)."""
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
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

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
        if self.batch_size % self.num_minibatches:
            raise ValueError(
                f"num_envs * num_steps = {self.batch_size} is not divisible by --num-minibatches "
                f"{self.num_minibatches}; pick a divisor of {self.batch_size}."
            )
        if self.total_timesteps < self.batch_size:
            raise ValueError(
                f"--total-timesteps {self.total_timesteps} is smaller than one rollout "
                f"(num_envs * num_steps = {self.batch_size}); raise it or shrink the rollout."
            )
        if not 0 < self.gamma <= 1 or not 0 <= self.gae_lambda <= 1:
            raise ValueError("--gamma must lie in (0, 1] and --gae-lambda in [0, 1].")
        if not 0 < self.clip_eps < 1:
            raise ValueError(f"--clip-eps must lie in (0, 1), got {self.clip_eps}.")
        if self.dual_clip_param is not None and self.dual_clip_param <= 1:
            raise ValueError(f"--dual-clip-param must be greater than 1, got {self.dual_clip_param}.")
        if self.target_kl is not None and self.target_kl <= 0:
            raise ValueError(f"--target-kl must be positive, got {self.target_kl}.")
        if min(self.eval_every, self.log_every, self.num_devices) < 0:
            raise ValueError("--eval-every, --log-every and --num-devices must be 0 or positive.")
        plan_layout(self)  # raises if no device layout fits
        envs.check_env_id(self.env)
        if self.eval_env_params:
            _, env_params = envs.make(self.env)
            envs.override_params(env_params, self.eval_env_params)


# Settings for continuous-action envs, tuned on Pendulum-v1 (see README and RESULTS.md).
CONTINUOUS_DEFAULTS = dict(
    total_timesteps=1_000_000,
    num_envs=16,
    num_steps=256,
    num_epochs=10,
    num_minibatches=32,
    learning_rate=1e-3,
    gamma=0.95,
    ent_coef=0.0,
    normalize_obs=True,
    normalize_reward=True,
    eval_every=25,
)


def default_config(env: str = "CartPole-v1", **overrides) -> Config:
    """The starting Config for `env`: PureJaxRL's defaults if its actions are discrete,
    CONTINUOUS_DEFAULTS if they are continuous; `overrides` win over both."""
    base = {}
    if env in envs.registered_envs() and not envs.is_discrete(*envs.make(env)):
        base = dict(CONTINUOUS_DEFAULTS)
    return Config(**{**base, **overrides, "env": env})


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
# The math: pure functions, tested against hand computations in tests/test_ppo.py
# ---------------------------------------------------------------------------------------------
def gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    done: jax.Array,
    gamma: float,
    gae_lambda: float,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation over a time-major rollout.

    All inputs [T, N]: rewards r_t, values V(s_t), next_values V(s'_t) where s'_t is the
    observation step t reached (the final observation, even where the env then reset),
    terminated (true ends), done = terminated | truncated.
        delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)
        A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},  A_T = 0
    A truncated step bootstraps from V(s'_t); any episode end stops the trace.
    Returns (advantages [T, N], value targets A + V [T, N]).
    """
    terminated = terminated.astype(rewards.dtype)
    done = done.astype(rewards.dtype)
    deltas = rewards + gamma * (1.0 - terminated) * next_values - values

    def backward(next_advantage, step):
        delta, d = step
        advantage = delta + gamma * gae_lambda * (1.0 - d) * next_advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(values[0]), (deltas, done), reverse=True)
    return advantages, advantages + values


def clipped_surrogate_loss(
    ratio: jax.Array, advantages: jax.Array, clip_eps: float, dual_clip_param: float | None = None
) -> jax.Array:
    """-mean(min(r A, clip(r, 1-eps, 1+eps) A)); with dual clip c, where A < 0 the
    objective is max(that, c A), which bounds the loss of very large ratios. Inputs [B]."""
    unclipped = ratio * advantages
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    objective = jnp.minimum(unclipped, clipped)
    if dual_clip_param is not None:
        objective = jnp.where(advantages < 0, jnp.maximum(objective, dual_clip_param * advantages), objective)
    return -objective.mean()


def value_loss(
    values: jax.Array, old_values: jax.Array, targets: jax.Array, clip_eps: float | None = None
) -> jax.Array:
    """0.5 * mean((V - G)^2); with clip_eps, PPO2's pessimistic max with the clipped value
    V_old + clip(V - V_old, -eps, eps). Inputs [B]."""
    loss = (values - targets) ** 2
    if clip_eps is not None:
        clipped = old_values + jnp.clip(values - old_values, -clip_eps, clip_eps)
        loss = jnp.maximum(loss, (clipped - targets) ** 2)
    return 0.5 * loss.mean()


def approx_kl(log_ratio: jax.Array) -> jax.Array:
    """KL(old || new) estimate mean((r - 1) - log r), r = pi_new / pi_old: unbiased, >= 0."""
    return (jnp.exp(log_ratio) - 1.0 - log_ratio).mean()


class Batch(NamedTuple):
    """Training samples, leaves [B, ...] (flattened [T * N])."""

    obs: jax.Array  # observations as the policy saw them (normalised if enabled)
    action: jax.Array
    log_prob: jax.Array  # log pi_old(action | obs)
    value: jax.Array  # V_old(obs)
    advantage: jax.Array
    target: jax.Array  # GAE value target


def normalize_advantages(advantages: jax.Array) -> jax.Array:
    """Zero mean, unit (population) std over one minibatch [B]."""
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def ppo_loss(params: dict, batch: Batch, config: Config) -> tuple[jax.Array, dict]:
    """Total loss = clipped surrogate + vf_coef * value loss - ent_coef * entropy.

    batch.advantage is used as given: the caller normalises it over the whole minibatch
    (which data-parallel devices share) before each device takes its slice.
    """
    dist = policy(params, batch.obs, config.activation)
    log_ratio = dist.log_prob(batch.action) - batch.log_prob
    ratio = jnp.exp(log_ratio)
    policy_loss = clipped_surrogate_loss(ratio, batch.advantage, config.clip_eps, config.dual_clip_param)
    v_loss = value_loss(
        value(params, batch.obs, config.activation),
        batch.value,
        batch.target,
        config.clip_eps if config.clip_value_loss else None,
    )
    entropy = dist.entropy().mean()
    total = policy_loss + config.vf_coef * v_loss - config.ent_coef * entropy
    stats = {
        "policy_loss": policy_loss,
        "value_loss": v_loss,
        "entropy": entropy,
        "approx_kl": approx_kl(log_ratio),
        "clip_fraction": (jnp.abs(ratio - 1.0) > config.clip_eps).mean(),
    }
    return total, stats


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
def make_optimizer(config: Config) -> optax.GradientTransformation:
    """Global-norm clipping then Adam's direction; the (annealed) step size is applied in learn()."""
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.scale_by_adam(eps=1e-5))


def minibatch_gradient(params: dict, minibatch: Batch, config: Config, shards: int = 1) -> tuple[dict, dict]:
    """Gradient of ppo_loss over one whole minibatch (leaves [B, ...]) and the loss stats.

    Advantages are normalised over the whole minibatch; with `shards` > 1 (inside the
    "data" axis) each device differentiates its 1/shards slice and the mean over shards
    is the whole minibatch's gradient.
    """
    if config.normalize_advantages:
        minibatch = minibatch._replace(advantage=normalize_advantages(minibatch.advantage))
    local = jax.tree.map(lambda x: devices.shard_slice(x, shards), minibatch)
    # pcast + pmean: the mean over shards whatever check_vma is (jax-notes.md, trap 2).
    varying = jax.lax.pcast(params, devices.DATA, to="varying") if shards > 1 else params
    (_, stats), grads = jax.value_and_grad(ppo_loss, has_aux=True)(varying, local, config)
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
    """num_epochs epochs of num_minibatches Adam steps over one rollout.

    batch: leaves [batch_size, ...], the whole rollout (on every data shard). Returns new
    params, optimizer state, and loss stats [num_epochs, num_minibatches].
    """

    def minibatch_step(carry, minibatch):
        params, opt_state, stopped = carry
        grads, stats = minibatch_gradient(params, minibatch, config, shards)
        updates, new_opt_state = optimizer.update(grads, opt_state)
        new_params = jax.tree.map(lambda p, u: p - learning_rate * u, params, updates)
        if config.target_kl is not None:
            # approx_kl is measured before this step: once too large, stop the update.
            stopped = stopped | (stats["approx_kl"] > config.target_kl)
            keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(stopped, o, n), new, old)
            new_params, new_opt_state = keep(new_params, params), keep(new_opt_state, opt_state)
        stats["applied"] = 1.0 - stopped.astype(jnp.float32)
        return (new_params, new_opt_state, stopped), stats

    def epoch(carry, epoch_key):
        order = jax.random.permutation(epoch_key, config.batch_size)
        minibatches = jax.tree.map(
            lambda x: x[order].reshape((config.num_minibatches, config.minibatch_size) + x.shape[1:]), batch
        )
        return jax.lax.scan(minibatch_step, carry, minibatches)

    (params, opt_state, _), stats = jax.lax.scan(
        epoch, (params, opt_state, jnp.array(False)), jax.random.split(key, config.num_epochs)
    )
    return params, opt_state, stats


def plan_layout(config: Config) -> devices.Layout:
    """The (seed, data) device mesh for this config (see common.devices.plan_layout)."""
    sizes = {"--num-envs": config.num_envs, "the minibatch size (num_envs * num_steps / num_minibatches)": config.minibatch_size}
    return devices.plan_layout(config.num_seeds, sizes, config.data_parallel, config.num_devices)


class Transition(NamedTuple):
    """One rollout, leaves [T, N, ...]."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    info: envs.StepInfo
    discounted_return: jax.Array  # running discounted return, for reward scaling


class TrainState(NamedTuple):
    params: dict
    opt_state: optax.OptState
    env_state: envs.VecEnvState
    obs: jax.Array  # [N, *obs] raw observations the next rollout starts from
    obs_stats: envs.RunningStats
    return_stats: envs.RunningStats
    discounted_return: jax.Array  # [N]
    key: jax.Array


def make_train(config: Config, log_fn=None):
    """Build `train(keys[num_seeds]) -> {"params", "metrics"}`, one jitted program.

    metrics: dict of [num_seeds, num_updates] arrays (NaN where a value does not exist,
    e.g. episode_return in an update where no episode ended). `log_fn(seed, update, metrics)`
    receives progress on the host (see common.logging).

    With data parallelism (D = layout.data_parallel > 1) each device steps num_envs / D
    environments; the rollouts are gathered so every device holds the whole batch, each
    takes 1/D of every minibatch, and gradients are averaged: the update equals the
    single-device one on the same batch (tests/test_data_parallel.py).
    """
    layout = plan_layout(config)
    shards = layout.data_parallel
    env, env_params = envs.make(config.env)
    vec_env = envs.VecEnv(env, env_params, config.num_envs, shards)
    # evaluation episodes are split over the data shards too (rounded up to a multiple)
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

    def evaluate(params, obs_stats, key):
        """Mean return of eval_episodes deterministic episodes (mode of the policy)."""
        return envs.evaluate(eval_env, lambda obs: policy(params, observe(obs_stats, obs), act).mode(), key)

    def update(state: TrainState, update_index: jax.Array, seed_index: jax.Array):
        params = state.params

        # 1. Rollout: num_steps steps of num_envs envs with the current policy.
        def env_step(carry, step_key):
            env_state, obs, discounted_return = carry
            k_action, k_env = jax.random.split(step_key)
            policy_obs = observe(state.obs_stats, obs)
            # one key per environment: the same draws whatever the data-parallel split
            action, log_prob = jax.vmap(lambda k, o: policy(params, o, act).sample_and_log_prob(seed=k))(
                devices.shard_split(k_action, config.num_envs, shards), policy_obs
            )
            next_obs, env_state, info = vec_env.step(k_env, env_state, action)
            discounted_return = discounted_return * config.gamma + info.reward
            transition = Transition(policy_obs, action, log_prob, info, discounted_return)
            done = info.terminated | info.truncated
            return (env_state, next_obs, jnp.where(done, 0.0, discounted_return)), transition

        key, k_rollout, k_epochs, k_eval = jax.random.split(state.key, 4)
        (env_state, next_obs, discounted_return), traj = jax.lax.scan(
            env_step,
            (state.env_state, state.obs, state.discounted_return),
            jax.random.split(k_rollout, config.num_steps),

        )
        info = traj.info

        # 2. Advantages. V(s'_t) uses the final observation, so truncations bootstrap.
        old_values = value(params, traj.obs, act)
        next_values = value(params, observe(state.obs_stats, info.final_obs), act)
        rewards = info.reward
        return_stats = state.return_stats
        stats_axis = devices.DATA if shards > 1 else None  # statistics cover every shard's envs
        if config.normalize_reward:
            return_stats = envs.update_stats(return_stats, traj.discounted_return, stats_axis)
            rewards = envs.scale(return_stats, rewards)
        advantages, targets = gae(
            rewards, old_values, next_values, info.terminated, info.terminated | info.truncated,
            config.gamma, config.gae_lambda,
        )
        obs_stats = state.obs_stats
        if config.normalize_obs:  # new statistics take effect from the next rollout
            obs_stats = envs.update_stats(obs_stats, flatten_obs(info.final_obs), stats_axis)
        batch = Batch(traj.obs, traj.action, traj.log_prob, old_values, advantages, targets)
        batch = devices.gather_envs(batch, shards)  # [T, num_envs, ...] on every data shard
        flat = jax.tree.map(lambda x: x.reshape((config.batch_size,) + x.shape[2:]), batch)

        # 3. num_epochs epochs of num_minibatches Adam steps.
        frac = 1.0 - update_index / num_updates if config.anneal_lr else 1.0
        learning_rate = config.learning_rate * frac

        params, opt_state, loss_stats = learn(
            params, state.opt_state, flat, k_epochs, learning_rate, config, optimizer, shards
        )

        # 4. Metrics; evaluation every eval_every updates and after the last one.
        metrics = {k: v.mean() for k, v in loss_stats.items()}
        metrics.update(envs.episode_metrics(info, shards))
        metrics["learning_rate"] = jnp.asarray(learning_rate, jnp.float32)
        if config.eval_every:
            due = ((update_index + 1) % config.eval_every == 0) | (update_index == num_updates - 1)
            metrics["eval_return"] = jax.lax.cond(
                due, lambda: evaluate(params, obs_stats, k_eval), lambda: jnp.float32(jnp.nan)
            )
        emit_metrics(log_fn, seed_index, update_index, num_updates, config.log_every, metrics)
        new_state = TrainState(params, opt_state, env_state, next_obs, obs_stats, return_stats, discounted_return, key)
        return new_state, metrics

    def train_one(key: jax.Array, seed_index: jax.Array):
        k_params, k_reset, key = jax.random.split(key, 3)
        params = init_params(k_params, config, obs_dim, vec_env)
        obs, env_state = vec_env.reset(k_reset)
        state = TrainState(
            params=params,
            opt_state=optimizer.init(params),
            env_state=env_state,
            obs=obs,
            obs_stats=envs.init_stats((obs_dim,)),
            return_stats=envs.init_stats(),
            discounted_return=jnp.zeros(vec_env.num_envs),
            key=key,
        )
        state, metrics = jax.lax.scan(
            lambda s, u: update(s, u, seed_index), state, jnp.arange(num_updates)
        )
        return {"params": state.params, "obs_stats": state.obs_stats, "metrics": metrics}

    return devices.seeds_over_devices(train_one, layout)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
def main(config: Config) -> dict:
    """Compile, train every seed, write the run folder; returns summary.json's content."""
    return train_and_write(
        "ppo", config, make_train, plan_layout(config), config.batch_size, config.num_updates,
        saved=lambda out: {"params": out["params"], "obs_stats": out["obs_stats"]._asdict()},
    )


def cli(argv: list[str] | None = None) -> Config:
    """Parse flags; the --env given picks the defaults (see default_config) shown by --help."""
    return parse_config(Config, default_config, __doc__, argv)


if __name__ == "__main__":
    main(cli())
