"""Fast off-policy learners against PPO and Brax's SAC at equal wall time, on MuJoCo Playground
tasks: each learner gets this machine's cores for the same wall-clock budget to train the same
number of seeds, and the table and plot read every learner's evaluation return against the wall
seconds it had used.

Learners (each task's recipe in its `cpu` form, common/suites/recipes.py):
- `td3`: algos/td3.py with Playground's TD3 recipe (FastTD3's published arguments);
- `sac`: algos/sac.py with the same FastTD3 arguments translated to SAC's fields
  (common/suites/fasttd3_args.py `sac_fields`): `--recipe fast-cpu` (the sitting of
  benchmarks/reference/equal_wall/cpu_300s gave the same fields as a `--config` file with
  `--recipe none`, before that choice existed);
- `ppo`: algos/ppo.py with Playground's PPO recipe;
- `brax_sac`: Brax's own SAC trainer with Playground's SAC recipe (benchmarks/brax_trainers.py's
  process). It trains one seed per call, so its seeds run as processes two at a time (one per
  core; benchmarks/brax_trainers.py runs them one at a time), in rounds that split the budget
  equally; later rounds load the programs the first compiled.

What is counted alike: the budget runs from each process's start, so imports, compiling and
evaluating are inside it. At the budget a scanrl run gets a Ctrl-C (it stops between chunks and
keeps its run folder) and a Brax process is killed. Every learner evaluates its deterministic
policy (Brax: `deterministic_eval=True`) on `eval_episodes` episodes per seed (the cpu recipes'
16), about `--evals` times within its budget (scanrl: every `--eval-every` updates, set per
learner from its measured seconds per update; Brax: `--brax-steps` split into `--evals`
periods). An evaluation counts at the wall second its result was written (scanrl: the
progress.jsonl record appears; Brax: the trainer prints it). A Brax seed that had e seconds of
its round stands at e x rounds of the whole budget.

Per (task, learner): a JSON with each seed's evaluations as (wall seconds, return, env steps
per seed). `--table` renders, per task, the IQM of the last evaluation within the budget with its
95% stratified-bootstrap interval (rliable, common/harness/stats.py's `iqm_interval`); `--plot`
draws IQM return against wall seconds.

    python benchmarks/equal_wall.py --env playground/CheetahRun --seconds 300 --seeds 6 \\
        --eval-every td3=3,sac=3,ppo=1 --evals 20 --brax-steps 100000 --out DIR
    python benchmarks/equal_wall.py --table --out DIR
    python benchmarks/equal_wall.py --plot --out DIR
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import brax_trainers  # noqa: E402  (the Brax process and its command)

LEARNERS = ("td3", "sac", "ppo", "brax_sac")
OFF_POLICY_NUM_STEPS = 10  # td3/sac: env steps per environment in one update, so that updates are short


def scanrl_command(learner: str, env: str, seeds: int, eval_every: int, out: Path, extra: list[str]) -> list[str]:
    """The scanrl run of a learner: no step budget (the wall budget stops it)."""
    flags = ["--env", env, "--num-seeds", str(seeds), "--total-timesteps", "0", "--stop-minutes", "10000",
             "--eval-every", str(eval_every), "--eval-policy", "deterministic", "--log-every", "1",
             "--no-compile-cache", "--out-dir", str(out / "run")]
    flags += ["--recipe", "fast-cpu" if learner == "sac" else "cpu"]  # SAC: FastTD3's arguments
    if learner in ("td3", "sac"):
        flags += ["--num-steps", str(OFF_POLICY_NUM_STEPS)]
    return [sys.executable, f"algos/{learner}.py", *flags, *extra]


def run_scanrl(learner: str, env: str, seeds: int, seconds: float, eval_every: int, out: Path,
               extra: list[str]) -> dict:
    """Start the run, note when each progress record appears, Ctrl-C it at the budget."""
    command = scanrl_command(learner, env, seeds, eval_every, out, extra)
    start = time.time()
    proc = subprocess.Popen(command, cwd=REPO, stdout=open(out / "stdout.txt", "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    seen, evals = 0, []  # evals: (wall, [return per seed], env steps per seed)
    stopped = False
    while True:
        done = proc.poll() is not None
        files = list((out / "run").glob("*/progress.jsonl"))
        lines = files[0].read_text().splitlines() if files else []
        complete = lines if done else lines[:-1] if lines and not lines[-1].endswith("}") else lines
        for line in complete[seen:]:
            record = json.loads(line)
            returns = record["per_seed"].get("eval_return")
            if returns is not None and not any(r is None or math.isnan(r) for r in returns):
                evals.append((time.time() - start, returns, record["steps_per_seed"]))
        seen = len(complete)
        if done:
            break
        if time.time() - start >= seconds and not stopped:
            os.killpg(proc.pid, signal.SIGINT)  # the run stops between chunks and writes its folder
            stopped = True
        time.sleep(0.2)
    return {"command": command[1:], "returncode": proc.returncode, "process_wall": time.time() - start,
            "evals": [list(e) for e in evals]}


def run_brax_round(env: str, seeds: list[int], seconds: float, steps: int, evals: int, cache: str,
                   out: Path) -> list[list]:
    """Brax's SAC on `seeds`, one process each, at once; each killed at `seconds`. Per seed:
    [(seconds since its process started, return, env steps)] of the evaluations it printed
    within them."""
    from scanrl.common.suites import recipes

    recipe = recipes.recipe_for("sac", env)
    args = recipes.trainer_args(recipe, "cpu")
    args["num_timesteps"] = steps
    environ = {**os.environ, "JAX_COMPILATION_CACHE_DIR": cache, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
               "BRAX_DETERMINISTIC_EVAL": "1"}
    start = time.time()
    procs = [subprocess.Popen(brax_trainers.brax_command("sac", env, "mjx", args, seed, evals + 1),
                              stdout=subprocess.PIPE, stderr=open(out / f"brax_seed{seed}.stderr", "w"),
                              text=True, env=environ)
             for seed in seeds]
    results = [[] for _ in seeds]

    def read(i: int, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            if line.startswith("EVAL"):
                record = json.loads(line[4:])
                if record["time"] - start <= seconds:
                    results[i].append([record["time"] - start, record["eval"], record["step"]])

    readers = [threading.Thread(target=read, args=(i, p)) for i, p in enumerate(procs)]
    for reader in readers:
        reader.start()
    time.sleep(max(0.0, seconds - (time.time() - start)))
    for proc in procs:
        proc.kill()
    for reader in readers:
        reader.join()
    return results


def run_brax(env: str, seeds: int, seconds: float, steps: int, evals: int, out: Path) -> dict:
    rounds = [list(range(s, min(s + 2, seeds))) for s in range(0, seeds, 2)]
    per_round = seconds / len(rounds)
    per_seed = []
    with tempfile.TemporaryDirectory() as cache:
        for seeds_of_round in rounds:
            per_seed += run_brax_round(env, seeds_of_round, per_round, steps, evals, cache, out)
            print(f"brax seeds {seeds_of_round}: {per_seed[-len(seeds_of_round):]}", flush=True)
    # a seed's e seconds of its round stand for e x rounds seconds of the budget
    return {"rounds": len(rounds), "per_round_seconds": per_round, "brax_steps": steps,
            "per_seed": [[[e[0] * len(rounds), *e[1:]] for e in evs] for evs in per_seed]}


def last_within(result: dict, seconds: float) -> list[list] | None:
    """Each seed's last evaluation within `seconds` of the budget, as (wall, return[, env
    steps]) (None: some seed had none)."""
    if "per_seed" in result:  # Brax: per seed
        lasts = [[e for e in evs if e[0] <= seconds] for evs in result["per_seed"]]
        return [l[-1] for l in lasts] if all(lasts) else None
    within = [e for e in result["evals"] if e[0] <= seconds]
    if not within:
        return None
    return [[within[-1][0], r, *within[-1][2:]] for r in within[-1][1]]


def returns_at(result: dict, seconds: float) -> list[float] | None:
    """Each seed's last evaluation return within `seconds` of the budget (None: some seed had none)."""
    lasts = last_within(result, seconds)
    return None if lasts is None else [e[1] for e in lasts]


def evaluations_within(result: dict, seconds: float) -> int:
    """Evaluations within the budget (Brax: the fewest of any seed)."""
    if "per_seed" in result:
        return min(sum(e[0] <= seconds for e in evs) for evs in result["per_seed"])
    return sum(e[0] <= seconds for e in result["evals"])


def table(out: Path) -> str:
    from scanrl.common.harness import stats

    rows = ["| task | learner | seconds | seeds | evaluations | env steps per seed at the last | "
            "IQM [95% CI] at the budget's end |", "|---|---|---:|---:|---:|---:|---:|"]
    for path in sorted(out.glob("*.json")):
        cell = json.loads(path.read_text())
        lasts = last_within(cell["result"], cell["seconds"])
        n = evaluations_within(cell["result"], cell["seconds"])
        if lasts is None:
            shown, steps = "no evaluation within the budget", "-"
        else:
            e = stats.iqm_interval(np.asarray([last[1] for last in lasts], dtype=float))
            shown = f"{e.point:.1f} [{e.low:.1f}, {e.high:.1f}]"
            known = sorted({last[2] for last in lasts if len(last) > 2})
            steps = "-" if not known else f"{known[0]:,}" + (f"-{known[-1]:,}" if len(known) > 1 else "")
        rows.append(f"| {cell['env']} | {cell['learner']} | {cell['seconds']:g} | {cell['seeds']} | {n} | "
                    f"{steps} | {shown} |")
    return "\n".join(rows)


def plot(out: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scanrl.common.harness import stats

    cells = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    envs = sorted({c["env"] for c in cells})
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 4), squeeze=False)
    for ax, env in zip(axes[0], envs):
        for cell in (c for c in cells if c["env"] == env):
            result = cell["result"]
            times = sorted({e[0] for e in result["evals"]} if "evals" in result
                           else {e[0] for evs in result["per_seed"] for e in evs})
            points = [(t, returns_at(result, t)) for t in times if t <= cell["seconds"]]
            points = [(t, stats.iqm_interval(np.asarray(r, dtype=float))) for t, r in points if r is not None]
            if points:
                ax.plot([t for t, _ in points], [e.point for _, e in points], marker="o", label=cell["learner"])
                ax.fill_between([t for t, _ in points], [e.low for _, e in points], [e.high for _, e in points],
                                alpha=0.2)
        ax.set(title=env, xlabel="wall seconds (imports, compile and evaluation included)",
               ylabel="evaluation return, IQM (95% CI)")
        ax.legend()
    fig.tight_layout()
    path = out / "equal_wall.png"
    fig.savefig(path, dpi=100)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="playground/CheetahRun")
    parser.add_argument("--learners", default=",".join(LEARNERS))
    parser.add_argument("--seconds", type=float, default=300.0, help="the wall budget of each learner")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--eval-every", default="td3=3,sac=3,ppo=1",
                        help="scanrl's evaluation period in updates, per learner")
    parser.add_argument("--evals", type=int, default=20, help="Brax: evaluation periods in --brax-steps")
    parser.add_argument("--brax-steps", type=int, default=100_000,
                        help="Brax: its num_timesteps, a cap that its rounds should not reach within the budget")
    parser.add_argument("--scanrl-flags", default="", help="more flags for the scanrl learners (a variant)")
    parser.add_argument("--variant", default="", help="the variant's name, in its cells' names")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--plot", action="store_true")
    args = parser.parse_args()
    if args.table or args.plot:
        print(table(args.out) if args.table else plot(args.out))
        return
    every = dict(item.split("=") for item in args.eval_every.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    for learner in args.learners.split(","):
        name = f"{args.env.replace('/', '-')}__{learner}" + (f"__{args.variant}" if args.variant else "")
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        source = brax_trainers.sidebyside.scanrl_commit()  # the scanrl tree the cell starts from
        folder = args.out / name
        folder.mkdir(exist_ok=True)
        if learner == "brax_sac":
            result = run_brax(args.env, args.seeds, args.seconds, args.brax_steps, args.evals, folder)
        else:
            result = run_scanrl(learner, args.env, args.seeds, args.seconds, int(every[learner]), folder,
                                args.scanrl_flags.split())
        cell = {"env": args.env, "learner": learner + (f" ({args.variant})" if args.variant else ""), "seconds": args.seconds, "seeds": args.seeds,
                "started": started, "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "result": result, **source}
        (args.out / f"{name}.json").write_text(json.dumps(cell, indent=1))
        print(f"{name}: {returns_at(result, args.seconds)}", flush=True)


if __name__ == "__main__":
    main()
