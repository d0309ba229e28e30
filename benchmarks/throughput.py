"""PPO throughput on CartPole-v1 with PureJaxRL's default configuration.

4 envs x 128 steps, 4 epochs x 4 minibatches, 64x64 tanh MLPs, lr 2.5e-4 annealed,
gamma 0.99, lambda 0.95, clip 0.2, 5e5 env steps per seed, no evaluation, no logging.
For 1, 8 and 64 seeds, on the default device layout (seeds over one CPU device per core)
and forced to one device, plus 1 seed split over 2 devices with --data-parallel 2; each
measurement in a fresh process:
  - compile seconds cold (empty persistent cache) and warm (second process, same cache),
    both including tracing and lowering;
  - run seconds and env steps per second (all seeds, compilation excluded).

    python benchmarks/throughput.py              # prints the table, writes benchmarks/RESULTS.md
    python benchmarks/throughput.py --seeds 1 8  # a subset
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARK_BEGIN, MARK_END = "<!-- throughput:begin -->", "<!-- throughput:end -->"


def worker(num_seeds: int, num_devices: int, data_parallel: int, cache_dir: str) -> dict:
    """Runs in its own process: compile and time one PPO training run."""
    from common import devices  # sets one CPU device per core before JAX computes

    import jax
    from algos import ppo

    devices.enable_compile_cache(True, cache_dir)
    config = ppo.Config(
        env="CartPole-v1", num_seeds=num_seeds, total_timesteps=500_000, eval_every=0, log_every=0,
        num_devices=num_devices, data_parallel=data_parallel,
    )
    keys = devices.seed_keys(0, num_seeds)
    t0 = time.perf_counter()
    train = ppo.make_train(config)
    compiled = train.lower(keys).compile()
    compile_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(keys))
    run_seconds = time.perf_counter() - t0
    steps = num_seeds * config.num_updates * config.batch_size
    layout = ppo.plan_layout(config)
    return {
        "seeds": num_seeds,
        "devices": layout.num_devices,
        "data_parallel": layout.data_parallel,
        "compile_seconds": compile_seconds,
        "run_seconds": run_seconds,
        "env_steps_per_second": steps / run_seconds,
    }


def measure(num_seeds: int, num_devices: int, data_parallel: int) -> dict:
    with tempfile.TemporaryDirectory() as cache_dir:
        results = []
        for _ in range(2):  # cold, then from the persistent cache
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", str(num_seeds), str(num_devices), str(data_parallel), cache_dir],
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
        "| seeds | layout | devices used | compile cold (s) | compile cached (s) | run (s) | env steps/s | env steps/s per seed |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        best = max(r["env_steps_per_second"], r["env_steps_per_second_2"])
        run = min(r["run_seconds"], r["run_seconds_2"])
        lines.append(
            f"| {r['seeds']} | {r['layout']} | {r['devices']} | {r['compile_seconds']:.2f} | "
            f"{r['compile_cached_seconds']:.2f} | {run:.2f} | {best:,.0f} | {best / r['seeds']:,.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(int(args.worker[0]), int(args.worker[1]), int(args.worker[2]), args.worker[3])))
        return
    rows = []
    for seeds in args.seeds:
        layouts = [("default", 0, 1), ("one device", 1, 1)]
        if seeds == 1:  # one seed's 4 environments split over 2 devices
            layouts.append(("--data-parallel 2", 2, 2))
        for layout, num_devices, data_parallel in layouts:
            row = {**measure(seeds, num_devices, data_parallel), "layout": layout}
            rows.append(row)
            print(json.dumps(row), flush=True)
    import jax

    body = (
        f"{MARK_BEGIN}\n"
        f"Machine: {os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), "
        f"jax {jax.__version__}, {time.strftime('%Y-%m-%d')}.\n"
        f"Command: `python benchmarks/throughput.py --seeds {' '.join(map(str, args.seeds))}`. "
        "Run seconds and steps/s are the better of the two processes' runs; compile includes tracing.\n\n"
        f"{table(rows)}\n{MARK_END}"
    )
    print("\n" + body)
    if not args.no_write:
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
