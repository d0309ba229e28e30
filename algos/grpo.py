"""GRPO: critic-free clipped policy optimisation with group-relative advantages.

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
from scanrl.common.nets import (actions_for, cnn_apply, cnn_init, entropy_of, mask_logits,
                                mlp_apply, mlp_init, pre_tanh_normal, use_cnn)
from scanrl.common.onpolicy import learn, lr_schedule, make_optimizer

import distrax
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import optax


# ---------------------------------------------------------------------------------------------
# Config: hyperparameters (the command line adds its run settings as flags of the same kind)
# ---------------------------------------------------------------------------------------------
ALGO = "grpo"  # its name in the suites' recipe tables: a copy of this file keeps the recipes
# the run settings it starts from (the command line's: common/harness/runconfig.py), by preset
# (None: every env)
RUN_DEFAULTS = {None: dict(eval_every=10, log_every=5)}


@dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"
    """a gymnax id (CartPole-v1) or SUITE/NAME (brax/ant, navix/Navix-Empty-5x5-v0); discrete and
    continuous (Box) action spaces both work."""
    total_timesteps: int = 3_000_000
    """environment steps per seed (rounded down to whole updates; masked steps count too; 0: until a
    --stop-* condition holds, with learning-rate annealing off)."""
    num_envs: int = 64
    """parallel environments per seed: num_envs / group_size groups."""
    group_size: int = 4
    """neighbouring environments whose returns form one baseline (at least 2; must divide
    num_envs)."""
    num_steps: int = 512
    """rollout window per environment; make it at least the episode limit so first episodes
    finish."""
    num_epochs: int = 4
    """passes over each rollout (advantages are computed once per rollout)."""
    num_minibatches: int = 4
    """minibatches per epoch; must divide num_envs * num_steps."""
    learning_rate: float = 3e-4
    """Adam step size."""
    adam_eps: float = 1e-5
    """Adam's epsilon (CleanRL's and PureJaxRL's 1e-5; Brax's trainers use optax's 1e-8)."""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the run."""
    gamma: float = 0.99
    """discount of the returns-to-go inside the window."""
    clip_eps: float = 0.2
    """ratio clip range of the surrogate objective."""
    target_kl: float | None = None
    """stop the rest of an update's epochs once a minibatch's approx KL exceeds this (None: off)."""
    ent_coef: float = 0.01
    """entropy bonus weight."""
    kl_coef: float = 0.0
    """weight of the KL penalty towards the initial (reference) policy; 0: none (EmbodiChain's
    CartPole setting)."""
    eps: float = 1e-8
    """added to the group std when normalising."""
    reset_every_rollout: bool = True
    """reset every environment at the start of every rollout."""
    truncate_at_first_done: bool = True
    """train only on each environment's steps up to and including its first episode end."""
    shared_group_reset: bool = False
    """every member of a group starts each rollout from the same initial state
    (off: EmbodiChain)."""
    max_grad_norm: float = 0.5
    """clip the global gradient norm to this (0: no clipping)."""
    normalize_obs: bool = False
    """normalise observations by running mean/std (statistics frozen during each rollout)."""
    actor_hidden: tuple[int, ...] = (64, 64)
    """hidden layer sizes of the policy MLP."""
    activation: Literal["tanh", "relu", "elu", "swish"] = "tanh"
    """hidden-layer activation."""
    torso: Literal["auto", "mlp", "cnn"] = "auto"
    """cnn: 3x3 convolutions read image observations [H, W, C] before the policy MLP; mlp: flatten
    them; auto: cnn for images."""
    conv_channels: tuple[int, ...] = (16,)
    """output channels of each convolution of the cnn torso."""
    action_dist: Literal["gaussian", "tanh_normal"] = "gaussian"
    """continuous (Box) actions only. gaussian: a normal with a state-independent log-std, its
    samples clipped to the env's bounds; tanh_normal: Brax PPO's default, a normal with a
    state-dependent std (softplus + min_std) squashed by tanh (Haarnoja et al. 2018) and rescaled
    to the bounds."""
    min_std: float = 0.001
    """tanh_normal: the smallest standard deviation (before tanh) the policy can reach."""

    batch_size = property(lambda self: self.num_envs * self.num_steps)
    minibatch_size = property(lambda self: self.batch_size // self.num_minibatches)
    num_updates = property(lambda self: algorithm.updates_for(self, self.batch_size))

    def __post_init__(self):
        algorithm.check_values(
            self, positive=("num_envs", "num_steps", "num_epochs", "num_minibatches",
                            "learning_rate", "eps", "target_kl", "adam_eps", "min_std"),
            nonnegative=("kl_coef", "ent_coef", "max_grad_norm"),
            within={"gamma": "(0, 1]", "clip_eps": "(0, 1)"},
        )
        if self.group_size < 2:
            raise ValueError("--group-size must be at least 2 (a group of one has no baseline), "
                             f"got {self.group_size}.")
        if self.num_envs % self.group_size:
            raise ValueError(f"--num-envs {self.num_envs} is not divisible by --group-size "
                             f"{self.group_size}; groups are blocks of neighbouring environments.")
        if self.batch_size % self.num_minibatches:
            raise ValueError(f"num_envs * num_steps = {self.batch_size} is not divisible by "
                             f"--num-minibatches {self.num_minibatches}; pick a divisor of "
                             f"{self.batch_size}.")
        algorithm.check_budget(self, self.batch_size, "rollout")


# Presets: continuous-action envs, tried on Pendulum-v1 (README; benchmarks/HISTORY.md,
# "Learning results").
PRESETS = {
    "continuous": dict(num_steps=200, gamma=0.95, ent_coef=0.0, normalize_obs=True,
                       learning_rate=1e-3),
    # MinAtar (10x10xC frames): the conv torso; 128-step windows that carry on without resets and
    # train on every step (with 512-step reset windows, 1e6 steps were 30 updates and nothing
    # learned; a short reset window would only ever train an episode's opening); window and rate
    # by sweep (benchmarks/HISTORY.md, 2026-11-24)
    "minatar": dict(total_timesteps=2_000_000, num_steps=128, reset_every_rollout=False,
                    truncate_at_first_done=False, learning_rate=6e-3, activation="relu",
                    actor_hidden=(64,)),
    # Catch's episodes are 9 steps: a 512-step window keeps each env's first 9 steps and makes
    # 5e5 steps 15 updates (-0.586); a 16-step window makes them 488 updates (0.992 over 10
    # seeds; benchmarks/RESULTS.md, "The core table's weak cells")
    "Catch-bsuite": dict(num_steps=16),
    # Pendulum: 16 envs (as PPO's continuous preset) make 5e5 steps 156 updates, not 39, with a
    # larger step size; by sweep over num_envs x learning rate, 10 seeds (benchmarks/RESULTS.md,
    # "The core table's weak cells"): -344 at 5e5 steps, where 64 envs at 1e-3 gave -1,130. The
    # step size suits this budget: over 3e6 steps it peaks near -630 and falls back to -780
    "Pendulum-v1": dict(total_timesteps=500_000, num_envs=16, learning_rate=3e-3),
}


def default_config(env: str = "CartPole-v1", recipe: str = "auto", **overrides) -> Config:
    """Config for `env`: the CartPole-tuned defaults, or PRESETS["continuous"] for Box actions,
    PRESETS["minatar"] for MinAtar, PRESETS[env] for an env with its own; `overrides`
    (hyperparameters) win. `recipe`: no suite publishes
    one for grpo, so any choice leaves these defaults."""
    # the env ids' registry and the suites' recipe tables load only here
    from scanrl.common.suites import recipes

    return Config(**{**recipes.config_fields(ALGO, env, recipe, PRESETS), **overrides, "env": env})


# ---------------------------------------------------------------------------------------------
# Network: a policy MLP only (no critic), behind a conv torso for image observations; continuous
# actions: a state-independent log-std (gaussian), or a state-dependent std before a tanh
# (tanh_normal: common/nets.py's pre_tanh_normal, to_bounds, entropy_of)
# ---------------------------------------------------------------------------------------------
def init_params(key: jax.Array, config: Config, vec_env: envs.VecEnv) -> dict:
    params, in_dim = {}, vec_env.policy_obs_dim  # a Playground locomotion task's `state` only
    if use_cnn(config.torso, vec_env.obs_shape):
        key, k_torso = jax.random.split(key)
        params["torso"], in_dim = cnn_init(k_torso, vec_env.obs_shape, config.conv_channels)
    tanh_normal = config.action_dist == "tanh_normal" and not vec_env.discrete
    out_dim = (vec_env.num_actions if vec_env.discrete
               else vec_env.action_dim * (2 if tanh_normal else 1))
    params["actor"] = mlp_init(key, (in_dim, *config.actor_hidden, out_dim), output_gain=0.01)
    if not vec_env.discrete and not tanh_normal:
        params["log_std"] = jnp.zeros(out_dim)
    return params


def policy(params: dict, obs: jax.Array, activation: str, action_mask: jax.Array | None = None,
           action_dist: str = "gaussian", min_std: float = 0.001) -> distrax.Distribution:
    """obs [..., obs_dim] or images [..., H, W, C] (read by the conv torso) -> action distribution
    with batch shape [...]; gaussian: log-std clamped to [-5, 2]; action_mask [..., A]: the valid
    discrete actions, where the env has an action mask. tanh_normal: the normal of the pre-tanh
    action u (the actor outputs [loc, raw scale], scale = softplus(raw) + min_std); the env gets
    tanh(u) rescaled (`to_bounds`)."""
    x = cnn_apply(params["torso"], obs, activation) if "torso" in params else obs
    out = mlp_apply(params["actor"], x, activation)
    if action_dist == "tanh_normal":
        return pre_tanh_normal(out, min_std)
    if "log_std" not in params:
        return distrax.Categorical(logits=mask_logits(out, action_mask))
    return distrax.MultivariateNormalDiag(out, jnp.exp(jnp.clip(params["log_std"], -5.0, 2.0)))


# ---------------------------------------------------------------------------------------------
# The math: pure functions, tested against plain loops and their defining properties in
# tests/test_grpo.py
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

    _, returns = jax.lax.scan(backward, jnp.zeros_like(rewards[0]), (rewards, not_done),
                              reverse=True)
    return returns


def first_episode_mask(done: jax.Array) -> jax.Array:
    """1.0 for each environment's steps up to and including its first episode end, 0 after;
    [T, N]."""
    done = done.astype(jnp.float32)
    ended_before = jnp.cumsum(done, axis=0) - done  # episode ends strictly before t
    return (ended_before == 0).astype(jnp.float32)


def group_advantages(returns: jax.Array, mask: jax.Array, group_size: int,
                     eps: float = 1e-8) -> jax.Array:
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


def uses_reference(config: Config) -> bool:
    """Whether the loss needs the reference policy: kl_coef > 0, or kl_coef is a traced sweep
    value (any row may be positive; a row at 0 then adds 0 * KL)."""
    return isinstance(config.kl_coef, jax.Array) or config.kl_coef > 0


def reference_kl(log_prob: jax.Array, ref_log_prob: jax.Array) -> jax.Array:
    """Per-sample KL(pi || pi_ref) estimate exp(x) - x - 1 with x = log pi_ref - log pi:
    >= 0, 0 iff equal."""
    x = ref_log_prob - log_prob
    return jnp.exp(x) - x - 1.0


class Batch(NamedTuple):
    """Training samples, leaves [B, ...] (flattened [T * N])."""

    obs: jax.Array  # observations as the policy saw them (normalised if enabled)
    action: jax.Array  # tanh_normal: the pre-tanh sample u [B, A]
    # log pi_old(action | obs); tanh_normal: of u (the tanh Jacobian cancels in the ratio)
    log_prob: jax.Array
    # log pi_ref(action | obs), the initial policy (0 when kl_coef is 0); tanh_normal: of u
    ref_log_prob: jax.Array
    advantage: jax.Array
    mask: jax.Array  # 1.0 for steps that train, 0.0 for masked ones
    action_mask: jax.Array | None = None  # valid actions [B, A] where the env has an action mask
    noise: jax.Array | None = None  # tanh_normal: standard normal [B, A] for the entropy estimate


def grpo_loss(params: dict, batch: Batch, config: Config,
              weight: jax.Array) -> tuple[jax.Array, dict]:
    """Masked clipped surrogate + kl_coef * KL to the reference - ent_coef * entropy.

    Each term is sum(mask * term) * weight; the caller sets weight = 1 / (valid steps in the
    whole minibatch), so masked steps contribute nothing and the denominator counts valid steps
    only.
    """
    dist = policy(params, batch.obs, config.activation, batch.action_mask, config.action_dist,
                  config.min_std)
    log_prob = dist.log_prob(batch.action)
    log_ratio = log_prob - batch.log_prob
    ratio = jnp.exp(log_ratio)
    clipped = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
    surrogate = jnp.minimum(ratio * batch.advantage, clipped * batch.advantage)
    masked_mean = lambda x: (batch.mask * x).sum() * weight
    policy_loss = -masked_mean(surrogate)
    entropy = masked_mean(entropy_of(dist, batch.noise))  # tanh_normal: a one-sample estimate
    total = policy_loss - config.ent_coef * entropy
    stats = {"policy_loss": policy_loss, "entropy": entropy,
             "clip_fraction": masked_mean(
                 (jnp.abs(ratio - 1.0) > config.clip_eps).astype(jnp.float32)),
             # onpolicy.approx_kl over valid steps
             "approx_kl": masked_mean(jnp.exp(log_ratio) - 1.0 - log_ratio)}
    if uses_reference(config):
        kl = masked_mean(reference_kl(log_prob, batch.ref_log_prob))
        total = total + config.kl_coef * kl
        stats["reference_kl"] = kl
    return total, stats


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
def minibatch_gradient(params: dict, minibatch: Batch, config: Config) -> tuple[dict, dict]:
    """Gradient of grpo_loss over one minibatch (leaves [B, ...]) and the loss stats."""
    weight = 1.0 / jnp.maximum(minibatch.mask.sum(), 1.0)  # valid steps of the minibatch
    (_, stats), grads = jax.value_and_grad(grpo_loss, has_aux=True)(
        params, minibatch, config, weight)
    return grads, stats


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
    action_mask: jax.Array | None = None  # valid actions [T, N, A] (None: no action mask)
    noise: jax.Array | None = None  # tanh_normal: the entropy estimate's noise [T, N, A]


class TrainState(NamedTuple):
    params: dict
    ref_params: dict  # the initial policy, frozen (the KL penalty's reference)
    opt_state: optax.OptState
    env_state: envs.VecEnvState
    # [N, *obs] raw observations the next rollout starts from (without reset_every_rollout)
    obs: jax.Array
    obs_stats: envs.RunningStats
    key: jax.Array


def make_algorithm(config: Config, env=None, env_params=None) -> algorithm.Algorithm:
    """GRPO's pieces for one seed (common/harness/loop.py turns them into programs). `env`: a
    gymnax-style env object to train on instead of config.env."""
    env, env_params = algorithm.resolve_env(config.env, env, env_params)
    vec_env = envs.VecEnv(env, env_params, config.num_envs)
    if vec_env.num_agents is not None:  # a group's episodes are one agent's, from one start
        raise ValueError(f"GRPO trains one agent and --env {config.env} has "
                         f"{vec_env.num_agents}; ppo, ppo_rnn, impala, pqn and pqn_rnn "
                         "train multi-agent envs.")
    optimizer = make_optimizer(config.max_grad_norm, config.adam_eps)
    act_fn = config.activation
    # before compiling: ValueError for tanh_normal without finite bounds, cnn without images
    actions = actions_for(config.action_dist, vec_env, config.env)
    image = use_cnn(config.torso, vec_env.obs_shape)
    dist_of = lambda params, obs, mask=None: policy(params, obs, act_fn, mask, config.action_dist,
                                                    config.min_std)
    # a run without a budget (--total-timesteps 0) has no end to anneal to
    schedule = lr_schedule(config.learning_rate, config.num_updates,
                           anneal=config.anneal_lr and config.total_timesteps > 0)

    def observe(stats, obs):  # what the policy sees: flat vectors (a `state` part), or images
        stats = stats if config.normalize_obs else None
        return vec_env.observe(obs, stats, image, policy_part=True)

    def init(key: jax.Array) -> TrainState:
        k_params, k_reset, key = jax.random.split(key, 3)
        params = init_params(k_params, config, vec_env)
        obs, env_state = reset_groups(vec_env, k_reset, config)
        return TrainState(params=params, ref_params=params, opt_state=optimizer.init(params),
                          env_state=env_state, obs=obs,
                          obs_stats=envs.init_stats((vec_env.obs_dim,)), key=key)

    def update(state: TrainState, update_index: jax.Array) -> tuple[TrainState, dict]:
        params = state.params
        key, k_reset, k_rollout, k_epochs = jax.random.split(state.key, 4)
        obs, env_state = state.obs, state.env_state
        if config.reset_every_rollout:
            obs, env_state = reset_groups(vec_env, k_reset, config)

        # 1. Rollout: num_steps steps of num_envs envs with the current policy (tanh_normal: the
        #    stored action is the pre-tanh sample u, the env gets tanh(u) rescaled; nets.Actions)
        def env_step(carry, step_key):
            env_state, obs = carry
            k_action, k_env, k_noise = actions.step_keys(step_key)
            policy_obs, action_mask = observe(state.obs_stats, obs), vec_env.action_mask(env_state)
            action, log_prob = jax.vmap(lambda k, o, m: actions.sample(dist_of(params, o, m), k))(
                jax.random.split(k_action, config.num_envs), policy_obs, action_mask)
            next_obs, env_state, info = vec_env.step(k_env, env_state, actions.to_env(action))
            return (env_state, next_obs), Transition(obs=policy_obs, action=action,
                                                     log_prob=log_prob, action_mask=action_mask,
                                                     info=info,
                                                     noise=actions.noise(k_noise, action.shape))

        (env_state, next_obs), traj = jax.lax.scan(env_step, (env_state, obs),
                                                   jax.random.split(k_rollout, config.num_steps))
        info = traj.info
        obs_stats = state.obs_stats
        if config.normalize_obs:  # new statistics take effect from the next rollout
            obs_stats = envs.update_stats(obs_stats, vec_env.flat_obs(info.final_obs))

        # 2. Group advantages over the whole batch.
        done = info.terminated | info.truncated
        ref_log_prob = jnp.zeros_like(traj.log_prob)
        if uses_reference(config):
            ref_log_prob = dist_of(state.ref_params, traj.obs,
                                   traj.action_mask).log_prob(traj.action)
        returns = step_returns(info.reward, done, config.gamma)
        mask = first_episode_mask(done) if config.truncate_at_first_done else jnp.ones_like(returns)
        advantages = group_advantages(returns, mask, config.group_size, config.eps)
        batch = Batch(obs=traj.obs, action=traj.action, log_prob=traj.log_prob,
                      ref_log_prob=ref_log_prob, advantage=advantages, mask=mask,
                      action_mask=traj.action_mask, noise=traj.noise)
        flat = jax.tree.map(lambda x: x.reshape((config.batch_size,) + x.shape[2:]), batch)

        # 3. num_epochs epochs of num_minibatches Adam steps at this update's learning rate.
        learning_rate = schedule(update_index)
        params, opt_state, loss_stats = learn(
            params, state.opt_state, flat, k_epochs, partial(minibatch_gradient, config=config),
            optimizer, learning_rate, config.num_epochs, config.num_minibatches,
            target_kl=config.target_kl)

        metrics = {k: v.mean() for k, v in loss_stats.items()}
        metrics.update(envs.episode_metrics(info), valid_fraction=mask.mean(),
                       learning_rate=learning_rate)
        return TrainState(params=params, ref_params=state.ref_params, opt_state=opt_state,
                          env_state=env_state, obs=next_obs, obs_stats=obs_stats, key=key), metrics

    def act(policy_params: dict, obs: jax.Array, key: jax.Array, deterministic: bool = False,
            mask=None) -> jax.Array:
        """obs [N, *obs] (mask [N, A] or None) -> actions [N, ...]: the mode of the policy, or a
        sample (tanh_normal: tanh of the pre-tanh normal's mode or sample, rescaled to the
        bounds)."""
        dist = dist_of(policy_params["params"], observe(policy_params["obs_stats"], obs), mask)
        return actions.act(dist, key, deterministic)

    return algorithm.Algorithm(
        init=init, update=update, act=act,
        policy_params=lambda state: {"params": state.params, "obs_stats": state.obs_stats},
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
