"""What the off-policy files (sac.py, td3.py) share: the replay buffer, a circular buffer per seed
held in the train state, with n-step sampling whose windows never cross an episode's end, and
C51's categorical projection. Pure functions, tested against plain-Python loops and rlax
(tests/test_offpolicy.py). Each file owns its networks.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from scanrl.common import envs


class Transitions(NamedTuple):
    """Transitions, leaves [..., ...]: one step of every environment is [N, ...]."""

    obs: jax.Array  # [..., obs_dim] raw observation the action was taken in
    action: jax.Array  # [..., A] action in [-1, 1] (before rescaling to the env's bounds)
    reward: jax.Array  # [...]
    next_obs: jax.Array  # [..., obs_dim] observation reached, before any auto-reset
    terminated: jax.Array  # [...] bool: a true end (zeroes the bootstrap)
    truncated: jax.Array  # [...] bool: a time-limit cut (bootstraps; an n-step window stops)


class ReplayBuffer(NamedTuple):
    """`rows` rows of `num_envs` transitions each (data leaves [rows, N, ...])."""

    data: Transitions
    next_row: jax.Array  # int32 scalar: the row the next insertion overwrites
    filled_rows: jax.Array  # int32 scalar: rows written so far, at most rows


def transitions_from_step(obs: jax.Array, action: jax.Array, info: envs.StepInfo) -> Transitions:
    """What the buffer stores for one step of every environment (leaves [N, ...]): the next
    observation is `info.final_obs`, the one the step reached before any auto-reset, so a
    time-limit cut (truncated, not terminated) bootstraps from the state it reached."""
    flat = lambda x: x.reshape(x.shape[0], -1)
    return Transitions(flat(obs), action, info.reward, flat(info.final_obs), info.terminated,
                       info.truncated)


def buffer_init(rows: int, num_envs: int, obs_dim: int, action_dim: int) -> ReplayBuffer:
    data = Transitions(
        obs=jnp.zeros((rows, num_envs, obs_dim)),
        action=jnp.zeros((rows, num_envs, action_dim)),
        reward=jnp.zeros((rows, num_envs)),
        next_obs=jnp.zeros((rows, num_envs, obs_dim)),
        terminated=jnp.zeros((rows, num_envs), bool),
        truncated=jnp.zeros((rows, num_envs), bool),
    )
    return ReplayBuffer(data, jnp.int32(0), jnp.int32(0))


def buffer_add(buffer: ReplayBuffer, step: Transitions) -> ReplayBuffer:
    """Write one step of every environment (leaves [N, ...]) over the oldest row."""
    data = jax.tree.map(lambda all_rows, row: all_rows.at[buffer.next_row].set(row),
                        buffer.data, step)
    rows = buffer.data.reward.shape[0]
    return ReplayBuffer(data, (buffer.next_row + 1) % rows,
                        jnp.minimum(buffer.filled_rows + 1, rows))


def buffer_sample(buffer: ReplayBuffer, key: jax.Array, batch_size: int, n_step: int,
                  gamma: float) -> tuple[Transitions, jax.Array]:
    """`batch_size` n-step transitions from starts drawn uniformly, with replacement, from the
    written rows only (the buffer must hold at least one): (transitions, discount), leaves
    [batch_size, ...]. A start's window is its environment's next n_step stored steps, cut
    after the first that ended an episode (terminated or truncated) and at the newest
    stored step; its reward is the window's sum of gamma^k r_k, its next_obs, terminated and
    truncated are the last step's, and discount = gamma ** the window's length (n_step 1:
    the stored transition itself and gamma)."""
    k_row, k_env = jax.random.split(key)
    rows, num_envs = buffer.data.reward.shape
    row = jax.random.randint(k_row, (batch_size,), 0, buffer.filled_rows)
    env = jax.random.randint(k_env, (batch_size,), 0, num_envs)
    if n_step == 1:  # the stored transitions themselves
        return jax.tree.map(lambda x: x[row, env], buffer.data), gamma
    k = jnp.arange(n_step)
    window = (row[:, None] + k) % rows  # [B, n]: the start and the steps after it
    available = (buffer.next_row - 1 - row) % rows + 1  # steps stored from the start on
    ended = (buffer.data.terminated | buffer.data.truncated)[window, env[:, None]]
    ended_before = (jnp.cumsum(ended, axis=1) - ended) > 0
    used = (k < available[:, None]) & ~ended_before  # [B, n]: never a step of a later episode
    length = used.sum(axis=1)  # [B], at least 1
    last = window[jnp.arange(batch_size), length - 1]  # [B]: the window's last row
    rewards = buffer.data.reward[window, env[:, None]]  # [B, n]
    first = jax.tree.map(lambda x: x[row, env], buffer.data)
    final = jax.tree.map(lambda x: x[last, env], buffer.data)
    batch = first._replace(reward=(jnp.where(used, gamma ** k, 0.0) * rewards).sum(axis=1),
                           next_obs=final.next_obs, terminated=final.terminated,
                           truncated=final.truncated)
    return batch, gamma ** length.astype(jnp.float32)


def categorical_projection(atoms: jax.Array, probs: jax.Array, support: jax.Array) -> jax.Array:
    """C51's projection (Bellemare et al. 2017, arXiv:1707.06887): the distribution with
    probabilities probs [B, K] at atoms [B, K] onto the evenly spaced support [K]. Atoms are
    clipped to [support[0], support[-1]]; each one's mass is split between its two neighbouring
    support atoms in proportion to nearness (the hat function max(0, 1 - |b - i|), b the atom's
    position in units of the spacing)."""
    k = support.shape[0]
    position = (jnp.clip(atoms, support[0], support[-1]) - support[0]) / (support[1] - support[0])
    hat = jnp.clip(1.0 - jnp.abs(position[..., None, :] - jnp.arange(k)[:, None]), 0.0, 1.0)
    return (hat * probs[..., None, :]).sum(-1)  # [B, K]: support atom i from every atom j


def smaller_mean_distribution(logits: jax.Array, support: jax.Array) -> jax.Array:
    """Clipped double-Q for two categorical critics (as FastTD3): per sample, the probabilities
    [B, K] of whichever of the two distributions (logits [2, B, K] over the support [K]) has the
    smaller expected value."""
    probs = jax.nn.softmax(logits)  # [2, B, K]
    smaller = (probs @ support).argmin(axis=0)  # [B]
    return jnp.where(smaller[:, None] == 0, probs[0], probs[1])
