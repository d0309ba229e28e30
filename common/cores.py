"""JAX's CPU devices: one per core, the CPU fast path (XLA runs one device's program on one
core). `use_cpu_cores()` sets that count before JAX starts; building an env (common/suites/)
and `make_train` call it, and so does the command line. Importing scanrl changes no JAX
setting. Set `XLA_FLAGS=--xla_force_host_platform_device_count=N` or `JAX_NUM_CPU_DEVICES=N`
yourself to choose another count; `--num-devices N` restricts a run to the first N devices.
"""

from __future__ import annotations

import os
import warnings

import jax


def cpu_count() -> int:
    """Cores this process may use (respects CPU affinity, e.g. under taskset or SLURM)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def use_cpu_cores(warn: bool = True) -> None:
    """Give JAX one CPU device per core (the CPU fast path), unless the count was chosen with
    XLA_FLAGS or JAX_NUM_CPU_DEVICES. Call it before JAX computes anything; if JAX has
    already started on the CPU with fewer devices than cores, nothing changes and (with
    `warn`) a warning says so."""
    # JAX has no public query for whether a backend has started (jax.extend.backend.backends()
    # would start one): xla_bridge's own, from its private module
    from jax._src import xla_bridge

    user_chose = "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "") or (
        "JAX_NUM_CPU_DEVICES" in os.environ
    )
    # multi-process: initialize_distributed chose
    if user_chose or jax.distributed.is_initialized():
        return
    if not xla_bridge.backends_are_initialized():  # JAX has not started a backend yet
        jax.config.update("jax_num_cpu_devices", cpu_count())
    elif warn and jax.default_backend() == "cpu" and jax.local_device_count() < cpu_count():
        warnings.warn(
            f"JAX had already started with {jax.local_device_count()} CPU device(s) for "
            f"{cpu_count()} cores, so runs use fewer cores; call "
            "scanrl.common.cores.use_cpu_cores() before computing anything with JAX.",
            stacklevel=2)


def select_devices(num_devices: int = 0) -> list:
    """The devices a run uses: all of them (0) or the first `num_devices`."""
    available = jax.devices()
    if jax.process_count() > 1 and num_devices not in (0, len(available)):
        raise ValueError(
            f"--num-devices must be 0 (all {len(available)} devices) in a multi-process run."
        )
    if num_devices < 0:
        raise ValueError(f"--num-devices must be 0 (all) or positive, got {num_devices}.")
    if num_devices > len(available):
        raise ValueError(
            f"--num-devices {num_devices} asks for more devices than the {len(available)} "
            "available; on CPU set XLA_FLAGS=--xla_force_host_platform_device_count=N to "
            "simulate more."
        )
    return available[: num_devices or len(available)]
