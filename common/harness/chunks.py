"""The run between its compile and its files: chunk after chunk, with checkpoints, stop
conditions, the non-finite watch and signals between chunks.

`first_state` starts the run (from its checkpoint, with the metrics so far, or fresh);
`advance_until_done` dispatches chunks of `--log-every` updates until the budget or a stop,
handing each chunk's metrics to the run's logger (common/harness/logging.py) and a
population's lineage to common/harness/reports.py, and checkpointing every
`--checkpoint-every` updates and at the end (common/harness/checkpoint.py). `StopConditions`
reads `--stop-return`, `--stop-plateau` and `--stop-minutes`; every process takes the same
decision (`agree`). common/harness/run.py calls these between `prepare` and its files.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import jax
import numpy as np

from scanrl.common.harness import checkpoint, devices, loop, reports
from scanrl.common.harness.logging import RunLogger
from scanrl.common.harness.programs import Prepared
from scanrl.common.harness.runconfig import RunConfig
from scanrl.common.harness.signals import Signals
from scanrl.common.harness.stats import latest_mean

REASONS = ["", "budget", "stop_return", "stop_minutes", "stop_plateau", "interrupt", "non-finite"]


# ---------------------------------------------------------------------------------------------
# Stop conditions, the non-finite watch
# ---------------------------------------------------------------------------------------------
class StopConditions:
    """--stop-return, --stop-minutes, --stop-plateau, checked on each chunk's metrics."""

    def __init__(self, run: RunConfig, best: float = -math.inf, since_best: int = 0):
        self.run, self.best, self.since_best = run, best, since_best
        self.started = time.perf_counter()

    def check(self, metrics: dict[str, np.ndarray]) -> str | None:
        """metrics: name -> [seeds, n] of one chunk. Returns the condition that holds, or None."""
        run, reached = self.run, None
        evals = metrics.get(run.eval_metric)
        for column in range(evals.shape[1]) if evals is not None else ():
            if np.isnan(evals[:, column]).all():
                continue
            mean = float(np.nanmean(evals[:, column]))
            self.best, self.since_best = (
                (mean, 0) if mean > self.best else (self.best, self.since_best + 1)
            )
        if run.stop_return is not None:
            source = evals if run.eval_every else metrics.get("episode_return")
            latest = latest_mean(source)
            if latest is not None and latest >= run.stop_return:
                reached = "stop_return"
        if run.stop_plateau is not None and self.since_best >= run.stop_plateau:
            reached = reached or "stop_plateau"
        if (
            run.stop_minutes is not None
            and time.perf_counter() - self.started >= 60 * run.stop_minutes
        ):
            reached = reached or "stop_minutes"
        return reached


def stop_sentence(run: RunConfig, reason: str) -> str:
    """What a stop condition read, in words (the evaluation of --eval-policy, or the training
    return)."""
    evaluation = f"the {run.eval_policy} policy's mean evaluation return"
    if reason == "stop_return":
        read = evaluation if run.eval_every else "the mean training episode return"
        return f"{read} reached --stop-return {run.stop_return:g}"
    if reason == "stop_plateau":
        return (
            f"{run.stop_plateau} evaluations in a row brought no new best of {evaluation}"
            " (--stop-plateau)"
        )
    return f"--stop-minutes {run.stop_minutes:g} of training passed"


def first_nonfinite(
    metrics: dict[str, np.ndarray], first_update: int
) -> tuple[int, int, list[str]] | None:
    """(seed index, update, metric names) where a seed's policy first went non-finite, or None."""
    finite = metrics["_policy_finite"]
    bad = np.argwhere(finite == 0)
    if not bad.size:
        return None
    seed, column = min(map(tuple, bad), key=lambda sc: (sc[1], sc[0]))
    names = sorted(
        k
        for k, v in metrics.items()
        if not k.startswith("_")
        and np.isinf(v[seed, column])
        or (k.endswith("loss") and np.isnan(v[seed, column]))
    )
    return int(seed), first_update + int(column) + 1, names


def agree(code: int) -> int:
    """The largest of the processes' stop codes (every process must take the same decision)."""
    if jax.process_count() == 1:
        return code
    from jax.experimental import multihost_utils

    return int(np.max(multihost_utils.process_allgather(np.int32(code))))


# ---------------------------------------------------------------------------------------------
# The chunked run
# ---------------------------------------------------------------------------------------------
@dataclass
class RunRecord:
    """A run's record between chunks: what the chunk loop advances and a checkpoint stores."""

    state: Any
    done: int  # updates finished
    chunks: list  # each chunk's metrics, leaves [rows, n]
    resumed_from: list[int]
    stops: StopConditions
    reason: str | None = None  # why the run stops (None: not yet)
    nonfinite: Any = None  # (seed, update, names) of the first non-finite policy
    checkpoint_seconds: float = 0.0

    def metrics(self, names: list[str]) -> dict[str, np.ndarray]:
        return {k: np.concatenate([c[k] for c in self.chunks], axis=1) for k in names}


def row_keys(run: RunConfig, program: loop.Program) -> jax.Array:
    """One key per row of the seed axis: the seeds' keys, repeated for every config of a sweep."""
    keys = devices.seed_keys(run.seed, run.num_seeds)
    return keys[np.arange(program.num_seeds) % run.num_seeds] if program.sweep else keys


def first_state(run: RunConfig, prepared: Prepared, start: Callable, metric_names: list[str],
                 logger: RunLogger) -> RunRecord:
    """The state the run starts from: its checkpoint's (with the metrics so far), or fresh."""
    done, extra = 0, {}
    if prepared.checkpoint is not None:
        done = checkpoint.update_of(prepared.checkpoint)
        state, extra = checkpoint.load(prepared.checkpoint, prepared.state_shape)
        logger.say(f"resuming from update {done} ({prepared.checkpoint})")
    else:
        state = start(row_keys(run, prepared.program))
    return RunRecord(
        state=state,
        done=done,
        chunks=[_saved_metrics(extra, metric_names)] if done else [],
        resumed_from=[int(u) for u in extra.get("resumed_from", [])] + ([done] if done else []),
        stops=StopConditions(
            run, float(extra.get("best_eval", -math.inf)), int(extra.get("since_best", 0))
        ),
    )


def _saved_metrics(extra: dict, metric_names: list[str]) -> dict[str, np.ndarray]:
    """A checkpoint's metrics so far [rows, done]; NaN for one it predates (a checkpoint of a
    version without the sampled evaluation: that metric starts at the resume)."""
    shape = np.shape(next(v for k, v in extra.items() if k.startswith("metric_")))
    return {
        k: extra[f"metric_{k}"] if f"metric_{k}" in extra else np.full(shape, np.nan, np.float32)
        for k in metric_names
    }


def save_checkpoint(logger: RunLogger, progress: RunRecord, metric_names: list[str]) -> None:
    t = time.perf_counter()
    metrics = {f"metric_{k}": v for k, v in progress.metrics(metric_names).items()}
    checkpoint.save(
        logger.run_dir / "checkpoints",
        progress.done,
        progress.state,
        write=logger.active,
        extra={
            **metrics,
            "best_eval": progress.stops.best,
            "since_best": progress.stops.since_best,
            "resumed_from": progress.resumed_from,
        },
    )
    progress.checkpoint_seconds += time.perf_counter() - t


def advance_until_done(
    run: RunConfig, program: loop.Program, advance: Callable, metric_names: list[str],
    logger: RunLogger, progress: RunRecord, signals: Signals,
) -> float:
    """Chunk after chunk until the budget or a stop; returns the seconds it took.

    Chunk k + 1 is dispatched before chunk k's metrics are fetched and logged, so the devices
    never wait for the host between chunks (JAX dispatches asynchronously). A stop therefore
    takes effect after the chunk in flight; a checkpoint first drains the pipeline (the next
    chunk would consume the donated state)."""
    p, num_updates, launched, last_ckpt = progress, program.num_updates, deque(), progress.done
    t_start = t_last = time.perf_counter()
    while True:
        if p.reason is None and p.done < num_updates:
            n = min(program.chunk, num_updates - p.done)
            p.state, metrics = advance(p.state, p.done, n)
            launched.append((p.done, n, metrics))
            p.done += n
        checkpoint_due = (
            run.checkpoint_every
            and p.done // run.checkpoint_every > last_ckpt // run.checkpoint_every
        )
        while launched and (
            len(launched) == 2 or p.reason is not None or p.done == num_updates or checkpoint_due
        ):
            first, n, metrics = launched.popleft()
            metrics = {
                k: v[:, :n] for k, v in devices.fetch(metrics).items()
            }  # waits for the chunk
            now = time.perf_counter()
            found = first_nonfinite(metrics, first)
            metrics.pop("_policy_finite")
            p.chunks.append(metrics)
            logger.on_chunk(first + n, metrics, now - t_last)
            if program.pbt and logger.active:
                records = reports.lineage(p.metrics(list(metrics)), program.sweep, program.pbt,
                                          run.seed, program.steps_per_update)
                reports.write_lineage(logger.run_dir, records)
            t_last = now
            p.nonfinite = p.nonfinite or found
            code = REASONS.index("non-finite") if p.nonfinite else 0
            signals.announce()
            code = code or (REASONS.index("interrupt") if signals.received else 0)
            code = code or REASONS.index(p.stops.check(metrics) or "")
            agreed = agree(code)  # a collective across processes: once per chunk
            if agreed and p.reason is None:
                p.reason = REASONS[agreed]
        if not launched and (p.reason is not None or p.done == num_updates):
            break
        if checkpoint_due and p.reason is None:
            save_checkpoint(logger, p, metric_names)
            last_ckpt = p.done
    run_seconds = time.perf_counter() - t_start
    p.reason = p.reason or "budget"
    if p.reason != "non-finite":
        save_checkpoint(logger, p, metric_names)
    return run_seconds
