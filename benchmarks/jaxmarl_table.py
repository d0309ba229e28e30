"""The JaxMARL side by side as a table row: benchmarks/jaxmarl_side_by_side.sh's OUT_DIR, one
`runN/` per sitting (scanrl's run folder `runN/scanrl/<run>/` and JaxMARL's
`runN/jaxmarl_ippo.json`).

Returns: each side's per-seed score by the same estimator (each agent's first-episode return
over 128 fresh envs of the final policy, sampled actions; the deterministic policy's beside
it), as rliable's IQM with its 95% interval, from the first sitting (every sitting trains the
same seeds; later ones repeat it for the walls). Walls: each whole process (imports, compile,
training, the final evaluation), the ratio scanrl / JaxMARL per sitting, shown as the median
[min, max] over the sittings with the median wall of each side.

    python benchmarks/jaxmarl_table.py OUT_DIR
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import numpy as np

from scanrl.common.harness import stats


def scanrl_side(run: Path) -> dict:
    (folder,) = [p for p in (run / "scanrl").iterdir() if p.is_dir()]
    summary = json.loads((folder / "summary.json").read_text())
    metrics = np.load(folder / "metrics.npz")
    return {"sampled": metrics["eval_return_sampled"][:, -1],
            "deterministic": metrics["eval_return"][:, -1],
            "wall": summary["wall_seconds"]}


def peer_side(run: Path) -> dict:
    record = json.loads((run / "jaxmarl_ippo.json").read_text())
    return {"sampled": np.array(record["sampled_return_per_seed"]),
            "deterministic": np.array(record["deterministic_return_per_seed"]),
            "own": np.array(record["own_last_update_return_per_seed"]),
            "wall": record["wall_s"]}


def show(values) -> str:
    e = stats.iqm_interval(np.asarray(values, float))
    return f"{e.point:.2f} [{e.low:.2f}, {e.high:.2f}]"


def main(out: Path) -> None:
    runs = sorted((p for p in out.iterdir() if p.is_dir() and p.name.startswith("run")),
                  key=lambda p: int(p.name[3:]))
    sides = [(scanrl_side(r), peer_side(r)) for r in runs]
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
    print(f"JaxMARL's own metric (last update's returned_episode_returns): {show(theirs['own'])}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
