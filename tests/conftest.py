"""Shared test helpers: run the CLI or a Python snippet in a fresh process.

The whole session (and every process it starts) shares one fresh persistent compilation
cache, so a program that several tests build is compiled once.
"""

import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
# The one time limit a test's subprocess gets: only a hang reaches it (a slow, loaded machine
# never should). No test checks wall time.
HANG_GUARD = 1800
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="scanrl-test-cache-"))
# MuJoCo picks its OpenGL platform when first imported, and a test may import Brax (and so
# MuJoCo) before any adapter does: choose EGL here, as the Brax and Playground adapters do
# without a display, so that no test process ever tries GLFW headless (a hard abort).
if not os.environ.get("DISPLAY"):
    import ctypes.util

    os.environ.setdefault("MUJOCO_GL", "egl" if ctypes.util.find_library("EGL") else "disable")

from scanrl.common.harness import devices  # noqa: E402  (after the cache dir is chosen)

devices.use_cpu_cores()  # as the command line does: one CPU device per core
devices.enable_compile_cache()


def unwrapped(text):
    """What a run printed, as one line: its sentences wrap to the console's width and its
    commands break with shell continuations (common/harness/console.py), so a test reads the
    words, not where the lines end."""
    return " ".join(text.replace(" \\\n", " ").split())


def run_python(args, env_extra=None, timeout=HANG_GUARD, cwd=None):
    """Run `python *args` in a new process; returns CompletedProcess (text)."""
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd or REPO
    )


def wait_until(found, procs, what):
    """Poll `found()` until it is true, while every process in `procs` (each with `poll()` and
    `communicate()`, as a Popen) still runs; a process that ends before `found()` fails the
    test with its stderr. Only a hang reaches HANG_GUARD."""
    hang = time.monotonic() + HANG_GUARD
    while not found():
        for proc in procs:
            ended = proc.poll() is not None and not found()  # not found, nor ever will be
            assert not ended, f"ended before {what}: " + proc.communicate()[1][-3000:]
        if time.monotonic() > hang:
            raise TimeoutError(f"hung: no {what} in {HANG_GUARD} s")
        time.sleep(0.01)  # a busy wait would take a core from the processes it waits for


def held(after, *command):
    """`command` ([script or -m module, *args]) through tests/hold_at_checkpoint.py: the run
    waits at its first checkpoint past update `after` until it gets a signal."""
    return [sys.executable, str(REPO / "tests" / "hold_at_checkpoint.py"), str(after), *map(str, command)]


def unboxed(text: str) -> str:
    """tyro draws its errors in a box: the words alone, on one line."""
    return " ".join(text.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


@pytest.fixture
def cli_error(capsys, tmp_path):
    """Run an algorithm's main(argv) in this process, as the command line would; returns
    (exit code, stderr on one line) and checks that no run folder was started."""

    def call(main, args):
        out_dir = tmp_path / "cli-error-out"
        with pytest.raises(SystemExit) as exit_info:
            main([*args, "--out-dir", str(out_dir)])
        assert not out_dir.exists() or not any(out_dir.iterdir())
        return exit_info.value.code, unboxed(capsys.readouterr().err)

    return call


@pytest.fixture
def python_process():
    return run_python


SCRIPTS_RUNNER = """
import contextlib, io, json, runpy, sys
results = []
for argv in json.loads(sys.argv[1]):
    sys.argv, out, err, code = list(argv), io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(argv[0], run_name="__main__")
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    results.append({"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
print("RESULT" + json.dumps(results))
"""


def run_scripts(command_lines, env_extra=None):
    """Run each command line [script, *args] as `python script *args` would (`__main__`), all in
    ONE new process, saving the interpreter and JAX start-up per line; returns
    [{"returncode", "stdout", "stderr"}] in order."""
    proc = run_python(["-c", SCRIPTS_RUNNER, json.dumps([list(map(str, c)) for c in command_lines])], env_extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


# --- every snippet that runs on 4 CPU devices, in one process --------------------------------------
# A test module registers its snippet at import (`four_device_snippet`). When a run holds tests
# of the `four_devices` fixture, the first worker to start its first test starts ONE process
# with 4 CPU devices that runs every registered snippet, case by case, in the background; the
# tests that read its results come last in the order. A snippet that fails fails only its own
# test.
FOUR_DEVICES: dict[str, tuple[str, list[list[str]]]] = {}
STARTED: list = []
FOUR_DEVICE_RUNNER = """
import contextlib, io, json, os, sys, traceback
snippets, path, results = sys.argv[1], sys.argv[2], {}
for name, (script, cases) in json.loads(open(snippets).read()).items():
    results[name] = []
    for args in cases:
        sys.argv, out = ["case", *args], io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(script, name, "exec"), {"__name__": "__main__"})
            line = next(l for l in out.getvalue().splitlines() if l.startswith("RESULT"))
            results[name].append(json.loads(line[len("RESULT"):]))
        except BaseException:
            results[name].append({"__failed__": traceback.format_exc() + out.getvalue()[-2000:]})
with open(path + ".part", "w") as f:
    json.dump(results, f)
os.replace(path + ".part", path)  # whole, or not there
"""


def four_device_snippet(name, script, *cases):
    """Register `script` (prints one line `RESULT<json>`) to run once per argument tuple in
    `cases` (none: once, without arguments) on 4 CPU devices; returns `name`."""
    FOUR_DEVICES[name] = (script, [list(map(str, case)) for case in cases] or [[]])
    return name


def run_folder(tmp_path_factory):
    """A folder the whole test run shares (every xdist worker's temp folder is in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_TESTRUNUID") else base


def reads_four_devices(item):
    return "four_devices" in getattr(item, "fixturenames", ())


@pytest.fixture(scope="session", autouse=True)
def four_device_process(request, tmp_path_factory):
    """Start the 4-device process, once per test run (whichever worker comes first), when a
    test that runs reads it; returns its folder."""
    from filelock import FileLock

    folder = run_folder(tmp_path_factory) / "four-devices"
    if not any(map(reads_four_devices, request.session.items)):
        return folder
    folder.mkdir(exist_ok=True)
    with FileLock(str(folder / "start.lock")):
        if (folder / "pid").exists():
            return folder
        (folder / "snippets.json").write_text(json.dumps(FOUR_DEVICES))
        env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
        with open(folder / "stderr.txt", "w") as err:
            proc = subprocess.Popen(
                [sys.executable, "-c", FOUR_DEVICE_RUNNER, str(folder / "snippets.json"), str(folder / "results.json")],
                stdout=subprocess.DEVNULL, stderr=err, cwd=REPO, env=env)
        (folder / "pid").write_text(str(proc.pid))
        STARTED.append(proc)  # held, so that it is not collected (and warned about) while it runs
    return folder


class Started:
    """The 4-device process, as `wait_until` sees it, from any worker (only one started it)."""

    def __init__(self, folder):
        self.pid, self.stderr = int((folder / "pid").read_text()), folder / "stderr.txt"

    def poll(self):  # None while it runs; an exited child not yet reaped counts as ended
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return 1
        stat = Path(f"/proc/{self.pid}/stat")
        zombie = stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z"
        return 1 if zombie else None

    def communicate(self):
        return "", self.stderr.read_text()


@pytest.fixture
def four_devices(four_device_process):
    """`four_devices(name)`: that snippet's results, one per case, in order."""
    results_path = four_device_process / "results.json"
    wait_until(results_path.exists, [Started(four_device_process)], "the 4-device results")
    results = json.loads(results_path.read_text())

    def of(name):
        for result in results[name]:
            assert "__failed__" not in result, result["__failed__"]
        return results[name]

    return of


def once_per_run(tmp_path_factory, name, compute):
    """`compute()` once for the whole test run, by whichever pytest-xdist worker asks first;
    the other waits for it and reads the same value (pickled beside the workers' temp folders).
    A module fixture is otherwise computed once per worker that runs one of its tests."""
    from filelock import FileLock

    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    path = run_folder(tmp_path_factory) / f"once-{run_id or 'main'}-{name}.pkl"
    with FileLock(f"{path}.lock"):
        if path.is_file():
            return pickle.loads(path.read_bytes())
        value = compute()
        path.write_bytes(pickle.dumps(value))
        return value


# The order the workers get the tests in, from each test's seconds (measured with
# benchmarks/suite_compiles.py and kept in tests/durations.json). `--dist worksteal` hands
# worker j the next len(left) // (workers - j) tests of this order, and a worker that runs out
# takes the second half of the other's queue. So the order is one block per worker, of those
# counts, with about equal seconds, each longest first; the tests that read the 4-device
# process end the last block, long after that process has written its results.
DURATIONS = json.loads((Path(__file__).parent / "durations.json").read_text())


def seconds(item):
    return DURATIONS.get(item.nodeid, 1.0)


@pytest.hookimpl(trylast=True)  # after `-m` and `-k` have deselected: only the tests that run
def pytest_collection_modifyitems(items):
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    readers = [item for item in items if reads_four_devices(item)]
    rest = sorted((item for item in items if not reads_four_devices(item)), key=seconds, reverse=True)
    sizes, left = [], len(items)
    for j in range(workers):
        sizes.append(left // (workers - j))
        left -= sizes[-1]
    sizes[-1] -= len(readers)
    blocks, load = [[] for _ in sizes], [0.0] * workers
    for item in rest:  # longest first, each to the block with the fewest seconds and room left
        j = min((j for j in range(workers) if len(blocks[j]) < sizes[j]), key=load.__getitem__)
        blocks[j].append(item)
        load[j] += seconds(item)
    items[:] = [item for block in blocks for item in block] + readers


def assert_shards_match_one_device(results, keys, rtol=2e-5, atol=1e-6):
    """results[shards][metric]: every split ("2", "4") agrees with one device ("1")."""
    for shards in ("2", "4"):
        for k in keys:
            np.testing.assert_allclose(
                np.array(results[shards][k], float), np.array(results["1"][k], float),
                rtol=rtol, atol=atol, err_msg=f"{k}, {shards} shards",
            )


def check_run_tools(run_dir):
    """What every finished run folder must give the tools: scanrl-eval, unchanged, reproduces
    the run's last evaluation per seed (same policy, keys and episode count), and curves.png
    is a picture of the run (not blank)."""
    from PIL import Image

    from scanrl import algos
    from scanrl.common.harness import evaluate

    metrics = np.load(Path(run_dir) / "metrics.npz")
    last = metrics["eval_return"][:, -1]
    assert np.isfinite(last).all()  # every run evaluates after its last update
    result = evaluate.main([str(run_dir), "--out", str(Path(run_dir) / "eval.json")], algos)
    np.testing.assert_allclose([r["mean"] for r in result["per_seed"]], last, rtol=1e-6)
    with Image.open(Path(run_dir) / "curves.png") as image:
        assert image.format == "PNG" and image.size[0] >= 600 and image.size[1] >= 400
        pixels = np.asarray(image.convert("RGB")).astype(int)
    drawn = (np.abs(pixels - 255).sum(axis=-1) > 30).mean()
    assert 0.02 < drawn < 0.6, drawn  # lines, bands and text, on a mostly white canvas


def assert_same_run(a: Path, b: Path):
    """params.npz and metrics.npz bit for bit, and progress.jsonl without gaps or duplicates."""
    for name in ("params.npz", "metrics.npz"):
        want, got = np.load(a / name), np.load(b / name)
        assert sorted(want.files) == sorted(got.files)
        for k in want.files:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{name} {k}")
    updates = lambda d: [json.loads(l)["update"] for l in (d / "progress.jsonl").read_text().splitlines()]
    assert updates(b) == updates(a)
