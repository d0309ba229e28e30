"""Pure-function MLPs: `mlp_init(key, sizes) -> params`, `mlp_apply(params, x) -> y`.

Parameters are plain pytrees (a list of {"w", "b"} dicts), so they vmap over seeds,
save with numpy and need no framework. Weights use orthogonal initialisation with a
gain per layer (sqrt(2) for hidden layers by default, chosen for the output layer by
the caller: 0.01 for policy logits and means, 1.0 for values), biases start at zero.
"""

from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "elu": jax.nn.elu,
    "swish": jax.nn.swish,
}


def orthogonal(key: jax.Array, shape: tuple[int, int], gain: float = 1.0, iterations: int = 40) -> jax.Array:
    """A random (semi-)orthogonal matrix times `gain`, with the law of QR-based orthogonal init.

    It is the polar factor of a Gaussian matrix, found by Newton-Schulz iteration (matmuls
    only). jax.nn.initializers.orthogonal calls LAPACK's QR, and a vmapped (batched) QR on
    several CPU devices at once deadlocks XLA's intra-op thread pool in jaxlib 0.10
    (seen here: 4+ seeds on 2 devices hung forever), so it is avoided inside train.
    """
    rows, cols = shape
    tall = (max(rows, cols), min(rows, cols))
    a = jax.random.normal(key, tall, jnp.float32)
    # Scale so every singular value lies in (0, 1]; each iteration moves them towards 1.
    x = a / jnp.sqrt(jnp.linalg.norm(a.T @ a))
    x = jax.lax.fori_loop(0, iterations, lambda _, x: 1.5 * x - 0.5 * x @ (x.T @ x), x)
    return gain * (x if rows >= cols else x.T)


def mlp_init(
    key: jax.Array,
    sizes: Sequence[int],
    output_gain: float = 1.0,
    hidden_gain: float = 2.0**0.5,
) -> list[dict[str, jax.Array]]:
    """Layers mapping sizes[0] -> sizes[1] -> ... -> sizes[-1]; e.g. (4, 64, 64, 2)."""
    keys = jax.random.split(key, len(sizes) - 1)
    layers = []
    for i, (k, fan_in, fan_out) in enumerate(zip(keys, sizes[:-1], sizes[1:])):
        gain = output_gain if i == len(sizes) - 2 else hidden_gain
        w = orthogonal(k, (fan_in, fan_out), gain)
        layers.append({"w": w, "b": jnp.zeros(fan_out, jnp.float32)})
    return layers


def mlp_apply(params: list[dict[str, jax.Array]], x: jax.Array, activation: str = "tanh") -> jax.Array:
    """x [..., sizes[0]] -> [..., sizes[-1]]; the activation follows every layer but the last."""
    act = ACTIVATIONS[activation]
    for layer in params[:-1]:
        x = act(x @ layer["w"] + layer["b"])
    last = params[-1]
    return x @ last["w"] + last["b"]
