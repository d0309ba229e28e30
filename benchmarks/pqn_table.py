"""The table of a PQN side-by-side sitting (benchmarks/pqn_side_by_side.sh OUT_DIR): per cell,
each side's rliable IQM of the last greedy evaluation with its 95% interval, over seeds, and
each side's wall (the whole process: imports, compile, training and evaluation; scanrl's
summary.json `wall_seconds` is timed from its process's start, so the peer's wall adds its
driver's `wall_import_s` to its compile and run), its compile, and the ratio of the walls.

Both sides are scored by one estimator: each env's first whole greedy episode, the mean over
128 envs per seed (scanrl's evaluation; benchmarks/purejaxql_pqn.py records the same for
purejaxql's final policy as `first_episode_return_per_seed`).  Where the peer's JSON also has
its own estimator (purejaxql: the mean of every episode ended in a max_steps_in_episode window
of its last test), the last column shows it.  A JSON from before the driver recorded the
first-episode estimator has only purejaxql's own; the table then says so in the peer column.

    python benchmarks/pqn_table.py OUT_DIR
"""

import json
import sys
from pathlib import Path

import numpy as np

from scanrl.common.harness import stats


def scanrl_side(run_dir: Path) -> dict:
    """A scanrl run folder: each seed's last greedy evaluation; wall and compile from
    summary.json (the command line's whole process: imports, compile, training, evaluations,
    files)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    evals = np.load(run_dir / "metrics.npz")["eval_return"]
    return {"returns": evals[:, -1], "wall": summary["wall_seconds"],
            "compile": summary["compile_seconds"], "steps": summary["total_timesteps"]}


def peer_side(path: Path) -> dict:
    """A purejaxql or rejax driver's JSON: each seed's last test (purejaxql: greedy on 128
    envs) or evaluation (rejax: epsilon 0.005 on 128 envs); wall = imports + compile + run."""
    result = json.loads(path.read_text())
    own = result.get("final_test_return_per_seed") or result["final_eval_return_per_seed"]
    first = result.get("first_episode_return_per_seed")
    return {"returns": np.array(first if first else own, float), "estimator": "first" if first else "own",
            "own": np.array(result.get("window_mean_return_per_seed") or own, float),
            "wall": result.get("wall_import_s", 0.0) + result["wall_compile_s"] + result["wall_run_s"],
            "compile": result["wall_compile_s"], "steps": result["env_steps_per_seed"]}


def show(e) -> str:
    return f"{e.point:,.1f} [{e.low:,.1f}, {e.high:,.1f}]"


def main(out: Path) -> None:
    runs = {json.loads((d / "config.json").read_text())["env"] + "|" + d.name: d
            for d in sorted((out / "scanrl").iterdir())}
    by_env = {}
    for key, d in runs.items():  # in the order the sitting ran them
        by_env.setdefault(key.split("|")[0], []).append(d)
    cartpole = by_env.get("CartPole-v1", [])  # none where the sitting ran with CARTPOLE=0
    cells = [("CartPole-v1", peer, run_dir, out / f"{peer}_cartpole.json")
             for peer, run_dir in zip(("purejaxql", "rejax"), cartpole)]
    for env, dirs in by_env.items():
        if env.endswith("-MinAtar"):
            cells.append((env, "purejaxql", dirs[0], out / f"purejaxql_{env.split('-')[0]}.json"))
    print("| env | peer | steps/seed | seeds | scanrl IQM [95% CI] | peer IQM [95% CI] | "
          "wall scanrl / peer (s) | compile scanrl / peer (s) | wall ratio | peer's own estimator |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for env, peer, run_dir, path in cells:
        ours, theirs = scanrl_side(run_dir), peer_side(path)
        print(f"| {env} | {peer} | {ours['steps']:,} / {theirs['steps']:,} | {len(ours['returns'])} / "
              f"{len(theirs['returns'])} | {show(stats.iqm_interval(ours['returns']))} | "
              f"{show(stats.iqm_interval(theirs['returns']))}"
              f"{'' if theirs['estimator'] == 'first' else ' (its own estimator)'} | "
              f"{ours['wall']:.0f} / {theirs['wall']:.0f} | "
              f"{ours['compile']:.0f} / {theirs['compile']:.0f} | {ours['wall'] / theirs['wall']:.2f}x | "
              f"{show(stats.iqm_interval(theirs['own']))} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
