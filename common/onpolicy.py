"""The on-policy math the algorithm files share: GAE, PPO's clipped surrogate and value losses,
the approximate KL, per-minibatch advantage normalisation, the optimizer, and the epoch/minibatch
loop (`learn`) each file drives with its own gradient. Pure functions, tested against hand
computations and plain-Python loops (tests/test_ppo.py, tests/test_gae.py). They take values,
never a Config: a file unpacks its Config at the call, so a renamed field fails where the reader
is looking.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from scanrl.common import algorithm


def gae(rewards, values, next_values, terminated, done, gamma, gae_lambda
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
    terminated, done = terminated.astype(rewards.dtype), done.astype(rewards.dtype)
    deltas = rewards + gamma * (1.0 - terminated) * next_values - values

    def backward(next_advantage, step):
        delta, d = step
        advantage = delta + gamma * gae_lambda * (1.0 - d) * next_advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(values[0]), (deltas, done), reverse=True)
    return advantages, advantages + values


def clipped_surrogate_loss(ratio, advantages, clip_eps, dual_clip_param=None) -> jax.Array:
    """-mean(min(r A, clip(r, 1-eps, 1+eps) A)); with dual clip c, where A < 0 the
    objective is max(that, c A), which bounds the loss of very large ratios. Inputs [B]."""
    objective = jnp.minimum(ratio * advantages,
                            jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages)
    if dual_clip_param is not None:
        objective = jnp.where(advantages < 0, jnp.maximum(objective, dual_clip_param * advantages),
                              objective)
    return -objective.mean()


def value_loss(values, old_values, targets, clip_eps=None) -> jax.Array:
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


def normalize_advantages(advantages: jax.Array) -> jax.Array:
    """Zero mean, unit (population) std over one minibatch [B]."""
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def make_optimizer(max_grad_norm, adam_eps, scale_by=optax.scale_by_adam
                   ) -> optax.GradientTransformation:
    """Global-norm clipping at max_grad_norm (0: none), then `scale_by`'s scaling (Adam's;
    pqn.py passes optax.scale_by_radam) with adam_eps. The step size is not in it: `learn`
    applies each update's learning rate as a value (optax.scale_by_learning_rate), so a schedule
    or a sweep's traced rate needs no optimizer state."""
    return optax.chain(optax.clip_by_global_norm(algorithm.grad_norm_bound(max_grad_norm)),
                       scale_by(eps=adam_eps))


def lr_schedule(learning_rate, num_updates, anneal) -> optax.Schedule:
    """Update index -> learning rate: learning_rate decayed linearly to 0 over num_updates with
    `anneal`, else constant. A file passes anneal False for a run without a budget
    (--total-timesteps 0), which has no end to anneal to."""
    if anneal:
        return optax.linear_schedule(learning_rate, 0.0, num_updates)
    return optax.constant_schedule(learning_rate)


def learn(params, opt_state, samples, key, gradient, optimizer, learning_rate, num_epochs,
          num_minibatches, prepare=None, target_kl=None):
    """num_epochs epochs of num_minibatches optimizer steps of size `learning_rate` over one
    rollout's samples, leaves [S, ...]: transitions in ppo.py and grpo.py, whole sequences in
    ppo_rnn.py, whole trajectories (environment-major) in impala.py, each file passing its own
    `gradient(params, minibatch) -> (grads, stats)`. `prepare(params, samples)`, where given,
    makes each epoch's samples from the params it starts with (PPO's recompute_advantages).
    With `target_kl` (None: off) the update stops at the first minibatch whose
    stats["approx_kl"] exceeds it. Returns params, optimizer state and loss stats
    [num_epochs, num_minibatches]."""
    step_size = optax.scale_by_learning_rate(learning_rate)  # stateless: -learning_rate * update

    def update_minibatch(carry, minibatch):
        params, opt_state, stopped = carry
        grads, stats = gradient(params, minibatch)
        updates, new_opt_state = optimizer.update(grads, opt_state)
        updates, _ = step_size.update(updates, optax.EmptyState())
        new_params = optax.apply_updates(params, updates)
        if target_kl is not None:  # KL measured before this step: once too large, stop the update
            stopped = stopped | (stats["approx_kl"] > target_kl)
            keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(stopped, o, n), new, old)
            new_params, new_opt_state = keep(new_params, params), keep(new_opt_state, opt_state)
        stats["applied"] = 1.0 - stopped.astype(jnp.float32)
        return (new_params, new_opt_state, stopped), stats

    def update_epoch(carry, epoch_key):
        epoch_samples = samples if prepare is None else prepare(carry[0], samples)
        num_samples = jax.tree.leaves(epoch_samples)[0].shape[0]
        order = jax.random.permutation(epoch_key, num_samples)
        shape = (num_minibatches, num_samples // num_minibatches)
        minibatches = jax.tree.map(lambda x: x[order].reshape(shape + x.shape[1:]), epoch_samples)
        return jax.lax.scan(update_minibatch, carry, minibatches)

    epoch_keys = jax.random.split(key, num_epochs)
    (params, opt_state, _), stats = jax.lax.scan(
        update_epoch, (params, opt_state, jnp.array(False)), epoch_keys)
    return params, opt_state, stats
