"""What a run writes besides its progress: a sweep's and a PBT population's reports, the
loop-mode sweep's report over its configs, and `curves.png`.

A sweep's run folder adds `sweep.json` (per config: its values and, over seeds, the mean,
std, interquartile mean (rliable's, with its 95% stratified-bootstrap interval:
common/harness/stats.py) and min of the final return, and the best evaluation return),
`best_config.json` (loadable with `--config`) and `sweep.png`. A `--pbt` run's metrics
(`pbt_parent`, `pbt_fitness`, `pbt_<field>`: common/harness/pbt.py) become `pbt.jsonl`
(rewritten after every chunk), `pbt.json` (each run's winner and its whole schedule),
`best_config.json` and `pbt.png`. A picture that fails to draw is only a warning.

These are reports: the program builder (common/harness/loop.py) never imports this module,
so building a program loads neither the plots nor the statistics.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from scanrl.common.harness import console, pbt, plots, stats, sweeps
from scanrl.common.harness.stats import final_returns

IQM_REPS = (
    2_000  # bootstrap resamples per config: about 0.3 s each (rliable's default 50,000 takes 6 s)
)


# ---------------------------------------------------------------------------------------------
# What a sweep writes
# ---------------------------------------------------------------------------------------------
def _final_and_best(returns: np.ndarray, evals: np.ndarray | None) -> tuple[np.ndarray, float]:
    """Of one config ([seeds, updates]): the final return per seed (mean over the last 10% of
    the updates) and the best evaluation (of the mean over seeds)."""
    final = final_returns(returns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices stay NaN
        best = (
            np.nanmax(np.nanmean(evals, axis=0))
            if evals is not None and not np.isnan(evals).all()
            else np.nan
        )
    return final, float(best)


def sweep_report(
    run_dir: Path, sweep: sweeps.Sweep, returns: list[np.ndarray], evals: list[np.ndarray] | None,
    config_values: dict[str, Any], num_seeds: int,
) -> list[dict[str, Any]]:
    """Write sweep.json and best_config.json, print the table (best first); returns the
    per-config rows. returns, evals: per config, [seeds, updates] (configs of a loop-mode sweep
    may train different numbers of updates); config_values: the sweep's flat config."""
    rows = []
    for c in range(sweep.size):
        f, best_eval = _final_and_best(returns[c], evals[c] if evals is not None else None)
        iqm = stats.iqm_interval(f, reps=IQM_REPS)  # over the seeds with a final return
        rows.append(
            {
                "config": c,
                "values": sweep.config_values(c),
                "final_return_mean": (
                    stats.finite_or_none(np.nanmean(f)) if not np.isnan(f).all() else None
                ),
                "final_return_std": (
                    stats.finite_or_none(np.nanstd(f)) if not np.isnan(f).all() else None
                ),
                "final_return_iqm": stats.finite_or_none(iqm.point) if iqm else None,
                "final_return_iqm_ci95": (
                    [stats.finite_or_none(iqm.low), stats.finite_or_none(iqm.high)] if iqm else None
                ),
                "final_return_min": (
                    stats.finite_or_none(np.nanmin(f)) if not np.isnan(f).all() else None
                ),
                "final_return_per_seed": [stats.finite_or_none(x) for x in f],
                "best_eval_return": stats.finite_or_none(best_eval),
            }
        )
    ranked = sorted(
        rows, key=lambda r: -math.inf if r["final_return_mean"] is None else r["final_return_mean"],
        reverse=True,
    )
    best = ranked[0]
    fields = list(sweep.values)
    (run_dir / "sweep.json").write_text(
        json.dumps(
            {
                "fields": fields,
                "num_configs": sweep.size,
                "num_seeds": num_seeds,
                "ranked_by": (
                    "final_return_mean (mean over seeds of the mean return over the last 10% of"
                    " updates)"
                ),
                "iqm_interval": (
                    "rliable's IQM over seeds, 95% stratified-bootstrap interval (percentile,"
                    f" {IQM_REPS:,} resamples, numpy seed {stats.SEED}); over fewer than"
                    f" {plots.MIN_BOOTSTRAP_SEEDS} final returns that is their range (min, max)"
                ),
                "best": best,
                "configs": rows,
            },
            indent=2,
        )
        + "\n"
    )
    best_config = {
        k: v for k, v in config_values.items() if k not in ("sweep", "sweep_samples", "sweep_mode")
    }
    best_config.update(best["values"])
    (run_dir / "best_config.json").write_text(json.dumps(best_config, indent=2, default=str) + "\n")

    print()
    console.say(f"sweep: {sweep.size} configs x {num_seeds} seeds, best first (final return over"
                " the seeds)")
    # A 95% bootstrap interval over fewer than plots.MIN_BOOTSTRAP_SEEDS values is their min and
    # max (plots.py says why): the header says "range" then, and a config that has too few final
    # returns in a sweep of more seeds is starred.
    few = num_seeds < plots.MIN_BOOTSTRAP_SEEDS
    seeds = f"{num_seeds} seed{'s' if num_seeds != 1 else ''}"
    interval_head = f"iqm range ({seeds})" if few else "iqm 95% interval"
    starred, cells = False, []
    show = lambda v: f"{v:.2f}" if v is not None else "-"  # noqa: E731
    for r in ranked:
        ci = r["final_return_iqm_ci95"]
        interval = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci and None not in ci else "-"
        finite = sum(v is not None for v in r["final_return_per_seed"])
        if interval != "-" and not few and finite < plots.MIN_BOOTSTRAP_SEEDS:
            interval, starred = interval + "*", True
        cells.append(
            [str(r["config"])] + [sweeps.show_value(r["values"][name]) for name in fields]
            + [show(r["final_return_mean"]), show(r["final_return_std"]),
               show(r["final_return_iqm"]), interval, show(r["final_return_min"]),
               show(r["best_eval_return"])]
        )
    header = ["#", *fields, "mean", "std", "iqm", interval_head, "min", "best eval"]
    print("\n".join(console.table(header, cells)))
    if few:
        console.say(
            f"iqm range: a 95% bootstrap interval over {seeds} is only the lowest and highest"
            f" final return; {plots.MIN_BOOTSTRAP_SEEDS} or more seeds give an interval",
            indent="  ",
        )
    if starred:
        console.say(
            f"*: fewer than {plots.MIN_BOOTSTRAP_SEEDS} of this config's seeds have a final"
            " return: its interval is their range",
            indent="  ",
        )
    console.say(f"best config: {run_dir / 'best_config.json'} (train it with --config)",
                indent="  ")
    return rows


def draw_sweep(
    run_dir: Path, sweep: sweeps.Sweep, returns: list[np.ndarray], rows: list[dict[str, Any]],
    steps_per_update: list[float], top: int = 3,
) -> None:
    """sweep.png: the final return against each swept field (mean and each seed), and the
    learning curves of the `top` configs."""
    fields = list(sweep.values)
    fig = plots.figure(4 * (len(fields) + 1), 4)
    for i, name in enumerate(fields):
        ax = fig.add_subplot(1, len(fields) + 1, i + 1)
        x = sweep.values[name]
        numeric = x.dtype != object or all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in x
        )
        if numeric:
            x = x.astype(np.float64)
        else:  # switches, names, sizes: one position per distinct value
            labels = sorted({sweeps.show_value(v) for v in x})
            x = np.array([labels.index(sweeps.show_value(v)) for v in x], np.float64)
            ax.set_xticks(range(len(labels)), labels)
        per_seed = np.array(
            [[np.nan if v is None else v for v in r["final_return_per_seed"]] for r in rows]
        )
        ax.scatter(
            np.repeat(x, per_seed.shape[1]), per_seed.ravel(), s=8, alpha=0.4, label="each seed"
        )
        mean = np.array(
            [np.nan if r["final_return_mean"] is None else r["final_return_mean"] for r in rows]
        )
        order = np.argsort(x)
        ax.plot(
            x[order],
            mean[order],
            "o-" if len(fields) == 1 else "o",
            color="C1",
            label="mean over seeds",
        )
        if name in sweep.log_fields:
            ax.set_xscale("log")
        ax.set(xlabel=name, ylabel="final return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    ax = fig.add_subplot(1, len(fields) + 1, len(fields) + 1)
    ranked = sorted(
        rows, key=lambda r: -math.inf if r["final_return_mean"] is None else r["final_return_mean"],
        reverse=True,
    )[:top]
    for r in ranked:
        x, values = plots.binned(returns[r["config"]])
        label = ", ".join(f"{k}={sweeps.show_value(v)}" for k, v in r["values"].items())
        plots.band(
            ax, x * steps_per_update[r["config"]],
            plots.smooth(values, plots.smoothing_window(values.shape[1])), label,
            seed_lines=False,
        )
    ax.set(xlabel="env steps per seed", ylabel="episode return", title=f"top {len(ranked)} configs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    plots.steps_axis(ax)
    fig.tight_layout()
    plots.save(fig, run_dir / "sweep.png")


def write_sweep(
    run_dir: Path, sweep: sweeps.Sweep, returns: list[np.ndarray], evals: list[np.ndarray] | None,
    config_values: dict[str, Any], num_seeds: int, steps_per_update: list[float],
) -> None:
    """A finished sweep's files: sweep.json, best_config.json and the table (`sweep_report`), then
    sweep.png (a plotting failure is only a warning). returns, evals: per config [seeds, updates];
    config_values: the sweep's flat config; steps_per_update: per config."""
    rows = sweep_report(
        run_dir, sweep, returns, evals, json.loads(json.dumps(config_values, default=str)),
        num_seeds,
    )
    try:
        draw_sweep(run_dir, sweep, returns, rows, steps_per_update)
    except Exception as e:  # noqa: BLE001 - a picture must never fail a finished sweep
        print(
            f"warning: sweep.png was not drawn ({type(e).__name__}: {e}); the sweep's other files"
            " are complete.",
            file=sys.stderr,
        )


# ---------------------------------------------------------------------------------------------
# What a PBT population writes
# ---------------------------------------------------------------------------------------------
def intervals(metrics: dict[str, np.ndarray]) -> np.ndarray:
    """The updates (0-based) at whose end an exploit ran: where pbt_fitness is set."""
    return np.flatnonzero(np.isfinite(metrics["pbt_fitness"]).any(axis=0))


def lineage(
    metrics: dict[str, np.ndarray], sweep: Any, spec: pbt.Spec, first_seed: int,
    steps_per_update: int,
) -> list[dict]:
    """One record per interval so far: every member's fitness, parent and hyperparameters after
    it."""
    fields = sorted(sweep.values)
    records = []
    for u in intervals(metrics):
        members = []
        for row in range(spec.members * spec.seeds):
            parent = metrics["pbt_parent"][row, u]
            members.append({
                "member": row // spec.seeds, "seed": first_seed + row % spec.seeds,
                "fitness": _float32_or_none(metrics["pbt_fitness"][row, u]),
                "parent": int(parent) if parent >= 0 else None,
                "hparams": {k: _value(metrics[f"pbt_{k}"][row, u]) for k in fields},
            })
        records.append(
            {
                "update": int(u + 1),
                "steps_per_seed": int((u + 1) * steps_per_update),
                "members": members,
            }
        )
    return records


def write_lineage(run_dir: Path, records: list[dict]) -> None:
    """pbt.jsonl, rewritten whole after every chunk (a rename: never half a file)."""
    path = run_dir / "pbt.jsonl"
    temporary = path.with_suffix(".jsonl.tmp")
    temporary.write_text("".join(json.dumps(r) + "\n" for r in records))
    temporary.replace(path)


def _float32_or_none(x: float) -> float | None:
    """x with float32's 7 significant digits, or None (null) where it is NaN or infinite."""
    return float(f"{x:.7g}") if math.isfinite(x) else None


def _value(x: Any) -> float:
    """A hyperparameter as the program held it (float32), written with the digits float32 has."""
    return float(f"{np.float32(x):.7g}")


def schedule(metrics: dict[str, np.ndarray], sweep: Any, spec: pbt.Spec, row: int) -> list[dict]:
    """The hyperparameters row `row` trained with at each update, following its ancestry back
    through every copy: segments {first_update, last_update (1-based, inclusive), member,
    values}."""
    fields = sorted(sweep.values)
    num_updates = metrics["pbt_parent"].shape[1]
    used = []  # (member row, values) per update, from the last back
    current = row
    for u in range(num_updates - 1, -1, -1):
        values = {
            k: _value(
                sweep.values[k][current // spec.seeds]
                if u == 0
                else metrics[f"pbt_{k}"][current, u - 1]
            )
            for k in fields
        }
        used.append((current, values))
        if (
            u > 0 and metrics["pbt_parent"][current, u - 1] >= 0
        ):  # copied at the end of update u - 1
            current = int(metrics["pbt_parent"][current, u - 1]) * spec.seeds + current % spec.seeds
    used.reverse()
    segments = []
    for u, (r, values) in enumerate(used):
        if (
            segments
            and segments[-1]["member"] == r // spec.seeds
            and segments[-1]["values"] == values
        ):
            segments[-1]["last_update"] = u + 1
        else:
            segments.append(
                {
                    "first_update": u + 1,
                    "last_update": u + 1,
                    "member": r // spec.seeds,
                    "values": values,
                }
            )
    return segments


def pbt_report(
    run_dir: Path, sweep: Any, spec: pbt.Spec, metrics: dict[str, np.ndarray],
    config_values: dict[str, Any], first_seed: int, steps_per_update: int,
) -> dict:
    """pbt.json (per run: the members' final returns, the winner and its schedule), best_config.json
    (the winner of the first run: its final values as constants and its schedule), the table."""
    final = final_returns(metrics["episode_return"])  # [R]: mean over the last 10% of updates
    runs = []
    for s in range(spec.seeds):
        rows = [m * spec.seeds + s for m in range(spec.members)]
        scores = np.array([-np.inf if np.isnan(final[r]) else final[r] for r in rows])
        best = rows[int(np.argmax(scores))]
        runs.append(
            {
                "seed": first_seed + s,
                "winner": best // spec.seeds,
                "winner_final_return": _float32_or_none(final[best]),
                "final_return_per_member": [_float32_or_none(final[r]) for r in rows],
                "schedule": schedule(metrics, sweep, spec, best),
            }
        )
    summary = {
        "members": spec.members,
        "seeds": spec.seeds,
        "interval": spec.interval,
        "burn_in": spec.burn_in,
        "fraction": spec.fraction,
        "perturb": spec.perturb,
        "resample": spec.resample,
        "fields": sorted(sweep.values),
        "space": {
            k: list(v) if v[0] != "grid" else ["grid", list(v[1])] for k, v in spec.space.items()
        },
        "ranked_by": "final return (mean episode return over the last 10% of updates)",
        "runs": runs,
    }
    (run_dir / "pbt.json").write_text(json.dumps(summary, indent=2) + "\n")
    winner = runs[0]
    best = {
        k: v
        for k, v in config_values.items()
        if not k.startswith("pbt") and k not in ("sweep", "sweep_samples")
    }
    best.update(winner["schedule"][-1]["values"])
    best["pbt_schedule"] = {
        "note": (
            "PBT found a schedule, not a constant: the values above are the winner's last ones,"
            " which training with --config holds fixed from the start; the segments below are what"
            " the winner trained with."
        ),
        "seed": winner["seed"],
        "member": winner["winner"],
        "segments": winner["schedule"],
    }
    (run_dir / "best_config.json").write_text(json.dumps(best, indent=2, default=str) + "\n")
    burn_in = f", none replaced before update {spec.burn_in + 1}" if spec.burn_in else ""
    print()
    console.say(f"pbt: {spec.members} members x {spec.seeds} runs, interval {spec.interval}"
                f" updates{burn_in}")
    for r in runs:
        last = r["schedule"][-1]["values"]
        shown = ", ".join(f"{k}={v:.4g}" for k, v in last.items())
        final = "none" if r["winner_final_return"] is None else f"{r['winner_final_return']:.2f}"
        segments = len(r["schedule"])
        console.say(f"seed {r['seed']}: winner member {r['winner']}, final return {final},"
                    f" {segments} segment{'s' if segments != 1 else ''}, last values {shown}",
                    indent="  ")
    console.say(f"schedule and values: {run_dir / 'pbt.json'}, {run_dir / 'best_config.json'}",
                indent="  ")
    return summary


def draw_pbt(
    run_dir: Path, sweep: Any, spec: pbt.Spec, metrics: dict[str, np.ndarray], summary: dict,
    steps_per_update: int,
) -> None:
    """pbt.png: per field, every member's values over training (the first run's winner's schedule
    bold), and every member's fitness at each interval."""
    fields = sorted(sweep.values)
    fig = plots.figure(4 * (len(fields) + 1), 4)
    updates = metrics["pbt_parent"].shape[1]
    x = (np.arange(updates) + 1) * steps_per_update
    winner = summary["runs"][0]["schedule"]
    for i, name in enumerate(fields):
        ax = fig.add_subplot(1, len(fields) + 1, i + 1)
        for m in range(spec.members):
            ax.step(
                np.concatenate([[0], x]),
                np.concatenate(
                    [[_value(sweep.values[name][m])], metrics[f"pbt_{name}"][m * spec.seeds]]
                ),
                where="post",
                lw=0.8,
                alpha=0.4,
            )
        sx = [(seg["first_update"] - 1) * steps_per_update for seg in winner] + [
            winner[-1]["last_update"] * steps_per_update
        ]
        sy = [seg["values"][name] for seg in winner] + [winner[-1]["values"][name]]
        ax.step(sx, sy, where="post", color="k", lw=2, label="winner's schedule")
        if name in sweep.log_fields or spec.space[name][0] == "log":
            ax.set_yscale("log")
        ax.set(xlabel="env steps per member", ylabel=name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        plots.steps_axis(ax)
    ax = fig.add_subplot(1, len(fields) + 1, len(fields) + 1)
    at = intervals(metrics)
    for m in range(spec.members):
        ax.plot(
            (at + 1) * steps_per_update,
            metrics["pbt_fitness"][m * spec.seeds, at],
            "o-",
            ms=3,
            lw=0.8,
            alpha=0.6,
        )
    ax.set(
        xlabel="env steps per member", ylabel="fitness at each interval",
        title=f"{spec.members} members (seed run 0)",
    )
    ax.grid(alpha=0.3)
    plots.steps_axis(ax)
    fig.tight_layout()
    plots.save(fig, run_dir / "pbt.png")


def write_pbt(
    run_dir: Path, sweep: Any, spec: pbt.Spec, metrics: dict[str, np.ndarray],
    config_values: dict[str, Any], first_seed: int, steps_per_update: int,
) -> None:
    """A finished PBT run's files: pbt.jsonl (`write_lineage`), pbt.json, best_config.json and
    the table (`pbt_report`), then pbt.png (a plotting failure is only a warning)."""
    write_lineage(run_dir, lineage(metrics, sweep, spec, first_seed, steps_per_update))
    summary = pbt_report(run_dir, sweep, spec, metrics, config_values, first_seed, steps_per_update)
    try:
        draw_pbt(run_dir, sweep, spec, metrics, summary, steps_per_update)
    except Exception as e:  # noqa: BLE001 - a picture must never fail a finished run
        print(
            f"warning: pbt.png was not drawn ({type(e).__name__}: {e}); the run's other files are"
            " complete.",
            file=sys.stderr,
        )


# ---------------------------------------------------------------------------------------------
# A loop-mode sweep, and a single run's curves
# ---------------------------------------------------------------------------------------------
def write_loop_sweep(
    sweep_dir: Path, sweep: sweeps.Sweep, done: list[dict], config_values: dict[str, Any],
    num_seeds: int, eval_metric: str,
) -> None:
    """sweep.json, best_config.json and sweep.png over the finished configs of a
    --sweep-mode loop sweep (`done`: their summaries), and one metrics.npz when every config
    trained as many updates."""
    part = sweeps.Sweep({k: v[:len(done)] for k, v in sweep.values.items()}, sweep.log_fields)
    loaded = [np.load(sweep_dir / f"config_{c}" / "metrics.npz") for c in range(len(done))]
    returns = [m["episode_return"] for m in loaded]
    evals = (
        [m[eval_metric] for m in loaded] if all(eval_metric in m.files for m in loaded) else None
    )
    write_sweep(sweep_dir, part, returns, evals, config_values, num_seeds,
                [s["total_timesteps"] / max(s["updates"], 1) for s in done])
    if len({r.shape for r in returns}) == 1:
        np.savez(
            sweep_dir / "metrics.npz",
            **{k: np.stack([m[k] for m in loaded]) for k in loaded[0].files},
        )


def draw_curves(run_dir: Path) -> None:
    """curves.png, after the run's files are written; a plotting failure is only a warning."""
    try:
        plots.curves(run_dir)
    except Exception as e:  # noqa: BLE001 - a picture must never fail a finished run
        print(
            f"warning: curves.png was not drawn ({type(e).__name__}: {e}); the run's other files"
            " are complete.",
            file=sys.stderr,
        )
