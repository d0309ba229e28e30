"""Hyperparameter sweeps: configs x seeds in one program.

`--sweep FIELD=V1,V2,...` (a grid: the product over every such flag) and
`--sweep FIELD=log:LOW:HIGH` / `FIELD=uniform:LOW:HIGH` (random search: `--sweep-samples K`
draws, seeded by `--seed`) give `configs` settings of the swept fields. Each (config, seed)
pair is one row of the device mesh's seed axis, config-major: row `c * num_seeds + s` is
config c with seed key `seed + s`, so it computes what the single run of that config and
seed computes. The swept values enter the program as arrays: `make_algorithm` builds the
pieces from a `Swept` view of the Config whose swept fields are traced scalars (the Config
itself is never changed), so one compile serves every config. A field that sets shapes or Python
control flow (sizes, booleans, a branch on the value) cannot: it is refused with one sentence, or
run one program per config with `--sweep-mode loop`.

What a sweep's run folder adds (`sweep.json`, `best_config.json`, `sweep.png`) is written by
common/harness/reports.py; `metrics.npz` is `[configs, seeds, updates]`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import types
import typing
from typing import Any

import numpy as np

from scanrl.common.harness.configs import coerce


@dataclasses.dataclass(frozen=True)
class Sweep:
    """The swept fields' values, one entry per config: values[name] has shape [configs]."""

    values: dict[str, np.ndarray]
    log_fields: frozenset[
        str
    ]  # drawn log-uniformly, or a grid of 3+ values spanning 10x or more: log axis in sweep.png
    # where each field's values come from: ("grid", values), ("log", low, high) or ("uniform", low,
    # high)
    space: dict[str, tuple] = dataclasses.field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(next(iter(self.values.values())))

    def config_values(self, c: int) -> dict[str, Any]:
        return {
            k: v[c].item() if isinstance(v[c], np.generic) else v[c] for k, v in self.values.items()
        }


def _grid_value(text: str, hint: Any, spec: str) -> Any:
    """One value of a loop-mode grid, as its field's type: 4, 0.5, true, relu, 64x64 (a tuple)."""
    if typing.get_origin(hint) is tuple:
        value = [part for part in text.split("x")]
    else:
        value = text
    try:
        return coerce(value, hint)
    except ValueError as e:
        raise ValueError(f"--sweep {spec}: {text} is not {e}.") from None


def parse(specs: tuple[str, ...], samples: int, seed: int, config: Any, loop: bool = False,
          population: int | None = None) -> Sweep | None:
    """The sweep that `--sweep` specs ask for (None without any); ValueError with one sentence
    for a malformed spec, an unknown field or a field that cannot be swept in one program.
    With `loop` (--sweep-mode loop: one program per config) any field of the Config may be
    swept on a grid: integers, switches, activations, hidden sizes written 64x64. With
    `population` (--pbt) there are exactly that many rows: the rows of this sweep with
    population / (grid points) random draws (a multiple of the grid's points), so a
    population starts from the configs of the sweep of the same size; the random fields' bounds
    must pass the Config's checks too (explore keeps values within them)."""
    if not specs:
        return None
    grid, random_fields = {}, {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not text:
            raise ValueError(
                f"--sweep {spec}: write FIELD=V1,V2,... or FIELD=log:LOW:HIGH or"
                " FIELD=uniform:LOW:HIGH."
            )
        hint = check_field(config, name, spec, loop)
        if name in grid or name in random_fields:
            raise ValueError(f"--sweep {spec}: {name} is swept twice.")
        kind = text.split(":")[0]
        if kind in ("log", "uniform"):
            parts = text.split(":")
            try:
                low, high = float(parts[1]), float(parts[2])
                assert len(parts) == 3 and math.isfinite(low) and math.isfinite(high) and low < high
                assert kind == "uniform" or low > 0
            except (AssertionError, IndexError, ValueError):
                raise ValueError(
                    f"--sweep {spec}: {kind}:LOW:HIGH needs two finite numbers with LOW < HIGH"
                    f"{' and LOW > 0' if kind == 'log' else ''}."
                ) from None
            if not _is_float(hint):
                raise ValueError(
                    f"--sweep {spec}: random search draws real numbers; list {name}'s values"
                    " instead."
                )
            random_fields[name] = (kind, low, high)
        elif loop and not _is_float(hint):
            grid[name] = [_grid_value(v.strip(), hint, spec) for v in text.split(",") if v.strip()]
        else:
            try:
                values = [float(v) for v in text.split(",") if v.strip()]
                assert values and all(math.isfinite(v) for v in values)
            except (AssertionError, ValueError):
                raise ValueError(
                    f"--sweep {spec}: the values must be finite numbers separated by commas."
                ) from None
            grid[name] = values
    if random_fields and samples < 1:
        raise ValueError(f"--sweep-samples must be at least 1 for random search, got {samples}.")
    combos = [dict(zip(grid, point)) for point in itertools.product(*grid.values())] or [{}]
    if population:  # the sweep's rows with population / grid points draws each
        if population % len(combos):
            raise ValueError(
                f"--pbt-population {population} is not a multiple of the --sweep grid's"
                f" {len(combos)} points; each point starts the same number of members."
            )
        samples = population // len(combos)
    rng = np.random.default_rng(seed)  # reproducible with --seed
    draws = {}
    for name, (kind, low, high) in random_fields.items():
        u = rng.uniform(size=samples)
        draws[name] = (
            np.exp(np.log(low) + u * (np.log(high) - np.log(low)))
            if kind == "log"
            else low + u * (high - low)
        )
    rows = [{**combo, **{k: float(d[i]) for k, d in draws.items()}} for combo in combos
            for i in range(samples if random_fields or population else 1)]
    if population:
        for name, (kind, low, high) in random_fields.items():
            for bound in (low, high):
                try:
                    dataclasses.replace(config, **{name: bound})
                except ValueError as e:
                    raise ValueError(
                        f"--sweep {name}={kind}:{low:g}:{high:g}: the bound {bound:g} fails: {e}"
                    ) from None
    values = {}
    for k in rows[0]:
        column = [r[k] for r in rows]
        if all(isinstance(v, float) for v in column):
            values[k] = np.array(column, np.float64)
        else:  # integers, switches, names, tuples (loop mode): kept as they are
            values[k] = np.empty(len(column), object)
            values[k][:] = column
    for row in rows:  # each config must pass the Config's own checks (e.g. gamma in (0, 1])
        try:
            dataclasses.replace(config, **row)
        except ValueError as e:
            raise ValueError(f"--sweep: {e}") from None
    logs = {k for k, kind in random_fields.items() if kind[0] == "log"}
    logs |= {
        k
        for k, v in grid.items()
        if len(v) > 2
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in v)
        and max(v) / min(v) >= 10
    }
    space = {**{k: ("grid", tuple(v)) for k, v in grid.items()}, **random_fields}
    return Sweep(values=values, log_fields=frozenset(logs), space=space)


def _is_float(hint: Any) -> bool:
    return hint is float or (
        typing.get_origin(hint) in (typing.Union, types.UnionType)
        and float in typing.get_args(hint)
    )


def check_field(config: Any, name: str, spec: str, loop: bool = False) -> Any:
    """The field's type hint. In one program only float hyperparameters can be traced; sizes,
    switches and names need --sweep-mode loop. The env id is never swept (presets follow it)."""
    fields = {f.name: f for f in dataclasses.fields(config)}
    if name not in fields:
        raise ValueError(
            f"--sweep {spec}: {type(config).__module__.rsplit('.', 1)[-1]} has no hyperparameter"
            f" {name}."
        )
    if name == "env":
        raise ValueError(
            f"--sweep {spec}: the env id picks each algorithm's presets; start one sweep per env."
        )
    hint = typing.get_type_hints(type(config))[name]
    if not loop and not _is_float(hint):
        why = {
            int: "sets array shapes or loop lengths (an integer)",
            bool: "switches parts of the program on or off",
        }
        reason = why.get(hint, "sets the program's structure")
        raise ValueError(f"--sweep {spec}: {name} {reason}, so it cannot vary inside one program; "
                         f"use --sweep-mode loop to run one program per value.")
    return hint


def culprit(error: BaseException, names: list[str]) -> str:
    """The swept fields named on the source line where tracing failed (innermost first)."""
    import linecache
    import traceback

    for frame, lineno in reversed(list(traceback.walk_tb(error.__traceback__))):
        line = linecache.getline(frame.f_code.co_filename, lineno)
        hits = [n for n in names if n in line]
        if hits:
            return ", ".join(hits)
    return ", ".join(names)


def structure_error(name_hint: str) -> str:
    return (
        f"--sweep: a swept field ({name_hint}) drives Python control flow in make_algorithm (e.g. 0"
        " turns a part off), so it cannot vary inside one program; use --sweep-mode loop to run"
        " one program per value."
    )


class Swept:
    """One row of a sweep as the algorithm's pieces read it: the swept fields' values (traced
    float32 scalars inside the program), every other attribute (fields, properties, `run`)
    the Config's own. The Config itself is never changed; the values were checked by its
    own checks when the sweep was parsed (`parse`)."""

    def __init__(self, config: Any, values: dict[str, Any]):
        self._config, self._values = config, dict(values)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__["_values"]
        return values[name] if name in values else getattr(self.__dict__["_config"], name)


def with_values(config: Any, values: dict[str, Any]) -> Any:
    """The Config of one sweep row for make_algorithm: `config` as it is without swept values,
    else a `Swept` view carrying them."""
    return Swept(config, values) if values else config


def show_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "x".join(map(str, value)) if isinstance(value, tuple) else str(value)
