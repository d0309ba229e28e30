"""What the CPU compile options (`algorithm.CPU_COMPILER_OPTIONS`) buy and cost, per program:
each case runs as a command-line run in a fresh process without a compile cache, once with
the CPU options (the tree's choice on CPUs) and once with XLA's default CPU options,
alternating, `--repeats` times. Reports the medians of summary.json's compile_seconds,
env_steps_per_second (compile excluded) and wall_seconds.

    python benchmarks/compile_options.py --repeats 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CASES = {  # name: (script, flags)
    "ppo CartPole 1 seed": ("algos/ppo.py", ["--num-seeds", "1"]),
    "ppo CartPole 8 seeds": ("algos/ppo.py", ["--num-seeds", "8"]),
    "sac Pendulum 1 seed": ("algos/sac.py", ["--num-seeds", "1"]),
    "ppo Breakout-MinAtar 1 seed, 5e5 steps": ("algos/ppo.py", ["--env", "Breakout-MinAtar", "--num-seeds", "1",
                                                                  "--total-timesteps", "500000"]),
    "ppo navix DoorKey-5x5 5 seeds, 1e6 steps": ("algos/ppo.py", ["--env", "navix/Navix-DoorKey-5x5-v0",
                                                                    "--num-seeds", "5", "--total-timesteps", "1000000"]),
    "ppo_rnn xminigrid DoorKey-5x5 1 seed, 262,144 steps": ("algos/ppo_rnn.py", [
        "--env", "xminigrid/MiniGrid-DoorKey-5x5", "--num-seeds", "1", "--total-timesteps", "262144"]),
    "ppo jumanji Snake 5 seeds, 204,800 steps": ("algos/ppo.py", ["--env", "jumanji/Snake-v1", "--num-seeds", "5",
                                                                   "--total-timesteps", "204800"]),
    # the multi-agent cells of RESULTS rows 27, 28, 31 and 32 at their recipes, shorter budgets
    "ippo jaxmarl MPE spread 5 seeds, 5e5 steps": ("algos/ppo.py", [
        "--env", "jaxmarl/MPE_simple_spread_v3", "--num-seeds", "5", "--total-timesteps", "500000"]),
    "pqn-vdn jaxmarl MPE spread 5 seeds, 2e5 steps": ("algos/pqn.py", [
        "--env", "jaxmarl/MPE_simple_spread_v3", "--vdn", "--num-seeds", "5",
        "--total-timesteps", "200000"]),
    "ippo jaxmarl overcooked cramped_room 5 seeds, 2.5e5 steps": ("algos/ppo.py", [
        "--env", "jaxmarl/overcooked_cramped_room", "--num-seeds", "5", "--total-timesteps", "250000"]),
    "mappo jaxmarl SMAX 2s3z 5 seeds, 2e4 steps": ("algos/ppo_rnn.py", [
        "--env", "jaxmarl/SMAX_2s3z", "--critic-obs", "privileged_state", "--num-seeds", "5",
        "--total-timesteps", "20480"]),
}

# Run the algorithm file as __main__; for "default", XLA's defaults are forced before the harness
# is imported (it takes `compiler_options` from common/algorithm.py then).
LAUNCH = """
import runpy, sys
from scanrl.common import algorithm
if sys.argv[1] == "default":
    algorithm.compiler_options = lambda devices=None: {}
script = sys.argv[2]
sys.argv = [script, *sys.argv[3:]]
runpy.run_path(script, run_name="__main__")
"""


def run(options: str, script: str, flags: list[str]) -> dict:
    out = tempfile.mkdtemp()
    proc = subprocess.run([sys.executable, "-c", LAUNCH, options, script, *flags, "--eval-every", "0",
                           "--log-every", "0", "--no-compile-cache", "--out-dir", out],
                          cwd=REPO, capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        raise RuntimeError(f"exit {proc.returncode}: {proc.stdout[-1000:]} {proc.stderr[-1000:]}")
    (run_dir,) = Path(out).iterdir()
    return json.loads((run_dir / "summary.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cases", nargs="*", default=list(CASES), help="a subset of the cases, by name")
    args = parser.parse_args()
    print("| case | options | compile s | run env steps/s | wall s | runs (compile / steps/s) |")
    print("|---|---|---:|---:|---:|---|")
    for case in args.cases:
        script, flags = CASES[case]
        rows = {"CPU options": [], "XLA default": []}
        for _ in range(args.repeats):
            for name, options in (("CPU options", "cpu"), ("XLA default", "default")):
                rows[name].append(run(options, script, flags))
        for name, results in rows.items():
            med = {k: statistics.median(r[k] for r in results)
                   for k in ("compile_seconds", "env_steps_per_second", "wall_seconds")}
            each = "; ".join(f"{r['compile_seconds']:.1f} / {r['env_steps_per_second']:,.0f}" for r in results)
            print(f"| {case} | {name} | {med['compile_seconds']:.1f} | {med['env_steps_per_second']:,.0f} "
                  f"| {med['wall_seconds']:.1f} | {each} |", flush=True)


if __name__ == "__main__":
    main()
