"""Aggregate statistics for reporting results: rliable's estimators and intervals, the
reference points that normalise scores, and the scores of runs and results files.

Every estimator here is rliable's (Agarwal et al. 2021, "Deep Reinforcement Learning at the
Edge of the Statistical Precipice"), called as rliable documents it; this module shapes the
inputs and keeps the bootstrap reproducible. Score arrays are rliable's: `[runs, tasks]`,
one row per independent run (a seed), one column per environment, each entry one run's
score. A run's score is one of two `METRICS`: "return", the final return of summary.json
(`final_return_per_seed`: the mean training-episode return over the last 10% of updates),
or "eval_return", the seed's last evaluation (the deterministic policy, `--eval-episodes`
episodes, from metrics.npz).

- `interval_estimates(scores)`: IQM, mean, median and optimality gap of each algorithm's
  [runs, tasks] array, each with a stratified-bootstrap 95% interval
  (rliable.library.get_interval_estimates); `iqm_interval(x)` for one config's seeds.
- `performance_profiles(scores, taus)`: the fraction of runs above each threshold, with
  intervals (rliable.library.create_performance_profile).
- `probability_of_improvement(x, y)`: P(X > Y) averaged over tasks, with its interval
  (rliable.metrics.probability_of_improvement, bootstrapped as rliable documents).
- `REFERENCE_POINTS`, `normalise`: (score - random) / (reference - random), per environment,
  every point with its source.
- `run_scores`, `results_from_runs`, `write_results`, `load_results`, `score_dict`: scores
  from run folders and results files (marl-eval's layout), as rliable's arrays.
- `compare_groups(a, b)`: what `scanrl-plot --compare` prints and draws.

rliable's bootstrap (arch's, through rliable's StratifiedBootstrap) draws one resample at a
time from numpy's global random state and calls the statistic once per resample in Python:
10,000 resamples of the probability of improvement took minutes. Here the same resamples are
drawn, from the same stream in the same order, all at once, and the statistic (rliable's,
written along a leading resample axis) runs on all of them at once; the intervals are
rliable's to the last bit (tests/test_stats.py checks them against rliable's own calls).
Each function seeds the global state (`seed`, default 0) around its bootstrap and restores
it afterwards: the same call gives the same interval, and a caller's own stream is untouched.
`BootstrapProgress` shows what is being bootstrapped while a tool waits on it.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from scanrl.common.suites import suite_of
from scanrl.common.harness.configs import Run

CONFIDENCE = 0.95
# bootstrap resamples for intervals of aggregates (rliable's own default is 50,000: 5x the time)
REPS = 10_000
PROFILE_REPS = 2_000  # for performance profiles: rliable's default
SEED = 0
AGGREGATES = ("IQM", "mean", "median", "optimality gap")
METRICS = {
    "return": (
        "final return: the mean training-episode return over the last 10% of updates, per seed"
    ),
    "eval_return": (
        "last evaluation: the deterministic policy's mean return over --eval-episodes episodes, per"
        " seed"
    ),
}
LAYOUT = (
    '{suite: {task: {algo: {"seed_<s>": {"absolute_metrics": {metric: [score]}, "step_<k>":'
    ' {...}}}}}}'
)
CURVE_POINTS = 20  # step_k entries of a results file when a run did not evaluate


# ---------------------------------------------------------------------------------------------
# Returns over seeds and updates: what summary.json, the tables and the stop conditions read
# ---------------------------------------------------------------------------------------------
def nanmean(x: np.ndarray, axis=None):
    x = np.asarray(x, dtype=np.float64)
    count = np.sum(~np.isnan(x), axis=axis)
    total = np.nansum(x, axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def latest_mean(x: np.ndarray | None) -> float | None:
    """Of [seeds, n]: the mean over seeds of the latest column where any seed has a value."""
    if x is None:
        return None
    columns = np.nonzero(~np.isnan(x).all(axis=0))[0]
    return float(nanmean(x[:, columns[-1]])) if columns.size else None


def final_returns(episode_return: np.ndarray) -> np.ndarray:
    """[seeds, updates] -> [seeds]: the mean return over the last 10% of the updates (NaN where
    no episode ended there): the "final return" of summary.json and of a sweep's table."""
    tail = max(1, math.ceil(0.1 * episode_return.shape[1]))
    return nanmean(episode_return[:, -tail:], axis=1)


def differ_widely(a: float, b: float) -> bool:
    """Two returns more than 25% of the larger magnitude apart (and not both about 0)."""
    return abs(a - b) > 0.25 * max(abs(a), abs(b)) and abs(a - b) > 1e-3


# ---------------------------------------------------------------------------------------------
# rliable, seeded
# ---------------------------------------------------------------------------------------------
def _rliable():
    """rliable's metrics, imported on first use (with scipy.stats: about a second). Its library
    module (arch, statsmodels, pandas: as long again) is not needed: the bootstrap is
    `_bootstrap`."""
    from rliable import metrics

    return metrics


@contextlib.contextmanager
def seeded(seed: int):
    """numpy's global random state seeded with `seed` inside, restored after."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its interval."""

    point: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.point:.3g} [{self.low:.3g}, {self.high:.3g}]"

    def as_list(self) -> list[float | None]:
        return [finite_or_none(self.point), finite_or_none(self.low), finite_or_none(self.high)]


def finite_or_none(x: float) -> float | None:
    """x as a JSON number, or None (null) where it is NaN or infinite."""
    return float(x) if math.isfinite(x) else None


def aggregates(scores: np.ndarray) -> np.ndarray:
    """[runs, tasks] -> [4]: rliable's IQM, mean, median and optimality gap (threshold 1, for
    normalised scores), in the order of AGGREGATES."""
    metrics = _rliable()
    return np.array([metrics.aggregate_iqm(scores), metrics.aggregate_mean(scores),
                     metrics.aggregate_median(scores), metrics.aggregate_optimality_gap(scores)])


# ---------------------------------------------------------------------------------------------
# rliable's stratified bootstrap, all resamples at once
# ---------------------------------------------------------------------------------------------
CHUNK = (
    1 << 21
)  # resampled scores held at once (16 MB of float64): 10,000 resamples of 200 runs x tasks


def _resamples(arrays: list[np.ndarray], reps: int):
    """Yields tuples of [k, runs_i, tasks] arrays, k resamples at a time, `reps` in all: each
    array's runs drawn with replacement within each task, as rliable's StratifiedBootstrap
    (one array) and StratifiedIndependentBootstrap (several) draw them: per resample
    np.random.choice(runs_i, shape_i) for each array in turn, which is
    np.random.randint(0, runs_i, shape_i), element after element from the global stream. So
    k resamples of arrays with equal numbers of runs are one randint call, split; arrays with
    different numbers (different bounds, interleaved) take one call per array per resample
    (0.4 s for 10,000 resamples of two arrays)."""
    size = sum(x.size for x in arrays)
    k = max(1, CHUNK // max(size, 1))
    tasks = [np.arange(x.shape[1]) for x in arrays]
    ends = np.cumsum([x.size for x in arrays])[:-1]
    for start in range(0, reps, k):
        n = min(k, reps - start)
        if len({x.shape[0] for x in arrays}) == 1:
            drawn = np.split(np.random.randint(0, arrays[0].shape[0], (n, size)), ends, axis=1)
            index = [i.reshape(n, *x.shape) for i, x in zip(drawn, arrays)]
        else:
            index = [np.empty((n, *x.shape), np.int64) for x in arrays]
            for r in range(n):
                for i, x in enumerate(arrays):
                    index[i][r] = np.random.randint(0, x.shape[0], x.shape)
        yield tuple(x[i, t] for x, i, t in zip(arrays, index, tasks))


def _bootstrap(arrays: list[np.ndarray], statistic, reps: int) -> np.ndarray:
    """statistic: [k, runs_i, tasks] per array -> [k, P]. Returns [2, P]: the 95% percentile
    interval over `reps` resamples, as arch's conf_int(method="percentile") computes it."""
    values = np.concatenate([statistic(*batch) for batch in _resamples(arrays, reps)])
    alpha = (1.0 - CONFIDENCE) / 2  # arch's arithmetic, so the percentiles are the same floats
    return np.percentile(values, [100 * alpha, 100 * (1.0 - alpha)], axis=0)


# rliable's metrics along a leading resample axis: the same numpy and scipy reductions over the
# same axes of each resample, so each value equals rliable's on that resample.
def _iqm(s: np.ndarray) -> np.ndarray:
    """[k, runs, tasks] -> [k]: metrics.aggregate_iqm of each (scipy's 25% trimmed mean)."""
    from scipy.stats import trim_mean

    return trim_mean(s.reshape(len(s), -1), proportiontocut=0.25, axis=1)


def _aggregates(s: np.ndarray) -> np.ndarray:
    """[k, runs, tasks] -> [k, 4]: `aggregates` of each resample."""
    task_means = s.mean(axis=1)
    return np.stack([_iqm(s), task_means.mean(axis=1), np.median(task_means, axis=1),
                     1 - np.minimum(s.reshape(len(s), -1), 1).mean(axis=1)], axis=1)


def _improvement(sx: np.ndarray, sy: np.ndarray) -> np.ndarray:
    """[k, runs_x, tasks], [k, runs_y, tasks] -> [k, 1]: metrics.probability_of_improvement of
    each pair (scipy's Mann-Whitney U over runs, / (n_x n_y), averaged over tasks; rliable's 0.5
    for equal columns is what U gives them)."""
    from scipy.stats import mannwhitneyu

    u = mannwhitneyu(
        sx, sy, axis=1, method="asymptotic"
    ).statistic  # U alone: the p-value's method is unused
    return (u / (sx.shape[1] * sy.shape[1])).mean(axis=1)[:, None]


def _profile(taus: np.ndarray):
    """[k, runs, tasks] -> [k, T]: rliable's score_distributions (fraction of runs above each
    tau)."""
    def profile(s: np.ndarray) -> np.ndarray:
        flat = s.reshape(len(s), -1)
        # a loop over taus: [k, n, T] at once would hold T times the resamples
        return np.stack([(flat > tau).mean(axis=1) for tau in taus], axis=1)

    return profile


def interval_estimates(
    scores: dict[str, np.ndarray], reps: int = REPS, seed: int = SEED
) -> dict[str, dict[str, Estimate]]:
    """scores: name -> [runs, tasks]. Returns name -> {aggregate: Estimate} for AGGREGATES, each
    with its stratified-bootstrap 95% interval (rliable.library.get_interval_estimates'). Each
    name is bootstrapped with the same seed, so its interval does not depend on which other
    names are passed."""
    out = {}
    for name, x in scores.items():
        x = np.asarray(x, np.float64)
        points = aggregates(x)
        with seeded(seed):
            intervals = _bootstrap([x], _aggregates, reps)
        out[name] = {a: Estimate(float(points[i]), float(intervals[0, i]), float(intervals[1, i]))
                     for i, a in enumerate(AGGREGATES)}
    return out


def iqm_interval(x: np.ndarray, reps: int = REPS, seed: int = SEED) -> Estimate | None:
    """[runs] (one task, e.g. one config's seeds; NaN runs left out) -> rliable's IQM with its
    95% interval, or None when no run has a score."""
    metrics = _rliable()
    x = np.asarray(x, np.float64)
    x = x[np.isfinite(x)][:, None]
    if not x.size:
        return None
    with seeded(seed):
        interval = _bootstrap([x], lambda s: _iqm(s)[:, None], reps)
    return Estimate(float(metrics.aggregate_iqm(x)), float(interval[0, 0]), float(interval[1, 0]))


def performance_profiles(scores: dict[str, np.ndarray], taus: np.ndarray, reps: int = PROFILE_REPS,
                         seed: int = SEED) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """scores: name -> [runs, tasks]; taus: [T] thresholds. Returns (profiles name -> [T], the
    fraction of all runs and tasks scoring above each tau; intervals name -> [2, T], low and
    high), rliable.library.create_performance_profile's score distributions."""
    profiles, intervals = {}, {}
    for name, x in scores.items():
        x = np.asarray(x, np.float64)
        profiles[name] = _profile(taus)(x[None])[0]
        with seeded(seed):
            intervals[name] = _bootstrap([x], _profile(taus), reps)
    return profiles, intervals


def probability_of_improvement(
    x: np.ndarray, y: np.ndarray, reps: int = REPS, seed: int = SEED
) -> Estimate:
    """x: [runs_x, tasks], y: [runs_y, tasks] (the same tasks, in the same order) -> P(X > Y):
    per task the probability that a run of X scores above a run of Y (Mann-Whitney U / (n_x
    n_y), ties counting half), averaged over tasks; its interval resamples each array's runs
    independently within each task."""
    metrics = _rliable()
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    with seeded(seed):
        interval = _bootstrap([x, y], _improvement, reps)
    return Estimate(
        float(metrics.probability_of_improvement(x, y)), float(interval[0, 0]),
        float(interval[1, 0]),
    )


PLAIN_EVERY = (
    2.0  # seconds between plain progress lines: a quick bootstrap says only when it starts and ends
)


class BootstrapProgress:
    """What a statistics tool shows while it bootstraps `total` steps (an interval or a few):
    "bootstrapping… <what>" once, then on a terminal rich's transient bar (steps done/total,
    elapsed, the step in hand), otherwise (CI, `| tee`, a log) a plain line of at most
    console.WIDTH characters when a step starts PLAIN_EVERY seconds or more after the last
    line, as console.py shows a run. Both end with one line: how many steps, how long. A
    context manager; call `step(label)` before each step."""

    def __init__(self, what: str, total: int):
        self.what, self.total, self.done = what, total, 0
        self._live = None

    def __enter__(self) -> BootstrapProgress:
        from scanrl.common.harness import console

        self.started = self._said = time.perf_counter()
        print(
            console.fit([f"bootstrapping… {self.what}"]), flush=True
        )  # kept above the bar: it is wider
        if console.interactive():
            from rich.progress import (
                BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                TimeElapsedColumn,
            )

            self._live = Progress(
                SpinnerColumn(), TextColumn("bootstrapping…"), BarColumn(bar_width=24),
                MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.description}"),
                transient=True,
            )
            self._task = self._live.add_task("", total=self.total)
            self._live.start()
        return self

    def step(self, label: str) -> None:
        from scanrl.common.harness import console

        now = time.perf_counter()
        if self._live is not None:
            self._live.update(self._task, completed=self.done, description=label)
        elif now - self._said >= PLAIN_EVERY:
            print(
                console.fit(
                    [
                        f"  bootstrapping {self.done + 1}/{self.total}",
                        console.clock(now - self.started),
                        label,
                    ]
                ),
                flush=True,
            )
            self._said = now
        self.done += 1

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if exc[0] is None:
            print(f"bootstrapped {self.total} step{'s' if self.total > 1 else ''} in "
                  f"{time.perf_counter() - self.started:.1f} s", flush=True)


def profile_taus(scores: dict[str, np.ndarray], num: int = 101) -> np.ndarray:
    """[num] thresholds from min(0, lowest score) to max(1, highest score): normalised scores
    show 0 (random) and 1 (reference) whatever the runs reached."""
    values = np.concatenate([np.ravel(x) for x in scores.values()]) if scores else np.zeros(1)
    values = values[np.isfinite(values)]
    low, high = (min(0.0, values.min()), max(1.0, values.max())) if values.size else (0.0, 1.0)
    return np.linspace(low, high, num)


# ---------------------------------------------------------------------------------------------
# Reference points: normalised score = (score - random) / (reference - random)
# ---------------------------------------------------------------------------------------------
class ReferencePoint(NamedTuple):
    """An environment's two reference scores and where each comes from."""

    random: float  # a uniform random policy's mean episode return
    reference: float  # a trained agent's (or the maximum) return
    random_source: str
    reference_source: str


def _measured(env: str, episodes: int, stderr: float, package: str = "gymnax 1.0.1") -> str:
    flag = "" if episodes == 1000 else f"--episodes {episodes} "
    return (
        f"measured: `python benchmarks/reference/random_returns.py {flag}{env}` ({episodes:,}"
        f" episodes of a uniform random policy, seed 0, standard error {stderr:.2f}; {package}, jax"
        " 0.10.2)"
    )


# gymnax's README (the package description of gymnax 1.0.1) lists, per environment, the return
# of the trained agent it links in gymnax-blines ("Ckpt (Return)" column).
GYMNAX_README = (
    "gymnax 1.0.1 README, environment table, 'Ckpt (Return)' column: the return of the trained"
    " {agent} agent gymnax-blines publishes for this env (R: {r})"
)

REFERENCE_POINTS: dict[str, ReferencePoint] = {
    "CartPole-v1": ReferencePoint(
        22.75,
        500.0,
        _measured("CartPole-v1", 1000, 0.40),
        GYMNAX_README.format(agent="PPO/ES", r=500)
        + "; also the maximum: reward 1 per step, episodes cut at 500 steps",
    ),
    "Acrobot-v1": ReferencePoint(
        -499.22, -80.0, _measured("Acrobot-v1", 1000, 0.25),
        GYMNAX_README.format(agent="PPO/ES", r=-80),
    ),
    "MountainCar-v0": ReferencePoint(
        -200.0, -118.0, _measured("MountainCar-v0", 1000, 0.0),
        GYMNAX_README.format(agent="PPO/ES", r=-118),
    ),
    "Pendulum-v1": ReferencePoint(
        -1222.95, -130.0, _measured("Pendulum-v1", 1000, 9.15),
        GYMNAX_README.format(agent="PPO/ES", r=-130),
    ),
    "MountainCarContinuous-v0": ReferencePoint(
        -32.98, 92.0, _measured("MountainCarContinuous-v0", 1000, 0.18),
        GYMNAX_README.format(agent="PPO/ES", r=92),
    ),
    "Catch-bsuite": ReferencePoint(
        -0.64,
        1.0,
        _measured("Catch-bsuite", 1000, 0.02),
        GYMNAX_README.format(agent="PPO/ES", r=1)
        + "; also the maximum: +1 for the one ball of an episode caught",
    ),
    "Breakout-MinAtar": ReferencePoint(
        0.43, 28.0, _measured("Breakout-MinAtar", 1000, 0.02),
        GYMNAX_README.format(agent="PPO", r=28),
    ),
    "SpaceInvaders-MinAtar": ReferencePoint(
        4.18, 131.0, _measured("SpaceInvaders-MinAtar", 1000, 0.10),
        GYMNAX_README.format(agent="PPO", r=131),
    ),
    "Asterix-MinAtar": ReferencePoint(
        0.47, 15.0, _measured("Asterix-MinAtar", 1000, 0.03),
        GYMNAX_README.format(agent="PPO", r=15),
    ),
    "Freeway-MinAtar": ReferencePoint(
        0.41, 58.0, _measured("Freeway-MinAtar", 1000, 0.02),
        GYMNAX_README.format(agent="PPO", r=58),
    ),
    "brax/inverted_pendulum": ReferencePoint(
        5.78,
        1000.0,
        _measured("brax/inverted_pendulum", 1000, 0.10) + ", brax 0.14.2",
        "the maximum: reward 1 per step while the pole stays up (brax/envs/inverted_pendulum.py),"
        " 1000-step episodes (common/suites/brax.py); Brax's own SAC trainer and scanrl's PPO and"
        " SAC reach it (benchmarks/HISTORY.md, 2026-11-25)",
    ),
    # The suites' own baselines publish curves, not numbers, for these envs: the reference is the
    # maximum return, from each env's reward
    "navix/Navix-Empty-5x5-v0": ReferencePoint(
        0.41,
        1.0,
        _measured("navix/Navix-Empty-5x5-v0", 1000, 0.02, "navix 0.7.4"),
        "the maximum: reward 1 on reaching the goal, 0 otherwise (navix rewards.on_goal_reached),"
        " which ends the episode",
    ),
    "xminigrid/MiniGrid-Empty-5x5": ReferencePoint(
        0.24,
        0.955,
        _measured("xminigrid/MiniGrid-Empty-5x5", 1000, 0.01, "xminigrid 0.9.3"),
        "the maximum: reward 1 - 0.9 * steps / 100 at the goal (xminigrid/environment.py), reached"
        " in 5 steps at the fewest from its fixed start",
    ),
    "jumanji/Snake-v1": ReferencePoint(
        6.17,
        143.0,
        _measured("jumanji/Snake-v1", 1000, 0.06, "jumanji 1.1.2"),
        "the maximum: reward 1 per fruit on the 12 x 12 board, where a snake of length 1 can eat"
        " 143 before it fills it (jumanji's Snake defaults); Jumanji's A2C baseline publishes"
        " curves only",
    ),
    "craftax/Craftax-Classic-Symbolic-v1": ReferencePoint(
        1.57,
        22.0,
        _measured("craftax/Craftax-Classic-Symbolic-v1", 1000, 0.04, "craftax 1.6.1"),
        "the maximum: +1 per achievement, 22 of them, and +-0.1 per health point gained or lost,"
        " which nets at most 0 from full health; the Craftax paper (arXiv:2402.16801) reports PPO"
        " at about 90% of it after 1e9 steps",
    ),
    "playground/CartpoleBalance": ReferencePoint(
        358.16,
        1000.0,
        _measured("playground/CartpoleBalance", 1000, 1.73, "playground 0.2.0"),
        "the maximum: a reward of at most 1 per step (DM Control's upright x centred x small"
        " control x small velocity) over 1000-step episodes",
    ),
}


def reference_point(
    env: str, points: dict[str, ReferencePoint] | None = None
) -> ReferencePoint | None:
    """The env's reference points (a bare gymnax id or `gymnax/ID` alike), or None."""
    points = REFERENCE_POINTS if points is None else points
    return points.get(env.removeprefix("gymnax/"))


def normalise(
    scores: np.ndarray, env: str, points: dict[str, ReferencePoint] | None = None
) -> np.ndarray:
    """Scores of `env` -> (score - random) / (reference - random): 0 is the random policy, 1 the
    reference. ValueError when the env has no reference points."""
    p = reference_point(env, points)
    if p is None:
        raise ValueError(f"{env} has no reference points to normalise its scores; the known envs: "
                         f"{', '.join(sorted(REFERENCE_POINTS if points is None else points))}.")
    return (np.asarray(scores, np.float64) - p.random) / (p.reference - p.random)


# ---------------------------------------------------------------------------------------------
# Scores of runs, and results files (marl-eval's layout)
# ---------------------------------------------------------------------------------------------
def run_scores(run_dir: str | Path) -> dict[str, Any]:
    """A finished run folder's scores and facts: {"algo", "env", "seeds" (the seed numbers),
    "return" [seeds] (summary.json's final_return_per_seed, NaN where no episode ended in the
    last 10% of updates), "eval_return" [seeds] (each seed's last evaluation) or None when the
    run never evaluated, "curve": [(env steps per seed, {metric: [seeds]})], "summary"}.
    RunFolderError (a ValueError) for a folder that is not a finished run's."""
    run = Run(run_dir)
    s = run.summary
    final = np.array([np.nan if v is None else v for v in s["final_return_per_seed"]], np.float64)
    returns, evals = run.metrics["episode_return"], run.metrics.get("eval_return")
    evaluated = np.zeros(0, int) if evals is None else np.nonzero(~np.isnan(evals).all(axis=0))[0]
    # The curve's points: after each evaluation, else CURVE_POINTS even stretches of the updates
    ends = (
        evaluated + 1
        if evaluated.size
        else np.unique(
            np.linspace(0, returns.shape[1], min(CURVE_POINTS, returns.shape[1]) + 1).astype(int)
        )[1:]
    )
    curve, start = [], 0
    for end in ends:
        point = {
            "return": nanmean(returns[:, start:end], axis=1)
        }  # the training return since the last point
        if end - 1 in evaluated:
            point["eval_return"] = evals[:, end - 1]
        curve.append((int(round(run.steps(end))), point))
        start = end
    first = int(run.config.get("seed", 0))
    return {
        "algo": s["algo"],
        "env": s["env"],
        "seeds": list(range(first, first + s["num_seeds"])),
        "return": final,
        "eval_return": evals[:, evaluated[-1]] if evaluated.size else None,
        "curve": curve,
        "summary": s,
    }


def join_env(suite: str, task: str) -> str:
    """A results file's (suite, task) -> the env id: the inverse of suites.suite_of."""
    return task if suite == "gymnax" else f"{suite}/{task}"


def results_from_runs(runs: list[dict[str, Any]]) -> dict:
    """`run_scores` of finished runs -> a results file's content, marl-eval's layout:
    {suite: {task: {algo: {"seed_<s>": {"step_<k>": {"step_count": int, "return": [x],
    "eval_return": [x]}, ..., "absolute_metrics": {"return": [x], "eval_return": [x]}}}}}}.
    Each list holds the one score of that seed (null where it has none); "eval_return" is
    left out where the run did not evaluate."""
    out: dict = {}
    for r in runs:
        suite, task = suite_of(r["env"])  # ("gymnax", "CartPole-v1"), ("brax", "inverted_pendulum")
        cell = out.setdefault(suite, {}).setdefault(task, {}).setdefault(r["algo"], {})
        for i, seed in enumerate(r["seeds"]):
            entry = {}
            for k, (steps, point) in enumerate(r["curve"]):
                entry[f"step_{k}"] = {
                    "step_count": steps,
                    **{m: [finite_or_none(float(v[i]))] for m, v in point.items()},
                }
            entry["absolute_metrics"] = {"return": [finite_or_none(float(r["return"][i]))]}
            if r["eval_return"] is not None:
                entry["absolute_metrics"]["eval_return"] = [
                    finite_or_none(float(r["eval_return"][i]))
                ]
            cell[f"seed_{seed}"] = entry
    return out


def write_results(path: str | Path, results: dict) -> None:
    Path(path).write_text(json.dumps(results, indent=1) + "\n")


def load_results(path: str | Path) -> dict:
    """A results file (marl-eval's layout, see `results_from_runs`) as written. ValueError with
    one sentence for a file that is not one."""
    path = Path(path)
    try:
        results = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(
            f"{path} is not a readable results file ({type(e).__name__}: {str(e).splitlines()[0]})."
        ) from None
    try:
        for tasks in results.values():
            for algos in tasks.values():
                for runs in algos.values():
                    for run in runs.values():
                        assert isinstance(run["absolute_metrics"], dict)
    except (AttributeError, AssertionError, KeyError, TypeError):
        raise ValueError(f"{path} is not a results file: it needs marl-eval's layout, {LAYOUT} "
                         f"(docs/statistics.md).") from None
    return results


def cell_scores(results: dict, metric: str = "return") -> dict[tuple[str, str], np.ndarray]:
    """(algo, env id) -> [runs] of one metric (the first value of each run's absolute_metrics
    list; NaN where a run has none)."""
    out = {}
    for suite, tasks in results.items():
        for task, algos in tasks.items():
            for algo, runs in algos.items():
                values = [
                    (run["absolute_metrics"].get(metric) or [None])[0] for run in runs.values()
                ]
                out[(algo, join_env(suite, task))] = np.array(
                    [np.nan if v is None else v for v in values], np.float64
                )
    return out


def score_dict(
    results: dict, metric: str = "return", normalised: bool = True,
    points: dict[str, ReferencePoint] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    """A results file's scores as rliable's input: ({algo: [runs, tasks]}, {algo: [env ids of
    its columns]}), envs in sorted order. `normalised`: each column normalised by its env's
    reference points; envs without points are left out. ValueError when an algorithm's
    envs have different numbers of runs (rliable's array is rectangular)."""
    by_algo: dict[str, dict[str, np.ndarray]] = {}
    for (algo, env), x in sorted(cell_scores(results, metric).items()):
        if normalised:
            if reference_point(env, points) is None:
                continue
            x = normalise(x, env, points)
        by_algo.setdefault(algo, {})[env] = x
    scores = {algo: stacked(columns, algo) for algo, columns in by_algo.items()}
    return scores, {algo: list(columns) for algo, columns in by_algo.items()}


def stacked(columns: dict[str, np.ndarray], name: str) -> np.ndarray:
    """env -> [runs] as rliable's [runs, tasks]; ValueError when the envs have different numbers
    of runs (the array is rectangular)."""
    counts = {env: x.size for env, x in columns.items()}
    if len(set(counts.values())) > 1:
        shown = ", ".join(f"{env}: {n}" for env, n in counts.items())
        raise ValueError(
            f"{name} has different numbers of runs per env ({shown}); rliable's [runs, tasks] array"
            " needs the same number in every env."
        )
    return np.stack(list(columns.values()), axis=1)


# ---------------------------------------------------------------------------------------------
# Two groups of runs: scanrl-plot --compare
# ---------------------------------------------------------------------------------------------
def group_scores(items: list[str | Path], metric: str = "return") -> dict[str, np.ndarray]:
    """Env id -> [runs] of a group: each item a run folder, or a results file holding one
    algorithm (`FILE.json:ALGO` picks one of several). Runs of the same env from several items
    are pooled. ValueError with one sentence for an item that is neither."""
    pooled: dict[str, list[np.ndarray]] = {}
    for item in map(str, items):
        path, sep, algo = item.rpartition(":")
        if not (sep and path.endswith(".json")):  # FILE.json:ALGO, else the whole item is the path
            path, algo = item, ""
        if Path(path).is_dir():
            r = run_scores(path)
            x = r[metric]
            if x is None:
                raise ValueError(
                    f"{item} never evaluated, so it has no eval_return; compare its final return "
                    "(--metric episode_return) instead."
                )
            pooled.setdefault(r["env"], []).append(x)
            continue
        if not Path(path).is_file():
            raise ValueError(f"{item} is neither a run folder nor a results file.")
        cells = cell_scores(load_results(path), metric)
        names = sorted({a for a, _ in cells})
        if algo and algo not in names:
            raise ValueError(
                f"{item}: {path} has no algorithm {algo!r} (it has {', '.join(names)})."
            )
        if not algo and len(names) > 1:
            raise ValueError(
                f"{item} holds several algorithms ({', '.join(names)}); name one as"
                f" {path}:{names[0]}."
            )
        for (a, env), x in cells.items():
            if a == (algo or names[0]):
                pooled.setdefault(env, []).append(x)
    return {env: np.concatenate(xs) for env, xs in sorted(pooled.items())}


def _matrix(group: dict[str, np.ndarray], name: str) -> np.ndarray:
    """env -> [runs] as [runs, tasks]; ValueError for missing scores or unequal run counts."""
    for env, x in group.items():
        if np.isnan(x).any():
            raise ValueError(
                f"{name} has runs without a score on {env} (no episode ended in their last 10% of "
                "updates, or no evaluation); compare the other metric or leave those runs out."
            )
    return stacked(group, name)


@dataclass
class Comparison:
    """Group A against group B on the same envs (`tasks`); arrays [runs, tasks], normalised
    when every env has reference points."""

    tasks: list[str]
    normalised: bool
    a: np.ndarray
    b: np.ndarray
    improvement: Estimate  # P(A > B)
    iqm: (
        dict[str, Estimate] | None
    )  # "A", "B"; None for raw scores of several envs (different scales)
    taus: np.ndarray
    profiles: dict[str, np.ndarray]  # "A", "B" -> [T]
    profile_intervals: dict[str, np.ndarray]  # "A", "B" -> [2, T]
    metric: str = "return"

    def lines(self) -> list[str]:
        """What scanrl-plot prints."""
        kind = "normalised (0 random, 1 reference)" if self.normalised else "raw"
        out = [f"{self.metric} ({METRICS[self.metric]}), {kind} scores on {len(self.tasks)} env"
               f"{'s' if len(self.tasks) > 1 else ''}: {', '.join(self.tasks)}",
               f"  runs: A {self.a.shape[0]}, B {self.b.shape[0]} per env",
               f"  P(A > B) = {self.improvement} (95% interval)"]
        if self.iqm is not None:
            out += [f"  IQM of A = {self.iqm['A']}", f"  IQM of B = {self.iqm['B']}"]
        else:
            out.append(
                "  IQM: not computed (raw scores of several envs have different scales; give every"
                " env reference points to compare normalised scores)"
            )
        return out


def compare_groups(
    a: list[str | Path], b: list[str | Path], metric: str = "return", reps: int = REPS,
    seed: int = SEED, progress: bool = False,
) -> Comparison:
    """Group A (run folders and/or results files) against group B on the same envs: the
    probability of improvement P(A > B), the IQM of each group and their performance profiles,
    each with 95% intervals. Scores are normalised when every env has reference points.
    `progress`: show the bootstrap's (`BootstrapProgress`). ValueError with one sentence when the
    groups cannot be compared."""
    if metric not in METRICS:
        raise ValueError(f"--metric {metric}: the comparison reads {' or '.join(METRICS)}.")
    ga, gb = group_scores(a, metric), group_scores(b, metric)
    if set(ga) != set(gb):
        raise ValueError(
            f"the groups ran different envs (A: {', '.join(ga)}; B: {', '.join(gb)}); compare them"
            " on the same envs."
        )
    tasks = list(ga)
    normalised = all(reference_point(env) is not None for env in tasks)
    if normalised:
        ga = {env: normalise(x, env) for env, x in ga.items()}
        gb = {env: normalise(x, env) for env, x in gb.items()}
    xa, xb = _matrix(ga, "group A"), _matrix(gb, "group B")
    iqm, with_iqm = None, normalised or len(tasks) == 1
    what = (
        f"P(A > B){', IQMs' if with_iqm else ''} and performance profiles of {xa.shape[0]} and"
        f" {xb.shape[0]} runs x {len(tasks)} env{'s' if len(tasks) > 1 else ''}, {reps:,} resamples"
    )
    with BootstrapProgress(what, 2 + with_iqm) if progress else contextlib.nullcontext() as shown:
        step = shown.step if shown else lambda label: None
        step("P(A > B)")
        improvement = probability_of_improvement(xa, xb, reps, seed)
        if with_iqm:
            step("IQM of A and of B")
            estimates = interval_estimates({"A": xa, "B": xb}, reps, seed)
            iqm = {k: v["IQM"] for k, v in estimates.items()}
        step("performance profiles")
        taus = profile_taus({"A": xa, "B": xb})
        profiles, intervals = performance_profiles({"A": xa, "B": xb}, taus, seed=seed)
    return Comparison(
        tasks, normalised, xa, xb, improvement, iqm, taus, profiles, intervals, metric
    )


def draw_interval(ax, y: float, e: Estimate, color: str) -> None:
    """A horizontal bar from the interval's low to high end, a tick at the point estimate."""
    ax.barh(y, e.high - e.low, left=e.low, height=0.6, color=color, alpha=0.6)
    ax.plot([e.point, e.point], [y - 0.3, y + 0.3], color="black", lw=1.5)
    ax.grid(axis="x", alpha=0.3)


def draw_profile(
    ax, taus: np.ndarray, profile: np.ndarray, interval: np.ndarray, label: str, color: str
) -> None:
    """A performance profile ([T] over taus [T]) as a line, its interval ([2, T]) as a band."""
    ax.plot(taus, profile, color=color, lw=1.8, label=label)
    ax.fill_between(taus, interval[0], interval[1], color=color, alpha=0.2, lw=0)
    ax.grid(alpha=0.3)
