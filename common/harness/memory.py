"""Whether a run fits in memory, checked twice before its run folder is written: a lower bound
before compiling (`check_memory`: the training state and the largest array of an update) and
XLA's own count after (`check_compiled_memory`). Either refusal is one sentence naming the
flags that shrink the run; common/harness/run.py makes it exit code 2.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

import jax


def _available_memory() -> tuple[int, str]:
    """Bytes this run can use on one host, and what they are."""
    device = jax.local_devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return stats["bytes_limit"] * jax.local_device_count(), f"{device.platform} memory"
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024, "available RAM"
    except (OSError, KeyError):
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"), "available RAM"


ITEMSIZE = {
    "f64": 8,
    "i64": 8,
    "ui64": 8,
    "f32": 4,
    "i32": 4,
    "ui32": 4,
    "bf16": 2,
    "f16": 2,
    "i16": 2,
    "ui16": 2,
    "i8": 1,
    "ui8": 1,
    "i1": 1,
}


def largest_array_bytes(lowered: Any) -> int:
    """Bytes of the largest array any operation of a lowered program produces (per device)."""
    largest = 0
    for dims, kind in re.findall(r"tensor<((?:\d+x)+)([a-z]+\d+)>", lowered.as_text()):
        largest = max(
            largest, math.prod(int(d) for d in dims[:-1].split("x")) * ITEMSIZE.get(kind, 4)
        )
    return largest


def check_memory(config: Any, state_shape: Any, largest: int, num_local_devices: int) -> None:
    """Refuse (ValueError) a run whose state plus largest intermediate array cannot fit.

    A lower bound, read before compiling: the state's bytes, plus the largest array any
    operation of one chunk produces (`largest_array_bytes`, 0 if not known yet; per device,
    so times the devices on this host)."""
    state = sum(x.size * getattr(x.dtype, "itemsize", 8) for x in jax.tree.leaves(state_shape))
    need, (available, what) = (
        state / jax.process_count() + largest * num_local_devices,
        _available_memory(),
    )
    if need > available:
        gib = lambda b: f"{b / 2**30:,.1f} GiB"
        parts = f"training state {gib(state)}" + (
            f", largest array of an update {gib(largest)} per device" if largest else ""
        )
        raise ValueError(
            f"this run needs at least {gib(need)} of memory ({parts}) but there is {gib(available)}"
            f" of {what}; {size_flags(config)}."
        )


class TooBigForMemory(ValueError):
    """The compiled programs need more memory than there is (`check_compiled_memory`)."""


def check_compiled_memory(config: Any, compiled: list, num_local_devices: int) -> None:
    """Refuse (TooBigForMemory) a run whose compiled programs need more memory than there is,
    after compiling and before the run folder: XLA's own count (`memory_analysis`) of one
    device's arguments, outputs and temporaries, for the larger of the programs, times the
    devices on this host. `check_memory` before compiling is a lower bound; the temporaries
    are known only now. Nothing is checked for a program XLA gives no count for."""
    needs = []
    for program in compiled:
        try:
            m = program.memory_analysis()
        except (AttributeError, NotImplementedError, RuntimeError):
            m = None
        if m is not None:
            needs.append(
                m.argument_size_in_bytes
                + m.output_size_in_bytes
                - m.alias_size_in_bytes
                + m.temp_size_in_bytes
            )
    need, (available, what) = max(needs, default=0) * num_local_devices, _available_memory()
    if need > available:
        raise TooBigForMemory(
            f"this run needs {_bytes(need)} of memory (XLA's count for the compiled programs) but "
            f"there is {_bytes(available)} of {what}; {size_flags(config)}."
        )


def _bytes(count: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20)):
        if count >= size / 10:
            return f"{count / size:,.1f} {unit}"
    return f"{count / 2**10:,.0f} KiB"


def size_flags(config: Any) -> str:
    """What a user can lower, named without knowing the algorithm: the seeds, or its sizes."""
    return "lower --num-seeds or --num-envs (or another size of the algorithm's: see --help)"


def replay_buffer_summary(state_shape: Any, num_seeds: int) -> dict:
    """summary.json's replay buffer memory where the training state holds a `buffer` (SAC's): per
    seed, and over the run's `num_seeds` rows."""
    buffer = getattr(state_shape.train, "buffer", None)
    if buffer is None:
        return {}
    leaves = jax.tree.leaves(buffer)
    per_seed = sum(leaf.size * leaf.dtype.itemsize for leaf in leaves) // leaves[0].shape[0]
    return {"replay_buffer_bytes_per_seed": per_seed, "replay_buffer_bytes": per_seed * num_seeds}
