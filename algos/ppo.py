"""PPO: clipped-surrogate policy optimisation, GAE, time-limit bootstrapping.

Collect `num_steps` x `num_envs` transitions, estimate advantages with GAE (a time-limit cut
bootstraps from V(final observation); only a true termination zeroes it), then run
`num_epochs` epochs of minibatch Adam steps on the clipped surrogate + value + entropy loss.
Papers: Schulman et al. 2017 (arXiv:1707.06347); GAE: Schulman et al. 2016 (arXiv:1506.02438);
dual clip: Ye et al. 2020 (arXiv:1912.09729); tanh squashing: Haarnoja et al. 2018
(arXiv:1801.01290).

    python algos/ppo.py --env CartPole-v1 --num-seeds 8
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
from scanrl.common.onpolicy import (approx_kl, clipped_surrogate_loss, gae, learn, lr_schedule,
                                    make_optimizer, normalize_advantages, value_loss)

import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec as P


# ---------------------------------------------------------------------------------------------
# Config: hyperparameters (the command line adds its run settings as flags of the same kind)
# ---------------------------------------------------------------------------------------------
ALGO = "ppo"  # its name in the suites' recipe tables: a copy of this file keeps the recipes
# the run settings it starts from (the command line's: common/harness/runconfig.py), by preset
# (None: every env)
RUN_DEFAULTS = {"continuous": dict(eval_every=25)}


@dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"
    """a gymnax id (CartPole-v1) or SUITE/NAME (brax/ant, navix/Navix-Empty-5x5-v0); discrete and
    continuous (Box) action spaces both work."""
    total_timesteps: int = 500_000
    """environment steps per seed (rounded down to whole updates; 0: until a --stop-* condition
    holds, with learning-rate annealing off)."""
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
    """dual clip c > 1: for negative advantages the objective is bounded below by c * A
    (None: off)."""
    clip_value_loss: bool = True
    """PPO2 value clipping: the new value may move at most clip_eps from the rollout's value."""
    target_kl: float | None = None
    """stop the rest of an update's epochs once a minibatch's approx KL exceeds this (None: off)."""
    normalize_advantages: bool = True
    """normalise advantages to zero mean, unit std within each minibatch."""
    recompute_advantages: bool = False
    """recompute GAE with the current value net before every epoch, so later epochs learn from fresh
    advantages and value targets (Andrychowicz et al. 2021; Brax's trainer recomputes them for every
    minibatch); off: once per rollout."""
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
    # Brax's PPO trainer (brax/training/agents/ppo) and its networks: what its recipes set; at
    # these defaults the run is the textbook PPO above
    unroll_length: int = 0
    """k > 0: cut each env's rollout into k-step unrolls, shuffle whole unrolls into the
    minibatches, and compute GAE inside each minibatch with the current value net, every step
    bootstrapping from V of the observation it reached (Brax's trainer, its `unroll_length`);
    0: GAE once per rollout, transitions shuffled."""
    fresh_obs_stats: bool = False
    """with normalize_obs: add each rollout's observations to the statistics before its epochs,
    which see them normalised by the new statistics (Brax's trainer); off: the epochs see them as
    the rollout did."""
    reward_scale: float = 1.0
    """multiply every reward by this constant before the advantages (Brax's `reward_scaling`: 10 for
    Ant, 0.1 for Humanoid); with --normalize-reward, before the running statistics."""
    critic_obs: Literal["state", "privileged_state"] = "state"
    """what the value MLP reads where the env observes Playground's {state, privileged_state} (its
    locomotion tasks): state, as the policy does, or privileged_state, which the policy never sees
    (an asymmetric critic; Brax's value_obs_key, mujoco_playground/config/locomotion_params.py)."""
    init: Literal["orthogonal", "lecun_uniform"] = "orthogonal"
    """MLP weights: orthogonal (gain sqrt 2, the policy head 0.01, the value head 1;
    Andrychowicz et al. 2021), or lecun_uniform on every layer (Brax's networks); biases zero."""
    action_dist: Literal["gaussian", "tanh_normal"] = "gaussian"
    """continuous (Box) actions only. gaussian: a normal with a state-independent log-std, its
    samples clipped to the env's bounds; tanh_normal: Brax PPO's default, a normal with a
    state-dependent std (softplus + min_std) squashed by tanh (Haarnoja et al. 2018) and
    rescaled to the bounds."""
    min_std: float = 0.001
    """tanh_normal: the smallest standard deviation (before tanh) the policy can reach."""
    adam_eps: float = 1e-5
    """Adam's epsilon (CleanRL's and PureJaxRL's 1e-5; Brax's trainers use optax's 1e-8)."""

    batch_size = property(lambda self: self.num_envs * self.num_steps)
    minibatch_size = property(lambda self: self.batch_size // self.num_minibatches)
    num_updates = property(lambda self: algorithm.updates_for(self, self.batch_size))

    def __post_init__(self):
        algorithm.check_values(
            self, positive=("num_envs", "num_steps", "num_epochs", "num_minibatches",
                            "learning_rate", "target_kl", "min_std", "reward_scale", "adam_eps"),
            nonnegative=("ent_coef", "vf_coef", "max_grad_norm", "unroll_length"),
            within={"gamma": "(0, 1]", "gae_lambda": "[0, 1]", "clip_eps": "(0, 1)"},
        )
        if self.batch_size % self.num_minibatches:
            raise ValueError(f"num_envs * num_steps = {self.batch_size} is not divisible by "
                             f"--num-minibatches {self.num_minibatches}; pick a divisor of "
                             f"{self.batch_size}.")
        if self.unroll_length and (self.num_steps % self.unroll_length or
                                   (self.batch_size // self.unroll_length) % self.num_minibatches):
            raise ValueError(f"--unroll-length {self.unroll_length} must divide --num-steps "
                             f"{self.num_steps} into unrolls that --num-minibatches "
                             f"{self.num_minibatches} splits evenly.")
        if self.unroll_length and self.recompute_advantages:
            raise ValueError(f"--recompute-advantages has no effect with --unroll-length "
                             f"{self.unroll_length}, which recomputes GAE in every minibatch; "
                             "add --unroll-length 0 to recompute it every epoch instead.")
        algorithm.check_budget(self, self.batch_size, "rollout")
        if self.dual_clip_param is not None and self.dual_clip_param <= 1:
            raise ValueError(f"--dual-clip-param must be greater than 1, got "
                             f"{self.dual_clip_param}.")


# Presets: continuous-action envs start from settings tuned on Pendulum-v1 (benchmarks/HISTORY.md,
# "Learning results").
PRESETS = {
    "continuous": dict(total_timesteps=1_000_000, num_envs=16, num_steps=256, num_epochs=10,
                       num_minibatches=32, learning_rate=1e-3, gamma=0.95, ent_coef=0.0,
                       normalize_obs=True, normalize_reward=True),
    # MinAtar (10x10xC frames): the conv torso, PureJaxRL's MinAtar rollout shape; learning rate
    # by sweep (benchmarks/HISTORY.md, 2026-11-23, night)
    "minatar": dict(total_timesteps=2_000_000, num_envs=64, num_steps=128, num_epochs=4,
                    num_minibatches=8, learning_rate=2e-3, activation="relu", actor_hidden=(64,),
                    critic_hidden=(64,)),
}


def default_config(env: str = "CartPole-v1", recipe: str = "auto", **overrides) -> Config:
    """Config for `env`: PureJaxRL's CartPole settings, or PRESETS["continuous"] for Box actions,
    PRESETS["minatar"] for MinAtar, then the suite's published recipe for `env` where
    its suite publishes one (`recipe`: auto, published, cpu, none); `overrides`
    (hyperparameters) win."""
    # the env ids' registry and the suites' recipe tables load only here
    from scanrl.common.suites import recipes

    return Config(**{**recipes.config_fields(ALGO, env, recipe, PRESETS), **overrides, "env": env})


# ---------------------------------------------------------------------------------------------
# Network: separate policy and value MLPs behind one shared conv torso for image observations (the
# convolutions are most of the compute, as in CleanRL's Atari PPO); continuous actions: a
# state-independent log-std (gaussian), or a state-dependent std before a tanh (tanh_normal).
# Each reads what make_algorithm's `observe` gives it (`network_inputs`): the policy the
# observation's policy part, the value net the same or, with --critic-obs privileged_state, the rest
# ---------------------------------------------------------------------------------------------
def init_params(key: jax.Array, config: Config, vec_env: envs.VecEnv) -> dict:
    """Parameters {"torso" (images only), "actor", "critic", "log_std" (gaussian Box actions
    only)}. The actor maps the features [F] to logits [A] (discrete), means [A] (gaussian) or
    [loc, raw scale] [2A] (tanh_normal), output gain 0.01; the critic maps them to V [1], output
    gain 1 (--init lecun_uniform draws every layer of both as Brax's networks do). Flat
    observations: the actor reads the policy part [vec_env.policy_obs_dim], the critic too, or
    the privileged rest (--critic-obs privileged_state)."""
    params = {}
    if use_cnn(config.torso, vec_env.obs_shape):
        key, k_torso = jax.random.split(key)
        params["torso"], actor_in = cnn_init(k_torso, vec_env.obs_shape, config.conv_channels)
        critic_in = actor_in
    elif config.critic_obs == "privileged_state":
        actor_in, critic_in = vec_env.policy_obs_dim, vec_env.obs_dim - vec_env.policy_obs_dim
    else:
        actor_in = critic_in = vec_env.policy_obs_dim
    k_actor, k_critic = jax.random.split(key)
    tanh_normal = config.action_dist == "tanh_normal" and not vec_env.discrete
    out_dim = (vec_env.num_actions if vec_env.discrete
               else vec_env.action_dim * (2 if tanh_normal else 1))
    params["actor"] = mlp_init(k_actor, (actor_in, *config.actor_hidden, out_dim), output_gain=0.01,
                               scheme=config.init)
    params["critic"] = mlp_init(k_critic, (critic_in, *config.critic_hidden, 1), output_gain=1.0,
                                scheme=config.init)
    if not vec_env.discrete and not tanh_normal:
        params["log_std"] = jnp.zeros(out_dim)
    return params


def features(params: dict, obs: jax.Array, activation: str) -> jax.Array:
    """What a head reads [..., F]: the conv torso's output of images [..., H, W, C], or the flat
    observation [..., F] as given."""
    return cnn_apply(params["torso"], obs, activation) if "torso" in params else obs


def policy(params: dict, obs: jax.Array, activation: str, action_mask: jax.Array | None = None,
           action_dist: str = "gaussian", min_std: float = 0.001):
    """The policy part [..., policy_obs_dim] or images [..., H, W, C] -> the action distribution,
    batch shape [...] (nets.head_distribution); action_mask [..., A]: the valid discrete actions,
    where the env has one."""
    out = mlp_apply(params["actor"], features(params, obs, activation), activation)
    return head_distribution(out, params, action_mask, action_dist, min_std)


def value(params: dict, obs: jax.Array, activation: str) -> jax.Array:
    """What the value net reads [..., F] (`network_inputs`) or images [..., H, W, C] -> V [...]."""
    return mlp_apply(params["critic"], features(params, obs, activation), activation)[..., 0]


def network_inputs(vec_env: envs.VecEnv, obs: jax.Array, stats: envs.RunningStats | None = None,
                   image: bool = False, critic_obs: str = "state") -> tuple:
    """Raw observations [..., *obs] -> (what the policy reads, what a privileged value net reads
    or None): flat vectors normalised by `stats` where given, the policy's part
    (`VecEnv.observe(policy_part=True)`), or images for the conv torso; critic_obs
    "privileged_state": the value net reads the rest, Playground's `privileged_state`."""
    policy_obs = vec_env.observe(obs, stats, image, policy_part=True)
    if critic_obs != "privileged_state":
        return policy_obs, None
    return policy_obs, vec_env.observe(obs, stats)[..., vec_env.policy_obs_dim:]


def value_input(x):
    """What the value net reads of a Batch, Unroll or Transition: value_obs, or obs."""
    return x.obs if x.value_obs is None else x.value_obs


# The math: GAE, the clipped surrogate, the value loss, approx KL, advantage normalisation and the
# epoch loop come from common/onpolicy.py (tested in tests/test_ppo.py, tests/test_gae.py);
# here PPO's loss
# ---------------------------------------------------------------------------------------------
class Batch(NamedTuple):
    """Training samples, leaves [B, ...] (flattened [T * N])."""

    # as the policy sees them (normalised if enabled; fresh_obs_stats: by the new statistics)
    obs: jax.Array
    action: jax.Array  # tanh_normal: the pre-tanh sample u [B, A]
    # log pi_old(action | obs); tanh_normal: of u (the tanh Jacobian cancels in the ratio)
    log_prob: jax.Array
    value: jax.Array  # V_old(obs)
    advantage: jax.Array
    target: jax.Array  # GAE value target
    action_mask: jax.Array | None = None  # valid actions [B, A] where the env has an action mask
    noise: jax.Array | None = None  # tanh_normal: standard normal [B, A] for the entropy estimate
    value_obs: jax.Array | None = None  # what a privileged value net reads (None: it reads obs)


def ppo_loss(params: dict, batch: Batch, config: Config) -> tuple[jax.Array, dict]:
    """Total loss = clipped surrogate + vf_coef * value loss - ent_coef * entropy.
    batch.advantage is used as given (minibatch_gradient normalises it)."""
    dist = policy(params, batch.obs, config.activation, batch.action_mask, config.action_dist,
                  config.min_std)
    log_ratio = dist.log_prob(batch.action) - batch.log_prob
    ratio = jnp.exp(log_ratio)
    policy_loss = clipped_surrogate_loss(ratio, batch.advantage, config.clip_eps,
                                         config.dual_clip_param)
    v_clip = config.clip_eps if config.clip_value_loss else None
    v_loss = value_loss(value(params, value_input(batch), config.activation), batch.value,
                        batch.target, v_clip)
    entropy = entropy_of(dist, batch.noise).mean()  # tanh_normal: a one-sample estimate
    stats = {"policy_loss": policy_loss, "value_loss": v_loss, "entropy": entropy,
             "approx_kl": approx_kl(log_ratio),
             "clip_fraction": (jnp.abs(ratio - 1.0) > config.clip_eps).mean()}
    return policy_loss + config.vf_coef * v_loss - config.ent_coef * entropy, stats


def minibatch_gradient(params: dict, minibatch: Batch, config: Config) -> tuple[dict, dict]:
    """Gradient of ppo_loss over one minibatch (leaves [B, ...]) and the loss stats;
    advantages are normalised over the minibatch."""
    if config.normalize_advantages:
        minibatch = minibatch._replace(advantage=normalize_advantages(minibatch.advantage))
    (_, stats), grads = jax.value_and_grad(ppo_loss, has_aux=True)(params, minibatch, config)
    return grads, stats


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
class Transition(NamedTuple):
    """One rollout, leaves [T, N, ...]."""

    # as the policy saw them; fresh_obs_stats: raw, normalised after the statistics take them in
    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    info: envs.StepInfo
    discounted_return: jax.Array  # running discounted return, for reward scaling
    action_mask: jax.Array | None = None  # valid actions [T, N, A] (None: no action mask)
    noise: jax.Array | None = None  # tanh_normal: the entropy estimate's noise [T, N, A]
    value_obs: jax.Array | None = None  # a privileged value net's input (`network_inputs`)


class TrainState(NamedTuple):
    params: dict
    opt_state: optax.OptState
    env_state: envs.VecEnvState
    obs: jax.Array  # [N, *obs] raw observations the next rollout starts from
    obs_stats: envs.RunningStats
    return_stats: envs.RunningStats
    discounted_return: jax.Array  # [N]
    key: jax.Array


def loss_inputs(config: Config, traj: Transition, obs_stats: envs.RunningStats,
                return_stats: envs.RunningStats, observe, flat_obs) -> tuple:
    """A rollout as the losses see it, and the statistics for the next one: rewards [T, N]
    scaled (normalize_reward: divided by the running discounted return's spread), observation
    statistics updated with the rollout (fresh_obs_stats: these epochs read them too, the rollout
    kept raw observations), and final_obs [T, N, ...], the observation each step reached, as
    the value net reads it: V(s'_t) is of it, so that truncations bootstrap. observe(stats, obs)
    -> (policy's, privileged value net's or None) and flat_obs(obs) are make_algorithm's.
    Returns (traj, rewards, final_obs, obs_stats, return_stats)."""
    info, fresh_stats = traj.info, config.fresh_obs_stats and config.normalize_obs
    rewards, new_obs_stats = info.reward * config.reward_scale, obs_stats
    if config.normalize_reward:
        return_stats = envs.update_stats(return_stats, traj.discounted_return)
        rewards = envs.scale(return_stats, rewards)
    if config.normalize_obs:
        new_obs_stats = envs.update_stats(obs_stats, flat_obs(info.final_obs))
    if fresh_stats:
        policy_obs, value_obs = observe(new_obs_stats, traj.obs)
        traj = traj._replace(obs=policy_obs, value_obs=value_obs)
    final_obs, final_value_obs = observe(new_obs_stats if fresh_stats else obs_stats,
                                         info.final_obs)
    final_obs = final_obs if final_value_obs is None else final_value_obs
    return traj, rewards, final_obs, new_obs_stats, return_stats


def epoch_inputs(config: Config, params: dict, traj: Transition, rewards: jax.Array,
                 final_obs: jax.Array, old_values: jax.Array, v_of) -> tuple:
    """What the epochs learn from, in one of three forms: (data, its gradient function,
    `prepare` or None for common/onpolicy.py's `learn`). rewards [T, N] as the losses see them,
    final_obs [T, N, ...] (the observation each step reached, as the value net reads it),
    old_values [T, N]: V_old(obs), v_of(params, obs) -> V [...]. The advantages themselves are
    GAE's, in one of three places:
    - GAE once, with the rollout's value net (PureJaxRL's and CleanRL's PPO): [T * N] samples.
    - recompute_advantages: GAE again before each epoch with that epoch's value net
      (Andrychowicz et al. 2021, arXiv:2006.05990).
    - unroll_length k: whole k-step unrolls, GAE in every minibatch with the current value
      net (Brax's trainer)."""
    info = traj.info
    if config.unroll_length:
        unrolls = Unroll(obs=traj.obs, final_obs=final_obs, action=traj.action,
                         log_prob=traj.log_prob, value=old_values, reward=rewards,
                         terminated=info.terminated, done=info.terminated | info.truncated,
                         action_mask=traj.action_mask, noise=traj.noise, value_obs=traj.value_obs)
        return to_unrolls(unrolls, config.unroll_length), unroll_gradient, None

    def samples(values: jax.Array, final_values: jax.Array) -> Batch:  # [T * N]
        advantage, target = gae(rewards, values, final_values, info.terminated,
                                info.terminated | info.truncated, config.gamma, config.gae_lambda)
        batch = Batch(obs=traj.obs, action=traj.action, log_prob=traj.log_prob,
                      value=old_values, advantage=advantage, target=target,
                      action_mask=traj.action_mask, noise=traj.noise, value_obs=traj.value_obs)
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), batch)

    prepare = None
    if config.recompute_advantages:
        prepare = lambda epoch_params, _: samples(v_of(epoch_params,  # noqa: E731
                                                       value_input(traj)),
                                                  v_of(epoch_params, final_obs))
    return samples(old_values, v_of(params, final_obs)), minibatch_gradient, prepare


def make_algorithm(config: Config, env=None, env_params=None) -> algorithm.Algorithm:
    """PPO's pieces for one seed (common/harness/loop.py turns them into programs). `env`: a
    gymnax-style env object to train on instead of config.env."""
    env, env_params = algorithm.resolve_env(config.env, env, env_params)
    vec_env = envs.VecEnv(env, env_params, config.num_envs)
    optimizer = make_optimizer(config.max_grad_norm, config.adam_eps)
    act_fn, fresh_stats = config.activation, config.fresh_obs_stats and config.normalize_obs
    # before compiling: ValueError for tanh_normal without finite bounds, cnn without images
    actions = actions_for(config.action_dist, vec_env, config.env)
    image = use_cnn(config.torso, vec_env.obs_shape)
    algorithm.check_critic_obs(config.critic_obs, config.env, vec_env)
    dist_of = lambda params, obs, mask=None: policy(params, obs, act_fn, mask, config.action_dist,
                                                    config.min_std)
    v_of = lambda params, obs: value(params, obs, act_fn)
    # a run without a budget (--total-timesteps 0) has no end to anneal to
    schedule = lr_schedule(config.learning_rate, config.num_updates,
                           anneal=config.anneal_lr and config.total_timesteps > 0)

    def observe(stats, obs):  # what the networks read: (the policy's, a privileged value net's)
        return network_inputs(vec_env, obs, stats if config.normalize_obs else None, image,
                              config.critic_obs)

    def init(key: jax.Array) -> TrainState:
        k_params, k_reset, key = jax.random.split(key, 3)
        params = init_params(k_params, config, vec_env)
        obs, env_state = vec_env.reset(k_reset)
        return TrainState(params=params, opt_state=optimizer.init(params), env_state=env_state,
                          obs=obs, obs_stats=envs.init_stats((vec_env.obs_dim,)),
                          return_stats=envs.init_stats(),
                          discounted_return=jnp.zeros(vec_env.num_envs), key=key)

    def update(state: TrainState, update_index: jax.Array) -> tuple[TrainState, dict]:
        params = state.params
        key, k_rollout, k_epochs = jax.random.split(state.key, 3)

        # 1. Rollout: num_steps steps of num_envs envs with the current policy (tanh_normal: the
        #    stored action is the pre-tanh sample u, the env gets tanh(u) rescaled; nets.Actions)
        def env_step(carry, step_key):
            env_state, obs, discounted_return = carry
            k_action, k_env, k_noise = actions.step_keys(step_key)
            (policy_obs, value_obs), action_mask = (observe(state.obs_stats, obs),
                                                    vec_env.action_mask(env_state))
            action, log_prob = jax.vmap(lambda k, o, m: actions.sample(dist_of(params, o, m), k))(
                jax.random.split(k_action, vec_env.num_envs), policy_obs, action_mask)
            next_obs, env_state, info = vec_env.step(k_env, env_state, actions.to_env(action))
            discounted_return = discounted_return * config.gamma + info.reward * config.reward_scale
            transition = Transition(obs=obs if fresh_stats else policy_obs, action=action,
                                    log_prob=log_prob, action_mask=action_mask, info=info,
                                    discounted_return=discounted_return,
                                    noise=actions.noise(k_noise, action.shape),
                                    value_obs=None if fresh_stats else value_obs)
            done = info.terminated | info.truncated
            return (env_state, next_obs, jnp.where(done, 0.0, discounted_return)), transition

        carry = (state.env_state, state.obs, state.discounted_return)
        (env_state, next_obs, discounted_return), traj = jax.lax.scan(
            env_step, carry, jax.random.split(k_rollout, config.num_steps))

        # 2. Rewards and observations as the losses see them, new statistics (`loss_inputs`)
        traj, rewards, final_obs, obs_stats, return_stats = loss_inputs(
            config, traj, state.obs_stats, state.return_stats, observe, vec_env.flat_obs)
        old_values = v_of(params, value_input(traj))

        # 3. num_epochs epochs of num_minibatches Adam steps at this update's learning rate,
        #    with GAE from the rollout's value net (`epoch_inputs`, one of three forms)
        learning_rate = schedule(update_index)
        data, gradient, prepare = epoch_inputs(config, params, traj, rewards, final_obs,
                                               old_values, v_of)
        params, opt_state, loss_stats = learn(
            params, state.opt_state, data, k_epochs, partial(gradient, config=config), optimizer,
            learning_rate, config.num_epochs, config.num_minibatches, prepare=prepare,
            target_kl=config.target_kl)

        metrics = {k: v.mean() for k, v in loss_stats.items()}
        metrics.update(envs.episode_metrics(traj.info, vec_env), learning_rate=learning_rate)
        return TrainState(params=params, opt_state=opt_state, env_state=env_state, obs=next_obs,
                          obs_stats=obs_stats, return_stats=return_stats,
                          discounted_return=discounted_return, key=key), metrics

    def act(policy_params: dict, obs: jax.Array, key: jax.Array, deterministic: bool = False,
            mask=None) -> jax.Array:
        """obs [N, *obs] (mask [N, A] or None) -> actions [N, ...]: the policy's mode or a
        sample (tanh_normal: tanh of the pre-tanh normal's, rescaled to the bounds)."""
        dist = dist_of(policy_params["params"], observe(policy_params["obs_stats"], obs)[0], mask)
        return actions.act(dist, key, deterministic)

    return algorithm.Algorithm(
        init=init, update=update, act=act,
        policy_params=lambda state: {"params": state.params, "obs_stats": state.obs_stats},
        vec_env=vec_env, num_updates=config.num_updates,
        steps_per_update=config.batch_size)


# ---------------------------------------------------------------------------------------------
# Brax's trainer (--unroll-length k): whole k-step unrolls shuffled into the minibatches, GAE in
# every minibatch with the current value net (`epoch_inputs` chooses this form)
# ---------------------------------------------------------------------------------------------
class Unroll(NamedTuple):
    """Whole unrolls for per-minibatch GAE (--unroll-length k), leaves [U, k, ...]."""

    obs: jax.Array
    final_obs: jax.Array  # the observation each step reached: V of it bootstraps every step
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array  # V_old(obs), for value clipping
    reward: jax.Array  # scaled as the advantages see them
    terminated: jax.Array
    done: jax.Array  # terminated | truncated
    action_mask: jax.Array | None = None
    noise: jax.Array | None = None
    value_obs: jax.Array | None = None  # a privileged value net's input (`network_inputs`)


def to_unrolls(tree, k: int):
    """Leaves [T, N, ...] -> [T/k * N, k, ...]: each env's rollout cut into k-step pieces,
    time kept in order."""
    def cut(x):
        pieces = x.reshape((x.shape[0] // k, k) + x.shape[1:])  # [T/k, k, N, ...]
        return jnp.swapaxes(pieces, 1, 2).reshape((-1, k) + x.shape[2:])
    return jax.tree.map(cut, tree)


def unroll_gradient(params: dict, minibatch: Unroll, config: Config) -> tuple[dict, dict]:
    """GAE over each unroll of the minibatch [B, k] with the current value net, then
    minibatch_gradient over its B * k transitions (which differentiates the loss alone: the
    advantages and targets are constants)."""
    steps = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), minibatch)  # time-major [k, B, ...]
    advantages, targets = gae(steps.reward,
                              value(params, value_input(steps), config.activation),
                              value(params, steps.final_obs, config.activation),
                              steps.terminated, steps.done, config.gamma, config.gae_lambda)
    batch = Batch(obs=steps.obs, action=steps.action, log_prob=steps.log_prob, value=steps.value,
                  advantage=advantages, target=targets, action_mask=steps.action_mask,
                  noise=steps.noise, value_obs=steps.value_obs)
    return minibatch_gradient(
        params, jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), batch), config)


# ---------------------------------------------------------------------------------------------
# The whole run as one program
# ---------------------------------------------------------------------------------------------
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
