"""Ctrl-C and SIGTERM from a run's start to its end: `Signals` records them, `interruptible`
runs tracing and compiling on a worker thread so the main thread sees a signal at once, and
`stop_before_training` is the one line and exit code of a run stopped before it trained
(common/harness/run.py uses them; tests/test_lifecycle.py checks them).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import typing
from typing import Any, Callable

from scanrl.common.harness import console


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM before the run started training (see Signals)."""

    def __init__(self, sig: int):
        super().__init__(sig)
        self.sig = sig


class Signals:
    """Ctrl-C / SIGTERM from the start of `main` to the end of the run.

    The handler only records the signal: an exception raised from a handler lands in whatever
    Python code the main thread runs, and where that is a gc callback, a `__del__` or a weakref
    finaliser, Python prints and drops it, and the interrupt is lost. The main thread looks at
    the record at its own wait points instead. Before training (parsing, lowering, compiling,
    loading kept programs, all on a worker thread while the main thread waits: `interruptible`)
    nothing is computed that could be kept: the wait raises Interrupted at once, and `main`
    says one line and exits 130 / 143 with no run folder written (a resumed run's folder stays
    as it was). Once training (`training = True`), the driver stops after the chunk in flight
    (it checkpoints and writes everything); a second signal exits at once. The handlers replace
    an inherited "ignore" too (a script's background job starts with SIGINT ignored), so the
    key does the same wherever the run was started."""

    NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}

    def __init__(self, say: Callable[[str], None] = print, training: bool = False):
        self.received, self.say, self.training, self.previous, self.announced = (
            None, say, training, {}, False,
        )

    def __enter__(self):
        if threading_is_main():
            for sig in self.NAMES:
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(
        self, sig, frame
    ):  # record only: no raising, no printing (the main thread may be inside print())
        if self.received is not None:
            os._exit(128 + sig)  # the second one: leave now (the last checkpoint stays)
        self.received = sig

    def check(self) -> None:
        """At a wait point before training: Interrupted if a signal arrived."""
        if self.received is not None and not self.training:
            raise Interrupted(self.received)

    def announce(self) -> None:
        """Say once, between chunks, that a signal arrived."""
        if self.received is not None and not self.announced:
            self.announced = True
            self.say(
                f"{self.NAMES[self.received]}: finishing the chunk in flight, then checkpointing "
                "(press again to quit at once)…"
            )

    def __exit__(self, *exc):
        from scanrl.common import harness

        for sig, handler in self.previous.items():
            # quiet_start's "before training started" would be false now: the run is over and
            # the process only exits, so a late signal is ignored instead
            signal.signal(
                sig, signal.SIG_IGN if handler is harness.QUIET_HANDLER is not None else handler
            )


_WORKING: list[threading.Event] = []  # set when its work has returned (see interruptible)


def interruptible(work: Callable[[], Any], signals: Signals | None = None) -> Any:
    """work(), run on a worker thread while this one waits in short slices and checks
    `signals` (Interrupted as soon as one arrived before training). Tracing, lowering and
    XLA's compile run for seconds to minutes without returning to this thread's code, so a
    signal could not be seen (nor the run stop) until they end. The worker's exception,
    SystemExit of a refused flag included, is raised here. (An Event, not Thread.join: in
    Python 3.11 a join interrupted by a handler's exception marks the thread stopped.)"""
    out: dict[str, Any] = {}
    finished = threading.Event()

    def target():
        try:
            out["value"] = work()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            out["error"] = e
        finally:
            finished.set()

    _WORKING.append(finished)
    threading.Thread(target=target, name="scanrl-start", daemon=True).start()
    while not finished.wait(0.05):
        if signals is not None:
            signals.check()
    _WORKING.remove(finished)
    if signals is not None:
        signals.check()  # one that came as the work ended: still before training
    if "error" in out:
        raise out["error"]
    return out["value"]


def stop_before_training(sig: int) -> typing.NoReturn:
    """The one line and the exit code of a run interrupted before it trained."""
    console.COMPILING.stop()
    console.say(
        f"{Signals.NAMES.get(sig, 'signal')} before training started: stopped, nothing was"
        " written."
    )
    sys.stderr.flush()
    code = 128 + sig
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if any(not finished.is_set() for finished in _WORKING) and main_file:
        os._exit(
            code
        )  # the worker still traces or compiles (in C++): a normal exit would wait for it or crash
    raise SystemExit(code)


def threading_is_main() -> bool:
    return threading.current_thread() is threading.main_thread()
