"""Shared test helpers: run the CLI or a Python snippet in a fresh process."""

import os
import subprocess
import sys
from pathlib import Path

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
