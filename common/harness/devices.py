"""Seeds across devices: one compiled program trains every seed on every device.

One CPU device per core (`use_cpu_cores`, `cpu_count`, `select_devices`) is the kit's
(common/cores.py), re-exported here; the command line and `loop.build` call it before JAX
computes anything.

`plan_layout` picks a mesh with axes ("seed", "data"): seeds are vmapped within a device
and sharded over the "seed" axis; the "data" axis splits each seed's environments
(data parallelism, `--data-parallel`), left to XLA's partitioner (common/envs.py's
`shard_envs`). common/harness/loop.py builds the programs on this mesh. The mesh may span several
processes (`initialize_distributed`).
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from scanrl.common.cores import (
    cpu_count, select_devices, use_cpu_cores,
)  # noqa: F401  (the kit's; re-exported)

def enable_compile_cache(enabled: bool = True, cache_dir: str | None = None) -> str | None:
    """Turn JAX's persistent compilation cache on (dir: `cache_dir`, else
    $JAX_COMPILATION_CACHE_DIR, else ~/.cache/scanrl/jax).

    A repeated run of the same program then loads the compiled executable instead of
    compiling it again. Returns the directory, or None when disabled.
    """
    if not enabled:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    cache_dir = cache_dir or os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if cache_dir is None:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        cache_dir = str(Path(base) / "scanrl" / "jax")
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return cache_dir


def distributed_requested(argv: list[str]) -> bool:
    """--distributed on the command line, or JAX_COORDINATOR_ADDRESS in the environment."""
    if "--no-distributed" in argv:
        return False
    return (
        "--distributed" in argv
        or "--distributed=True" in argv
        or "JAX_COORDINATOR_ADDRESS" in os.environ
    )


def initialize_distributed() -> None:
    """Join a multi-process run with `jax.distributed.initialize()`, before JAX computes.

    Coordinator, process count and id come from JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES
    and JAX_PROCESS_ID when set, otherwise from JAX's cluster detection (SLURM, Open MPI,
    Kubernetes, TPU pods). On CPU each process gets one device (several per process hang
    in the first collective, as tried with jax 0.10) and collectives use gloo.
    """
    # no public query for a started backend (as in cores.use_cpu_cores)
    from jax._src import xla_bridge

    if jax.distributed.is_initialized():
        return  # already initialised
    if xla_bridge.backends_are_initialized():  # JAX has started a backend
        raise RuntimeError(
            "initialize_distributed() must run before JAX computes anything; call it first "
            "(algos/*.py --distributed does this before parsing the other flags)."
        )
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", "") and (
        "JAX_NUM_CPU_DEVICES" not in os.environ
    ):
        jax.config.update("jax_num_cpu_devices", 1)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    kwargs = {}
    if "JAX_NUM_PROCESSES" in os.environ:
        kwargs["num_processes"] = int(os.environ["JAX_NUM_PROCESSES"])
    if "JAX_PROCESS_ID" in os.environ:
        kwargs["process_id"] = int(os.environ["JAX_PROCESS_ID"])
    jax.distributed.initialize(**kwargs)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass(frozen=True)
class Layout:
    """Where seeds and environments run: a mesh of shape [seed_shards, data_parallel].

    Each row of the mesh ("seed" axis) trains `seeds_per_shard` seeds (vmapped); the
    `data_parallel` devices of a row ("data" axis) each step `num_envs / data_parallel`
    of every seed's environments. `padded_seeds - num_seeds` padding seeds (single
    process only) repeat seed 0 and are dropped from the results.
    """

    mesh: Mesh
    num_seeds: int
    seeds_per_shard: int

    @property
    def seed_shards(self) -> int:
        return self.mesh.devices.shape[0]

    @property
    def data_parallel(self) -> int:
        return self.mesh.devices.shape[1]

    @property
    def num_devices(self) -> int:
        return self.mesh.devices.size

    @property
    def padded_seeds(self) -> int:
        return self.seed_shards * self.seeds_per_shard

    def seeds_on_process(self, process_index: int) -> list[int]:
        """Seed indices whose progress this process reports (its rows' data-0 devices)."""
        seeds = []
        for row in range(self.seed_shards):
            if self.mesh.devices[row, 0].process_index == process_index:
                first = row * self.seeds_per_shard
                seeds += range(first, min(first + self.seeds_per_shard, self.num_seeds))
        return seeds

    def describe(self) -> str:
        return (
            f"{self.num_devices} device(s): {self.seed_shards} seed shard(s) x"
            f" {self.seeds_per_shard} seed(s), each seed's environments split over"
            f" {self.data_parallel} device(s)"
        )


def check_data_parallel(data_parallel: int, n: int, split_sizes: dict[str, int]) -> None:
    """--data-parallel D must split the n devices into equal groups and every size evenly."""
    if n % data_parallel:
        fits = [d for d in divisors(n) if all(size % d == 0 for size in split_sizes.values())]
        raise ValueError(
            f"--data-parallel {data_parallel} does not split the {n} devices into equal groups; use"
            f" one of {', '.join(map(str, fits))}, or --num-devices with a multiple of"
            f" {data_parallel}."
        )
    for name, size in split_sizes.items():
        if size % data_parallel:
            raise ValueError(
                f"{name} ({size}) is not divisible by --data-parallel {data_parallel}; "
                f"every device must get an equal share."
            )


def plan_layout(
    num_seeds: int, split_sizes: dict[str, int], data_parallel: int = 0, num_devices: int = 0
) -> Layout:
    """Choose the (seed, data) mesh; raises ValueError with one clear sentence if none fits.

    split_sizes: per-seed sizes that the data axis splits, by the name a user knows them
    by (e.g. {"--num-envs": 4}); each must divide by it.
    data_parallel 0 (auto): seeds go over the devices first; devices left over by fewer
    seeds than devices split each seed's environments, so one seed on 8 devices runs
    8-way data-parallel. data_parallel D: rows of D devices, as many as the devices allow.
    On one process, seeds that do not fill the rows evenly are padded; across processes
    every device must be used and seeds must split evenly (padding would simulate a
    seed twice).
    """
    available = select_devices(num_devices)
    n = len(available)
    multi_process = jax.process_count() > 1

    def splits(d: int) -> bool:
        return all(size % d == 0 for size in split_sizes.values())

    if data_parallel < 0:
        raise ValueError(f"--data-parallel must be 0 (auto) or positive, got {data_parallel}.")
    if data_parallel:
        check_data_parallel(data_parallel, n, split_sizes)
        shards = n // data_parallel
    else:
        fitting = [
            s for s in divisors(n)
            if s <= num_seeds and splits(n // s) and (num_seeds % s == 0 or not multi_process)
        ]
        if num_seeds >= n:
            shards, data_parallel = n, 1
        elif fitting:
            shards = max(fitting)
            data_parallel = n // shards
        elif not multi_process:  # no layout uses every device: use as many as one can
            used = {d: min(n // d, num_seeds) * d for d in divisors(n) if splits(d)}
            data_parallel = max(used, key=lambda d: (used[d], -d))
            shards = n // data_parallel
        else:
            names = " and ".join(split_sizes)
            raise ValueError(
                f"no layout uses all {n} devices with {num_seeds} seed(s): make --num-seeds a "
                f"multiple of {n} or {names} divisible by {n // math.gcd(n, num_seeds)}."
            )
    if multi_process:
        if num_seeds % shards:
            options = sorted({shards * k for k in (1, 2, 4)} | {shards})
            raise ValueError(
                f"--num-seeds {num_seeds} cannot be spread evenly over the {shards} seed shards"
                f" ({n} devices / data-parallel {data_parallel}) of this multi-process run; use a"
                f" multiple of {shards} (e.g. {', '.join(map(str, options))}) or a larger"
                " --data-parallel."
            )
    else:
        shards = min(shards, num_seeds)
    grid = np.array(available[: shards * data_parallel]).reshape(shards, data_parallel)
    return Layout(Mesh(grid, ("seed", "data")), num_seeds, math.ceil(num_seeds / shards))




def fetch(tree):
    """Device arrays -> numpy on this host; across processes every process gets all of it."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        return multihost_utils.process_allgather(tree, tiled=True)
    return jax.device_get(tree)


def seed_keys(first_seed: int, num_seeds: int) -> jax.Array:
    """Keys for seeds `first_seed, first_seed + 1, ...`: seed i's key is
    `jax.random.key(first_seed + i)`.

    So seed i of an N-seed run reproduces a single-seed run started with `--seed first_seed + i`.
    """
    return jax.vmap(jax.random.key)(first_seed + jnp.arange(num_seeds))
