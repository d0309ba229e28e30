"""scanrl's PPO or SAC against Brax's own trainer (`brax.training.agents.ppo` / `.sac`) on
one Brax environment: the same budget, the same network sizes (MLPs 64x64), one seed, each
run in a fresh process, the two alternating, medians of the repeats.

PPO: scanrl runs its `continuous` preset. Brax runs the hyperparameters of its training
notebook's `inverted_pendulum` config (learning rate 3e-4, entropy 1e-2, discount 0.97,
unroll 5, 32 minibatches, 4 updates per batch, reward scaling 10, normalised observations),
with its 2048 environments and batch 1024 scaled to 16 and 16 for a 2-core CPU.

SAC: both run scanrl's SAC defaults, which Brax's trainer takes as they are: one
environment, batch 256, learning rate 1e-3, discount 0.99, tau 0.005, 1,000 steps before
learning, one gradient step per env step, a 1e6 replay buffer, ReLU MLPs 64x64, no
observation normalisation, no reward scaling.

brax 0.14.2's trainer calls `jax.device_put_replicated`, which jax 0.10 removed: the Brax
process defines it for its one device (a leading axis of 1) before training.

Reported per run: wall seconds of the training call, compile included (scanrl: compile +
run from summary.json; Brax: the `train` call), env steps/s, and the final deterministic
evaluation return (scanrl: the last `--eval-every`; Brax: the last of `num_evals`).

    python benchmarks/brax_trainers.py --env inverted_pendulum --timesteps 200000 --repeats 3
    python benchmarks/brax_trainers.py --algo sac --env inverted_pendulum --timesteps 20000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BRAX = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import jax, jax.numpy as jnp
# brax 0.14.2's trainer calls jax.device_put_replicated, which jax 0.10 removed; on one
# device it is a leading axis of 1 (this process has one CPU device).
jax.device_put_replicated = lambda x, devices: jax.device_put(
    jax.tree.map(lambda a: jnp.stack([a] * len(devices)), x), devices[0])
from brax import envs
algo, name, timesteps = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = envs.get_environment(name, backend="generalized")
evals = []
def progress(step, metrics):
    if "eval/episode_reward" in metrics:
        evals.append((step, float(metrics["eval/episode_reward"])))
t = time.perf_counter()
if algo == "ppo":
    from brax.training.agents.ppo import networks, train as ppo
    factory = lambda *a, **k: networks.make_ppo_networks(*a, **k, policy_hidden_layer_sizes=(64, 64),
                                                          value_hidden_layer_sizes=(64, 64))
    ppo.train(environment=env, num_timesteps=timesteps, episode_length=1000, num_envs=16, batch_size=16,
              num_minibatches=32, unroll_length=5, num_updates_per_batch=4, learning_rate=3e-4, entropy_cost=1e-2,
              discounting=0.97, reward_scaling=10, normalize_observations=True, num_evals=5, num_eval_envs=16,
              deterministic_eval=True, network_factory=factory, progress_fn=progress, seed=0)
else:
    from brax.training.agents.sac import networks, train as sac
    factory = lambda *a, **k: networks.make_sac_networks(*a, **k, hidden_layer_sizes=(64, 64))
    sac.train(environment=env, num_timesteps=timesteps, episode_length=1000, num_envs=1, batch_size=256,
              learning_rate=1e-3, discounting=0.99, tau=0.005, min_replay_size=1000, max_replay_size=1_000_000,
              grad_updates_per_step=1, reward_scaling=1, normalize_observations=False, num_evals=5,
              num_eval_envs=16, deterministic_eval=True, network_factory=factory, progress_fn=progress, seed=0)
wall = time.perf_counter() - t
print("RESULT" + json.dumps({"wall": wall, "steps_per_s": timesteps / wall, "final_eval": evals[-1][1]}))
"""


def run_scanrl(algo: str, env: str, timesteps: int) -> dict:
    per_update = 4096 if algo == "ppo" else 200  # env steps of one PPO update / one SAC iteration
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run(
            [sys.executable, f"algos/{algo}.py", "--env", f"brax/{env}", "--total-timesteps", str(timesteps),
             "--eval-every", str(max(1, timesteps // per_update // 5)), "--eval-episodes", "16", "--log-every", "0",
             "--no-compile-cache", "--out-dir", out], cwd=REPO, capture_output=True, text=True, check=True)
        (run_dir,) = Path(out).iterdir()
        s = json.loads((run_dir / "summary.json").read_text())
    wall = s["compile_seconds"] + s["run_seconds"]
    return {"wall": wall, "steps_per_s": s["total_timesteps"] / wall, "final_eval": s["eval_return_mean"]}


def run_brax(algo: str, env: str, timesteps: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", BRAX, algo, env, str(timesteps)], capture_output=True, text=True,
                          check=True, env={**os.environ, "JAX_ENABLE_COMPILATION_CACHE": "false"})
    return json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))[6:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", choices=["ppo", "sac"], default="ppo")
    parser.add_argument("--env", default="inverted_pendulum")
    parser.add_argument("--timesteps", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = {"scanrl": [], "brax": []}
    for r in range(args.repeats):
        for name in (["scanrl", "brax"] if r % 2 == 0 else ["brax", "scanrl"]):
            result = (run_scanrl if name == "scanrl" else run_brax)(args.algo, args.env, args.timesteps)
            rows[name].append(result)
            print(name, r, json.dumps(result), flush=True)
    med = {n: {k: statistics.median(x[k] for x in v) for k in v[0]} for n, v in rows.items()}
    print(f"\n{args.algo} on {args.env}, {args.timesteps} steps, medians of {args.repeats}:")
    for n, m in med.items():
        print(f"  {n:7s} wall {m['wall']:7.1f} s  env steps/s {m['steps_per_s']:9,.0f}  final eval {m['final_eval']:8.1f}")
    print(f"  scanrl / brax: wall {med['scanrl']['wall'] / med['brax']['wall']:.2f}x, "
          f"steps/s {med['scanrl']['steps_per_s'] / med['brax']['steps_per_s']:.2f}x")


if __name__ == "__main__":
    main()
