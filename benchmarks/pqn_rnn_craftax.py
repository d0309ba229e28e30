"""scanrl's recurrent PQN (`algos/pqn_rnn.py --core lstm`) against purejaxql's recurrent PQN for
Craftax (mttga/purejaxql, `purejaxql/pqn_rnn_craftax.py` with `config/alg/pqn_rnn_craftax.yaml`),
side by side on a symbolic Craftax env, each side on one CPU device, at that yaml's config with
the envs scaled to a CPU budget (the same on both sides).

purejaxql's side is its own file, run, not copied: a child process in purejaxql's own
virtualenv (--python) puts the checkout (--purejaxql) on its path, composes the config as
Hydra would (config.yaml with alg=pqn_rnn_craftax and the overrides of SCALED), and does what
the file's `single_run` does: `jax.jit(jax.vmap(make_train(config)))` over the seeds' keys,
lowered, compiled and run (nothing saved, no greedy tests: TEST_DURING_TRAINING is off in the
yaml). The file returns no metrics from its program; it reports each update's to wandb from a
host callback, which runs here with `wandb.log` caught (no wandb run is started). Its seeds run
one process each, one after another (NUM_SEEDS 1, SEED the seed's index), its wall the
processes' sum: on this machine a process with two seeds vmapped over two updates had not
ended after 150 s, where one seed's takes about 40 s, compiling included (not looked into).

scanrl's side: `python -m scanrl.algos.pqn_rnn --env craftax/NAME --recipe none --core lstm` with
the yaml's settings as flags (`scanrl_flags`), its seeds vmapped in one process on one device,
without evaluation. What differs (said where the figures are published): purejaxql
normalises the input with a batch renormalisation (NORM_INPUT), scanrl's recurrent PQN does not;
purejaxql recomputes the targets in every minibatch from the replayed sequence and carries the
last action over an episode's start, scanrl computes them once per rollout and starts an episode
from a zero action (docs/algorithms/pqn_rnn.md); purejaxql first steps NUM_STEPS random actions
that it does not count.

The same score on both sides: each seed's mean return of the training episodes that ended in an
update, averaged over the last 10% of updates (updates where none ended are skipped; scanrl's
summary.json `final_return_per_seed`; purejaxql's per-update metric `returned_episode_returns`,
its mean over the episodes that ended in the update); IQM over seeds with its 95%
stratified-bootstrap interval (rliable). Sittings alternate which side runs first; each
sitting's JSON is written when it ends. The wall is each side's whole process (imports,
compiling, training); the run rate leaves imports and compiling out.

    python benchmarks/pqn_rnn_craftax.py --purejaxql PJQ --python PJQ_VENV/bin/python \\
        --seeds 5 --sittings 3 --out DIR
    python benchmarks/pqn_rnn_craftax.py --table --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import sidebyside

PUREJAXQL_COMMIT = "47af6d7"  # mttga/purejaxql
ENV = "craftax/Craftax-Classic-Symbolic-v1"
# config/alg/pqn_rnn_craftax.yaml's values that scanrl_flags reads (the yaml is read by the child;
# these are checked against it there)
CONFIG = {"NUM_ENVS": 1024, "NUM_STEPS": 128, "NUM_MINIBATCHES": 4, "NUM_EPOCHS": 4, "LR": 3e-4,
          "LR_LINEAR_DECAY": True, "MAX_GRAD_NORM": 0.5, "GAMMA": 0.99, "LAMBDA": 0.5,
          "EPS_START": 1.0, "EPS_FINISH": 0.005, "EPS_DECAY": 0.1, "REW_SCALE": 1.0,
          "HIDDEN_SIZE": 512, "NUM_LAYERS": 1, "NUM_RNN_LAYERS": 1, "ADD_LAST_ACTION": True,
          "NORM_TYPE": "layer_norm", "NORM_INPUT": True, "MEMORY_WINDOW": 0}
# ... with the envs scaled to a CPU budget: a thirty-second of them (a minibatch: 8 envs' sequences)
SCALED = {"NUM_ENVS": 32, "TOTAL_TIMESTEPS": 204_800}

CHILD = r"""
import json, os, sys, time
root, env, seed, overrides = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
expected = json.loads(sys.argv[5])
sys.path.insert(0, root)
import jax, numpy as np
from omegaconf import OmegaConf
from purejaxql import pqn_rnn_craftax as pjq
started = time.time()
cfg = os.path.join(root, "purejaxql", "config")
config = OmegaConf.to_container(OmegaConf.load(os.path.join(cfg, "config.yaml")))
config["alg"] = OmegaConf.to_container(OmegaConf.load(os.path.join(cfg, "alg",
                                                                   "pqn_rnn_craftax.yaml")))
wrong = {k: (config["alg"][k], v) for k, v in expected.items() if config["alg"][k] != v}
assert not wrong, f"the yaml differs from benchmarks/pqn_rnn_craftax.py's CONFIG: {wrong}"
config["alg"].update(overrides, ENV_NAME=env, TOTAL_TIMESTEPS_DECAY=overrides["TOTAL_TIMESTEPS"])
# the file returns no metrics from its program: it reports each update to wandb from a host
# callback, so that callback runs (any mode but "disabled") and wandb.log is caught here
logged = []
pjq.wandb.log = lambda metrics, step=None: logged.append(
    (np.asarray(metrics["update_steps"]), np.asarray(metrics["returned_episode_returns"])))
config.update(NUM_SEEDS=1, SEED=seed, WANDB_MODE="caught", SAVE_PATH=None)
config = {**config, **config["alg"]}  # what single_run does
rngs = jax.random.split(jax.random.PRNGKey(config["SEED"]), config["NUM_SEEDS"])
compiled = jax.jit(jax.vmap(pjq.make_train(config))).lower(rngs).compile()
ready = time.time()
jax.block_until_ready(compiled(rngs))
jax.effects_barrier()
steps = np.concatenate([np.ravel(s) for s, _ in logged])
values = np.concatenate([np.ravel(r) for _, r in logged])
assert len(values) == config["NUM_UPDATES"], (len(values), config["NUM_UPDATES"])
returns = values[np.argsort(steps)]  # [updates]
from importlib.metadata import version
print("RESULT" + json.dumps({"compile_seconds": ready - started, "run_seconds": time.time()
      - ready, "num_updates": int(config["NUM_UPDATES"]),
      "per_update": [None if not np.isfinite(r) else float(r) for r in returns],
      "devices": [str(d) for d in jax.devices()],
      "versions": {p: version(p) for p in ("jax", "flax", "optax", "craftax")}}))
"""


def scanrl_flags(config: dict, seeds: int, env: str) -> list[str]:
    """The yaml's config as pqn_rnn.py's flags: its one Dense layer of HIDDEN_SIZE with layer
    norm before the relu (`--hidden`, `--norm layer_norm`), an LSTM of HIDDEN_SIZE reading the
    last action (`--core lstm --gru-size`, `--last-action`), RAdam after a global-norm clip, the
    learning rate and epsilon decayed over the whole budget."""
    c = config
    return ["--env", env, "--recipe", "none", "--core", "lstm", "--num-seeds", str(seeds),
            "--num-devices", "1", "--eval-every", "0",
            "--total-timesteps", str(c["TOTAL_TIMESTEPS"]), "--num-envs", str(c["NUM_ENVS"]),
            "--num-steps", str(c["NUM_STEPS"]), "--num-epochs", str(c["NUM_EPOCHS"]),
            "--num-minibatches", str(c["NUM_MINIBATCHES"]), "--optimizer", "radam",
            "--learning-rate", str(c["LR"]), "--anneal-lr", "--max-grad-norm",
            str(c["MAX_GRAD_NORM"]), "--gamma", str(c["GAMMA"]), "--q-lambda", str(c["LAMBDA"]),
            "--epsilon-start", str(c["EPS_START"]), "--epsilon-end", str(c["EPS_FINISH"]),
            "--epsilon-fraction", str(c["EPS_DECAY"]), "--reward-scale", str(c["REW_SCALE"]),
            "--hidden", str(c["HIDDEN_SIZE"]), "--norm", c["NORM_TYPE"], "--activation", "relu",
            "--gru-size", str(c["HIDDEN_SIZE"]), "--last-action"]


def run_purejaxql(config: dict, seeds: int, env: str, root: Path, python: str) -> dict:
    overrides = {k: v for k, v in config.items() if k in SCALED}
    expected = {k: v for k, v in config.items() if k not in SCALED}
    runs = [sidebyside.run_snippet(CHILD, [str(root), env.split("/")[-1], str(seed),
                                           json.dumps(overrides), json.dumps(expected)],
                                   "purejaxql's recurrent PQN", python=python)
            for seed in range(seeds)]
    return sidebyside.seed_processes(runs, runs[0]["num_updates"] * config["NUM_ENVS"]
                                     * config["NUM_STEPS"])


def sitting(args: argparse.Namespace, k: int) -> None:
    config = {**CONFIG, **SCALED, "TOTAL_TIMESTEPS": args.timesteps}
    cell = {"env": args.env, "seeds": args.seeds, "config": config,
            "purejaxql_commit": PUREJAXQL_COMMIT}
    sidebyside.write_sitting(args.out, k, cell, {
        "scanrl": lambda: sidebyside.run_scanrl_training(
            "pqn_rnn", scanrl_flags(config, args.seeds, args.env)),
        "purejaxql": lambda: run_purejaxql(config, args.seeds, args.env,
                                           args.purejaxql.resolve(), args.python)})


def table(out: Path) -> str:
    from scanrl.common.harness import stats

    cells = [json.loads(p.read_text()) for p in sorted(out.glob("sitting*.json"))]
    ours, theirs = (np.array(cells[-1][side]["training_scores"], np.float64)[:, None]
                    for side in ("scanrl", "purejaxql"))
    p = stats.probability_of_improvement(ours, theirs)
    return f"{cells[-1]['env']}, {cells[-1]['seeds']} seeds a side\n" + sidebyside.sittings_table(
        cells, "purejaxql", ("scanrl pqn_rnn --core lstm", "purejaxql pqn_rnn_craftax.py",
                             "purejaxql"),
        f"; P(scanrl > purejaxql) {p.point:.2f} [{p.low:.2f}, {p.high:.2f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--purejaxql", type=Path, help="a checkout of mttga/purejaxql")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter of purejaxql's virtualenv (hydra, flax, craftax)")
    parser.add_argument("--env", default=ENV)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--sittings", type=int, default=3)
    parser.add_argument("--timesteps", type=int, default=SCALED["TOTAL_TIMESTEPS"],
                        help="env steps per seed")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--table", action="store_true", help="print the table of --out and stop")
    args = parser.parse_args()
    if not args.table:
        if args.purejaxql is None or not (args.purejaxql / "purejaxql"
                                          / "pqn_rnn_craftax.py").is_file():
            raise SystemExit("--purejaxql must be a checkout of mttga/purejaxql (docstring)")
        sidebyside.run_sittings(args.out, args.sittings, lambda k: sitting(args, k))
    print(table(args.out))


if __name__ == "__main__":
    main()
