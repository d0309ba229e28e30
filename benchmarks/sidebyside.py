"""What the side-by-side scripts (jumanji_a2c.py, navix_ppo.py, xland_ppo.py, ...) share: scanrl's
side of a cell run as a command in a fresh process, the end of a PureJaxRL side's process, and an IQM
with its interval as text."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

# The end of a PureJaxRL side's child process (navix_ppo.py, purejaxrl_ppo.py), given `train` (its
# `make_train`'s function, jitted) and `seeds`: one call per seed, one after another; from its
# LogWrapper's metrics, each seed's mean return of the training episodes that ended in the last
# 10% of updates, printed as one line `RESULT{"updates", "final_returns"}`.
PUREJAXRL_SEEDS = r"""
outs = [train(key)["metrics"] for key in jax.random.split(jax.random.PRNGKey(0), seeds)]
done = np.stack([np.asarray(m["returned_episode"], bool) for m in outs])  # [seeds, updates, T, N]
returns = np.stack([np.asarray(m["returned_episode_returns"], np.float64) for m in outs])
with np.errstate(all="ignore"):
    per_update = np.where(done, returns, 0.0).sum((2, 3)) / done.sum((2, 3))  # [seeds, updates]
tail = per_update[:, -max(1, -(-per_update.shape[1] // 10)):]  # ceil(10%), as stats.final_returns
print("RESULT" + json.dumps({"updates": per_update.shape[1], "final_returns": np.nanmean(tail, 1).tolist()}))
"""


def run_snippet(snippet: str, argv: list[str], who: str, python: str = sys.executable) -> dict:
    """`python -c SNIPPET *ARGV` (a side whose process prints one line `RESULT{json}`; `python`:
    the peer's own interpreter, this one by default): its wall, imports and compiling included,
    and that JSON; SystemExit naming `who` where none came."""
    started = time.perf_counter()
    proc = subprocess.run([python, "-c", snippet, *argv], capture_output=True, text=True)
    wall = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    if not lines:
        raise SystemExit(f"{who} failed: {proc.stderr[-3000:]}")
    return {"wall": wall, **json.loads(lines[0][len("RESULT"):])}


def final_return(per_update: list) -> float:
    """One seed's per-update training returns (None or NaN where no episode ended) scored by
    scanrl's own estimator, stats.final_returns (the last ceil(10%) of updates, those where none
    ended skipped): what a peer's side is scored by, so both sides of a cell count alike."""
    from scanrl.common.harness.stats import final_returns

    series = np.array([[np.nan if r is None else r for r in per_update]], np.float64)
    return float(final_returns(series)[0])


def run_in_folder(module: str, flags: list[str], read: Callable[[Path], Any]) -> tuple[list[str], float, Any]:
    """`python -m scanrl.algos.MODULE FLAGS` in a fresh process writing to a temporary folder:
    (the command, its wall with imports and compiling, `read(run_dir)` before the folder goes)."""
    with tempfile.TemporaryDirectory() as out:
        command = ["-m", f"scanrl.algos.{module}", *flags, "--log-every", "0", "--no-compile-cache"]
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, *command, "--out-dir", out], capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode:
            raise SystemExit(f"scanrl's {module} failed: {proc.stderr[-3000:]}")
        (run_dir,) = Path(out).iterdir()
        return command, wall, read(run_dir)


def run_scanrl(module: str, flags: list[str]) -> dict:
    """`python -m scanrl.algos.MODULE FLAGS` in a fresh process, with an evaluation after the last
    update among FLAGS: its wall (imports and compiling included), budget, speed, each seed's
    sampled evaluation return after the last update (`final_returns`) and its training score."""
    def read(run_dir):  # the summary, and each seed's sampled evaluation after the last update
        return json.loads((run_dir / "summary.json").read_text()), np.load(run_dir / "metrics.npz")["eval_return_sampled"][:, -1]

    command, wall, (summary, sampled) = run_in_folder(module, flags, read)
    seeds = len(sampled)
    return {"command": "python " + " ".join(command), "wall": wall, "updates": summary["updates"],
            "env_steps": summary["total_timesteps"], "env_steps_per_second": seeds * summary["total_timesteps"] / wall,
            "run_steps_per_second": summary["env_steps_per_second"], "compile_seconds": summary["compile_seconds"],
            "final_returns": sampled.tolist(), "training_scores": summary["final_return_per_seed"]}


def run_scanrl_training(module: str, flags: list[str]) -> dict:
    """`python -m scanrl.algos.MODULE FLAGS` in a fresh process, scored by its training returns
    (no evaluation): its command, wall (imports and compiling included), compile seconds,
    budget, speed with compiling left out, and each seed's final training return."""
    read = lambda run_dir: json.loads((run_dir / "summary.json").read_text())  # noqa: E731
    command, wall, summary = run_in_folder(module, flags, read)
    return {"command": "python " + " ".join(command), "wall": wall,
            "compile_seconds": summary["compile_seconds"],
            "env_steps": summary["total_timesteps"],
            "run_steps_per_second": summary["env_steps_per_second"],
            "training_scores": summary["final_return_per_seed"]}


def seed_processes(runs: list[dict], steps: int) -> dict:
    """A peer's side run one process per seed, one after another (each `run_snippet`'s dict with
    `compile_seconds`, `run_seconds`, `per_update`, `devices`, `versions`): its wall is the
    processes' sum; each seed scored by `final_return`."""
    return {"wall": sum(r["wall"] for r in runs), "walls": [r["wall"] for r in runs],
            "compile_seconds": [r["compile_seconds"] for r in runs], "env_steps": steps,
            "run_steps_per_second": len(runs) * steps / sum(r["run_seconds"] for r in runs),
            "training_scores": [final_return(r["per_update"]) for r in runs],
            "per_update": [r["per_update"] for r in runs], "devices": runs[0]["devices"],
            "versions": runs[0]["versions"]}


def write_sitting(out: Path, k: int, cell: dict, sides: dict[str, Callable[[], dict]]) -> None:
    """Sitting k (from 0) of a cell: run `sides` (name -> a function running that side) in their
    order on even k and the other way round on odd k, so the sides alternate; print each side's
    figures as it ends and write `cell` with both to OUT/sitting{k+1}.json."""
    order = list(sides) if k % 2 == 0 else list(sides)[::-1]
    cell = {**cell, "order": order, **scanrl_commit(), "started": time.strftime("%Y-%m-%d %H:%M")}
    for side in order:
        cell[side] = sides[side]()
        print(side, json.dumps({k: v for k, v in cell[side].items() if k != "per_update"}),
              flush=True)
    cell["finished"] = time.strftime("%Y-%m-%d %H:%M")
    out.mkdir(parents=True, exist_ok=True)
    (out / f"sitting{k + 1}.json").write_text(json.dumps(cell, indent=1))


def run_sittings(out: Path, sittings: int, sitting: Callable[[int], None]) -> None:
    """`sitting(k)` for each of `sittings` sittings not yet written in OUT (sitting{k+1}.json),
    so a cell stopped between sittings goes on where it stopped."""
    done = len(list(out.glob("sitting*.json"))) if out.is_dir() else 0
    for k in range(done, sittings):
        sitting(k)


def sitting_walls(cells: list[dict], other: str) -> dict:
    """Over a cell's sittings (`write_sitting`'s JSONs): each side's walls, the wall ratios
    scanrl / other, the ratios with imports and compiling left out (run rates, inverted), each
    side's median run rate, and whether every sitting gave sitting 1's scores."""
    sides = ("scanrl", other)
    return {"walls": {side: [c[side]["wall"] for c in cells] for side in sides},
            "ratios": [c["scanrl"]["wall"] / c[other]["wall"] for c in cells],
            "run_ratios": [c[other]["run_steps_per_second"] / c["scanrl"]["run_steps_per_second"]
                           for c in cells],
            "rates": {side: float(np.median([c[side]["run_steps_per_second"] for c in cells]))
                      for side in sides},
            "same": all(c[side]["training_scores"] == cells[0][side]["training_scores"]
                        for c in cells for side in sides)}


def sittings_table(cells: list[dict], other: str, names: tuple[str, str, str],
                   note: str = "") -> str:
    """The table of a cell's sittings (`write_sitting`'s JSONs, scores as `training_scores`):
    each side's budget, IQM of the last sitting's scores, walls as median [min, max] and run
    rate, then the wall ratios, whether the scores repeat (and `note`), then a line per
    sitting. `names`: scanrl's row, the other side's row, the other side in a sentence."""
    s, b = cells[-1]["scanrl"], cells[-1][other]  # the table's scores: the last sitting's
    w = sitting_walls(cells, other)
    row = lambda name, side, x: (f"| {name} | {x['env_steps']:,} | "  # noqa: E731
                                 f"{iqm_text(x['training_scores'], 2)} | "
                                 f"{spread(w['walls'][side])} | {w['rates'][side]:,.0f} |")
    return "\n".join([
        "| side | env steps/seed | final return IQM [95% CI] | wall (s), median [min, max] | "
        "run env steps/s |", "|---|---:|---:|---:|---:|",
        row(names[0], "scanrl", s), row(names[1], other, b), "",
        f"{len(cells)} sitting(s); wall ratio scanrl / {other} {spread(w['ratios'], 2, 'x')}; "
        f"with imports and compiling left out {spread(w['run_ratios'], 2, 'x')}; "
        f"scores {'identical in every sitting' if w['same'] else 'differ between sittings'}"
        + note, ""] + [
        f"- sitting {k + 1} ({c['started']}): scanrl "
        f"{iqm_text(c['scanrl']['training_scores'], 2)}, {names[2]} "
        f"{iqm_text(c[other]['training_scores'], 2)}, wall ratio "
        f"{c['scanrl']['wall'] / c[other]['wall']:.2f}x" for k, c in enumerate(cells)])


def spread(xs: list[float], digits: int = 0, unit: str = "") -> str:
    """"median [min, max]" of a few walls or ratios, `unit` after the median ("x")."""
    return f"{np.median(xs):,.{digits}f}{unit} [{min(xs):,.{digits}f}, {max(xs):,.{digits}f}]"


def scanrl_commit() -> dict:
    """The scanrl tree a cell runs from, for its JSON: {"scanrl_commit": `git rev-parse HEAD`,
    "scanrl_dirty": whether tracked files differ from that commit}, both None outside a git
    checkout. A copy without .git (a GPU machine's) takes the commit from SCANRL_COMMIT, set by
    the caller (`SCANRL_COMMIT=$(git rev-parse HEAD)` where the copy was made). Every published
    cell's JSON names its commit (tests/test_bench.py). Needs git only, not JAX or scanrl, so a
    peer's driver in its own virtualenv can call it."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None and os.environ.get("SCANRL_COMMIT"):
        return {"scanrl_commit": os.environ["SCANRL_COMMIT"], "scanrl_dirty": None,
                "scanrl_commit_source": "the SCANRL_COMMIT variable (no git checkout here)"}
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"scanrl_commit": commit, "scanrl_dirty": None if status is None else bool(status)}


def iqm_text(values, digits: int = 3) -> str:
    """rliable's IQM of `values` (one per seed) with its 95% stratified-bootstrap interval:
    "point [low, high]"; "-" when there is no value."""
    from scanrl.common.harness import stats

    e = stats.iqm_interval(np.array(values, np.float64)) if values is not None and len(values) else None
    return "-" if e is None else f"{e.point:,.{digits}f} [{e.low:,.{digits}f}, {e.high:,.{digits}f}]"


def command_line(doc: str, env: str, out: Path) -> argparse.ArgumentParser:
    """A side-by-side script's parser (described by its docstring's first paragraph) with the
    flags every one has: --env, --seeds (5), --out and --table."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--env", default=env)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--table", action="store_true", help="render the cells in --out as a markdown table")
    return parser


def finish(args: argparse.Namespace, cell: Callable, table: Callable[[Path], str], algo: str) -> None:
    """--table: print the table of the cells in --out. Else run `cell(args)`, write its result to
    --out as ALGO__ENV.json with the scanrl commit it started from, and print the table."""
    if not args.table:
        source = scanrl_commit()  # the tree at the start: a long cell may outlast an edit
        result = {**cell(args), **source}
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{algo}__{args.env.replace('/', '-')}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(table(args.out))
