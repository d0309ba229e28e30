"""TD3: twin delayed deep deterministic policy gradient, on-device replay.

Every step each of `num_envs` environments acts (uniformly at random for the first
`learning_starts` env steps, then the deterministic actor's action plus Gaussian exploration
noise, each environment with its own noise scale), the transitions go into a circular replay
buffer held in the train state, and `updates_per_step` gradient steps each sample a batch and
update the twin critics towards r + gamma (1 - terminated) min_j Q'_j(s', a'), where a' is the
target actor's action with clipped Gaussian noise (target-policy smoothing). Every
`policy_delay`-th critic step also updates the actor (to maximise Q_1(s, pi(s))) and moves the
target actor and critics by Polyak averaging. A time-limit cut bootstraps from the final
observation the buffer stores; only a true termination zeroes the bootstrap.
Two of FastTD3's knobs, off by default: n-step returns (`n_step`; a window never crosses an
episode's end) and a distributional critic (`num_atoms`: C51's categorical critic on
[v_min, v_max], trained by cross-entropy to the projected target distribution).
Papers: Fujimoto et al. 2018 (arXiv:1802.09477); C51: Bellemare et al. 2017
(arXiv:1707.06887); per-environment noise scales, C51 with clipped double-Q: Seo et al. 2025,
FastTD3 (arXiv:2505.22642).

    python algos/td3.py --env Pendulum-v1 --num-seeds 4

The whole loop, buffer included, runs inside the compiled program: seeds are vmapped and
spread over devices. One "update" is an iteration of `num_steps` env steps (the unit of
metrics, --log-every and --eval-every). Continuous (Box) actions only.
"""

from __future__ import annotations

# before the imports below (seconds): a Ctrl-C in them is one line, not a traceback
if __name__ == "__main__":
    from scanrl.common.harness import quiet_start
    quiet_start()

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
ALGO = "td3"  # its name in the suites' recipe tables: a copy of this file keeps the recipes
# the run settings it starts from (the command line's: common/harness/runconfig.py), by preset
# (None: every env). The sampled evaluation acts with exploration noise: the deterministic
# policy is TD3's own.
RUN_DEFAULTS = {None: dict(eval_every=10, log_every=5, eval_policy="deterministic")}


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
    """critic steps each time the num_envs environments take one step (update-to-data ratio
    = updates_per_step / num_envs)."""
    policy_delay: int = 2
    """the actor and the targets are updated once every policy_delay critic steps."""
    learning_rate: float = 1e-3
    """Adam step size of the actor and the critics."""
    weight_decay: float = 0.0
    """decoupled weight decay of both networks (AdamW; 0: Adam; FastTD3 uses 0.1)."""
    gamma: float = 0.99
    """discount factor."""
    n_step: int = 1
    """the critic's target sums up to n_step rewards before it bootstraps (cut short at an
    episode's end and at the newest stored step)."""
    num_atoms: int = 0
    """0: a scalar critic; else C51's categorical critic with this many atoms."""
    v_min: float = -10.0
    """the categorical critic's smallest atom (returns below it count as v_min)."""
    v_max: float = 10.0
    """the categorical critic's largest atom."""
    tau: float = 0.005
    """Polyak rate: target <- tau * online + (1 - tau) * target at every actor step."""
    exploration_noise_min: float = 0.1
    """smallest std of the Gaussian exploration noise, in units of half the action range."""
    exploration_noise_max: float = 0.1
    """largest std of the exploration noise: each environment draws its std uniformly from
    [min, max] at the start and after each episode (FastTD3; equal bounds: one fixed std)."""
    target_noise: float = 0.2
    """std of the target-policy smoothing noise added to the target actor's action."""
    target_noise_clip: float = 0.5
    """the smoothing noise is clipped to [-clip, clip] before it is added."""
    reward_scale: float = 1.0
    """multiply every reward by this constant in the critic's target."""
    max_grad_norm: float = 0.0
    """clip each network's global gradient norm to this (0: no clipping)."""
    normalize_obs: bool = False
    """normalise observations by a running mean/std (the buffer stores raw observations)."""
    actor_hidden: tuple[int, ...] = (64, 64)
    """hidden layer sizes of the policy MLP (sac.py's; Fujimoto et al. use 256 x 256)."""
    critic_hidden: tuple[int, ...] = (64, 64)
    """hidden layer sizes of each of the two Q MLPs."""
    critic_layer_norm: bool = False
    """a layer norm after each hidden activation of the Q MLPs."""
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
                            "updates_per_step", "policy_delay", "n_step", "learning_rate",
                            "reward_scale"),
            nonnegative=("learning_starts", "max_grad_norm", "weight_decay",
                         "exploration_noise_min", "exploration_noise_max", "target_noise",
                         "target_noise_clip"),
            within={"gamma": "(0, 1]", "tau": "(0, 1]"},
        )
        if self.exploration_noise_min > self.exploration_noise_max:
            raise ValueError(f"--exploration-noise-min {self.exploration_noise_min} must not "
                             f"exceed --exploration-noise-max {self.exploration_noise_max}.")
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
# Networks: a deterministic tanh actor and two Q networks evaluated as one stacked ensemble
# (each a scalar Q, or C51's logits over num_atoms atoms)
# ---------------------------------------------------------------------------------------------
def init_params(key: jax.Array, config: Config, obs_dim: int, action_dim: int) -> dict:
    """{"actor": MLP obs -> action (before tanh), "critic": two Q MLPs stacked on a leading
    axis of 2, each with max(num_atoms, 1) outputs}."""
    k_actor, k_critic = jax.random.split(key)
    critic_sizes = (obs_dim + action_dim, *config.critic_hidden, max(config.num_atoms, 1))
    return {
        "actor": mlp_init(k_actor, (obs_dim, *config.actor_hidden, action_dim),
                          output_gain=0.01),
        "critic": jax.vmap(lambda k: mlp_init(k, critic_sizes, output_gain=1.0,
                                              layer_norm=config.critic_layer_norm))(
            jax.random.split(k_critic)),
    }


def policy_action(actor: list, obs: jax.Array, activation: str) -> jax.Array:
    """The deterministic policy: obs [..., obs_dim] -> action [..., A] in [-1, 1]."""
    return jnp.tanh(mlp_apply(actor, obs, activation))


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
# The math: pure functions, tested in tests/test_td3.py
# ---------------------------------------------------------------------------------------------
def explore(action: jax.Array, noise_std: jax.Array, noise: jax.Array) -> jax.Array:
    """Exploration: action [N, A] plus noise_std [N] x standard-normal noise [N, A], clipped to
    [-1, 1]."""
    return jnp.clip(action + noise_std[:, None] * noise, -1.0, 1.0)


def smoothed_target_action(target_action: jax.Array, noise: jax.Array, std: float,
                           clip: float) -> jax.Array:
    """Target-policy smoothing: a' = clip(pi'(s') + clip(std * noise, -clip, clip), -1, 1);
    target_action, noise (standard normal) [B, A]."""
    return jnp.clip(target_action + jnp.clip(std * noise, -clip, clip), -1.0, 1.0)


def critic_target(reward, terminated, next_q, discount) -> jax.Array:
    """Clipped double-Q target y = R + discount (1 - terminated) min_j Q'_j(s', a').

    reward R [B]: the window's discounted sum of rewards; discount [B] or scalar: gamma ** its
    length (gamma for one step); terminated [B]: of the window's last step; next_q [2, B] from
    the target critics at that step's stored next observation s' (the final observation
    where a time limit cut the episode, so truncated steps bootstrap) and the smoothed target
    action a'. Returns [B].
    """
    return reward + discount * (1.0 - terminated.astype(reward.dtype)) * next_q.min(axis=0)


def critic_loss(critic: list, obs, action, target, activation: str) -> tuple[jax.Array, jax.Array]:
    """Sum over the two critics of the mean squared error to the (constant) target [B]."""
    q = q_values(critic, obs, action, activation)  # [2, B]
    return ((q - target) ** 2).mean(axis=1).sum(), q.mean()


def categorical_target(reward, terminated, next_logits, discount, support) -> jax.Array:
    """The categorical critics' target distribution [B, K]: of the two target critics'
    distributions at (s', a') (next_logits [2, B, K]), the one with the smaller expected value
    (clipped double-Q, as FastTD3), its atoms moved to R + discount (1 - terminated) z and
    projected onto the support [K]; reward, terminated and discount [B] as `critic_target`'s."""
    chosen = smaller_mean_distribution(next_logits, support)  # [B, K]
    bootstrap = discount * (1.0 - terminated.astype(reward.dtype))  # [B]
    return categorical_projection(reward[:, None] + bootstrap[:, None] * support, chosen, support)


def categorical_loss(critic: list, obs, action, target, activation: str,
                     support: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Sum over the two critics of the mean cross-entropy to the (constant) target
    distribution [B, K]; also the mean expected Q."""
    logits = critic_outputs(critic, obs, action, activation)  # [2, B, K]
    log_probs = jax.nn.log_softmax(logits)
    loss = -(target * log_probs).sum(-1).mean(axis=1).sum()
    return loss, (jnp.exp(log_probs) @ support).mean()


def actor_loss(actor: list, critic: list, obs, activation: str,
               support: jax.Array | None = None) -> jax.Array:
    """-mean Q_1(s, pi(s)) over obs [B, obs_dim]: the first critic alone, as Fujimoto et al.
    (a categorical critic: its expected value); only the actor is differentiated."""
    action = policy_action(actor, obs, activation)
    return -q_values(jax.lax.stop_gradient(critic), obs, action, activation, support)[0].mean()


def polyak(online, target, tau: float):
    """target <- tau * online + (1 - tau) * target, leafwise."""
    return optax.incremental_update(online, target, tau)


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
def make_optimizer(config: Config) -> optax.GradientTransformation:
    max_norm = algorithm.grad_norm_bound(config.max_grad_norm)  # 0: no clipping
    return optax.chain(optax.clip_by_global_norm(max_norm),
                       optax.adamw(config.learning_rate, weight_decay=config.weight_decay))


class Learner(NamedTuple):
    params: dict  # {"actor", "critic"}
    target: dict  # the Polyak-averaged {"actor", "critic"}
    opt_states: tuple  # (actor, critic) optimizer states


def td3_update(learner: Learner, batch: Transitions, discount: jax.Array, key: jax.Array,
               actor_step: jax.Array, config: Config,
               optimizer: optax.GradientTransformation) -> tuple[Learner, dict]:
    """One critic step and, where `actor_step` (a bool scalar the same for every seed, so the
    branch stays a real one under the seeds' vmap), the actor step against the updated
    critics and the Polyak step of both targets.

    batch: leaves [B, ...] with observations as the networks see them, rewards summed over
    each n-step window; discount [B]: gamma ** each window's length (gamma itself for
    one-step windows).
    Returns the new learner and the step's stats (scalars; actor_loss NaN without an actor step).
    """
    params, target, (actor_opt, critic_opt) = learner
    act = config.activation
    support = support_of(config.num_atoms, config.v_min, config.v_max)

    def apply(grads, params, opt_state):
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    next_action = smoothed_target_action(
        policy_action(target["actor"], batch.next_obs, act),
        jax.random.normal(key, batch.action.shape), config.target_noise, config.target_noise_clip)
    reward = batch.reward * config.reward_scale
    # the target (a value or a distribution) is computed outside the gradient
    if support is None:
        y = critic_target(reward, batch.terminated,
                          q_values(target["critic"], batch.next_obs, next_action, act), discount)
        loss = lambda critic: critic_loss(critic, batch.obs, batch.action, y, act)
    else:
        y = categorical_target(reward, batch.terminated,
                               critic_outputs(target["critic"], batch.next_obs, next_action, act),
                               discount, support)
        loss = lambda critic: categorical_loss(critic, batch.obs, batch.action, y, act, support)
    (c_loss, q_mean), c_grads = jax.value_and_grad(loss, has_aux=True)(params["critic"])
    critic, critic_opt = apply(c_grads, params["critic"], critic_opt)

    def actor_and_targets(actor, actor_opt, target):
        a_loss, a_grads = jax.value_and_grad(actor_loss)(actor, critic, batch.obs, act, support)
        actor, actor_opt = apply(a_grads, actor, actor_opt)
        online = {"actor": actor, "critic": critic}
        return actor, actor_opt, polyak(online, target, config.tau), a_loss

    actor, actor_opt, target, a_loss = jax.lax.cond(
        actor_step, actor_and_targets,
        lambda actor, actor_opt, target: (actor, actor_opt, target, jnp.float32(jnp.nan)),
        params["actor"], actor_opt, target)
    stats = {"critic_loss": c_loss, "actor_loss": a_loss, "q_mean": q_mean}
    return Learner({"actor": actor, "critic": critic}, target, (actor_opt, critic_opt)), stats


def gradient_steps(learner: Learner, buffer: ReplayBuffer, observe, key: jax.Array,
                   learning_step: jax.Array, config: Config,
                   optimizer: optax.GradientTransformation) -> tuple[Learner, dict]:
    """updates_per_step replayed gradient steps (`td3_update` on a batch sampled from the
    buffer), stats averaged over them. `learning_step`: vector steps since the first that
    learned (0 for it); critic step g counts from there (learning_step * updates_per_step for
    the first of these), and the actor learns at g = 0, policy_delay, ... `observe`: raw
    observations [B, obs_dim] -> what the networks see."""

    def replay_step(learner, inputs):
        step_key, g = inputs
        k_sample, k_update = jax.random.split(step_key)
        batch, discount = buffer_sample(buffer, k_sample, config.batch_size, config.n_step,
                                        config.gamma)
        batch = batch._replace(obs=observe(batch.obs), next_obs=observe(batch.next_obs))
        return td3_update(learner, batch, discount, k_update, g % config.policy_delay == 0,
                          config, optimizer)

    first = learning_step * config.updates_per_step
    learner, stats = jax.lax.scan(
        replay_step, learner,
        (jax.random.split(key, config.updates_per_step),
         first + jnp.arange(config.updates_per_step)))
    return learner, jax.tree.map(jnp.nanmean, stats)


class TrainState(NamedTuple):
    learner: Learner
    buffer: ReplayBuffer
    env_state: envs.VecEnvState
    obs: jax.Array  # [N, *obs] raw observations the next step starts from
    noise_std: jax.Array  # [N] each environment's exploration noise std
    obs_stats: envs.RunningStats
    key: jax.Array


def make_algorithm(config: Config, env=None, env_params=None) -> algorithm.Algorithm:
    """TD3's pieces for one seed (common/harness/loop.py turns them into programs); an update is
    one iteration of num_steps env steps (metrics averaged over it; losses NaN before
    learning_starts). `env`: a gymnax-style env object to train on instead of config.env."""
    env, env_params = algorithm.resolve_env(config.env, env, env_params)
    if envs.is_discrete(env, env_params):
        raise ValueError(f"TD3 needs continuous (Box) actions and --env {config.env} has "
                         "discrete ones; use algos/ppo.py, algos/ppo_rnn.py, algos/impala.py, "
                         "algos/pqn.py or algos/pqn_rnn.py for it.")
    vec_env = envs.VecEnv(env, env_params, config.num_envs)
    obs_dim, action_dim = vec_env.obs_dim, vec_env.action_dim
    # actions live in [-1, 1]^A for the networks and the buffer; the env sees them rescaled
    action_scale = (vec_env.action_high - vec_env.action_low).reshape(-1) / 2.0
    action_offset = (vec_env.action_high + vec_env.action_low).reshape(-1) / 2.0
    optimizer = make_optimizer(config)
    # the first vector step that learns, and the sampled evaluation's noise std
    first_learning_step = config.learning_starts // config.num_envs
    eval_noise = 0.5 * (config.exploration_noise_min + config.exploration_noise_max)

    def to_env(unit_action):  # [N, A] in [-1, 1] -> [N, *action_shape] in the env's bounds
        return (unit_action * action_scale + action_offset).reshape((-1, *vec_env.action_shape))

    def observe(stats, obs):  # what the networks see: a Playground locomotion task's `state` part
        return vec_env.observe(obs, stats if config.normalize_obs else None, policy_part=True)

    def noise_stds(key):  # [N], each environment's exploration std
        return jax.random.uniform(key, (config.num_envs,), minval=config.exploration_noise_min,
                                  maxval=config.exploration_noise_max)

    def init(key: jax.Array) -> TrainState:
        k_params, k_reset, k_std, key = jax.random.split(key, 4)
        params = init_params(k_params, config, vec_env.policy_obs_dim, action_dim)
        obs, env_state = vec_env.reset(k_reset)
        opt_states = tuple(optimizer.init(params[k]) for k in ("actor", "critic"))
        return TrainState(
            learner=Learner(params=params, target=params, opt_states=opt_states),
            buffer=buffer_init(config.buffer_rows, vec_env.num_envs, obs_dim, action_dim),
            env_state=env_state, obs=obs, noise_std=noise_stds(k_std),
            obs_stats=envs.init_stats((obs_dim,)), key=key,
        )

    def update(state: TrainState, update_index: jax.Array) -> tuple[TrainState, dict]:
        """num_steps env steps, each followed by updates_per_step critic steps once learning."""
        def env_step(state: TrainState, step_index: jax.Array):
            """Act, store the step in the buffer, then learn (if due). step_index counts vector
            steps from 0, the same for every seed: under vmap the branches stay real ones."""
            # act: uniformly at random before learning starts, then the actor plus noise
            key, k_random, k_noise, k_env, k_learn, k_std = jax.random.split(state.key, 6)
            random = jax.random.uniform(k_random, (config.num_envs, action_dim),
                                        minval=-1.0, maxval=1.0)
            greedy = policy_action(state.learner.params["actor"],
                                   observe(state.obs_stats, state.obs), config.activation)
            noisy = explore(greedy, state.noise_std, jax.random.normal(k_noise, greedy.shape))
            action = jnp.where(step_index < first_learning_step, random, noisy)
            next_obs, env_state, info = vec_env.step(k_env, state.env_state, to_env(action))
            # store
            step = transitions_from_step(state.obs, action, info)
            buffer = buffer_add(state.buffer, step)
            # an environment whose episode ended draws a new exploration std
            done = info.terminated | info.truncated
            noise_std = jnp.where(done, noise_stds(k_std), state.noise_std)
            obs_stats = state.obs_stats
            if config.normalize_obs:
                obs_stats = envs.update_stats(obs_stats, step.next_obs)
            # learn: replayed gradient steps once learning has started (stats NaN before)
            learner, stats = jax.lax.cond(
                step_index >= first_learning_step,
                lambda: gradient_steps(state.learner, buffer, lambda x: observe(obs_stats, x),
                                       k_learn, step_index - first_learning_step, config,
                                       optimizer),
                lambda: (state.learner, no_stats))
            return TrainState(learner=learner, buffer=buffer, env_state=env_state, obs=next_obs,
                              noise_std=noise_std, obs_stats=obs_stats, key=key), (info, stats)

        no_stats = {k: jnp.float32(jnp.nan) for k in ("critic_loss", "actor_loss", "q_mean")}
        step_indices = update_index * config.num_steps + jnp.arange(config.num_steps)
        state, (info, stats) = jax.lax.scan(env_step, state, step_indices)
        metrics = {k: jnp.nanmean(v) for k, v in stats.items()}
        metrics["gradient_steps"] = (step_indices >= first_learning_step).sum() \
            * config.updates_per_step
        metrics.update(envs.episode_metrics(info))
        return state, metrics

    def act(policy_params: dict, obs: jax.Array, key: jax.Array,
            deterministic: bool = False) -> jax.Array:
        """obs [N, *obs] -> actions [N, *action_shape] in the env's bounds: the deterministic
        policy's, or with exploration noise of the mean std of [min, max] (sampled)."""
        action = policy_action(policy_params["params"]["actor"],
                               observe(policy_params["obs_stats"], obs), config.activation)
        if not deterministic:
            action = explore(action, jnp.full(action.shape[:1], eval_noise),
                             jax.random.normal(key, action.shape))
        return to_env(action)

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

        # check_vma=False: a parameter built from a constant is still per seed
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
