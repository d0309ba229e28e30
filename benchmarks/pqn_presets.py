"""PQN's suite presets against PPO's suite recipe on one env, at equal env steps and at equal
wall: each side as a user runs it (`python algos/ALGO.py --env ENV`, its defaults for the env,
nothing else; where a suite publishes no PPO recipe, PPO's documented settings for the env
as `--ppo-flags`), the same seeds, one process at a time, the two sides alternating for
`--sittings` rounds, alone on the machine.

Scored alike: each seed's final return (summary.json: the mean training return over the last
10% of updates; PQN's is epsilon-greedy, PPO's sampled) and its last evaluations (metrics.npz:
`eval_return` deterministic, argmax; `eval_return_sampled`, PQN epsilon-greedy at 0.05 and PPO
sampling its policy), each as rliable's IQM with its 95% stratified-bootstrap interval
over the seeds (common/harness/stats.py `iqm_interval`). The wall is the whole process
(summary.json `wall_seconds`: imports, compile, training, evaluation, files). At equal wall,
the slower side's training return is read from its progress.jsonl at the record nearest to the
faster side's wall (its compile plus training seconds).

    python benchmarks/pqn_presets.py --env navix/Navix-DoorKey-5x5-v0 --seed 10 --seeds 10 \\
        --sittings 3 --out DIR
    python benchmarks/pqn_presets.py --env jumanji/Snake-v1 --seed 10 --seeds 10 --sittings 3 \\
        --ppo-flags "--num-envs 64 --num-steps 64 --learning-rate 1e-3 --activation relu \\
        --actor-hidden 128 128 --critic-hidden 128 128 --total-timesteps 500000" --out DIR
    python benchmarks/pqn_presets.py --env craftax/Craftax-Classic-Symbolic-v1 --seed 0 \
        --seeds 5 --sittings 1 --flags "--total-timesteps 200000 --eval-every 0" --out DIR
    python benchmarks/pqn_presets.py --table --out DIR

Run again with a larger `--sittings` and the same `--out`, it keeps the finished sittings and
adds the others. `--flags` go to both sides (a shorter budget than a recipe's; `--eval-every 0`
where evaluating would cost more than training, as on Craftax, whose table then shows no
evaluation).
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
SIDES = ("pqn", "ppo")


def run(algo: str, env: str, seed: int, seeds: int, out: Path, flags: str = "") -> Path:
    """One side's run, as a user starts it (with `flags` added); returns its run folder. A side
    whose folder already holds a finished run is kept (a later call adds the sittings after the
    last finished one); a folder holding an unfinished run is refused."""
    if not (out.is_dir() and any(out.iterdir())):
        out.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, str(ROOT / "algos" / f"{algo}.py"), "--env", env, "--seed",
               str(seed), "--num-seeds", str(seeds), "--out-dir", str(out), "--no-compile-cache",
               *shlex.split(flags)]
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    (run_dir,) = out.iterdir()
    if not (run_dir / "summary.json").is_file():
        raise SystemExit(f"{run_dir} holds an unfinished run: remove it and start again")
    return run_dir


def side(run_dir: Path) -> dict:
    """A run folder's per-seed scores, wall and curve (training return against wall seconds)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    metrics = np.load(run_dir / "metrics.npz")

    def last(key: str) -> list[float]:  # [seeds, updates] -> each seed's last evaluation
        if key not in metrics:  # a run without evaluation (--eval-every 0)
            return [np.nan] * len(summary["final_return_per_seed"])
        return [float(row[np.isfinite(row)][-1]) if np.isfinite(row).any() else np.nan
                for row in metrics[key]]

    lag = summary["wall_seconds"] - summary["run_seconds"]  # imports, compile, files
    curve = [(lag + r["seconds"], float(np.nanmean([np.nan if v is None else v for v in
                                                    r["per_seed"]["episode_return"]])))
             for r in map(json.loads, (run_dir / "progress.jsonl").read_text().splitlines())
             if "per_seed" in r]
    return {"final": summary["final_return_per_seed"], "eval": last("eval_return"),
            "eval_sampled": last("eval_return_sampled"),
            "wall": summary["wall_seconds"], "compile": summary["compile_seconds"],
            "steps": summary["total_timesteps"], "curve": curve, "run_dir": str(run_dir)}


def table(out: Path) -> None:
    from scanrl.common.harness.stats import iqm_interval

    def fmt(scores):  # an Estimate: "IQM [low, high]"; runs without evaluation have none
        return str(iqm_interval(scores)) if np.isfinite(scores).all() else "not run"

    sittings = sorted(p for p in out.iterdir() if p.is_dir() and p.name.startswith("sitting"))
    data = {s.name: {a: side(next((s / a).iterdir())) for a in SIDES} for s in sittings}
    first = data[sittings[0].name]
    print("| side | env steps/seed | final return IQM [95% CI] | deterministic eval IQM [95% CI]"
          " | sampled eval IQM [95% CI] | median wall (s) [min, max] |")
    print("|---|---:|---:|---:|---:|---:|")
    for a in SIDES:
        walls = [d[a]["wall"] for d in data.values()]
        print(f"| {a} | {first[a]['steps']:,} | {fmt(first[a]['final'])} | "
              f"{fmt(first[a]['eval'])} | "
              f"{fmt(first[a]['eval_sampled'])} | {np.median(walls):.1f} "
              f"[{min(walls):.1f}, {max(walls):.1f}] |")
    same = all(d[a][k] == first[a][k] for d in data.values() for a in SIDES
               for k in ("final", "eval", "eval_sampled"))
    print(f"\nevery sitting's per-seed returns equal sitting 1's: {'yes' if same else 'NO'}")
    ratios = [d["pqn"]["wall"] / d["ppo"]["wall"] for d in data.values()]
    print(f"wall PQN / PPO: median {np.median(ratios):.2f}x [{min(ratios):.2f}, {max(ratios):.2f}]"
          f" over {len(ratios)} sitting(s)")
    fast, slow = sorted(SIDES, key=lambda a: first[a]["wall"])
    at = min(first[slow]["curve"], key=lambda c: abs(c[0] - first[fast]["wall"]))
    print(f"equal wall (sitting 1): at {first[fast]['wall']:.0f} s, when {fast} ends, {slow}'s "
          f"mean training return is {at[1]:.3g} (its record at {at[0]:.0f} s)")
    (out / "table.json").write_text(json.dumps(data, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="navix/Navix-DoorKey-5x5-v0")
    parser.add_argument("--seed", type=int, default=10, help="first seed (the presets' sweeps "
                        "used seeds from 0)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--sittings", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ppo-flags", default="", help="flags added to PPO's command (for a "
                        "suite that publishes no PPO recipe: PPO's documented settings there)")
    parser.add_argument("--flags", default="", help="flags added to both sides' commands")
    parser.add_argument("--table", action="store_true", help="print the table of --out's runs")
    args = parser.parse_args()
    args.out = args.out.resolve()  # the runs start in the repository's root
    if not args.table:
        for n in range(1, args.sittings + 1):
            for a in SIDES if n % 2 else SIDES[::-1]:  # alternating which side goes first
                run(a, args.env, args.seed, args.seeds, args.out / f"sitting{n}" / a,
                    f"{args.flags} {args.ppo_flags if a == 'ppo' else ''}")
    table(args.out)


if __name__ == "__main__":
    main()
