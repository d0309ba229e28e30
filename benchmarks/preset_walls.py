"""How long each algorithm's default budget takes on this machine, for --help and the algorithm
pages: for each (algorithm, env) below, a run of one seed of the budget that `compose` gives
(the file's defaults, its preset for the env, the suite's recipe), from the command line as a
user starts it. A budget of at most 1e6 env steps runs whole and its wall is its summary.json's
(compile included); a larger one runs a tenth and its expected wall is compile + budget /
speed (env steps per second, compile excluded), which counts the last evaluation ten times
over: an upper figure.

    python benchmarks/preset_walls.py                   # every case, about 20 minutes on 2 cores
    python benchmarks/preset_walls.py --only pqn,ppo    # these algorithms' cases
    python benchmarks/preset_walls.py --missing         # the cases the file lacks
    python benchmarks/preset_walls.py --docs            # the algorithm pages' table rows

Writes common/harness/preset_walls.json (read by --help), case by case, so an interrupted
measurement keeps what it measured. Nothing else should run on the cores meanwhile.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "common" / "harness" / "preset_walls.json"  # read by --help
RAW = ROOT / "benchmarks" / "reference" / "preset_walls.json"  # the same, named by the docs
CASES = [  # (algorithm, env): each file's default env, then an env of each of its presets
    ("ppo", "CartPole-v1"), ("impala", "CartPole-v1"), ("grpo", "CartPole-v1"),
    ("ppo_rnn", "CartPole-v1"), ("pqn", "CartPole-v1"), ("sac", "Pendulum-v1"),
    ("td3", "Pendulum-v1"), ("pqn", "Breakout-MinAtar"), ("ppo", "Breakout-MinAtar"),
    ("impala", "Breakout-MinAtar"), ("grpo", "Breakout-MinAtar"), ("ppo_rnn", "Breakout-MinAtar"),
    ("ppo", "Pendulum-v1"), ("impala", "Pendulum-v1"), ("grpo", "Pendulum-v1"),
    ("grpo", "Catch-bsuite"), ("pqn", "navix/Navix-DoorKey-5x5-v0"), ("pqn_rnn", "CartPole-v1"),
    ("pqn_rnn", "MemoryChain-bsuite"), ("pqn", "jumanji/Snake-v1"),
]
WHOLE, FRACTION = 1_000_000, 10  # budgets up to WHOLE run whole; larger ones a FRACTION


def budget(algo: str, env: str) -> int:
    from scanrl.algos import get
    from scanrl.common.harness.runconfig import compose

    return compose(get(algo), env).config.total_timesteps


def measure(algo: str, env: str) -> dict:
    total = budget(algo, env)
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, str(ROOT / "algos" / f"{algo}.py"), "--env", env, "--num-seeds", "1",
               "--total-timesteps", str(total if total <= WHOLE else total // FRACTION),
               "--out-dir", out,
               "--no-compile-cache"]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"{algo} on {env} failed:\n{proc.stderr[-2000:]}")
        (run_dir,) = Path(out).iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
    speed, compile_seconds = summary["env_steps_per_second"], summary["compile_seconds"]
    whole = total <= WHOLE
    return {"total_timesteps": total, "measured_timesteps": summary["total_timesteps"],
            "env_steps_per_second": round(speed, 1), "compile_seconds": round(compile_seconds, 1),
            "expected_seconds": round(summary["wall_seconds"] if whole
                                      else compile_seconds + total / speed),
            "how": "the whole budget's wall" if whole else "compile + budget / speed"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated algorithms")
    parser.add_argument("--docs", action="store_true", help="print the pages' rows, measure nothing")
    parser.add_argument("--missing", action="store_true", help="only the cases the file lacks")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    table = json.loads(OUT.read_text()) if OUT.is_file() else {}
    if args.docs:
        from scanrl.common.harness.configs import took

        for case, row in table.items():
            if not case.startswith("_"):
                algo, env = case.split(" ")
                print(f"{algo}: | {env} | {row['total_timesteps']:,} | {took(row['expected_seconds'])} |")
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    table["_about"] = (
        f"benchmarks/preset_walls.py: one seed on {os.cpu_count()} CPU cores"
        f" ({platform.processor() or platform.machine()}); a budget up to {WHOLE:,} steps run"
        f" whole, a larger one a 1/{FRACTION} and extrapolated (see 'how')"
    )
    for algo, env in CASES:
        if only and algo not in only or args.missing and f"{algo} {env}" in table:
            continue
        row = measure(algo, env)
        row.update(date=datetime.date.today().isoformat(), commit=commit)
        table[f"{algo} {env}"] = row
        OUT.write_text(json.dumps(table, indent=2) + "\n")
        RAW.write_text(OUT.read_text())  # the docs' raw data, beside the other measurements
        print(f"{algo:8} {env:18} {row['total_timesteps']:>10,} steps  "
              f"{row['env_steps_per_second']:>10,.0f} steps/s  compile {row['compile_seconds']:5.1f} s"
              f"  expected {row['expected_seconds'] / 60:6.1f} min", flush=True)


if __name__ == "__main__":
    main()
