"""Pure-function networks: MLPs, a convolutional torso for image observations, the tanh-squashed
normal policy of `--action-dist tanh_normal` and the policy head's distributions. The layers only:
each algorithm file owns its network (ppo.py's and impala.py's actor-critic, pqn.py's Q-network).

Parameters are plain pytrees (a list of {"w", "b"} dicts): they vmap over seeds and save with
numpy. Weights are orthogonal with a gain per layer (sqrt 2 for hidden layers; the caller's for
the output layer: 0.01 for policy logits and means, 1 for values); biases start at zero.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import distrax
import jax
import jax.numpy as jnp

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "elu": jax.nn.elu,
    "swish": jax.nn.swish,
}


def orthogonal(key: jax.Array, shape: tuple[int, int], gain: float = 1.0,
               iterations: int = 40) -> jax.Array:
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
    scheme: str = "orthogonal",
    layer_norm: bool = False,
) -> list[dict[str, jax.Array]]:
    """Layers mapping sizes[0] -> sizes[1] -> ... -> sizes[-1]; e.g. (4, 64, 64, 2). Weights:
    orthogonal with the gains (the output layer's `output_gain`), or `scheme="lecun_uniform"`,
    every layer alike and the gains unused (Brax's networks); biases zero. `layer_norm`: each
    hidden layer also has a layer norm's "scale" (ones) and "offset" (zeros), which `mlp_apply`
    applies after its activation, as Brax's MLP does with `layer_norm=True` (pqn.py's own
    Q-network applies them before it, purejaxql's order)."""
    keys = jax.random.split(key, len(sizes) - 1)
    layers = []
    for i, (k, fan_in, fan_out) in enumerate(zip(keys, sizes[:-1], sizes[1:])):
        gain = output_gain if i == len(sizes) - 2 else hidden_gain
        if scheme == "lecun_uniform":
            w = jax.nn.initializers.lecun_uniform()(k, (fan_in, fan_out), jnp.float32)
        else:
            w = orthogonal(k, (fan_in, fan_out), gain)
        layers.append({"w": w, "b": jnp.zeros(fan_out, jnp.float32)})
        if layer_norm and i < len(sizes) - 2:
            layers[-1].update(scale=jnp.ones(fan_out, jnp.float32),
                              offset=jnp.zeros(fan_out, jnp.float32))
    return layers


def layer_norm(layer: dict, x: jax.Array) -> jax.Array:
    """x [..., F] normalised over its last axis, then scaled and shifted by the layer's "scale"
    and "offset" [F] (flax's LayerNorm, epsilon 1e-6); unchanged for a layer without them."""
    if "scale" not in layer:
        return x
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-6) * layer["scale"] + layer["offset"]


def mlp_apply(params: list[dict[str, jax.Array]], x: jax.Array,
              activation: str = "tanh") -> jax.Array:
    """x [..., sizes[0]] -> [..., sizes[-1]]; the activation follows every layer but the last, and
    a layer norm follows it where the layer has one (flax's LayerNorm: epsilon 1e-6)."""
    act = ACTIVATIONS[activation]
    for layer in params[:-1]:
        x = layer_norm(layer, act(x @ layer["w"] + layer["b"]))
    last = params[-1]
    return x @ last["w"] + last["b"]


def use_cnn(torso: str, obs_shape: tuple[int, ...]) -> bool:
    """--torso auto|mlp|cnn for observations of `obs_shape`: auto picks the conv torso for
    images [H, W, C]; ValueError (one sentence) for cnn on anything else."""
    image = len(obs_shape) == 3
    if torso == "cnn" and not image:
        raise ValueError("--torso cnn needs image observations [H, W, C], but this env's have "
                         f"shape {list(obs_shape)}; use --torso mlp.")
    return torso == "cnn" or (torso == "auto" and image)


def cnn_init(key: jax.Array, image_shape: tuple[int, int, int], channels: Sequence[int],
             kernel: int = 3) -> tuple[list[dict[str, jax.Array]], int]:
    """'valid' kernel x kernel convolutions, stride 1, mapping C -> channels[0] -> ...; returns
    (params, number of output features). Kernels [k, k, C_in, C_out] are orthogonal as
    [k * k * C_in, C_out] matrices (gain sqrt 2), biases zero."""
    height, width, c_in = image_shape
    layers = []
    for k, c_out in zip(jax.random.split(key, len(channels)), channels):
        w = orthogonal(k, (kernel * kernel * c_in, c_out), 2.0**0.5).reshape(
            kernel, kernel, c_in, c_out)
        layers.append({"w": w, "b": jnp.zeros(c_out, jnp.float32)})
        height, width, c_in = height - kernel + 1, width - kernel + 1, c_out
    if height < 1 or width < 1:
        raise ValueError(f"--conv-channels {tuple(channels)}: {len(channels)} {kernel}x{kernel} "
                         f"convolutions do not fit a {image_shape[0]}x{image_shape[1]} image; "
                         "use fewer.")
    return layers, height * width * c_in


def cnn_apply(params: list[dict[str, jax.Array]], x: jax.Array, activation: str = "relu",
              normalize: Callable | None = None) -> jax.Array:
    """x [..., H, W, C] -> features [..., H' * W' * C'] (the activation follows every layer;
    `normalize(layer, x)`, where given, comes between a convolution and its activation).

    Each convolution is a matmul over k x k patches cut out with slices (im2col):
    lax.conv_general_dilated inside a scan body (the epochs' minibatch loop) ran about 20x
    slower on the CPU in jaxlib 0.10 (22 s against 1 s for a PPO update on SpaceInvaders).
    """
    act = ACTIVATIONS[activation]
    batch = x.shape[:-3]
    x = x.reshape((-1,) + x.shape[-3:]).astype(jnp.float32)  # MinAtar frames are bool
    for layer in params:
        k = layer["w"].shape[0]
        height, width = x.shape[1] - k + 1, x.shape[2] - k + 1
        patches = jnp.concatenate([x[:, i:i + height, j:j + width]
                                   for i in range(k) for j in range(k)], axis=-1)
        # [n, H', W', C_out]
        x = patches @ layer["w"].reshape(-1, layer["w"].shape[-1]) + layer["b"]
        x = act(x if normalize is None else normalize(layer, x))
    return x.reshape(batch + (-1,))


def mask_logits(logits: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Logits [..., A] with the invalid actions (mask [..., A] False) set to -1e9, so a
    categorical policy never samples them and their probability, entropy term and gradient
    are exactly 0 (a finite value: -inf would make 0 * log 0 a NaN). mask None: unchanged."""
    return logits if mask is None else jnp.where(mask, logits, -1e9)


# ---------------------------------------------------------------------------------------------
# Tanh-squashed normal policies (--action-dist tanh_normal; Brax PPO's default, Haarnoja et al.
# 2018): a normal over the pre-tanh action u with a state-dependent std; the env gets tanh(u)
# rescaled to its bounds. The algorithms store u and take log-probabilities (ratios) on u, where
# the tanh Jacobian, which depends on u alone, cancels.
# ---------------------------------------------------------------------------------------------
# u [..., A] -> tanh(u); log|det J| = sum log(1 - tanh(u)^2), stably
SQUASH = distrax.Block(distrax.Tanh(), 1)


def pre_tanh_normal(out: jax.Array, min_std: float) -> distrax.MultivariateNormalDiag:
    """An actor's output [..., 2A] = [loc, raw scale] -> the normal of the pre-tanh action u,
    batch [...], event [A], with scale = softplus(raw scale) + min_std (at least min_std)."""
    loc, raw_scale = jnp.split(out, 2, axis=-1)
    return distrax.MultivariateNormalDiag(loc, jax.nn.softplus(raw_scale) + min_std)


def to_bounds(u: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """Pre-tanh actions u [..., A] -> tanh(u) mapped from [-1, 1] onto [low, high] [A]; clipped,
    so that rounding (or tanh(u) = +-1 for huge u) never puts an action outside the bounds."""
    return jnp.clip(low + 0.5 * (high - low) * (jnp.tanh(u) + 1.0), low, high)


class Actions(NamedTuple):
    """How an on-policy algorithm samples, stores and hands over its policy's actions, chosen
    once from --action-dist by `actions_for`. squashed (tanh_normal): the stored action is the
    pre-tanh sample u with the log-prob of u, the env gets tanh(u) rescaled onto [low, high]
    [A], and the entropy is estimated from one sample, which needs standard-normal noise
    (`entropy_of`). Otherwise the stored action is the env's (discrete, or a gaussian sample the
    env clips)."""

    squashed: bool = False
    low: jax.Array | None = None
    high: jax.Array | None = None

    def step_keys(self, key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        """A rollout step's keys: (action, env, entropy noise or None)."""
        if self.squashed:
            k_action, k_env, k_noise = jax.random.split(key, 3)
            return k_action, k_env, k_noise
        k_action, k_env = jax.random.split(key)
        return k_action, k_env, None

    def sample(self, dist: distrax.Distribution, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(the action as stored, its log-prob). Squashed: the log-prob of u as stored, since
        distrax's sample_and_log_prob gives it for u before rounding, ulps away near saturation
        (|loc| >> scale), and the ratio would not start at exactly 1."""
        if not self.squashed:
            return dist.sample_and_log_prob(seed=key)
        u = dist.sample(seed=key)
        return u, dist.log_prob(u)

    def noise(self, key: jax.Array | None, shape: tuple) -> jax.Array | None:
        """Standard-normal noise `shape` for `entropy_of`'s estimate; None where it is exact."""
        return jax.random.normal(key, shape) if self.squashed else None

    def to_env(self, action: jax.Array) -> jax.Array:
        """Stored actions [..., A] -> what the env takes."""
        return to_bounds(action, self.low, self.high) if self.squashed else action

    def act(self, dist: distrax.Distribution, key: jax.Array, deterministic: bool) -> jax.Array:
        """The env's action: of the distribution's mode, or of a sample."""
        return self.to_env(dist.mode() if deterministic else dist.sample(seed=key))


def actions_for(action_dist: str, vec_env, env_id: str) -> Actions:
    """Before compiling, from --action-dist and the env (its id for messages); for tanh_normal,
    the action bounds (low [A], high [A], flattened). ValueError (one sentence naming the env)
    where tanh_normal meets discrete actions or bounds that are not finite: a squashed normal
    needs a Box with finite bounds."""
    if action_dist != "tanh_normal":
        return Actions()
    if vec_env.discrete:
        raise ValueError("--action-dist tanh_normal needs continuous (Box) actions and --env "
                         f"{env_id} has discrete ones; leave --action-dist at gaussian.")
    low, high = vec_env.action_low.reshape(-1), vec_env.action_high.reshape(-1)
    # Inside a sweep's program the bounds are traced: the build before it checked the same bounds.
    traced = isinstance(low, jax.core.Tracer) or isinstance(high, jax.core.Tracer)
    if not traced and not (jnp.isfinite(low).all() and jnp.isfinite(high).all()):
        raise ValueError("--action-dist tanh_normal needs finite action bounds and --env "
                         f"{env_id}'s are [{low.tolist()}, {high.tolist()}]; use --action-dist "
                         "gaussian.")
    return Actions(True, low, high)


def entropy_of(dist: distrax.Distribution, noise: jax.Array | None = None) -> jax.Array:
    """The policy's entropy [...]: exact, or with a tanh_normal's noise [..., A] (`Actions.noise`)
    Brax PPO's one-sample estimate of the squashed action's,
    H(a) = H(u) + E[sum log(1 - tanh(u)^2)] with the expectation taken at u = loc + scale * noise,
    so the gradient reaches loc and scale. The Jacobian term is <= 0 and falls as |u| grows: the
    bonus does not reward saturated actions."""
    if noise is None:
        return dist.entropy()
    return dist.entropy() + SQUASH.forward_log_det_jacobian(dist.loc + dist.scale_diag * noise)


def head_distribution(out: jax.Array, params: dict, action_mask: jax.Array | None = None,
                      action_dist: str = "gaussian", min_std: float = 0.001
                      ) -> distrax.Distribution:
    """The policy head's output out [..., D] -> the action distribution, batch shape [...]:
    categorical logits (masked by action_mask [..., A]); a normal around out with
    params["log_std"] (gaussian); or the pre-tanh normal of [loc, raw scale] (tanh_normal)."""
    if action_dist == "tanh_normal":
        return pre_tanh_normal(out, min_std)
    if "log_std" not in params:
        return distrax.Categorical(logits=mask_logits(out, action_mask))
    return distrax.MultivariateNormalDiag(out, jnp.exp(params["log_std"]))
