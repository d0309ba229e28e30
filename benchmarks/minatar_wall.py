"""MinAtar on the CPU, per wall-second: PPO's MinAtar preset with the conv torso, the same conv at
stride 2 or followed by a 2x2 max-pool (experiments, not flags: this script swaps the torso
functions in), and the flattened-frame MLP, each run for a number of env steps chosen so the
runs take about as long.

One run per line, seeds 0..N-1 vmapped in one program, no evaluation; wall = compile + training
(one call of the whole-run program). Final return: training episodes over the last 10% of
updates, per seed.

    python benchmarks/minatar_wall.py base SpaceInvaders-MinAtar 500000 2
    python benchmarks/minatar_wall.py stride2 SpaceInvaders-MinAtar 1600000 2
    python benchmarks/minatar_wall.py pool2 SpaceInvaders-MinAtar 500000 2
    python benchmarks/minatar_wall.py mlp SpaceInvaders-MinAtar 1600000 2
"""

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from scanrl.algos import ppo
from scanrl.common import nets
from scanrl.common.harness import devices, loop, stats
from scanrl.common.harness.runconfig import compose

variant, env, steps, seeds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
assert variant in ("base", "stride2", "pool2", "mlp"), variant


CNN_INIT, CNN_APPLY = nets.cnn_init, nets.cnn_apply  # the originals, which the variants build on


def stride2_init(key, image_shape, channels, kernel=3):
    """One 3x3 'valid' convolution at stride 2: a 10x10 frame gives 4x4 positions."""
    assert len(channels) == 1 and image_shape[:2] == (10, 10) and kernel == 3
    params, _ = CNN_INIT(key, image_shape, channels)
    return params, 4 * 4 * channels[0]


def stride2_apply(params, x, activation="relu"):
    """x [..., 10, 10, C] -> [..., 4 * 4 * C_out]: the patches of nets.cnn_apply, every other one."""
    batch = x.shape[:-3]
    x = x.reshape((-1,) + x.shape[-3:]).astype(jnp.float32)
    patches = jnp.concatenate([x[:, i:i + 7:2, j:j + 7:2] for i in range(3) for j in range(3)], axis=-1)
    w = params[0]["w"]
    x = nets.ACTIVATIONS[activation](patches @ w.reshape(-1, w.shape[-1]) + params[0]["b"])
    return x.reshape(batch + (-1,))


def pool2_apply(params, x, activation="relu"):
    """x [..., 10, 10, C] -> [..., 4 * 4 * C_out]: nets.cnn_apply's 8x8 map, then 2x2 max-pooling."""
    batch = x.shape[:-3]
    x = CNN_APPLY(params, x, activation).reshape((-1, 8, 8, params[0]["w"].shape[-1]))
    x = x.reshape(x.shape[0], 4, 2, 4, 2, x.shape[-1]).max(axis=(2, 4))
    return x.reshape(batch + (-1,))


# the actor-critic network (common/nets.py) calls nets.cnn_init / nets.cnn_apply: the variants replace those
if variant == "stride2":
    nets.cnn_init, nets.cnn_apply = stride2_init, stride2_apply
if variant == "pool2":  # the same parameters as stride 2 (one conv layer, 4 x 4 x C_out features)
    nets.cnn_init, nets.cnn_apply = stride2_init, pool2_apply
config = compose(ppo, env, num_seeds=seeds, total_timesteps=steps, log_every=0, eval_every=0,
                 torso="mlp" if variant == "mlp" else "auto")
start = time.time()
program = loop.build(ppo.make_algorithm, config)
out = jax.block_until_ready(program.train(devices.seed_keys(0, seeds)))
wall = time.time() - start
returns = jax.device_get(out["metrics"]["episode_return"])  # [seeds, updates]
final = stats.final_returns(returns)  # scanrl's own estimator: the last ceil(10%) of updates
print(f"| {variant} | {env} | {steps:,} | {wall:.0f} | {steps * seeds / wall:,.0f} | "
      f"{', '.join(f'{r:.1f}' for r in final)} | {final.mean():.2f} |")
