"""Shared test helpers: run the CLI or a Python snippet in a fresh process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def run_python(args, env_extra=None, timeout=600, cwd=None):
    """Run `python *args` in a new process; returns CompletedProcess (text)."""
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd or REPO
    )


@pytest.fixture
def python_process():
    return run_python


def run_on_devices(script, *args, num_devices=4):
    """Run a Python snippet in a new process with `num_devices` CPU devices. The snippet
    prints one line `RESULT<json>`; returns the parsed JSON."""
    proc = run_python(
        ["-c", script, *map(str, args)],
        env_extra={"XLA_FLAGS": f"--xla_force_host_platform_device_count={num_devices}"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


@pytest.fixture
def on_devices():
    return run_on_devices


def assert_shards_match_one_device(results, keys, rtol=2e-5, atol=1e-6):
    """results[shards][metric]: every split ("2", "4") agrees with one device ("1")."""
    for shards in ("2", "4"):
        for k in keys:
            np.testing.assert_allclose(
                np.array(results[shards][k], float), np.array(results["1"][k], float),
                rtol=rtol, atol=atol, err_msg=f"{k}, {shards} shards",
            )
