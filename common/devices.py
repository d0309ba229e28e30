"""Seeds across devices: one compiled program trains every seed on every device.

Importing this module (every algorithm file does, before gymnax) gives JAX one CPU
device per core: on a CPU-only machine that is the fast path, because XLA runs one
device's program on one core. It must happen before JAX computes anything, which is
why it is done at import time and why gymnax (whose import computes) is imported
lazily in `common.envs`. Set `XLA_FLAGS=--xla_force_host_platform_device_count=N`
or `JAX_NUM_CPU_DEVICES=N` yourself to choose another count; `--num-devices N`
restricts a run to the first N devices.

`seeds_over_devices(train_one, num_seeds)` turns `train_one(key, seed_index) -> pytree`
into `train(keys[num_seeds]) -> pytree[num_seeds, ...]`: seeds are vmapped and the
seed axis is sharded over a one-axis mesh (`seed`) with `jax.shard_map`.
"""

from __future__ import annotations

import math
import os
from functools import partial
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P


def _backend_initialised() -> bool:
    from jax._src import xla_bridge

    return bool(xla_bridge._backends)


def cpu_count() -> int:
    """Cores this process may use (respects CPU affinity, e.g. under taskset or SLURM)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def _give_jax_one_cpu_device_per_core() -> None:
    user_chose = "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "") or (
        "JAX_NUM_CPU_DEVICES" in os.environ
    )
    if not user_chose and not _backend_initialised():
        jax.config.update("jax_num_cpu_devices", cpu_count())


_give_jax_one_cpu_device_per_core()


def enable_compile_cache(enabled: bool = True, cache_dir: str | None = None) -> str | None:
    """Turn JAX's persistent compilation cache on (default dir: ~/.cache/scanrl/jax).

    A repeated run of the same program then loads the compiled executable instead of
    compiling it again. Returns the directory, or None when disabled.
    """
    if not enabled:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    if cache_dir is None:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        cache_dir = str(Path(base) / "scanrl" / "jax")
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return cache_dir


def select_devices(num_devices: int = 0) -> list:
    """The devices a run uses: all of them (0) or the first `num_devices`."""
    available = jax.devices()
    if num_devices < 0:
        raise ValueError(f"--num-devices must be 0 (all) or positive, got {num_devices}.")
    if num_devices > len(available):
        raise ValueError(
            f"--num-devices {num_devices} asks for more devices than the {len(available)} available; "
            "on CPU set XLA_FLAGS=--xla_force_host_platform_device_count=N to simulate more."
        )
    return available[: num_devices or len(available)]


def seed_layout(num_seeds: int, num_devices: int) -> tuple[int, int]:
    """(devices used, seeds per device): as many devices as there are seeds, at most all.

    When the seeds do not divide evenly, the last device's block is padded with extra
    seeds whose results are dropped (cheaper than leaving a core idle).
    """
    used = min(num_devices, num_seeds)
    return used, math.ceil(num_seeds / used)


# XLA's CPU backend spends most of a train program's compile time in LLVM passes that
# buy nothing measurable for these small, loop-heavy programs (benchmarks/RESULTS.md).
COMPILER_OPTIONS = {"xla_backend_optimization_level": 1, "xla_llvm_disable_expensive_passes": True}


def seeds_over_devices(
    train_one: Callable, num_seeds: int, num_devices: int = 0
) -> Callable:
    """Wrap `train_one(key, seed_index) -> pytree` into one jitted program over all seeds.

    Returns `train(keys) -> pytree` with `keys` shaped `[num_seeds]` (typed or raw keys)
    and every output leaf gaining a leading `[num_seeds]` axis. Seed `i` of the result
    equals `train_one(keys[i], i)` run alone: seeds never interact.
    """
    devices = select_devices(num_devices)
    used, per_device = seed_layout(num_seeds, len(devices))
    padded = used * per_device
    mesh = Mesh(np.array(devices[:used]), ("seed",))
    # check_vma=False: with it on, a parameter built from a constant inside train_one
    # (e.g. a zero log-std) would be treated as replicated and its gradient summed over
    # devices, mixing seeds (jax-notes.md, trap 1).
    sharded = jax.shard_map(
        jax.vmap(train_one),
        mesh=mesh,
        in_specs=(P("seed"), P("seed")),
        out_specs=P("seed"),
        check_vma=False,
    )

    @partial(jax.jit, compiler_options=COMPILER_OPTIONS)
    def train(keys):
        if keys.shape[0] != num_seeds:
            raise ValueError(f"train expects {num_seeds} keys, got {keys.shape[0]}.")
        pad = padded - num_seeds
        keys = jnp.concatenate([keys, keys[:1].repeat(pad, axis=0)]) if pad else keys
        out = sharded(keys, jnp.arange(padded, dtype=jnp.int32))
        return jax.tree.map(lambda x: x[:num_seeds], out)

    return train


def seed_keys(first_seed: int, num_seeds: int) -> jax.Array:
    """Keys for seeds `first_seed, first_seed + 1, ...`: seed i's key is `jax.random.key(first_seed + i)`.

    So seed i of an N-seed run reproduces a single-seed run started with `--seed first_seed + i`.
    """
    return jax.vmap(jax.random.key)(first_seed + jnp.arange(num_seeds))
