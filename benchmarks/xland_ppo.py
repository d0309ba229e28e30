"""scanrl's recurrent PPO against XLand-MiniGrid's own recurrent-PPO single-task baseline
(corl-team/xland-minigrid's `training/train_single_task.py`, the trainer of its paper's
single-task experiments) on an XLand-MiniGrid env, side by side: the same rollout shape and PPO
settings, the same env steps per seed, the same number of seeds and of evaluation episodes, in
one sitting.

XLand's side is its repository's own file, run, not copied: an export of its `training/` folder
(`git archive` of a46e78c, passed as --baseline DIR) is put on the path of a child process that
imports `train_single_task` and calls its pyrallis entry point `train()` once per seed, one
after another, with the command-line overrides below; its `TrainConfig` keeps every other field
at its default (the network: tile and colour embeddings, three 2x2 convolutions, a GRU fed the
previous action and reward, tanh heads; lr 1e-3 annealed, Adam eps 1e-8, clip 0.2, entropy 0.01,
GAE 0.95, gamma 0.99). From `configs/single.yaml` (the paper's single-task settings) it takes
what fits a CPU: `num_steps` 256, `update_epochs` 1, `num_minibatches` 16; its `num_envs`
(16384) is --num-envs here, and its env (an XLand ruleset of the `trivial-1m` benchmark, which
xminigrid downloads) is --env. The yaml is not passed as `--config_path`: it also holds
`train_seed`, which is no `TrainConfig` field, and pyrallis refuses it. The GRU and head sizes
are --rnn-hidden and --head-hidden, the same on both sides: 64 and 64 here (scanrl's ppo_rnn
defaults; XLand's `configs/debug/single.yaml`, its CPU config, shrinks them to 16 and 16).
`TrainConfig`'s 1024 and 256 (the recipe's) ran at about 500 (XLand) and 580 (scanrl) env
steps/s per seed on 2 cores, 32 envs x 256 steps: some 4e4 steps per seed in a 12-minute cell,
before either side learns anything on DoorKey. wandb is not used: the child puts a recorder in `sys.modules["wandb"]` before the import,
so that the trainer's `wandb.init` / `wandb.log` / `run.summary` land in lists. That is how its
returns leave the program: `train()` returns nothing; after the one compiled program has run
(no callback inside it), it walks the per-update `loss_info` and `wandb.log`s one row per
update: the losses, `eval/returns` and `eval/lengths` (the mean over `eval_episodes` fresh
one-episode rollouts of the sampled policy, made after that update, inside the program), `lr`
and `transitions` (env steps so far); then `run.summary["training_time"]` and
`["steps_per_second"]`. Its process sees one CPU device per core
(XLA_FLAGS=--xla_force_host_platform_device_count): its `pmap` splits the envs and the
evaluation episodes over them and averages the gradients, as it does over GPUs. Its own
packages that scanrl lacks (pyrallis and typing-inspect) come from --deps, on that process's
PYTHONPATH only.

scanrl's side is `python -m scanrl.algos.ppo_rnn --env xminigrid/ENV --recipe cpu` (the
recipe of common/suites/xminigrid.py, XLAND_PPO: the same PPO settings, from the same file) with
--num-envs, --num-steps, --gru-size and --head-hidden set as above, its 5 seeds in one program,
evaluated once after the last update. Its network reads the 7x7x2 egocentric grid with its own
encoder (a 3x3 convolution of 16 channels, a 64 tanh layer), without the direction, previous
action or reward, and resets the GRU's state where an episode starts (XLand's carries it across
episodes).

An env step is one step of one environment in a training rollout on both sides (num_envs x
num_steps per update); evaluation steps are not counted. Both run in a fresh process without a
compile cache; wall times are those processes', imports and compiling included (XLand's side
compiles once per seed). XLand's trainer evaluates after every update, inside its wall;
`--scanrl-eval-every 1` has scanrl do the same evaluation work (its default evaluates once).

Per cell: each seed's final return, the mean return of the sampled policy over --episodes
fresh episodes after the last update, by each side's own evaluation (XLand's: the `eval/returns`
of its last row); the IQM over seeds with its 95% stratified-bootstrap interval (rliable);
scanrl's training score as in navix_ppo.py (XLand's logs no training return); XLand's
evaluation curve per seed; wall seconds and env steps/s of each side. A JSON per cell in --out;
`--table` renders them.

Getting XLand's side (its training/ folder and its two packages):

    git --git-dir=XLAND_GIT archive a46e78c training configs | tar -x -C BASELINE
    pip install --no-deps --target DEPS pyrallis==0.3.1 typing-inspect==0.9.0

    python benchmarks/xland_ppo.py --env xminigrid/MiniGrid-DoorKey-5x5 --timesteps 294912 --seeds 5 \\
        --baseline BASELINE --deps DEPS
    python benchmarks/xland_ppo.py --table
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import sidebyside

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "reference" / "xland_ppo"
BASELINE_COMMIT = "a46e78ce92f28bc90b8aac96d3b7b7792fb5bf3b"  # corl-team/xland-minigrid, 2024-11-16
SINGLE_YAML = {"num_steps": 256, "update_epochs": 1, "num_minibatches": 16}  # configs/single.yaml, what fits a CPU

XLAND = r"""
import json, sys, time, types
training, name, seeds, steps, episodes = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
overrides = json.loads(sys.argv[6])

runs, rows = [], []
class Run:  # what `wandb.init` returns: the trainer writes its timers to `summary`
    def __init__(self, config=None, **kwargs):
        self.config, self.summary = dict(config or {}), {}
    def finish(self):
        pass
def init(**kwargs):
    runs.append(Run(**kwargs))
    return runs[-1]
def log(data, *args, **kwargs):
    rows.append({k: float(v) for k, v in data.items()})
wandb = types.ModuleType("wandb")  # a recorder in wandb's place: the trainer's `import wandb` gets it
wandb.init, wandb.log = init, log
sys.modules["wandb"] = wandb

sys.path.insert(0, training)  # its `from nn import ...` and `from utils import ...` too
import jax, jax.numpy as jnp, numpy as np
import flax.struct, flax.training.train_state, xminigrid.environment  # what utils.py imports, before the patch below
# utils.py's RolloutStats has jnp.asarray(0.0) and jnp.asarray(0) as dataclass defaults: a jax Array is
# unhashable, so Python's dataclasses refuse it ("mutable default"). While utils.py is imported, and
# only then, jnp.asarray of a scalar gives the same value as a numpy scalar of the same dtype (hashable).
asarray = jnp.asarray
jnp.asarray = lambda x, *a, **k: np.asarray(asarray(x, *a, **k))[()] if np.ndim(x) == 0 else asarray(x, *a, **k)
try:
    import utils
finally:
    jnp.asarray = asarray
import train_single_task

result = {"seeds": []}
for seed in range(seeds):
    rows.clear()
    sys.argv = ["train_single_task.py", f"--env_id={name}", f"--seed={seed}", f"--total_timesteps={steps}",
                f"--eval_episodes={episodes}", *(f"--{k}={v}" for k, v in overrides.items())]
    started = time.perf_counter()
    train_single_task.train()  # pyrallis parses sys.argv into its TrainConfig
    wall = time.perf_counter() - started
    run = runs[-1]
    result["seeds"].append({
        "final_return": rows[-1]["eval/returns"], "final_length": rows[-1]["eval/lengths"], "wall": wall,
        "env_steps": int(rows[-1]["transitions"]), "updates": len(rows),
        "training_time": run.summary["training_time"], "steps_per_second": run.summary["steps_per_second"],
        "eval_returns": [(int(r["transitions"]), r["eval/returns"]) for r in rows]})
    brief = {k: v for k, v in result["seeds"][-1].items() if not isinstance(v, list)}
    print(f"seed {seed}: {json.dumps(brief)}", file=sys.stderr, flush=True)
result["config"] = runs[-1].config  # TrainConfig as the trainer saw it (the last seed's)
result["devices"] = jax.local_device_count()
from importlib.metadata import version
result["trainer_versions"] = {p: version(p) for p in ("flax", "optax", "distrax", "pyrallis")}
print("RESULT" + json.dumps(result))
"""


def run_xland(env: str, timesteps: int, seeds: int, episodes: int, overrides: dict, baseline: Path,
              deps: str | None) -> dict:
    cores = len(os.sched_getaffinity(0))
    child_env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={cores}", "WANDB_MODE": "disabled"}
    if deps:  # the trainer's own packages, for its process only
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [deps, os.environ.get("PYTHONPATH")]))
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", XLAND, str(baseline / "training"), env.split("/", 1)[1], str(seeds),
                           str(timesteps), str(episodes), json.dumps(overrides)],
                          capture_output=True, text=True, env=child_env, cwd=baseline)
    wall = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    if not lines:
        raise SystemExit(f"XLand's PPO failed on {env}: {proc.stderr[-3000:]}\n{proc.stdout[-2000:]}")
    result = json.loads(lines[0][6:])
    per_seed = result.pop("seeds")
    steps = per_seed[0]["env_steps"]
    return {"wall": wall, "env_steps": steps, "updates": per_seed[0]["updates"],
            "env_steps_per_second": seeds * steps / wall, "final_returns": [s["final_return"] for s in per_seed],
            "overrides": overrides, **result, "per_seed": per_seed}


def run_scanrl(env: str, timesteps: int, seeds: int, episodes: int, fields: dict, eval_every: int = 0) -> dict:
    updates = timesteps // (fields["num_envs"] * fields["num_steps"])
    eval_every = eval_every or updates  # 0: once, after the last update
    return sidebyside.run_scanrl("ppo_rnn", [
        "--env", env, "--recipe", "cpu", "--num-envs", str(fields["num_envs"]), "--num-steps", str(fields["num_steps"]),
        "--num-epochs", str(fields["update_epochs"]), "--num-minibatches", str(fields["num_minibatches"]),
        "--gru-size", str(fields["rnn_hidden_dim"]), "--head-hidden", str(fields["head_hidden_dim"]),
        "--total-timesteps", str(timesteps), "--num-seeds", str(seeds), "--eval-every", str(eval_every),
        "--eval-episodes", str(episodes)])


def cell(args: argparse.Namespace) -> dict:
    from importlib.metadata import version

    if args.baseline is None:
        raise SystemExit("--baseline is needed to run a cell (the docstring says how to export it)")
    if not (args.baseline / "training" / "train_single_task.py").is_file():
        raise SystemExit(f"--baseline {args.baseline} has no training/train_single_task.py (the docstring says how "
                         "to export it)")
    fields = {**SINGLE_YAML, "num_envs": args.num_envs, "num_steps": args.num_steps,
              "rnn_hidden_dim": args.rnn_hidden, "head_hidden_dim": args.head_hidden}
    started = time.strftime("%Y-%m-%d %H:%M")
    scanrl = run_scanrl(args.env, args.timesteps, args.seeds, args.episodes, fields, args.scanrl_eval_every)
    print(f"scanrl: {json.dumps(scanrl)}", flush=True)
    theirs = run_xland(args.env, args.timesteps, args.seeds, args.episodes, fields, args.baseline, args.deps)
    print(f"xland: {json.dumps({k: v for k, v in theirs.items() if k != 'per_seed'})}", flush=True)
    if scanrl["env_steps"] != theirs["env_steps"]:
        print(f"warning: unequal budgets, scanrl {scanrl['env_steps']:,} and XLand {theirs['env_steps']:,} env steps "
              "per seed: --timesteps should be a multiple of --num-envs x --num-steps", flush=True)
    return {"env": args.env, "timesteps": args.timesteps, "seeds": args.seeds, "eval_episodes": args.episodes,
            "started": started, "finished": time.strftime("%Y-%m-%d %H:%M"), "baseline_commit": BASELINE_COMMIT,
            "versions": {p: version(p) for p in ("xminigrid", "jax")},
            "scanrl": scanrl, "xland": theirs}


def table(out: Path) -> str:
    rows = ["| env | steps/seed | seeds | GRU / head | scanrl IQM [95% CI] | XLand's PPO IQM [95% CI] | "
            "scanrl training score | wall scanrl / XLand (s) | env steps/s scanrl / XLand |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for path in sorted(out.glob("*.json")):
        c = json.loads(path.read_text())
        s, x = c["scanrl"], c["xland"]
        fmt = sidebyside.iqm_text
        sizes = f"{x['overrides']['rnn_hidden_dim']} / {x['overrides']['head_hidden_dim']}"
        rows.append(f"| {c['env']} | {c['timesteps']:,} | {c['seeds']} | {sizes} | {fmt(s['final_returns'])} | "
                    f"{fmt(x['final_returns'])} | {fmt(s['training_scores'])} | {s['wall']:,.0f} / {x['wall']:,.0f} | "
                    f"{s['env_steps_per_second']:,.0f} / {x['env_steps_per_second']:,.0f} |")
    return "\n".join(rows)


def main() -> None:
    parser = sidebyside.command_line(__doc__, "xminigrid/MiniGrid-DoorKey-5x5", OUT)
    parser.add_argument("--timesteps", type=int, default=294_912,
                        help="env steps per seed: a multiple of --num-envs x --num-steps (294,912: 36 updates of 32 x 256)")
    parser.add_argument("--num-envs", type=int, default=32,
                        help="environments per seed (single.yaml: 16384); a multiple of 16 x the cores")
    parser.add_argument("--num-steps", type=int, default=SINGLE_YAML["num_steps"], help="rollout length (single.yaml: 256)")
    parser.add_argument("--rnn-hidden", type=int, default=64, help="GRU size, both sides (TrainConfig: 1024)")
    parser.add_argument("--head-hidden", type=int, default=64, help="actor and critic hidden layer, both sides "
                        "(TrainConfig: 256)")
    parser.add_argument("--episodes", type=int, default=32, help="evaluation episodes per seed, both sides "
                        "(XLand's evaluates after every update; a multiple of the cores)")
    parser.add_argument("--scanrl-eval-every", type=int, default=0,
                        help="scanrl's --eval-every (0: once, after the last update; 1: after every update, the "
                        "evaluation work XLand's trainer does)")
    parser.add_argument("--baseline", type=Path, help="an export of xland-minigrid's training/ folder (docstring)")
    parser.add_argument("--deps", help="a folder holding the trainer's packages (pyrallis, typing-inspect), "
                        "for its process only")
    sidebyside.finish(parser.parse_args(), cell, table, "ppo_rnn")


if __name__ == "__main__":
    main()
