"""The conv torso's cost on the CPU, by how the convolution is written: forward and backward
of 1,024 SpaceInvaders-shaped frames [10, 10, 6] through one 3x3 convolution with 16
channels and a 64-unit relu layer (PPO's MinAtar preset), as 8 gradient steps in a scan
(an epoch's minibatch loop), median of 5 calls, per step:

- im2col: common/nets.py's cnn_apply (patches cut with slices, one matmul);
- shifted sum: nine [.., C] @ [C, 16] matmuls of shifted frames, added;
- lax.conv: jax.lax.conv_general_dilated;
- mlp: no convolution, the flattened frame into a (64, 64) relu MLP (--torso mlp).

    python benchmarks/conv_forms.py
"""

import time

import jax
import jax.numpy as jnp
import numpy as np

from scanrl.common import nets


def shifted_sum(params, x):
    x = x.astype(jnp.float32)
    for layer in params:
        k = layer["w"].shape[0]
        h, w = x.shape[1] - k + 1, x.shape[2] - k + 1
        x = jax.nn.relu(sum(x[:, i:i + h, j:j + w] @ layer["w"][i, j] for i in range(k) for j in range(k)) + layer["b"])
    return x.reshape(x.shape[0], -1)


def lax_conv(params, x):
    x = x.astype(jnp.float32)
    for layer in params:
        x = jax.lax.conv_general_dilated(x, layer["w"], (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        x = jax.nn.relu(x + layer["b"])
    return x.reshape(x.shape[0], -1)


def main():
    key = jax.random.key(0)
    conv, features = nets.cnn_init(key, (10, 10, 6), (16,))
    frames = jax.random.uniform(key, (1024, 10, 10, 6)) > 0.8  # MinAtar frames are bool
    forms = {"im2col": (nets.cnn_apply, conv, features), "shifted sum": (shifted_sum, conv, features),
             "lax.conv": (lax_conv, conv, features),
             "mlp": (lambda p, x: x.reshape(x.shape[0], -1).astype(jnp.float32), conv, 600)}
    for name, (torso, torso_params, width) in forms.items():
        head = nets.mlp_init(key, (width, 64, 64, 6) if name == "mlp" else (width, 64, 6))

        def loss(params, x):
            return jnp.mean(nets.mlp_apply(params[1], torso(params[0], x), "relu") ** 2)

        def steps(params, x):
            def step(params, _):
                grads = jax.grad(loss)(params, x)
                return jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads), None
            return jax.lax.scan(step, params, None, length=8)[0]

        run = jax.jit(steps)
        jax.block_until_ready(run((torso_params, head), frames))
        times = []
        for _ in range(5):
            start = time.perf_counter()
            jax.block_until_ready(run((torso_params, head), frames))
            times.append(time.perf_counter() - start)
        print(f"{name:12s} {np.median(times) * 1000 / 8:6.2f} ms per forward and backward of 1,024 frames")


if __name__ == "__main__":
    main()
