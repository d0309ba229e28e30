"""Q-learning over parallel environments, shared by algos/pqn.py and algos/pqn_rnn.py: the
exploration schedule and policy, the bootstrap over valid actions, Q(lambda) returns over a
time-major rollout (pqn.py's module docstring gives the recursion) and VDN's returns, one per
team of a multi-agent rollout. Pure functions of values; tested in tests/test_pqn.py and (VDN's)
tests/test_jaxmarl.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def epsilon_schedule(start, end, horizon, update_index: jax.Array) -> jax.Array:
    """start -> end linearly over the first `horizon` updates, then end; arithmetic, so a sweep
    can trace any of them (horizon 0: end from the first update)."""
    progress = jnp.where(horizon > 0, update_index / jnp.maximum(horizon, 1e-9), 1.0)
    return start + (end - start) * jnp.minimum(progress, 1.0)


def epsilon_greedy(key: jax.Array, q: jax.Array, epsilon: jax.Array,
                   mask: jax.Array | None = None) -> jax.Array:
    """q [N, A] -> actions [N]: with probability epsilon a uniformly random action, else the
    argmax of q; with mask [N, A] both choose among the valid actions only."""
    k_explore, k_random = jax.random.split(key)
    if mask is None:
        greedy = q.argmax(-1)
        random = jax.random.randint(k_random, greedy.shape, 0, q.shape[-1])
    else:
        greedy = jnp.where(mask, q, -jnp.inf).argmax(-1)
        random = jax.random.categorical(k_random, jnp.where(mask, 0.0, -jnp.inf))
    return jnp.where(jax.random.uniform(k_explore, greedy.shape) < epsilon, random, greedy)


def q_lambda_returns(rewards, next_q, terminated, done, gamma, q_lambda) -> jax.Array:
    """Q(lambda) returns G [T, N] over a time-major rollout (the module docstring's recursion).

    All inputs [T, N]: rewards r_t, next_q = max_a Q(s'_t, a) of the observation step t reached,
    terminated (true ends), done = terminated | truncated. The last step bootstraps from its
    next_q alone (G_T = next_q_{T-1}), as does every step where an episode ended.
    """
    terminated, done = terminated.astype(rewards.dtype), done.astype(rewards.dtype)

    def backward(next_return, step):
        reward, q, term, d = step
        g = reward + gamma * (1.0 - term) * (q + q_lambda * (1.0 - d) * (next_return - q))
        return g, g

    _, returns = jax.lax.scan(backward, next_q[-1], (rewards, next_q, terminated, done),
                              reverse=True)
    return returns


def max_valid_q(q: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """q [..., A] -> max_a q [...] over the valid actions of mask [..., A]; over all of them
    where none is valid (an env's mask at a terminal state may be all False, and a -inf
    bootstrap would turn the zero a termination multiplies it by into NaN)."""
    if mask is None:
        return q.max(-1)
    valid = mask | ~mask.any(-1, keepdims=True)
    return jnp.where(valid, q, -jnp.inf).max(-1)


def teams(x: jax.Array, num_agents: int) -> jax.Array:
    """A multi-agent rollout's rows [T, N * M, ...] (VecEnv's, agent-minor) -> [T, N, M, ...]."""
    return x.reshape(x.shape[:1] + (-1, num_agents) + x.shape[2:])


def vdn_returns(rewards, next_q, terminated, done, num_agents, team_reward, gamma,
                q_lambda) -> jax.Array:
    """VDN's Q(lambda) returns [T, N], one per team, from its agents' rows [T, N * M]: the
    team's reward (`team_reward` of its agents' [..., M]), the bootstrap sum_i max_a Q(o'_i, a),
    and the episode's end, which every agent of a team shares."""
    return q_lambda_returns(team_reward(teams(rewards, num_agents)),
                            teams(next_q, num_agents).sum(-1),
                            teams(terminated, num_agents)[..., 0],
                            teams(done, num_agents)[..., 0], gamma, q_lambda)
