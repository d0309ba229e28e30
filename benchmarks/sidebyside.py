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


def run_snippet(snippet: str, argv: list[str], who: str) -> dict:
    """`python -c SNIPPET *ARGV` (a side whose process prints one line `RESULT{json}`): its wall,
    imports and compiling included, and that JSON; SystemExit naming `who` where none came."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", snippet, *argv], capture_output=True, text=True)
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
