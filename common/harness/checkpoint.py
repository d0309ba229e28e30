"""Checkpoints: a run's whole state in one .npz file, written atomically, the last few kept.

Why npz and not orbax (research/lifecycle-notes.md, section 1): a checkpoint is saved between
chunks, from the driver, synchronously; numpy writes it in ~30 lines with nothing to wait for
in the background, no absolute-path trap, and typed PRNG keys stored as their raw key data.
A file `checkpoints/update_<n>.npz` holds the state's leaves (`leaf_<i>`), the tree structure
and each leaf's shape and dtype (checked on restore, so a changed state never loads into the
wrong slots), and any extra arrays the driver keeps (metrics so far, stop-condition counters).
It is written to a temporary file in the same folder and renamed with `os.replace`: a process
killed mid-write leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

KEEP = 3  # checkpoints kept per run (older ones are deleted after a save)
NAME = re.compile(r"^update_(\d+)\.npz$")


def _is_key(x) -> bool:
    return jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _host(tree: Any) -> list[np.ndarray]:
    """The leaves of a (possibly sharded, possibly multi-process) tree as numpy arrays."""
    leaves = [jax.random.key_data(x) if _is_key(x) else x for x in jax.tree.leaves(tree)]
    spread = [x for x in leaves if isinstance(x, jax.Array) and not x.is_fully_addressable]
    if spread:  # across processes: one program replicates every leaf onto every process
        from jax.sharding import NamedSharding, PartitionSpec

        replicated = NamedSharding(spread[0].sharding.mesh, PartitionSpec())
        leaves = jax.jit(lambda xs: xs, out_shardings=replicated)(leaves)
    return [np.asarray(x) for x in leaves]


def tree_text(treedef: Any) -> str:
    """A tree structure as text that another process writes the same: without the memory
    addresses that some nodes' static data prints (MuJoCo MJX's `Contact` shows
    `<... object at 0x7f...>`), which differ in every process."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", str(treedef))


def describe(tree: Any) -> dict[str, Any]:
    """Tree structure and leaf shapes/dtypes, the fingerprint a restore checks."""
    leaves, treedef = jax.tree.flatten(tree)
    return {
        "treedef": tree_text(treedef),
        "leaves": [[list(x.shape), str(x.dtype)] for x in leaves],
    }


def save(
    folder: Path, update: int, tree: Any, extra: dict[str, np.ndarray] | None = None,
    write: bool = True,
) -> Path:
    """Write `tree` (and `extra` arrays) as `folder/update_<update>.npz`; keep the last KEEP.

    Every process of a multi-process run must call it (gathering is collective); only those
    with `write` write. Returns the file's path."""
    leaves = _host(tree)
    path = Path(folder) / f"update_{update}.npz"
    if not write:
        return path
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {f"leaf_{i}": a for i, a in enumerate(leaves)}
    arrays["fingerprint"] = np.array(json.dumps(describe(tree)))
    arrays.update({f"extra_{k}": np.asarray(v) for k, v in (extra or {}).items()})
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".update_", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:  # a file object: np.savez("x.tmp") would write x.tmp.npz
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    for old in all_checkpoints(folder)[:-KEEP]:
        old.unlink(missing_ok=True)
    return path


def all_checkpoints(folder: Path) -> list[Path]:
    """The folder's checkpoint files, oldest first (by update)."""
    if not Path(folder).is_dir():
        return []
    found = [(int(m.group(1)), p) for p in Path(folder).iterdir() if (m := NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def finished(run_dir: Path) -> bool:
    """Whether a run folder holds a finished run: a summary.json, not stopped by an interrupt
    (or interrupted with no whole update of its budget left, which a resume would refuse)."""
    path = Path(run_dir) / "summary.json"
    if not path.is_file():
        return False
    s = json.loads(path.read_text())
    if s["stopped_by"] != "interrupt":
        return True
    budget = json.loads((Path(run_dir) / "config.json").read_text()).get("total_timesteps", 0)
    per_update = s["total_timesteps"] / max(s["updates"], 1)
    return bool(budget) and s["total_timesteps"] + per_update > budget


def run_state(run_dir: Path | None) -> str:
    """What a list of runs that resumes (a loop-mode sweep's configs, a suite's cells) does with
    one entry's run folder: "start" (there is none), "finished" (skip it), "resume" (continue
    from its last checkpoint) or "restart" (it stopped before its first checkpoint: delete the
    folder and start again)."""
    if run_dir is None or not Path(run_dir).exists():
        return "start"
    if finished(run_dir):
        return "finished"
    return "resume" if all_checkpoints(Path(run_dir) / "checkpoints") else "restart"


def to_resume(resume: str) -> Path:
    """The checkpoint `--resume RUN_DIR` continues from: the folder's last (ValueError with one
    sentence where it has none)."""
    found = all_checkpoints(Path(resume) / "checkpoints")
    if not found:
        raise ValueError(f"--resume {resume} has no checkpoint (the run stopped before its first "
                         f"one); start it again with --config {resume}/config.json.")
    return found[-1]


def check_unfinished(ckpt: Path | None, resume: str, num_updates: int) -> None:
    """ValueError with one sentence where the checkpoint to resume already trained the whole run."""
    if ckpt is not None and update_of(ckpt) >= num_updates:
        raise ValueError(f"--resume {resume}: the run already trained all {num_updates} updates; "
                         f"raise --total-timesteps to extend it.")


def verify_resume(resume: str, ckpt: Path | None, state_shape: Any) -> None:
    """`verify`, as the sentence `--resume` fails with (nothing to check without a checkpoint)."""
    if ckpt is not None:
        try:
            verify(ckpt, state_shape)
        except ValueError as e:
            raise ValueError(f"--resume {resume}: {e} A flag (e.g. SAC's replay buffer is capped "
                             f"at --total-timesteps) or another version of scanrl changed the "
                             "state's shapes; start a new run instead.") from None


def update_of(path: Path) -> int:
    return int(NAME.match(Path(path).name).group(1))


def verify(path: Path, template: Any) -> None:
    """ValueError unless the checkpoint holds a state shaped like `template`."""
    with np.load(path) as z:
        saved = json.loads(str(z["fingerprint"]))
    expected = describe(template)
    saved["treedef"] = tree_text(
        saved["treedef"]
    )  # a checkpoint written before addresses were left out
    if saved != expected:
        diff = next(
            (
                f"leaf {i}: saved {a}, now {b}"
                for i, (a, b) in enumerate(zip(saved["leaves"], expected["leaves"]))
                if a != b
            ),
            "the tree structure differs",
        )
        raise ValueError(f"checkpoint {path} does not match this run's state ({diff}).")


def read(path: Path) -> tuple[dict[str, Any], list[np.ndarray]]:
    """A checkpoint's fingerprint and raw leaves, as saved (keys as key data), without a
    template."""
    with np.load(path) as z:
        fingerprint = json.loads(str(z["fingerprint"]))
        return fingerprint, [z[f"leaf_{i}"] for i in range(len(fingerprint["leaves"]))]


def load(path: Path, template: Any) -> tuple[Any, dict[str, np.ndarray]]:
    """Restore a tree saved by `save` onto `template`'s structure and shardings (arrays or
    jax.ShapeDtypeStruct with .sharding). Returns (tree, extra). ValueError if the saved state
    does not match the template (different config, or a changed algorithm file)."""
    leaves, treedef = jax.tree.flatten(template)
    verify(path, template)
    with np.load(path) as z:
        raw = [z[f"leaf_{i}"] for i in range(len(leaves))]
        extra = {k[len("extra_"):]: z[k] for k in z.files if k.startswith("extra_")}

    def place(a: np.ndarray, t):
        data = a
        sharding = getattr(t, "sharding", None)
        if _is_key(t):
            shape = a.shape
            out = (
                jax.make_array_from_callback(
                    shape, _key_data_sharding(sharding, shape), lambda i: data[i]
                )
                if sharding is not None
                else jnp.asarray(data)
            )
            return jax.random.wrap_key_data(
                out
            )  # the default (threefry) implementation, as seed_keys makes
        if sharding is None:
            return jnp.asarray(data)
        return jax.make_array_from_callback(a.shape, sharding, lambda i: data[i])

    return treedef.unflatten([place(a, t) for a, t in zip(raw, leaves)]), extra


def _key_data_sharding(sharding, shape):
    """A typed key array's sharding, extended over the trailing key-data axis."""
    from jax.sharding import NamedSharding, PartitionSpec

    if isinstance(sharding, NamedSharding):
        spec = tuple(sharding.spec) + (None,) * (len(shape) - len(sharding.spec))
        return NamedSharding(sharding.mesh, PartitionSpec(*spec))
    return sharding
