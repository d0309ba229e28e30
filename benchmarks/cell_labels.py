"""The labels of benchmarks/RESULTS.md section 1, each with its probability of improvement.

For every side-by-side row this reads the row's raw data (the paths of RESULTS.md's sittings
table), takes each side's per-seed scores (the score the row's comparison uses, listed in
ROWS), and prints the row number, both sides' IQM with its 95% stratified-bootstrap interval,
the label by RESULTS.md's rule (above or below only when the two intervals do not overlap,
otherwise level), the label RESULTS.md gives the row, and rliable's probability of improvement
P(scanrl > other) with its 95% interval (`stats.probability_of_improvement`: Mann-Whitney U /
(n_x n_y), ties counting half, the interval from 10,000 resamples of each side's seeds, seed 0,
so the same files give the same figures). No training: a few seconds on one core.

    python benchmarks/cell_labels.py            # every row
    python benchmarks/cell_labels.py 1 6 21     # some rows
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

from scanrl.common.harness import stats

REPO = Path(__file__).resolve().parent.parent
REF = "benchmarks/reference"
GPU = "benchmarks/reference_gpu"


def brax(path: str) -> tuple[list, list]:
    """benchmarks/brax_trainers.py's JSON: each seed's last evaluation, both sides."""
    c = json.loads((REPO / path).read_text())
    return c["scanrl"]["evals"], c["brax"]["evals"]


def side_by_side(path: str, other: str, key: str = "final_returns") -> tuple[list, list]:
    """sidebyside.py's JSON (navix, XLand, Jumanji, Craftax, PureJaxRL): `key` of both sides."""
    c = json.loads((REPO / path).read_text())
    return c["scanrl"][key], c[other][key]


def pqn(run_dir: str, peer_json: str) -> tuple[list, list]:
    """A PQN cell as benchmarks/pqn_table.py reads it: scanrl's last greedy evaluation per seed
    (metrics.npz); the peer's first-episode estimator where its JSON records one, else its own
    last test (purejaxql) or evaluation (rejax)."""
    ours = np.load(REPO / run_dir / "metrics.npz")["eval_return"][:, -1]
    result = json.loads((REPO / peer_json).read_text())
    own = result.get("final_test_return_per_seed") or result["final_eval_return_per_seed"]
    return list(ours), result.get("first_episode_return_per_seed") or own


def jaxmarl(out: str) -> tuple[list, list]:
    """benchmarks/jaxmarl_side_by_side.sh's first sitting, as benchmarks/jaxmarl_table.py reads
    it: each seed's final evaluation by the policy the row scores (IPPO sampled, PQN-VDN
    greedy), both sides."""
    (record,) = (REPO / out / "run1").glob("jaxmarl*.json")
    peer = json.loads(record.read_text())
    greedy = peer["script"].startswith("QLearning/")
    (run_dir,) = (REPO / out / "run1" / "scanrl").iterdir()
    ours = np.load(run_dir / "metrics.npz")["eval_return" if greedy else "eval_return_sampled"]
    return list(ours[:, -1]), peer["deterministic_return_per_seed" if greedy
                                   else "sampled_return_per_seed"]


EQ = f"{REF}/brax_trainers/equal_cores"
ROWS = {
    1: lambda: brax(f"{REF}/brax_trainers/equal_cores_2026-12-04/run1/ppo__brax-inverted_double_pendulum_num-devices1.json"),
    2: lambda: brax(f"{EQ}/ppo__brax-halfcheetah_num-devices1.json"),
    3: lambda: brax(f"{REF}/brax_trainers/cheetahrun_2026-12-04/run1/ppo__playground-CheetahRun_num-devices1.json"),
    4: lambda: brax(f"{EQ}/ppo__playground-WalkerWalk_num-devices1.json"),
    5: lambda: brax(f"{REF}/brax_trainers/hopper_sac_2026-12-04/run1/sac__brax-hopper_num-devices1.json"),
    6: lambda: brax(f"{REF}/brax_trainers/sac_swingup_2026-12-04/run1/sac__playground-CartpoleSwingup_num-devices1.json"),
    7: lambda: brax(f"{GPU}/brax_trainers/ppo__brax-ant.json"),
    8: lambda: brax(f"{GPU}/brax_trainers_5e7/ppo__brax-ant.json"),
    9: lambda: brax(f"{GPU}/brax_trainers/ppo__brax-humanoid.json"),
    10: lambda: pqn(f"{REF}/pqn/cartpole_fresh_2026-12-04/sitting3/scanrl/pqn__CartPole-v1__20261204-092128",
                    f"{REF}/pqn/cartpole_fresh_2026-12-04/sitting3/purejaxql_cartpole.json"),
    11: lambda: pqn(f"{REF}/pqn/cartpole_fresh_2026-12-04/sitting3/scanrl/pqn__CartPole-v1__20261204-092310",
                    f"{REF}/pqn/cartpole_fresh_2026-12-04/sitting3/rejax_cartpole.json"),
    12: lambda: pqn(f"{REF}/pqn/scanrl/pqn__Breakout-MinAtar__20261128-181523", f"{REF}/pqn/purejaxql_Breakout.json"),
    # rows 13, 25 and 26: three runs each with the same returns; run1's
    13: lambda: side_by_side(f"{REF}/navix_ppo/navix_2026-12-04/run1/ppo__navix-Navix-DoorKey-5x5-v0.json", "navix"),
    14: lambda: side_by_side(f"{REF}/xland_ppo/evaluated_alike/ppo_rnn__xminigrid-MiniGrid-DoorKey-5x5.json", "xland"),
    15: lambda: side_by_side(f"{REF}/jumanji_a2c/snake_2026-12-04/run1/a2c__jumanji-Snake-v1.json", "jumanji"),
    16: lambda: side_by_side(f"{REF}/jumanji_a2c/game2048_2026-12-04/run1/a2c__jumanji-Game2048-v1.json", "jumanji"),
    17: lambda: side_by_side(f"{GPU}/craftax_ppo/ppo__craftax-Craftax-Classic-Symbolic-v1.json", "baseline",
                             "training_scores"),
    18: lambda: side_by_side(f"{REF}/craftax_ppo/one_device/ppo__craftax-Craftax-Classic-Symbolic-v1.json",
                             "baseline", "training_scores"),
    19: lambda: side_by_side(f"{REF}/craftax_ppo_rnn_65k/one_device/ppo_rnn__craftax-Craftax-Classic-Symbolic-v1.json",
                             "baseline", "training_scores"),
    20: lambda: side_by_side(f"{REF}/craftax_ppo/one_device_ppo_rnn/ppo_rnn__craftax-Craftax-Classic-Symbolic-v1.json",
                             "baseline", "training_scores"),
    # row 21 re-run on 2026-12-04 with both sides scored by each env's first greedy episode
    21: lambda: pqn(f"{REF}/pqn/asterix_2e6_one_estimator/scanrl/pqn__Asterix-MinAtar__20261204-121545",
                    f"{REF}/pqn/asterix_2e6_one_estimator/purejaxql_Asterix.json"),
    22: lambda: pqn(f"{REF}/pqn/spaceinvaders_2e6/scanrl/pqn__SpaceInvaders-MinAtar__20261129-161127",
                    f"{REF}/pqn/spaceinvaders_2e6/purejaxql_SpaceInvaders.json"),
    # row 23 re-run on 2026-12-02 with both sides scored by each env's first greedy episode
    23: lambda: pqn(f"{REF}/pqn/breakout_2e6_one_estimator/scanrl/pqn__Breakout-MinAtar__20261202-053458",
                    f"{REF}/pqn/breakout_2e6_one_estimator/purejaxql_Breakout.json"),
    24: lambda: pqn(f"{REF}/pqn/freeway_2e6/scanrl/pqn__Freeway-MinAtar__20261130-023722",
                    f"{REF}/pqn/freeway_2e6/purejaxql_Freeway.json"),
    25: lambda: side_by_side(f"{REF}/navix_ppo/purejaxrl_2026-12-04/run1/ppo__navix-Navix-DoorKey-5x5-v0.json", "purejaxrl"),
    26: lambda: side_by_side(f"{REF}/purejaxrl_ppo/run1/ppo__jumanji-Snake-v1.json", "purejaxrl"),
    # row 27 re-run on 2026-12-06 with the recipe's rows without the world state
    27: lambda: jaxmarl(f"{REF}/jaxmarl/ippo_mpe_2e6_own_obs"),
    # row 28 re-run on 2026-12-06 after pqn.py's Q-network read a team's agents as rows
    28: lambda: jaxmarl(f"{REF}/jaxmarl/pqn_vdn_mpe_1e6_rows"),
    29: lambda: side_by_side(f"{REF}/trxl_ppo/cpu_32k/sitting2.json", "baseline", "training_scores"),
    30: lambda: jaxmarl(f"{REF}/jaxmarl/ippo_mpe_2e6_8_seeds"),
    # row 31 re-run on 2026-12-06 on the AMD machine, after a6bd33f
    31: lambda: jaxmarl(f"{REF}/jaxmarl/ippo_overcooked_cramped_1e6_amd"),
    # row 32 re-run on 2026-12-07 after ppo_rnn's privileged replay moved its floats (2f8c5f7)
    32: lambda: jaxmarl(f"{REF}/jaxmarl/mappo_smax_2s3z_5e5_two_carries"),
    33: lambda: side_by_side(f"{REF}/pqn_rnn_craftax/cpu_2e5/sitting2.json", "purejaxql",
                             "training_scores"),
    34: lambda: side_by_side(f"{REF}/pqn_rnn_craftax/cpu_393k/sitting1.json", "purejaxql",
                             "training_scores"),
    35: lambda: jaxmarl(f"{REF}/jaxmarl/pqn_vdn_rnn_mpe_2e5"),
}


def published_labels() -> dict[int, str]:
    """RESULTS.md section 1's label per row (above, below or level)."""
    text = (REPO / "benchmarks" / "RESULTS.md").read_text()
    table = text[text.index("## 1."):text.index("**Sittings, versions, raw data and commands.**")]
    labels = {}
    for line in table.splitlines():
        if re.match(r"\| \d+ \|", line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            word = re.search(r"above|below|level", cells[-1])
            labels[int(cells[0])] = word.group(0) if word else "?"
    return labels


def rule(s: stats.Estimate, o: stats.Estimate) -> str:
    return "above" if s.low > o.high else "below" if s.high < o.low else "level"


def show(e: stats.Estimate) -> str:
    digits = 3 if max(abs(e.point), abs(e.high)) < 10 else 1
    return f"{e.point:,.{digits}f} [{e.low:,.{digits}f}, {e.high:,.{digits}f}]"


def main(rows: list[int]) -> None:
    published = published_labels()
    print("| # | seeds | scanrl IQM [95% CI] | other IQM [95% CI] | label by the rule | RESULTS.md's label | "
          "P(scanrl > other) [95% CI] |")
    print("|---:|---:|---:|---:|---|---|---:|")
    for row in rows:
        ours, theirs = (np.asarray(v, np.float64) for v in ROWS[row]())
        s, o = stats.iqm_interval(ours), stats.iqm_interval(theirs)
        p = stats.probability_of_improvement(ours[:, None], theirs[:, None])
        print(f"| {row} | {len(ours)} / {len(theirs)} | {show(s)} | {show(o)} | {rule(s, o)} | "
              f"{published.get(row, '-')} | {p.point:.2f} [{p.low:.2f}, {p.high:.2f}] |")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or sorted(ROWS))
