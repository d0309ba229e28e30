#!/usr/bin/env python
"""Thin driver for rejax's PQN (installed package, unchanged) on a gymnax env.

Run in rejax's own virtualenv (benchmarks/pqn_side_by_side.sh sets it up):
  python benchmarks/rejax_pqn.py --config REJAX/configs/gymnax/cartpole.yaml --num-seeds S \
      --seed 0 --out result.json [--total-timesteps N] [--eval-freq N]

Hyperparameters: rejax's own published CartPole PQN config (keraJLi/rejax
configs/gymnax/cartpole.yaml, key "pqn", read from a checkout: the PyPI wheel ships no configs).
Training is vmapped over seeds exactly as rejax's README shows:
  algo = PQN.create(**cfg); jax.jit(jax.vmap(algo.train))(keys)
"""
import argparse
import json
import math
import os
import time

import sidebyside  # benchmarks/, beside this file: scanrl_commit needs git only



def f2j(x):
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True, help="configs/gymnax/cartpole.yaml of a rejax checkout")
    p.add_argument("--algo", default="pqn")
    p.add_argument("--total-timesteps", type=int, default=None, help="override (validation only)")
    p.add_argument("--eval-freq", type=int, default=None, help="override (validation only)")
    p.add_argument("--num-seeds", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    source = sidebyside.scanrl_commit()  # the scanrl tree of the sitting (git only: this venv has no scanrl)

    t_imp0 = time.perf_counter()
    import jax
    import numpy as np
    import yaml
    import rejax
    from importlib.metadata import version
    t_imp1 = time.perf_counter()

    with open(args.config) as f:
        cfg = yaml.safe_load(f)[args.algo]
    published = dict(cfg)
    if args.total_timesteps is not None:
        cfg["total_timesteps"] = args.total_timesteps
    if args.eval_freq is not None:
        cfg["eval_freq"] = args.eval_freq

    algo_cls = rejax.get_algo(args.algo)
    algo = algo_cls.create(**cfg)

    keys = jax.random.split(jax.random.PRNGKey(args.seed), args.num_seeds)
    train_fn = jax.jit(jax.vmap(algo.train))

    t0 = time.perf_counter()
    compiled = train_fn.lower(keys).compile()
    t1 = time.perf_counter()
    ts, evaluation = jax.block_until_ready(compiled(keys))
    t2 = time.perf_counter()

    # evaluation = (lengths, returns), each (S, num_evals [+1 initial], 128 eval envs)
    lengths, returns = (np.asarray(x) for x in evaluation)
    S = args.num_seeds
    n_evals_train = int(np.ceil(cfg["total_timesteps"] / cfg.get("eval_freq", algo.eval_freq)))
    iter_steps = algo.num_envs * algo.num_steps
    iters_per_eval = int(np.ceil(algo.eval_freq / iter_steps))
    steps_per_seed = n_evals_train * iters_per_eval * iter_steps  # what actually runs
    has_initial = not algo.skip_initial_evaluation
    eval_steps = [0] * has_initial + [
        (i + 1) * iters_per_eval * iter_steps for i in range(n_evals_train)
    ]
    global_step = np.asarray(ts.global_step)

    per_seed = []
    for s in range(S):
        mean_ret = returns[s].mean(axis=-1)
        per_seed.append({
            "seed_index": s,
            "eval_returns": [{"env_step": int(e), "return": f2j(r)} for e, r in zip(eval_steps, mean_ret)],
            "final_eval_return": f2j(mean_ret[-1]),
            "final_eval_return_std_over_eval_envs": f2j(returns[s][-1].std()),
            "final_eval_length_mean": f2j(lengths[s][-1].mean()),
            "global_step_final": int(global_step[s]),
        })

    result = {
        "impl": "rejax",
        "algo": args.algo,
        "versions": {k: version(k) for k in ("rejax", "jax", "jaxlib", "flax", "optax", "gymnax")},
        "backend": jax.default_backend(),
        "config_file": args.config,
        "config_source": "github.com/keraJLi/rejax configs/gymnax/cartpole.yaml (pqn)",
        "published_config": published,
        "config_used": cfg,
        "num_seeds": S,
        "seed": args.seed,
        **source,
        "eval_policy": "rejax PQN.make_act: epsilon=0.005, 128 eval envs, until done or max_steps",
        "num_evals": int(returns.shape[1]),
        "wall_import_s": t_imp1 - t_imp0,
        "wall_compile_s": t1 - t0,
        "wall_run_s": t2 - t1,
        "env_steps_per_seed": steps_per_seed,
        "env_steps_total": steps_per_seed * S,
        "steps_per_s": steps_per_seed * S / (t2 - t1),
        "final_eval_return_per_seed": [d["final_eval_return"] for d in per_seed],
        "final_eval_return_mean": f2j(np.mean(returns[:, -1])),
        "per_seed": per_seed,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: result[k] for k in (
        "versions", "config_used", "wall_compile_s", "wall_run_s", "env_steps_total",
        "steps_per_s", "final_eval_return_per_seed")}, indent=1))


if __name__ == "__main__":
    main()
