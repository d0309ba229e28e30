"""Learning checks at the budgets and bars of the test suite's learning tests, seeds 0-3 of each.

The test suite's learning tests (tests/test_*.py, marked slow) each train one configuration on
seeds 0-3 and assert a bar; this script runs those same configurations, through the same
command-line pieces (`run.train_and_write`), plus the documented checks the suite leaves to it
(IMPALA without lag and on Pendulum, PPO on Pendulum, the memory checks), and prints one row
each: per-seed final return, the mean, the bar it must clear, pass/fail. The final return is
the mean training-episode return over the last 10% of updates, or, for PQN (whose test reads
it), the greedy evaluation after the last update.

    python benchmarks/learning.py                 # all checks (~16 minutes on 2 cores)
    python benchmarks/learning.py ppo_pendulum    # some of them
    python benchmarks/learning.py --out benchmarks/reference/learning/checks.json   # and keep them
    python benchmarks/learning.py --seeds 10 ippo_spread pqn_vdn_spread  # a bar's derivation
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np

from scanrl.algos import grpo, impala, ppo, ppo_rnn, pqn, pqn_rnn, sac, td3
from scanrl.common.harness import devices, provenance, run
from scanrl.common.harness.runconfig import compose

devices.use_cpu_cores()  # one CPU device per core, as the command line has

MASKED = dict(hide_obs=(1, 3))  # CartPole without its velocities
MEMORY_20 = dict(env_params={"memory_length": 20}, total_timesteps=200_000)
METAMAZE = dict(normalize_obs=True, eval_every=0)

# name: (module, env, overrides, minimum mean, minimum of every seed or None[, maximum mean]);
# a maximum: feed-forward PPO must stay at chance where memory is needed. `score: "greedy"`: the
# greedy evaluation after the last update. Each check that a test also runs (its name in the
# comment) has that test's budget and bars.
CHECKS = {
    "ppo_cartpole": (ppo, "CartPole-v1", dict(total_timesteps=500_000), 475, None),  # test_ppo
    "ppo_pendulum": (ppo, "Pendulum-v1", {}, -400, None),
    "impala_cartpole_lag0": (impala, "CartPole-v1", dict(actor_lag=0), 475, 400),
    "impala_cartpole_lag4": (impala, "CartPole-v1", dict(actor_lag=4), 475, 400),  # test_impala
    "impala_pendulum": (impala, "Pendulum-v1", {}, -400, None),
    "grpo_cartpole": (grpo, "CartPole-v1", dict(total_timesteps=2_000_000), 475, None),  # test_grpo
    "sac_pendulum": (sac, "Pendulum-v1", dict(total_timesteps=10_000), -200, -300),  # test_sac
    "td3_pendulum": (td3, "Pendulum-v1", dict(total_timesteps=15_000), -200, -250),  # test_td3
    "td3_brax_inverted_pendulum": (td3, "brax/inverted_pendulum",  # test_td3
                                   dict(recipe="none", total_timesteps=30_000, eval_every=0), 800, 500),
    "pqn_cartpole": (pqn, "CartPole-v1", dict(total_timesteps=200_000, score="greedy"), 475, None),  # test_pqn
    "ppo_rnn_masked_cartpole": (ppo_rnn, "CartPole-v1", MASKED, 400, None),  # test_ppo_rnn
    "ppo_masked_cartpole": (ppo, "CartPole-v1", dict(MASKED, total_timesteps=200_000), -1e9, None, 100),
    "ppo_rnn_memory_chain_20": (ppo_rnn, "MemoryChain-bsuite", MEMORY_20, 0.9, None),
    "ppo_memory_chain_20": (ppo, "MemoryChain-bsuite", MEMORY_20, -1e9, None, 0.2),
    # test_ppo_rnn: each other core at a sixth of the GRU's budget (32 updates of 1,024 steps)
    **{f"ppo_rnn_{core}_memory_chain_20": (ppo_rnn, "MemoryChain-bsuite",
                                            dict(MEMORY_20, total_timesteps=32_768, core=core),
                                            0.75, None) for core in ("lstm", "lru", "trxl")},
    # the Transformer-XL with Transformer-XL's sinusoidal positions (--trxl-positions), alike
    "ppo_rnn_trxl_sinusoidal_memory_chain_20": (
        ppo_rnn, "MemoryChain-bsuite",
        dict(MEMORY_20, total_timesteps=32_768, core="trxl", trxl_positions="sinusoidal"), 0.75, None),
    # test_ppo_rnn: MetaMaze with --normalize-obs (its observation holds the step count, 0-200),
    # recurrent PPO's defaults; feed-forward PPO with the same budget stays far below
    "ppo_rnn_metamaze": (ppo_rnn, "MetaMaze-misc", METAMAZE, 25.0, None),
    "ppo_metamaze": (ppo, "MetaMaze-misc", dict(METAMAZE, total_timesteps=200_000), -1e9, None, 20.0),
    # test_jaxmarl: IPPO and PQN-VDN at JaxMARL's recipes (cpu form), greedy, 64 games a seed
    "ippo_spread": (ppo, "jaxmarl/MPE_simple_spread_v3",
                    dict(recipe="cpu", total_timesteps=500_000, eval_episodes=64, score="greedy"),
                    -25.0, None),
    "pqn_vdn_spread": (pqn, "jaxmarl/MPE_simple_spread_v3",
                       dict(recipe="cpu", total_timesteps=80_000, eval_episodes=64, score="greedy"),
                       -22.0, None),
    # a documented check, not a test: recurrent PQN-VDN at JaxMARL's pqn_vdn_rnn_mpe.yaml (cpu
    # form), PQN-VDN's budget; its bar from 10 seeds (any 4 average at least -22.26)
    "pqn_rnn_vdn_spread": (pqn_rnn, "jaxmarl/MPE_simple_spread_v3",
                           dict(recipe="cpu", total_timesteps=80_000, eval_episodes=64,
                                score="greedy"), -23.0, None),
}


def final_returns(module, env: str, overrides: dict, num_seeds: int = 4) -> np.ndarray:
    """Seeds 0 to num_seeds - 1's final returns, trained as the tests train: `compose` then
    `run.train_and_write` (the command line's pieces), in a scratch run folder."""
    overrides = dict(overrides)
    greedy = overrides.pop("score", "train") == "greedy"
    with tempfile.TemporaryDirectory() as scratch:
        config = compose(module, env, num_seeds=num_seeds, seed=0, log_every=0, out_dir=scratch, **overrides)
        summary = run.train_and_write(module.ALGO, config, module.make_algorithm)
        if greedy:
            evals = np.load(Path(summary["run_dir"]) / "metrics.npz")["eval_return"]
            return evals[:, -1]
        return np.array(summary["final_return_per_seed"])


def main(names: list[str], out: str | None = None, num_seeds: int = 4) -> int:
    """Runs the checks `names` (default: all), prints a row each; with `out`, writes every row
    to that JSON file after each check, keeping the file's rows of checks not run this time."""
    failed, rows = 0, {}
    if out and Path(out).exists():
        rows = {row["check"]: row for row in json.loads(Path(out).read_text())["checks"]}
    for name in names or CHECKS:
        module, env, overrides, mean_bar, seed_bar, *high = CHECKS[name]
        final = final_returns(module, env, overrides, num_seeds)
        ok = final.mean() >= mean_bar and (seed_bar is None or final.min() >= seed_bar)
        ok = ok and (not high or final.mean() <= high[0])
        failed += not ok
        bars = f"mean <= {high[0]}" if high else f"mean >= {mean_bar}"
        bars += f", every seed >= {seed_bar}" if seed_bar is not None else ""
        print(f"{name:22s} {' '.join(f'{x:8.1f}' for x in final)}  mean {final.mean():8.1f}  ({bars}) "
              f"{'pass' if ok else 'FAIL'}", flush=True)
        rows[name] = {"check": name, "algo": module.ALGO, "env": env, "overrides": overrides, "seeds": list(range(num_seeds)),
                      "final_return_per_seed": final.tolist(), "mean": float(final.mean()), "bar": bars,
                      "passed": bool(ok), "command": "python benchmarks/learning.py " + " ".join(sys.argv[1:]),
                      "date": datetime.datetime.now().isoformat(timespec="seconds"),
                      "scanrl": provenance.scanrl_source(), "jax": jax.__version__,
                      "devices": [str(d) for d in jax.devices()], "machine": platform.platform()}
        if out:  # after every check: an interrupted run keeps what it measured
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            ordered = [rows[k] for k in CHECKS if k in rows]
            Path(out).write_text(json.dumps({"checks": ordered}, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"checks to run (default: all of {', '.join(CHECKS)})")
    parser.add_argument("--out", help="also write the rows to this JSON file")
    parser.add_argument("--seeds", type=int, default=4,
                        help="seeds 0 to N - 1 (default 4, the tests'; 10 to re-derive a bar)")
    args = parser.parse_args()
    sys.exit(main(args.names, args.out, args.seeds))
