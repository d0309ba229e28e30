"""Run settings and the driver every algorithm's command line uses.

`RunConfig` (common/harness/runconfig.py) holds what every algorithm shares (seeds, devices,
evaluation, logging, checkpoints, stop conditions, output, wandb, cache). A run is a `Job`: the
algorithm's Config and a RunConfig, whose fields are one flat set of flags.

`main(...)` is a file's command line: `--config FILE` / `--resume RUN_DIR` first, then flags
-> Config -> checks (device layout, env, env parameters, output folder, memory; one
sentence and exit code 2 before compiling, no run folder) -> `execute(...)`, which says
"compiling…", compiles (or loads the programs an identical earlier run kept,
common/harness/programs.py), then advances the run chunk by chunk (`--log-every` updates each).
Between chunks it prints progress, appends progress.jsonl, logs to wandb, checkpoints, watches for
non-finite parameters, checks the stop conditions and Ctrl-C / SIGTERM; at the end (or the stop) it
writes the run folder (common/harness/logging.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

import jax
import tyro

from scanrl.common import envs
from scanrl.common.algorithm import flag
from scanrl.common.harness import (
    checkpoint, chunks, console, devices, loop, memory, programs, reports, sweeps,
)
from scanrl.common.harness.configs import (
    check_algorithm, check_flag_names, check_pairs, fail, flag_value, grouped_help, preset_note,
    read_config_file, tyro_error_sentence, whole_numbers,
)
from scanrl.common.harness.logging import RunLogger, check_out_dir, new_run_dir
from scanrl.common.harness.programs import Prepared
from scanrl.common.harness.runconfig import RESUMABLE, Job, RunConfig, compose, config_dict
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
    env = (
        flag_value(argv, "--env")
        or saved.get("env")
        or config_cls.__dataclass_fields__["env"].default
    )
    recipe = flag_value(argv, "--recipe") or saved.get("recipe") or "auto"
    if recipe not in recipes.CHOICES:
        fail(f"--recipe {recipe!r} is not one of {', '.join(recipes.CHOICES)}.")
    try:
        base = compose(
            module, env, recipe, **{k: v for k, v in saved.items() if k not in ("env", "recipe")}
        )
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
        grouped_help(config_cls, base, doc.split("\n\n")[0], preset_note(module, base))
    check_flag_names(argv, config_cls)
    argv = whole_numbers(argv, config_cls)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            # one flat set of flags over the Config's fields and RunConfig's (OmitArgPrefixes)
            flags_cls = dataclasses.make_dataclass(
                "Flags", [("config", config_cls), ("run", RunConfig)], frozen=True
            )
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
            fail(
                f"{flag(key)} cannot change when resuming (the run used {saved[key]}, got {value}):"
                " it would change the results; start a new run with --config"
                f" {config.run.resume}/config.json instead."
            )
    old_total, total = saved.get("total_timesteps", 0), now["total_timesteps"]
    if old_total and (total == 0 or total < old_total) or not old_total and total:
        fail(
            f"--total-timesteps can only be raised when resuming (the run asked for {old_total},"
            f" got {total})."
        )


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
    make_algorithm and docstring): parse, check, train, write. Returns summary.json's content. A
    copy of an algorithm file runs under its own name and records its path (`algorithm_identity`).
    Ctrl-C / SIGTERM at any moment of it is honoured (Signals): parsing, the checks and lowering
    run on a worker thread (`interruptible`) so that this one only waits, and sees a signal at
    once."""
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
            # an error before training: its sentence after the spinner's line
            console.COMPILING.stop()
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
# Before compiling: the steps of prepare
# ---------------------------------------------------------------------------------------------


def prepare(
    config: Any, make_algorithm: Callable, env: Any = None, env_params: Any = None
) -> Prepared:
    """Everything short of compiling, one step per module (ValueError with one sentence if the
    run cannot go ahead): JAX's compile cache (devices.py); where the run starts, its last
    checkpoint or a writable output folder (checkpoint.py, logging.py); the program with its
    sweep or population (loop.py); that the checkpoint leaves updates to train; the compile
    line (console.py); the programs lowered with the memory checks, or loaded where an
    identical earlier start kept them (programs.py)."""
    run = config.run
    devices.enable_compile_cache(run.compile_cache)
    if run.resume:
        ckpt = checkpoint.to_resume(run.resume)
    else:
        ckpt = None
        check_out_dir(run.out_dir)
    program = loop.build_run(make_algorithm, config, env, env_params)
    checkpoint.check_unfinished(ckpt, run.resume, program.num_updates)
    # tracing, lowering, compiling: seconds (cached: ~1); "last time" where this algorithm and env
    # compiled before
    past = programs.past_compile_seconds(programs.compile_label(config))
    if jax.process_index() == 0:
        for note in _short_budget(config, program):
            console.say(f"note: {note}")
    console.COMPILING.start(_what_compiles(config, program), past)
    return programs.lower(config, program, make_algorithm, ckpt, user_env=env is not None)


def _what_compiles(config: Any, program: loop.Program) -> str:
    """The compile line: env, seeds x devices, updates, where the run folder goes."""
    run, layout = config.run, program.layout
    rows = (
        f"{program.sweep.size} {'members' if program.pbt else 'configs'} x {run.num_seeds} seeds"
        if program.sweep
        else f"{run.num_seeds} seed{'s' if run.num_seeds > 1 else ''}"
    )
    updates = (
        "updates until a stop condition"
        if config.total_timesteps == 0
        else f"{program.num_updates:,} update{'s' if program.num_updates != 1 else ''}"
    )
    # NBSP: console.wrap keeps these words on one line (the path may go to the next)
    folder = f"resuming {run.resume}" if run.resume else f"run\xa0folder\xa0in {run.out_dir}/"
    source = recipes.source(programs.compile_label(config).split()[0], config.env, run.recipe)
    recipe = f" ({run.recipe} recipe: {source})" if source else ""
    return (
        f"{config.env}{recipe}: {rows} on {layout.num_devices}"
        f" device{'s' if layout.num_devices > 1 else ''}, {updates} of {program.steps_per_update:,}"
        f" env steps; {folder}"
    )


def _short_budget(config: Any, program: loop.Program) -> list[str]:
    """Notes before the compile line where the budget is too short to say much: fewer than 3
    updates (the curves and the final return rest on that few points), or fewer steps per
    environment than an episode's time limit (only episodes the task ends sooner are counted)."""
    if config.total_timesteps == 0:
        return []
    notes, algo = [], program.algorithm
    if program.num_updates < 3:
        notes.append(f"only {program.num_updates} update{'s' if program.num_updates > 1 else ''}:"
                     " the curves and the final return rest on that few points")
    limit = envs.hook(algo.env, "episode_limit") or getattr(
        algo.env_params, "max_steps_in_episode", None)
    # num_envs counts rows: a game of M agents is M of them
    rows_per_game = envs.hook(algo.env, "num_agents") or 1
    per_env = (program.num_updates * program.steps_per_update * rows_per_game
               // max(algo.vec_env.num_envs, 1))
    if limit and per_env < limit:
        notes.append(f"each environment steps {per_env:,} times, fewer than the {limit:,} of an"
                     " episode's time limit: only episodes the task ends sooner are counted")
    return notes


# ---------------------------------------------------------------------------------------------
# The run: compile, chunks (common/harness/chunks.py), files
# ---------------------------------------------------------------------------------------------


def execute(
    algo: str, config: Any, prepared: Prepared, run_dir: Path | None = None,
    signals: Signals | None = None, algo_file: str | None = None,
) -> dict:
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


def _execute(
    algo: str, config: Any, prepared: Prepared, run_dir: Path | None, signals: Signals,
    algo_file: str | None = None,
) -> dict:
    t0 = time.perf_counter()
    with console.NativeStderr() as xla:
        start, advance, metric_names = interruptible(
            prepared.compile, signals
        )  # the run folder comes after
    memory.check_compiled_memory(
        config, [start, advance], len(prepared.program.layout.mesh.local_devices)
    )
    compile_seconds = prepared.lowering_seconds + time.perf_counter() - t0
    if prepared.cache in ("miss", "off"):  # compiled here (not loaded): the next start's estimate
        programs.remember_compile_seconds(programs.compile_label(config), compile_seconds)
    signals.training = True
    logger = _logger(
        algo, config, prepared.program, run_dir,
        checkpoint.update_of(prepared.checkpoint) if prepared.checkpoint is not None else 0,
        algo_file,
    )
    signals.say = logger.say
    if xla.text.strip() and logger.active:
        (logger.run_dir / "compile.log").write_text(xla.text)
    t0 = time.perf_counter()
    try:
        progress = chunks.first_state(config.run, prepared, start, metric_names, logger)
        compile_seconds += time.perf_counter() - t0
        logger.start_display(compile_seconds, progress.done)
        run_seconds = chunks.advance_until_done(
            config.run, prepared.program, advance, metric_names, logger, progress, signals
        )
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
        algo=algo, env=config.env, config=file_entry(algo_file) | config_dict(config),
        num_seeds=run.num_seeds, num_configs=program.sweep.size if program.sweep else 1,
        steps_per_update=program.steps_per_update,
        num_updates=None if config.total_timesteps == 0 else program.num_updates,
        out_dir=run.out_dir, wandb_mode=run.wandb_mode, wandb_project=run.wandb_project,
        first_seed=run.seed, progress=bool(run.log_every), run_dir=run.resume or run_dir,
        resume_update=done,
    )


def _finish(
    algo: str, config: Any, prepared: Prepared, logger: RunLogger, progress: chunks.RunRecord,
    signals: Signals, metric_names: list[str], seconds: dict,
) -> dict:
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
        reports.write_pbt(logger.run_dir, program.sweep, program.pbt, metrics, config_dict(config),
                          run.seed, program.steps_per_update)
    elif logger.active and program.sweep:
        shaped = {
            k: list(v.reshape(program.sweep.size, run.num_seeds, -1)) for k, v in metrics.items()
        }
        reports.write_sweep(logger.run_dir, program.sweep, shaped["episode_return"],
                            shaped.get(run.eval_metric), config_dict(config), run.num_seeds,
                            [program.steps_per_update] * program.sweep.size)
    elif logger.active:
        reports.draw_curves(logger.run_dir)
    summary = {**summary, "exit_code": 0}
    if p.reason in ("stop_return", "stop_plateau", "stop_minutes"):
        logger.say(f"Stopped after update {p.done}: {chunks.stop_sentence(run, p.reason)}.")
    if p.reason == "interrupt":
        command = sys.argv[0] if sys.argv[0].endswith(".py") else f"-m scanrl.algos.{algo}"
        logger.say(f"Interrupted after update {p.done}: continue with",
                   f"python {command} --resume {logger.run_dir}")
        summary["exit_code"] = 128 + (signals.received or signal.SIGINT)
    elif p.reason == "non-finite":
        seed, update, names = p.nonfinite
        what = f" ({', '.join(names)} non-finite)" if names else ""
        console.say(
            f"error: seed {run.seed + seed} went non-finite at update {update}: its policy"
            f" parameters hold NaN or inf{what}; the run stopped and wrote its files (no checkpoint"
            " of the broken state).",
            file=sys.stderr,
        )
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
        settings = [
            config.replace(**sweep.config_values(c), sweep=(), resume="", config="")
            for c in range(sweep.size)
        ]
        if not run.resume:
            check_out_dir(run.out_dir)
    except ValueError as e:
        fail(str(e))
    wall_start = time.perf_counter()
    if run.resume:
        sweep_dir = Path(run.resume)
    else:
        sweep_dir = new_run_dir(run.out_dir, algo, config.env, "sweep")
        sweep_dir.mkdir(parents=True)
        (sweep_dir / "config.json").write_text(
            json.dumps(
                {"algo": algo, **file_entry(algo_file), **config_dict(config)}, indent=2,
                default=str,
            )
            + "\n"
        )
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
        console.say(
            f"sweep config {c + 1}/{sweep.size}: "
            + ", ".join(f"{k}={sweeps.show_value(v)}" for k, v in sweep.config_values(c).items())
        )
        try:
            prepared = interruptible(lambda: prepare(setting, make_algorithm), signals)
            summary = execute(
                algo, setting, prepared, run_dir=sub, signals=signals, algo_file=algo_file
            )
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
    done = [
        s
        for c, s in enumerate(summaries)
        if checkpoint.run_state(sweep_dir / f"config_{c}") == "finished"
    ]
    if done:
        reports.write_loop_sweep(sweep_dir, sweep, done, config_dict(config), run.num_seeds,
                                 run.eval_metric)
    summary = {
        "algo": algo,
        "env": config.env,
        "sweep_mode": "loop",
        "num_configs": sweep.size,
        "num_seeds": run.num_seeds,
        "configs_done": len(done),
        "stopped_by": (
            "interrupt" if exit_code in (130, 143) else ("non-finite" if exit_code else "budget")
        ),
        "compile_seconds": sum(s["compile_seconds"] for s in summaries),
        "wall_seconds": time.perf_counter() - wall_start,
        "run_dir": str(sweep_dir),
        "exit_code": exit_code,
    }
    (sweep_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if exit_code in (130, 143):
        console.say(f"Sweep interrupted after {len(done)} of {sweep.size} configs: continue with")
        script = algo_file or f"-m scanrl.algos.{algo}"
        print(console.command(f"python {script} --resume {sweep_dir}"), flush=True)
    return summary


def train_and_write(
    algo: str, config: Any, make_algorithm: Callable, env: Any = None, env_params: Any = None
) -> dict:
    """Train `config` from Python (no flags) and write its run folder; returns the summary."""
    return execute(algo, config, prepare(config, make_algorithm, env, env_params))
