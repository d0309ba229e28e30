"""`scanrl-bench SUITE.yaml`: run a suite of (algorithm, environment) cells and report them.

A suite file lists groups of cells: each group is the product of its `algos` and `envs`,
with a budget (`total_timesteps`, env steps per seed), a number of `seeds` and optional
`flags` (any flag of the algorithm's command line). Each cell is one run over all its
seeds (`--num-seeds`), started as its own process (`python -m scanrl.algos.ALGO`), so its
summary.json times that run alone. The format is in docs/statistics.md; in short:

    out_dir: runs/bench/smoke        # the suite's folder
    seeds: 2                         # per cell (a group may set its own)
    metric: return                   # or eval_return: the score of a run (common/harness/stats.py)
    flags: {log-every: 10}           # for every cell
    cells:
      - algos: [ppo, impala]
        envs: [CartPole-v1]
        total_timesteps: 50000
        flags: {num-envs: 8}         # for this group's cells

Everything a user can get wrong (the YAML, an unknown algorithm or env, a flag or value the
algorithm refuses, an action space it cannot handle) is one sentence naming the field and
echoing the value, and exit code 2, before any cell runs: each cell's command line is
parsed by the algorithm's own parser and its programs are built (not compiled).

The suite resumes as a loop-mode sweep does (common/harness/run.py, `loop_sweep`): a cell
whose run finished (summary.json, not stopped by an interrupt) is skipped; one that was
interrupted after a checkpoint continues with `--resume`; one that stopped before its
first checkpoint starts again. Ctrl-C (or SIGTERM) is passed to the running cell, which
checkpoints and stops; run the same command again to continue.

`OUT_DIR/` then holds `runs/<algo>__<env>/` (each cell's run folder), `results.json`
(every finished cell's scores per seed, marl-eval's layout: `stats.results_from_runs`,
read back with `load_results`), `report.md` and `report.json` (per cell the IQM with its
95% interval, raw and normalised, wall time and env steps/s from summary.json; per
algorithm the IQM, mean, median and optimality gap of the normalised scores with their
intervals), `aggregates.png` and `profiles.png`.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scanrl.common.algorithm import flag
from scanrl.common.harness import configs, console, runconfig, stats
from scanrl.common.harness.configs import HELP_GROUPS, fail
from scanrl.common.harness.stats import (
    load_results,
)  # noqa: F401  (the results file's reader, here too)

SUITE_KEYS = {"out_dir", "seeds", "metric", "flags", "cells", "reference_points"}
GROUP_KEYS = {"algos", "envs", "total_timesteps", "seeds", "flags"}
# Flags a suite's `flags:` cannot hold, and why
NOT_FLAGS = {
    "num_seeds": "set by the suite's `seeds:` key",
    "total_timesteps": "set by the group's `total_timesteps:` key",
    "env": "set by the group's `envs:` key",
    "out_dir": "set by the suite's `out_dir:` key (or --out-dir)",
    **dict.fromkeys(
        ("resume", "config"),
        "not for a suite: it resumes its cells itself, and its file is their config",
    ),
    **dict.fromkeys(HELP_GROUPS["sweeps"][1],  # the sweep and PBT flags, as --help groups them
                    "not for a suite: each cell is one run of one config"),
}


@dataclass(frozen=True)
class Cell:
    """One (algorithm, environment) of a suite, run as one run over its seeds."""

    algo: str
    env: str
    seeds: int
    total_timesteps: int | None  # None: the algorithm's default budget for the env
    flags: tuple[str, ...]  # the group's flags, as command-line words
    where: str  # the suite file's group, e.g. "cells[1]"

    @property
    def name(self) -> str:
        return f"{self.algo}__{self.env.replace('/', '-')}"

    def argv(self, folder: Path) -> list[str]:
        budget = (
            [] if self.total_timesteps is None else ["--total-timesteps", str(self.total_timesteps)]
        )
        return [
            "--env",
            self.env,
            "--num-seeds",
            str(self.seeds),
            *budget,
            "--out-dir",
            str(folder),
            *self.flags,
        ]

    def __str__(self) -> str:
        return f"{self.algo} on {self.env}"


@dataclass(frozen=True)
class Suite:
    path: Path
    out_dir: Path
    metric: str
    cells: list[Cell]
    points: dict[str, stats.ReferencePoint]  # the built-in reference points and the suite's own
    algorithms: Any  # the registry the cells name algorithms from: names() and get(name) -> module

    def module(self, cell: Cell) -> str:
        """The module a cell's process runs (`python -m MODULE`)."""
        return self.algorithms.get(cell.algo).__name__

    def folder(self, cell: Cell) -> Path:
        """Where the cell's run folder goes (its --out-dir)."""
        return self.out_dir / "runs" / cell.name


# ---------------------------------------------------------------------------------------------
# The suite file
# ---------------------------------------------------------------------------------------------
def _flag_words(flags: Any, where: str) -> tuple[str, ...]:
    """A mapping of flags -> command-line words: `learning-rate: 3e-4` -> --learning-rate 3e-4,
    `normalize-obs: true/false` -> --normalize-obs / --no-normalize-obs, a list -> several
    values, a mapping (env-params) -> KEY VALUE pairs."""
    if flags is None:
        return ()
    if not isinstance(flags, dict):
        raise ValueError(f"{where} must map flag names to values, got {flags!r}.")
    words = []
    for key, value in flags.items():
        name = str(key).lstrip("-").replace("_", "-")
        if name.replace("-", "_") in NOT_FLAGS:
            raise ValueError(
                f"{where}: --{name} is {NOT_FLAGS[name.replace('-', '_')]}, got {value!r}."
            )
        if isinstance(value, bool):
            words.append(f"--{name}" if value else f"--no-{name}")
        elif isinstance(value, (list, tuple)):
            words += [f"--{name}", *map(str, value)]
        elif isinstance(value, dict):
            words += [f"--{name}", *(str(w) for kv in value.items() for w in kv)]
        elif value is None:
            raise ValueError(f"{where}: --{name} has no value (write `{name}: VALUE`).")
        else:
            words += [f"--{name}", str(value)]
    return tuple(words)


def _whole(value: Any, where: str) -> int:
    """A count or budget: 500000, 5e5 or 500_000 (YAML reads 5e5 as a string)."""
    try:
        number = float(str(value).replace("_", "")) if not isinstance(value, bool) else math.nan
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number != int(number) or number < 1:
        raise ValueError(
            f"{where} must be a whole number of at least 1 (such as 500000 or 5e5), got {value!r}."
        )
    return int(number)


def _names(value: Any, where: str) -> list[str]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"{where} must be a name or a list of names, got {value!r}.")
    return names


def _points(value: Any, where: str) -> dict[str, stats.ReferencePoint]:
    """The suite's own reference points: {env: {random, reference, random_source,
    reference_source}}."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{where} must map env ids to their points, got {value!r}.")
    out = {}
    for env, p in value.items():
        need = {"random", "reference", "random_source", "reference_source"}
        if not isinstance(p, dict) or set(p) != need:
            raise ValueError(
                f"{where}.{env} needs exactly {', '.join(sorted(need))} (every point with its"
                f" source), got {p!r}."
            )
        try:
            random, reference = float(p["random"]), float(p["reference"])
        except (TypeError, ValueError):
            raise ValueError(
                f"{where}.{env}: random and reference must be numbers, got {p['random']!r} and "
                f"{p['reference']!r}."
            ) from None
        if not (math.isfinite(random) and math.isfinite(reference)) or reference == random:
            raise ValueError(
                f"{where}.{env}: random and reference must be finite and differ, got {random} and"
                f" {reference}."
            )
        if not all(
            isinstance(p[k], str) and p[k].strip() for k in ("random_source", "reference_source")
        ):
            raise ValueError(
                f"{where}.{env}: each point needs its source (a paper, a repository file, or the"
                f" command that measured it), got {p['random_source']!r} and"
                f" {p['reference_source']!r}."
            )
        out[str(env)] = stats.ReferencePoint(
            random, reference, p["random_source"], p["reference_source"]
        )
    return out


def read_suite(path: str | Path, out_dir: str | None, algorithms: Any) -> Suite:
    """The suite file's cells, naming algorithms of the registry `algorithms` (scanrl.algos:
    names() and get(name)). ValueError with one sentence naming the key for anything wrong in
    the file itself (the algorithms' own checks come in `check_cells`)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such suite file.")
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ValueError(f"{path} is not valid YAML: {' '.join(str(e).split())}.") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"{path} must hold a mapping with a `cells:` list, not {type(data).__name__} {data!r}."
        )
    unknown = sorted(set(map(str, data)) - SUITE_KEYS)
    if unknown:
        raise ValueError(
            f"{path}: unknown key '{unknown[0]}'; a suite has {', '.join(sorted(SUITE_KEYS))}."
        )
    seeds = _whole(data.get("seeds", 10), f"{path}: seeds")
    metric = data.get("metric", "return")
    if not isinstance(metric, str) or metric not in stats.METRICS:
        raise ValueError(f"{path}: metric must be {' or '.join(stats.METRICS)}, got {metric!r}.")
    folder = out_dir or data.get("out_dir") or f"runs/bench/{path.stem}"
    if not isinstance(folder, str):
        raise ValueError(f"{path}: out_dir must be a folder name, got {folder!r}.")
    common = _flag_words(data.get("flags"), f"{path}: flags")
    groups = data.get("cells")
    if not isinstance(groups, list) or not groups:
        raise ValueError(
            f"{path}: cells must be a non-empty list of groups (algos, envs, total_timesteps,"
            f" seeds, flags), got {groups!r}."
        )
    cells, seen = [], {}
    for i, group in enumerate(groups):
        where = f"{path}: cells[{i}]"
        if not isinstance(group, dict):
            raise ValueError(f"{where} must be a mapping with algos and envs, got {group!r}.")
        unknown = sorted(set(map(str, group)) - GROUP_KEYS)
        if unknown:
            raise ValueError(
                f"{where}: unknown key '{unknown[0]}'; a group has {', '.join(sorted(GROUP_KEYS))}."
            )
        for key in ("algos", "envs"):
            if key not in group:
                raise ValueError(f"{where} has no `{key}:`.")
        names = _names(group["algos"], f"{where}.algos")
        for name in names:
            if name not in algorithms.names():
                raise ValueError(f"{where}.algos: unknown algorithm {name!r}; scanrl has "
                                 f"{', '.join(algorithms.names())}.")
        envs = _names(group["envs"], f"{where}.envs")
        budget = (
            _whole(group["total_timesteps"], f"{where}.total_timesteps")
            if "total_timesteps" in group
            else None
        )
        group_seeds = _whole(group["seeds"], f"{where}.seeds") if "seeds" in group else seeds
        flags = common + _flag_words(group.get("flags"), f"{where}.flags")
        for algo in names:
            for env in envs:
                cell = Cell(algo, env, group_seeds, budget, flags, f"cells[{i}]")
                if cell.name in seen:
                    raise ValueError(
                        f"{where}: {cell} is already in {seen[cell.name]}; each (algorithm,"
                        " environment) appears once."
                    )
                seen[cell.name] = cell.where
                cells.append(cell)
    points = {
        **stats.REFERENCE_POINTS,
        **_points(data.get("reference_points"), f"{path}: reference_points"),
    }
    return Suite(
        path=path, out_dir=Path(folder), metric=metric, cells=cells, points=points,
        algorithms=algorithms,
    )


# ---------------------------------------------------------------------------------------------
# Before anything runs: every cell's command line, and what is already there
# ---------------------------------------------------------------------------------------------
def run_folders(folder: Path) -> list[Path]:
    """The run folders (with a config.json) in a cell's folder."""
    return (
        sorted(p for p in folder.glob("*") if (p / "config.json").is_file())
        if folder.is_dir()
        else []
    )


def _parse(module: Any, argv: list[str]) -> Any:
    """The algorithm's own parse of argv -> its Job; ValueError with the parser's one sentence."""
    from scanrl.common.harness import run

    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return run.parse_config(module, argv)
    except SystemExit as e:
        message = captured.getvalue().strip().splitlines()
        raise ValueError(
            message[-1].removeprefix("error: ") if message else f"exit code {e.code}."
        ) from None


def check_cells(suite: Suite) -> None:
    """Every cell's command line as its algorithm parses it, its programs built (not compiled)
    and its folder's state; fail() with one sentence naming the cell for the first problem."""
    from scanrl.common.harness import checkpoint, loop

    for cell in suite.cells:
        module, folder = suite.algorithms.get(cell.algo), suite.folder(cell)
        argv = cell.argv(folder)
        try:
            existing = run_folders(folder)
            if len(existing) > 1:
                raise ValueError(
                    f"{folder} holds {len(existing)} run folders and a cell has one; delete the"
                    " ones that are not this cell's."
                )
            config = _parse(module, argv)
            loop.build(module.make_algorithm, config, chunk=config.run.log_every or None)
            state = checkpoint.run_state(existing[0] if existing else None)
            if state == "finished":
                _check_unchanged(existing[0], config)
            elif state == "resume":
                _parse(module, ["--resume", str(existing[0]), *argv])  # the run's own resume checks
        except ValueError as e:
            fail(f"{suite.path}: {cell.where} ({cell}): {e}")


def _check_unchanged(run_dir: Path, config: Any) -> None:
    """A finished cell is kept only if the suite still asks for what it ran."""
    saved = json.loads((run_dir / "config.json").read_text())
    now = json.loads(json.dumps(runconfig.config_dict(config), default=str))
    for key, value in now.items():
        resumable = runconfig.RESUMABLE - {"total_timesteps"}
        if key not in resumable and key in saved and saved[key] != value:
            raise ValueError(f"its finished run {run_dir} used {flag(key)} {saved[key]} and the "
                             f"suite now "
                             f"gives {value}; delete that folder to run the cell again.")


# ---------------------------------------------------------------------------------------------
# Running the cells
# ---------------------------------------------------------------------------------------------
def run_cell(module: str, argv: list[str]) -> int:
    """Run one cell as its own process; returns its exit code. The process has its own session,
    so a Ctrl-C at the terminal reaches this process only, which passes it (and SIGTERM) on:
    the first makes the run checkpoint and stop, a second stops it at once, as for a run started
    by hand."""
    proc = subprocess.Popen([sys.executable, "-m", module, *argv], start_new_session=True)
    received = []

    def forward(sig, frame):
        received.append(sig)
        proc.send_signal(sig)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    # Stopped by the user, however the run ended (a signal during its imports ends it with a
    # traceback)
    return 128 + received[0] if received else code


def run_suite(suite: Suite) -> int:
    """Each cell in turn: skip, resume or start it. Returns the exit code: 0, 128 + signal when
    a cell was interrupted (the cells after it did not run), 1 when a cell failed."""
    from scanrl.common.harness import checkpoint

    failed = []
    for i, cell in enumerate(suite.cells):
        folder = suite.folder(cell)
        existing = run_folders(folder)
        state = checkpoint.run_state(existing[0] if existing else None)
        head = f"cell {i + 1}/{len(suite.cells)}: {cell}"
        if state == "finished":
            console.say(f"{head}: finished, skipped ({existing[0]})")
            continue
        argv = cell.argv(folder)
        if state == "resume":
            console.say(f"{head}: resuming {existing[0]}")
            argv = ["--resume", str(existing[0]), *argv]
        else:
            if state == "restart":
                shutil.rmtree(existing[0])
            console.say(f"{head}: {cell.seeds} seeds" + (
                f", {cell.total_timesteps:,} env steps per seed" if cell.total_timesteps else ""))
        code = run_cell(suite.module(cell), argv)
        if code in (128 + signal.SIGINT, 128 + signal.SIGTERM):
            console.say(f"Suite interrupted in cell {i + 1}/{len(suite.cells)} ({cell}): continue"
                        " with")
            print(console.command(f"scanrl-bench {suite.path}"), flush=True)
            return code
        if code:
            failed.append(f"{cell} (exit code {code})")
    if failed:
        print(
            f"error: {len(failed)} cell{'s' if len(failed) > 1 else ''} failed:"
            f" {'; '.join(failed)}; the report covers the finished cells.",
            file=sys.stderr,
            flush=True,
        )
        return 1
    return 0


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------
def collect(suite: Suite) -> list[dict[str, Any]]:
    """`stats.run_scores` of every finished cell, in the suite's order."""
    from scanrl.common.harness import checkpoint

    out = []
    for cell in suite.cells:
        existing = run_folders(suite.folder(cell))
        if existing and checkpoint.finished(existing[0]):
            out.append(stats.run_scores(existing[0]))
    return out


def report(
    suite: Suite, runs: list[dict[str, Any]], reps: int = stats.REPS, seed: int = stats.SEED
) -> dict:
    """Write results.json, report.json, report.md, aggregates.png and profiles.png into the
    suite's folder; returns report.json's content."""
    results = stats.results_from_runs(runs)
    stats.write_results(suite.out_dir / "results.json", results)
    rows = []
    for r in runs:
        s, x = r["summary"], r[suite.metric]
        finite = x[np.isfinite(x)] if x is not None else np.zeros(0)
        rows.append(
            {
                "algo": r["algo"],
                "env": r["env"],
                "seeds": len(r["seeds"]),
                "scored": int(finite.size),
                "steps_per_seed": s["total_timesteps"],
                "mean": float(finite.mean()) if finite.size else None,
                "std": float(finite.std()) if finite.size else None,
                "wall_seconds": s["wall_seconds"],
                "compile_seconds": s["compile_seconds"],
                "env_steps_per_second": s["env_steps_per_second"],
                "stopped_by": s["stopped_by"],
                "run_dir": s["run_dir"],
            }
        )
    return write_report(suite, results, rows, reps, seed)


def rescore(suite: Suite, reps: int = stats.REPS, seed: int = stats.SEED) -> dict:
    """The report again from the suite folder's results.json and report.json alone (the run
    folders need not be here): intervals, normalised scores and aggregates computed anew, with
    the reference points as they are now."""
    results = stats.load_results(suite.out_dir / "results.json")
    rows = json.loads((suite.out_dir / "report.json").read_text())["cells"]
    return write_report(suite, results, rows, reps, seed)


def write_report(suite: Suite, results: dict, rows: list[dict], reps: int, seed: int) -> dict:
    """Each row's IQM and normalised IQM from `results`' scores, the aggregates and pictures;
    writes report.json and report.md and returns report.json's content."""
    metric = suite.metric
    scores = stats.cell_scores(results, metric)
    progress = stats.BootstrapProgress(
        f"IQMs of {len(rows)} cell{'s' if len(rows) > 1 else ''}, then the aggregates, "
        f"{reps:,} resamples per interval",
        len(rows) + 1,
    )
    with progress:
        for row in rows:
            progress.step(f"{row['algo']} on {row['env']}")
            x = scores.get((row["algo"], row["env"]))
            raw = stats.iqm_interval(x, reps, seed) if x is not None else None
            normalised = (
                stats.iqm_interval(stats.normalise(x, row["env"], suite.points), reps, seed)
                if x is not None and stats.reference_point(row["env"], suite.points)
                else None
            )
            row.update(
                iqm=raw.as_list() if raw else None,
                normalised_iqm=normalised.as_list() if normalised else None,
            )
        progress.step("aggregates and performance profiles")
        aggregate, notes = _suite_aggregates(results, metric, suite.points, reps, seed)
    content = {
        "suite": str(suite.path),
        "metric": metric,
        "metric_means": stats.METRICS[metric],
        "interval": (
            f"95%, rliable stratified bootstrap (percentile), {reps:,} resamples, numpy seed {seed}"
        ),
        "cells": rows,
        "aggregates": {
            a: {k: e.as_list() for k, e in v.items()} for a, v in aggregate["estimates"].items()
        },
        "aggregate_envs": aggregate["tasks"],
        "notes": notes,
    }
    pictures = []
    if aggregate["estimates"]:
        try:
            draw_aggregates(aggregate, suite.out_dir / "aggregates.png")
            draw_profiles(aggregate, suite.out_dir / "profiles.png")
            pictures = ["aggregates.png", "profiles.png"]
        except Exception as e:  # noqa: BLE001 - a picture must never lose the numbers
            notes.append(f"the plots were not drawn ({type(e).__name__}: {e}).")
    (suite.out_dir / "report.json").write_text(json.dumps(content, indent=2) + "\n")
    (suite.out_dir / "report.md").write_text(markdown(suite, content, pictures))
    return content


def _suite_aggregates(
    results: dict, metric: str, points: dict, reps: int, seed: int
) -> tuple[dict, list[str]]:
    """Per algorithm, over the envs it ran that have reference points: the interval estimates and
    performance profiles of its normalised scores; and notes on what was left out."""
    notes = []
    try:
        scores, tasks = stats.score_dict(results, metric, normalised=True, points=points)
    except ValueError as e:
        return {"estimates": {}, "tasks": {}}, [f"no aggregates: {e}"]
    for algo in list(scores):
        if np.isnan(scores[algo]).any():
            notes.append(f"{algo} is left out of the aggregates: some runs have no {metric} "
                         f"(no episode ended in their last 10% of updates, or no evaluation).")
            del scores[algo], tasks[algo]
    missing = sorted(
        {
            env
            for (_, env) in stats.cell_scores(results, metric)
            if stats.reference_point(env, points) is None
        }
    )
    if missing:
        notes.append(
            f"no reference points for {', '.join(missing)}: "  # an env id is never capitalised
            f"{'they are' if len(missing) > 1 else 'it is'} in the per-cell table only."
        )
    if len({tuple(t) for t in tasks.values()}) > 1:
        notes.append(
            "the algorithms ran different sets of envs: each aggregate is over its own algorithm's"
            " envs."
        )
    estimates = stats.interval_estimates(scores, reps, seed)
    taus = stats.profile_taus(scores)
    profiles, intervals = stats.performance_profiles(scores, taus, seed=seed)
    return {
        "estimates": estimates,
        "tasks": tasks,
        "taus": taus,
        "profiles": profiles,
        "intervals": intervals,
    }, notes


def draw_aggregates(aggregate: dict, out: Path) -> None:
    """IQM, mean, median and optimality gap per algorithm: each interval a bar, the point a tick."""
    from scanrl.common.harness import plots

    names = list(aggregate["estimates"])
    fig = plots.figure(3.2 * len(stats.AGGREGATES), 0.5 * len(names) + 1.4)
    for j, what in enumerate(stats.AGGREGATES):
        ax = fig.add_subplot(1, len(stats.AGGREGATES), j + 1)
        for i, name in enumerate(names):
            stats.draw_interval(ax, i, aggregate["estimates"][name][what], f"C{i}")
        ax.set_yticks(range(len(names)), names if j == 0 else [""] * len(names))
        ax.set_ylim(-0.6, len(names) - 0.4)
        ax.set_title(what)
        ax.set_xlabel("normalised score")
    fig.tight_layout()
    plots.save(fig, out)


def draw_profiles(aggregate: dict, out: Path) -> None:
    """Each algorithm's performance profile (normalised scores), its 95% interval as a band."""
    from scanrl.common.harness import plots

    fig = plots.figure(7, 4.5)
    ax = fig.add_subplot()
    for i, name in enumerate(aggregate["estimates"]):
        n = len(aggregate["tasks"][name])
        stats.draw_profile(
            ax,
            aggregate["taus"],
            aggregate["profiles"][name],
            aggregate["intervals"][name],
            f"{name} ({n} env{'s' if n > 1 else ''})",
            f"C{i}",
        )
    ax.set(xlabel="normalised score (tau)", ylabel="fraction of runs with score > tau",
           title="performance profiles (band: 95% interval)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    plots.save(fig, out)


def _show(e: list | None) -> str:
    if not e or None in e:
        return "-"
    return f"{e[0]:.3g} [{e[1]:.3g}, {e[2]:.3g}]"


def markdown(suite: Suite, content: dict, pictures: list[str]) -> str:
    """report.md: the per-cell table, the aggregates, the plots and the reference points used."""
    lines = [
        f"# Suite report: `{suite.path}`",
        "",
        (
            f"Score per run: **{content['metric']}**, the {content['metric_means']}. Intervals:"
            f" {content['interval']}. Normalised score = (score - random) / (reference - random),"
            " with the reference points below."
        ),
        "",
        "## Cells",
        "",
        (
            "| algo | env | seeds | env steps per seed | IQM [95% CI] | normalised IQM [95% CI] |"
            " mean ± std | wall s | compile s | env steps/s | stopped by |"
        ),
        "|---|---|---:|---:|---|---|---|---:|---:|---:|---|",
    ]
    for r in content["cells"]:
        seeds = f"{r['seeds']}" if r["scored"] == r["seeds"] else f"{r['scored']} of {r['seeds']}"
        mean = f"{r['mean']:.4g} ± {r['std']:.3g}" if r["mean"] is not None else "-"
        lines.append(
            f"| {r['algo']} | {r['env']} | {seeds} | {r['steps_per_seed']:,} | {_show(r['iqm'])} |"
            f" {_show(r['normalised_iqm'])} | {mean} | {r['wall_seconds']:.1f} |"
            f" {r['compile_seconds']:.1f} | {r['env_steps_per_second']:,.0f} | {r['stopped_by']} |"
        )
    lines += [
        "",
        (
            "Wall seconds, compile seconds and env steps/s (all seeds, compile excluded) are each"
            " run's summary.json's; for a cell that was resumed they cover its last process only."
        ),
        "",
    ]
    if content["aggregates"]:
        lines += ["## Aggregates (normalised scores)", "",
                  "| algo | envs | " + " | ".join(f"{a} [95% CI]" for a in stats.AGGREGATES) + " |",
                  "|---|---|" + "---|" * len(stats.AGGREGATES)]
        for algo, values in content["aggregates"].items():
            lines.append(f"| {algo} | {', '.join(content['aggregate_envs'][algo])} | "
                         + " | ".join(_show(values[a]) for a in stats.AGGREGATES) + " |")
        lines += [
            "",
            (
                "Optimality gap: the mean shortfall below the reference (1), scores above it"
                " counting as 1; lower is better."
            ),
            "",
        ]
        lines += [f"![{p[:-4]}]({p})" for p in pictures] + [""]
    for note in content["notes"]:
        lines.append(f"- {note[0].upper()}{note[1:]}")
    if content["notes"]:
        lines.append("")
    envs = sorted({r["env"] for r in content["cells"]})
    used = [(env, stats.reference_point(env, suite.points)) for env in envs]
    if any(p for _, p in used):
        lines += [
            "## Reference points",
            "",
            "| env | random | source | reference | source |",
            "|---|---:|---|---:|---|",
        ]
        lines += [
            f"| {env} | {p.random:g} | {p.random_source} | {p.reference:g} | {p.reference_source} |"
            for env, p in used
            if p
        ]
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
def main(argv: list[str] | None, algorithms: Any) -> None:
    """`scanrl-bench SUITE.yaml [--out-dir DIR] [--dry-run] [--report-only] [--reps N]`, with
    the algorithms of the registry `algorithms` (the console script passes scanrl.algos)."""
    parser = configs.ToolParser(prog="scanrl-bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", metavar="SUITE.yaml", help="the suite file (docs/statistics.md)")
    parser.add_argument("--out-dir", help="the suite's folder (default: the file's out_dir)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check every cell and list what would run; run nothing",
    )
    parser.add_argument("--report-only", action="store_true",
                        help="write the report over the finished cells; run nothing")
    parser.add_argument(
        "--rescore",
        action="store_true",
        help=(
            "write the report again from the suite folder's results.json and report.json (no run "
            "folders needed), with the reference points as they are now; run nothing"
        ),
    )
    parser.add_argument("--reps", type=int, default=stats.REPS,
                        help=f"bootstrap resamples per interval (default {stats.REPS:,})")
    parser.add_argument(
        "--seed", type=int, default=stats.SEED, help="numpy seed of the bootstrap (default 0)"
    )
    args = parser.parse_args(argv)
    if args.reps < 1:
        fail(f"--reps takes a number of resamples >= 1, got {args.reps}.")
    try:
        suite = read_suite(args.suite, args.out_dir, algorithms)
    except ValueError as e:
        fail(str(e))
    try:
        if args.rescore:
            for name in ("results.json", "report.json"):
                if not (suite.out_dir / name).is_file():
                    fail(f"--rescore reads {suite.out_dir / name}, which is not there.")
            rescore(suite, args.reps, args.seed)
            console.say(
                f"wrote {suite.out_dir / 'report.md'} from {suite.out_dir / 'results.json'}"
            )
            return
        if not args.report_only:
            check_cells(suite)
        if args.dry_run:
            from scanrl.common.harness import checkpoint

            for i, cell in enumerate(suite.cells):
                existing = run_folders(suite.folder(cell))
                state = checkpoint.run_state(existing[0] if existing else None)
                console.say(f"cell {i + 1}/{len(suite.cells)}: {cell} ({state}):")
                print(console.command(f"python -m {suite.module(cell)} "
                                      + " ".join(cell.argv(suite.folder(cell)))))
            return
        suite.out_dir.mkdir(parents=True, exist_ok=True)
        code = 0 if args.report_only else run_suite(suite)
        runs = collect(suite)
        if runs:
            report(suite, runs, args.reps, args.seed)
            console.say(f"wrote {suite.out_dir / 'report.md'} ({len(runs)} of {len(suite.cells)}"
                        f" cells finished) and {suite.out_dir / 'results.json'}")
    except KeyboardInterrupt:  # between cells or while reporting: the cells' folders are complete
        print(
            f"Ctrl-C: stopped; continue with `scanrl-bench {suite.path}`.",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(128 + signal.SIGINT) from None
    if code:
        raise SystemExit(code)
