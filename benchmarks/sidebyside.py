"""What the side-by-side scripts (jumanji_a2c.py, navix_ppo.py, xland_ppo.py, ...) share: scanrl's
side of a cell run as a command in a fresh process, and an IQM with its interval as text."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np


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
    --out as ALGO__ENV.json, and print the table."""
    if not args.table:
        result = cell(args)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{algo}__{args.env.replace('/', '-')}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(table(args.out))
