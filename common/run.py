"""Run settings and the driver every algorithm's command line uses.

`RunConfig` holds what every algorithm shares (seeds, devices, evaluation, logging,
output, wandb, cache); each algorithm's Config holds one as its `run` field, shown as
flat flags (`--num-seeds`, not `--run.num-seeds`).

`main(...)` is a file's command line: flags -> Config -> checks (device layout, env, env
parameters; one sentence and exit code 2 before compiling) -> `execute(...)`, which says
"compiling…", compiles with the persistent cache, then advances the run chunk by chunk
(`--log-every` updates each) and between chunks prints progress, appends progress.jsonl
and logs to wandb from Python; at the end it writes the run folder (common/logging.py).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import jax
import numpy as np

from scanrl.common import devices, loop
from scanrl.common.logging import RunLogger


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_values(config: Any, positive: tuple[str, ...] = (), nonnegative: tuple[str, ...] = (),
                 within: dict[str, str] | None = None) -> None:
    """Raise ValueError naming the flag and echoing the value for the first bad one.

    Every float field must be finite; `positive` ints are at least 1, floats > 0;
    `within` maps a field to an interval such as "(0, 1]"; None values are not checked.
    """
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{flag(f.name)} must be a finite number, got {value}.")
    for name in positive:
        value = getattr(config, name)
        if value is not None and not value > 0:
            raise ValueError(f"{flag(name)} must be {'at least 1' if isinstance(value, int) else 'positive'}, got {value}.")
    for name in nonnegative:
        value = getattr(config, name)
        if value is not None and value < 0:
            raise ValueError(f"{flag(name)} must be 0 or positive, got {value}.")
    for name, interval in (within or {}).items():
        value, (low, high) = getattr(config, name), map(float, interval[1:-1].split(","))
        if value is None:
            continue
        above = value >= low if interval[0] == "[" else value > low
        below = value <= high if interval[-1] == "]" else value < high
        if not (above and below):
            raise ValueError(f"{flag(name)} must lie in {interval}, got {value}.")


@dataclass(frozen=True)
class RunConfig:
    """Run settings shared by every algorithm (flat flags)."""

    seed: int = 0
    """first seed; seed i of the run uses jax.random.key(seed + i)."""
    num_seeds: int = 1
    """independent seeds trained together in one compiled program (vmapped, sharded over devices)."""
    eval_every: int = 50
    """evaluate the deterministic policy every this many updates, and after the last (0: never)."""
    eval_episodes: int = 10
    """episodes per evaluation (run in parallel)."""
    eval_env_params: dict[str, float] = field(default_factory=dict)
    """override env parameters for evaluation only, e.g. --eval-env-params length 0.7."""
    log_every: int = 10
    """progress line, progress.jsonl record and wandb log every this many updates: the run
    advances in chunks of this many updates (0: one chunk, no progress lines)."""
    num_devices: int = 0
    """devices to use (0: all; on CPU one device per core)."""
    data_parallel: int = 1
    """devices that split each seed's environments, gradients and statistics averaged
    (1: none, seeds fill the devices; 0: automatic, devices left over by too few seeds split
    environments). On CPU splitting costs more than it saves (benchmarks/RESULTS.md)."""
    distributed: bool = False
    """multi-process run: jax.distributed.initialize() before anything else (also implied by
    JAX_COORDINATOR_ADDRESS); only process 0 prints and writes. See README, Scaling."""
    compile_cache: bool = True
    """persistent compilation cache in ~/.cache/scanrl/jax: a repeated run starts in about a second."""
    wandb_mode: Literal["disabled", "offline", "online"] = "disabled"
    """wandb logging: disabled (default, needs no account), offline (local files), online."""
    wandb_project: str = "scanrl"
    """wandb project name."""
    out_dir: str = "runs"
    """parent folder of the run folder."""

    def __post_init__(self):
        check_values(self, positive=("num_seeds", "eval_episodes"),
                     nonnegative=("eval_every", "log_every", "num_devices", "data_parallel"))


RUN_FIELDS = frozenset(f.name for f in dataclasses.fields(RunConfig))


def build_config(config_cls: type, values: dict[str, Any]):
    """A Config from flat values: names of RunConfig fields go to its `run` field, on top of
    the Config's own default RunConfig; the rest are the algorithm's hyperparameters."""
    run_default = config_cls.__dataclass_fields__["run"].default_factory()
    run = dataclasses.replace(run_default, **{k: v for k, v in values.items() if k in RUN_FIELDS})
    return config_cls(**{k: v for k, v in values.items() if k not in RUN_FIELDS}, run=run)


def config_dict(config: Any) -> dict[str, Any]:
    """A Config as flat values, the form flags take and config.json stores."""
    values = dataclasses.asdict(config)
    return {**{k: v for k, v in values.items() if k != "run"}, **values["run"]}


def parse_config(config_cls: type, default_config: Callable[[str], Any], doc: str, argv: list[str] | None = None):
    """Flags -> Config; `default_config(env)` supplies the defaults (presets) shown by --help."""
    import tyro

    argv = sys.argv[1:] if argv is None else argv
    if devices.distributed_requested(argv):
        devices.initialize_distributed()  # before anything below touches JAX
    env = config_cls.__dataclass_fields__["env"].default
    for i, arg in enumerate(argv):
        if arg == "--env" and i + 1 < len(argv):
            env = argv[i + 1]
        elif arg.startswith("--env="):
            env = arg.split("=", 1)[1]
    return tyro.cli(
        config_cls, args=argv, default=default_config(env), description=doc.split("\n\n")[0],
        config=(tyro.conf.OmitArgPrefixes,),
    )


def fail(message: str) -> None:
    """A mistake the user can fix: one sentence on stderr, exit code 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(algo: str, config_cls: type, default_config: Callable, make_algorithm: Callable, doc: str,
         argv: list[str] | None = None, extra_summary: Callable[[loop.Program], dict] | None = None) -> dict:
    """An algorithm file's command line: parse, check, train, write. Returns summary.json's content."""
    config = parse_config(config_cls, default_config, doc, argv)
    try:
        program = prepare(config, make_algorithm)
    except ValueError as e:
        fail(str(e))
    return execute(algo, config, program, extra_summary=extra_summary)


def prepare(config: Any, make_algorithm: Callable, env: Any = None, env_params: Any = None) -> loop.Program:
    """Everything short of compiling: device layout, env, programs (ValueError if they do not fit)."""
    devices.enable_compile_cache(config.run.compile_cache)
    return loop.build(make_algorithm, config, env, env_params, chunk=config.run.log_every or None)


def execute(algo: str, config: Any, program: loop.Program, extra_summary: Callable[[loop.Program], dict] | None = None) -> dict:
    """Compile `program`, run it chunk by chunk with progress between chunks, write the run
    folder. Returns summary.json's content (on every process; only process 0 writes)."""
    wall_start = time.perf_counter()
    run = config.run
    layout = program.layout
    logger = RunLogger(
        algo=algo, env=config.env, config=config_dict(config), num_seeds=run.num_seeds,
        steps_per_update=program.steps_per_update, num_updates=program.num_updates, out_dir=run.out_dir,
        wandb_mode=run.wandb_mode, wandb_project=run.wandb_project, first_seed=run.seed,
        progress=bool(run.log_every),
    )
    logger.say("compiling…")
    keys = devices.seed_keys(run.seed, run.num_seeds)
    t0 = time.perf_counter()
    state = program.start.lower(keys).compile()(keys)
    advance = program.advance.lower(state, 0, 0).compile()
    compile_seconds = time.perf_counter() - t0

    # Chunk k + 1 is dispatched before chunk k's metrics are fetched and logged, so the
    # devices never wait for the host between chunks (JAX dispatches asynchronously).
    chunks, launched, done = [], [], 0
    t_start = t_last = time.perf_counter()
    while done < program.num_updates or launched:
        if done < program.num_updates:
            n = min(program.chunk, program.num_updates - done)
            state, metrics = advance(state, done, n)
            done += n
            launched.append((done, n, metrics))
        if len(launched) == 2 or done == program.num_updates:
            updates_done, n, metrics = launched.pop(0)
            metrics = {k: v[:, :n] for k, v in devices.fetch(metrics).items()}  # waits for that chunk
            now = time.perf_counter()
            chunks.append(metrics)
            logger.on_chunk(updates_done, metrics, now - t_last)
            t_last = now
    run_seconds = time.perf_counter() - t_start

    metrics = {k: np.concatenate([c[k] for c in chunks], axis=1) for k in chunks[0]}
    return logger.finish(
        metrics=metrics,
        params=devices.fetch(program.policy(state)),
        total_timesteps=program.num_updates * program.steps_per_update,
        compile_seconds=compile_seconds,
        run_seconds=run_seconds,
        wall_seconds=time.perf_counter() - wall_start,
        extra={
            "layout": layout.describe(), "processes": jax.process_count(),
            **(extra_summary(program) if extra_summary else {}),
        },
    )


def train_and_write(algo: str, config: Any, make_algorithm: Callable, env: Any = None, env_params: Any = None,
                    extra_summary: Callable[[loop.Program], dict] | None = None) -> dict:
    """Train `config` from Python (no flags) and write its run folder; returns the summary."""
    return execute(algo, config, prepare(config, make_algorithm, env, env_params), extra_summary)

