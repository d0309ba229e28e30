"""Learning curves: `curves.png` in every run folder, and `scanrl-plot` to compare runs.

Both read a run folder's metrics.npz (`[num_seeds, updates]` per metric) and summary.json;
nothing here runs during training. Figures are drawn on matplotlib's Agg canvas directly
(no pyplot), so they never change the backend of a user's notebook or session.

Per-update returns are NaN where no episode ended; a curve shows, per seed, the latest
finished episodes' return, averaged within at most `BINS` bins along the run, then smoothed
by a trailing moving average over `smooth` bins (`--smooth K`; the files keep the raw values),
never over more than a tenth of the plotted points (`smoothing_window`), so a short run's curve
ends at its last values. Evaluations are a few points, each a mean over episodes: never smoothed.
Each curve is the mean over seeds, a shaded 95% bootstrap confidence interval of that mean
(scipy.stats.bootstrap, percentile method, 1,000 resamples) and faint per-seed lines; with
fewer than `MIN_BOOTSTRAP_SEEDS` seeds that interval is the seeds' range, so the band is drawn
and named as the range (`interval_label`). The titles say which of these each picture has.

`scanrl-plot --compare A ... --vs B ...` compares two groups of runs by their final scores
instead (rliable's probability of improvement, IQM and performance profiles): the numbers
come from common/harness/stats.py (`compare_groups`); here is only its command line.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from pathlib import Path

import numpy as np

from scanrl.common.harness import configs, console
from scanrl.common.harness.configs import Run, fail
from scanrl.common.harness.runconfig import NOT_IN_LABELS, RUN_FIELDS
from scanrl.common.harness.stats import nanmean

BINS = 400
SMOOTH = 10  # bins in the trailing moving average (1 or 0: none): 2.5% of a long run
SMOOTH_FRACTION = 10  # ... and at most 1/10 of the plotted points: `smoothing_window`
MAX_SEED_LINES = 32  # beyond this many seeds the faint lines are a grey wash: the band says it
# Below this many seeds a 95% percentile bootstrap of the mean is the seeds' min and max: a
# resample of n seeds is all the lowest one with probability n**-n (2 seeds: 25%, 3: 3.7%), above
# the 2.5% the interval's low end sits at; 4 seeds: 0.4%. So it is drawn and named as a range.
MIN_BOOTSTRAP_SEEDS = 4
PANEL_METRICS = ("entropy", "epsilon", "q_taken")  # small panels after the losses, when present
PANELS_PER_ROW = 4  # more small panels than this wrap onto another row (10 inches wide)


def binned(x: np.ndarray, fill: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """[seeds, updates] -> (updates done at each bin's end [B], per-seed bin means [seeds, B]);
    with `fill`, a bin without a value keeps the seed's previous one."""
    edges = np.unique(np.linspace(0, x.shape[1], min(BINS, x.shape[1]) + 1).astype(int))
    values = np.stack([nanmean(x[:, a:b], axis=1) for a, b in zip(edges[:-1], edges[1:])], axis=1)
    if fill:
        for row in values:
            for j in range(1, row.size):
                if np.isnan(row[j]):
                    row[j] = row[j - 1]
    return edges[1:].astype(np.float64), values


def smooth(values: np.ndarray, k: int) -> np.ndarray:
    """[seeds, B] -> [seeds, B]: the mean of each point and the k - 1 before it (fewer at the
    start; NaN points skipped, so a gap does not pull the curve to zero). k <= 1: unchanged."""
    if k <= 1:
        return values
    finite = ~np.isnan(values)
    total = np.cumsum(np.where(finite, values, 0.0), axis=1)
    count = np.cumsum(finite, axis=1)
    total[:, k:] -= total[:, :-k].copy()
    count[:, k:] -= count[:, :-k].copy()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def smoothing_window(n_points: int, smooth_bins: int = SMOOTH) -> int:
    """The moving average's window over a curve of `n_points` points: `smooth_bins`, but never
    more than a tenth of the points (1: no smoothing). A trailing window of k points lags a
    rising curve by (k - 1) / 2 points: 10 points over a 9-update run averaged the whole run
    into its last point (140 where the last update's return was 358.5). At most a tenth keeps
    the lag within 5% of the run, and a long run (400 bins) keeps its 10."""
    return max(1, min(smooth_bins, n_points // SMOOTH_FRACTION))


def interval_label(num_seeds: int) -> str | None:
    """What `band` shades around a mean over `num_seeds` seeds (None: one seed, no band)."""
    if num_seeds < 2:
        return None
    if num_seeds < MIN_BOOTSTRAP_SEEDS:
        return f"range of {num_seeds} seeds"
    return "95% bootstrap CI"


def band_words(seed_counts: list[int]) -> str | None:
    """`interval_label` over several runs' seed counts, in one phrase (None: no run has a band)."""
    labels = sorted({interval_label(n) for n in seed_counts} - {None})
    if len(labels) < 2:
        return labels[0] if labels else None
    return f"95% bootstrap CI (a run of fewer than {MIN_BOOTSTRAP_SEEDS} seeds: their range)"


def mean_interval(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[seeds, B] -> (low [B], high [B]): the 95% percentile-bootstrap interval of the mean over
    seeds (fixed resampling seed, so a figure is reproducible)."""
    from scipy.stats import bootstrap

    ci = bootstrap(
        (values,), np.mean, axis=0, n_resamples=1000, confidence_level=0.95, method="percentile",
        random_state=0, vectorized=True,
    ).confidence_interval
    return ci.low, ci.high


def band(
    ax, x: np.ndarray, values: np.ndarray, label: str, color=None, seed_lines: bool = True, **style
) -> None:
    """Mean over seeds as a line, its 95% bootstrap interval as a band (with fewer than
    MIN_BOOTSTRAP_SEEDS seeds the seeds' range, which that bootstrap would give: drawn directly),
    each seed faint."""
    keep = ~np.isnan(values).any(axis=0)  # where every seed has a value
    x, values = x[keep], values[:, keep]
    if not x.size:
        return
    (line,) = ax.plot(x, values.mean(axis=0), label=label, color=color, lw=1.8, zorder=3, **style)
    if values.shape[0] > 1:
        interval = (
            mean_interval(values)
            if values.shape[0] >= MIN_BOOTSTRAP_SEEDS
            else (values.min(axis=0), values.max(axis=0))
        )
        ax.fill_between(x, *interval, color=line.get_color(), alpha=0.25, lw=0)
        if seed_lines and values.shape[0] <= MAX_SEED_LINES:
            for row in values:
                ax.plot(x, row, color=line.get_color(), lw=0.6, alpha=0.3, zorder=2)


def steps_axis(ax) -> None:
    from matplotlib.ticker import EngFormatter

    ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 250k, not 250000 (the small panels crowd)


def save(fig, out: str | Path, **kwargs) -> None:
    """PNG with a 256-colour palette (a third of the size, no visible change); other formats as
    asked."""
    if not str(out).lower().endswith(".png"):
        fig.savefig(out, **kwargs)
        return
    import io

    from PIL import Image

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", **kwargs)
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(256).save(out, optimize=True)


def figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def fit_title(ax, text: str, fraction: float = 0.9, **kwargs):
    """Set ax's title, each line wrapped at spaces until it is at most `fraction` of the figure
    wide: the title is centred on the axes, and a long env name, or all a band's words, would
    otherwise run off the figure's right edge. Returns the title's Text."""
    renderer = ax.figure.canvas.get_renderer()
    lines = text.splitlines()
    width = max(len(line) for line in lines)
    while True:
        title = ax.set_title(
            "\n".join(textwrap.fill(line, width, break_on_hyphens=False) for line in lines),
            **kwargs,
        )
        if title.get_window_extent(renderer).width <= fraction * ax.figure.bbox.width or width < 30:
            return title
        width -= 5


def small_panels(metrics: dict[str, np.ndarray]) -> list[tuple[str, list[tuple[str, str]]]]:
    """The small panels under the returns, each (title, [(metric, line label), ...]): the losses,
    then what a user watches beside them when the run has it (entropy: a policy's exploration;
    epsilon and q_taken: PQN's exploration and the size of its Q-values, where overestimation
    shows), then a multi-agent run's team return and its agents' returns (a line each)."""
    panels = [(k, [(k, k)]) for k in sorted(metrics) if k.endswith("_loss")]
    panels += [(k, [(k, k)]) for k in PANEL_METRICS if k in metrics]
    if "team_return" in metrics:
        panels.append(("team_return", [("team_return", "team return")]))
    agents = sorted(
        (k for k in metrics if re.fullmatch(r"agent_\d+_return", k)),
        key=lambda k: int(k.split("_")[1]),
    )
    if agents:  # "agent 0", "agent 1", ...
        labels = [k.removesuffix("_return").replace("_", " ") for k in agents]
        panels.append(("agent returns", list(zip(agents, labels))))
    return panels


def curves_title(algo: str, env: str, seeds: int, window: int, evaluations: bool) -> str:
    """curves.png's title: what the line, the band and the faint lines are, and which curves are
    smoothed (the training curves, small panels included; never the evaluations)."""
    lines = [f"{algo} on {env}: {seeds} seed{'s' if seeds > 1 else ''}"]
    if seeds > 1:
        parts = ["line: mean over seeds", f"band: {interval_label(seeds)}"]
        if seeds <= MAX_SEED_LINES:
            parts.append("faint: each seed" + (" (training curves)" if evaluations else ""))
        lines.append("; ".join(parts))
    if window > 1:
        lines.append(
            f"training curves: moving average of {window} points"
            + ("; evaluations: raw" if evaluations else "")
        )
    return "\n".join(lines)


def curves(run_dir: str | Path, out: str | Path | None = None, smooth_bins: int = SMOOTH):
    """Draw a run's curves (returns on top; below, the losses and `small_panels`' other
    metrics); save to `out` (default RUN_DIR/curves.png). Returns the matplotlib Figure."""
    run = Run(run_dir)
    m, seeds = run.metrics, run.summary["num_seeds"]
    panels = small_panels(m)
    rows = math.ceil(len(panels) / PANELS_PER_ROW)
    columns = math.ceil(len(panels) / rows) if rows else 1
    fig = figure(10, 4.5 + 2 * rows)
    grid = fig.add_gridspec(1 + rows, columns, height_ratios=[2] + [1] * rows)
    ax = fig.add_subplot(grid[0, :])
    x, values = binned(m["episode_return"])
    window = smoothing_window(values.shape[1], smooth_bins)  # every training metric has as many
    band(ax, run.steps(x), smooth(values, window), "episode return (training)")
    evaluations = False
    for key, name, marker in (
        ("eval_return_sampled", "sampled", "s"),
        ("eval_return", "deterministic", "o"),
    ):
        if key in m:
            evaluated = ~np.isnan(m[key]).all(axis=0)
            evaluations |= bool(evaluated.any())
            band(ax, run.steps(np.nonzero(evaluated)[0] + 1.0), m[key][:, evaluated],
                 f"evaluation return ({name})", marker=marker, markersize=3, seed_lines=False)
    ax.set(xlabel="env steps per seed", ylabel="episode return")
    fit_title(ax, curves_title(run.summary["algo"], run.summary["env"], seeds, window, evaluations),
              fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    steps_axis(ax)
    for i, (title, series) in enumerate(panels):
        small = fig.add_subplot(grid[1 + i // columns, i % columns])
        for key, label in series:
            x, values = binned(m[key], fill=key.endswith("_return"))  # a return: NaN, no episode
            band(small, run.steps(x), smooth(values, window), label)
        small.set_title(title, fontsize=9)
        small.set_xlabel("env steps per seed", fontsize=8)
        small.set_ylabel(
            "episode return" if len(series) > 1 else series[0][1].replace("_", " "), fontsize=8
        )
        small.tick_params(labelsize=7)
        small.grid(alpha=0.3)
        if len(series) > 1 and small.get_legend_handles_labels()[0]:  # none: no episode ended
            small.legend(fontsize=7)
        steps_axis(small)
    fig.tight_layout()
    save(fig, out or run.dir / "curves.png")
    return fig


def labels(runs: list[Run]) -> list[str]:
    """Algorithm, env, and the flags that differ: run settings (seeds, env parameters, ...)
    between all the runs, hyperparameters between runs of the same algorithm (PPO's and
    IMPALA's own defaults differ, and would only crowd the legend)."""

    def differing(group: list[Run], keys: set[str]) -> list[str]:
        shared = set.intersection(*(set(r.config) for r in group)) & keys
        return sorted(
            k for k in shared if len({json.dumps(r.config[k], sort_keys=True) for r in group}) > 1
        )

    run_keys = differing(runs, set(RUN_FIELDS) - NOT_IN_LABELS)
    out = []
    for r in runs:
        same_algo = [o for o in runs if o.summary["algo"] == r.summary["algo"]]
        keys = run_keys + differing(same_algo, set(r.config) - set(RUN_FIELDS) - {"env"})
        out.append(
            f"{r.summary['algo']} {r.summary['env']}" + "".join(f" {k}={r.config[k]}" for k in keys)
        )
    if len(set(out)) < len(out):  # nothing tells them apart: add the folder names
        out = [f"{t} ({r.dir.name})" for t, r in zip(out, runs)]
    return out


def compare(
    run_dirs: list[str | Path], out: str | Path, x: str = "steps", metric: str = "episode_return",
    smooth_bins: int = SMOOTH,
):
    """Overlay runs' `metric` (mean, 95% bootstrap band or the range of fewer seeds, and faint
    seeds) against env steps per seed or training seconds (`x="wall"`); save to `out`. Returns
    the Figure."""
    runs = [Run(d) for d in run_dirs]
    for r in runs:
        if metric not in r.metrics:
            raise ValueError(
                f"--metric {metric}: {r.dir} has no such metric (it has:"
                f" {', '.join(sorted(r.metrics))})."
            )
    fig = figure(9, 5)
    ax = fig.add_subplot()
    windows = set()
    for r, label in zip(runs, labels(runs)):
        values = r.metrics[metric]
        if metric == "eval_return":
            evaluated = ~np.isnan(values).all(axis=0)
            done, values = np.nonzero(evaluated)[0] + 1.0, values[:, evaluated]
        else:
            done, values = binned(values, fill=metric == "episode_return")
            window = smoothing_window(values.shape[1], smooth_bins)
            windows.add(window)
            values = smooth(values, window)
        band(ax, r.steps(done) if x == "steps" else r.seconds(done), values, label)
    smoothed = ""
    if len(windows) == 1 and windows != {1}:
        smoothed = f"; moving average of {max(windows)} points"
    elif len(windows) > 1:  # runs of different lengths: a short one's is a tenth of its points
        smoothed = f"; moving average of {min(windows)} to {max(windows)} points (by run length)"
    seeds = [r.metrics[metric].shape[0] for r in runs]
    shaded = band_words(seeds)
    ax.set(xlabel="env steps per seed" if x == "steps" else "training seconds (compile excluded)",
           ylabel=metric.replace("_", " "))
    fit_title(
        ax,
        f"{metric}: mean over seeds" + (f", band: {shaded}" if shaded else "")
        + (", faint: each seed" if max(seeds) > 1 else "") + smoothed,
    )
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # none where no run ended an episode
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8)
    if x == "steps":
        steps_axis(ax)
    fig.tight_layout()
    save(fig, out, bbox_inches="tight")
    return fig


def main(argv: list[str] | None = None) -> None:
    """`scanrl-plot RUN_DIR [RUN_DIR ...] --out FILE`, or `scanrl-plot --compare A ... --vs B ...
    --out FILE` (common/harness/stats.py's compare_groups: the numbers printed, one figure)."""

    parser = configs.ToolParser(
        prog="scanrl-plot",
        description=(
            "Overlay the learning curves of several runs, or "
            "compare two groups of runs with rliable's statistics (--compare A ... --vs B ...)."
        ),
    )
    parser.add_argument(
        "run_dirs", nargs="*", metavar="RUN_DIR", help="run folders (runs/<algo>__<env>__<time>)"
    )
    parser.add_argument(
        "--compare",
        nargs="+",
        metavar="A",
        help=(
            "group A: run folders and/or results files (FILE.json, or FILE.json:ALGO for one of its"
            " algorithms); prints P(A > B), each group's IQM and draws their performance profiles"
        ),
    )
    parser.add_argument("--vs", nargs="+", metavar="B", help="group B, as --compare")
    parser.add_argument(
        "--reps", type=int, default=None, help="--compare: bootstrap resamples (default 10,000)"
    )
    parser.add_argument(
        "--out", default="compare.png", help="image to write (default: compare.png)"
    )
    parser.add_argument("--x", choices=("steps", "wall"), default="steps",
                        help="x axis: env steps per seed, or training seconds (wall)")
    parser.add_argument("--metric", default="episode_return",
                        help="any metric in the runs' metrics.npz, e.g. eval_return, value_loss")
    parser.add_argument(
        "--smooth",
        type=int,
        default=SMOOTH,
        metavar="K",
        help=(
            f"trailing moving average over K plotted points (0 or 1: raw; default: {SMOOTH}), at"
            " most a tenth of a run's points; the run's files keep the raw values"
        ),
    )
    args = parser.parse_args(argv)
    if args.compare or args.vs:
        compare_statistics(args)
        return
    if not args.run_dirs:
        parser.error(
            "give RUN_DIR ... to overlay curves, or --compare A ... --vs B ... to compare two"
            " groups"
        )
    if args.smooth < 0:
        fail(f"--smooth takes a number of points >= 0, got {args.smooth}.")
    try:
        compare(args.run_dirs, args.out, args.x, args.metric, args.smooth)
    except ValueError as e:
        fail(str(e))
    print(f"wrote {args.out}")


def draw_comparison(c, out: str | Path, labels: tuple[str, str] = ("A", "B")):
    """One figure of a stats.Comparison: P(A > B) and each group's IQM with their intervals (left),
    the performance profiles with their bands (right). Returns the Figure."""
    from scanrl.common.harness.stats import draw_interval, draw_profile

    fig = figure(11, 4)
    grid = fig.add_gridspec(2, 2, width_ratios=[1, 1.4])
    ax = fig.add_subplot(grid[0, 0])
    draw_interval(ax, 0, c.improvement, "C2")
    ax.axvline(0.5, color="grey", lw=0.8, ls="--")
    ax.set(
        xlim=(0, 1), yticks=[0], yticklabels=[f"P({labels[0]} > {labels[1]})"],
        title="probability of improvement",
    )
    ax = fig.add_subplot(grid[1, 0])
    if c.iqm is not None:
        for i, (key, label) in enumerate(zip("AB", labels)):
            draw_interval(ax, i, c.iqm[key], f"C{i}")
        ax.set(
            yticks=[0, 1], yticklabels=list(labels),
            title="IQM" + (" (normalised)" if c.normalised else ""),
        )
    else:
        ax.set_axis_off()
    ax = fig.add_subplot(grid[:, 1])
    for i, (key, label) in enumerate(zip("AB", labels)):
        draw_profile(ax, c.taus, c.profiles[key], c.profile_intervals[key], label, f"C{i}")
    ax.set(
        xlabel="normalised score (tau)" if c.normalised else f"{c.metric} (tau)",
        ylabel="fraction of runs > tau", title=f"performance profiles ({', '.join(c.tasks)})",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, out)
    return fig


def compare_statistics(args) -> None:
    """`--compare A ... --vs B ...`: print the comparison and draw it to --out."""
    from scanrl.common.harness import stats

    if not (args.compare and args.vs):
        fail(
            "--compare needs both groups: --compare A ... --vs B ... (got"
            f" {'--vs' if args.vs else '--compare'} only)."
        )
    if args.run_dirs:
        fail(
            f"--compare takes its runs after --compare and --vs; drop {' '.join(args.run_dirs)} or"
            " add them to a group."
        )
    metric = {"episode_return": "return", "eval_return": "eval_return"}.get(args.metric)
    if metric is None:
        fail(
            f"--metric {args.metric}: --compare scores each run by episode_return (its final"
            " return) or eval_return (its last evaluation)."
        )
    if args.reps is not None and args.reps < 1:
        fail(f"--reps takes a number of resamples >= 1, got {args.reps}.")
    try:
        result = stats.compare_groups(
            args.compare, args.vs, metric, args.reps or stats.REPS, progress=True
        )
    except ValueError as e:
        fail(str(e))
    console.say(f"A: {' '.join(args.compare)}")
    console.say(f"B: {' '.join(args.vs)}")
    for line in result.lines():
        console.say(line.strip(), indent=line[:len(line) - len(line.lstrip())])
    draw_comparison(result, args.out)
    console.say(f"wrote {args.out}")


if __name__ == "__main__":
    main()
