"""PBT against a random sweep of the same compute: the same starting configs, members x env steps.

Each cell runs two commands in fresh processes, one after the other: a random sweep of
`--members` configs (`--sweep ... --sweep-samples M`) and a PBT run (`--pbt --pbt-population
M`) over the same --sweep ranges. Both draw their starting values with the same --seed, so
the population starts from exactly the sweep's configs; both train `--seeds` independent
repetitions of every row in one program. Per repetition each arm picks its best row by the
final training return (mean episode return over the last 10% of updates: the sweep's best
config, PBT's winner) and is scored by that row's sampled evaluation after the last update
(--eval-episodes episodes, keys apart from training), so both arms select the same way and
neither is scored on the data it selected by. Also reported: the sweep's config that is best on
average over the repetitions (what sweep.json's best_config names), scored per repetition.

    python benchmarks/pbt.py --cell pendulum --out benchmarks/reference/pbt
    python benchmarks/pbt.py --table --out benchmarks/reference/pbt

Writes OUT/<cell>.json and, with --table, OUT/report.md (rliable IQM with 95% intervals,
probability of improvement, wall ratio).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

import sidebyside

CELLS = {
    # name: (algorithm, env, env steps per row, members, --sweep specs, extra flags)
    "pendulum": ("ppo", "Pendulum-v1", 500_000, 8,
                 ["learning_rate=log:1e-4:1e-2", "gamma=uniform:0.9:0.995"], ["--eval-every", "50", "--pbt-interval", "10"]),
    "breakout": ("ppo", "Breakout-MinAtar", 500_000, 4,
                 ["learning_rate=log:2e-4:2e-2", "ent_coef=uniform:0.0:0.05"], ["--eval-every", "50", "--pbt-interval", "5"]),
    "brax_idp": ("ppo", "brax/inverted_double_pendulum", 307_200, 4,
                 ["learning_rate=log:1e-4:1e-2", "ent_coef=uniform:0.0:0.02"], ["--recipe", "cpu", "--eval-every", "25", "--pbt-interval", "3"]),
    # the same cell with twice the interval (6 updates: 4 intervals), run after the one above
    "brax_idp_interval6": ("ppo", "brax/inverted_double_pendulum", 307_200, 4,
                           ["learning_rate=log:1e-4:1e-2", "ent_coef=uniform:0.0:0.02"],
                           ["--recipe", "cpu", "--eval-every", "25", "--pbt-interval", "6"]),
    # the same cell with members ranked by their evaluations (16 episodes every 3 updates), not training episodes
    "brax_idp_eval_fitness": ("ppo", "brax/inverted_double_pendulum", 307_200, 4,
                              ["learning_rate=log:1e-4:1e-2", "ent_coef=uniform:0.0:0.02"],
                              ["--recipe", "cpu", "--eval-every", "3", "--pbt-interval", "3", "--pbt-fitness", "eval"]),
    # CartPole at a budget most configs of a wide learning-rate range do not solve in, 10 repetitions
    "cartpole": ("ppo", "CartPole-v1", 100_000, 4,
                 ["learning_rate=log:1e-5:1e-2", "ent_coef=uniform:0.0:0.05"], ["--eval-every", "50", "--pbt-interval", "10"]),
    # the first cell with a burn-in of a third of the run: no member is replaced before update 12
    "brax_idp_burn_in": ("ppo", "brax/inverted_double_pendulum", 307_200, 4,
                         ["learning_rate=log:1e-4:1e-2", "ent_coef=uniform:0.0:0.02"],
                         ["--recipe", "cpu", "--eval-every", "25", "--pbt-interval", "3", "--pbt-burn-in", "10"]),
    # Breakout with twice the population at half the steps per member (the same compute as "breakout"):
    # more members give exploit more to choose from, and the sweep more configs to draw
    "breakout_8x250k": ("ppo", "Breakout-MinAtar", 250_000, 8,
                        ["learning_rate=log:2e-4:2e-2", "ent_coef=uniform:0.0:0.05"], ["--eval-every", "50", "--pbt-interval", "5"]),
    # a MinAtar game with dense rewards (every alien shot scores), so fitness and evaluation are less noisy than
    # Breakout's; the Breakout cell's ranges and interval; run with --seeds 10
    "space_invaders": ("ppo", "SpaceInvaders-MinAtar", 500_000, 4,
                       ["learning_rate=log:2e-4:2e-2", "ent_coef=uniform:0.0:0.05"], ["--eval-every", "50", "--pbt-interval", "5"]),
    # CartPole with the learning rate held (no annealing) over 976 updates: a fixed rate fast enough to learn
    # tends to swing late, and PBT's perturbations can lower it as training goes on, a schedule no fixed
    # config has; run with --seeds 20
    "cartpole_fixed_lr": ("ppo", "CartPole-v1", 500_000, 4, ["learning_rate=log:1e-4:1e-2"],
                          ["--no-anneal-lr", "--eval-every", "50", "--pbt-interval", "10"]),
    # Pendulum with the learning rate held (no annealing), the learning rate the only hyperparameter: the
    # "pendulum" cell's budget, members and interval. With annealing on, PBT's members and the sweep's best config
    # ended level (-155); held fixed, a rate fast enough to learn in time keeps the policy noisy at the end, and
    # PBT's perturbations can lower it as training goes on; run with --seeds 10
    "pendulum_fixed_lr": ("ppo", "Pendulum-v1", 500_000, 8, ["learning_rate=log:1e-4:1e-2"],
                          ["--no-anneal-lr", "--eval-every", "50", "--pbt-interval", "10"]),
}


def run_arm(algo: str, flags: list[str]) -> dict:
    """One command in a fresh process: its rows' final training returns and last sampled evaluations
    [configs x seeds], its wall and run seconds."""
    def read(run_dir):
        metrics = np.load(run_dir / "metrics.npz")
        pbt = json.loads((run_dir / "pbt.json").read_text()) if (run_dir / "pbt.json").exists() else None
        return (json.loads((run_dir / "summary.json").read_text()), metrics["episode_return"],
                metrics["eval_return_sampled"][..., -1], pbt)

    command, wall, (summary, returns, evals, pbt) = sidebyside.run_in_folder(algo, flags, read)
    from scanrl.common.harness.stats import final_returns

    configs, seeds = returns.shape[:2]
    final = final_returns(returns.reshape(configs * seeds, -1)).reshape(configs, seeds)
    return {"command": "python " + " ".join(command), "wall": wall, "run_seconds": summary["run_seconds"],
            "compile_seconds": summary["compile_seconds"], "final": final.tolist(), "eval": evals.tolist(),
            "pbt_winners": [r["winner"] for r in pbt["runs"]] if pbt else None}


def best_per_repetition(arm: dict) -> list[float]:
    """Per repetition: the sampled evaluation of the row with the best final training return."""
    final, evals = np.array(arm["final"], np.float64), np.array(arm["eval"], np.float64)
    best = np.nanargmax(np.where(np.isnan(final), -np.inf, final), axis=0)
    return [float(evals[b, s]) for s, b in enumerate(best)]


def run_cell(name: str, seeds: int, out: Path) -> dict:
    algo, env, steps, members, specs, extra = CELLS[name]
    source = sidebyside.scanrl_commit()  # the scanrl tree the cell starts from
    pbt_only = {j for i, flag in enumerate(extra) if flag.startswith("--pbt-") for j in (i, i + 1)}
    pbt_flags = [extra[i] for i in sorted(pbt_only)]  # the --pbt-* flags and their values: the sweep arm has none
    extra = [flag for i, flag in enumerate(extra) if i not in pbt_only]
    common = ["--env", env, "--total-timesteps", str(steps), "--num-seeds", str(seeds), *extra]
    for spec in specs:
        common += ["--sweep", spec]
    sweep = run_arm(algo, [*common, "--sweep-samples", str(members)])
    print(f"{name}: sweep {sweep['wall']:.0f} s", flush=True)
    pbt = run_arm(algo, [*common, *pbt_flags, "--pbt", "--pbt-population", str(members)])
    print(f"{name}: pbt {pbt['wall']:.0f} s", flush=True)
    final = np.array(sweep["final"])
    on_average = int(np.nanargmax(np.nanmean(final, axis=1)))
    result = {"cell": name, "algo": algo, "env": env, "steps_per_row": steps, "members": members, "seeds": seeds,
              "pbt_interval": int(pbt_flags[pbt_flags.index("--pbt-interval") + 1]),
              "pbt_fitness": pbt_flags[pbt_flags.index("--pbt-fitness") + 1] if "--pbt-fitness" in pbt_flags else "episodes",
              "pbt_burn_in": int(pbt_flags[pbt_flags.index("--pbt-burn-in") + 1]) if "--pbt-burn-in" in pbt_flags else 0,
              "sweep_specs": specs, "sweep": sweep, "pbt": pbt,
              "scores": {"pbt": best_per_repetition(pbt), "sweep": best_per_repetition(sweep),
                         "sweep_best_on_average": [float(x) for x in np.array(sweep["eval"])[on_average]]},
              **source}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def table(out: Path) -> str:
    from scanrl.common.harness import stats

    def fitness(r):  # ranked by training episodes (the default), or "(eval)"; a burn-in B: "(burn-in B)"
        burn_in = f" (burn-in {r['pbt_burn_in']})" if r.get("pbt_burn_in") else ""
        return (" (eval)" if r.get("pbt_fitness") == "eval" else "") + burn_in

    def iqm(x):
        e = stats.iqm_interval(np.array(x, np.float64))
        return f"{e.point:,.1f} [{e.low:,.1f}, {e.high:,.1f}]"

    lines = ["| env | algo | members x steps | interval | PBT IQM [95% CI] | sweep best IQM [95% CI] | sweep best-on-average "
             "| P(PBT > sweep) [95% CI] | wall PBT / sweep (s) | ratio |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for path in sorted(out.glob("*.json")):
        r = json.loads(path.read_text())
        s = r["scores"]
        p = stats.probability_of_improvement(np.array(s["pbt"])[:, None], np.array(s["sweep"])[:, None])
        lines.append(f"| {r['env']} | {r['algo']} | {r['members']} x {r['steps_per_row']:,} | {r['pbt_interval']}{fitness(r)} | {iqm(s['pbt'])} | "
                     f"{iqm(s['sweep'])} | {iqm(s['sweep_best_on_average'])} | {p.point:.2f} [{p.low:.2f}, {p.high:.2f}] | "
                     f"{r['pbt']['wall']:.0f} / {r['sweep']['wall']:.0f} | {r['pbt']['wall'] / r['sweep']['wall']:.2f}x |")
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cell", action="append", choices=sorted(CELLS), default=[])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/reference/pbt"))
    args = parser.parse_args()
    for name in args.cell:
        run_cell(name, args.seeds, args.out)
    if args.table:
        print(table(args.out))


if __name__ == "__main__":
    main()
