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
    python benchmarks/pqn_table.py SITTING_1 SITTING_2 SITTING_3

With several folders, each a sitting of the same cells run one after another (the script's
order alternates the sides: scanrl, purejaxql, scanrl, rejax, ...), the wall ratio is the median
[min, max] over the sittings, each sitting's walls listed below the table, and the scores are
the last sitting's (the others' are checked equal, or their differences printed).
"""

import json
import statistics
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


def cells_of(out: Path) -> list[tuple[str, str, dict, dict]]:
    """(env, peer, scanrl's side, the peer's side) of each cell of one sitting's folder."""
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
    return [(env, peer, scanrl_side(run_dir), peer_side(path)) for env, peer, run_dir, path in cells]


def main(outs: list[Path]) -> None:
    sittings = [cells_of(out) for out in outs]
    if len({tuple((env, peer) for env, peer, _, _ in cells) for cells in sittings}) != 1:
        raise SystemExit("the sittings hold different cells")
    several = len(outs) > 1
    print("| env | peer | steps/seed | seeds | scanrl IQM [95% CI] | peer IQM [95% CI] | "
          f"wall scanrl / peer (s){' (medians)' if several else ''} | compile scanrl / peer (s) | "
          f"wall ratio{' median [min, max]' if several else ''} | peer's own estimator |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i, (env, peer, ours, theirs) in enumerate(sittings[-1]):
        walls = [(cells[i][2]["wall"], cells[i][3]["wall"]) for cells in sittings]
        ratios = [a / b for a, b in walls]
        ratio = (f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}, {max(ratios):.2f}]" if several
                 else f"{ratios[0]:.2f}x")
        print(f"| {env} | {peer} | {ours['steps']:,} / {theirs['steps']:,} | {len(ours['returns'])} / "
              f"{len(theirs['returns'])} | {show(stats.iqm_interval(ours['returns']))} | "
              f"{show(stats.iqm_interval(theirs['returns']))}"
              f"{'' if theirs['estimator'] == 'first' else ' (its own estimator)'} | "
              f"{statistics.median(a for a, _ in walls):.0f} / {statistics.median(b for _, b in walls):.0f} | "
              f"{ours['compile']:.0f} / {theirs['compile']:.0f} | {ratio} | "
              f"{show(stats.iqm_interval(theirs['own']))} |")
    if not several:
        return
    print()
    for out, cells in zip(outs, sittings):
        print(f"{out}: " + "; ".join(f"{env} against {peer}: {a['wall']:.1f} / {b['wall']:.1f} s, "
                                     f"{a['wall'] / b['wall']:.2f}x" for env, peer, a, b in cells))
        for (env, peer, a, b), (_, _, last_a, last_b) in zip(cells, sittings[-1]):
            for side, x, y in (("scanrl", a, last_a), (peer, b, last_b)):
                if not np.array_equal(x["returns"], y["returns"]):
                    print(f"  {env}, {side}: returns {np.round(x['returns'], 2).tolist()} differ from the "
                          f"last sitting's {np.round(y['returns'], 2).tolist()}")


if __name__ == "__main__":
    main([Path(a) for a in sys.argv[1:]])
