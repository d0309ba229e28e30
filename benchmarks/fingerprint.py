"""The results of short runs of every algorithm, saved so that two trees can be compared
bit for bit: did a refactor change what the algorithms compute? 3-update runs of 2 seeds of PPO
(CartPole; Pendulum with target_kl 0.02), IMPALA, GRPO and recurrent PPO (CartPole), PPO,
IMPALA and GRPO's conv torso (Breakout-MinAtar), each on-policy file's tanh-squashed normal
(Pendulum), PPO's recomputed and per-unroll advantages and fresh observation statistics, SAC and TD3 (Pendulum, each also with
a categorical critic, 3-step returns and AdamW) and PQN (CartPole, Breakout-MinAtar), each
algorithm's preset on a second discrete env where it has one (GRPO's 16-step Catch-bsuite window,
PQN and IMPALA on Catch-bsuite, SAC and TD3 on MountainCarContinuous), and PPO, GRPO and TD3 on
brax/inverted_pendulum (Brax's cached starts, each file's own defaults), evaluating every 2
updates; every final policy parameter and every metric.

A case's program is whatever `compose` gives for its env and arguments, presets and recipes
included, so a change to a preset (Catch's window) or to a suite's adapter shows up as well as a
change to an algorithm's update.

    python benchmarks/fingerprint.py before.npz          # on one tree
    python benchmarks/fingerprint.py after.npz           # on the other
    python benchmarks/fingerprint.py --compare before.npz after.npz
    python benchmarks/fingerprint.py before.npz --only td3,sac   # only these algorithms' cases
    python benchmarks/fingerprint.py --hlo [--only ...] > before.txt  # programs, not results

`--hlo` lowers each case's whole program (no compiling, no running: about a minute in all) and
prints a SHA-256 prefix of its StableHLO text without source locations; equal lines on two
trees mean the same programs. Where a line differs, the results still decide.
"""

import sys

import numpy as np

CASES = (("ppo", "CartPole-v1", {}), ("ppo", "Pendulum-v1", {"target_kl": 0.02}), ("impala", "CartPole-v1", {}),
         ("grpo", "CartPole-v1", {}), ("ppo_rnn", "CartPole-v1", {}),
         # the conv torso (common/nets.py cnn_apply), with each algorithm's MinAtar preset
         ("ppo", "Breakout-MinAtar", {}), ("impala", "Breakout-MinAtar", {}), ("grpo", "Breakout-MinAtar", {}),
         # the tanh-squashed normal (common/nets.py Actions) in each file, and PPO's other two
         # forms of its advantages (ppo.py `epoch_inputs`)
         *((name, "Pendulum-v1", {"action_dist": "tanh_normal"}) for name in ("ppo", "impala", "grpo", "ppo_rnn")),
         ("ppo", "CartPole-v1", {"recompute_advantages": True}), ("ppo", "Pendulum-v1", {"unroll_length": 8}),
         # the epochs reading the rollout's new observation statistics (ppo.py `loss_inputs`)
         ("ppo", "Pendulum-v1", {"fresh_obs_stats": True}),
         # SAC with normalised observations, learning from the first steps; PQN's MLP and conv torso
         ("sac", "Pendulum-v1", {"learning_starts": 0, "normalize_obs": True}), ("pqn", "CartPole-v1", {}),
         ("pqn", "Breakout-MinAtar", {}), ("ppo_rnn", "Breakout-MinAtar", {}),
         # SAC's and TD3's fast knobs (common/offpolicy.py): a categorical critic, 3-step returns,
         # AdamW; TD3 at its defaults
         ("sac", "Pendulum-v1", {"learning_starts": 0, "n_step": 3, "num_atoms": 11, "weight_decay": 0.1}),
         ("td3", "Pendulum-v1", {"learning_starts": 0, "normalize_obs": True}),
         ("td3", "Pendulum-v1", {"learning_starts": 0, "n_step": 3, "num_atoms": 11, "weight_decay": 0.1}),
         # a second discrete env with its preset (GRPO's Catch window; a copy run of GRPO Catch once
         # came from a tree in no commit and no case covered it), a second continuous env for the
         # replay learners
         ("grpo", "Catch-bsuite", {}), ("impala", "Catch-bsuite", {}), ("pqn", "Catch-bsuite", {}),
         ("sac", "MountainCarContinuous-v0", {"learning_starts": 0}),
         ("td3", "MountainCarContinuous-v0", {"learning_starts": 0}),
         # a Brax env: cached starts (common/suites/brax.py) with each file's own update
         *((name, "brax/inverted_pendulum", {"recipe": "none", "learning_starts": 0} if name == "td3"
            else {"recipe": "none"}) for name in ("ppo", "grpo", "td3")))


def programs(only: set[str] | None = None):
    """(case name, its built program, the seeds' keys) for each case."""
    from scanrl.common.harness import devices, loop
    from scanrl.common.harness.runconfig import compose

    devices.use_cpu_cores()
    from scanrl import algos

    for name, env, extra in CASES:
        if only is not None and name not in only:
            continue
        module = algos.get(name)
        common = dict(num_seeds=2, eval_every=2, eval_episodes=2, log_every=0, **extra)
        per_update = compose(module, env, **common)
        per_update = per_update.total_timesteps // per_update.num_updates
        config = compose(module, env, total_timesteps=3 * per_update, **common)
        case = f"{name}_{env}" + "".join(f"_{k}={v}" for k, v in extra.items())
        yield case, loop.build(module.make_algorithm, config), devices.seed_keys(0, 2)


def hlo(only: set[str] | None = None) -> None:
    import hashlib
    import re

    for case, program, keys in programs(only):
        text = re.sub(r"loc\(.*?\)", "", program.train.lower(keys).as_text())
        print(f"{case}: {hashlib.sha256(text.encode()).hexdigest()[:16]}", flush=True)


def fingerprint(path: str, only: set[str] | None = None) -> None:
    import jax

    out = {}
    for case, program, keys in programs(only):
        result = jax.device_get(program.train(keys))  # evaluated
        for i, leaf in enumerate(jax.tree.leaves(result["policy"])):
            out[f"{case}/param{i}"] = np.asarray(leaf)
        for key, value in result["metrics"].items():
            out[f"{case}/{key}"] = np.asarray(value)
    np.savez(path, **out)
    print(f"{len(out)} arrays in {path}")


def compare(a_path: str, b_path: str) -> None:
    a, b = np.load(a_path), np.load(b_path)
    if set(a) != set(b):
        raise SystemExit(f"different arrays: {sorted(set(a) ^ set(b))}")
    differ = [k for k in a if not np.array_equal(a[k], b[k], equal_nan=True)]
    print(f"{len(a)} arrays, {len(differ)} differ" + (f": {', '.join(differ)}" if differ else " (bit for bit equal)"))


if __name__ == "__main__":
    # `--only a,b` keeps the cases whose algorithm is named
    only = set(sys.argv[sys.argv.index("--only") + 1].split(",")) if "--only" in sys.argv else None
    if sys.argv[1] == "--compare":
        compare(*sys.argv[2:4])
    elif sys.argv[1] == "--hlo":
        hlo(only)
    else:
        fingerprint(sys.argv[1], only)
