"""GRPO for environments: critic-free clipped policy optimisation with group-relative advantages.

Environments form groups of `group_size` neighbours. Each update resets them (by default),
rolls out `num_steps` steps, computes every step's discounted return-to-go inside the window
(no critic, no bootstrap), keeps each environment's steps up to its first episode end, and
normalises the returns at each time step across the group members still alive then. The
policy takes PPO's clipped step on these advantages, with an optional KL penalty towards the
initial policy. As in EmbodiChain's GRPO; `--shared-group-reset` starts every member of a
group from the same state (the "one prompt, G completions" form). Paper (language models):
Shao et al. 2024 (arXiv:2402.03300).

    python algos/grpo.py --env CartPole-v1 --num-seeds 4
    python algos/grpo.py --env CartPole-v1 --shared-group-reset

Prints a progress line every `--log-every` updates and a per-seed table at the end; writes
runs/grpo__<env>__<time>/ with config.json, progress.jsonl, metrics.npz, params.npz,
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
    """GRPO hyperparameters and run settings (every field is a --flag)."""

    env: str = "CartPole-v1"
    """gymnax environment id; discrete and continuous (Box) action spaces both work."""
    seed: int = 0
    """first seed; seed i of the run uses jax.random.key(seed + i)."""
    num_seeds: int = 1
    """independent seeds trained together in one compiled program (vmapped, sharded over devices)."""
    total_timesteps: int = 3_000_000
    """environment steps per seed (rounded down to whole updates; masked steps count too)."""
    num_envs: int = 64
    """parallel environments per seed: num_envs / group_size groups."""
    group_size: int = 4
    """neighbouring environments whose returns form one baseline (at least 2; must divide num_envs)."""
    num_steps: int = 512
    """rollout window per environment; make it at least the episode limit so first episodes finish."""
    num_epochs: int = 4
    """passes over each rollout (advantages are computed once per rollout)."""
    num_minibatches: int = 4
    """minibatches per epoch; must divide num_envs * num_steps."""
    learning_rate: float = 3e-4
    """Adam step size."""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the run."""
    gamma: float = 0.99
    """discount of the returns-to-go inside the window."""
    clip_eps: float = 0.2
    """ratio clip range of the surrogate objective."""
    ent_coef: float = 0.01
    """entropy bonus weight."""
    kl_coef: float = 0.0
    """weight of the KL penalty towards the initial (reference) policy; 0: none (EmbodiChain's CartPole setting)."""
    eps: float = 1e-8
    """added to the group std when normalising."""
    reset_every_rollout: bool = True
    """reset every environment at the start of every rollout."""
    truncate_at_first_done: bool = True
    """train only on each environment's steps up to and including its first episode end."""
    shared_group_reset: bool = False
    """every member of a group starts each rollout from the same initial state (off: EmbodiChain)."""
    max_grad_norm: float = 0.5
    """clip the global gradient norm to this."""
    normalize_obs: bool = False
    """normalise observations by running mean/std (statistics frozen during each rollout)."""
    actor_hidden: tuple[int, ...] = (64, 64)
    """hidden layer sizes of the policy MLP."""
    activation: Literal["tanh", "relu", "elu", "swish"] = "tanh"
    """hidden-layer activation."""
    eval_every: int = 10
    """evaluate the deterministic policy every this many updates, and after the last (0: never)."""
    eval_episodes: int = 10
    """episodes per evaluation (run in parallel)."""
    eval_env_params: dict[str, float] = field(default_factory=dict)
    """override env parameters for evaluation only, e.g. --eval-env-params length 0.7."""
    log_every: int = 5
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
        if self.group_size < 2:
            raise ValueError(f"--group-size must be at least 2 (a group of one has no baseline), got {self.group_size}.")
        if self.num_envs % self.group_size:
            raise ValueError(
                f"--num-envs {self.num_envs} is not divisible by --group-size {self.group_size}; "
                "groups are blocks of neighbouring environments."
            )
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
        if not 0 < self.gamma <= 1 or not 0 < self.clip_eps < 1:
            raise ValueError("--gamma must lie in (0, 1] and --clip-eps in (0, 1).")
        if min(self.kl_coef, self.ent_coef, self.eval_every, self.log_every, self.num_devices) < 0:
            raise ValueError("--kl-coef, --ent-coef, --eval-every, --log-every and --num-devices must be 0 or positive.")
        envs.check_env_id(self.env)
        if self.eval_env_params:
            _, env_params = envs.make(self.env)
            envs.override_params(env_params, self.eval_env_params)
        plan_layout(self)  # raises if no device layout fits


# Settings for continuous-action envs, tried on Pendulum-v1 (see README and RESULTS.md).
CONTINUOUS_DEFAULTS = dict(num_steps=200, gamma=0.95, ent_coef=0.0, normalize_obs=True, learning_rate=1e-3)


def default_config(env: str = "CartPole-v1", **overrides) -> Config:
    """The starting Config for `env`: the CartPole-tuned defaults if its actions are discrete,
    CONTINUOUS_DEFAULTS if they are continuous; `overrides` win over both."""
    base = {}
    if env in envs.registered_envs() and not envs.is_discrete(*envs.make(env)):
        base = dict(CONTINUOUS_DEFAULTS)
    return Config(**{**base, **overrides, "env": env})


def plan_layout(config: Config) -> devices.Layout:
    """The (seed, data) device mesh for this config (see common.devices.plan_layout)."""
    sizes = {"--num-envs": config.num_envs, "the minibatch size (num_envs * num_steps / num_minibatches)": config.minibatch_size}
    return devices.plan_layout(config.num_seeds, sizes, config.data_parallel, config.num_devices)


# ---------------------------------------------------------------------------------------------
# Network: a policy MLP only (no critic); a state-independent log-std for continuous actions
# ---------------------------------------------------------------------------------------------
def init_params(key: jax.Array, config: Config, obs_dim: int, vec_env: envs.VecEnv) -> dict:
    out_dim = vec_env.num_actions if vec_env.discrete else math.prod(vec_env.action_shape)
    params = {"actor": mlp_init(key, (obs_dim, *config.actor_hidden, out_dim), output_gain=0.01)}
    if not vec_env.discrete:
        params["log_std"] = jnp.zeros(out_dim)
    return params


def policy(params: dict, obs: jax.Array, activation: str) -> distrax.Distribution:
    """obs [..., obs_dim] -> action distribution with batch shape [...]; log-std clamped to [-5, 2]."""
    out = mlp_apply(params["actor"], obs, activation)
    if "log_std" not in params:
        return distrax.Categorical(logits=out)
    return distrax.MultivariateNormalDiag(out, jnp.exp(jnp.clip(params["log_std"], -5.0, 2.0)))


# ---------------------------------------------------------------------------------------------
# The math: pure functions, tested against plain loops and their defining properties in tests/test_grpo.py
# ---------------------------------------------------------------------------------------------
def step_returns(rewards: jax.Array, done: jax.Array, gamma: float) -> jax.Array:
    """Discounted return-to-go inside the window, [T, N] -> [T, N]:
        R_t = r_t + gamma (1 - done_t) R_{t+1},  R_T = 0
    restarted at every episode end and never bootstrapped (there is no critic)."""
    not_done = 1.0 - done.astype(rewards.dtype)

    def backward(next_return, step):
        reward, nd = step
        ret = reward + gamma * nd * next_return
        return ret, ret

    _, returns = jax.lax.scan(backward, jnp.zeros_like(rewards[0]), (rewards, not_done), reverse=True)
    return returns


def first_episode_mask(done: jax.Array) -> jax.Array:
    """1.0 for each environment's steps up to and including its first episode end, 0 after; [T, N]."""
    done = done.astype(jnp.float32)
    ended_before = jnp.cumsum(done, axis=0) - done  # episode ends strictly before t
    return (ended_before == 0).astype(jnp.float32)


def group_advantages(returns: jax.Array, mask: jax.Array, group_size: int, eps: float = 1e-8) -> jax.Array:
    """Per time step, normalise the returns across each group's alive members; [T, N] -> [T, N].

    Environment i belongs to group i // group_size. With n alive members (mask 1) at step t,
        A_{i,t} = mask_{i,t} (R_{i,t} - mean) / (std + eps)
    where mean and the population std run over those members; 0 where mask is 0 (and,
    since the std is 0, wherever one member is alive alone).
    """
    T, N = returns.shape
    r = returns.reshape(T, N // group_size, group_size)
    m = mask.reshape(T, N // group_size, group_size)
    count = jnp.maximum(m.sum(-1, keepdims=True), 1.0)
    mean = (m * r).sum(-1, keepdims=True) / count
    var = (m * (r - mean) ** 2).sum(-1, keepdims=True) / count
    return (m * (r - mean) / (jnp.sqrt(var) + eps)).reshape(T, N)


def reference_kl(log_prob: jax.Array, ref_log_prob: jax.Array) -> jax.Array:
    """Per-sample KL(pi || pi_ref) estimate exp(x) - x - 1 with x = log pi_ref - log pi: >= 0, 0 iff equal."""
    x = ref_log_prob - log_prob
    return jnp.exp(x) - x - 1.0


class Batch(NamedTuple):
    """Training samples, leaves [B, ...] (flattened [T * N])."""

    obs: jax.Array  # observations as the policy saw them (normalised if enabled)
    action: jax.Array
    log_prob: jax.Array  # log pi_old(action | obs)
    ref_log_prob: jax.Array  # log pi_ref(action | obs), the initial policy (0 when kl_coef is 0)
    advantage: jax.Array
    mask: jax.Array  # 1.0 for steps that train, 0.0 for masked ones


def grpo_loss(params: dict, batch: Batch, config: Config, weight: jax.Array) -> tuple[jax.Array, dict]:
    """Masked clipped surrogate + kl_coef * KL to the reference - ent_coef * entropy.

    Each term is sum(mask * term) * weight; the caller sets weight = 1 / (valid steps in the
    whole minibatch) (times the number of data shards, whose gradients are averaged), so
    masked steps contribute nothing and the denominator counts valid steps only.
    """
    dist = policy(params, batch.obs, config.activation)
    log_prob = dist.log_prob(batch.action)
    ratio = jnp.exp(log_prob - batch.log_prob)
    clipped = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
    surrogate = jnp.minimum(ratio * batch.advantage, clipped * batch.advantage)
    masked_mean = lambda x: (batch.mask * x).sum() * weight
    policy_loss = -masked_mean(surrogate)
    entropy = masked_mean(dist.entropy())
    total = policy_loss - config.ent_coef * entropy
    stats = {"policy_loss": policy_loss, "entropy": entropy,
             "clip_fraction": masked_mean((jnp.abs(ratio - 1.0) > config.clip_eps).astype(jnp.float32))}
    if config.kl_coef > 0:
        kl = masked_mean(reference_kl(log_prob, batch.ref_log_prob))
        total = total + config.kl_coef * kl
        stats["reference_kl"] = kl
    return total, stats


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
def make_optimizer(config: Config) -> optax.GradientTransformation:
    """Global-norm clipping then Adam's direction; learn() applies the (annealed) step size."""
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.scale_by_adam(eps=1e-5))


def minibatch_gradient(params: dict, minibatch: Batch, config: Config, shards: int = 1) -> tuple[dict, dict]:
    """Gradient of grpo_loss over one whole minibatch (leaves [B, ...]); with `shards` > 1
    each data shard differentiates its slice and the mean over shards is the whole one's."""
    weight = shards / jnp.maximum(minibatch.mask.sum(), 1.0)  # valid steps of the whole minibatch
    local = jax.tree.map(lambda x: devices.shard_slice(x, shards), minibatch)
    varying = jax.lax.pcast(params, devices.DATA, to="varying") if shards > 1 else params
    (_, stats), grads = jax.value_and_grad(grpo_loss, has_aux=True)(varying, local, config, weight)
    return devices.data_mean((grads, stats), shards)


def learn(params, opt_state, batch: Batch, key, learning_rate, config: Config, optimizer, shards: int = 1):
    """num_epochs epochs of num_minibatches Adam steps over the flattened rollout [B, ...]."""

    def minibatch_step(carry, minibatch):
        params, opt_state = carry
        grads, stats = minibatch_gradient(params, minibatch, config, shards)
        updates, opt_state = optimizer.update(grads, opt_state)
        params = jax.tree.map(lambda p, u: p - learning_rate * u, params, updates)
        return (params, opt_state), stats

    def epoch(carry, epoch_key):
        order = jax.random.permutation(epoch_key, config.batch_size)
        minibatches = jax.tree.map(
            lambda x: x[order].reshape((config.num_minibatches, config.minibatch_size) + x.shape[1:]), batch
        )
        return jax.lax.scan(minibatch_step, carry, minibatches)

    (params, opt_state), stats = jax.lax.scan(epoch, (params, opt_state), jax.random.split(key, config.num_epochs))
    return params, opt_state, stats


def reset_groups(vec_env: envs.VecEnv, key: jax.Array, config: Config):
    """Reset every environment -> (obs [N, *obs], state). With shared_group_reset the
    members of a group get one reset key, so they start from the same state."""
    env_keys = None
    if config.shared_group_reset:
        num_groups = config.num_envs // config.group_size
        env_keys = jnp.repeat(jax.random.split(key, num_groups), config.group_size, axis=0)
    return vec_env.reset(key, env_keys)


class Transition(NamedTuple):
    """One rollout, leaves [T, N, ...]."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    info: envs.StepInfo


class TrainState(NamedTuple):
    params: dict
    ref_params: dict  # the initial policy, frozen (the KL penalty's reference)
    opt_state: optax.OptState
    env_state: envs.VecEnvState
    obs: jax.Array  # [N, *obs] raw observations the next rollout starts from (without reset_every_rollout)
    obs_stats: envs.RunningStats
    key: jax.Array


def make_train(config: Config, log_fn=None):
    """Build `train(keys[num_seeds]) -> {"params", "obs_stats", "metrics"}`, one jitted program.

    metrics: dict of [num_seeds, num_updates] arrays (NaN where a value does not exist).
    With data parallelism each device steps num_envs / D environments; the rollout is
    gathered before the group advantages (groups may span devices), each device takes 1/D
    of every minibatch, and gradients are averaged.
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

    def observe(stats, obs):  # what the policy sees
        obs = flatten_obs(obs)
        return envs.normalize(stats, obs) if config.normalize_obs else obs

    def update(state: TrainState, update_index: jax.Array, seed_index: jax.Array):
        params = state.params
        key, k_reset, k_rollout, k_epochs, k_eval = jax.random.split(state.key, 5)
        obs, env_state = state.obs, state.env_state
        if config.reset_every_rollout:
            obs, env_state = reset_groups(vec_env, k_reset, config)

        # 1. Rollout: num_steps steps of num_envs envs with the current policy.
        def env_step(carry, step_key):
            env_state, obs = carry
            k_action, k_env = jax.random.split(step_key)
            policy_obs = observe(state.obs_stats, obs)
            action, log_prob = jax.vmap(lambda k, o: policy(params, o, act).sample_and_log_prob(seed=k))(
                devices.shard_split(k_action, config.num_envs, shards), policy_obs
            )
            next_obs, env_state, info = vec_env.step(k_env, env_state, action)
            return (env_state, next_obs), Transition(policy_obs, action, log_prob, info)

        (env_state, next_obs), traj = jax.lax.scan(
            env_step, (env_state, obs), jax.random.split(k_rollout, config.num_steps)
        )
        info = traj.info
        obs_stats = state.obs_stats
        if config.normalize_obs:  # new statistics take effect from the next rollout
            stats_axis = devices.DATA if shards > 1 else None
            obs_stats = envs.update_stats(obs_stats, flatten_obs(info.final_obs), stats_axis)

        # 2. Group advantages over the whole batch (groups may span data shards).
        done = info.terminated | info.truncated
        ref_log_prob = jnp.zeros_like(traj.log_prob)
        if config.kl_coef > 0:
            ref_log_prob = policy(state.ref_params, traj.obs, act).log_prob(traj.action)
        obs_all, action, log_prob, ref_log_prob, rewards, done = devices.gather_envs(
            (traj.obs, traj.action, traj.log_prob, ref_log_prob, info.reward, done), shards
        )
        returns = step_returns(rewards, done, config.gamma)
        mask = first_episode_mask(done) if config.truncate_at_first_done else jnp.ones_like(returns)
        advantages = group_advantages(returns, mask, config.group_size, config.eps)
        batch = Batch(obs_all, action, log_prob, ref_log_prob, advantages, mask)
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
        metrics["valid_fraction"] = mask.mean()
        metrics["learning_rate"] = jnp.asarray(learning_rate, jnp.float32)
        if config.eval_every:
            due = ((update_index + 1) % config.eval_every == 0) | (update_index == num_updates - 1)
            act_fn = lambda obs: policy(params, observe(obs_stats, obs), act).mode()
            metrics["eval_return"] = jax.lax.cond(
                due, lambda: envs.evaluate(eval_env, act_fn, k_eval), lambda: jnp.float32(jnp.nan)
            )
        emit_metrics(log_fn, seed_index, update_index, num_updates, config.log_every, metrics)
        new_state = TrainState(params, state.ref_params, opt_state, env_state, next_obs, obs_stats, key)
        return new_state, metrics

    def train_one(key: jax.Array, seed_index: jax.Array):
        k_params, k_reset, key = jax.random.split(key, 3)
        params = init_params(k_params, config, obs_dim, vec_env)
        obs, env_state = reset_groups(vec_env, k_reset, config)
        state = TrainState(
            params=params,
            ref_params=params,
            opt_state=optimizer.init(params),
            env_state=env_state,
            obs=obs,
            obs_stats=envs.init_stats((obs_dim,)),
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
        "grpo", config, make_train, plan_layout(config), config.batch_size, config.num_updates,
        saved=lambda out: {"params": out["params"], "obs_stats": out["obs_stats"]._asdict()},
    )


def cli(argv: list[str] | None = None) -> Config:
    """Parse flags; the --env given picks the defaults (see default_config) shown by --help."""
    return parse_config(Config, default_config, __doc__, argv)


if __name__ == "__main__":
    main(cli())
