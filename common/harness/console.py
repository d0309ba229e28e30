"""What a run shows while it compiles and trains.

On a terminal: rich's spinner with the elapsed time during the compile, then rich's progress
bar (updates done/total, elapsed, ETA, env steps/s, the latest return and evaluation). When
the output is not a terminal (CI, `| tee`, SLURM logs): "compiling… <what>" once, then one
plain line of at most `WIDTH` characters per chunk. Neither changes what is computed; only
process 0 of a multi-process run shows anything.
"""

from __future__ import annotations

import io
import math
import os
import shutil
import sys
import tempfile
import textwrap
import time
from typing import Any

WIDTH = 100  # a plain progress line fits an 80-100 column log viewer without wrapping


def interactive() -> bool:
    """Whether this process shows rich's live displays (process 0, stdout a real terminal)."""
    import jax  # here, not above: scanrl-bench and scanrl-plot print through this file too

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


def width() -> int:
    """The columns a printed line may take: the terminal's (at most `WIDTH`) when stdout is one,
    `WIDTH` otherwise (a log file, CI, a pipe)."""
    if sys.stdout.isatty():
        return min(shutil.get_terminal_size((WIDTH, 24)).columns, WIDTH)
    return WIDTH


def wrap(text: str, indent: str = "", hang: str = "  ", columns: int | None = None) -> str:
    """`text` broken between words to fit `columns` (default `width()`): never inside a number
    or a path, so a path longer than what is left of a line starts a line of its own; words
    joined by a no-break space (\\xa0) stay on one line. Lines after the first are indented by
    `indent` + `hang`."""
    return textwrap.fill(
        text, columns or width(), initial_indent=indent, subsequent_indent=indent + hang,
        break_long_words=False, break_on_hyphens=False,
    ).replace("\xa0", " ")


def say(text: str, indent: str = "", file: Any = None) -> None:
    """print(wrap(text, indent)), flushed: every sentence a run prints goes through here."""
    print(wrap(text, indent), file=file or sys.stdout, flush=True)


def command(text: str, columns: int | None = None, indent: str = "  ") -> str:
    """A command line to copy, within `columns` (default `width()`): broken before a flag (or,
    for a flag and value too long for a line, between them), each break marked with a shell
    continuation (" \\"), so the lines paste as one command."""
    room, lines = (columns or width()) - 2, [indent]  # 2: the " \\" a broken line ends with

    def add(piece: str) -> None:
        if lines[-1].strip() and len(lines[-1]) + 1 + len(piece) > room:
            lines[-1] += " \\"
            lines.append(indent + "    ")
        lines[-1] += (" " if lines[-1].strip() else "") + piece

    for unit in text.replace(" --", "\0--").split("\0"):  # a flag with its values
        for piece in [unit] if len(indent) + 4 + len(unit) <= room else unit.split(" "):
            add(piece)
    return "\n".join(lines)


def table(header: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    """Right-aligned columns, two spaces apart (one where two do not fit), each as wide as its
    widest cell or header, fitted to `width()`: where that is too narrow, the headers break
    between words over two lines; where even that is, each row becomes one wrapped line of
    "header value" pairs (`pack`). Cells are never cut."""
    columns = list(zip(header, *rows))
    room = width()

    def laid_out(gap: int, heads: list[list[str]]) -> list[str] | None:
        widths = [max(max(len(h) for h in head), *(len(c) for c in col[1:]))
                  for head, col in zip(heads, columns)]
        if len(indent) + sum(widths) + gap * (len(widths) - 1) > room:
            return None
        depth = max(len(head) for head in heads)
        lines = [[""] * (depth - len(head)) + head for head in heads]  # headers sit on the rows
        return [
            indent + (" " * gap).join(f"{cells[i]:>{w}}" for cells, w in zip(lines, widths))
            for i in range(depth)
        ] + [indent + (" " * gap).join(f"{c:>{w}}" for c, w in zip(row, widths)) for row in rows]

    def halves(head: str) -> list[str]:  # the split between words with the shorter longer line
        words = head.split()
        splits = [[" ".join(words[:k]), " ".join(words[k:])] for k in range(1, len(words))]
        return min(splits, key=lambda pair: max(map(len, pair)), default=[head])

    whole, two = [[h] for h in header], [halves(h) for h in header]
    for gap, heads in ((2, whole), (1, whole), (2, two), (1, two)):
        lines = laid_out(gap, heads)
        if lines is not None:
            return lines
    return [pack([f"{h} {c}" for h, c in zip(header, row)], indent) for row in rows]


def pack(items: list[str], indent: str = "", hang: str = "  ") -> str:
    """`items` joined by two spaces into lines that fit `width()`, broken only between items
    (an item wider than a line stands on its own)."""
    lines, room = [indent], width()
    for item in items:
        line = lines[-1]
        if line.strip() and len(line) + 2 + len(item) > room:
            lines.append(indent + hang + item)
        else:
            lines[-1] = line + ("  " if line.strip() else "") + item
    return "\n".join(lines)


def fit(*candidates: list[str], width: int = WIDTH) -> str:
    """The first candidate (a list of parts, joined by two spaces) that fits `width`; the last
    one cut to `width` if none does."""
    lines = ["  ".join(p for p in parts if p) for parts in candidates]
    return next((line for line in lines if len(line) <= width), lines[-1][:width])


class Compiling:
    """From the start of tracing until the first state exists: a spinner on a terminal,
    one "compiling… <what>" line otherwise. The spinner keeps its elapsed seconds and, where
    an earlier compile of the same algorithm and env took a known time, "last time 0:42";
    where `what` (with the run folder at its end) would not fit beside them, it is printed
    whole above the spinner, so nothing of it is cut. `stop()` is safe to call at
    any time, twice included."""

    def __init__(self) -> None:
        self._live = None
        self.started = None

    def start(self, what: str, last_seconds: float | None = None) -> None:
        self.stop()
        self.started = time.perf_counter()
        import jax

        if jax.process_index() != 0:
            return
        past = f"last time {clock(last_seconds)}" if last_seconds else ""
        if not interactive():
            say(f"compiling… {what}" + (f" ({past})" if past else ""))
            return
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._live = Progress(
            SpinnerColumn(), TimeElapsedColumn(), TextColumn(past),
            TextColumn("{task.description}"), transient=True,
        )
        # spinner 1, elapsed 7, the estimate, 1 space between columns; what is left holds `what`
        room = self._live.console.width - 1 - 7 - (len(past) + 1 if past else 0) - 3
        text = f"compiling… {what}"
        if len(text) > room:  # too long for the spinner's line: it goes above, whole
            say(text)
            text = "compiling…"
        text = text.replace("\xa0", " ")
        self._live.add_task(text, total=None)
        self._live.start()

    def stop(self, said: str | None = None) -> None:
        """End the spinner; on a terminal, leave `said` in its place."""
        if self._live is not None:
            self._live.stop()
            self._live = None
            if said:
                print(said, flush=True)


COMPILING = Compiling()  # one compile at a time per process


class NativeStderr:
    """While XLA compiles: what C++ writes to file descriptor 2 (the "slow_operation_alarm ...
    Very slow compile?" lines, which would print into the spinner) goes to a temporary file,
    kept as `text` on exit; Python's own sys.stderr stays on the terminal. The run writes
    `text` to its folder's compile.log."""

    def __enter__(self):
        self.text, self._python = "", None
        sys.stderr.flush()
        self._saved, self._file = os.dup(2), tempfile.TemporaryFile()
        os.dup2(self._file.fileno(), 2)
        try:
            python_on_fd2 = sys.stderr.fileno() == 2
        except (AttributeError, OSError, ValueError):  # pytest's capture, a StringIO: not fd 2
            python_on_fd2 = False
        if python_on_fd2:
            self._python = sys.stderr
            sys.stderr = io.TextIOWrapper(os.fdopen(os.dup(self._saved), "wb"), write_through=True)
        return self

    def __exit__(self, *exc):
        if self._python is not None:
            sys.stderr.close()
            sys.stderr = self._python
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode(errors="replace")
        self._file.close()
        if (
            exc[0] is not None
            and exc[0] is not KeyboardInterrupt
            and not issubclass(exc[0], KeyboardInterrupt)
        ):
            sys.stderr.write(self.text)  # a failed compile: what XLA said may be why


class Bar:
    """rich's progress bar over a run's updates (total None: a run until a stop condition):
    `label  [bar]  done/total updates  elapsed  ETA  texts...`, laid out for the terminal's
    width at every update. The update count, the elapsed time (rich's, ticking between
    updates), the ETA and the first text (the latest return) stay at any width from 60
    columns. With the label and then without it, the texts are tried in full and then in
    their compact forms (`compact`, where given); then the word "updates" gives way, then the
    bar's length, then the last texts one by one (rich would otherwise cut the count and the
    ETA)."""

    def __init__(self, label: str, total: int | None, done: int, screen: Any = None):
        """screen: a rich Console to draw on (default: the terminal)."""
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.label, self.total = label, total
        self._progress = Progress(
            TextColumn("{task.fields[head]}"), BarColumn(bar_width=24),
            TextColumn("{task.fields[count]}"), TimeElapsedColumn(),
            TextColumn("{task.fields[tail]}"), console=screen,
        )
        self._bar = self._progress.columns[1]
        self._task = self._progress.add_task(
            label, total=total, completed=done, head="", count="", tail=""
        )
        self.update(done, math.nan, [])
        self._progress.start()

    def layout(self, done: int, eta_seconds: float, texts: list[str], width: int,
               compact: list[str] | None = None) -> tuple[str, int, str, str]:
        """(head, bar length, count, tail) for a terminal `width` columns wide: the fullest
        line that fits (see the class docstring for what gives way first). compact: `texts`
        in shorter words, one for one."""
        count = f"{done}/{self.total}" if self.total else f"{done}"
        left = f"ETA {clock(eta_seconds)}" if math.isfinite(eta_seconds) else "ETA -:--"
        forms = [[t for t in texts if t]] + ([[t for t in compact if t]] if compact else [])
        texts = forms[0]
        tries = [(head, 24, " updates", form) for head in (self.label, "") for form in forms]
        tries += [("", bar, "", form[:n]) for n in range(len(texts), 0, -1) for form in forms
                  for bar in (24, 16, 10, 8)]
        for head, bar, word, kept in tries:
            tail = "  ".join([left, *kept])
            # columns: head, bar, count, elapsed (h:mm:ss, 7), tail; one space between each
            used = (
                (len(head) + 1 if head else 1) + bar + 1 + len(count + word) + 1 + 7 + 1 + len(tail)
            )
            if used <= width:
                break
        return head, bar, count + word, tail

    def update(
        self, done: int, eta_seconds: float, texts: list[str], compact: list[str] | None = None
    ) -> None:
        head, bar, count, tail = self.layout(
            done, eta_seconds, texts, self._progress.console.width, compact
        )
        self._bar.bar_width = bar
        self._progress.update(self._task, completed=done, head=head, count=count, tail=tail)

    def stop(self) -> None:
        self._progress.stop()


def eta(seconds_so_far: float, done_so_far: int, remaining: int | None) -> float:
    """Seconds left at the pace so far (NaN before the first update or without a budget)."""
    if not done_so_far or remaining is None or not seconds_so_far:
        return math.nan
    return seconds_so_far / done_so_far * remaining
