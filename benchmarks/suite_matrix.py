"""Every algorithm on one environment of every suite: a short run (4 updates, evaluated,
checkpointed), a resume to 6 updates, then `scanrl-eval`. SAC on a discrete suite must be
refused in one sentence (exit 2). Prints one Markdown row per cell and writes them to --out.

    python benchmarks/suite_matrix.py --out benchmarks/suite_matrix.json

Budgets are tiny (this checks that the pieces work on each suite, not learning); the
smallest rollouts each algorithm accepts keep the compiles short.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENVS = ["brax/inverted_pendulum", "playground/CartpoleBalance", "jumanji/Snake-v1",
        "craftax/Craftax-Classic-Symbolic-v1", "navix/Navix-Empty-5x5-v0", "xminigrid/MiniGrid-Empty-5x5"]
DISCRETE = {"jumanji/Snake-v1", "craftax/Craftax-Classic-Symbolic-v1", "navix/Navix-Empty-5x5-v0",
            "xminigrid/MiniGrid-Empty-5x5"}
# per algorithm: flags for a small rollout, and the env steps of one update
SMALL = {
    "ppo": (["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "2"], 128),
    "impala": (["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "2"], 128),
    "grpo": (["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "2", "--group-size", "4"], 128),
    "ppo_rnn": (["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "2"], 128),
    "sac": (["--num-envs", "4", "--num-steps", "16", "--learning-starts", "64", "--buffer-size", "128"], 64),
}


def run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO, timeout=900)


def cell(algo: str, env: str, out_dir: Path) -> dict:
    flags, per_update = SMALL[algo]
    start = time.perf_counter()
    steps = 4 * per_update
    first = run([f"algos/{algo}.py", "--env", env, *flags, "--total-timesteps", str(steps), "--eval-every", "2",
                 "--checkpoint-every", "2", "--eval-episodes", "2", "--out-dir", str(out_dir)])
    if algo == "sac" and env in DISCRETE:
        lines = first.stderr.strip().splitlines()
        ok = first.returncode == 2 and len(lines) == 1 and "action" in lines[0]
        return {"algo": algo, "env": env, "ok": ok, "what": f"refused, exit {first.returncode}: {lines[-1] if lines else ''}",
                "seconds": time.perf_counter() - start}
    if first.returncode:
        return {"algo": algo, "env": env, "ok": False, "what": "train failed: " + first.stderr[-400:],
                "seconds": time.perf_counter() - start}
    run_dir = next(out_dir.glob(f"{algo}__*"))
    summary = json.loads((run_dir / "summary.json").read_text())
    more = str(6 * per_update)
    resumed = run([f"algos/{algo}.py", "--resume", str(run_dir), "--total-timesteps", more])
    evaluated = run(["-c", "from scanrl.algos import scanrl_eval; scanrl_eval()", str(run_dir), "--episodes", "2"])
    after = json.loads((run_dir / "summary.json").read_text())
    ok = not resumed.returncode and not evaluated.returncode and after["updates"] > summary["updates"]
    what = (f"trained {summary['updates']} updates (eval {summary['eval_return_deterministic_mean']:.2f}), resumed to "
            f"{after['updates']}, scanrl-eval rc {evaluated.returncode}")
    if not ok:
        what += " | " + (resumed.stderr or evaluated.stderr)[-400:]
    return {"algo": algo, "env": env, "ok": ok, "what": what, "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="benchmarks/suite_matrix.json")
    parser.add_argument("--algos", nargs="*", default=list(SMALL))
    parser.add_argument("--envs", nargs="*", default=ENVS)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for env in args.envs:
            for algo in args.algos:
                row = cell(algo, env, Path(tmp) / f"{algo}-{env.replace('/', '-')}")
                rows.append(row)
                print(f"| {algo} | {env} | {'ok' if row['ok'] else 'FAILED'} | {row['what']} | {row['seconds']:.0f} s |",
                      flush=True)
                Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
