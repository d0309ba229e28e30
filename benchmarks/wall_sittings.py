"""The wall of a side-by-side row of benchmarks/RESULTS.md section 1 over repeated sittings.

Each ROW_FOLDER holds one folder per run (run1/, run2/, ...), each with the cell's JSON as
benchmarks/navix_ppo.py, purejaxrl_ppo.py, brax_trainers.py or jumanji_a2c.py writes it: both
sides' walls (`wall`, seconds; for navix_ppo.py, purejaxrl_ppo.py and jumanji_a2c.py whole
processes, imports and compiling included, no compile cache on either side; for brax_trainers.py
scanrl's compile + run against the sum of Brax's seeds' `train` calls, its later seeds loading the
first one's compiled programs, as RESULTS.md's bullet on rows 1-9 says) and the run's `started`
and `finished` stamps (to the minute). For each run this prints both walls
and their ratio (scanrl / peer), then the median ratio with its [min, max] over the runs and
the median wall of each side: the figure RESULTS.md shows in the row's wall cell.

The order of the sides: within a run the scripts run scanrl's process first and the peer's
after it (navix_ppo.py's `cell`: scanrl, then Navix or PureJaxRL; purejaxrl_ppo.py's `cell`:
scanrl without masks, scanrl with masks, then PureJaxRL; brax_trainers.py's and jumanji_a2c.py's:
scanrl, then the peer's seeds), so runs made one after another
alternate the two sides (scanrl, peer, scanrl, peer, ...). The stamps are checked to be in
order (no run starts before the one before it finished); the order inside a run is the
script's, not read from the JSON, whose stamps are too coarse for it. No training: a second.

    python benchmarks/wall_sittings.py benchmarks/reference/navix_ppo/one_device_2026-11-30 \\
        benchmarks/reference/navix_ppo/purejaxrl benchmarks/reference/purejaxrl_ppo
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ORDER = {"navix": "scanrl, Navix", "purejaxrl_navix": "scanrl, PureJaxRL",
         "purejaxrl_ppo": "scanrl, scanrl with masks, PureJaxRL", "brax": "scanrl, Brax",
         "jumanji": "scanrl, Jumanji"}


def runs(folder: Path) -> list[tuple[str, dict]]:
    """(run name, cell JSON) for each run folder, in run order."""
    found = []
    for run in sorted((p for p in folder.iterdir() if p.is_dir() and p.name.startswith("run")),
                      key=lambda p: int(p.name[3:])):
        (cell,) = sorted(run.glob("*.json"))
        found.append((run.name, json.loads(cell.read_text())))
    return found


def peer_of(cell: dict) -> str:
    return cell.get("peer") or next(k for k in ("purejaxrl", "navix", "brax", "jumanji") if k in cell)


def order_of(cell: dict) -> str:
    if "scanrl_masked" in cell:
        return ORDER["purejaxrl_ppo"]
    peer = peer_of(cell)
    return ORDER["purejaxrl_navix" if peer == "purejaxrl" else peer]


def summary(folder: Path) -> dict:
    cells = runs(folder)
    if len(cells) < 2:
        raise SystemExit(f"{folder}: {len(cells)} run folder(s); this script is for repeated runs")
    ours = [c["scanrl"]["wall"] for _, c in cells]
    theirs = [c[peer_of(c)]["wall"] for _, c in cells]
    ratios = [s / p for s, p in zip(ours, theirs)]
    stamps = [(c["started"], c["finished"]) for _, c in cells]
    in_order = all(stamps[i][1] <= stamps[i + 1][0] for i in range(len(stamps) - 1))
    orders = {order_of(c) for _, c in cells}
    return {"folder": folder, "runs": [n for n, _ in cells], "peer": peer_of(cells[0][1]), "ours": ours,
            "theirs": theirs, "ratios": ratios, "stamps": stamps, "in_order": in_order, "order": orders}


def main(folders: list[str]) -> None:
    for name in folders:
        s = summary((REPO / name) if not Path(name).is_absolute() else Path(name))
        print(f"{name}: scanrl against {s['peer']}, each run's processes in the order "
              f"{' / '.join(sorted(s['order']))}")
        for run, a, b, r, (start, end) in zip(s["runs"], s["ours"], s["theirs"], s["ratios"], s["stamps"]):
            print(f"  {run}: {start} to {end}: scanrl {a:.1f} s, {s['peer']} {b:.1f} s, ratio {r:.2f}x")
        alternating = s["in_order"] and len(s["order"]) == 1
        print(f"  runs one after another: {'yes' if s['in_order'] else 'NO'}; the sides "
              f"{'alternate' if alternating else 'do not alternate'} over {len(s['runs'])} sittings")
        print(f"  wall cell: {statistics.median(s['ratios']):.2f}x [{min(s['ratios']):.2f}, {max(s['ratios']):.2f}] "
              f"({len(s['runs'])} sittings; scanrl median {statistics.median(s['ours']):.1f} s, "
              f"other {statistics.median(s['theirs']):.1f} s)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
