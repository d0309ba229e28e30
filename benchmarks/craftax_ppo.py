"""scanrl's PPO or recurrent PPO against Craftax_Baselines' own (MichaelTMatthews/Craftax_Baselines,
`ppo.py` and `ppo_rnn.py`, the trainers of the Craftax paper's PPO and PPO-RNN results) on a symbolic
Craftax env, side by side: the same settings (the recipes in common/suites/craftax.py, which are those
files' argparse defaults and networks), the same env steps per seed, the same number of seeds, in one
sitting. `--algo ppo_rnn` compares scanrl's ppo_rnn with `ppo_rnn.py`.

The baseline's side is its repository's own script, run, not copied: an export of the repository
(`git archive` of 7ce36fa, passed as --baseline DIR) is run as `__main__` in a child process
(`runpy`), with its own command line:

    ppo.py --env_name NAME --total_timesteps T --num_repeats SEEDS --seed 0 --num_envs N --use_wandb --debug

Its seeds are `--num_repeats`, vmapped in one program, as its authors run them. On a CPU (jax
0.10.2) that program stops making progress when it holds two seeds or more: it sits idle, waiting,
and never finishes (HISTORY.md, 2026-11-27, 20:34-22:12). With one seed it runs. `--seeds-apart`
therefore runs the script once per seed, `--num_repeats 1 --seed S` for S = 0..SEEDS-1, one process
after another; its wall is the processes' sum, which counts its imports and compiling once per seed.
Its returns leave the program only through its logging: a per-update `jax.debug.callback` hands each
seed's metrics to `logz.batch_logging.batch_log`, which averages the seeds and calls `wandb.log`.
The child keeps each seed's row before that average: it wraps `batch_log` (the callback looks the
name up in the script's globals, which `from logz.batch_logging import batch_log` fills from the
wrapped module attribute) and puts a recorder in `sys.modules["wandb"]`, so nothing leaves the
machine. Under `vmap` the callback runs once per seed, in seed order, so the k-th call for an update
is seed k. `run_ppo` returns before its program has finished (it times only the dispatch); the child
then waits with `jax.effects_barrier()`, after which every update's callback has run.

scanrl's side is `python -m scanrl.algos.ALGO --env craftax/NAME --recipe published` with
--num-envs, its seeds in one program on --scanrl-devices devices (default 1: the baseline's
program, and on a CPU each of its processes, has one device); without evaluation by default, since the baseline's side
has none (--episodes N adds scanrl's evaluation in N fresh episodes after the last update).

Per cell, each seed's training score is the same statistic on both sides: the mean return of
the training episodes that ended in an update, averaged over the last 10% of updates (scanrl's
summary.json `final_return_per_seed`; the baseline's `episode_return` rows). The IQM over seeds
with its 95% stratified-bootstrap interval (rliable); the percentage of Craftax-Classic's maximum
return (22, one per achievement, as the paper normalises); with --episodes, scanrl's sampled evaluation return;
the wall seconds of each process (imports and compiling included) and env steps/s. An env step
is one step of one environment in a training rollout. A JSON per cell in --out; `--table` renders
them.

    git --git-dir=CRAFTAX_BASELINES_GIT archive 7ce36fa | tar -x -C BASELINE
    python benchmarks/craftax_ppo.py --env craftax/Craftax-Classic-Symbolic-v1 --timesteps 10485760 \\
        --seeds 5 --baseline BASELINE
    python benchmarks/craftax_ppo.py --table --out OUT

On a CPU, at the recipe's `cpu` sizes (32 environments, benchmarks/reference/craftax_ppo):

    python benchmarks/craftax_ppo.py --algo ALGO --num-envs 32 --timesteps 262144 --seeds 5 --seeds-apart \\
        --baseline BASELINE --out benchmarks/reference/craftax_ppo
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import sidebyside

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "reference_gpu" / "craftax_ppo"
BASELINE_COMMIT = "7ce36fa"  # MichaelTMatthews/Craftax_Baselines: "future proof optimistic reset wrapper ..."
MAX_RETURN = {"Craftax-Classic-Symbolic-v1": 22.0}  # one reward per achievement (the paper's normaliser)

CHILD = r"""
import json, runpy, sys, time, types
baseline, script, rows_path, argv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
started = time.time()
rows = open(rows_path, "w", buffering=1)  # one line per seed and update, as the program runs

class Run:
    dir = "."
def init(**kwargs):
    return Run()
def log(data, *args, **kwargs):  # the seeds' average: each seed's row is kept below instead
    pass
wandb = types.ModuleType("wandb")  # a recorder in wandb's place: the script's `import wandb` gets it
wandb.init, wandb.log, wandb.run = init, log, Run()
sys.modules["wandb"] = wandb

try:  # ppo.py imports orbax only to save a policy (--save_policy, off here): a stand-in where it is missing
    import flax.training.orbax_utils, orbax.checkpoint
except ImportError:
    stand_in = types.ModuleType("orbax.checkpoint")
    stand_in.PyTreeCheckpointer = stand_in.CheckpointManagerOptions = stand_in.CheckpointManager = None
    sys.modules.update({"orbax": types.ModuleType("orbax"), "orbax.checkpoint": stand_in,
                        "flax.training.orbax_utils": types.ModuleType("flax.training.orbax_utils")})
    import flax.training
    flax.training.orbax_utils = sys.modules["flax.training.orbax_utils"]

sys.path.insert(0, baseline)
import jax
import logz.batch_logging as logging_module
seen = {}
batch_log = logging_module.batch_log
def keep_each_seed(update_step, log, config):
    step = int(update_step)
    seed = seen.get(step, 0)
    seen[step] = seed + 1
    rows.write(json.dumps({"update": step, "seed": seed, "time": time.time(),
                           **{k: float(log[k]) for k in ("episode_return", "episode_length", "achievements")}}) + "\n")
    return batch_log(update_step, log, config)
logging_module.batch_log = keep_each_seed

sys.argv = [script, *argv]
runpy.run_path(f"{baseline}/{script}", run_name="__main__")  # its own __main__: argparse, then run_ppo
dispatched = time.time()
jax.effects_barrier()  # run_ppo does not wait for its program; every update's callback has run after this
from importlib.metadata import version
print("RESULT" + json.dumps({"started": started, "dispatched": dispatched, "finished": time.time(),
      "devices": [str(d) for d in jax.devices()],
      "versions": {p: version(p) for p in ("jax", "flax", "optax", "distrax", "craftax")}}))
"""


SCRIPTS = {"ppo": "ppo.py", "ppo_rnn": "ppo_rnn.py"}  # scanrl's algorithm -> the baseline's script


def run_script(script: str, argv: list[str], baseline: Path, rows_path: Path) -> tuple[float, dict, list[dict], str]:
    """The baseline's `script` with `argv` in a fresh process: (its wall, its RESULT line, its rows, stdout)."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(baseline), script, str(rows_path), *argv],
                          capture_output=True, text=True, cwd=baseline, env={**os.environ, "WANDB_MODE": "disabled"})
    wall = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    if not lines:
        raise SystemExit(f"Craftax_Baselines' {script} failed: {proc.stderr[-3000:]}\n{proc.stdout[-2000:]}")
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    return wall, json.loads(lines[0][6:]), rows, proc.stdout


def run_baseline(algo: str, name: str, timesteps: int, seeds: int, num_envs: int, baseline: Path, rows_path: Path,
                 apart: bool) -> dict:
    """Its `seeds` vmapped in one process (`--num_repeats SEEDS --seed 0`), or with `apart` one process
    per seed (`--num_repeats 1 --seed S`)."""
    script = SCRIPTS[algo]
    argv = lambda repeats, seed: ["--env_name", name, "--total_timesteps", str(timesteps),  # noqa: E731
                                  "--num_repeats", str(repeats), "--seed", str(seed), "--num_envs", str(num_envs),
                                  "--use_wandb", "--debug"]
    runs = ([(argv(1, s), rows_path.with_suffix(f".seed{s}.jsonl")) for s in range(seeds)] if apart
            else [(argv(seeds, 0), rows_path)])
    walls, results, per_seed_rows, stdout = [], [], [], ""
    for run_argv, path in runs:
        wall, result, rows, stdout = run_script(script, run_argv, baseline, path)
        walls.append(wall)
        results.append(result)
        # the vmapped process's seed k is the cell's seed k; a process of its own holds one seed, its k = 0
        per_seed_rows += [[r for r in rows if r["seed"] == k] for k in range(1 if apart else seeds)]
    updates = max(r["update"] for rows in per_seed_rows for r in rows) + 1
    returns = np.full((seeds, updates), np.nan)
    for s, rows in enumerate(per_seed_rows):
        for r in rows:
            returns[s, r["update"]] = r["episode_return"]
    run_seconds = 0.0  # each process's first to last update's log: compiling excluded
    for rows in (per_seed_rows if apart else [sum(per_seed_rows, [])]):
        times = [r["time"] for r in rows]
        run_seconds += max(times) - min(times)
    steps_per_update = num_envs * 64  # its --num_steps default
    wall = sum(walls)
    return {"command": " ; ".join(f"python {script} " + " ".join(a) for a, _ in runs), "wall": wall,
            "walls": walls, "updates": updates,
            "env_steps": updates * steps_per_update, "env_steps_per_second": seeds * updates * steps_per_update / wall,
            "run_steps_per_second": seeds * (updates - 1) * steps_per_update / run_seconds if run_seconds > 0 else None,
            "training_scores": [sidebyside.final_return(returns[s]) for s in range(seeds)],
            "curves": returns.tolist(), "stdout": stdout[-1500:], **results[0]}


def run_scanrl(algo: str, env: str, timesteps: int, seeds: int, num_envs: int, episodes: int,
               num_devices: int) -> dict:
    """scanrl's side, its seeds over `num_devices` CPU devices; with `episodes` > 0 it also
    evaluates each seed's sampled and deterministic policy in that many fresh episodes after the
    last update, inside its run (the baseline's side has no evaluation, so 0 compares the same
    work)."""
    flags = ["--env", env, "--recipe", "published", "--num-envs", str(num_envs), "--total-timesteps", str(timesteps),
             "--num-seeds", str(seeds), "--num-devices", str(num_devices)]
    if episodes:
        updates = timesteps // (num_envs * 64)
        return sidebyside.run_scanrl(algo, [*flags, "--eval-every", str(updates), "--eval-episodes", str(episodes)])
    read = lambda run_dir: json.loads((run_dir / "summary.json").read_text())  # noqa: E731
    command, wall, summary = sidebyside.run_in_folder(algo, [*flags, "--eval-every", "0"], read)
    return {"command": "python " + " ".join(command), "wall": wall, "updates": summary["updates"],
            "env_steps": summary["total_timesteps"], "env_steps_per_second": seeds * summary["total_timesteps"] / wall,
            "run_steps_per_second": summary["env_steps_per_second"], "compile_seconds": summary["compile_seconds"],
            "final_returns": None, "training_scores": summary["final_return_per_seed"]}


def cell(args: argparse.Namespace) -> dict:
    from importlib.metadata import version

    if args.baseline is None:
        raise SystemExit("--baseline is needed to run a cell (the docstring says how to export it)")
    script = SCRIPTS[args.algo]
    if not (args.baseline / script).is_file():
        raise SystemExit(f"--baseline {args.baseline} has no {script} (the docstring says how to export it)")
    name = args.env.split("/", 1)[1]
    started = time.strftime("%Y-%m-%d %H:%M")
    scanrl = run_scanrl(args.algo, args.env, args.timesteps, args.seeds, args.num_envs, args.episodes,
                        args.scanrl_devices)
    print(f"scanrl: {json.dumps(scanrl)}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    theirs = run_baseline(args.algo, name, args.timesteps, args.seeds, args.num_envs, args.baseline.resolve(),
                          args.out.resolve() / f"baseline_rows__{args.algo}__{name}.jsonl", args.seeds_apart)
    print(f"baseline: {json.dumps({k: v for k, v in theirs.items() if k != 'curves'})}", flush=True)
    if scanrl["env_steps"] != theirs["env_steps"]:
        print(f"warning: unequal budgets, scanrl {scanrl['env_steps']:,} and the baseline {theirs['env_steps']:,} "
              "env steps per seed: --timesteps should be a multiple of --num-envs x 64", flush=True)
    return {"algo": args.algo, "seeds_apart": args.seeds_apart, "env": args.env, "timesteps": args.timesteps,
            "seeds": args.seeds, "num_envs": args.num_envs,
            "devices": {"scanrl": args.scanrl_devices, "baseline": 1},
            "eval_episodes": args.episodes, "started": started, "finished": time.strftime("%Y-%m-%d %H:%M"),
            "baseline_commit": BASELINE_COMMIT, "versions": {p: version(p) for p in ("craftax", "jax")},
            "scanrl": scanrl, "baseline": theirs}


def table(out: Path) -> str:
    rows = ["| algorithm | env | steps/seed | seeds | envs | scanrl score IQM [95% CI] | "
            "Craftax_Baselines' IQM [95% CI] | "
            "% of max (scanrl / baseline) | scanrl sampled eval | wall scanrl / baseline (s) | wall ratio | "
            "env steps/s ratio | run steps/s ratio (compiling excluded) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for path in sorted(out.glob("*__*.json")):
        c = json.loads(path.read_text())
        s, b = c["scanrl"], c["baseline"]
        if "curves" in b:  # scored here, so a cell written before this estimator is scored alike
            b["training_scores"] = [sidebyside.final_return(curve) for curve in b["curves"]]
        fmt = sidebyside.iqm_text
        top = MAX_RETURN.get(c["env"].split("/", 1)[1])
        share = "-" if top is None else (f"{100 * np.mean(s['training_scores']) / top:.1f} / "
                                         f"{100 * np.mean(b['training_scores']) / top:.1f}")
        algo = c.get("algo", "ppo") + (" (baseline's seeds apart)" if c.get("seeds_apart") else "")
        if "devices" in c:  # cells from before --scanrl-devices do not record it
            algo += f" (scanrl on {c['devices']['scanrl']} device(s), the baseline on 1)"
        rows.append(f"| {algo} | {c['env']} | {s['env_steps']:,} | {c['seeds']} | {c['num_envs']} | "
                    f"{fmt(s['training_scores'], 2)} | {fmt(b['training_scores'], 2)} | {share} | "
                    f"{fmt(s['final_returns'], 2)} | {s['wall']:,.0f} / {b['wall']:,.0f} | "
                    f"{s['wall'] / b['wall']:.2f}x | "
                    f"{s['env_steps_per_second'] / b['env_steps_per_second']:.2f}x | "
                    f"{s['run_steps_per_second'] / b['run_steps_per_second']:.2f}x |")
    return "\n".join(rows)


def main() -> None:
    parser = sidebyside.command_line(__doc__, "craftax/Craftax-Classic-Symbolic-v1", OUT)
    parser.add_argument("--timesteps", type=int, default=10_485_760,
                        help="env steps per seed: a multiple of --num-envs x 64 (10,485,760: 160 updates of 1,024 x 64)")
    parser.add_argument("--num-envs", type=int, default=1024, help="environments per seed (ppo.py's default: 1,024)")
    parser.add_argument("--episodes", type=int, default=0, help="scanrl's evaluation episodes per seed after the "
                        "last update (0: none, as the baseline's side)")
    parser.add_argument("--baseline", type=Path, help="an export of Craftax_Baselines (docstring)")
    parser.add_argument("--algo", choices=sorted(SCRIPTS), default="ppo",
                        help="scanrl's algorithm, against the baseline's script of the same kind")
    parser.add_argument("--scanrl-devices", type=int, default=1,
                        help="devices for scanrl's seeds (1: the same hardware as the baseline's one device)")
    parser.add_argument("--seeds-apart", action="store_true", help="run the baseline once per seed, one process "
                        "each (on a CPU its vmapped seeds never finish: docstring)")
    args = parser.parse_args()
    sidebyside.finish(args, cell, table, args.algo)


if __name__ == "__main__":
    main()
