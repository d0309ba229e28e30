"""A run's two compiled programs kept on disk, so that a repeated start skips tracing,
lowering and compiling (for the default PPO CartPole run: about 2 s of tracing and lowering
that JAX's persistent cache cannot skip, since its key is the lowered program itself).

Two levels, in `<JAX cache dir>/scanrl-programs/`:
- `<source key>.ref` names the programs a start produced, keyed by what produced them: the
  source of every scanrl module and of every loaded module outside the standard library
  and site-packages (the algorithm file, a copied file, the user's own modules), the
  versions of JAX and the libraries that trace into the program, JAX's settings, XLA_FLAGS,
  the devices, and every Config field that can change the program. A hit loads the
  programs without tracing anything.
- `<program key>.programs` holds the serialized executables (jax.experimental.
  serialize_executable), keyed by the lowered programs' text, the devices and the compiler
  options: a source change that leaves the program the same (a comment, another
  algorithm's file) traces and lowers again but does not compile.

A loaded executable is called with the caller's own pytrees: classes are named by module, and
the same algorithm imported as `scanrl.algos.ppo` by one process and run as `__main__` by
another has two `TrainState` classes. Where the start was traced and lowered, the executables
are rewrapped with the lowered programs' trees (the same program text means the same flat
inputs and outputs); a structure that differs in more than the classes' modules is a miss and
compiles. A start served by its source key uses the trees stored with it, which the same
source key always names the same way.

The executables stored are always compiled afresh, with JAX's own cache off: on the CPU an
executable that JAX loaded from its cache serializes into one that fails when run
("Function ... not found"). Nothing is cached for multi-process runs, a user's own env
object (its source is unknown), an interactive session (a notebook or `python -c`, which can
change what a program computes without changing a file), or with --no-compile-cache; those
take JAX's cache as before. summary.json's `program_cache` says which path a run took:
"hit", "program" (traced and lowered, then loaded), "miss" (compiled and kept) or "off".
Delete the folder to empty it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import os
import pickle
import platform
import site
import sys
import sysconfig
import tempfile
import time
import types
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.experimental import serialize_executable
from jax.experimental.compilation_cache import compilation_cache

from scanrl.common import algorithm
from scanrl.common.harness import checkpoint, loop, memory, sweeps
from scanrl.common.harness.checkpoint import tree_text
from scanrl.common.harness.runconfig import NOT_IN_PROGRAM, config_dict

FORMAT = 2  # 2: trees stored apart from the executables, so they can be swapped
# Packages whose code is traced into a program (their version stands for their source).
KEY_PACKAGES = (
    "jax",
    "jaxlib",
    "numpy",
    "gymnax",
    "optax",
    "distrax",
    "flax",
    "chex",
    "tensorflow-probability",
)


@dataclass
class Entry:
    start: Any  # jax.stages.Compiled
    advance: Any
    # the state's pytree of ShapeDtypeStructs, without shardings (None: the caller traced its own)
    state: Any
    metric_names: list[str]
    largest_array_bytes: int  # for memory.check_memory


def folder() -> Path | None:
    """Where the programs are kept, or None when JAX's persistent cache is off."""
    if not jax.config.jax_enable_compilation_cache or not jax.config.jax_compilation_cache_dir:
        return None
    return Path(jax.config.jax_compilation_cache_dir) / "scanrl-programs"


def _sha(data: Any) -> str:
    return hashlib.sha256(
        data if isinstance(data, bytes) else json.dumps(data, sort_keys=True, default=str).encode()
    ).hexdigest()


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {
        *site.getsitepackages(), site.getusersitepackages(), paths["stdlib"], paths["platstdlib"],
    }
    return tuple(os.path.join(os.path.abspath(d), "") for d in dirs if d)


def _source_files(algorithm_file: str) -> dict[str, str]:
    """sha256 of every loaded module's file outside the standard library and site-packages,
    of scanrl's own modules wherever installed, and of the algorithm's file."""
    library = _library_dirs()
    files = {os.path.abspath(algorithm_file)}
    for name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType):
            continue
        path = object.__getattribute__(module, "__dict__").get(
            "__file__"
        )  # never triggers a lazy import
        if isinstance(path, str) and (
            name.split(".")[0] == "scanrl" or not os.path.abspath(path).startswith(library)
        ):
            files.add(os.path.abspath(path))
    return {path: _sha(Path(path).read_bytes()) for path in sorted(files) if os.path.isfile(path)}


def _versions() -> dict[str, str]:
    found = {"python": sys.version, "machine": platform.machine()}
    for name in KEY_PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    return found


def _machine(compiler_options: dict) -> dict[str, Any]:
    """What the compiled code depends on besides the program: JAX, the devices, flags."""
    return {
        "format": FORMAT,
        "versions": _versions(),
        "compiler_options": compiler_options,
        "devices": [(d.id, d.platform, d.device_kind) for d in jax.devices()],
        "jax_config": {k: v for k, v in jax.config.values.items() if "cache" not in k},
        "environ": {
            k: v
            for k, v in os.environ.items()
            if k.startswith(("XLA_", "JAX_")) and "CACHE" not in k
        },
    }


def source_key(config_values: dict[str, Any], sweep_values: dict | None, make_algorithm: Callable,
               compiler_options: dict, user_env: bool) -> str | None:
    """The key of a start by what produced it, or None when it must not be cached."""
    algorithm_file = getattr(sys.modules.get(make_algorithm.__module__), "__file__", None)
    # An interactive session (no __main__ file: a notebook, `python -c`) can change what the
    # program computes without changing any file, so it is never served from here.
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if (
        folder() is None
        or user_env
        or jax.process_count() > 1
        or not algorithm_file
        or not main_file
    ):
        return None
    return _sha({
        "machine": _machine(compiler_options), "sources": _source_files(algorithm_file),
        "algorithm": f"{make_algorithm.__module__}.{make_algorithm.__qualname__}",
        "config": {k: v for k, v in config_values.items() if k not in NOT_IN_PROGRAM},
        "sweep": {k: [float(x) for x in v] for k, v in (sweep_values or {}).items()},
    })


def program_key(
    lowered_start: Any, lowered_advance: Any, devices: list, compiler_options: dict
) -> str:
    text = lowered_start.as_text() + "\n// advance\n" + lowered_advance.as_text()
    return _sha(
        {
            "machine": _machine(compiler_options),
            "mesh": [d.id for d in devices],
            "programs": _sha(text.encode()),
        }
    )


def _read(path: Path) -> Any:
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except Exception:  # missing, half-written by a killed process, or from another version
        return None


_WARNED: set[Path] = set()


def _write(path: Path, content: Any) -> None:
    """Atomically (a rename), so a concurrent or killed writer never leaves half a file. A
    folder that cannot be written (read-only, full) is a warning: the run goes on."""
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as f:
            temporary = f.name
            pickle.dump(content, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, path)
    except OSError as e:
        if temporary:
            with contextlib.suppress(OSError):
                os.remove(temporary)
        if path.parent not in _WARNED:
            _WARNED.add(path.parent)
            print(
                f"warning: the compiled programs were not kept in {path.parent}"
                f" ({e.strerror or e}); the next start compiles again.",
                file=sys.stderr,
            )


def past_compile_seconds(label: str) -> float | None:
    """Seconds the last compile of `label` (algorithm and env) took here, or None: the compile
    spinner's estimate."""
    where = folder()
    times = _read(where / "compile-seconds.pkl") if where else None
    return times.get(label) if isinstance(times, dict) else None


def remember_compile_seconds(label: str, seconds: float) -> None:
    where = folder()
    if where is not None:
        times = _read(where / "compile-seconds.pkl")
        _write(
            where / "compile-seconds.pkl",
            {**(times if isinstance(times, dict) else {}), label: seconds},
        )


@functools.cache
def lapack_ready() -> None:
    """Set up jaxlib's LAPACK kernels in this process. A kept program may call them (MuJoCo
    MJX's physics, in Playground, solves with Cholesky factors), and jaxlib sets them up only
    when a program that uses them is lowered: a process that loads such a program without
    lowering one crashes (SIGSEGV) at its first call, as jax.export's loader avoids by the
    same step. Lowering a 1x1 Cholesky factorisation (no compile) does it."""
    jax.jit(jnp.linalg.cholesky).lower(jnp.eye(1, dtype=jnp.float32))


def _load(content: Any, devices: list, lowered: tuple[Any, Any] | None) -> Entry | None:
    """An Entry from a stored file's content. `lowered`: the caller's (start, advance) lowered
    programs, whose trees replace the stored ones; None: the stored trees are used."""
    try:
        if lowered is None:
            trees = pickle.loads(content["trees"])  # may import the module that defined the classes
        else:
            trees = [t for low in lowered for t in (low.in_tree, low.out_tree)]
            if content["tree_text"] != [
                tree_text(t) for t in trees
            ]:  # the text names classes without their module
                return None
            trees.append(None)  # the state's structure: the caller traced its own
        lapack_ready()
        load = partial(serialize_executable.deserialize_and_load, execution_devices=devices)
        return Entry(
            start=load(content["start"], *trees[0:2]),
            advance=load(content["advance"], *trees[2:4]), state=trees[4],
            metric_names=content["metric_names"],
            largest_array_bytes=content["largest_array_bytes"],
        )
    except Exception:  # a missing class, another version's file, a device mismatch: compile instead
        return None


def load(source: str, devices: list) -> Entry | None:
    """The programs a start with this source key produced, if kept, loaded onto `devices`
    (the mesh's, in its order), with the pytrees stored beside them."""
    ref = _read(folder() / f"{source}.ref")
    return (
        _load(_read(folder() / f"{ref}.programs"), devices, None) if isinstance(ref, str) else None
    )


def load_program(key: str, devices: list, lowered_start: Any, lowered_advance: Any) -> Entry | None:
    """The programs kept under `key`, called with the lowered programs' own pytrees (None when
    their structure differs from the stored one in more than the classes' modules)."""
    return _load(_read(folder() / f"{key}.programs"), devices, (lowered_start, lowered_advance))


def link(source: str | None, key: str) -> None:
    if source is not None:
        _write(folder() / f"{source}.ref", key)


@contextlib.contextmanager
def _fresh_compiles():
    """JAX's persistent cache off for a while (see the module docstring for why)."""
    enabled = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    compilation_cache.reset_cache()  # the cache's on/off is decided once per process otherwise
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", enabled)
        compilation_cache.reset_cache()


def metric_names(lowered_advance: Any) -> list[str]:
    """The metrics an advance program reports (names starting with "_" are the driver's own)."""
    return [k for k in lowered_advance.out_info[1] if not k.startswith("_")]


def compile_and_keep(
    key: str, lowered_start: Any, lowered_advance: Any, state: Any, largest_array_bytes: int
) -> Entry:
    """Compile both programs afresh and keep them under `key`."""
    with _fresh_compiles():
        start, advance = lowered_start.compile(), lowered_advance.compile()
    names = metric_names(lowered_advance)
    entry = Entry(start=start, advance=advance, state=state, metric_names=names,
                  largest_array_bytes=largest_array_bytes)
    (start_bytes, *start_trees), (advance_bytes, *advance_trees) = map(
        serialize_executable.serialize, (start, advance)
    )
    trees = [*start_trees, *advance_trees]
    _write(
        folder() / f"{key}.programs",
        {
            "start": start_bytes,
            "advance": advance_bytes,
            "trees": pickle.dumps([*trees, state]),
            "tree_text": [tree_text(t) for t in trees],
            "metric_names": names,
            "largest_array_bytes": largest_array_bytes,
        },
    )
    return entry


# ---------------------------------------------------------------------------------------------
# A run ready to compile
# ---------------------------------------------------------------------------------------------
@dataclass
class Prepared:
    """A run ready to compile: its programs, lowered (or already compiled, from
    this module's disk), and where it starts."""

    program: loop.Program
    start: Any  # jax.stages.Lowered, or Compiled when loaded
    advance: Any
    state_shape: Any  # the state's pytree of jax.ShapeDtypeStruct (with shardings)
    checkpoint: Path | None  # resume from this file
    lowering_seconds: float  # tracing and lowering (or loading), counted in compile_seconds
    largest_array_bytes: int = 0
    # where this module keeps the compiled programs (None: JAX's cache)
    source_key: str | None = None
    metric_names: list[str] | None = None
    # summary.json's program_cache: "hit" (loaded, nothing traced), "program" (traced and lowered,
    # the compiled programs loaded), "miss" (compiled and kept), "off" (JAX's own cache only)
    cache: str = "off"

    def compile(self) -> tuple[Any, Any, list[str]]:
        """(start, advance, metric names), compiled."""
        if self.cache == "hit":
            return self.start, self.advance, self.metric_names
        if self.source_key is None:
            return self.start.compile(), self.advance.compile(), metric_names(self.advance)
        mesh_devices = list(self.program.layout.mesh.devices.flat)
        options = algorithm.compiler_options(mesh_devices)
        key = program_key(self.start, self.advance, mesh_devices, options)
        entry, self.cache = load_program(key, mesh_devices, self.start, self.advance), "program"
        if entry is None:
            unsharded = jax.tree.map(
                lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype), self.state_shape
            )
            entry = compile_and_keep(key, self.start, self.advance, unsharded,
                                     self.largest_array_bytes)
            self.cache = "miss"
        link(self.source_key, key)
        return entry.start, entry.advance, entry.metric_names


def lower(config: Any, program: loop.Program, make_algorithm: Callable, ckpt: Path | None,
          user_env: bool = False) -> Prepared:
    """The run's programs ready to compile: loaded where an identical earlier start kept them
    (nothing traced), else `start` and `advance` lowered, with the memory checks before and
    after lowering an update and the checkpoint to resume checked against the state's shapes
    (ValueError with one sentence). user_env: the run's env is a user's object."""
    run, sweep = config.run, program.sweep
    t0 = time.perf_counter()
    num_local = len(program.layout.mesh.local_devices)
    options = algorithm.compiler_options(program.layout.mesh.devices.flat)
    source = source_key(
        config_dict(config), sweep.values if sweep else None, make_algorithm, options,
        user_env=user_env,
    )
    cached = load(source, list(program.layout.mesh.devices.flat)) if source else None
    if cached is not None:  # a repeated start: nothing to trace, lower or compile
        state_shape = jax.tree.map(lambda s: jax.ShapeDtypeStruct(
            s.shape, s.dtype, sharding=program.state_sharding), cached.state)
        checkpoint.verify_resume(run.resume, ckpt, state_shape)
        memory.check_memory(config, state_shape, cached.largest_array_bytes, num_local)
        return Prepared(
            program=program, start=cached.start, advance=cached.advance, state_shape=state_shape,
            checkpoint=ckpt, lowering_seconds=time.perf_counter() - t0,
            largest_array_bytes=cached.largest_array_bytes, metric_names=cached.metric_names,
            cache="hit",
        )
    try:
        start = program.start.lower(loop.row_keys(run, program))
    except jax.errors.JAXTypeError as e:  # a swept value reached Python control flow
        if sweep is None:
            raise
        raise ValueError(sweeps.structure_error(sweeps.culprit(e, list(sweep.values)))) from None
    state_shape = jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=program.state_sharding),
        start.out_info,
    )
    checkpoint.verify_resume(run.resume, ckpt, state_shape)
    # before tracing an update: the state alone may not fit
    memory.check_memory(config, state_shape, 0, num_local)
    try:
        advance = program.advance.lower(state_shape, 0, 0)
    except OverflowError:  # an array longer than int32 indices reach
        raise ValueError(f"an array of one update would hold more than 2**31 elements; "
                         f"{memory.size_flags(config)}.") from None
    except jax.errors.JAXTypeError as e:
        if sweep is None:
            raise
        raise ValueError(sweeps.structure_error(sweeps.culprit(e, list(sweep.values)))) from None
    largest = memory.largest_array_bytes(advance)
    memory.check_memory(config, state_shape, largest, num_local)
    return Prepared(
        program=program, start=start, advance=advance, state_shape=state_shape, checkpoint=ckpt,
        lowering_seconds=time.perf_counter() - t0, largest_array_bytes=largest, source_key=source,
    )


def compile_label(config: Any) -> str:
    """'<algorithm file> <env>': the programs whose past compile time estimates this one's."""
    name = type(config.config).__module__
    return f"{Path(getattr(sys.modules.get(name), '__file__', None) or name).stem} {config.env}"
