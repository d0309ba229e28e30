"""The command-line plumbing every algorithm file shares: parse flags, run, write the folder.

`parse_config(Config, default_config, doc)` joins a multi-process run first when asked
(`--distributed` or JAX_COORDINATOR_ADDRESS), then lets tyro build the Config with the
defaults that the `--env` given picks. `train_and_write(...)` compiles, trains every seed,
gathers the results from every process and writes the run folder (common.logging).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Any, Callable

import jax
import tyro

from common import devices
from common.logging import RunLogger


def parse_config(config_cls: type, default_config: Callable[[str], Any], doc: str, argv: list[str] | None = None):
    """Flags -> Config; `default_config(env)` supplies the defaults shown by --help."""
    argv = sys.argv[1:] if argv is None else argv
    if devices.distributed_requested(argv):
        devices.initialize_distributed()  # before anything below touches JAX
    env = config_cls.env
    for i, arg in enumerate(argv):
        if arg == "--env" and i + 1 < len(argv):
            env = argv[i + 1]
        elif arg.startswith("--env="):
            env = arg.split("=", 1)[1]
    try:
        default = default_config(env)
    except ValueError:
        default = None  # an invalid --env is reported by tyro below, with the usual exit code 2
    return tyro.cli(config_cls, args=argv, default=default, description=doc.split("\n\n")[0])


def train_and_write(
    algo: str,
    config: Any,
    make_train: Callable,
    layout: devices.Layout,
    steps_per_update: int,
    num_updates: int,
    saved: Callable[[dict], Any],
    extra_summary: dict[str, Any] | None = None,
) -> dict:
    """Compile `make_train(config, log_fn)`, train every seed, write the run folder.

    saved(out) picks what goes to params.npz from train's output; extra_summary adds
    algorithm-specific entries to summary.json. Returns summary.json's
    content (on every process; only process 0 writes).
    """
    wall_start = time.perf_counter()
    devices.enable_compile_cache(config.compile_cache)
    logger = RunLogger(
        algo=algo,
        env=config.env,
        config=dataclasses.asdict(config),
        num_seeds=config.num_seeds,
        steps_per_update=steps_per_update,
        num_updates=num_updates,
        out_dir=config.out_dir,
        wandb_mode=config.wandb_mode,
        wandb_project=config.wandb_project,
        first_seed=config.seed,
        live_seeds=layout.seeds_on_process(0),
    )
    train = make_train(config, log_fn=logger.on_update if config.log_every else None)
    keys = devices.seed_keys(config.seed, config.num_seeds)
    t0 = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(keys))
    run_seconds = time.perf_counter() - t0
    out = devices.fetch(out)  # every seed, also those on other processes' devices
    return logger.finish(
        metrics=out["metrics"],
        params=saved(out),
        total_timesteps=num_updates * steps_per_update,
        compile_seconds=compile_seconds,
        run_seconds=run_seconds,
        wall_seconds=time.perf_counter() - wall_start,
        extra={"layout": layout.describe(), "processes": jax.process_count(), **(extra_summary or {})},
    )
