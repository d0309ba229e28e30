#!/usr/bin/env python
"""Thin driver for purejaxql's PQN (pqn_minatar.py / pqn_gymnax.py), run unchanged.

Run in purejaxql's own virtualenv (benchmarks/pqn_side_by_side.sh sets it up), with
PUREJAXQL_DIR a checkout of mttga/purejaxql:
  python benchmarks/purejaxql_pqn.py --script minatar|gymnax --env Breakout-MinAtar \
      --total-timesteps N --decay-timesteps N --num-seeds S --seed 0 [--test-interval F] \
      --out result.json

The only thing this driver changes at run time is the gymnax wrapper class that
purejaxql's module looks up when make_train() runs (gymnax 1.0.1 compatibility, see
CompatLogWrapper below).  purejaxql's files are not edited.

Two estimators of the final greedy return.  purejaxql's own test (get_test_metrics) steps
TEST_NUM_ENVS envs for max_steps_in_episode steps and averages every episode that ends in that
window, so a short second episode counts and a long one that has not ended does not.  scanrl
scores each env's first whole episode.  After training, this driver steps the final greedy
policy once more through purejaxql's own network, env and test protocol (the same envs and
window) and records both: `first_episode_return_per_seed` (scanrl's estimator, the one a
side-by-side label uses) and `window_mean_return_per_seed` (purejaxql's).  That extra test is
timed apart (`wall_final_estimators_s`) and is not part of the wall.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import sidebyside  # benchmarks/, beside this file: scanrl_commit needs git only

PJQ_ROOT = os.environ.get("PUREJAXQL_DIR", "purejaxql")  # a checkout of mttga/purejaxql


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--script", choices=["minatar", "gymnax"], required=True)
    p.add_argument("--env", default=None, help="gymnax env id (default: the yaml's)")
    p.add_argument("--alg-config", default=None,
                   help="alg yaml name (default pqn_minatar for minatar, pqn_cartpole for gymnax)")
    p.add_argument("--total-timesteps", type=int, required=True)
    p.add_argument("--decay-timesteps", type=int, default=None,
                   help="TOTAL_TIMESTEPS_DECAY (default: = total-timesteps)")
    p.add_argument("--num-seeds", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--test-interval", type=float, default=None,
                   help="TEST_INTERVAL, the fraction of the updates between greedy tests "
                        "(default: the yaml's, 0.05)")
    p.add_argument("--no-test", action="store_true",
                   help="set TEST_DURING_TRAINING=False (timing without greedy test evals)")
    return p.parse_args()


def commit_hash():
    try:
        return os.environ.get("PUREJAXQL_COMMIT") or subprocess.check_output(
            ["git", "-C", PJQ_ROOT, "rev-parse", "HEAD"], text=True).strip()
    except Exception:
        return None


def f2j(x):
    """float -> JSON-safe (NaN -> None)."""
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def both_estimators(ended, returns, xp):
    """ended, returns: [T, n] (an episode ended at step t in env i, and its return). Returns the
    mean over envs of each env's first ended episode (envs with none left out), the mean over
    every ended episode, and the two counts. `xp`: numpy or jax.numpy."""
    first = returns[xp.argmax(ended, axis=0), xp.arange(ended.shape[1])]  # each env's first
    has_first = ended.any(axis=0)
    window = xp.where(ended, returns, 0.0).sum() / ended.sum()
    return (xp.where(has_first, first, 0.0).sum() / has_first.sum(), window,
            has_first.sum(), ended.sum())


def final_estimators(pjq, script, config, train_state, rng):
    """Both estimators of the final greedy return, per seed, from one greedy test of
    TEST_NUM_ENVS envs x TEST_NUM_STEPS (= max_steps_in_episode) steps per seed.

    train_state: purejaxql's final CustomTrainState with a leading seed axis.
    Returns (S,) arrays: the mean over envs of each env's first ended episode, the mean over
    every episode ended in the window (purejaxql's test), and how many episodes each counted."""
    import gymnax
    import jax
    import jax.numpy as jnp
    from gymnax.wrappers.purerl import FlattenObservationWrapper

    env, env_params = gymnax.make(config["ENV_NAME"])
    if script == "gymnax":
        env = FlattenObservationWrapper(env)
    env = pjq.LogWrapper(env)  # the compatibility wrapper, as in training
    extra = ({"hidden_size": config.get("HIDDEN_SIZE", 128), "num_layers": config.get("NUM_LAYERS", 2)}
             if script == "gymnax" else {})
    network = pjq.QNetwork(action_dim=env.action_space(env_params).n, norm_type=config["NORM_TYPE"],
                           norm_input=config.get("NORM_INPUT", False), **extra)
    n, steps, eps = config["TEST_NUM_ENVS"], config["TEST_NUM_STEPS"], config["EPS_TEST"]

    def one_seed(params, batch_stats, key):
        key, reset_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, n), env_params)

        def step(carry, _):
            state, obs, key = carry
            key, act_key, rand_key, step_key = jax.random.split(key, 4)
            q = network.apply({"params": params, "batch_stats": batch_stats}, obs, train=False)
            random_action = jax.random.randint(rand_key, (n,), 0, q.shape[-1])
            action = jnp.where(jax.random.uniform(act_key, (n,)) < eps, random_action, q.argmax(-1))
            obs, state, _, _, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(step_key, n), state, action, env_params)
            return (state, obs, key), (info["returned_episode"], info["returned_episode_returns"])

        _, (ended, returns) = jax.lax.scan(step, (state, obs, key), None, steps)  # (T, n) each
        return both_estimators(ended, returns, jnp)

    keys = jax.random.split(rng, jax.tree_util.tree_leaves(train_state.params)[0].shape[0])
    return jax.jit(jax.vmap(one_seed))(train_state.params, train_state.batch_stats, keys)


def main():
    args = parse_args()
    source = sidebyside.scanrl_commit()  # the scanrl tree of the sitting (git only: this venv has no scanrl)
    t_imp0 = time.perf_counter()

    sys.path.insert(0, PJQ_ROOT)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from omegaconf import OmegaConf
    import wandb
    from gymnax.wrappers.purerl import LogWrapper as _GxLogWrapper

    if args.script == "minatar":
        from purejaxql import pqn_minatar as pjq
        alg_name = args.alg_config or "pqn_minatar"
    else:
        from purejaxql import pqn_gymnax as pjq
        alg_name = args.alg_config or "pqn_cartpole"

    # ---- gymnax 1.0.1 compatibility -------------------------------------------------
    # gymnax>=1.0 step() returns (obs, state, reward, terminated, truncated, info) and the
    # info dict carries extra keys (final_observation: an obs-shaped array, terminated,
    # truncated, returned_episode_valid).  purejaxql (written for gymnax 0.0.x) unpacks a
    # 5-tuple (obs, state, reward, done, info) and nan-means *every* info key masked by
    # info["returned_episode"] (which breaks on the obs-shaped final_observation).
    # This wrapper restores the 0.0.x contract: done = terminated | truncated and the
    # info keys {discount, returned_episode_returns, returned_episode_lengths,
    # returned_episode} (0.0.x also had "timestep", which 1.0.1's LogEnvState lacks).
    class CompatLogWrapper(_GxLogWrapper):
        def step(self, key, state, action, params=None):
            obs, state, reward, terminated, truncated, info = super().step(
                key, state, action, params
            )
            done = jnp.logical_or(terminated, truncated)
            info = {
                k: v
                for k, v in info.items()
                if k not in ("final_observation", "terminated", "truncated",
                             "returned_episode_valid")
            }
            return obs, state, reward, done, info

    pjq.LogWrapper = CompatLogWrapper  # make_train() looks LogWrapper up in its module
    # wandb is disabled via WANDB_MODE (purejaxql then never registers its callback);
    # belt and braces: make wandb.log a no-op.
    wandb.log = lambda *a, **k: None
    t_imp1 = time.perf_counter()

    # ---- config, as hydra would compose it: config.yaml + alg=<alg yaml> ------------
    cfg_dir = os.path.join(PJQ_ROOT, "purejaxql", "config")
    base = OmegaConf.to_container(OmegaConf.load(os.path.join(cfg_dir, "config.yaml")))
    alg = OmegaConf.to_container(OmegaConf.load(os.path.join(cfg_dir, "alg", alg_name + ".yaml")))
    base["alg"] = {**(base.get("alg") or {}), **alg}
    overrides = {
        "TOTAL_TIMESTEPS": int(args.total_timesteps),
        "TOTAL_TIMESTEPS_DECAY": int(args.decay_timesteps
                                     if args.decay_timesteps is not None
                                     else args.total_timesteps),
    }
    if args.env:
        overrides["ENV_NAME"] = args.env
    if args.test_interval is not None:
        overrides["TEST_INTERVAL"] = args.test_interval
    if args.no_test:
        overrides["TEST_DURING_TRAINING"] = False
    base["alg"].update(overrides)  # == hydra's alg.X=... overrides
    base.update({"NUM_SEEDS": args.num_seeds, "SEED": args.seed,
                 "WANDB_MODE": "disabled", "SAVE_PATH": None})
    config = {**base, **base["alg"]}  # exactly what single_run() does

    # ---- build / compile / run, as single_run() does ---------------------------------
    rng = jax.random.PRNGKey(config["SEED"])
    rngs = jax.random.split(rng, config["NUM_SEEDS"])
    train_fn = pjq.make_train(config)  # mutates config (NUM_UPDATES, TEST_NUM_STEPS...)
    train_vjit = jax.jit(jax.vmap(train_fn))

    t0 = time.perf_counter()
    compiled = train_vjit.lower(rngs).compile()
    t1 = time.perf_counter()
    outs = jax.block_until_ready(compiled(rngs))
    t2 = time.perf_counter()

    # ---- both estimators on the final greedy policy (timed apart) ---------------------
    t3 = time.perf_counter()
    first, window, n_first, n_window = jax.device_get(final_estimators(
        pjq, args.script, config, outs["runner_state"][0], jax.random.PRNGKey(config["SEED"] + 10_000)))
    t4 = time.perf_counter()

    # ---- results --------------------------------------------------------------------
    m = jax.tree_util.tree_map(np.asarray, outs["metrics"])
    S = config["NUM_SEEDS"]
    n_upd = int(config["NUM_UPDATES"])
    test_interval = int(config["NUM_UPDATES"] * config["TEST_INTERVAL"])
    steps_per_seed = n_upd * config["NUM_STEPS"] * config["NUM_ENVS"]
    total_steps = steps_per_seed * S
    test_key = "test/returned_episode_returns"
    have_test = config.get("TEST_DURING_TRAINING", False) and test_key in m

    # test points: the initial test (before training, carried until the first
    # refresh) and every update u with u % test_interval == 0 (value logged at u).
    upd = m["update_steps"][0]  # identical across seeds
    env_step = m["env_step"][0]
    if have_test:
        # evaluate purejaxql's own condition with jax semantics (note: in jax,
        # x % 0 == 0, so test_interval == 0 means "test after every update")
        is_test = np.asarray(jnp.asarray(upd) % test_interval == 0)
        test_idx = [i for i in range(n_upd) if bool(is_test[i])]
    else:
        test_idx = []
    n_tests = (1 + len(test_idx)) if have_test else 0

    # final training-episode return from the final env state (masked by
    # returned_episode_valid, i.e. only envs that finished >= 1 episode)
    expl_env_state = outs["runner_state"][1][1]
    fin_ret = np.asarray(expl_env_state.returned_episode_returns)  # (S, NUM_ENVS)
    fin_valid = np.asarray(expl_env_state.returned_episode_valid)

    per_seed = []
    for s in range(S):
        d = {"seed_index": s}
        if have_test:
            tr = m[test_key][s]
            pts = []
            # the initial (untrained) test is visible in the metrics only if update 1
            # is not itself a test point (otherwise it is overwritten before logging)
            if not test_idx or test_idx[0] != 0:
                pts.append({"update": 0, "env_step": 0, "return": f2j(tr[0])})
            pts += [{"update": int(upd[i]), "env_step": int(env_step[i]), "return": f2j(tr[i])}
                    for i in test_idx]
            d["test_returns"] = pts
            d["final_test_return"] = f2j(tr[-1])  # carried value == last test point
        d["train_returned_episode_returns_last_update"] = f2j(m["returned_episode_returns"][s][-1])
        v = fin_valid[s]
        d["train_final_episode_return_mean_valid_envs"] = f2j(fin_ret[s][v].mean()) if v.any() else None
        d["train_returned_episode_returns_curve"] = [f2j(x) for x in m["returned_episode_returns"][s]]
        d["td_loss_last"] = f2j(m["td_loss"][s][-1])
        per_seed.append(d)

    jsonable_cfg = {k: v for k, v in config.items() if k != "alg"}
    result = {
        "impl": "purejaxql",
        "script": f"purejaxql/{'pqn_minatar' if args.script == 'minatar' else 'pqn_gymnax'}.py",
        "commit": commit_hash(),
        **source,
        "alg_config_file": f"purejaxql/config/alg/{alg_name}.yaml",
        "gymnax_compat": "CompatLogWrapper (5-tuple step, done=terminated|truncated, 0.0.x info keys)",
        "versions": {
            "jax": jax.__version__,
            "jaxlib": __import__("jaxlib").__version__,
            "gymnax": __import__("importlib.metadata").metadata.version("gymnax"),
            "flax": __import__("flax").__version__,
            "optax": __import__("optax").__version__,
        },
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "config": jsonable_cfg,
        "num_seeds": S,
        "seed": args.seed,
        "num_updates": n_upd,
        "test_interval_updates": test_interval,
        "num_test_evaluations": n_tests,
        "test_env_steps_per_seed": n_tests * config["TEST_NUM_ENVS"] * config["TEST_NUM_STEPS"],
        "wall_import_s": t_imp1 - t_imp0,
        "wall_compile_s": t1 - t0,
        "wall_run_s": t2 - t1,
        "env_steps_per_seed": steps_per_seed,
        "env_steps_total": total_steps,
        "steps_per_s": total_steps / (t2 - t1),
        "steps_per_s_incl_test": (total_steps + S * n_tests * config["TEST_NUM_ENVS"]
                                  * config["TEST_NUM_STEPS"]) / (t2 - t1),
        "test_metric_key": test_key if have_test else None,
        "train_metric_key": "returned_episode_returns",
        "final_test_return_per_seed": [d.get("final_test_return") for d in per_seed],
        "final_test_return_mean": f2j(np.nanmean([np.nan if d.get("final_test_return") is None
                                                  else d["final_test_return"] for d in per_seed])),
        "first_episode_return_per_seed": [f2j(x) for x in first],
        "window_mean_return_per_seed": [f2j(x) for x in window],
        "final_estimators_episodes_per_seed": {"first": [int(x) for x in n_first],
                                               "window": [int(x) for x in n_window]},
        "final_estimators_note": ("one greedy test of the final policy after training: "
                                  "first_episode_return = mean over TEST_NUM_ENVS envs of each "
                                  "env's first ended episode (scanrl's estimator); "
                                  "window_mean_return = mean over every episode ended within "
                                  "TEST_NUM_STEPS steps (purejaxql's get_test_metrics)"),
        "wall_final_estimators_s": t4 - t3,
        "per_seed": per_seed,
    }
    if have_test and test_interval == 0:
        result["warning"] = ("int(NUM_UPDATES*TEST_INTERVAL) == 0; in jax n % 0 == 0, so "
                             "purejaxql tests after every update (expensive)")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: result[k] for k in (
        "commit", "num_updates", "wall_import_s", "wall_compile_s", "wall_run_s",
        "env_steps_total", "steps_per_s", "steps_per_s_incl_test", "final_test_return_per_seed",
        "first_episode_return_per_seed", "window_mean_return_per_seed")}, indent=1))


if __name__ == "__main__":
    main()
