"""Run a command line as Python would, holding the run at a checkpoint until a signal comes.

    python tests/hold_at_checkpoint.py AFTER algos/ppo.py ARGS...
    python tests/hold_at_checkpoint.py AFTER -m scanrl.algos.ppo ARGS...

The first checkpoint past update AFTER is written, then the run waits there until the process
receives a signal (SIGKILL needs no waiting: it ends the process where it stands). A test that
signals a run once it sees that checkpoint therefore always lands mid-run: on a fast machine
the run cannot finish first, and on a slow one nothing is timed. What the run computes is
unchanged; only when its next chunk starts is.
"""

import runpy
import sys
import time

from scanrl.common.harness import checkpoint, signals

after, target, *rest = sys.argv[1:]
received, held = [], []
save, handle = checkpoint.save, signals.Signals._handle


def handle_and_note(self, sig, frame):
    received.append(sig)
    handle(self, sig, frame)


def save_and_hold(folder, update, *args, **kwargs):
    path = save(folder, update, *args, **kwargs)
    if update > int(after) and not held:
        held.append(update)
        while not received:  # the hang guard of the test that started this process bounds it
            time.sleep(0.01)
    return path


signals.Signals._handle = handle_and_note
checkpoint.save = save_and_hold
if target == "-m":
    module, *args = rest
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
else:
    sys.argv = [target, *rest]
    runpy.run_path(target, run_name="__main__")
