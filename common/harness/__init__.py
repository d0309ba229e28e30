"""The harness that runs an algorithm: driver, programs and compile cache, checkpoints, logging,
plots, evaluation, sweeps (the kit the math imports is common/envs.py, nets.py, onpolicy.py,
algorithm.py and cores.py). It never imports an algorithm file; its command-line tools find one
by name in the scanrl.algos registry. This package's own module holds only `quiet_start`, which
`python algos/X.py` calls before its imports; the rest loads inside `main`."""

import os
import signal


def quiet_start() -> None:
    """For `python algos/X.py`, called before its imports: until run.main's handlers take
    over, Ctrl-C or SIGTERM while the imports run (JAX's take seconds) ends the process with
    one line and exit 130 / 143 instead of a 30-line traceback. Nothing exists yet that could
    be kept. The handler writes with os.write: print() is not safe inside a handler."""

    def leave(sig, frame):
        name = "Ctrl-C" if sig == signal.SIGINT else "SIGTERM"
        os.write(1, f"{name} before training started: stopped, nothing was written.\n".encode())
        os._exit(128 + sig)

    global QUIET_HANDLER
    QUIET_HANDLER = leave
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, leave)


QUIET_HANDLER = (
    None  # quiet_start's handler: run.main's Signals does not put it back when the run ends
)
