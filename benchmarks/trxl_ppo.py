"""scanrl's recurrent PPO with its Transformer-XL core (`algos/ppo_rnn.py --core trxl`) against
the gated Transformer-XL PPO that leads Craftax's board (Reytuag/transformerXL_PPO_JAX,
`trainer_PPO_trXL_pmap.py`), side by side on `craftax/Craftax-Symbolic-v1`, each side on one CPU
device, at the baseline's config with its sizes scaled to a CPU budget (the same on both sides).

The baseline's side is its repository's own trainer, run, not copied: an export of the repository
(`git archive`, passed as --baseline DIR) is put on a child process's path, and the child does
what the repository's `train_PPO_trXL_pmap.py` does (`make_train(config, key)`, `replicate`, the
pmapped train lowered, compiled and run) with that script's config, the keys of SCALED replaced.
Its one adaptation: jax has since removed `jax.tree_map`, which the trainer calls; the child points
the name at `jax.tree_util.tree_map`, the same function. Its seeds are one process each (its
program takes one seed per device), one after another; its wall is the processes' sum, which
counts its imports and compiling once per seed, so the table also gives the ratio with imports
and compiling left out on both sides.

scanrl's side: `python -m scanrl.algos.ppo_rnn --env craftax/Craftax-Symbolic-v1 --recipe none
--core trxl` with the same settings as flags (`scanrl_flags`), its seeds vmapped in one process
on one device, without evaluation (the baseline has none).

The same score on both sides: each seed's mean return of the training episodes that ended in an
update, averaged over the last 10% of updates (updates where none ended are skipped; scanrl's
summary.json `final_return_per_seed`; the baseline's per-update metric
`returned_episode_returns`, which its trainer averages over the episodes that ended in the
update); IQM over seeds with its 95% stratified-bootstrap interval (rliable). Sittings alternate
which side runs first; each sitting's JSON is written when it ends.

    git --git-dir=TRXL_GIT archive d914d55 -- '*.py' | tar -x -C BASELINE
    python benchmarks/trxl_ppo.py --baseline BASELINE --seeds 5 --sittings 3 --out DIR
    python benchmarks/trxl_ppo.py --table --out DIR
    python benchmarks/trxl_ppo.py --baseline BASELINE --network alike --out DIR2  # scanrl's
        # positions and embedding as the baseline's
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import sidebyside

ROOT = Path(__file__).resolve().parents[1]
BASELINE_COMMIT = "d914d55"  # Reytuag/transformerXL_PPO_JAX, 2026-02-16
ENV = "craftax/Craftax-Symbolic-v1"
# train_PPO_trXL_pmap.py's config (1,024 envs x 128 steps, embedding 256, 8 heads, memory 128,
# gradient window 64) ...
CONFIG = {"LR": 2e-4, "NUM_ENVS": 1024, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 1e9,
          "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 8, "GAMMA": 0.999, "GAE_LAMBDA": 0.8,
          "CLIP_EPS": 0.2, "ENT_COEF": 0.002, "VF_COEF": 0.5, "MAX_GRAD_NORM": 1.0,
          "ACTIVATION": "relu", "ENV_NAME": "craftax", "ANNEAL_LR": True, "qkv_features": 256,
          "EMBED_SIZE": 256, "num_heads": 8, "num_layers": 2, "hidden_layers": 256,
          "WINDOW_MEM": 128, "WINDOW_GRAD": 64, "gating": True, "gating_bias": 2.0, "seed": 0}
# ... and its sizes scaled to a CPU budget: a sixty-fourth of the envs, a quarter of the steps,
# windows and widths, half the heads
SCALED = {"NUM_ENVS": 16, "NUM_STEPS": 32, "TOTAL_TIMESTEPS": 32_768, "qkv_features": 64,
          "EMBED_SIZE": 64, "num_heads": 4, "hidden_layers": 64, "WINDOW_MEM": 32,
          "WINDOW_GRAD": 16}

CHILD = r"""
import json, sys, time
baseline, seed, config = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
sys.path.insert(0, baseline)
import jax, numpy as np
jax.tree_map = jax.tree_util.tree_map  # removed from jax since the baseline's 0.4.26
from flax.jax_utils import replicate
from trainer_PPO_trXL_pmap import make_train
started = time.time()
rng = jax.random.PRNGKey(seed)
rng, _rng = jax.random.split(rng)
train_fn, train_state = make_train(config, _rng)
train_states = replicate(train_state, jax.local_devices())
rng = jax.random.split(rng, len(jax.local_devices()))
train_jit_fn = train_fn.lower(rng, train_states).compile()
compiled = time.time()
out = train_jit_fn(rng, train_states)
returns = np.asarray(out["metrics"]["returned_episode_returns"].block_until_ready())[0]
from importlib.metadata import version
print("RESULT" + json.dumps({"compile_seconds": compiled - started, "run_seconds": time.time()
      - compiled, "per_update": [None if not np.isfinite(r) else float(r) for r in returns],
      "devices": [str(d) for d in jax.devices()],
      "versions": {p: version(p) for p in ("jax", "flax", "optax", "distrax", "craftax")}}))
"""


def scanrl_flags(config: dict, seeds: int, network: str = "default") -> list[str]:
    """The baseline's config as ppo_rnn.py's flags (its encoder Dense is --encoder-hidden's one
    layer, its two-layer heads --head-hidden). network "alike": the core's positions as the
    baseline's (`--trxl-positions sinusoidal`) and the observation embedded by one linear layer
    as the baseline's encoder does (no --encoder-hidden layer: the core's input projection);
    "default": ppo_rnn.py's learned position bias behind a relu encoder layer."""
    c = config
    alike = ["--trxl-positions", "sinusoidal", "--encoder-hidden"] if network == "alike" \
        else ["--encoder-hidden", str(c["EMBED_SIZE"])]
    return ["--env", ENV, "--recipe", "none", "--core", "trxl", "--num-seeds", str(seeds),
            "--num-devices", "1", "--eval-every", "0",
            "--total-timesteps", str(int(c["TOTAL_TIMESTEPS"])), "--num-envs", str(c["NUM_ENVS"]),
            "--num-steps", str(c["NUM_STEPS"]), "--seq-len", str(c["WINDOW_GRAD"]),
            "--trxl-window", str(c["WINDOW_MEM"]), "--gru-size", str(c["EMBED_SIZE"]),
            "--trxl-heads", str(c["num_heads"]), "--trxl-layers", str(c["num_layers"]),
            *alike,
            "--head-hidden", str(c["hidden_layers"]), str(c["hidden_layers"]),
            "--activation", c["ACTIVATION"], "--learning-rate", str(c["LR"]),
            "--num-epochs", str(c["UPDATE_EPOCHS"]), "--num-minibatches", str(c["NUM_MINIBATCHES"]),
            "--gamma", str(c["GAMMA"]), "--gae-lambda", str(c["GAE_LAMBDA"]),
            "--clip-eps", str(c["CLIP_EPS"]), "--ent-coef", str(c["ENT_COEF"]),
            "--vf-coef", str(c["VF_COEF"]), "--max-grad-norm", str(c["MAX_GRAD_NORM"])]


def run_baseline(config: dict, seeds: int, baseline: Path) -> dict:
    runs = [sidebyside.run_snippet(CHILD, [str(baseline), str(seed), json.dumps(config)],
                                   "the Transformer-XL PPO") for seed in range(seeds)]
    return sidebyside.seed_processes(runs, len(runs[0]["per_update"]) * config["NUM_ENVS"]
                                     * config["NUM_STEPS"])


def sitting(args: argparse.Namespace, k: int) -> None:
    config = {**CONFIG, **SCALED, "TOTAL_TIMESTEPS": args.timesteps}
    cell = {"env": ENV, "seeds": args.seeds, "config": config,
            "baseline_commit": BASELINE_COMMIT, "network": args.network}
    sidebyside.write_sitting(args.out, k, cell, {
        "scanrl": lambda: sidebyside.run_scanrl_training(
            "ppo_rnn", scanrl_flags(config, args.seeds, args.network)),
        "baseline": lambda: run_baseline(config, args.seeds, args.baseline.resolve())})


def table(out: Path) -> str:
    cells = [json.loads(p.read_text()) for p in sorted(out.glob("sitting*.json"))]
    for c in cells:  # scored here, so a sitting written before this estimator is scored alike
        c["baseline"]["training_scores"] = [sidebyside.final_return(p)
                                            for p in c["baseline"]["per_update"]]
    network = ", network alike" if cells[-1].get("network") == "alike" else ""
    return sidebyside.sittings_table(cells, "baseline", (
        f"scanrl ppo_rnn --core trxl{network}", "transformerXL_PPO_JAX", "the baseline"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="an export of transformerXL_PPO_JAX")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--sittings", type=int, default=3)
    parser.add_argument("--timesteps", type=int, default=SCALED["TOTAL_TIMESTEPS"],
                        help="env steps per seed")
    parser.add_argument("--network", choices=("default", "alike"), default="default",
                        help="scanrl's network: ppo_rnn.py's defaults, or alike the baseline's "
                        "(sinusoidal positions, a linear embedding; scanrl_flags)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--table", action="store_true", help="print the table of --out and stop")
    args = parser.parse_args()
    if not args.table:
        if args.baseline is None or not (args.baseline / "trainer_PPO_trXL_pmap.py").is_file():
            raise SystemExit("--baseline must be an export of transformerXL_PPO_JAX (docstring)")
        sidebyside.run_sittings(args.out, args.sittings, lambda k: sitting(args, k))
    print(table(args.out))


if __name__ == "__main__":
    main()
