"""IMPALA: synchronous actor-critic with V-trace off-policy correction.

Each update rolls out `num_steps` x `num_envs` steps with the behaviour policy (the current
parameters, or those of `actor_lag` updates ago), then runs `num_epochs` epochs over
minibatches of whole trajectories, recomputing V-trace targets with the current value
network in every minibatch. One epoch, one minibatch and no lag is A2C with lambda-returns.
Paper: Espeholt et al. 2018 (arXiv:1802.01561).

    python algos/impala.py --env CartPole-v1 --num-seeds 8
    python algos/impala.py --env CartPole-v1 --actor-lag 4     # behaviour policy 4 updates old
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
from scanrl.common.nets import (actions_for, cnn_apply, cnn_init, entropy_of, head_distribution,
                                mlp_apply, mlp_init, use_cnn)
from scanrl.common.onpolicy import learn, lr_schedule, make_optimizer

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import optax


# ---------------------------------------------------------------------------------------------
# Config: hyperparameters (the command line adds its run settings as flags of the same kind)
# ---------------------------------------------------------------------------------------------
ALGO = "impala"  # its name in the suites' recipe tables: a copy of this file keeps the recipes
# the run settings it starts from (the command line's: common/harness/runconfig.py), by preset
# (None: every env)
RUN_DEFAULTS = {None: dict(log_every=20), "continuous": dict(eval_every=25)}


@dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"
    """a gymnax id (CartPole-v1) or SUITE/NAME (brax/ant, navix/Navix-Empty-5x5-v0); discrete and
    continuous (Box) action spaces both work."""
    total_timesteps: int = 1_000_000
    """environment steps per seed (rounded down to whole updates; 0: until a --stop-* condition
    holds, with learning-rate annealing off)."""
    num_envs: int = 64
    """parallel environments per seed (trajectories per rollout)."""
    num_steps: int = 64
    """trajectory length T: steps per environment in each rollout."""
    num_epochs: int = 2
    """passes over each rollout; later passes are off-policy and V-trace corrects them."""
    num_minibatches: int = 4
    """minibatches of whole trajectories per epoch (split along environments); must divide
    num_envs."""
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
    """the behaviour policy uses the parameters of this many updates ago (asynchronous IMPALA's
    lag)."""
    normalize_advantages: bool = False
    """normalise the policy-gradient advantages to zero mean, unit std within each minibatch."""
    ent_coef: float = 0.01
    """entropy bonus weight."""
    vf_coef: float = 0.5
    """value loss weight (value loss = 0.5 * mean squared error to the V-trace targets)."""
    max_grad_norm: float = 0.5
    """clip the global gradient norm to this (0: no clipping)."""
    adam_eps: float = 1e-5
    """Adam's epsilon (CleanRL's and PureJaxRL's 1e-5)."""
    normalize_obs: bool = False
    """normalise observations by running mean/std (statistics frozen during each rollout)."""
    normalize_reward: bool = True
    """scale rewards by the running std of the discounted return; keeps the advantages O(1), so
    ent_coef means the same whatever the reward scale (raw CartPole returns made 0.01 too
    weak)."""
    actor_hidden: tuple[int, ...] = (64, 64)
    """hidden layer sizes of the policy MLP."""
    critic_hidden: tuple[int, ...] = (64, 64)
    """hidden layer sizes of the value MLP."""
    activation: Literal["tanh", "relu", "elu", "swish"] = "tanh"
    """hidden-layer activation."""
    torso: Literal["auto", "mlp", "cnn"] = "auto"
    """cnn: 3x3 convolutions read image observations [H, W, C], shared by the policy and value MLPs;
    mlp: flatten them; auto: cnn for images."""
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
    num_updates = property(lambda self: algorithm.updates_for(self, self.batch_size))

    def __post_init__(self):
        algorithm.check_values(
            self, positive=("num_envs", "num_steps", "num_epochs", "num_minibatches",
                            "learning_rate", "adam_eps", "clip_rho_threshold", "clip_c_threshold",
                            "clip_pg_rho_threshold", "min_std"),
            nonnegative=("actor_lag", "max_grad_norm", "ent_coef", "vf_coef"),
            within={"gamma": "(0, 1]", "vtrace_lambda": "[0, 1]"},
        )
        if self.num_envs % self.num_minibatches:
            raise ValueError(f"--num-envs {self.num_envs} is not divisible by --num-minibatches "
                             f"{self.num_minibatches}; minibatches are whole trajectories, so pick "
                             "a divisor of num_envs.")
        algorithm.check_budget(self, self.batch_size, "rollout")


# Presets: continuous-action envs, tried on Pendulum-v1 (2e6 steps): 16 envs give twice the
# updates of 32, so fewer seeds sit on the -1000 plateau; still 1 seed in 16 never leaves it.
PRESETS = {
    "continuous": dict(total_timesteps=2_000_000, num_envs=16, num_steps=64, num_epochs=2,
                       num_minibatches=4, learning_rate=1e-3, gamma=0.95, ent_coef=0.0,
                       normalize_obs=True, normalize_reward=True, normalize_advantages=True),
    # MinAtar (10x10xC frames): the conv torso; learning rate by sweep (benchmarks/HISTORY.md,
    # 2026-11-24, 13:19-13:46)
    "minatar": dict(total_timesteps=2_000_000, learning_rate=4e-3, activation="relu",
                    actor_hidden=(64,), critic_hidden=(64,)),
}


def default_config(env: str = "CartPole-v1", recipe: str = "auto", **overrides) -> Config:
    """Config for `env`: the CartPole-tuned defaults, or PRESETS["continuous"] for Box actions,
    PRESETS["minatar"] for MinAtar; `overrides` (hyperparameters) win. `recipe`: no suite publishes
    one for impala, so any choice leaves these defaults."""
    # the env ids' registry and the suites' recipe tables load only here
    from scanrl.common.suites import recipes

    return Config(**{**recipes.config_fields(ALGO, env, recipe, PRESETS), **overrides, "env": env})


# ---------------------------------------------------------------------------------------------
# Network: separate policy and value MLPs behind one shared conv torso for image observations
# (the convolutions are most of the compute, as in CleanRL's Atari PPO and IMPALA's own
# network); continuous actions: a state-independent log-std (gaussian), or a state-dependent
# std before a tanh (tanh_normal). Both read the observation's policy part
# (`VecEnv.observe(policy_part=True)`, make_algorithm's `observe`).
# ---------------------------------------------------------------------------------------------
def init_params(key: jax.Array, config: Config, vec_env: envs.VecEnv) -> dict:
    """Parameters {"torso" (images only), "actor", "critic", "log_std" (gaussian Box actions
    only)}. The actor maps the features [F] to logits [A] (discrete), means [A] (gaussian) or
    [loc, raw scale] [2A] (tanh_normal), output gain 0.01; the critic maps them to V [1], output
    gain 1. F: the conv torso's output, or the policy part's size vec_env.policy_obs_dim."""
    params = {}
    if use_cnn(config.torso, vec_env.obs_shape):
        key, k_torso = jax.random.split(key)
        params["torso"], in_dim = cnn_init(k_torso, vec_env.obs_shape, config.conv_channels)
    else:
        in_dim = vec_env.policy_obs_dim
    k_actor, k_critic = jax.random.split(key)
    tanh_normal = config.action_dist == "tanh_normal" and not vec_env.discrete
    out_dim = vec_env.num_actions if vec_env.discrete else vec_env.action_dim * (1 + tanh_normal)
    params["actor"] = mlp_init(k_actor, (in_dim, *config.actor_hidden, out_dim), output_gain=0.01)
    params["critic"] = mlp_init(k_critic, (in_dim, *config.critic_hidden, 1), output_gain=1.0)
    if not vec_env.discrete and not tanh_normal:
        params["log_std"] = jnp.zeros(out_dim)
    return params


def features(params: dict, obs: jax.Array, activation: str) -> jax.Array:
    """What both heads read [..., F]: the conv torso's output of images [..., H, W, C], or the
    flat policy part [..., F] as given."""
    return cnn_apply(params["torso"], obs, activation) if "torso" in params else obs


def policy(params: dict, obs: jax.Array, activation: str, action_mask: jax.Array | None = None,
           action_dist: str = "gaussian", min_std: float = 0.001):
    """obs [..., F] or [..., H, W, C] -> the action distribution, batch shape [...]
    (nets.head_distribution); action_mask [..., A]: the valid discrete actions, where the env
    has one."""
    out = mlp_apply(params["actor"], features(params, obs, activation), activation)
    return head_distribution(out, params, action_mask, action_dist, min_std)


def value(params: dict, obs: jax.Array, activation: str) -> jax.Array:
    """obs [..., F] or [..., H, W, C] -> V(obs) [...]."""
    return mlp_apply(params["critic"], features(params, obs, activation), activation)[..., 0]


# The math: pure functions, tested against rlax, GAE and a plain-Python loop in
# tests/test_impala.py
# ---------------------------------------------------------------------------------------------
def vtrace(values, next_values, rewards, rhos, terminated, done, gamma, lambda_=1.0,
           clip_rho_threshold=1.0, clip_c_threshold=1.0) -> jax.Array:
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
    deltas = (jnp.minimum(clip_rho_threshold, rhos)
              * (rewards + gamma * not_terminated * next_values - values))
    traces = lambda_ * jnp.minimum(clip_c_threshold, rhos)

    def backward(next_error, step):
        delta, trace, nd = step
        error = delta + gamma * nd * trace * next_error
        return error, error

    _, errors = jax.lax.scan(backward, jnp.zeros_like(values[0]), (deltas, traces, not_done),
                             reverse=True)
    return errors + values


def pg_advantage(vs, values, next_values, rewards, terminated, done, gamma, lambda_=1.0,
                 mode="official") -> jax.Array:
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
    # the observation each step reached (final one before a reset), same normalisation
    next_obs: jax.Array
    action: jax.Array  # tanh_normal: the pre-tanh sample u [T, B, A]
    # log mu(action | obs), the behaviour policy; tanh_normal: of u (the Jacobian cancels in rho)
    log_prob: jax.Array
    reward: jax.Array  # scaled if normalize_reward
    terminated: jax.Array
    done: jax.Array
    action_mask: jax.Array | None = None  # valid actions [T, B, A] where the env has an action mask
    # tanh_normal: standard normal [T, B, A] for the entropy estimate
    noise: jax.Array | None = None


def impala_loss(params: dict, batch: Batch, config: Config) -> tuple[jax.Array, dict]:
    """Policy gradient with the clipped-rho V-trace advantage + vf_coef * value loss
    - ent_coef * entropy.

    V-trace targets are recomputed from the current value network and held fixed (no
    gradient flows through targets or importance weights). With normalize_advantages the
    advantage statistics cover the whole minibatch.
    """
    act = config.activation
    dist = policy(params, batch.obs, act, batch.action_mask, config.action_dist, config.min_std)
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
        mean, mean_sq = advantage.mean(), (advantage**2).mean()
        advantage = (advantage - mean) / (jnp.sqrt(jnp.maximum(mean_sq - mean**2, 0.0)) + 1e-8)
    policy_loss = -(advantage * log_prob).mean()
    value_loss = 0.5 * ((values - vs) ** 2).mean()
    entropy = entropy_of(dist, batch.noise).mean()  # tanh_normal: a one-sample estimate
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
def minibatch_gradient(params: dict, minibatch: Batch, config: Config) -> tuple[dict, dict]:
    """Gradient of impala_loss over one minibatch of whole trajectories and the loss stats. learn
    hands them environment-major (leaves [b, T, ...], so that it shuffles environments and keeps
    time order, as V-trace needs); the loss reads them time-major [T, b, ...]."""
    minibatch = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), minibatch)
    (_, stats), grads = jax.value_and_grad(impala_loss, has_aux=True)(params, minibatch, config)
    return grads, stats


class Transition(NamedTuple):
    """One rollout, leaves [T, N, ...]."""

    obs: jax.Array
    next_obs: jax.Array
    action: jax.Array
    info: envs.StepInfo
    discounted_return: jax.Array  # running discounted return, for reward scaling
    action_mask: jax.Array | None = None  # valid actions [T, N, A] (None: no action mask)
    noise: jax.Array | None = None  # tanh_normal: the entropy estimate's noise [T, N, A]


class TrainState(NamedTuple):
    params: dict
    # leaves [max(actor_lag, 1), ...]: parameters of the last actor_lag updates, oldest first
    lagged_params: dict
    opt_state: optax.OptState
    env_state: envs.VecEnvState
    obs: jax.Array  # [N, *obs] raw observations the next rollout starts from
    obs_stats: envs.RunningStats
    return_stats: envs.RunningStats
    discounted_return: jax.Array  # [N]
    key: jax.Array


def make_algorithm(config: Config, env=None, env_params=None) -> algorithm.Algorithm:
    """IMPALA's pieces for one seed (common/harness/loop.py turns them into programs). `env`: a
    gymnax-style env object to train on instead of config.env."""
    env, env_params = algorithm.resolve_env(config.env, env, env_params)
    vec_env = envs.VecEnv(env, env_params, config.num_envs)
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

    def observe(stats, obs):  # what the networks read: flat vectors (a `state` part), or images
        return vec_env.observe(obs, stats if config.normalize_obs else None, image,
                               policy_part=True)

    def init(key: jax.Array) -> TrainState:
        k_params, k_reset, key = jax.random.split(key, 3)
        params = init_params(k_params, config, vec_env)
        obs, env_state = vec_env.reset(k_reset)
        return TrainState(
            params=params, lagged_params=jax.tree.map(
                lambda p: jnp.stack([p] * max(config.actor_lag, 1)), params),
            opt_state=optimizer.init(params), env_state=env_state, obs=obs,
            obs_stats=envs.init_stats((vec_env.obs_dim,)), return_stats=envs.init_stats(),
            discounted_return=jnp.zeros(vec_env.num_envs), key=key,
        )

    def update(state: TrainState, update_index: jax.Array) -> tuple[TrainState, dict]:
        # The behaviour policy: the parameters of actor_lag updates ago (clamped at the start).
        behaviour = jax.tree.map(lambda x: x[0], state.lagged_params) if config.actor_lag \
            else state.params
        key, k_rollout, k_epochs = jax.random.split(state.key, 3)

        # 1. Rollout: num_steps steps of num_envs envs with the behaviour policy (tanh_normal:
        #    the stored action is the pre-tanh sample u, the env gets tanh(u) rescaled;
        #    nets.Actions).
        def env_step(carry, step_key):
            env_state, obs, discounted_return = carry
            k_action, k_env, k_noise = actions.step_keys(step_key)
            policy_obs, action_mask = observe(state.obs_stats, obs), vec_env.action_mask(env_state)
            action = jax.vmap(lambda k, o, m: dist_of(behaviour, o, m).sample(seed=k))(
                jax.random.split(k_action, vec_env.num_envs), policy_obs, action_mask
            )
            next_obs, env_state, info = vec_env.step(k_env, env_state, actions.to_env(action))
            discounted_return = discounted_return * config.gamma + info.reward
            transition = Transition(obs=policy_obs,
                                    next_obs=observe(state.obs_stats, info.final_obs),
                                    action=action, action_mask=action_mask, info=info,
                                    discounted_return=discounted_return,
                                    noise=actions.noise(k_noise, action.shape))
            done = info.terminated | info.truncated
            return (env_state, next_obs, jnp.where(done, 0.0, discounted_return)), transition

        carry = (state.env_state, state.obs, state.discounted_return)
        (env_state, next_obs, discounted_return), traj = jax.lax.scan(
            env_step, carry, jax.random.split(k_rollout, config.num_steps))
        info = traj.info
        # log mu(a|x) over the whole [T, N] rollout, as the learner computes log pi: without
        # lag, one epoch and one minibatch the importance ratios are then exactly 1
        behaviour_log_prob = dist_of(behaviour, traj.obs, traj.action_mask).log_prob(traj.action)

        # 2. Normalisers, then the batch.
        rewards, return_stats, obs_stats = info.reward, state.return_stats, state.obs_stats
        if config.normalize_reward:
            return_stats = envs.update_stats(return_stats, traj.discounted_return)
            rewards = envs.scale(return_stats, rewards)
        if config.normalize_obs:  # new statistics take effect from the next rollout
            obs_stats = envs.update_stats(obs_stats, vec_env.flat_obs(info.final_obs))
        batch = Batch(obs=traj.obs, next_obs=traj.next_obs, action=traj.action,
                      log_prob=behaviour_log_prob, reward=rewards, terminated=info.terminated,
                      done=info.terminated | info.truncated, action_mask=traj.action_mask,
                      noise=traj.noise)

        # 3. num_epochs epochs of num_minibatches Adam steps; V-trace inside every loss.
        learning_rate = schedule(update_index)
        trajectories = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), batch)  # [num_envs, T, ...]
        params, opt_state, loss_stats = learn(
            state.params, state.opt_state, trajectories, k_epochs,
            partial(minibatch_gradient, config=config), optimizer, learning_rate,
            config.num_epochs, config.num_minibatches)
        loss_stats.pop("applied")  # IMPALA has no target_kl: every step applies
        lagged = state.lagged_params
        # drop the oldest, append the parameters this rollout's update started from
        if config.actor_lag:
            lagged = jax.tree.map(lambda old, p: jnp.concatenate([old[1:], p[None]]), lagged,
                                  state.params)

        metrics = {k: v.mean() for k, v in loss_stats.items()}
        metrics["max_abs_log_rho"] = loss_stats["max_abs_log_rho"].max()
        metrics.update(envs.episode_metrics(info, vec_env), learning_rate=learning_rate)
        return TrainState(params=params, lagged_params=lagged, opt_state=opt_state,
                          env_state=env_state, obs=next_obs, obs_stats=obs_stats,
                          return_stats=return_stats, discounted_return=discounted_return,
                          key=key), metrics

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
