"""What the GPU scripts (pqn_gpu.sh, trxl_gpu.sh, jaxmarl_gpu.sh) record of the machine they ran
on: the UTC time, the GPU (nvidia-smi), scanrl's commit (SCANRL_COMMIT, else git's), JAX's
version, backend and devices, and the versions of the packages named.

    python benchmarks/device_info.py flax optax numpy gymnax
"""

import datetime
import importlib.metadata
import os
import subprocess
import sys


def run(command: list[str], otherwise: str) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return otherwise


def main(packages: list[str]) -> None:
    print(datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    print(run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv"],
              "no GPU"))
    commit = os.environ.get("SCANRL_COMMIT") or run(["git", "rev-parse", "HEAD"], "unknown")
    print(f"scanrl commit: {commit}")
    import jax

    print("jax", jax.__version__, jax.default_backend(), jax.devices())
    for name in ["jaxlib", *packages]:
        try:
            print(name, importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            print(name, "-")


if __name__ == "__main__":
    main(sys.argv[1:])
