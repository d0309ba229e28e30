"""The two policies for bounded actions side by side: the state-independent Gaussian whose
samples are clipped to the env's bounds (`--action-dist gaussian`) against the tanh-squashed
normal with a state-dependent std (`--action-dist tanh_normal`), per algorithm, on one env,
everything else at the algorithm's defaults for it. Each (algorithm, policy) trains
`--seeds` seeds in one program; reported: rliable's IQM with its 95% stratified-bootstrap
interval of each seed's final return (training episodes over the last 10% of updates) and
of its last evaluation (sampled and deterministic), and the wall seconds. A JSON per run in
--out.

    python benchmarks/action_dists.py --env Pendulum-v1 --timesteps 500000 --seeds 5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def run(algo: str, dist: str, env: str, timesteps: int, seeds: int, evals: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run([sys.executable, f"algos/{algo}.py", "--env", env, "--action-dist", dist,
                               "--total-timesteps", str(timesteps), "--num-seeds", str(seeds), "--eval-every",
                               str(evals), "--log-every", "0", "--checkpoint-every", "0", "--no-compile-cache",
                               "--out-dir", out], cwd=REPO, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"{algo} {dist} failed: {proc.stderr[-2000:]}")
        (run_dir,) = Path(out).iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
        last = json.loads((run_dir / "progress.jsonl").read_text().splitlines()[-1])["per_seed"]
    return {"algo": algo, "action_dist": dist, "env": env, "timesteps": timesteps, "seeds": seeds,
            "final": summary["final_return_per_seed"], "eval_sampled": last.get("eval_return_sampled"),
            "eval": last.get("eval_return"), "wall": summary["compile_seconds"] + summary["run_seconds"]}


def table(out: Path) -> str:
    from scanrl.common.harness import stats

    def fmt(values) -> str:
        e = stats.iqm_interval(np.array(values, dtype=float)) if values else None
        return "-" if e is None else f"{e.point:,.1f} [{e.low:,.1f}, {e.high:,.1f}]"

    rows = ["| algo | policy | env | steps/seed | seeds | final IQM [95% CI] | eval sampled IQM | eval deterministic IQM | "
            "wall, s |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for path in sorted(out.glob("*.json")):
        r = json.loads(path.read_text())
        rows.append(f"| {r['algo']} | {r['action_dist']} | {r['env']} | {r['timesteps']:,} | {r['seeds']} | "
                    f"{fmt(r['final'])} | {fmt(r['eval_sampled'])} | {fmt(r['eval'])} | {r['wall']:.0f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algos", nargs="+", default=["ppo", "impala", "grpo", "ppo_rnn"])
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--timesteps", type=int, default=500_000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--eval-every", type=int, default=10**6, help="updates between evaluations (one after the last)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "reference" / "action_dists")
    parser.add_argument("--table", action="store_true")
    args = parser.parse_args()
    if not args.table:
        args.out.mkdir(parents=True, exist_ok=True)
        for algo in args.algos:
            for dist in ("gaussian", "tanh_normal"):
                result = run(algo, dist, args.env, args.timesteps, args.seeds, args.eval_every)
                (args.out / f"{algo}__{dist}__{args.env}.json").write_text(json.dumps(result, indent=1) + "\n")
                print(json.dumps(result), flush=True)
    print(table(args.out))


if __name__ == "__main__":
    main()
