"""What a run shows while it compiles and trains.

On a terminal: rich's spinner with the elapsed time during the compile, then rich's progress
bar (updates done/total, elapsed, ETA, env steps/s, the latest return and evaluation). When
the output is not a terminal (CI, `| tee`, SLURM logs): "compiling… <what>" once, then one
plain line of at most `WIDTH` characters per chunk. Neither changes what is computed; only
process 0 of a multi-process run shows anything.
"""

from __future__ import annotations

import math
import os
import sys
import time

import jax

WIDTH = 100  # a plain progress line fits an 80-100 column log viewer without wrapping


def interactive() -> bool:
    """Whether this process shows rich's live displays (process 0, stdout a real terminal)."""
    return jax.process_index() == 0 and sys.stdout.isatty() and os.environ.get("TERM", "") != "dumb"


def si(x: float) -> str:
    """1234 -> '1.2k', 2_500_000 -> '2.5M': counts short enough for one line."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.0f}"


def clock(seconds: float) -> str:
    """Seconds as h:mm:ss (m:ss under an hour)."""
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def fit(*candidates: list[str], width: int = WIDTH) -> str:
    """The first candidate (a list of parts, joined by two spaces) that fits `width`; the last
    one cut to `width` if none does."""
    lines = ["  ".join(p for p in parts if p) for parts in candidates]
    return next((line for line in lines if len(line) <= width), lines[-1][:width])


class Compiling:
    """From the start of tracing until the first state exists: a spinner on a terminal,
    one "compiling…" line otherwise. `stop()` is safe to call at any time, twice included."""

    def __init__(self) -> None:
        self._live = None
        self.started = None

    def start(self, what: str) -> None:
        self.stop()
        self.started = time.perf_counter()
        if jax.process_index() != 0:
            return
        if not interactive():
            print(f"compiling… {what}", flush=True)
            return
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._live = Progress(SpinnerColumn(), TextColumn("compiling… {task.description}"), TimeElapsedColumn(),
                              transient=True)
        self._live.add_task(what, total=None)
        self._live.start()

    def stop(self, said: str | None = None) -> None:
        """End the spinner; on a terminal, leave `said` in its place."""
        if self._live is not None:
            self._live.stop()
            self._live = None
            if said:
                print(said, flush=True)


COMPILING = Compiling()  # one compile at a time per process


class Bar:
    """rich's progress bar over a run's updates (total None: a run until a stop condition)."""

    def __init__(self, label: str, total: int | None, done: int):
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self._progress = Progress(
            TextColumn(f"[bold]{label}[/]"), BarColumn(bar_width=24), MofNCompleteColumn(), TextColumn("updates"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[stats]}"),
        )
        self._task = self._progress.add_task(label, total=total, completed=done, stats="")
        self._progress.start()

    def update(self, done: int, stats: str) -> None:
        self._progress.update(self._task, completed=done, stats=stats)

    def stop(self) -> None:
        self._progress.stop()


def eta(seconds_so_far: float, done_so_far: int, remaining: int | None) -> float:
    """Seconds left at the pace so far (NaN before the first update or without a budget)."""
    if not done_so_far or remaining is None or not seconds_so_far:
        return math.nan
    return seconds_so_far / done_so_far * remaining
