"""Run settings and the driver every algorithm's command line uses.

`RunConfig` (common/harness/runconfig.py) holds what every algorithm shares (seeds, devices,
evaluation, logging, checkpoints, stop conditions, output, wandb, cache). A run is a `Job`: the
algorithm's Config and a RunConfig, whose fields are one flat set of flags.

`main(...)` is a file's command line: `--config FILE` / `--resume RUN_DIR` first, then flags
-> Config -> checks (device layout, env, env parameters, output folder, memory; one
sentence and exit code 2 before compiling, no run folder) -> `execute(...)`, which says
"compiling…", compiles (or loads the programs an identical earlier run kept,
common/harness/programs.py), then advances the run chunk by chunk (`--log-every` updates each). Between chunks it prints progress, appends progress.jsonl,
logs to wandb, checkpoints, watches for non-finite parameters, checks the stop conditions
and Ctrl-C / SIGTERM; at the end (or the stop) it writes the run folder (common/harness/logging.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import re
import signal
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np
import tyro

from scanrl.common import algorithm
from scanrl.common.harness import checkpoint, console, devices, loop, memory, pbt, programs, sweeps
from scanrl.common.harness.configs import (
    RESUMABLE, Job, RunConfig, check_algorithm, config_dict, check_flag_names, check_pairs, compose, fail, flag,
    flag_value, grouped_help, read_config_file, tyro_error_sentence, whole_numbers,
)
from scanrl.common.harness.logging import RunLogger, latest_mean, new_run_dir
from scanrl.common.harness.signals import Interrupted, Signals, interruptible, stop_before_training
from scanrl.common.suites import recipes


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
def parse_config(module: Any, argv: list[str] | None = None, algo: str | None = None) -> Job:
    """`--resume RUN_DIR` / `--config FILE`, then flags -> Job, for an algorithm module (its
    Config, default_config, ALGO, RUN_DEFAULTS, docstring). `compose` supplies the defaults
    (presets and recipe for the env, then the file's values) that --help shows; `algo`: the
    algorithm's name, which a resumed folder or config file must match."""
    config_cls, doc = module.Config, module.__doc__
    argv = sys.argv[1:] if argv is None else argv
    resume = flag_value(argv, "--resume")
    if resume and not Path(resume).exists():
        fail(f"--resume {resume}: that folder does not exist.")
    if algo is not None:
        check_algorithm(argv, algo)
    if devices.distributed_requested(argv):
        devices.initialize_distributed()  # before anything below touches JAX
    else:
        devices.use_cpu_cores()
    config_file = flag_value(argv, "--config")
    source = Path(resume) / "config.json" if resume else config_file
    if resume and not (Path(resume) / "config.json").is_file():
        fail(f"--resume {resume} is not a run folder (it has no config.json).")
    saved = {}
    if source:
        try:
            saved = read_config_file(source, config_cls)
        except ValueError as e:
            fail(str(e))
    env = flag_value(argv, "--env") or saved.get("env") or config_cls.__dataclass_fields__["env"].default
    recipe = flag_value(argv, "--recipe") or saved.get("recipe") or "auto"
    if recipe not in recipes.CHOICES:
        fail(f"--recipe {recipe!r} is not one of {', '.join(recipes.CHOICES)}.")
    try:
        base = compose(module, env, recipe, **{k: v for k, v in saved.items() if k not in ("env", "recipe")})
    except (ValueError, TypeError) as e:
        fail(f"{source}: {e}" if source else str(e))
    chosen = flag_value(argv, "--recipe")
    if chosen not in (None, "auto", "none") and base.run.recipe == "none":  # it applied nothing
        try:
            name = getattr(module, "ALGO", module.__name__.rsplit(".", 1)[-1])
            recipes.refuse_missing(name, env, chosen)
        except ValueError as e:
            fail(str(e))
    try:
        for name in ("--env-params", "--eval-env-params", "--env-options"):
            check_pairs(argv, name, numbers=name != "--env-options")
    except ValueError as e:
        fail(str(e))
    if "-h" in argv or "--help" in argv:
        grouped_help(config_cls, base, doc.split("\n\n")[0])
    check_flag_names(argv, config_cls)
    argv = whole_numbers(argv, config_cls)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            # one flat set of flags over the Config's fields and RunConfig's (OmitArgPrefixes)
            flags_cls = dataclasses.make_dataclass("Flags", [("config", config_cls), ("run", RunConfig)], frozen=True)
            flags = tyro.cli(flags_cls, args=argv, default=flags_cls(base.config, base.run),
                             description=doc.split("\n\n")[0], config=(tyro.conf.OmitArgPrefixes,))
    except SystemExit as e:
        if e.code:
            fail(recipe_note(tyro_error_sentence(captured.getvalue()), argv, module, env, recipe))
        raise
    sys.stderr.write(captured.getvalue())  # tyro's warnings, if any
    # what applied, not what was asked: "auto" resolved, "none" where the env has no recipe
    try:
        config = Job(flags.config, dataclasses.replace(flags.run, recipe=base.run.recipe))
    except ValueError as e:
        fail(recipe_note(str(e), argv, module, env, recipe))
    if resume:
        check_resume(saved, config)
    return config


def recipe_note(message: str, argv: list[str], module: Any, env: str, recipe: str) -> str:
    """An error naming flags the user did not pass but the env's recipe set says so, and how to
    change them: "--x 30 ... (--x is the published recipe's for ENV: set it, or --recipe none)."."""
    name = getattr(module, "ALGO", module.__name__.rsplit(".", 1)[-1])
    form, fields = recipes.lookup(name, env, recipe)
    named = [f"--{k.replace('_', '-')}" for k in fields if k != "recipe"]
    given = {a.split("=", 1)[0].replace("--no-", "--") for a in argv if a.startswith("--")}
    named = [f for f in named if re.search(rf"{re.escape(f)}(?![\w-])", message) and f not in given]
    if not named:
        return message
    named.sort(key=message.find)
    which = f"{named[0]} is" if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]} are"
    return (f"{message.rstrip('.')} ({which} the {form} recipe's for {env}: set "
            f"{'it' if len(named) == 1 else 'them'}, or pass --recipe none).")


def check_resume(saved: dict[str, Any], config: Any) -> None:
    """A resumed run computes what the saved one would have: refuse flags that change that."""
    now = json.loads(json.dumps(config_dict(config), default=str))
    saved = json.loads(json.dumps(saved, default=str))
    for key, value in now.items():
        if key not in RESUMABLE and key in saved and saved[key] != value:
            fail(f"{flag(key)} cannot change when resuming (the run used {saved[key]}, got {value}): it would change "
                 f"the results; start a new run with --config {config.run.resume}/config.json instead.")
    old_total, total = saved.get("total_timesteps", 0), now["total_timesteps"]
    if old_total and (total == 0 or total < old_total) or not old_total and total:
        fail(f"--total-timesteps can only be raised when resuming (the run asked for {old_total}, got {total}).")


def algorithm_identity(module: Any) -> tuple[str, str | None]:
    """(name, file) of the algorithm module a run trains: scanrl's own algorithm files by name
    (file None); any other file, such as a researcher's copy, by its file name's stem and its
    absolute path, which config.json records so that scanrl-eval loads the code that trained it."""
    path = getattr(module, "__file__", None)
    if path is None:
        return module.__name__.rsplit(".", 1)[-1], None
    path = Path(path).resolve()
    own = Path(__file__).resolve().parents[2] / "algos"  # scanrl's algos/, installed or checked out
    return path.stem, (None if path.parent == own else str(path))


def main(module: Any, argv: list[str] | None = None) -> dict:
    """An algorithm module's command line (its Config, default_config, ALGO, RUN_DEFAULTS,
    make_algorithm and docstring): parse, check, train, write. Returns summary.json's content. A copy of an
    algorithm file runs under its own name and records its path (`algorithm_identity`).
    Ctrl-C / SIGTERM at any moment of it is honoured (Signals): parsing, the checks and lowering
    run on a worker thread (`interruptible`) so that this one only waits, and sees a signal at once."""
    algo, algo_file = algorithm_identity(module)
    make_algorithm = module.make_algorithm
    with Signals() as signals:
        try:
            config = interruptible(lambda: parse_config(module, argv, algo), signals)
            if config.run.sweep and config.run.sweep_mode == "loop":
                summary = loop_sweep(algo, config, make_algorithm, signals, algo_file=algo_file)
            else:
                prepared = interruptible(lambda: prepare_or_fail(config, make_algorithm), signals)
                summary = execute(algo, config, prepared, signals=signals, algo_file=algo_file)
        except Interrupted as e:
            stop_before_training(e.sig)
        except memory.TooBigForMemory as e:
            fail(str(e))
        finally:
            console.COMPILING.stop()  # an error before training: its sentence after the spinner's line
    if summary["exit_code"]:
        raise SystemExit(summary["exit_code"])
    return summary


def prepare_or_fail(config: Any, make_algorithm: Callable) -> Prepared:
    """`prepare`, with a ValueError as the command line's one sentence and exit code 2."""
    try:
        return prepare(config, make_algorithm)
    except ValueError as e:
        fail(str(e))


# ---------------------------------------------------------------------------------------------
# Before compiling: layout, env, output folder, checkpoint to resume, memory
# ---------------------------------------------------------------------------------------------
@dataclass
class Prepared:
    """A run ready to compile: its programs, lowered (or already compiled, from
    common/harness/programs.py), and where it starts."""

    program: loop.Program
    start: Any  # jax.stages.Lowered, or Compiled when loaded
    advance: Any
    state_shape: Any  # the state's pytree of jax.ShapeDtypeStruct (with shardings)
    checkpoint: Path | None  # resume from this file
    lowering_seconds: float  # tracing and lowering (or loading), counted in compile_seconds
    largest_array_bytes: int = 0
    source_key: str | None = None  # where common/harness/programs.py keeps the compiled programs (None: JAX's cache)
    metric_names: list[str] | None = None
    # summary.json's program_cache: "hit" (loaded, nothing traced), "program" (traced and lowered,
    # the compiled programs loaded), "miss" (compiled and kept), "off" (JAX's own cache only)
    cache: str = "off"

    def compile(self) -> tuple[Any, Any, list[str]]:
        """(start, advance, metric names), compiled."""
        if self.cache == "hit":
            return self.start, self.advance, self.metric_names
        if self.source_key is None:
            return self.start.compile(), self.advance.compile(), programs.metric_names(self.advance)
        mesh_devices = list(self.program.layout.mesh.devices.flat)
        key = programs.program_key(self.start, self.advance, mesh_devices, algorithm.compiler_options(mesh_devices))
        entry, self.cache = programs.load_program(key, mesh_devices, self.start, self.advance), "program"
        if entry is None:
            unsharded = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype), self.state_shape)
            entry = programs.compile_and_keep(key, self.start, self.advance, unsharded, self.largest_array_bytes)
            self.cache = "miss"
        programs.link(self.source_key, key)
        return entry.start, entry.advance, entry.metric_names


def _check_out_dir(out_dir: str) -> None:
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--out-dir {out_dir} is a file, not a folder.")
    existing = next(p for p in (path, *path.absolute().parents) if p.exists())
    try:  # the real test (permissions, read-only mounts, root): create something there, then remove it
        tempfile.TemporaryDirectory(dir=existing).cleanup()
    except OSError as e:
        raise ValueError(f"--out-dir {out_dir} is not writable ({existing}: {e.strerror}).") from None


def row_keys(run: RunConfig, program: loop.Program) -> jax.Array:
    """One key per row of the seed axis: the seeds' keys, repeated for every config of a sweep."""
    keys = devices.seed_keys(run.seed, run.num_seeds)
    return keys[np.arange(program.num_seeds) % run.num_seeds] if program.sweep else keys


def prepare(config: Any, make_algorithm: Callable, env: Any = None, env_params: Any = None) -> Prepared:
    """Everything short of compiling (ValueError with one sentence if the run cannot go ahead)."""
    run = config.run
    devices.enable_compile_cache(run.compile_cache)
    ckpt = None
    if run.resume:
        found = checkpoint.all_checkpoints(Path(run.resume) / "checkpoints")
        if not found:
            raise ValueError(f"--resume {run.resume} has no checkpoint (the run stopped before its first one); "
                             f"start it again with --config {run.resume}/config.json.")
        ckpt = found[-1]
    else:
        _check_out_dir(run.out_dir)
    sweep = sweeps.parse(run.sweep, run.sweep_samples, run.seed, config.config,
                         population=run.pbt_population if run.pbt else None)
    program = loop.build(make_algorithm, config, env, env_params, chunk=run.log_every or None, sweep=sweep)
    pbt.check(run, program.num_updates if config.total_timesteps else None)
    if program.num_updates >= 2**31:  # update indices are int32 inside the program
        budget = f"{config.total_timesteps:,}" if config.total_timesteps < 10**15 else f"{config.total_timesteps:.3g}"
        raise ValueError(f"--total-timesteps {budget} is {program.num_updates:.3g} updates of "
                         f"{program.steps_per_update:,} env steps; a run counts at most 2**31 - 1 updates: "
                         f"lower --total-timesteps.")
    if ckpt is not None and checkpoint.update_of(ckpt) >= program.num_updates:
        raise ValueError(f"--resume {run.resume}: the run already trained all {program.num_updates} updates; "
                         f"raise --total-timesteps to extend it.")
    # tracing, lowering, compiling: seconds (cached: ~1); "last time" where this algorithm and env compiled before
    console.COMPILING.start(_what_compiles(config, program), programs.past_compile_seconds(compile_label(config)))
    t0 = time.perf_counter()
    num_local = len(program.layout.mesh.local_devices)
    source = programs.source_key(config_dict(config), sweep.values if sweep else None, make_algorithm,
                                 algorithm.compiler_options(program.layout.mesh.devices.flat), user_env=env is not None)
    cached = programs.load(source, list(program.layout.mesh.devices.flat)) if source else None
    if cached is not None:  # a repeated start: nothing to trace, lower or compile
        state_shape = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=program.state_sharding),
                                   cached.state)
        _check_checkpoint(run, ckpt, state_shape)
        memory.check_memory(config, state_shape, cached.largest_array_bytes, num_local)
        return Prepared(program=program, start=cached.start, advance=cached.advance, state_shape=state_shape,
                        checkpoint=ckpt, lowering_seconds=time.perf_counter() - t0,
                        largest_array_bytes=cached.largest_array_bytes, metric_names=cached.metric_names, cache="hit")
    try:
        start = program.start.lower(row_keys(run, program))
    except jax.errors.JAXTypeError as e:  # a swept value reached Python control flow
        if sweep is None:
            raise
        raise ValueError(sweeps.structure_error(sweeps.culprit(e, list(sweep.values)))) from None
    state_shape = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=program.state_sharding),
                               start.out_info)
    _check_checkpoint(run, ckpt, state_shape)
    memory.check_memory(config, state_shape, 0, num_local)  # before tracing an update: the state alone may not fit
    try:
        advance = program.advance.lower(state_shape, 0, 0)
    except OverflowError:  # an array longer than int32 indices reach
        raise ValueError(f"an array of one update would hold more than 2**31 elements; {memory.size_flags(config)}.") from None
    except jax.errors.JAXTypeError as e:
        if sweep is None:
            raise
        raise ValueError(sweeps.structure_error(sweeps.culprit(e, list(sweep.values)))) from None
    largest = memory.largest_array_bytes(advance)
    memory.check_memory(config, state_shape, largest, num_local)
    return Prepared(program=program, start=start, advance=advance, state_shape=state_shape, checkpoint=ckpt,
                    lowering_seconds=time.perf_counter() - t0, largest_array_bytes=largest, source_key=source)


def _what_compiles(config: Any, program: loop.Program) -> str:
    """The compile line: env, seeds x devices, updates, where the run folder goes."""
    run, layout = config.run, program.layout
    rows = f"{program.sweep.size} {'members' if program.pbt else 'configs'} x {run.num_seeds} seeds" if program.sweep else \
        f"{run.num_seeds} seed{'s' if run.num_seeds > 1 else ''}"
    updates = "updates until a stop condition" if config.total_timesteps == 0 else f"{program.num_updates:,} updates"
    folder = f"resuming {run.resume}" if run.resume else f"run folder in {run.out_dir}/"
    source = recipes.source(compile_label(config).split()[0], config.env, run.recipe)
    recipe = f" ({run.recipe} recipe: {source})" if source else ""
    return (f"{config.env}{recipe}: {rows} on {layout.num_devices} device{'s' if layout.num_devices > 1 else ''}, {updates} "
            f"of {program.steps_per_update:,} env steps; {folder}")


def compile_label(config: Any) -> str:
    """'<algorithm file> <env>': the programs whose past compile time estimates this one's."""
    name = type(config.config).__module__
    return f"{Path(getattr(sys.modules.get(name), '__file__', None) or name).stem} {config.env}"


def _check_checkpoint(run: RunConfig, ckpt: Path | None, state_shape: Any) -> None:
    if ckpt is not None:
        try:
            checkpoint.verify(ckpt, state_shape)
        except ValueError as e:
            raise ValueError(f"--resume {run.resume}: {e} A flag (e.g. SAC's replay buffer is capped at "
                             f"--total-timesteps) or another version of scanrl changed the state's shapes; start a new "
                             "run instead.") from None


# ---------------------------------------------------------------------------------------------
# Between chunks: signals, stop conditions, non-finite watch
# ---------------------------------------------------------------------------------------------
class StopConditions:
    """--stop-return, --stop-minutes, --stop-plateau, checked on each chunk's metrics."""

    def __init__(self, run: RunConfig, best: float = -math.inf, since_best: int = 0):
        self.run, self.best, self.since_best = run, best, since_best
        self.started = time.perf_counter()

    def check(self, metrics: dict[str, np.ndarray]) -> str | None:
        """metrics: name -> [seeds, n] of one chunk. Returns the condition that holds, or None."""
        run, reached = self.run, None
        evals = metrics.get(run.eval_metric)
        for column in range(evals.shape[1]) if evals is not None else ():
            if np.isnan(evals[:, column]).all():
                continue
            mean = float(np.nanmean(evals[:, column]))
            self.best, self.since_best = (mean, 0) if mean > self.best else (self.best, self.since_best + 1)
        if run.stop_return is not None:
            source = evals if run.eval_every else metrics.get("episode_return")
            latest = latest_mean(source)
            if latest is not None and latest >= run.stop_return:
                reached = "stop_return"
        if run.stop_plateau is not None and self.since_best >= run.stop_plateau:
            reached = reached or "stop_plateau"
        if run.stop_minutes is not None and time.perf_counter() - self.started >= 60 * run.stop_minutes:
            reached = reached or "stop_minutes"
        return reached


def stop_sentence(run: RunConfig, reason: str) -> str:
    """What a stop condition read, in words (the evaluation of --eval-policy, or the training return)."""
    evaluation = f"the {run.eval_policy} policy's mean evaluation return"
    if reason == "stop_return":
        read = evaluation if run.eval_every else "the mean training episode return"
        return f"{read} reached --stop-return {run.stop_return:g}"
    if reason == "stop_plateau":
        return f"{run.stop_plateau} evaluations in a row brought no new best of {evaluation} (--stop-plateau)"
    return f"--stop-minutes {run.stop_minutes:g} of training passed"


def first_nonfinite(metrics: dict[str, np.ndarray], first_update: int) -> tuple[int, int, list[str]] | None:
    """(seed index, update, metric names) where a seed's policy first went non-finite, or None."""
    finite = metrics["_policy_finite"]
    bad = np.argwhere(finite == 0)
    if not bad.size:
        return None
    seed, column = min(map(tuple, bad), key=lambda sc: (sc[1], sc[0]))
    names = sorted(k for k, v in metrics.items() if not k.startswith("_") and np.isinf(v[seed, column])
                   or (k.endswith("loss") and np.isnan(v[seed, column])))
    return int(seed), first_update + int(column) + 1, names


def _agree(code: int) -> int:
    """The largest of the processes' stop codes (every process must take the same decision)."""
    if jax.process_count() == 1:
        return code
    from jax.experimental import multihost_utils

    return int(np.max(multihost_utils.process_allgather(np.int32(code))))


# ---------------------------------------------------------------------------------------------
# The chunked run
# ---------------------------------------------------------------------------------------------
REASONS = ["", "budget", "stop_return", "stop_minutes", "stop_plateau", "interrupt", "non-finite"]


def execute(algo: str, config: Any, prepared: Prepared, run_dir: Path | None = None, signals: Signals | None = None, algo_file: str | None = None) -> dict:
    """Compile, run chunk by chunk (progress, checkpoints, stop conditions, signals between
    chunks), write the run folder. Returns summary.json's content (on every process; only
    process 0 writes). Exits 130/143 after an interrupt and 1 after a non-finite policy
    when called from the command line (`main`); from Python the summary says `stopped_by`.
    A signal during the compile raises Interrupted before any file is written. `algo_file`: the
    path of an algorithm file outside scanrl that config.json records (`algorithm_identity`)."""
    with contextlib.ExitStack() as stack:
        signals = signals or stack.enter_context(Signals())
        signals.training = False
        return _execute(algo, config, prepared, run_dir, signals, algo_file)


@dataclass
class RunRecord:
    """A run's record between chunks: what the chunk loop advances and a checkpoint stores."""

    state: Any
    done: int  # updates finished
    chunks: list  # each chunk's metrics, leaves [rows, n]
    resumed_from: list[int]
    stops: StopConditions
    reason: str | None = None  # why the run stops (None: not yet)
    nonfinite: Any = None  # (seed, update, names) of the first non-finite policy
    checkpoint_seconds: float = 0.0

    def metrics(self, names: list[str]) -> dict[str, np.ndarray]:
        return {k: np.concatenate([c[k] for c in self.chunks], axis=1) for k in names}


_IMPORTED = time.perf_counter()


def seconds_since_process_start() -> float:
    """Wall seconds since this process started (from /proc on Linux; elsewhere since the
    harness was imported), so summary.json's wall_seconds covers imports, parsing and compiling."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), time.perf_counter() - _IMPORTED)
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _IMPORTED


def _execute(algo: str, config: Any, prepared: Prepared, run_dir: Path | None, signals: Signals, algo_file: str | None = None) -> dict:
    t0 = time.perf_counter()
    with console.NativeStderr() as xla:
        start, advance, metric_names = interruptible(prepared.compile, signals)  # the run folder comes after
    memory.check_compiled_memory(config, [start, advance], len(prepared.program.layout.mesh.local_devices))
    compile_seconds = prepared.lowering_seconds + time.perf_counter() - t0
    if prepared.cache in ("miss", "off"):  # compiled here (not loaded): the next start's estimate
        programs.remember_compile_seconds(compile_label(config), compile_seconds)
    signals.training = True
    logger = _logger(algo, config, prepared.program, run_dir, checkpoint.update_of(prepared.checkpoint)
                     if prepared.checkpoint is not None else 0, algo_file)
    signals.say = logger.say
    if xla.text.strip() and logger.active:
        (logger.run_dir / "compile.log").write_text(xla.text)
    t0 = time.perf_counter()
    try:
        progress = _first_state(config.run, prepared, start, metric_names, logger)
        compile_seconds += time.perf_counter() - t0
        logger.start_display(compile_seconds, progress.done)
        run_seconds = _advance_until_done(config.run, prepared.program, advance, metric_names, logger, progress,
                                          signals)
        seconds = {"compile_seconds": compile_seconds, "run_seconds": run_seconds}
        return _finish(algo, config, prepared, logger, progress, signals, metric_names, seconds)
    finally:
        logger.stop_display()  # an error mid-run must not leave the terminal to a live bar


def file_entry(algo_file: str | None) -> dict:
    """config.json's record of an algorithm file outside scanrl (none for scanrl's own)."""
    return {"algo_file": algo_file} if algo_file else {}


def _logger(algo: str, config: Any, program: loop.Program, run_dir: Path | None, done: int,
            algo_file: str | None = None) -> RunLogger:
    run = config.run
    return RunLogger(
        algo=algo, env=config.env, config=file_entry(algo_file) | config_dict(config), num_seeds=run.num_seeds,
        num_configs=program.sweep.size if program.sweep else 1, steps_per_update=program.steps_per_update,
        num_updates=None if config.total_timesteps == 0 else program.num_updates,
        out_dir=run.out_dir, wandb_mode=run.wandb_mode, wandb_project=run.wandb_project, first_seed=run.seed,
        progress=bool(run.log_every), run_dir=run.resume or run_dir, resume_update=done,
    )


def _first_state(run: RunConfig, prepared: Prepared, start: Callable, metric_names: list[str],
                 logger: RunLogger) -> RunRecord:
    """The state the run starts from: its checkpoint's (with the metrics so far), or fresh."""
    done, extra = 0, {}
    if prepared.checkpoint is not None:
        done = checkpoint.update_of(prepared.checkpoint)
        state, extra = checkpoint.load(prepared.checkpoint, prepared.state_shape)
        logger.say(f"resuming from update {done} ({prepared.checkpoint})")
    else:
        state = start(row_keys(run, prepared.program))
    return RunRecord(
        state=state, done=done, chunks=[_saved_metrics(extra, metric_names)] if done else [],
        resumed_from=[int(u) for u in extra.get("resumed_from", [])] + ([done] if done else []),
        stops=StopConditions(run, float(extra.get("best_eval", -math.inf)), int(extra.get("since_best", 0))),
    )


def _saved_metrics(extra: dict, metric_names: list[str]) -> dict[str, np.ndarray]:
    """A checkpoint's metrics so far [rows, done]; NaN for one it predates (a checkpoint of a
    version without the sampled evaluation: that metric starts at the resume)."""
    shape = np.shape(next(v for k, v in extra.items() if k.startswith("metric_")))
    return {k: extra[f"metric_{k}"] if f"metric_{k}" in extra else np.full(shape, np.nan, np.float32)
            for k in metric_names}


def _save_checkpoint(logger: RunLogger, progress: RunRecord, metric_names: list[str]) -> None:
    t = time.perf_counter()
    metrics = {f"metric_{k}": v for k, v in progress.metrics(metric_names).items()}
    checkpoint.save(logger.run_dir / "checkpoints", progress.done, progress.state, write=logger.active, extra={
        **metrics, "best_eval": progress.stops.best, "since_best": progress.stops.since_best,
        "resumed_from": progress.resumed_from})
    progress.checkpoint_seconds += time.perf_counter() - t


def _advance_until_done(run: RunConfig, program: loop.Program, advance: Callable, metric_names: list[str],
                        logger: RunLogger, progress: RunRecord, signals: Signals) -> float:
    """Chunk after chunk until the budget or a stop; returns the seconds it took.

    Chunk k + 1 is dispatched before chunk k's metrics are fetched and logged, so the devices
    never wait for the host between chunks (JAX dispatches asynchronously). A stop therefore
    takes effect after the chunk in flight; a checkpoint first drains the pipeline (the next
    chunk would consume the donated state)."""
    p, num_updates, launched, last_ckpt = progress, program.num_updates, deque(), progress.done
    t_start = t_last = time.perf_counter()
    while True:
        if p.reason is None and p.done < num_updates:
            n = min(program.chunk, num_updates - p.done)
            p.state, metrics = advance(p.state, p.done, n)
            launched.append((p.done, n, metrics))
            p.done += n
        checkpoint_due = run.checkpoint_every and p.done // run.checkpoint_every > last_ckpt // run.checkpoint_every
        while launched and (len(launched) == 2 or p.reason is not None or p.done == num_updates or checkpoint_due):
            first, n, metrics = launched.popleft()
            metrics = {k: v[:, :n] for k, v in devices.fetch(metrics).items()}  # waits for the chunk
            now = time.perf_counter()
            found = first_nonfinite(metrics, first)
            metrics.pop("_policy_finite")
            p.chunks.append(metrics)
            logger.on_chunk(first + n, metrics, now - t_last)
            if program.pbt and logger.active:
                pbt.write_lineage(logger.run_dir, pbt.lineage(p.metrics(list(metrics)), program.sweep, program.pbt,
                                                              run.seed, program.steps_per_update))
            t_last = now
            p.nonfinite = p.nonfinite or found
            code = REASONS.index("non-finite") if p.nonfinite else 0
            signals.announce()
            code = code or (REASONS.index("interrupt") if signals.received else 0)
            code = code or REASONS.index(p.stops.check(metrics) or "")
            agreed = _agree(code)  # a collective across processes: once per chunk
            if agreed and p.reason is None:
                p.reason = REASONS[agreed]
        if not launched and (p.reason is not None or p.done == num_updates):
            break
        if checkpoint_due and p.reason is None:
            _save_checkpoint(logger, p, metric_names)
            last_ckpt = p.done
    run_seconds = time.perf_counter() - t_start
    p.reason = p.reason or "budget"
    if p.reason != "non-finite":
        _save_checkpoint(logger, p, metric_names)
    return run_seconds


def _finish(algo: str, config: Any, prepared: Prepared, logger: RunLogger,
            progress: RunRecord, signals: Signals, metric_names: list[str], seconds: dict) -> dict:
    """Write summary.json, the final policy, the plots (or a sweep's report); the exit code."""
    run, program, p = config.run, prepared.program, progress
    metrics = p.metrics(metric_names)
    summary = logger.finish(
        metrics=metrics, params=devices.fetch(program.policy(p.state)),
        total_timesteps=p.done * program.steps_per_update, **seconds,
        wall_seconds=seconds_since_process_start(),
        extra={
            "updates": p.done, "stopped_by": p.reason, "resumed_from": p.resumed_from or None,
            "checkpoint_seconds": p.checkpoint_seconds, "program_cache": prepared.cache,
            "layout": program.layout.describe(), "processes": jax.process_count(),
            **memory.replay_buffer_summary(prepared.state_shape, program.num_seeds),
        },
    )
    if logger.active and program.pbt:
        pbt.write(logger.run_dir, program.sweep, program.pbt, metrics, config_dict(config), run.seed,
                  program.steps_per_update)
    elif logger.active and program.sweep:
        shaped = {k: list(v.reshape(program.sweep.size, run.num_seeds, -1)) for k, v in metrics.items()}
        sweeps.write(logger.run_dir, program.sweep, shaped["episode_return"], shaped.get(run.eval_metric),
                     config_dict(config), run.num_seeds, [program.steps_per_update] * program.sweep.size)
    elif logger.active:
        draw_curves(logger.run_dir)
    summary = {**summary, "exit_code": 0}
    if p.reason in ("stop_return", "stop_plateau", "stop_minutes"):
        logger.say(f"Stopped after update {p.done}: {stop_sentence(run, p.reason)}.")
    if p.reason == "interrupt":
        command = sys.argv[0] if sys.argv[0].endswith(".py") else f"-m scanrl.algos.{algo}"
        logger.say(f"Interrupted after update {p.done}: continue with `python {command} --resume {logger.run_dir}`.")
        summary["exit_code"] = 128 + (signals.received or signal.SIGINT)
    elif p.reason == "non-finite":
        seed, update, names = p.nonfinite
        what = f" ({', '.join(names)} non-finite)" if names else ""
        print(f"error: seed {run.seed + seed} went non-finite at update {update}: its policy parameters hold NaN or "
              f"inf{what}; the run stopped and wrote its files (no checkpoint of the broken state).", file=sys.stderr)
        summary["exit_code"] = 1
    return summary


def loop_sweep(algo: str, config: Any, make_algorithm: Callable, signals: Signals | None = None,
               algo_file: str | None = None) -> dict:
    """--sweep-mode loop: one program per config, one after another, each an ordinary run in
    `config_<c>/` of the sweep folder (checkpoints, interrupt, resume as usual); then the
    sweep's report over them. `--resume SWEEP_DIR` skips finished configs and resumes the
    interrupted one."""
    import shutil

    run = config.run
    try:
        sweep = sweeps.parse(run.sweep, run.sweep_samples, run.seed, config.config, loop=True)
        settings = [config.replace(**sweep.config_values(c), sweep=(), resume="", config="") for c in range(sweep.size)]
        if not run.resume:
            _check_out_dir(run.out_dir)
    except ValueError as e:
        fail(str(e))
    wall_start = time.perf_counter()
    if run.resume:
        sweep_dir = Path(run.resume)
    else:
        sweep_dir = new_run_dir(run.out_dir, algo, config.env, "sweep")
        sweep_dir.mkdir(parents=True)
        (sweep_dir / "config.json").write_text(
            json.dumps({"algo": algo, **file_entry(algo_file), **config_dict(config)}, indent=2, default=str) + "\n")
    summaries, exit_code = [], 0
    for c, setting in enumerate(settings):
        sub = sweep_dir / f"config_{c}"
        state = checkpoint.run_state(sub)
        if state == "finished":
            summaries.append(json.loads((sub / "summary.json").read_text()))
            continue
        if state == "resume":
            setting = setting.replace(resume=str(sub))
        elif state == "restart":
            shutil.rmtree(sub)
        print(f"sweep config {c + 1}/{sweep.size}: "
              + ", ".join(f"{k}={sweeps.show_value(v)}" for k, v in sweep.config_values(c).items()), flush=True)
        try:
            prepared = interruptible(lambda: prepare(setting, make_algorithm), signals)
            summary = execute(algo, setting, prepared, run_dir=sub, signals=signals, algo_file=algo_file)
        except ValueError as e:
            fail(f"sweep config {c} ({sweep.config_values(c)}): {e}")
        except Interrupted as e:  # while config c compiled: the configs before it are kept
            if not run.resume and not any(sweep_dir.glob("config_*")):
                shutil.rmtree(sweep_dir)  # nothing trained yet: no folder, as for a single run
                raise
            exit_code = 128 + e.sig
            break
        summaries.append(summary)
        if summary["exit_code"]:
            exit_code = summary["exit_code"]
            break
    done = [s for c, s in enumerate(summaries) if checkpoint.run_state(sweep_dir / f"config_{c}") == "finished"]
    if done:
        _report_loop_sweep(sweep_dir, sweep, done, config)
    summary = {
        "algo": algo, "env": config.env, "sweep_mode": "loop", "num_configs": sweep.size, "num_seeds": run.num_seeds,
        "configs_done": len(done), "stopped_by": "interrupt" if exit_code in (130, 143) else
        ("non-finite" if exit_code else "budget"), "compile_seconds": sum(s["compile_seconds"] for s in summaries),
        "wall_seconds": time.perf_counter() - wall_start, "run_dir": str(sweep_dir), "exit_code": exit_code,
    }
    (sweep_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if exit_code in (130, 143):
        print(f"Sweep interrupted after {len(done)} of {sweep.size} configs: continue with "
              f"`python {algo_file or '-m scanrl.algos.' + algo} --resume {sweep_dir}`.", flush=True)
    return summary


def _report_loop_sweep(sweep_dir: Path, sweep: sweeps.Sweep, done: list[dict], config: Any) -> None:
    """sweep.json, best_config.json and sweep.png over the finished configs (and one metrics.npz
    when every config trained as many updates)."""
    part = sweeps.Sweep({k: v[:len(done)] for k, v in sweep.values.items()}, sweep.log_fields)
    loaded = [np.load(sweep_dir / f"config_{c}" / "metrics.npz") for c in range(len(done))]
    returns = [m["episode_return"] for m in loaded]
    metric = config.run.eval_metric
    evals = [m[metric] for m in loaded] if all(metric in m.files for m in loaded) else None
    sweeps.write(sweep_dir, part, returns, evals, config_dict(config), config.run.num_seeds,
                 [s["total_timesteps"] / max(s["updates"], 1) for s in done])
    if len({r.shape for r in returns}) == 1:
        np.savez(sweep_dir / "metrics.npz", **{k: np.stack([m[k] for m in loaded]) for k in loaded[0].files})


def draw_curves(run_dir: Path) -> None:
    """curves.png, after the run's files are written; a plotting failure is only a warning."""
    try:
        from scanrl.common.harness import plots

        plots.curves(run_dir)
    except Exception as e:  # noqa: BLE001 - a picture must never fail a finished run
        print(f"warning: curves.png was not drawn ({type(e).__name__}: {e}); the run's other files are complete.",
              file=sys.stderr)


def train_and_write(algo: str, config: Any, make_algorithm: Callable, env: Any = None, env_params: Any = None) -> dict:
    """Train `config` from Python (no flags) and write its run folder; returns the summary."""
    return execute(algo, config, prepare(config, make_algorithm, env, env_params))
