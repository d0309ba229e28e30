"""Each seed's self-play against its play with the other seeds, from `scanrl-eval --cross-play`.

    python benchmarks/cross_play_table.py DIR [DIR ...]

DIR holds the `cross_play.json` that `scanrl-eval RUN --cross-play --out DIR/eval.json` wrote.
Per seed i: its self-play (cell [i, i]), its mean with the other seeds' policies (row i off the
diagonal: seed i's policy as agent 0, each other seed's as the rest), and the difference of the
two; each as rliable's IQM over the seeds with its 95% stratified-bootstrap interval (the
estimator of RESULTS.md). Also the matrix's own means, as scanrl-eval prints them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from scanrl.common.harness.stats import iqm_interval


def rows(folder: Path) -> dict[str, np.ndarray]:
    """[S] per seed: self-play, the mean with the others, and their difference."""
    matrix = np.array(json.loads((folder / "cross_play.json").read_text())["matrix"])
    mine = np.diag(matrix)
    others = matrix[~np.eye(len(matrix), dtype=bool)].reshape(len(matrix), -1).mean(1)
    return {"self-play": mine, "with another seed": others, "self-play minus the others":
            mine - others}


def main(folders: list[str]) -> None:
    if not folders:
        sys.exit(__doc__)
    for folder in map(Path, folders):
        played = json.loads((folder / "cross_play.json").read_text())
        actions = "greedy" if played["deterministic"] else "sampled"
        print(f"{folder} ({played['env']}, {len(played['seeds'])} seeds, {actions} actions, "
              f"{played['episodes']} games a pair): diagonal mean {played['self_play_mean']:.2f}, "
              f"the rest {played['cross_play_mean']:.2f}")
        for name, x in rows(folder).items():
            e = iqm_interval(x)
            print(f"  {name:<28} IQM {e.point:8.2f} [{e.low:.2f}, {e.high:.2f}]")


if __name__ == "__main__":
    main(sys.argv[1:])
