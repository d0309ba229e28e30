"""What one PBT interval costs as the population grows: PBT against a random sweep of the same
rows, population by population, in one sitting (a GPU's question: where does the wall per
interval start to grow?).

For each population size M, two commands in fresh processes: `--sweep ... --sweep-samples M`
and `--pbt --pbt-population M` over the same --sweep ranges, the same env steps per member and
`--pbt-interval K`. Reported per M: each arm's run seconds (compile excluded, from
summary.json), the run seconds per interval, their ratio, and env steps/s over all members.
A population size starts only while more than --reserve seconds of --budget are left.

    python benchmarks/pbt_scaling.py --populations 16 256 4096 --out benchmarks/reference_gpu/pbt_scaling
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import sidebyside


def arm(flags: list[str]) -> dict:
    command, wall, summary = sidebyside.run_in_folder(
        "ppo", flags, lambda run_dir: json.loads((run_dir / "summary.json").read_text()))
    return {"command": "python " + " ".join(command), "wall": wall, "run_seconds": summary["run_seconds"],
            "compile_seconds": summary["compile_seconds"], "updates": summary["updates"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--populations", type=int, nargs="+", default=[16, 256, 4096])
    parser.add_argument("--updates", type=int, default=50)
    parser.add_argument("--interval", type=int, default=5)
    parser.add_argument("--budget", type=float, default=170.0)
    parser.add_argument("--reserve", type=float, default=40.0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/reference_gpu/pbt_scaling"))
    args = parser.parse_args()
    deadline = time.perf_counter() + args.budget
    per_update = 4 * 128  # CartPole's PPO preset: 4 envs x 128 steps per member
    common = ["--env", args.env, "--total-timesteps", str(args.updates * per_update), "--eval-every", "0",
              "--sweep", "learning_rate=log:1e-4:1e-2"]
    rows = []
    args.out.mkdir(parents=True, exist_ok=True)
    for members in args.populations:
        if deadline - time.perf_counter() < args.reserve:
            print(f"population {members} not run: budget spent", flush=True)
            break
        sweep = arm([*common, "--sweep-samples", str(members)])
        pbt = arm([*common, "--pbt", "--pbt-population", str(members), "--pbt-interval", str(args.interval)])
        intervals = args.updates // args.interval
        row = {"members": members, "env": args.env, "updates": args.updates, "interval": args.interval,
               **sidebyside.scanrl_commit(),
               "sweep": sweep, "pbt": pbt, "seconds_per_interval": {k: v["run_seconds"] / intervals
                                                                   for k, v in (("sweep", sweep), ("pbt", pbt))},
               "env_steps_per_second": {k: members * args.updates * per_update / v["run_seconds"]
                                        for k, v in (("sweep", sweep), ("pbt", pbt))}}
        rows.append(row)
        print(json.dumps({"members": members, **row["seconds_per_interval"],
                          "ratio": pbt["run_seconds"] / sweep["run_seconds"]}), flush=True)
        (args.out / "scaling.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
