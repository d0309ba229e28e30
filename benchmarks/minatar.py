"""MinAtar: the conv torso against the flattened-frame MLP, learning and throughput.

Every run is the command line with the algorithm's MinAtar preset (`PRESETS["minatar"]`),
`--torso auto` (the conv torso) or `--torso mlp` (the same preset on the flattened frame),
no in-run evaluation; each in a fresh process. Final return = summary.json's
final_return_mean (training episodes over the last 10% of updates), per seed and over seeds.

    python benchmarks/minatar.py learn --algos ppo --envs SpaceInvaders-MinAtar Asterix-MinAtar --steps 1000000
    python benchmarks/minatar.py speed --algos ppo impala grpo --seeds 1 8
    python benchmarks/minatar.py published   # gymnax's own table of trained-agent returns
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


def run(algo: str, env: str, torso: str, seeds: int, steps: int, out: Path, extra=()) -> dict:
    cmd = [sys.executable, str(REPO / "algos" / f"{algo}.py"), "--env", env, "--torso", torso, "--num-seeds",
           str(seeds), "--total-timesteps", str(steps), "--eval-every", "0", "--out-dir", str(out), *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    folder = max(out.iterdir(), key=lambda p: p.stat().st_mtime)
    return json.loads((folder / "summary.json").read_text())


def learn(args) -> None:
    print("| algo | env | torso | steps/seed | final return per seed | mean | std | env steps/s |")
    print("|---|---|---|---:|---|---:|---:|---:|")
    for algo in args.algos:
        for env in args.envs:
            for torso in ("auto", "mlp"):
                with tempfile.TemporaryDirectory() as out:
                    s = run(algo, env, torso, args.num_seeds, args.steps, Path(out))
                per_seed = s["final_return_per_seed"]
                print(f"| {algo} | {env} | {'cnn' if torso == 'auto' else 'mlp'} | {args.steps:,} | "
                      f"{', '.join(f'{r:.1f}' for r in per_seed)} | {statistics.mean(per_seed):.2f} | "
                      f"{statistics.pstdev(per_seed):.2f} | {s['env_steps_per_second']:,.0f} |", flush=True)


def speed(args) -> None:
    print("| algo | torso | seeds | env steps/s (median) | runs |")
    print("|---|---|---:|---:|---|")
    for algo in args.algos:
        for torso in ("auto", "mlp"):
            for seeds in args.seeds:
                rates = []
                for _ in range(args.repeats):
                    with tempfile.TemporaryDirectory() as out:
                        s = run(algo, args.envs[0], torso, seeds, args.speed_steps, Path(out), ["--log-every", "0"])
                    rates.append(s["env_steps_per_second"])
                print(f"| {algo} | {'cnn' if torso == 'auto' else 'mlp'} | {seeds} | {statistics.median(rates):,.0f} | "
                      f"{', '.join(f'{r:,.0f}' for r in rates)} |", flush=True)


def published(args) -> None:
    """The "Ckpt (Return)" column of the environment table in the installed gymnax's README
    (its package description): the return of the trained agent gymnax links for each env."""
    import importlib.metadata
    import re

    meta = importlib.metadata.metadata("gymnax")
    readme = meta.get_payload() or meta["Description"] or ""
    print(f"gymnax {meta['Version']} README, environment table:")
    for line in readme.splitlines():
        name = re.search(r"`([^`]+-MinAtar)`", line)
        if line.startswith("|") and name and name.group(1) in args.envs:
            returns = re.findall(r"\[([^\]]+)\]\([^)]*\)\s*\(R: ([^)]+)\)", line)
            print(f"  {name.group(1)}: " + ("; ".join(f"{agent} return {r}" for agent, r in returns) or "no agent"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["learn", "speed", "published"])
    parser.add_argument("--algos", nargs="+", default=["ppo", "impala", "grpo"])
    parser.add_argument("--envs", nargs="+", default=["SpaceInvaders-MinAtar", "Asterix-MinAtar"])
    parser.add_argument("--steps", type=int, default=1_000_000, help="env steps per seed (learn)")
    parser.add_argument("--num-seeds", type=int, default=4, help="seeds 0..N-1 (learn)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8], help="seed counts (speed)")
    parser.add_argument("--speed-steps", type=int, default=262_144, help="env steps per seed (speed)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per speed row")
    args = parser.parse_args()
    {"learn": learn, "speed": speed, "published": published}[args.what](args)
