"""Where the test suite's time goes: every test's worker and time, each worker's sum and idle
time, every XLA compile (in the pytest workers and in every process the tests start, the
command line's own program store included), and every Python process the tests start.

A `sitecustomize` module on PYTHONPATH (so every Python process of the run loads it) logs
one JSON line per process start and registers a `jax.monitoring` listener that logs one
line per compile, trace and lowering; a pytest plugin (`-p`, loaded by every xdist worker)
logs each test's phase, worker and times. Then the lines are added up. It also counts, by
JAX's persistent-cache key, the programs compiled again (a program two tests could have
shared but did not).

A *run program* is one of the loop's jitted `train`, `start` and `advance` (or an algorithm
file's `train`): what a test pays seconds to minutes of XLA for. The counts do not depend on
the machine's speed; the seconds do.

    python benchmarks/suite_compiles.py                        # the README's test command
    python benchmarks/suite_compiles.py -m "not slow" -n 2     # the quick tier
    python benchmarks/suite_compiles.py --json out.json --keep events.log -n 2
        # also the figures as JSON, and the raw log (its first line the wall time)
    python benchmarks/suite_compiles.py --events events.log    # the figures of a kept log
    python benchmarks/suite_compiles.py --events events.log --durations tests/durations.json
        # each test's seconds, for the order in which conftest.py hands tests to the workers
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVENTS = ("backend_compile_duration", "jaxpr_trace_duration", "jaxpr_to_mlir_module_duration")

SITECUSTOMIZE = """
import json, os, sys, time
def _log(row):
    row.update(pid=os.getpid(), worker=os.environ.get("PYTEST_XDIST_WORKER", ""),
               test=os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0])
    with open(os.environ["SUITE_COMPILE_LOG"], "a") as f:
        f.write(json.dumps(row) + "\\n")
_log({"event": "process", "argv": " ".join(sys.argv)[:200], "time": time.time()})

def _with_jax():
    import jax.monitoring
    def _listener(event, duration, **kw):
        name = event.rsplit("/", 1)[-1]
        if name in %r:
            _log({"event": name, "seconds": duration, "fun": str(kw.get("fun_name", "?"))})
    jax.monitoring.register_event_duration_secs_listener(_listener)
    # Each program XLA compiles for JAX's persistent cache, by its cache key, and each hit.
    # (JAX internals: skipped quietly if they move.)
    try:
        from jax._src import compiler as _compiler
        _compile, _hit = _compiler._compile_and_write_cache, _compiler.log_persistent_cache_hit
        def _compiled(backend, computation, devices, options, callbacks, module_name, cache_key):
            start = time.time()
            try:
                return _compile(backend, computation, devices, options, callbacks, module_name, cache_key)
            finally:
                _log({"event": "census", "key": cache_key, "fun": module_name, "seconds": time.time() - start})
        def _hit_logged(module_name, cache_key):
            _log({"event": "census", "key": cache_key, "fun": module_name, "hit": True})
            return _hit(module_name, cache_key)
        _compiler._compile_and_write_cache = _compiled
        _compiler.log_persistent_cache_hit = _hit_logged
    except Exception:
        pass

try:
    _with_jax()
except ImportError:  # a process without JAX (pip installing it, say)
    pass
""" % (EVENTS,)

PLUGIN = """
import json, os, time
def pytest_runtest_logreport(report):
    if hasattr(report, "node"):  # the controller's copy of a worker's report: logged there
        return
    with open(os.environ["SUITE_COMPILE_LOG"], "a") as f:
        f.write(json.dumps({"event": "test", "test": report.nodeid, "when": report.when,
                            "seconds": report.duration, "start": report.start, "stop": report.stop,
                            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                            "outcome": report.outcome}) + "\\n")
"""


def measure(pytest_args: list[str], keep: str | None = None) -> tuple[dict, str]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(SITECUSTOMIZE)
        (Path(tmp) / "suite_timing_plugin.py").write_text(PLUGIN)
        log = Path(tmp) / "events.jsonl"
        env = {**os.environ, "SUITE_COMPILE_LOG": str(log),
               "PYTHONPATH": os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")]))}
        started = time.time()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite_timing_plugin", "-p", "no:cacheprovider",
                               *(pytest_args or ["-n", "2"])], cwd=REPO, env=env, capture_output=True, text=True)
        wall = time.time() - started
        rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        if keep:
            Path(keep).write_text(f"{wall}\n" + (log.read_text() if log.exists() else ""))
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:]
    return {"wall": wall, "rows": rows, "returncode": proc.returncode, "summary": summary}, proc.stdout


def report(result: dict) -> dict:
    rows, wall = result["rows"], result["wall"]
    tests = [r for r in rows if r["event"] == "test"]
    processes = [r for r in rows if r["event"] == "process"]
    compiles = [r for r in rows if r["event"] == "backend_compile_duration"]
    census = [r for r in rows if r["event"] == "census"]
    per_test = collections.Counter()
    worker_sum = collections.Counter()
    worker_span = {}
    for r in tests:
        per_test[r["test"]] += r["seconds"]
        worker_sum[r["worker"]] += r["seconds"]
        lo, hi = worker_span.get(r["worker"], (r["start"], r["stop"]))
        worker_span[r["worker"]] = (min(lo, r["start"]), max(hi, r["stop"]))
    first = min((r["time"] for r in processes), default=0.0)
    collected = len({r["test"] for r in tests})
    started = [r for r in processes if r["test"]]  # a process a test started (workers have no test yet)
    run_programs = [r for r in compiles if re.fullmatch(r"jit[(_](train|start|advance)\)?", r["fun"])]
    compiled = [r for r in census if not r.get("hit")]
    keys, again = set(), []
    for r in compiled:
        (again.append(r) if r["key"] in keys else keys.add(r["key"]))
    out = {
        "summary": result["summary"], "tests": collected, "wall_s": round(wall, 1),
        "process_starts": len(started), "xla_compiles": len(compiles),
        "run_program_compiles": len(run_programs),
        "compile_s": round(sum(r["seconds"] for r in compiles), 1),
        "workers": {w: {"busy_s": round(s, 1), "idle_s": round(wall - s, 1),
                        "first_test_at_s": round(worker_span[w][0] - first, 1),
                        "last_test_done_at_s": round(worker_span[w][1] - first, 1)}
                    for w, s in sorted(worker_sum.items())},
        "compiled_again": len(again), "compiled_again_s": round(sum(r["seconds"] for r in again), 1),
        "per_test": {t: round(s, 2) for t, s in per_test.most_common()},
        "run_programs_per_test": collections.Counter(r["test"] for r in run_programs),
        "processes_per_test": collections.Counter(r["test"] for r in started),
    }
    return out


def main(argv: list[str]) -> None:
    options = {}
    while argv[:1] and argv[0] in ("--json", "--keep", "--events", "--durations"):
        options[argv[0]], argv = argv[1], argv[2:]
    if "--events" in options:  # a log kept by --keep: its first line is the wall time
        wall, *lines = Path(options["--events"]).read_text().splitlines()
        result = {"rows": [json.loads(line) for line in lines], "wall": float(wall),
                  "summary": "(from a kept log)", "returncode": 0}
    else:
        result, _ = measure(argv, options.get("--keep"))
    out = report(result)
    print(out["summary"])
    print(f"{out['tests']} tests, wall {out['wall_s']:.0f} s; {out['process_starts']} processes started by tests; "
          f"{out['xla_compiles']} XLA compiles ({out['compile_s']:.0f} s), {out['run_program_compiles']} of them run "
          f"programs; {out['compiled_again']} programs compiled again ({out['compiled_again_s']:.0f} s)")
    for w, row in out["workers"].items():
        print(f"  {w}: busy {row['busy_s']:.0f} s, idle {row['idle_s']:.0f} s "
              f"(first test at {row['first_test_at_s']:.0f} s, last done at {row['last_test_done_at_s']:.0f} s)")
    print("\n seconds  programs  processes  test")
    for test, seconds in list(out["per_test"].items())[:40]:
        print(f"{seconds:8.1f} {out['run_programs_per_test'].get(test, 0):9d} "
              f"{out['processes_per_test'].get(test, 0):10d}  {test}")
    if "--json" in options:
        Path(options["--json"]).write_text(json.dumps(out, indent=1))
    if "--durations" in options:  # tests/durations.json: the order conftest.py starts the tests in
        Path(options["--durations"]).write_text(json.dumps(
            {t: round(s, 1) for t, s in sorted(out["per_test"].items())}, indent=0) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
