"""The recurrent cores against each other (`--core gru|lstm|lru|trxl`) on memory tasks, in
recurrent PPO (`--algo ppo_rnn`, both tasks) or recurrent PQN (`--algo pqn_rnn`, MemoryChain):
each core as a user runs it (`python algos/ALGO.py --env ENV --core CORE`, the defaults and the
env's preset, nothing else tuned), the same seeds, one process at a time, alone on the machine.

Scored alike: each seed's final return (summary.json: the mean training return over the last
10% of updates) as rliable's IQM with its 95% stratified-bootstrap interval over the seeds
(common/harness/stats.py `iqm_interval`); the speed is summary.json's env steps per second
(all seeds', training only) and the wall the whole process (imports, compile, training,
evaluation, files). `--plot` draws each task's mean training return against wall seconds
(compile included), the equal-wall view.

    python benchmarks/cores.py --out DIR          # runs what DIR lacks, then prints the table
    python benchmarks/cores.py --out DIR --table  # the table (and with --plot, DIR/cores.png)
    python benchmarks/cores.py --algo pqn_rnn --out DIR2 --plot
    python benchmarks/cores.py --task Craftax --out DIR3 --plot  # trxl_ppo.py's Craftax budget
    python benchmarks/cores.py --task MetaMaze --out DIR4  # recurrent PPO's defaults
    python benchmarks/cores.py --task MetaMaze --flags=--normalize-obs --out DIR5

`--flags` adds the same flags to every run (recorded in DIR's table.json as "flags", which a later
call on DIR reads when it gives none, and refuses other flags): MetaMaze's observation holds the
step count unscaled (0 to 200), which `--normalize-obs` brings to unit scale.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORES = ("gru", "lstm", "lru", "trxl")
TASKS = {  # name: the env's flags
    "CartPole-v1, velocities hidden": ["--env", "CartPole-v1", "--hide-obs", "1", "3"],
    "MemoryChain-bsuite, memory_length 20": ["--env", "MemoryChain-bsuite", "--env-params",
                                             "memory_length", "20"],
    # a maze whose goal stays put within an episode while the agent respawns after reaching it
    # (gymnax's MetaMaze-misc: a 3x3 view, the last action and reward); recurrent PPO's defaults
    "MetaMaze-misc": ["--env", "MetaMaze-misc"],
    # the Transformer-XL PPO's Craftax config at benchmarks/trxl_ppo.py's CPU scale, 32,768 steps
    "Craftax-Symbolic-v1, trxl_ppo.py's settings": [
        "--env", "craftax/Craftax-Symbolic-v1", "--recipe", "none", "--eval-every", "0",
        "--total-timesteps", "32768", "--num-envs", "16", "--num-steps", "32", "--seq-len", "16",
        "--trxl-window", "32", "--gru-size", "64", "--trxl-heads", "4", "--encoder-hidden", "64",
        "--head-hidden", "64", "64", "--activation", "relu", "--learning-rate", "2e-4",
        "--num-minibatches", "8", "--gamma", "0.999", "--gae-lambda", "0.8", "--ent-coef",
        "0.002", "--max-grad-norm", "1.0"],
}


def folder(out: Path, task: str, core: str) -> Path:
    return out / task.split(",")[0] / core


def tasks(algo: str, only: str | None = None) -> dict:
    """The tasks an algorithm is compared on (recurrent PQN's preset is MemoryChain's), or the
    one whose name starts with `only`."""
    if only:
        return {k: v for k, v in TASKS.items() if k.startswith(only)}
    return {k: v for k, v in TASKS.items() if not k.startswith(("Craftax", "MetaMaze"))
            and (algo == "ppo_rnn" or "Memory" in k)}


def run(algo: str, task: str, core: str, seeds: int, out: Path, flags: list[str]) -> None:
    """One core's run on one task, as a user starts it; skipped where it finished before."""
    where = folder(out, task, core)
    if list(where.glob("*/summary.json")):
        return
    where.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(ROOT / "algos" / f"{algo}.py"), *TASKS[task], "--core", core,
           *flags, "--num-seeds", str(seeds), "--out-dir", str(where), "--no-compile-cache"]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def result(task: str, core: str, out: Path) -> dict:
    (summary_file,) = folder(out, task, core).glob("*/summary.json")
    summary = json.loads(summary_file.read_text())
    lag = summary["wall_seconds"] - summary["run_seconds"]  # imports, compile, files
    records = [json.loads(line) for line in
               (summary_file.parent / "progress.jsonl").read_text().splitlines()]
    curve = [(lag + r["seconds"], float(np.nanmean(np.array(r["per_seed"]["episode_return"],
                                                           float))))
             for r in records if "per_seed" in r]
    return {"final": summary["final_return_per_seed"], "wall": summary["wall_seconds"],
            "steps_per_second": summary["env_steps_per_second"],
            "compile": summary["compile_seconds"], "curve": curve}


def table(algo: str, out: Path, plot: bool, only: str | None, flags: list[str]) -> None:
    from scanrl.common.harness.stats import iqm_interval

    data = {task: {core: result(task, core, out) for core in CORES} for task in tasks(algo, only)}
    budget = "32,768" if any("Craftax" in task for task in data) \
        else "2e5" if algo == "ppo_rnn" else "1e5"
    also = f", {' '.join(flags)}" if flags else ""
    print(f"| task ({algo}{also}, {budget} env steps per seed, 5 seeds) | core "
          "| final return IQM [95% CI] | env steps/s | compile (s) | wall (s) |")
    print("|---|---|---:|---:|---:|---:|")
    for task, cores in data.items():
        for core, r in cores.items():
            print(f"| {task} | {core} | {iqm_interval(r['final'])} | "
                  f"{r['steps_per_second']:,.0f} | {r['compile']:.0f} | {r['wall']:.0f} |")
    (out / "table.json").write_text(json.dumps({**data, **({"flags": flags} if flags else {})},
                                               indent=1) + "\n")
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(data), figsize=(6 * len(data), 4), squeeze=False)
        for ax, (task, cores) in zip(axes[0], data.items()):
            for core, r in cores.items():
                ax.plot(*zip(*r["curve"]), label=core)
            ax.set(title=task, xlabel="wall seconds (compile included)",
                   ylabel="mean training return", xscale="log")
            ax.legend()
        fig.tight_layout()
        fig.savefig(out / "cores.png", dpi=100)
        print(f"\nequal-wall plot: {out / 'cores.png'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", choices=("ppo_rnn", "pqn_rnn"), default="ppo_rnn")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--table", action="store_true", help="print the table of --out's runs")
    parser.add_argument("--plot", action="store_true", help="and draw the equal-wall plot")
    parser.add_argument("--task", help="only the task whose name starts with this (Craftax and "
                        "MetaMaze: run only when named)")
    parser.add_argument("--flags", help="flags added to every run, e.g. --flags=--normalize-obs "
                        "(default: those --out's table.json records, else none)")
    args = parser.parse_args()
    table_file = args.out / "table.json"  # None: no runs recorded yet, any flags go
    recorded = json.loads(table_file.read_text()).get("flags", []) if table_file.exists() else None
    flags = shlex.split(args.flags) if args.flags is not None else recorded or []
    if recorded is not None and flags != recorded:
        parser.error(f"--flags={args.flags!r} differs from the flags {args.out}'s runs were made "
                     f"with ({shlex.join(recorded) or 'none'}): give those, or another --out.")
    if not args.table:
        for task in tasks(args.algo, args.task):
            for core in CORES:
                run(args.algo, task, core, args.seeds, args.out, flags)
    table(args.algo, args.out, args.plot, args.task, flags)


if __name__ == "__main__":
    main()
