"""The Transformer-XL PPO's committed Craftax curves (Reytuag/transformerXL_PPO_JAX,
`results_craftax/base_A100_1e9/{0..4}_metrics.npy`: 5 seeds, 1e9 env steps, 7,629 updates of
1,024 envs x 128 steps on one A100) as a small numpy file, and scanrl's runs scored against them
at the same env steps (benchmarks/trxl_gpu.sh's runs).

The committed files are `np.save`d dicts, pickled: they are read once, here, by an unpickler that
admits numpy's array and dtype types only, and jax's array reconstructor mapped to numpy's (the
arrays were jax arrays when saved); anything else is refused. Never `allow_pickle`.

    python benchmarks/trxl_curves.py --extract TRXL_GIT --out benchmarks/reference/trxl_ppo
    python benchmarks/trxl_curves.py --table WORK  # WORK: trxl_gpu.sh's work folder

The score, alike on both sides: each seed's mean of the per-update training return (the mean
return of the episodes that ended in the update) over the last 10% of the updates up to the
step count scanrl reached, updates where none ended skipped; IQM over seeds with its 95%
stratified-bootstrap interval.
"""

from __future__ import annotations

import argparse
import io
import json
import pickle
import subprocess
from pathlib import Path

import numpy as np

import sidebyside

COMMIT = "d914d55b8e972c481845529d8b61cf3db88bd379"
FOLDER = "results_craftax/base_A100_1e9"
STEPS_PER_UPDATE = 1024 * 128
KEYS = ("returned_episode_returns", "returned_episode_lengths", "score")
NUMPY_TYPES = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
               ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
               ("numpy._core.multiarray", "scalar")}


def _jax_array_as_numpy(fun, args, arr_state, aval_state):
    """jax's `_reconstruct_array`, without jax: the numpy array the pickle holds."""
    array = fun(*args)
    array.__setstate__(arr_state)
    return array


class NumpyOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) == ("jax._src.array", "_reconstruct_array"):
            return _jax_array_as_numpy
        if (module, name) in NUMPY_TYPES:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused: {module}.{name} is not a numpy type")


def load_metrics(raw: bytes) -> dict[str, np.ndarray]:
    """A committed `{seed}_metrics.npy` (a 0-d object array holding a dict of arrays)."""
    f = io.BytesIO(raw)
    np.lib.format.read_magic(f)
    shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    if shape != () or dtype != np.dtype(object):
        raise ValueError(f"expected a pickled 0-d object array, got {shape} {dtype}")
    holder = NumpyOnly(f).load()
    return {k: np.asarray(v) for k, v in holder.item().items()}


def extract(git_dir: Path, out: Path) -> None:
    curves = {}
    for seed in range(5):
        raw = subprocess.run(["git", "--git-dir", str(git_dir), "show",
                              f"{COMMIT}:{FOLDER}/{seed}_metrics.npy"],
                             capture_output=True, check=True).stdout
        metrics = load_metrics(raw)
        for k in KEYS:
            curves.setdefault(k, []).append(metrics[k].astype(np.float32))
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "committed_curves.npz", steps_per_update=STEPS_PER_UPDATE,
                        **{k: np.stack(v) for k, v in curves.items()})
    print(f"wrote {out / 'committed_curves.npz'}: {', '.join(KEYS)}, [5 seeds, "
          f"{len(curves[KEYS[0]][0])} updates]")


def last_tenth(per_update: np.ndarray) -> np.ndarray:
    """[seeds, updates] -> each seed's final return by scanrl's own estimator
    (stats.final_returns: the last ceil(10%) of updates, NaN updates skipped)."""
    from scanrl.common.harness.stats import final_returns

    return final_returns(per_update)


def committed_at(curves: Path, env_steps: int) -> np.ndarray:
    """The committed seeds' scores over their updates up to `env_steps`."""
    c = np.load(curves)
    updates = max(1, env_steps // int(c["steps_per_update"]))
    return last_tenth(c["returned_episode_returns"][:, :updates].astype(np.float64))


def table(work: Path, curves: Path) -> str:
    rows = ["| run | env steps/seed | wall (s) | final return IQM [95% CI] | "
            "transformerXL_PPO_JAX at those steps (5 committed seeds) |", "|---|---:|---:|---:|---:|"]
    for summary_path in sorted(work.glob("*/*/summary.json")):
        summary = json.loads(summary_path.read_text())
        ours = np.load(summary_path.parent / "metrics.npz")["episode_return"][:, :summary["updates"]]
        steps = int(summary["total_timesteps"])
        rows.append(f"| {summary_path.parent.parent.name} | {steps:,} | "
                    f"{summary['wall_seconds']:,.0f} | "
                    f"{sidebyside.iqm_text(last_tenth(ours.astype(np.float64)), 2)} | "
                    f"{sidebyside.iqm_text(committed_at(curves, steps), 2)} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--extract", type=Path, metavar="TRXL_GIT",
                        help="the repository's git directory (a fetch's mirror)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "reference" / "trxl_ppo")
    parser.add_argument("--table", type=Path, metavar="WORK", help="trxl_gpu.sh's work folder")
    args = parser.parse_args()
    if args.extract:
        extract(args.extract, args.out)
    if args.table:
        print(table(args.table, args.out / "committed_curves.npz"))


if __name__ == "__main__":
    main()
