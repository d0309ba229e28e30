"""Throughput on CartPole-v1: PPO with PureJaxRL's default configuration (--algo ppo), or
another algorithm with its own CartPole defaults (--algo impala, --algo grpo); SAC
(--algo sac) on Pendulum-v1 with its defaults.

PPO: 4 envs x 128 steps, 4 epochs x 4 minibatches, 64x64 tanh MLPs, lr 2.5e-4 annealed,
gamma 0.99, lambda 0.95, clip 0.2, 5e5 env steps per seed. IMPALA: impala.default_config
(64 envs x 64 steps, 2 epochs x 4 minibatches, 1e6 steps per seed). GRPO:
grpo.default_config (64 envs x 512 steps, 4 epochs x 4 minibatches, 3e6 steps per seed).
SAC: sac.default_config on Pendulum-v1 (1 env, 64x64 networks, batch 256, one gradient step
per env step, 2e4 env steps per seed); rows also record the process's peak memory.
No evaluation, no logging. For 1, 8 and 64 seeds, on the default device layout (seeds over one CPU device
per core) and forced to one device, plus (PPO) 1 seed split over 2 devices with
--data-parallel 2; each measurement in a fresh process:
  - compile seconds cold (empty persistent cache) and warm (second process, same cache),
    both including tracing and lowering;
  - run seconds and env steps per second (all seeds, compilation excluded).

    python benchmarks/throughput.py              # prints the table, writes benchmarks/RESULTS.md
    python benchmarks/throughput.py --seeds 1 8  # re-measure these rows, keep the others
    python benchmarks/throughput.py --algo impala --seeds 1 8
    python benchmarks/throughput.py --algo grpo --seeds 1 8
    python benchmarks/throughput.py --algo sac --seeds 1 8
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from sidebyside import scanrl_commit  # noqa: E402  (each row names the scanrl commit it measured)
MARK_BEGIN, MARK_END = "<!-- throughput:begin -->", "<!-- throughput:end -->"


def worker(algo_name: str, num_seeds: int, num_devices: int, data_parallel: int, cache_dir: str) -> dict:
    """Runs in its own process: compile and time one training run."""
    from scanrl.common.harness import devices, loop

    devices.use_cpu_cores()  # before JAX computes: one CPU device per core

    import importlib

    import jax

    from scanrl.common.harness.runconfig import compose

    algo = importlib.import_module(f"scanrl.algos.{algo_name}")
    devices.enable_compile_cache(True, cache_dir)
    settings = dict(num_seeds=num_seeds, eval_every=0, log_every=0, num_devices=num_devices,
                    data_parallel=data_parallel)
    if algo_name == "ppo":  # PureJaxRL's configuration is PPO's discrete default
        config = compose(algo, "CartPole-v1", total_timesteps=500_000, **settings)
    elif algo_name == "sac":  # continuous actions only: its own Pendulum defaults
        config = compose(algo, "Pendulum-v1", **settings)
    else:  # the algorithm's own CartPole defaults
        config = compose(algo, "CartPole-v1", **settings)
    keys = devices.seed_keys(0, num_seeds)
    t0 = time.perf_counter()
    program = loop.build(algo.make_algorithm, config)
    train = program.train
    compiled = train.lower(keys).compile()
    compile_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(keys))
    run_seconds = time.perf_counter() - t0
    steps_per_update = config.steps_per_iteration if algo_name == "sac" else config.batch_size
    steps = num_seeds * config.num_updates * steps_per_update
    layout = program.layout
    return {
        "algo": algo_name,
        "env": config.env,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "steps_per_seed": config.num_updates * steps_per_update,
        "seeds": num_seeds,
        "devices": layout.num_devices,
        "data_parallel": layout.data_parallel,
        "compile_seconds": compile_seconds,
        "run_seconds": run_seconds,
        "env_steps_per_second": steps / run_seconds,
    }


def measure(algo: str, num_seeds: int, num_devices: int, data_parallel: int) -> dict:
    with tempfile.TemporaryDirectory() as cache_dir:
        results = []
        for _ in range(2):  # cold, then from the persistent cache
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", algo, str(num_seeds), str(num_devices), str(data_parallel), cache_dir],
                capture_output=True, text=True, cwd=HERE.parent,
            )
            if proc.returncode:
                raise RuntimeError(proc.stderr[-3000:])
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    cold, warm = results
    return {**cold, "compile_cached_seconds": warm["compile_seconds"], "run_seconds_2": warm["run_seconds"],
            "env_steps_per_second_2": warm["env_steps_per_second"]}


def table(rows: list[dict]) -> str:
    lines = [
        "| algo | env | seeds | layout | devices used | steps/seed | compile cold (s) | compile cached (s) | run (s) | env steps/s | env steps/s per seed | peak memory (MiB) |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        best = max(r["env_steps_per_second"], r["env_steps_per_second_2"])
        run = min(r["run_seconds"], r["run_seconds_2"])
        memory = f"{r['max_rss_mb']:,.0f}" if "max_rss_mb" in r else "-"
        lines.append(
            f"| {r['algo']} | {r.get('env', 'CartPole-v1')} | {r['seeds']} | {r['layout']} | {r['devices']} | "
            f"{r['steps_per_seed']:,} | {r['compile_seconds']:.2f} | {r['compile_cached_seconds']:.2f} | {run:.2f} | "
            f"{best:,.0f} | {best / r['seeds']:,.0f} | {memory} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    parser.add_argument("--table-only", action="store_true", help="measure nothing; rewrite the table from the stored rows")
    parser.add_argument("--algo", default="ppo", choices=["ppo", "impala", "grpo", "sac"])
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        algo, *numbers, cache_dir = args.worker
        print(json.dumps(worker(algo, *map(int, numbers), cache_dir)))
        return
    # Rows live in throughput_rows.json, so re-measuring some seeds keeps the others.
    store = HERE / "throughput_rows.json"
    stored = json.loads(store.read_text()) if store.exists() and not args.no_write else []
    import jax

    for seeds in [] if args.table_only else args.seeds:
        layouts = [("default", 0, 1), ("one device", 1, 1)]
        if seeds == 1 and args.algo == "ppo":  # one seed's 4 environments split over 2 devices
            layouts.append(("--data-parallel 2", 2, 2))
        for layout, num_devices, data_parallel in layouts:
            row = {**measure(args.algo, seeds, num_devices, data_parallel), "layout": layout,
                   "date": time.strftime("%Y-%m-%d"), "jax": jax.__version__, **scanrl_commit(),
                   "command": f"python benchmarks/throughput.py --algo {args.algo} --seeds {seeds}"}
            key = (args.algo, seeds, layout)
            stored = [r for r in stored if (r["algo"], r["seeds"], r["layout"]) != key] + [row]
            print(json.dumps(row), flush=True)
    order = {"ppo": 0, "impala": 1, "grpo": 2, "sac": 3}
    rows = sorted(stored, key=lambda r: (order[r["algo"]], r["seeds"], r["layout"] != "default", r["layout"]))
    dates = sorted({r["date"] for r in rows})
    body = (
        f"{MARK_BEGIN}\n"
        f"Machine: {os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), "
        f"jax {jax.__version__}, measured {', '.join(dates)}.\n"
        "Command: `python benchmarks/throughput.py --algo A --seeds N` for each row (every row is kept in "
        "`benchmarks/throughput_rows.json` with its date). Run seconds and steps/s are the better "
        "of the two processes' runs; compile includes tracing.\n\n"
        f"{table(rows)}\n{MARK_END}"
    )
    print("\n" + body)
    if not args.no_write:
        store.write_text(json.dumps(stored, indent=1) + "\n")
        results = HERE / "RESULTS.md"
        text = results.read_text() if results.exists() else "# Benchmark results\n\n"
        if MARK_BEGIN in text:
            head, rest = text.split(MARK_BEGIN, 1)
            text = head + body + rest.split(MARK_END, 1)[1]
        else:
            text += "\n## PPO throughput, CartPole-v1, PureJaxRL configuration\n\n" + body + "\n"
        results.write_text(text)


if __name__ == "__main__":
    main()
