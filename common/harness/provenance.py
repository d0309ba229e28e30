"""What produced a run folder: `provenance.json`, written when a run starts and extended each
time it resumes.

{"sessions": [{"update": 0, "started": ISO time, "argv": [...],
               "scanrl": {"version", "commit", "dirty"},
               "algorithm_file": {"path", "sha256"},
               "packages": {name: version}, "python", "platform", "devices"}, ...]}

`commit` and `dirty` come from git where scanrl runs from a checkout (null for an installed
wheel); `dirty` is true when tracked files differ from the commit. `sha256` is the algorithm
file's content when the session started, so that a copied file edited after the run is seen.
`packages` holds the versions of JAX, the kit's libraries and every environment suite
installed. A resumed run adds a session with the update it resumed from.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import json
import platform
import subprocess
import sys
from pathlib import Path

import jax

PACKAGES = (
    "jax",
    "jaxlib",
    "numpy",
    "optax",
    "distrax",
    "flax",
    "gymnax",
    "brax",
    "mujoco",
    "playground",
    "jumanji",
    "craftax",
    "navix",
    "xminigrid",
)
ROOT = Path(__file__).resolve().parents[2]  # a checkout's root, or the installed scanrl package


def algorithm_path(algo: str, algo_file: str | None) -> Path:
    """The file that trained the run: a copy's own path, else scanrl's algos/<algo>.py."""
    return Path(algo_file) if algo_file else ROOT / "algos" / f"{algo}.py"


def git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def scanrl_source() -> dict:
    """{"version", "commit", "dirty"}: commit and dirty are None outside a git checkout."""
    try:
        version = importlib.metadata.version("scanrl")
    except importlib.metadata.PackageNotFoundError:
        version = None
    commit = git("rev-parse", "HEAD") if (ROOT / ".git").exists() else None
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"version": version, "commit": commit, "dirty": None if status is None else bool(status)}


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return versions


def session(update: int, algo: str, algo_file: str | None) -> dict:
    path = algorithm_path(algo, algo_file)
    devices = jax.devices()
    return {
        "update": update,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "argv": list(sys.argv),
        "scanrl": scanrl_source(),
        "algorithm_file": {
            "path": str(path),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None,
        },
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "devices": f"{len(devices)} x {devices[0].device_kind}",
    }


def record(
    run_dir: Path, update: int, algo: str, algo_file: str | None, resumed: bool = False
) -> None:
    """Add this session (starting at `update`) to run_dir/provenance.json: a new run's first,
    a resumed run's after those it has (a folder from before provenance.json starts one)."""
    path = Path(run_dir) / "provenance.json"
    sessions = json.loads(path.read_text())["sessions"] if resumed and path.is_file() else []
    sessions.append(session(update, algo, algo_file))
    path.write_text(json.dumps({"sessions": sessions}, indent=2) + "\n")
