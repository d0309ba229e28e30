"""The vectorised stepping every algorithm needs (`VecEnv`, `episode_metrics`), and running
statistics for observation normalisation and reward scaling (`RunningStats`).

gymnax is imported when first needed (`gymnax()`): its import runs JAX computations, which
would fix JAX's device count before `cores.use_cpu_cores()` could set it.
"""

from __future__ import annotations

import importlib
import math
import types
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

# folded into an update's key to draw new cached starts (VecEnv.with_fresh_starts)
START_TAG = 0x57A27
DATA_AXIS = "data"  # the mesh axis that splits one seed's environments (common/harness/devices.py)


def shard_envs(tree: Any, axis: int = 0) -> Any:
    """Place `axis` (the environments) of every leaf on the mesh's "data" devices.

    Data parallelism is this one constraint: XLA's partitioner splits the environments'
    work over the devices and inserts the reductions (gradient means, statistics) that the
    math needs. The identity outside a mesh with a "data" axis of more than one device.
    """
    mesh = jax.sharding.get_abstract_mesh()
    if DATA_AXIS not in mesh.axis_names or mesh.shape[DATA_AXIS] == 1:
        return tree

    def constrain(x):
        if getattr(x, "ndim", 0) <= axis:
            return x
        return jax.lax.with_sharding_constraint(x, P(*(None,) * axis, DATA_AXIS))

    return jax.tree.map(constrain, tree)


def gymnax() -> types.ModuleType:
    """The gymnax module, imported on first use."""
    return importlib.import_module("gymnax")


def is_discrete(env: Any, env_params: Any) -> bool:
    spaces = gymnax().environments.spaces
    space = env.action_space(env_params)
    if isinstance(space, spaces.Discrete):
        return True
    if isinstance(space, spaces.Box):
        return False
    raise ValueError(f"Unsupported action space {type(space).__name__}; scanrl handles Discrete "
                     "and Box.")


# The optional hooks an env may have beyond gymnax's `Environment`, each documented with the rest
# of a suite's contract in common/suites/__init__.py's `EnvHooks` (tests/test_suites.py: the same
# names); the kit keeps the names alone, so it imports nothing of common/suites/.
ENV_HOOKS = frozenset({"action_mask", "restart_finished", "cached_starts", "policy_obs_size",
                       "render_rgb", "render_rgb_jax", "num_agents", "team_reward",
                       "episode_limit", "name", "evaluation_params"})


def hook(env: Any, name: str) -> Any:
    """`env`'s optional hook `name` (one of ENV_HOOKS), None where the env has none."""
    if name not in ENV_HOOKS:
        raise ValueError(f"{name!r} is not an optional env hook: declare it in suites.EnvHooks "
                         "and envs.ENV_HOOKS first.")
    return getattr(env, name, None)


class VecEnvState(NamedTuple):
    env_state: Any  # gymnax state, leaves [N, ...]
    episode_return: jax.Array  # [N] return of the running episode so far
    episode_length: jax.Array  # [N] int32 steps of the running episode so far
    # cached starts (obs [N, *obs], env states [N, ...]) of an env with `cached_starts`
    starts: Any = None


class StepInfo(NamedTuple):
    """What one vectorised step reports, each leaf [N, ...]."""

    reward: jax.Array  # [N] float32
    terminated: jax.Array  # [N] bool: a true end, no continuation value
    truncated: jax.Array  # [N] bool: a time-limit cut, bootstrap from final_obs
    final_obs: jax.Array  # [N, *obs] observation reached by this step, before any reset
    episode_return: jax.Array  # [N] return of the episode that ended here, 0 where none did
    episode_length: jax.Array  # [N] length of the episode that ended here, 0 where none did
    # {name: [N] float} how an episode that ended here ended, by the env (SMAX's win_rate: 1
    # for a battle won), averaged over the episodes that ended by `episode_metrics`; None: none
    outcomes: Any = None


class VecEnv:
    """`num_envs` copies of a gymnax environment stepped together; pure, jit-friendly. Continuous
    actions are clipped to the space's bounds. A step reports `terminated` and `truncated` apart,
    with the observation it reached before any auto-reset, so a time-limit cut can bootstrap from
    V(final observation); and the return and length of the episodes that ended.

    With data parallelism (common/harness/loop.py's programs, on a mesh whose "data" axis has D
    devices) the environments of all it returns are split over the D devices (`shard_envs`),
    with the same values whatever D is.

    Optional hooks of the env change the stepping (common/suites' EnvHooks):
    `action_mask` (the valid actions, given to the policy by `action_mask(vec_state)`),
    `restart_finished` (the env restarts its finished environments itself) and
    `cached_starts` (a finished environment returns to its cached first state, drawn anew by
    `with_fresh_starts`).
    """

    def __init__(self, env: Any, env_params: Any, num_envs: int):
        self.env, self.env_params = env, env_params
        # an env of M agents (`num_agents`) is M rows: num_envs * M in all, agent-minor
        self.num_agents, self.num_games = hook(env, "num_agents"), num_envs
        self.num_envs = num_envs * (self.num_agents or 1)
        # a team's reward from its agents' [..., M]: the env's own rule, else their sum
        self.team_reward = hook(env, "team_reward") or (lambda reward: reward.sum(-1))
        self.discrete = is_discrete(env, env_params)
        self.masked = callable(hook(env, "action_mask"))
        self.restart_finished = hook(env, "restart_finished")
        self.cached_starts = hook(env, "cached_starts")
        space = env.action_space(env_params)
        self.obs_shape = tuple(env.observation_space(env_params).shape)
        self.obs_dim = math.prod(self.obs_shape)
        # a policy reads the first policy_obs_dim features: all, or a Playground locomotion task's
        # `state` before its `privileged_state` (common/suites/base.py)
        self.policy_obs_dim = hook(env, "policy_obs_size") or self.obs_dim
        if self.discrete:
            self.num_actions, self.action_shape = int(space.n), ()
        else:
            self.action_shape = tuple(space.shape)
            self.action_dim = math.prod(self.action_shape)
            self.action_low = jnp.broadcast_to(jnp.asarray(space.low, jnp.float32),
                                               self.action_shape)
            self.action_high = jnp.broadcast_to(jnp.asarray(space.high, jnp.float32),
                                                self.action_shape)

    def reset(self, key: jax.Array, env_keys: jax.Array | None = None
              ) -> tuple[jax.Array, VecEnvState]:
        """obs [N, *obs] and the state. `env_keys`: reset keys [N] (e.g. repeated, so that several
        environments start from the same state); default: split from `key`."""
        keys = shard_envs(jax.random.split(key, self.num_games) if env_keys is None else env_keys)
        obs, env_state = jax.vmap(self.env.reset, in_axes=(0, None))(keys, self.env_params)
        obs, zeros = self.rows(obs), jnp.zeros(self.num_envs)
        starts = (obs, env_state) if self.cached_starts else None
        return shard_envs((obs, VecEnvState(env_state, zeros, jnp.zeros(self.num_envs, jnp.int32),
                                            starts)))

    def with_fresh_starts(self, update: Any, steps_per_env: int) -> Any:
        """`update(state, update_index)` that first draws new cached starts into `state.env_state`
        for every environment (running episodes go on), once every ceil(cached_starts /
        steps_per_env) updates, so that no algorithm's update does; `update` itself where the env
        caches none. The schedule follows the update's index, the same for every seed, so the
        choice stays a real branch under the seed vmap (a per-seed one would compute the resets on
        every update); the keys come from `state.key` with a tag folded in. `common/algorithm.py`'s
        `Algorithm` applies it."""
        if not self.cached_starts:
            return update
        every = max(1, -(-self.cached_starts // steps_per_env))

        def refreshed(state, update_index):
            def refresh(env_state):
                keys = shard_envs(jax.random.split(jax.random.fold_in(state.key, START_TAG),
                                                   self.num_games))
                return env_state._replace(
                    starts=jax.vmap(self.env.reset, in_axes=(0, None))(keys, self.env_params))

            env_state = jax.lax.cond((update_index + 1) % every == 0, refresh, lambda s: s,
                                     state.env_state)
            return update(state._replace(env_state=env_state), update_index)

        return refreshed

    def action_mask(self, state: VecEnvState) -> jax.Array | None:
        """The valid actions [N, A] bool in each environment's current state; None when the
        env has no action mask (every action is valid)."""
        if not self.masked:
            return None
        return self.rows(jax.vmap(self.env.action_mask, in_axes=(0, None))(state.env_state,
                                                                          self.env_params))

    def flat_obs(self, obs: jax.Array) -> jax.Array:
        """[..., *obs_shape] -> [..., obs_dim], what an MLP takes."""
        return obs.reshape(obs.shape[: obs.ndim - len(self.obs_shape)] + (self.obs_dim,))

    def observe(self, obs: jax.Array, stats: RunningStats | None = None, image: bool = False,
                policy_part: bool = False) -> jax.Array:
        """What a network reads of observations [..., *obs_shape]: flat vectors [..., obs_dim],
        normalised by `stats` where given; then images [..., *obs_shape] for a conv torso
        (`image`), or with `policy_part` the first policy_obs_dim features (a Playground
        locomotion task's `state`, before its `privileged_state`)."""
        obs = self.flat_obs(obs)
        obs = obs if stats is None else normalize(stats, obs)
        if image:
            return obs.reshape(obs.shape[:-1] + self.obs_shape)
        return obs[..., :self.policy_obs_dim] if policy_part else obs

    def clip_action(self, action: jax.Array) -> jax.Array:
        """Continuous actions are clipped to the space's bounds; discrete ones pass through."""
        return action if self.discrete else jnp.clip(action, self.action_low, self.action_high)

    def step(self, key: jax.Array, state: VecEnvState, action: jax.Array):
        """One step of every copy; auto-resets finished episodes.

        Args: action [N, *action] (continuous ones may lie outside the bounds).
        Returns (obs [N, *obs] after any reset, new state, StepInfo).
        """
        if self.restart_finished is not None:
            key, k_reset = jax.random.split(key)
        keys = shard_envs(jax.random.split(key, self.num_games))
        obs, env_state, reward, terminated, truncated, info = jax.vmap(
            self.env.step, in_axes=(0, 0, 0, None)
        )(keys, state.env_state, self.games(self.clip_action(action)), self.env_params)
        obs, reward, terminated, truncated, final_obs, outcomes = self.rows(
            (obs, reward, terminated, truncated, info["final_observation"],
             info.get("outcomes")))
        reward = reward.astype(jnp.float32)
        done = terminated | truncated
        if self.restart_finished is not None:
            obs, env_state = self.restart_finished(k_reset, done, obs, env_state, self.env_params)
        elif self.cached_starts:
            obs, env_state = jax.tree.map(partial(self.restart, done), state.starts,
                                          (obs, env_state))
        episode_return = state.episode_return + reward
        episode_length = state.episode_length + 1
        step_info = StepInfo(
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
            episode_return=jnp.where(done, episode_return, 0.0),
            episode_length=jnp.where(done, episode_length, 0),
            outcomes=outcomes,
        )
        new_state = VecEnvState(
            env_state, jnp.where(done, 0.0, episode_return), jnp.where(done, 0, episode_length),
            state.starts
        )
        return shard_envs((obs, new_state, step_info))

    def rows(self, tree: Any) -> Any:
        """Leaves [N, M, ...] of an env of agents -> [N * M, ...]; the identity for one agent."""
        if self.num_agents is None:
            return tree
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), tree)

    def games(self, tree: Any) -> Any:
        """The inverse of `rows`: leaves [N * M, ...] -> [N, M, ...]."""
        if self.num_agents is None:
            return tree
        return jax.tree.map(
            lambda x: x.reshape((self.num_games, self.num_agents) + x.shape[1:]), tree)

    @staticmethod
    def restart(done: jax.Array, new: jax.Array, old: jax.Array) -> jax.Array:
        """`new` [N, ...] where `done` [N], else `old`."""
        return jnp.where(done.reshape(done.shape + (1,) * (old.ndim - 1)), new, old)


def episode_metrics(info: StepInfo, vec_env: VecEnv | None = None) -> dict[str, jax.Array]:
    """Mean return and length of the episodes that ended within `info` (leaves [T, N]).

    NaN when none ended, so a rollout shorter than an episode never reports a fake 0. For an
    env of M agents (`vec_env.num_agents`; rows agent-minor), an episode is a row's, and the
    team's return (`team_reward` of its agents' returns) and each agent's are added:
    `team_return`, `agent_0_return`, ...
    """
    done = info.terminated | info.truncated
    count, total_return, total_length = (done.sum(), info.episode_return.sum(),
                                         info.episode_length.sum())
    safe = jnp.maximum(count, 1)
    nan = jnp.float32(jnp.nan)
    metrics = {
        "episode_return": jnp.where(count > 0, total_return / safe, nan),
        "episode_length": jnp.where(count > 0, total_length / safe, nan),
        "episodes": count,
    }
    for name, value in (info.outcomes or {}).items():  # the env's, of the episodes that ended
        metrics[name] = jnp.where(count > 0, jnp.where(done, value, 0.0).sum() / safe, nan)
    if vec_env is None or vec_env.num_agents is None:
        return metrics
    teams = lambda x: x.reshape(x.shape[:-1] + (-1, vec_env.num_agents))  # noqa: E731
    returns = teams(info.episode_return)  # [..., N, M]; a team's agents end together
    ended = teams(done)[..., 0].sum()
    mean = lambda x: jnp.where(ended > 0, x.sum() / jnp.maximum(ended, 1), nan)  # noqa: E731
    metrics["team_return"] = mean(vec_env.team_reward(returns))
    metrics.update({f"agent_{i}_return": mean(returns[..., i])
                    for i in range(vec_env.num_agents)})
    return metrics


class RunningStats(NamedTuple):
    """Running mean and variance of a stream of arrays shaped `shape`."""

    mean: jax.Array
    var: jax.Array
    count: jax.Array  # scalar float32


def init_stats(shape: tuple[int, ...] = ()) -> RunningStats:
    return RunningStats(jnp.zeros(shape), jnp.ones(shape), jnp.float32(1e-4))


def update_stats(stats: RunningStats, batch: jax.Array) -> RunningStats:
    """Merge a batch `[..., *shape]` into the stats (Chan et al.'s parallel update)."""
    shape = stats.mean.shape
    flat = batch.reshape((-1,) + shape)
    batch_mean = flat.mean(0)
    batch_sq = (flat**2).mean(0)
    batch_count = jnp.float32(flat.shape[0])
    batch_var = jnp.maximum(batch_sq - batch_mean**2, 0.0)
    total = stats.count + batch_count
    delta = batch_mean - stats.mean
    mean = stats.mean + delta * batch_count / total
    m2 = (stats.var * stats.count + batch_var * batch_count
          + delta**2 * stats.count * batch_count / total)
    return RunningStats(mean, m2 / total, total)


def normalize(stats: RunningStats, x: jax.Array, clip: float = 10.0) -> jax.Array:
    """(x - mean) / std, clipped to [-clip, clip]."""
    return jnp.clip((x - stats.mean) / jnp.sqrt(stats.var + 1e-8), -clip, clip)


def scale(stats: RunningStats, x: jax.Array) -> jax.Array:
    """x / std without centring: reward scaling by the std of the discounted return."""
    return x / jnp.sqrt(stats.var + 1e-8)
