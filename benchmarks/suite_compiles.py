"""Where the test suite's time goes: every XLA compile, trace and lowering in the pytest
workers and in every process the tests start, summed per test and per jitted function.

A `sitecustomize` module on PYTHONPATH (so every Python process of the run loads it)
registers a `jax.monitoring` listener that appends one JSON line per event to a log; then
the events are added up and set beside pytest's own durations. It also counts, by JAX's
persistent-cache key, how many distinct programs were compiled and which were compiled again
(a program two tests could have shared but did not).

    python benchmarks/suite_compiles.py                  # the README's test command
    python benchmarks/suite_compiles.py tests/test_loop.py -n 1
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVENTS = ("backend_compile_duration", "jaxpr_trace_duration", "jaxpr_to_mlir_module_duration")

LISTENER = """
import json, os, sys
import jax.monitoring
def _listener(event, duration, **kw):
    name = event.rsplit("/", 1)[-1]
    if name in %r:
        with open(os.environ["SUITE_COMPILE_LOG"], "a") as f:
            f.write(json.dumps({"event": name, "seconds": duration, "pid": os.getpid(),
                                "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0],
                                "fun": str(kw.get("fun_name", "?"))}) + "\\n")
jax.monitoring.register_event_duration_secs_listener(_listener)

# Each program XLA compiles for JAX's persistent cache, by its cache key, and each cache hit:
# a key compiled twice is a program the cache did not share. (JAX internals: skipped quietly
# if they move. scanrl's own program cache compiles with JAX's cache off, so the CLI runs'
# programs are not in this census; they are in the compile times above.)
try:
    import time
    from jax._src import compiler as _compiler
    _compile = _compiler._compile_and_write_cache
    _hit = _compiler.log_persistent_cache_hit
    def _census(**row):
        row.update(pid=os.getpid(), test=os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0])
        with open(os.environ["SUITE_COMPILE_LOG"], "a") as f:
            f.write(json.dumps({"event": "census", **row}) + "\\n")
    def _compiled(backend, computation, devices, options, callbacks, module_name, cache_key):
        start = time.time()
        try:
            return _compile(backend, computation, devices, options, callbacks, module_name, cache_key)
        finally:
            _census(key=cache_key, fun=module_name, seconds=time.time() - start)
    def _hit_logged(module_name, cache_key):
        _census(key=cache_key, fun=module_name, hit=True)
        return _hit(module_name, cache_key)
    _compiler._compile_and_write_cache = _compiled
    _compiler.log_persistent_cache_hit = _hit_logged
except Exception:
    pass
""" % (EVENTS,)


def main(pytest_args: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(LISTENER)
        log = Path(tmp) / "events.jsonl"
        env = {**os.environ, "SUITE_COMPILE_LOG": str(log),
               "PYTHONPATH": os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")]))}
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0",
                               *(pytest_args or ["-n", "2"])], cwd=REPO, env=env, capture_output=True, text=True)
        rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:])
    durations = collections.Counter()
    for line in proc.stdout.splitlines():
        match = re.match(r"([0-9.]+)s (call|setup|teardown)\s+(\S+)", line)
        if match:
            durations[match.group(3)] += float(match.group(1))
    census = [r for r in rows if r["event"] == "census"]
    rows = [r for r in rows if r["event"] != "census"]
    compile_s, lower_s, compiles = collections.Counter(), collections.Counter(), collections.Counter()
    by_fun, by_fun_n = collections.Counter(), collections.Counter()
    for r in rows:
        if r["event"] == "backend_compile_duration":
            compile_s[r["test"]] += r["seconds"]
            compiles[r["test"]] += 1
            if r["seconds"] > 0.5:
                by_fun[r["fun"]] += r["seconds"]
                by_fun_n[r["fun"]] += 1
        else:
            lower_s[r["test"]] += r["seconds"]
    print(f"tests' durations {sum(durations.values()):.0f} s; XLA compile {sum(compile_s.values()):.0f} s in "
          f"{sum(compiles.values())} compiles; tracing and lowering {sum(lower_s.values()):.0f} s; "
          f"{len({r['pid'] for r in rows})} processes")
    print("\nfunction (compiles over 0.5 s): seconds, count")
    for fun, seconds in by_fun.most_common(8):
        print(f"  {fun}: {seconds:.0f} s, {by_fun_n[fun]}")
    compiled = [r for r in census if not r.get("hit") and r["seconds"] > 0.3]
    first, repeats = set(), []
    for r in compiled:
        (repeats.append(r) if r["key"] in first else first.add(r["key"]))
    print(f"\npersistent-cache census: {len(compiled)} compiles over 0.3 s ({sum(r['seconds'] for r in compiled):.0f} s) "
          f"of {len(first)} distinct programs; {len(repeats)} compiled a program again "
          f"({sum(r['seconds'] for r in repeats):.0f} s); {sum(1 for r in census if r.get('hit'))} cache hits")
    for r in repeats:
        print(f"  again: {r['fun']} {r['seconds']:.1f} s in {r['test'] or '(collection)'}")

    print("\n duration  compile  lower  rest  test")
    for test, seconds in durations.most_common(30):
        rest = seconds - compile_s[test] - lower_s[test]
        print(f"{seconds:8.1f} {compile_s[test]:8.1f} {lower_s[test]:6.1f} {rest:5.1f}  {test}")


if __name__ == "__main__":
    main(sys.argv[1:])
