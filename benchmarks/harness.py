"""This checkout against another one (e.g. the current main in a second venv), side by side.

Each case is a command-line run in a fresh process; runs of the two checkouts alternate
(A B A B ...) so that machine noise falls on both alike. Reports the median of the repeats
of summary.json's env_steps_per_second (all seeds, compile excluded) and wall_seconds,
and the ratio this/other. `--compile` instead measures compile_seconds of each case: cold
(an empty persistent cache) and the cached start (a second process on the same cache).
`--progress on` (or off) runs each case with progress lines only on (or off).

    python benchmarks/harness.py --other-python /path/venv-main/bin/python --other-repo /path/main-checkout
    python benchmarks/harness.py --other-python ... --other-repo ... --compile
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CASES = {  # name: (script, flags); progress "on" is the file's default --log-every
    "ppo CartPole 1 seed": ("algos/ppo.py", ["--num-seeds", "1", "--eval-every", "0"]),
    "ppo CartPole 8 seeds": ("algos/ppo.py", ["--num-seeds", "8", "--eval-every", "0"]),
    "sac Pendulum 1 seed": ("algos/sac.py", ["--num-seeds", "1", "--eval-every", "0"]),
    "ppo CartPole 1 seed, data-parallel 2": ("algos/ppo.py", ["--num-seeds", "1", "--data-parallel", "2", "--eval-every", "0"]),
    "sac Pendulum 1 seed, 4 envs": ("algos/sac.py", ["--num-seeds", "1", "--num-envs", "4", "--eval-every", "0"]),
    "sac Pendulum 1 seed, 4 envs, data-parallel 2": ("algos/sac.py", ["--num-seeds", "1", "--num-envs", "4", "--data-parallel", "2",
                                                     "--eval-every", "0"]),
}


def run(python: str, repo: Path, script: str, flags: list[str], cache: str) -> dict:
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": cache}
        proc = subprocess.run([python, script, *flags, "--out-dir", out], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=900)
        if proc.returncode:
            raise RuntimeError(proc.stderr[-2000:])
        (run_dir,) = Path(out).iterdir()
        return json.loads((run_dir / "summary.json").read_text())


def throughput(sides: dict, repeats: int, progress: str) -> None:
    print("| case | progress | this env steps/s | other env steps/s | ratio | this wall s | other wall s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    caches = {name: tempfile.mkdtemp() for name in sides}
    for case, (script, flags) in CASES.items():
        for progress_, extra in (("on", []), ("off", ["--log-every", "0"])):
            if progress not in ("both", progress_):
                continue
            results = {name: [] for name in sides}
            for name, (python, repo) in sides.items():  # warm each side's cache first
                run(python, repo, script, flags + extra, caches[name])
            for _ in range(repeats):
                for name, (python, repo) in sides.items():
                    results[name].append(run(python, repo, script, flags + extra, caches[name]))
            med = {n: {k: statistics.median(r[k] for r in rs) for k in ("env_steps_per_second", "wall_seconds")}
                   for n, rs in results.items()}
            sps = {n: med[n]["env_steps_per_second"] for n in sides}
            print(f"| {case} | {progress_} | {sps['this']:,.0f} | {sps['other']:,.0f} | {sps['this'] / sps['other']:.2f} "
                  f"| {med['this']['wall_seconds']:.1f} | {med['other']['wall_seconds']:.1f} |", flush=True)


def compile_times(sides: dict, repeats: int, progress: str) -> None:
    print("| case | checkout | compile cold s (median) | cached start s (median) | all cold | all cached | program_cache |")
    print("|---|---|---:|---:|---|---|---|")
    for case, (script, flags) in CASES.items():
        compile_case(sides, repeats, case, script, flags)


def compile_case(sides: dict, repeats: int, case: str, script: str, flags: list[str]) -> None:
    rows = {name: {"cold": [], "cached": [], "path": set()} for name in sides}
    for _ in range(repeats):
        for name, (python, repo) in sides.items():
            cache = tempfile.mkdtemp()
            rows[name]["cold"].append(run(python, repo, script, flags, cache)["compile_seconds"])
            cached = run(python, repo, script, flags, cache)
            rows[name]["cached"].append(cached["compile_seconds"])
            rows[name]["path"].add(cached.get("program_cache", "-"))  # summary.json's, where it has one
    for name, r in rows.items():
        print(f"| {case} | {name} | {statistics.median(r['cold']):.2f} | {statistics.median(r['cached']):.2f} "
              f"| {', '.join(f'{x:.2f}' for x in r['cold'])} | {', '.join(f'{x:.2f}' for x in r['cached'])} "
              f"| {', '.join(sorted(r['path']))} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--other-python", required=True)
    parser.add_argument("--other-repo", required=True, type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--progress", choices=("on", "off", "both"), default="both")
    parser.add_argument("--cases", nargs="*", default=list(CASES), help="a subset of the cases, by name")
    args = parser.parse_args()
    for name in set(CASES) - set(args.cases):
        del CASES[name]
    sides = {"this": (sys.executable, REPO), "other": (args.other_python, args.other_repo)}
    (compile_times if args.compile else throughput)(sides, args.repeats, args.progress)


if __name__ == "__main__":
    main()
