"""GPU benchmarks of scanrl's PPO (one GPU): against Brax's own PPO on `brax/ant` at Brax's
published sizes, PureJaxRL's CartPole config with thousands of seeds, and the MinAtar conv
torso against the MLP torso. Each run is a fresh process (no persistent compile cache), so
every wall time includes compiling. Results are printed and appended as JSON lines to
--results (default gpu_results.jsonl in the current folder).

Subcommands (run from anywhere; the project installed with `pip install -e ".[brax]"`).
`medians` summarises a results file's ant rows.

    # 1. scanrl PPO vs brax.training.agents.ppo on ant, Brax's training-notebook config:
    #    num_envs 4096, batch_size 2048, num_minibatches 32, unroll_length 5, 4 updates per
    #    batch, lr 3e-4, entropy 1e-2, discount 0.97, reward scaling 10, normalised
    #    observations, episode_length 1000; Brax's default networks for both (policy MLP
    #    32x32x32x32, value MLP 256x5, swish); backend `generalized` for both (scanrl's Brax
    #    adapter's default). scanrl: 4096 envs x 80 steps = 327,680 env steps per update
    #    (= 2048 x 32 x 5, Brax's per training step), 32 minibatches, 4 epochs, no lr
    #    annealing, clip 0.3, no grad clipping, no value clipping, --normalize-reward (scanrl
    #    has no constant reward scale). --timesteps is rounded down to an even number of
    #    updates, split into 2 epochs for Brax (num_evals 3: evaluations before, between and
    #    after) and 2 chunks for scanrl (--eval-every/--log-every half the updates), each
    #    evaluation 128 episodes, deterministic.
    python benchmarks/gpu_bench.py ant --trainer both --timesteps 50000000 --repeats 2

    # 2. PureJaxRL's CartPole PPO (4 envs, 128 steps, 4 minibatches, 4 epochs, lr 2.5e-4
    #    annealed; scanrl's CartPole defaults) with N seeds vmapped in one program
    python benchmarks/gpu_bench.py cartpole --seeds 2048 --timesteps 500000
    python benchmarks/gpu_bench.py cartpole --seeds 4096 8192 16384 32768 65536 --timesteps 50000

    # 3. MinAtar: PPO's minatar preset with the conv torso and with the MLP torso
    python benchmarks/gpu_bench.py minatar --env Breakout-MinAtar SpaceInvaders-MinAtar --torso cnn mlp

    python benchmarks/gpu_bench.py medians

Each result line holds the exact command, wall seconds (compile included: scanrl's compile + run
from summary.json, Brax's `train` call; process_wall: the whole process, imports included),
compile seconds, env steps/s (compile excluded where known), and the final
return (ant: last deterministic evaluation, 128 episodes; CartPole/MinAtar: scanrl's
final_return_mean, training episodes over the last 10% of updates).

brax 0.14.2's trainer calls `jax.device_put_replicated`, which jax >= 0.10 removed: the Brax
process defines it for its one device (a leading axis of 1) before training, as
benchmarks/brax_trainers.py does. Under jax 0.11.2 on an H100, Brax's second epoch and second
evaluation take about 10 s longer than their work (inferred from timings, as a second compile:
epoch 2 took 12.1 s for 2 updates and 22.1 s for 15; the evaluations 14.0 s and then 4.1 s), so
Brax's epoch-2 `training/sps` includes that; the steady per-update time is the difference of two
budgets' epoch-2 times. (An identity-`jax.pmap` version of that function did not change it on CPU.)

On a GPU, scanrl's progress.jsonl per-chunk times are not per chunk (the first fetch waited for
both chunks here), so the scanrl figure compile excluded is summary.json's whole-run
env_steps_per_second (training + its evaluations), not a chunk's.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Brax: batch_size * num_minibatches * unroll_length = 2048 * 32 * 5 env steps per training step, which
# is num_envs (4096) x 80 steps; --num-envs N scales both trainers (Brax batch_size N / 2) for smoke tests.

BRAX_PPO = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
t_start = time.perf_counter()
import jax, jax.numpy as jnp
jax.device_put_replicated = lambda x, devices: jax.device_put(
    jax.tree.map(lambda a: jnp.stack([a] * len(devices)), x), devices[0])
from brax import envs
from brax.training.agents.ppo import train as ppo
name, timesteps, backend, num_envs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
env = envs.get_environment(name, backend=backend)
marks = []
def progress(step, metrics):
    jax.block_until_ready(metrics)
    marks.append({"t": time.perf_counter() - t0, "step": int(step),
                  **{k: float(v) for k, v in metrics.items()
                     if k in ("eval/episode_reward", "training/sps", "training/walltime", "eval/walltime")}})
    print("PROGRESS" + json.dumps(marks[-1]), flush=True)
t0 = time.perf_counter()
ppo.train(environment=env, num_timesteps=timesteps, num_evals=3, reward_scaling=10, episode_length=1000,
          normalize_observations=True, action_repeat=1, unroll_length=5, num_minibatches=32,
          num_updates_per_batch=4, discounting=0.97, learning_rate=3e-4, entropy_cost=1e-2, num_envs=num_envs,
          batch_size=num_envs // 2, num_eval_envs=128, deterministic_eval=True, progress_fn=progress, seed=0)
wall = time.perf_counter() - t0
steps = marks[-1]["step"]
steady = (marks[2]["step"] - marks[1]["step"]) / (marks[2]["t"] - marks[1]["t"])
print("RESULT" + json.dumps({"wall": wall, "steps": steps, "steps_per_s": steps / wall, "steady_steps_per_s": steady,
                             "training_sps_epoch2": marks[2].get("training/sps"),
                             "epoch_training_s": [marks[1]["training/walltime"],
                                                  marks[2]["training/walltime"] - marks[1]["training/walltime"]],
                             "compile_and_first_epoch_s": marks[1]["t"] - marks[0]["t"],
                             "final_eval": marks[-1]["eval/episode_reward"], "marks": marks,
                             "process_wall_inner": time.perf_counter() - t_start, "devices": [str(d) for d in jax.devices()]}))
"""


def record(results: Path, row: dict) -> None:
    print(json.dumps(row), flush=True)
    with results.open("a") as f:
        f.write(json.dumps(row) + "\n")


def scanrl_run(flags: list[str], timeout: float) -> dict:
    """algos/ppo.py with these flags in a fresh process; summary.json + progress.jsonl."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "algos/ppo.py", *flags, "--no-compile-cache", "--out-dir", out]
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
        process_wall = time.perf_counter() - t
        if proc.returncode:
            return {"command": shlex.join(["python", *cmd[1:-2]]), "error": proc.returncode,
                    "stderr_tail": (proc.stdout + proc.stderr)[-3000:], "process_wall": process_wall}
        (run_dir,) = Path(out).iterdir()
        s = json.loads((run_dir / "summary.json").read_text())
        progress = [json.loads(l) for l in (run_dir / "progress.jsonl").read_text().splitlines() if l.strip()]
    if s.get("num_seeds", 1) > 16:
        s.pop("final_return_per_seed", None)
    return {"command": shlex.join(["python", *cmd[1:-2]]), "summary": s,
            "progress": [{k: p[k] for k in ("update", "seconds", "env_steps_per_second")} for p in progress],
            "wall": s["compile_seconds"] + s["run_seconds"], "process_wall": process_wall}


def ant(args) -> None:
    per_update = args.num_envs * 80
    updates = max(2, args.timesteps // per_update // 2 * 2)  # two equal halves
    steps = updates * per_update
    scanrl_flags = ["--env", f"brax/{args.env}", "--total-timesteps", str(steps), "--num-envs", str(args.num_envs),
                    "--num-steps", "80", "--num-minibatches", "32", "--num-epochs", "4", "--learning-rate", "3e-4",
                    "--no-anneal-lr", "--ent-coef", "0.01", "--gamma", "0.97", "--gae-lambda", "0.95",
                    "--clip-eps", "0.3", "--max-grad-norm", "0", "--no-clip-value-loss", "--vf-coef", "0.5",
                    "--normalize-obs", "--normalize-reward", "--actor-hidden", "32", "32", "32", "32",
                    "--critic-hidden", "256", "256", "256", "256", "256", "--activation", "swish",
                    "--eval-every", str(updates // 2), "--eval-episodes", "128", "--log-every", str(updates // 2),
                    "--checkpoint-every", "0"]
    order = {"both": ["scanrl", "brax"], "scanrl": ["scanrl"], "brax": ["brax"]}[args.trainer]
    for r in range(args.repeats):
        for name in (order if r % 2 == 0 else order[::-1]):
            if name == "scanrl":
                try:
                    res = scanrl_run(scanrl_flags, args.timeout)
                except subprocess.TimeoutExpired:
                    res = {"error": "timeout", "command": shlex.join(["python", "algos/ppo.py", *scanrl_flags])}
                if "summary" in res:
                    s = res["summary"]
                    res.update(steps=s["total_timesteps"], steps_per_s=s["total_timesteps"] / res["wall"],
                               run_steps_per_s=s["env_steps_per_second"],
                               compile_seconds=s["compile_seconds"], final_eval=s["eval_return_deterministic_mean"])
            else:
                argv = [args.env, str(steps), args.backend, str(args.num_envs)]
                t = time.perf_counter()
                try:
                    proc = subprocess.run([sys.executable, "-c", BRAX_PPO, *argv], capture_output=True, text=True,
                                          timeout=args.timeout, env={**os.environ, "JAX_ENABLE_COMPILATION_CACHE": "false"})
                    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT")), None)
                    res = json.loads(line[6:]) if line else {"error": proc.returncode,
                                                             "stderr_tail": (proc.stdout + proc.stderr)[-3000:]}
                except subprocess.TimeoutExpired as e:
                    res = {"error": "timeout", "stdout_tail": (e.stdout or b"")[-3000:].decode(errors="replace")
                           if isinstance(e.stdout, bytes) else (e.stdout or "")[-3000:]}
                res.update(command=shlex.join(["python", "-c", "<BRAX_PPO of benchmarks/gpu_bench.py>", *argv]),
                           process_wall=time.perf_counter() - t)
            record(args.results, {"bench": "ant", "trainer": name, "repeat": r, "backend": args.backend, **res})


def scanrl_summary(flags: list[str], timeout: float) -> dict:
    """One scanrl run and the figures of its summary.json ({"error": "timeout"} past `timeout`)."""
    try:
        res = scanrl_run(flags, timeout)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    if "summary" in res:
        s = res["summary"]
        res.update(compile_seconds=s["compile_seconds"], run_seconds=s["run_seconds"],
                   steps_per_s=s["env_steps_per_second"], final_return_mean=s["final_return_mean"])
    return res


def cartpole(args) -> None:
    for n in args.seeds:
        flags = ["--env", "CartPole-v1", "--num-seeds", str(n), "--total-timesteps", str(args.timesteps),
                 "--eval-every", "0", "--log-every", "0", "--checkpoint-every", "0"]
        res = scanrl_summary(flags, args.timeout)
        record(args.results, {"bench": "cartpole", "seeds": n, "timesteps": args.timesteps, **res})


def minatar(args) -> None:
    for env in args.env:
        for torso in args.torso:
            flags = ["--env", env, "--torso", torso, "--num-seeds", str(args.seeds), "--eval-every", "0",
                     "--log-every", "0", "--checkpoint-every", "0"]
            if args.timesteps:
                flags += ["--total-timesteps", str(args.timesteps)]
            res = scanrl_summary(flags, args.timeout)
            record(args.results, {"bench": "minatar", "env": env, "torso": torso, "seeds": args.seeds, **res})


def medians(args) -> None:
    """Medians of a results file's ant rows per budget and trainer, and scanrl / Brax."""
    rows = [json.loads(l) for l in args.results.read_text().splitlines() if l.strip()]
    rows = [r for r in rows if r.get("bench") == "ant" and "error" not in r]
    for steps in sorted({r["steps"] for r in rows}):
        med = {}
        for name in ("scanrl", "brax"):
            ok = [r for r in rows if r["trainer"] == name and r["steps"] == steps]
            if ok:
                for r in ok:  # rows written before process_wall was the outer time for Brax too
                    r["process_wall"] = r.get("process_wall_outer", r["process_wall"])
                keys = ("wall", "process_wall", "steps_per_s", "final_eval") + (
                    ("run_steps_per_s", "compile_seconds") if name == "scanrl" else ("training_sps_epoch2",))
                med[name] = {k: statistics.median(r[k] for r in ok) for k in keys}
                print(f"{steps} steps, {name}, {len(ok)} run(s):", json.dumps({k: round(v, 1) for k, v in med[name].items()}))
        if len(med) == 2:
            print("  scanrl / brax:", json.dumps({k: round(med["scanrl"][k] / med["brax"][k], 3)
                                                 for k in ("wall", "process_wall", "steps_per_s", "final_eval")}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("gpu_results.jsonl"))
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    sub = parser.add_subparsers(dest="bench", required=True)
    p = sub.add_parser("ant")
    p.add_argument("--env", default="ant")
    p.add_argument("--trainer", choices=["both", "scanrl", "brax"], default="both")
    p.add_argument("--timesteps", type=int, default=50_000_000)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--num-envs", type=int, default=4096, help="4096: Brax's published size (smaller: smoke tests)")
    p.add_argument("--backend", default="generalized", help="Brax's backend (scanrl's adapter uses generalized)")
    p = sub.add_parser("cartpole")
    p.add_argument("--seeds", type=int, nargs="+", default=[2048])
    p.add_argument("--timesteps", type=int, default=500_000)
    p = sub.add_parser("minatar")
    p.add_argument("--env", nargs="+", default=["Breakout-MinAtar", "SpaceInvaders-MinAtar"])
    p.add_argument("--torso", nargs="+", default=["cnn", "mlp"])
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--timesteps", type=int, default=0, help="0: the preset's (2e6)")
    sub.add_parser("medians")
    args = parser.parse_args()
    {"ant": ant, "cartpole": cartpole, "minatar": minatar, "medians": medians}[args.bench](args)


if __name__ == "__main__":
    main()
