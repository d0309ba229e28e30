"""What checkpoints cost: throughput with periodic checkpoints at the default interval vs only
the final one, and each checkpoint's size and save time.

Runs alternate (on, off, on, off, ...) in fresh processes on one warm compile cache, so machine
noise falls on both alike; reports medians of the repeats of summary.json's env_steps_per_second
(all seeds, compile excluded; the final checkpoint is written after the timed part, periodic
ones inside it) and the ratio on/off, and summary.json's checkpoint_seconds as a share of
run_seconds (periodic saves plus the final one): the direct cost, free of run-to-run noise.
Then saves the state of each case's run once more,
in-process, to time one checkpoint.

    python benchmarks/lifecycle.py --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CASES = {  # name: (script, flags)
    "ppo CartPole 8 seeds": ("algos/ppo.py", ["--num-seeds", "8"]),
    "sac Pendulum 1 seed (50k steps)": ("algos/sac.py", ["--total-timesteps", "50000", "--eval-every", "50"]),
}


def run(script: str, flags: list[str], cache: str, out: str) -> dict:
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": cache}
    proc = subprocess.run([sys.executable, script, *flags, "--out-dir", out], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    (run_dir,) = [p for p in Path(out).iterdir()]
    return json.loads((run_dir / "summary.json").read_text()) | {"run_dir": str(run_dir)}


def save_seconds(run_dir: Path, repeats: int = 5) -> tuple[float, int]:
    """Median seconds to save the run's last checkpoint again (load, then save), and its bytes."""
    import numpy as np

    from scanrl.common.harness import checkpoint

    path = checkpoint.all_checkpoints(run_dir / "checkpoints")[-1]
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    times = []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(repeats):
            t0 = time.perf_counter()
            with open(Path(d) / "x.npz", "wb") as f:
                np.savez(f, **arrays)
                f.flush()
                os.fsync(f.fileno())
            times.append(time.perf_counter() - t0)
    return statistics.median(times), path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cache = tempfile.mkdtemp()
    print("| case | checkpoints | env steps/s (median) | ratio on/off | checkpoints written | size each | save s "
          "| share of run time saving (median) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for case, (script, flags) in CASES.items():
        sides = {"on (default interval)": [], "off (final only)": ["--checkpoint-every", "0"]}
        results = {name: [] for name in sides}
        with tempfile.TemporaryDirectory() as warm:
            run(script, flags, cache, warm)
        for _ in range(args.repeats):
            for name, extra in sides.items():
                with tempfile.TemporaryDirectory() as out:
                    summary = run(script, flags + extra, cache, out)
                    updates = summary["updates"]
                    every = json.loads((Path(summary["run_dir"]) / "config.json").read_text())["checkpoint_every"]
                    summary["written"] = (updates - 1) // every + 1 if every else 1
                    summary["save"] = save_seconds(Path(summary["run_dir"]))
                    results[name].append(summary)
        off = statistics.median(r["env_steps_per_second"] for r in results["off (final only)"])
        for name, rs in results.items():
            sps = statistics.median(r["env_steps_per_second"] for r in rs)
            seconds, size = rs[0]["save"]
            share = statistics.median(r["checkpoint_seconds"] / r["run_seconds"] for r in rs)
            print(f"| {case} | {name} | {sps:,.0f} | {sps / off:.3f} | {rs[0]['written']} | {size / 2**20:.2f} MiB "
                  f"| {seconds:.3f} | {100 * share:.2f}% |", flush=True)


if __name__ == "__main__":
    main()
