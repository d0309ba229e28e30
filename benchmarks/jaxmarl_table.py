"""The JaxMARL side by side as a table row: benchmarks/jaxmarl_side_by_side.sh's OUT_DIR, one
`runN/` per sitting (scanrl's run folder `runN/scanrl/<run>/` and JaxMARL's
`runN/jaxmarl.json`).

Returns: each side's per-seed score by the same estimator (each agent's first-episode return
over 128 fresh envs of the final policy: IPPO's sampled actions, PQN-VDN's greedy ones; the
other policy's beside it), as rliable's IQM with its 95% interval, from the first sitting
(every sitting trains the same seeds; later ones repeat it for the walls), and P(scanrl >
JaxMARL) with its interval. Walls:
each whole process (imports, compile, training, the final evaluation) timed from outside the
same way for both sides (`walls.tsv`), the ratio scanrl / JaxMARL per sitting, shown as the
median [min, max] over the sittings with the median wall of each side.

    python benchmarks/jaxmarl_table.py OUT_DIR
    python benchmarks/jaxmarl_table.py --truncation OUT_DIR   # benchmarks/jaxmarl_truncation.sh's
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import numpy as np

from scanrl.common.harness import stats


def scanrl_side(run: Path, side: str = "scanrl") -> dict:
    (folder,) = [p for p in (run / side).iterdir() if p.is_dir()]
    summary = json.loads((folder / "summary.json").read_text())
    metrics = np.load(folder / "metrics.npz")
    # SMAX: the fraction of the evaluation's first battles won
    won = "eval_win_rate" in metrics.files
    return {"sampled": metrics["eval_return_sampled"][:, -1],
            "deterministic": metrics["eval_return"][:, -1],
            "own_wall": summary["wall_seconds"],
            "win_rate": metrics["eval_win_rate_sampled"][:, -1] if won else None,
            "win_rate_deterministic": metrics["eval_win_rate"][:, -1] if won else None}


def peer_side(run: Path) -> dict:
    (path,) = run.glob("jaxmarl*.json")
    record = json.loads(path.read_text())
    return {"sampled": np.array(record["sampled_return_per_seed"]),
            "deterministic": np.array(record["deterministic_return_per_seed"]),
            "own": record["own_last_update_return_per_seed"],
            "own_wall": record["wall_s"],
            "win_rate": record.get("win_rate_sampled_per_seed"),
            "win_rate_deterministic": record.get("win_rate_deterministic_per_seed"),
            "policy": "deterministic" if record["script"].startswith("QLearning/") else "sampled"}


def process_walls(out: Path) -> dict[tuple[str, str], float]:
    """walls.tsv: (sitting, side) -> the whole process's wall in seconds."""
    rows = (line.split("\t") for line in (out / "walls.tsv").read_text().splitlines())
    return {(sitting, side): float(wall) for sitting, side, wall in rows}


def show(values) -> str:
    e = stats.iqm_interval(np.asarray(values, float))
    return f"{e.point:.2f} [{e.low:.2f}, {e.high:.2f}]"


def main(out: Path) -> None:
    runs = sorted((p for p in out.iterdir() if p.is_dir() and p.name.startswith("run")),
                  key=lambda p: int(p.name[3:]))
    walls = process_walls(out)
    sides = [(scanrl_side(r), peer_side(r)) for r in runs]
    for r, (a, b) in zip(runs, sides):
        a["wall"], b["wall"] = walls[(r.name[3:], "scanrl")], walls[(r.name[3:], "jaxmarl")]
    ours, theirs = sides[0]
    ratios = [a["wall"] / b["wall"] for a, b in sides]
    print("| side | sampled IQM [95% CI] | deterministic IQM [95% CI] | median wall (s) |")
    print("|---|---:|---:|---:|")
    print(f"| scanrl | {show(ours['sampled'])} | {show(ours['deterministic'])} | "
          f"{statistics.median(a['wall'] for a, _ in sides):.0f} |")
    print(f"| JaxMARL | {show(theirs['sampled'])} | {show(theirs['deterministic'])} | "
          f"{statistics.median(b['wall'] for _, b in sides):.0f} |")
    print(f"\nwall ratio scanrl / JaxMARL over {len(sides)} sittings: "
          f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}, {max(ratios):.2f}] "
          f"({', '.join(f'{r:.2f}' for r in ratios)})")
    policy = theirs["policy"]
    better = stats.probability_of_improvement(ours[policy][:, None], theirs[policy][:, None])
    print(f"P(scanrl > JaxMARL), {policy}: {better.point:.2f} [{better.low:.2f}, "
          f"{better.high:.2f}]")
    for name, side in (("scanrl", ours), ("JaxMARL", theirs)):  # SMAX
        if side["win_rate"] is not None:
            print(f"{name}'s win rate, each env's first battle (the same estimator): sampled "
                  f"{show(side['win_rate'])}, deterministic {show(side['win_rate_deterministic'])}")
    if ours["win_rate"] is not None and theirs["win_rate"] is not None:
        better = stats.probability_of_improvement(ours["win_rate"][:, None],
                                                  np.asarray(theirs["win_rate"])[:, None])
        print(f"P(scanrl > JaxMARL), win rate, sampled: {better.point:.2f} [{better.low:.2f}, "
              f"{better.high:.2f}]")
    if theirs["own"] is not None:
        print("JaxMARL's own metric (last update's returned_episode_returns): "
              f"{show(theirs['own'])}")


def truncation(out: Path) -> None:
    """The time limit bootstrapped (truncated/) against read as a termination (terminated/):
    each reading's final evaluation per seed, sampled and deterministic, and P(truncated >
    terminated)."""
    sides = {r: scanrl_side(out / r, "") for r in ("truncated", "terminated")}
    print("| time limit read as | seeds | sampled IQM [95% CI] | deterministic IQM [95% CI] |")
    print("|---|---:|---:|---:|")
    for reading, side in sides.items():
        print(f"| {reading} | {len(side['sampled'])} | {show(side['sampled'])} | "
              f"{show(side['deterministic'])} |")
    for policy in ("sampled", "deterministic"):
        better = stats.probability_of_improvement(sides["truncated"][policy][:, None],
                                                  sides["terminated"][policy][:, None])
        print(f"P(truncated > terminated), {policy}: {better.point:.2f} [{better.low:.2f}, "
              f"{better.high:.2f}]")


if __name__ == "__main__":
    if sys.argv[1] == "--truncation":
        truncation(Path(sys.argv[2]))
    else:
        main(Path(sys.argv[1]))
