"""Aggregate statistics (common/harness/stats.py): rliable is the oracle, called directly with
the same seed; the reference points; the results file; `scanrl-plot --compare`. No learning."""

import json

import numpy as np
import pytest
from rliable import library, metrics

from scanrl.common.harness import plots, reports, stats, sweeps
from scanrl.common.harness.runconfig import compose

REPS = 300  # resamples: the oracle and the wrapper draw the same ones, so few suffice
SCORES = {  # [runs, tasks], fixed: 5 runs of 3 tasks and 7 runs of 3 tasks
    "a": np.random.default_rng(1).normal(0.6, 0.3, (5, 3)),
    "b": np.random.default_rng(2).normal(0.4, 0.2, (7, 3)),
}


def oracle(call, seed=stats.SEED):
    """rliable itself, with numpy's global random state seeded as the wrappers seed it."""
    np.random.seed(seed)
    return call()


def test_interval_estimates_are_rliables():
    aggregate = lambda x: np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x), metrics.aggregate_median(x),
                                    metrics.aggregate_optimality_gap(x)])
    ours = stats.interval_estimates(SCORES, reps=REPS, seed=3)
    for name, x in SCORES.items():  # each name on its own, seeded the same
        points, intervals = oracle(lambda name=name, x=x: library.get_interval_estimates({name: x}, aggregate, reps=REPS),
                                   seed=3)
        for i, what in enumerate(stats.AGGREGATES):
            e = ours[name][what]
            assert (e.point, e.low, e.high) == (points[name][i], intervals[name][0, i], intervals[name][1, i])
            assert e.low <= e.point <= e.high
    # the optimality gap is 1 - mean of min(score, 1); the IQM the 25% trimmed mean over runs and tasks
    assert ours["a"]["optimality gap"].point == pytest.approx(1 - np.minimum(SCORES["a"], 1).mean())


def test_iqm_interval_of_one_config_is_rliables_and_leaves_nan_seeds_out():
    x = np.array([3.0, 1.0, np.nan, 7.0, 4.0, 2.0, 9.0])
    ours = stats.iqm_interval(x, reps=REPS)
    finite = x[np.isfinite(x)][:, None]
    points, intervals = oracle(lambda: library.get_interval_estimates(
        {"x": finite}, lambda s: np.array([metrics.aggregate_iqm(s)]), reps=REPS))
    assert (ours.point, ours.low, ours.high) == (points["x"][0], intervals["x"][0, 0], intervals["x"][1, 0])
    assert stats.iqm_interval(np.array([np.nan, np.nan])) is None


def test_performance_profiles_are_rliables():
    taus = stats.profile_taus(SCORES, num=21)
    assert taus[0] <= 0 and taus[-1] >= 1
    profiles, intervals = stats.performance_profiles(SCORES, taus, reps=REPS)
    for name, x in SCORES.items():
        p, ci = oracle(lambda name=name, x=x: library.create_performance_profile({name: x}, taus, reps=REPS))
        np.testing.assert_array_equal(profiles[name], p[name])
        np.testing.assert_array_equal(intervals[name], ci[name])
        np.testing.assert_allclose(profiles[name], [(x > t).mean() for t in taus])  # fraction of runs above tau


def test_probability_of_improvement_is_rliables():
    ours = stats.probability_of_improvement(SCORES["a"], SCORES["b"], reps=REPS)
    points, intervals = oracle(lambda: library.get_interval_estimates(
        {"a,b": [SCORES["a"], SCORES["b"]]}, lambda x, y: np.array([metrics.probability_of_improvement(x, y)]),
        reps=REPS))
    assert (ours.point, ours.low, ours.high) == (points["a,b"][0], intervals["a,b"][0, 0], intervals["a,b"][1, 0])


def test_the_callers_random_stream_is_left_as_it_was():
    np.random.seed(123)
    expected = np.random.random(3)
    np.random.seed(123)
    stats.iqm_interval(np.arange(5.0), reps=20)
    np.testing.assert_array_equal(np.random.random(3), expected)


def test_every_reference_point_has_its_source_and_normalises_random_to_0_and_reference_to_1():
    for env, p in stats.REFERENCE_POINTS.items():
        assert p.random != p.reference and all(np.isfinite([p.random, p.reference])), env
        assert p.random_source.strip() and p.reference_source.strip(), env
        assert p.random_source.startswith("measured: `python benchmarks/reference/random_returns.py"), env
        assert stats.normalise(np.array([p.random, p.reference]), env) == pytest.approx([0.0, 1.0])
    assert stats.normalise(np.array([500.0]), "gymnax/CartPole-v1") == pytest.approx([1.0])
    with pytest.raises(ValueError, match="DeepSea-bsuite has no reference points"):
        stats.normalise(np.zeros(2), "DeepSea-bsuite")


def synthetic_results(scores: dict[tuple[str, str], np.ndarray]) -> dict:
    """A results file's content from (algo, env) -> [runs] (no curve)."""
    runs = [{"algo": algo, "env": env, "seeds": list(range(x.size)), "return": x, "eval_return": None, "curve": []}
            for (algo, env), x in scores.items()]
    return stats.results_from_runs(runs)


def test_a_results_file_round_trips_and_reads_as_rliables_arrays(tmp_path):
    rng = np.random.default_rng(0)
    scores = {("ppo", "CartPole-v1"): rng.uniform(22, 500, 4), ("ppo", "Acrobot-v1"): rng.uniform(-500, -80, 4),
              ("sac", "brax/inverted_pendulum"): np.array([1000.0, np.nan, 3.0, 4.0])}
    results = synthetic_results(scores)
    assert set(results) == {"gymnax", "brax"} and set(results["brax"]["inverted_pendulum"]["sac"]) == \
        {"seed_0", "seed_1", "seed_2", "seed_3"}
    assert results["brax"]["inverted_pendulum"]["sac"]["seed_1"]["absolute_metrics"] == {"return": [None]}
    stats.write_results(tmp_path / "results.json", results)
    assert stats.load_results(tmp_path / "results.json") == results
    cells = stats.cell_scores(results)
    np.testing.assert_array_equal(cells[("sac", "brax/inverted_pendulum")], scores[("sac", "brax/inverted_pendulum")])
    raw, tasks = stats.score_dict(results, normalised=False)
    assert tasks == {"ppo": ["Acrobot-v1", "CartPole-v1"], "sac": ["brax/inverted_pendulum"]}
    np.testing.assert_array_equal(raw["ppo"], np.stack([scores[("ppo", "Acrobot-v1")], scores[("ppo", "CartPole-v1")]], 1))
    normalised, _ = stats.score_dict(results)
    np.testing.assert_allclose(normalised["ppo"][:, 1], stats.normalise(scores[("ppo", "CartPole-v1")], "CartPole-v1"))
    (tmp_path / "bad.json").write_text(json.dumps({"gymnax": {"CartPole-v1": {"ppo": {"seed_0": [1.0]}}}}))
    with pytest.raises(ValueError, match="is not a results file: it needs marl-eval's layout"):
        stats.load_results(tmp_path / "bad.json")


@pytest.fixture(scope="module")
def groups(tmp_path_factory):
    """Three results files on two envs, 10 runs each: `high` clearly above `low`, `low2` the same
    scores as `low`."""
    folder = tmp_path_factory.mktemp("groups")
    rng = np.random.default_rng(0)
    low = {env: rng.normal(mid, 10.0, 10) for env, mid in (("CartPole-v1", 200.0), ("Acrobot-v1", -300.0))}
    files = {}
    for name, shift in (("high", 150.0), ("low", 0.0), ("low2", 0.0)):
        files[name] = folder / f"{name}.json"
        stats.write_results(files[name], synthetic_results({("ppo", env): x + shift for env, x in low.items()}))
    return files


def test_compare_groups_finds_a_clear_difference_and_none_between_equal_groups(groups):
    better = stats.compare_groups([groups["high"]], [groups["low"]], reps=500)
    assert better.tasks == ["Acrobot-v1", "CartPole-v1"] and better.normalised
    assert better.improvement.point == 1.0 and better.improvement.low > 0.5
    assert better.iqm["A"].low > better.iqm["B"].high
    same = stats.compare_groups([groups["low"]], [groups["low2"]], reps=500)
    assert same.improvement.point == 0.5 and same.improvement.low < 0.5 < same.improvement.high
    with pytest.raises(ValueError, match="is neither a run folder nor a results file"):
        stats.compare_groups([groups["high"]], [groups["high"].parent / "missing.json"])


def test_scanrl_plot_compare_prints_the_numbers_and_draws_them(groups, tmp_path, capsys):
    out = tmp_path / "compare.png"
    plots.main(["--compare", str(groups["high"]), "--vs", str(groups["low"]), "--out", str(out), "--reps", "500"])
    printed = capsys.readouterr().out
    assert "P(A > B) = 1 [1, 1] (95% interval)" in printed and "IQM of A = " in printed and "IQM of B = " in printed
    assert "normalised (0 random, 1 reference) scores on 2 envs: Acrobot-v1, CartPole-v1" in printed
    assert printed.startswith("bootstrapping… P(A > B), IQMs and performance profiles of 10 and 10 runs x 2 envs, "
                              "500 resamples\n") and "bootstrapped 3 steps in " in printed
    from PIL import Image

    with Image.open(out) as image:
        assert image.size[0] >= 800
    with pytest.raises(SystemExit) as exit_info:
        plots.main(["--compare", str(groups["high"]), "--out", str(out)])
    assert exit_info.value.code == 2 and "--compare needs both groups" in capsys.readouterr().err


def test_a_sweep_reports_rliables_iqm_interval_per_config(tmp_path):
    from scanrl.algos import ppo

    config = compose(ppo, "CartPole-v1", num_seeds=4)
    sweep = sweeps.parse(("learning_rate=1e-3,3e-3",), 8, 0, config.config)
    returns = [np.tile(np.array([[10.0], [20.0], [30.0], [40.0]]), (1, 10)) + c for c in range(2)]  # [seeds, updates]
    rows = reports.sweep_report(tmp_path, sweep, returns, None, {"learning_rate": 3e-4}, 4)
    for c, row in enumerate(rows):
        expected = stats.iqm_interval(np.array([10.0, 20.0, 30.0, 40.0]) + c, reps=reports.IQM_REPS)
        assert row["final_return_iqm"] == expected.point == 25.0 + c
        assert row["final_return_iqm_ci95"] == [expected.low, expected.high]
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert saved["configs"][0]["final_return_iqm_ci95"] == rows[0]["final_return_iqm_ci95"]
    assert "rliable" in saved["iqm_interval"]


def test_the_sweep_table_calls_an_interval_of_fewer_than_4_seeds_a_range(tmp_path, capsys):
    """With 2 seeds rliable's 95% interval is the two final returns: the header and a footnote
    say it is a range. With 4 seeds it is the bootstrap interval, unless a config has fewer than
    4 final returns (a seed that never ended an episode late in the run): that row is starred."""
    from scanrl.algos import ppo

    config = compose(ppo, "CartPole-v1", num_seeds=2)
    sweep = sweeps.parse(("learning_rate=1e-3,3e-3",), 8, 0, config.config)
    returns = [np.tile(np.array([[10.0], [20.0]]), (1, 10)) + c for c in range(2)]
    rows = reports.sweep_report(tmp_path, sweep, returns, None, {"learning_rate": 3e-4}, 2)
    printed = capsys.readouterr().out
    assert rows[0]["final_return_iqm_ci95"] == [10.0, 20.0]  # the range, unchanged in sweep.json
    assert "iqm range (2 seeds)" in printed and "95% interval" not in printed
    assert "[10.00, 20.00]" in printed and "iqm range: a 95% bootstrap interval over 2 seeds" in printed
    assert "range" in json.loads((tmp_path / "sweep.json").read_text())["iqm_interval"]

    returns = [np.tile(np.array([[10.0], [20.0], [30.0], [40.0]]), (1, 10)) + c for c in range(2)]
    reports.sweep_report(tmp_path, sweep, returns, None, {"learning_rate": 3e-4}, 4)
    printed = capsys.readouterr().out
    assert "iqm 95% interval" in printed and "range" not in printed and "*" not in printed
    returns[1][2:] = np.nan  # config 1: 2 of its 4 seeds have no final return
    reports.sweep_report(tmp_path, sweep, returns, None, {"learning_rate": 3e-4}, 4)
    printed = capsys.readouterr().out
    assert "iqm 95% interval" in printed and "[11.00, 21.00]*" in printed
    assert "*: fewer than 4 of this config's seeds have a final return: its interval is their range" in printed


@pytest.mark.slow
def test_the_vectorised_bootstrap_draws_rliables_resamples_across_chunks(monkeypatch):
    """All resamples at once (stats._bootstrap) against rliable's one-at-a-time bootstrap: the
    same draws from the seeded stream, so the intervals are equal, not merely within
    Monte-Carlo error. Small chunks, unequal run counts (interleaved draws), tied scores
    (Mann-Whitney's half counts) and a single run (no draw at all) are the edge cases."""
    monkeypatch.setattr(stats, "CHUNK", 50)  # 3-4 resamples a chunk: many chunk boundaries
    x, y = np.round(SCORES["a"], 1), np.round(SCORES["b"], 1)  # ties within and between the groups
    for a, b in ((x, y), (x, x[::-1]), (x[:1], y)):
        ours = stats.probability_of_improvement(a, b, reps=REPS, seed=7)
        points, intervals = oracle(lambda a=a, b=b: library.get_interval_estimates(
            {"a,b": [a, b]}, lambda p, q: np.array([metrics.probability_of_improvement(p, q)]), reps=REPS), seed=7)
        assert (ours.point, ours.low, ours.high) == (points["a,b"][0], intervals["a,b"][0, 0], intervals["a,b"][1, 0])
    ours = stats.iqm_interval(np.arange(10.0) % 4, reps=REPS, seed=7)
    points, intervals = oracle(lambda: library.get_interval_estimates(
        {"x": (np.arange(10.0) % 4)[:, None]}, lambda s: np.array([metrics.aggregate_iqm(s)]), reps=REPS), seed=7)
    assert (ours.point, ours.low, ours.high) == (points["x"][0], intervals["x"][0, 0], intervals["x"][1, 0])


def test_the_default_resamples_are_computed_in_blocks_not_one_by_one(monkeypatch):
    """rliable's bootstrap called the statistic once per resample in Python: 10,000 resamples of
    P(A > B) for 60 runs against 60 took over a minute on 2 shared cores. Counted, not timed (a
    slow machine must not fail it): every statistic is computed on whole blocks of resamples,
    one call per block of CHUNK scores, however many resamples there are."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.5, 0.2, (60, 1)), rng.normal(0.4, 0.2, (60, 1))
    calls = []
    draws = stats._resamples
    monkeypatch.setattr(stats, "_resamples", lambda arrays, reps: (calls.append(reps), *draws(arrays, reps))[1:])
    blocks = []
    bootstrap = stats._bootstrap
    monkeypatch.setattr(stats, "_bootstrap", lambda arrays, statistic, reps: bootstrap(
        arrays, lambda *batch: (blocks.append(len(batch[0])), statistic(*batch))[1], reps))
    stats.probability_of_improvement(a, b)
    stats.interval_estimates({"a": a, "b": b})
    assert calls and all(reps >= 2000 for reps in calls)  # the defaults: thousands of resamples each
    assert sum(blocks) == sum(calls) and len(blocks) <= len(calls) * 2, (len(blocks), len(calls))


def test_progress_says_what_it_bootstraps_in_plain_lines_off_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr(stats, "PLAIN_EVERY", 0.0)  # a line for every step
    with stats.BootstrapProgress("IQMs of 2 cells", 2) as progress:
        progress.step("ppo on CartPole-v1")
        progress.step("aggregates")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "bootstrapping… IQMs of 2 cells"
    assert lines[1].startswith("  bootstrapping 1/2  0:00  ppo on CartPole-v1")
    assert lines[2].startswith("  bootstrapping 2/2  0:00  aggregates")
    assert lines[3].startswith("bootstrapped 2 steps in ") and len(lines) == 4
    assert all(len(line) <= 100 for line in lines)
