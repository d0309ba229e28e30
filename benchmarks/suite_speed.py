"""PPO's training speed on one environment of every suite, at 1 and 8 seeds: env steps/s of
the whole program (all seeds, rollouts and updates, compile excluded; summary.json's
`env_steps_per_second`), median of the repeats, each run in a fresh process.

One PPO shape for every suite, so the suites compare with each other: 16 environments x 64
steps a rollout, 4 epochs of 4 minibatches, 64x64 MLPs (the conv torso for image
observations, as `--torso auto` chooses), 10 updates per seed, no evaluation.

    python benchmarks/suite_speed.py --repeats 3 --out benchmarks/suite_speed.json
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
ENVS = ["CartPole-v1", "brax/inverted_pendulum", "brax/ant", "playground/CartpoleBalance", "playground/CheetahRun",
        "jumanji/Snake-v1", "craftax/Craftax-Classic-Symbolic-v1", "navix/Navix-Empty-5x5-v0",
        "xminigrid/MiniGrid-Empty-5x5"]
SHAPE = ["--num-envs", "16", "--num-steps", "64", "--num-epochs", "4", "--num-minibatches", "4",
         "--actor-hidden", "64", "64", "--critic-hidden", "64", "64", "--total-timesteps", "10240",
         "--eval-every", "0", "--log-every", "0"]


def steps_per_second(env: str, seeds: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "algos/ppo.py", "--env", env, "--num-seeds", str(seeds), *SHAPE,
                        "--out-dir", out], cwd=REPO, capture_output=True, text=True, check=True)
        (run_dir,) = Path(out).iterdir()
        return json.loads((run_dir / "summary.json").read_text())["env_steps_per_second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="*", default=ENVS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/suite_speed.json")
    args = parser.parse_args()
    rows = []
    print("| env | 1 seed | 8 seeds | 8 / 1 |\n|---|---:|---:|---:|")
    for env in args.envs:
        runs = {seeds: [steps_per_second(env, seeds) for _ in range(args.repeats)] for seeds in (1, 8)}
        med = {seeds: statistics.median(v) for seeds, v in runs.items()}
        rows.append({"env": env, "runs": runs, "median": med})
        print(f"| {env} | {med[1]:,.0f} | {med[8]:,.0f} | {med[8] / med[1]:.1f}x |", flush=True)
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
