"""Hyperparameter sweeps: configs x seeds in one program, and what a sweep writes.

`--sweep FIELD=V1,V2,...` (a grid: the product over every such flag) and
`--sweep FIELD=log:LOW:HIGH` / `FIELD=uniform:LOW:HIGH` (random search: `--sweep-samples K`
draws, seeded by `--seed`) give `configs` settings of the swept fields. Each (config, seed)
pair is one row of the device mesh's seed axis, config-major: row `c * num_seeds + s` is
config c with seed key `seed + s`, so it computes what the single run of that config and
seed computes. The swept values enter the program as arrays: `make_algorithm` builds the
pieces from a `Swept` view of the Config whose swept fields are traced scalars (the Config
itself is never changed), so one compile serves every config. A field that sets shapes or Python control flow (sizes, booleans, a branch on the
value) cannot: it is refused with one sentence, or run one program per config with
`--sweep-mode loop`.

A sweep's run folder adds `sweep.json` (per config: its values and, over seeds, the mean,
std, interquartile mean (rliable's, with its 95% stratified-bootstrap interval:
common/harness/stats.py) and min of the final return, and the best evaluation return),
`best_config.json` (loadable with `--config`) and `sweep.png`; `metrics.npz` is
`[configs, seeds, updates]`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import types
import typing
from pathlib import Path
from typing import Any

import numpy as np

from scanrl.common.harness.configs import coerce
from scanrl.common.harness.logging import final_returns

IQM_REPS = 2_000  # bootstrap resamples per config: about 0.3 s each (rliable's default 50,000 takes 6 s)


@dataclasses.dataclass(frozen=True)
class Sweep:
    """The swept fields' values, one entry per config: values[name] has shape [configs]."""

    values: dict[str, np.ndarray]
    log_fields: frozenset[str]  # drawn log-uniformly, or a grid of 3+ values spanning 10x or more: log axis in sweep.png
    # where each field's values come from: ("grid", values), ("log", low, high) or ("uniform", low, high)
    space: dict[str, tuple] = dataclasses.field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(next(iter(self.values.values())))

    def config_values(self, c: int) -> dict[str, Any]:
        return {k: v[c].item() if isinstance(v[c], np.generic) else v[c] for k, v in self.values.items()}


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
            raise ValueError(f"--sweep {spec}: write FIELD=V1,V2,... or FIELD=log:LOW:HIGH or FIELD=uniform:LOW:HIGH.")
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
                raise ValueError(f"--sweep {spec}: {kind}:LOW:HIGH needs two finite numbers with LOW < HIGH"
                                 f"{' and LOW > 0' if kind == 'log' else ''}.") from None
            if not _is_float(hint):
                raise ValueError(f"--sweep {spec}: random search draws real numbers; list {name}'s values instead.")
            random_fields[name] = (kind, low, high)
        elif loop and not _is_float(hint):
            grid[name] = [_grid_value(v.strip(), hint, spec) for v in text.split(",") if v.strip()]
        else:
            try:
                values = [float(v) for v in text.split(",") if v.strip()]
                assert values and all(math.isfinite(v) for v in values)
            except (AssertionError, ValueError):
                raise ValueError(f"--sweep {spec}: the values must be finite numbers separated by commas.") from None
            grid[name] = values
    if random_fields and samples < 1:
        raise ValueError(f"--sweep-samples must be at least 1 for random search, got {samples}.")
    combos = [dict(zip(grid, point)) for point in itertools.product(*grid.values())] or [{}]
    if population:  # the sweep's rows with population / grid points draws each
        if population % len(combos):
            raise ValueError(f"--pbt-population {population} is not a multiple of the --sweep grid's {len(combos)} "
                             f"points; each point starts the same number of members.")
        samples = population // len(combos)
    rng = np.random.default_rng(seed)  # reproducible with --seed
    draws = {}
    for name, (kind, low, high) in random_fields.items():
        u = rng.uniform(size=samples)
        draws[name] = np.exp(np.log(low) + u * (np.log(high) - np.log(low))) if kind == "log" else low + u * (high - low)
    rows = [{**combo, **{k: float(d[i]) for k, d in draws.items()}} for combo in combos
            for i in range(samples if random_fields or population else 1)]
    if population:
        for name, (kind, low, high) in random_fields.items():
            for bound in (low, high):
                try:
                    dataclasses.replace(config, **{name: bound})
                except ValueError as e:
                    raise ValueError(f"--sweep {name}={kind}:{low:g}:{high:g}: the bound {bound:g} fails: {e}") from None
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
    logs |= {k for k, v in grid.items() if len(v) > 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                          and x > 0 for x in v) and max(v) / min(v) >= 10}
    space = {**{k: ("grid", tuple(v)) for k, v in grid.items()}, **random_fields}
    return Sweep(values=values, log_fields=frozenset(logs), space=space)


def _is_float(hint: Any) -> bool:
    return hint is float or (typing.get_origin(hint) in (typing.Union, types.UnionType) and float in typing.get_args(hint))


def check_field(config: Any, name: str, spec: str, loop: bool = False) -> Any:
    """The field's type hint. In one program only float hyperparameters can be traced; sizes,
    switches and names need --sweep-mode loop. The env id is never swept (presets follow it)."""
    fields = {f.name: f for f in dataclasses.fields(config)}
    if name not in fields:
        raise ValueError(f"--sweep {spec}: {type(config).__module__.rsplit('.', 1)[-1]} has no hyperparameter {name}.")
    if name == "env":
        raise ValueError(f"--sweep {spec}: the env id picks each algorithm's presets; start one sweep per env.")
    hint = typing.get_type_hints(type(config))[name]
    if not loop and not _is_float(hint):
        why = {int: "sets array shapes or loop lengths (an integer)", bool: "switches parts of the program on or off"}
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
    return (f"--sweep: a swept field ({name_hint}) drives Python control flow in make_algorithm (e.g. 0 turns a "
            f"part off), so it cannot vary inside one program; use --sweep-mode loop to run one program per value.")


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


# ---------------------------------------------------------------------------------------------
# What a sweep writes
# ---------------------------------------------------------------------------------------------
def _final_and_best(returns: np.ndarray, evals: np.ndarray | None) -> tuple[np.ndarray, float]:
    """Of one config ([seeds, updates]): the final return per seed (mean over the last 10% of
    the updates) and the best evaluation (of the mean over seeds)."""
    import warnings

    final = final_returns(returns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices stay NaN
        best = np.nanmax(np.nanmean(evals, axis=0)) if evals is not None and not np.isnan(evals).all() else np.nan
    return final, float(best)


def report(run_dir: Path, sweep: Sweep, returns: list[np.ndarray], evals: list[np.ndarray] | None,
           config_values: dict[str, Any], num_seeds: int) -> list[dict[str, Any]]:
    """Write sweep.json and best_config.json, print the table (best first); returns the
    per-config rows. returns, evals: per config, [seeds, updates] (configs of a loop-mode sweep
    may train different numbers of updates); config_values: the sweep's flat config."""
    from scanrl.common.harness import stats  # here: an algorithm file's import need not load the statistics

    rows = []
    for c in range(sweep.size):
        f, best_eval = _final_and_best(returns[c], evals[c] if evals is not None else None)
        iqm = stats.iqm_interval(f, reps=IQM_REPS)  # over the seeds with a final return
        rows.append({
            "config": c, "values": sweep.config_values(c),
            "final_return_mean": stats.finite_or_none(np.nanmean(f)) if not np.isnan(f).all() else None,
            "final_return_std": stats.finite_or_none(np.nanstd(f)) if not np.isnan(f).all() else None,
            "final_return_iqm": stats.finite_or_none(iqm.point) if iqm else None,
            "final_return_iqm_ci95": [stats.finite_or_none(iqm.low), stats.finite_or_none(iqm.high)] if iqm else None,
            "final_return_min": stats.finite_or_none(np.nanmin(f)) if not np.isnan(f).all() else None,
            "final_return_per_seed": [stats.finite_or_none(x) for x in f],
            "best_eval_return": stats.finite_or_none(best_eval),
        })
    ranked = sorted(rows, key=lambda r: -math.inf if r["final_return_mean"] is None else r["final_return_mean"],
                    reverse=True)
    best = ranked[0]
    fields = list(sweep.values)
    (run_dir / "sweep.json").write_text(json.dumps(
        {"fields": fields, "num_configs": sweep.size, "num_seeds": num_seeds,
         "ranked_by": "final_return_mean (mean over seeds of the mean return over the last 10% of updates)",
         "iqm_interval": f"rliable's IQM over seeds, 95% stratified-bootstrap interval (percentile, {IQM_REPS:,} "
                         f"resamples, numpy seed {stats.SEED})",
         "best": best, "configs": rows}, indent=2) + "\n")
    best_config = {k: v for k, v in config_values.items() if k not in ("sweep", "sweep_samples", "sweep_mode")}
    best_config.update(best["values"])
    (run_dir / "best_config.json").write_text(json.dumps(best_config, indent=2, default=str) + "\n")

    print(f"\nsweep: {sweep.size} configs x {num_seeds} seeds, best first (final return over the seeds)")
    head = "".join(f"{name:>14}" for name in fields)
    print(f"  {'#':>3}{head} {'mean':>10} {'std':>8} {'iqm':>10} {'iqm 95% interval':>20} {'min':>10} {'best eval':>10}")
    for r in ranked:
        cells = "".join(f"{show_value(r['values'][name]):>14}" for name in fields)
        show = lambda v, w: f"{v:>{w}.2f}" if v is not None else f"{'-':>{w}}"  # noqa: E731
        ci = r["final_return_iqm_ci95"]
        interval = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci and None not in ci else "-"
        print(f"  {r['config']:>3}{cells} {show(r['final_return_mean'], 10)} {show(r['final_return_std'], 8)} "
              f"{show(r['final_return_iqm'], 10)} {interval:>20} {show(r['final_return_min'], 10)} "
              f"{show(r['best_eval_return'], 10)}")
    print(f"  best config: {run_dir / 'best_config.json'} (train it with --config)", flush=True)
    return rows


def show_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "x".join(map(str, value)) if isinstance(value, tuple) else str(value)


def draw(run_dir: Path, sweep: Sweep, returns: list[np.ndarray], rows: list[dict[str, Any]],
         steps_per_update: list[float], top: int = 3) -> None:
    """sweep.png: the final return against each swept field (mean and each seed), and the
    learning curves of the `top` configs."""
    from scanrl.common.harness import plots

    fields = list(sweep.values)
    fig = plots.figure(4 * (len(fields) + 1), 4)
    for i, name in enumerate(fields):
        ax = fig.add_subplot(1, len(fields) + 1, i + 1)
        x = sweep.values[name]
        numeric = x.dtype != object or all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x)
        if numeric:
            x = x.astype(np.float64)
        else:  # switches, names, sizes: one position per distinct value
            labels = sorted({show_value(v) for v in x})
            x = np.array([labels.index(show_value(v)) for v in x], np.float64)
            ax.set_xticks(range(len(labels)), labels)
        per_seed = np.array([[np.nan if v is None else v for v in r["final_return_per_seed"]] for r in rows])
        ax.scatter(np.repeat(x, per_seed.shape[1]), per_seed.ravel(), s=8, alpha=0.4, label="each seed")
        mean = np.array([np.nan if r["final_return_mean"] is None else r["final_return_mean"] for r in rows])
        order = np.argsort(x)
        ax.plot(x[order], mean[order], "o-" if len(fields) == 1 else "o", color="C1", label="mean over seeds")
        if name in sweep.log_fields:
            ax.set_xscale("log")
        ax.set(xlabel=name, ylabel="final return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    ax = fig.add_subplot(1, len(fields) + 1, len(fields) + 1)
    ranked = sorted(rows, key=lambda r: -math.inf if r["final_return_mean"] is None else r["final_return_mean"],
                    reverse=True)[:top]
    for r in ranked:
        x, values = plots.binned(returns[r["config"]])
        label = ", ".join(f"{k}={show_value(v)}" for k, v in r["values"].items())
        plots.band(ax, x * steps_per_update[r["config"]], plots.smooth(values, plots.SMOOTH), label, seed_lines=False)
    ax.set(xlabel="env steps per seed", ylabel="episode return", title=f"top {len(ranked)} configs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    plots.steps_axis(ax)
    fig.tight_layout()
    plots.save(fig, run_dir / "sweep.png")


def write(run_dir: Path, sweep: Sweep, returns: list[np.ndarray], evals: list[np.ndarray] | None,
          config_values: dict[str, Any], num_seeds: int, steps_per_update: list[float]) -> None:
    """A finished sweep's files: sweep.json, best_config.json and the table (`report`), then
    sweep.png (a plotting failure is only a warning). returns, evals: per config [seeds, updates];
    config_values: the sweep's flat config; steps_per_update: per config."""
    import sys

    rows = report(run_dir, sweep, returns, evals, json.loads(json.dumps(config_values, default=str)), num_seeds)
    try:
        draw(run_dir, sweep, returns, rows, steps_per_update)
    except Exception as e:  # noqa: BLE001 - a picture must never fail a finished sweep
        print(f"warning: sweep.png was not drawn ({type(e).__name__}: {e}); the sweep's other files are complete.",
              file=sys.stderr)
