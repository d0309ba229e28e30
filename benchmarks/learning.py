"""Learning checks with the documented default configurations, seeds 0-3 of each.

The test suite keeps one learning run per algorithm (PPO CartPole, IMPALA CartPole with
actor lag 4, GRPO CartPole, SAC Pendulum, recurrent PPO on CartPole without velocities);
this script runs every documented check,
including those, and prints one row each: per-seed final return (mean training-episode
return over the last 10% of updates), the mean, the bar it must clear, pass/fail.

    python benchmarks/learning.py                 # all checks (~5 minutes on 2 cores)
    python benchmarks/learning.py ppo_pendulum    # some of them
    python benchmarks/learning.py --out benchmarks/reference/learning/checks.json   # and keep them
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

import jax
import numpy as np

from scanrl.algos import grpo, impala, ppo, ppo_rnn, sac
from scanrl.common import algorithm
from scanrl.common.harness import devices, envsettings, provenance

devices.use_cpu_cores()  # one CPU device per core, as the command line has

MASKED = dict(hide_obs=(1, 3))  # CartPole without its velocities
MEMORY_20 = dict(env_params={"memory_length": 20}, total_timesteps=200_000)

# name: (module, env, overrides, minimum mean, minimum of every seed or None[, maximum mean]);
# a maximum: feed-forward PPO must stay at chance where memory is needed.
CHECKS = {
    "ppo_cartpole": (ppo, "CartPole-v1", dict(total_timesteps=500_000), 475, None),
    "ppo_pendulum": (ppo, "Pendulum-v1", {}, -400, None),
    "impala_cartpole_lag0": (impala, "CartPole-v1", dict(actor_lag=0), 475, 400),
    "impala_cartpole_lag4": (impala, "CartPole-v1", dict(actor_lag=4), 475, 400),
    "impala_pendulum": (impala, "Pendulum-v1", {}, -400, None),
    "grpo_cartpole": (grpo, "CartPole-v1", {}, 475, None),
    "sac_pendulum": (sac, "Pendulum-v1", {}, -200, -300),
    "ppo_rnn_masked_cartpole": (ppo_rnn, "CartPole-v1", MASKED, 400, None),
    "ppo_masked_cartpole": (ppo, "CartPole-v1", dict(MASKED, total_timesteps=200_000), -1e9, None, 100),
    "ppo_rnn_memory_chain_20": (ppo_rnn, "MemoryChain-bsuite", MEMORY_20, 0.9, None),
    "ppo_memory_chain_20": (ppo, "MemoryChain-bsuite", MEMORY_20, -1e9, None, 0.2),
}


def final_returns(module, env: str, overrides: dict) -> np.ndarray:
    """Seeds 0-3's final returns; `hide_obs` and `env_params` are run settings (the command
    line's --hide-obs and --env-params): applied to the env handed to make_train."""
    overrides = dict(overrides)
    hidden, params = overrides.pop("hide_obs", ()), overrides.pop("env_params", {})
    config = module.default_config(env, **overrides)
    env_obj, env_params = algorithm.train_env(config)
    env_params = envsettings.override_params(env_params, params) if params else env_params
    env_obj = envsettings.HiddenObs(env_obj, hidden, env_params) if hidden else env_obj
    out = module.make_train(config, env_obj, env_params)(devices.seed_keys(0, 4))
    returns = np.asarray(out["metrics"]["episode_return"])
    tail = max(1, int(np.ceil(0.1 * returns.shape[1])))
    return np.nanmean(returns[:, -tail:], axis=1)


def main(names: list[str], out: str | None = None) -> int:
    """Runs the checks `names` (default: all), prints a row each; with `out`, writes every row
    to that JSON file after each check, keeping the file's rows of checks not run this time."""
    failed, rows = 0, {}
    if out and Path(out).exists():
        rows = {row["check"]: row for row in json.loads(Path(out).read_text())["checks"]}
    for name in names or CHECKS:
        module, env, overrides, mean_bar, seed_bar, *high = CHECKS[name]
        final = final_returns(module, env, overrides)
        ok = final.mean() >= mean_bar and (seed_bar is None or final.min() >= seed_bar)
        ok = ok and (not high or final.mean() <= high[0])
        failed += not ok
        bars = f"mean <= {high[0]}" if high else f"mean >= {mean_bar}"
        bars += f", every seed >= {seed_bar}" if seed_bar is not None else ""
        print(f"{name:22s} {' '.join(f'{x:8.1f}' for x in final)}  mean {final.mean():8.1f}  ({bars}) "
              f"{'pass' if ok else 'FAIL'}", flush=True)
        rows[name] = {"check": name, "algo": module.ALGO, "env": env, "overrides": overrides, "seeds": [0, 1, 2, 3],
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
    args = parser.parse_args()
    sys.exit(main(args.names, args.out))
