"""One `--sweep` program against one CLI run per config: end-to-end wall time.

For each case, alternately (sweep, separate, sweep, separate, ...): the whole sweep as one
command, then every config of it as its own command, one after another, each a fresh
process with the compile cache off (`--no-compile-cache`: what a new sweep costs; a cached
repeat would hide compiling). Reports medians over the repeats of the end-to-end wall time
(process start to exit), the ratio separate / sweep, and the compile seconds from
summary.json (the sweep's one compile; the separate runs' total).

    python benchmarks/sweep.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CASES = {  # name: (script, field, values, flags)
    "ppo CartPole: 16 learning rates x 4 seeds, 500k steps": (
        "algos/ppo.py", "learning_rate", [f"{v:.3g}" for v in [1e-4 * 10 ** (i / 7.5) for i in range(16)]],
        ["--num-seeds", "4", "--log-every", "100"]),
    "sac Pendulum: 4 taus x 2 seeds, 20k steps": (
        "algos/sac.py", "tau", ["0.002", "0.005", "0.01", "0.02"], ["--num-seeds", "2", "--log-every", "2000"]),
}


def command(script: str, flags: list[str], out: str) -> tuple[float, list[dict]]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, script, *flags, "--no-compile-cache", "--out-dir", out], cwd=REPO,
                          capture_output=True, text=True, timeout=7200)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    return wall, [json.loads(p.read_text()) for p in Path(out).glob("*/summary.json")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    args = parser.parse_args()
    for name in args.cases:
        script, field, values, flags = CASES[name]
        sweep_wall, sweep_compile, separate_wall, separate_compile = [], [], [], []
        for r in range(args.repeats):
            with tempfile.TemporaryDirectory() as out:
                wall, (summary,) = command(script, [*flags, "--sweep", f"{field}={','.join(values)}"], out)
            sweep_wall.append(wall)
            sweep_compile.append(summary["compile_seconds"])
            total, compiles = 0.0, 0.0
            for v in values:
                with tempfile.TemporaryDirectory() as out:
                    wall, (summary,) = command(script, [*flags, f"--{field.replace('_', '-')}", v], out)
                total += wall
                compiles += summary["compile_seconds"]
            separate_wall.append(total)
            separate_compile.append(compiles)
            print(f"  repeat {r + 1}: sweep {sweep_wall[-1]:.1f} s, separate {total:.1f} s", flush=True)
        med = statistics.median
        print(json.dumps({
            "case": name, "repeats": args.repeats, "configs": len(values),
            "sweep_wall_s": round(med(sweep_wall), 1), "separate_wall_s": round(med(separate_wall), 1),
            "ratio_separate_over_sweep": round(med(separate_wall) / med(sweep_wall), 2),
            "sweep_compile_s": round(med(sweep_compile), 1), "separate_compile_s_total": round(med(separate_compile), 1),
            "all_sweep_wall_s": [round(x, 1) for x in sweep_wall],
            "all_separate_wall_s": [round(x, 1) for x in separate_wall],
        }), flush=True)


if __name__ == "__main__":
    main()
