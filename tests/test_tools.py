"""The algorithm registry, curves.png, scanrl-plot and scanrl-eval (with --gif)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from PIL import Image

from scanrl import algos
from scanrl.algos import ppo
from scanrl.common import suites
from scanrl.common.harness import evaluate, plots, render
from scanrl.common.harness.run import train_and_write
from scanrl.common.harness.runconfig import compose

from conftest import HANG_GUARD, check_run_tools, once_per_run, run_python, unwrapped


# --- registry -----------------------------------------------------------------------------------
def test_registry_names_and_modules():
    assert algos.names() == ["grpo", "impala", "ppo", "ppo_rnn", "pqn", "pqn_rnn", "sac", "td3"]
    for name in algos.names():
        module = algos.get(name)
        assert module.__name__ == f"scanrl.algos.{name}"
        for piece in ("Config", "default_config", "make_algorithm", "make_train", "main"):
            assert callable(getattr(module, piece)), (name, piece)
    assert algos.get("ppo") is ppo


def test_registry_unknown_name_lists_the_names():
    with pytest.raises(ValueError, match="unknown algorithm 'dqn'; scanrl has: grpo, impala, ppo, ppo_rnn, pqn, pqn_rnn, sac, td3"):
        algos.get("dqn")


def test_the_api_page_shows_the_registrys_names_and_its_error():
    """docs/api.md's `algos.names()` and `algos.get("dqn")` lines are what they print."""
    import re

    text = (Path(__file__).parents[1] / "docs" / "api.md").read_text()
    names = re.search(r"^algos\.names\(\) +# (\[.*\])$", text, re.M)
    assert names and names.group(1) == repr(algos.names()), names
    with pytest.raises(ValueError) as error:
        algos.get("dqn")
    assert f'algos.get("dqn")               # ValueError: {error.value}\n' in text


def test_the_tools_say_a_run_folder_that_does_not_exist_does_not(tmp_path, capsys):
    """scanrl-plot and scanrl-eval on a missing folder: one sentence saying so, exit code 2."""
    missing = tmp_path / "nope"
    for main in (plots.main, lambda argv: evaluate.main(argv, algos)):
        with pytest.raises(SystemExit) as exit_info:
            main([str(missing)])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and err == f"error: {missing} does not exist.\n", err


# --- a short PPO run and what the tools make of it ------------------------------------------------
def short_run(out_dir, **overrides):
    """4 updates of 2 seeds, evaluated and checkpointed every 2 updates (returns still far from 500)."""
    values = dict(num_seeds=2, total_timesteps=2048, log_every=1, eval_every=2, checkpoint_every=2,
                  out_dir=str(out_dir), **overrides)
    summary = train_and_write("ppo", compose(ppo, "CartPole-v1", **values), ppo.make_algorithm)
    assert summary["exit_code"] == 0 and summary["updates"] == 4
    return summary["run_dir"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return once_per_run(tmp_path_factory, "tools_run_dir", lambda: short_run(tmp_path_factory.mktemp("tools")))


@pytest.mark.slow
def test_eval_reproduces_the_runs_last_evaluation_and_the_curves_hold_its_data(run_dir):
    check_run_tools(run_dir)  # eval == last eval_return per seed; curves.png drawn from metrics.npz
    metrics = np.load(f"{run_dir}/metrics.npz")
    assert not np.all(metrics["eval_return"][:, -1] == 500)  # not a saturated policy: the check can fail
    fig = plots.curves(run_dir, f"{run_dir}/again.png")
    ax = fig.axes[0]
    lines = {l.get_label(): l for l in ax.get_lines()}
    x, y = lines["evaluation return (deterministic)"].get_data()
    np.testing.assert_allclose(x, [2 * 512, 4 * 512])  # env steps per seed after updates 2 and 4
    np.testing.assert_allclose(y, metrics["eval_return"][:, [1, 3]].mean(axis=0))
    assert [a.get_title() for a in fig.axes[1:]] == ["policy_loss", "value_loss", "entropy"]
    assert all(a.get_xlabel() == "env steps per seed" and a.get_ylabel() for a in fig.axes)
    # the training curve: per-seed bins, smoothed, then the mean over seeds; the files stay raw.
    # 4 updates are too few to smooth (at most a tenth of the points: plots.smoothing_window);
    # test_a_short_runs_curve_ends_at_its_last_returns checks a smoothed curve against the raw one.
    _, raw = plots.binned(metrics["episode_return"])
    y = lines["episode return (training)"].get_ydata()
    np.testing.assert_allclose(y, plots.smooth(raw, plots.smoothing_window(raw.shape[1])).mean(axis=0))
    unsmoothed = plots.curves(run_dir, f"{run_dir}/raw.png", smooth_bins=0)
    y_raw = {l.get_label(): l for l in unsmoothed.axes[0].get_lines()}["episode return (training)"].get_ydata()
    np.testing.assert_allclose(y_raw, raw.mean(axis=0))
    assert np.allclose(y, y_raw) and "moving average" not in ax.get_title()  # 4 points: none
    np.testing.assert_array_equal(np.load(f"{run_dir}/metrics.npz")["episode_return"], metrics["episode_return"])


def test_smoothing_is_a_trailing_moving_average_that_skips_gaps():
    x = np.array([[0.0, 0.0, 0.0, 3.0, 3.0, 3.0], [1.0, np.nan, 3.0, np.nan, np.nan, np.nan]])
    np.testing.assert_allclose(plots.smooth(x, 3), [[0, 0, 0, 1, 2, 3], [1, 1, 2, 3, 3, np.nan]])
    np.testing.assert_array_equal(plots.smooth(x, 1), x)
    np.testing.assert_allclose(plots.smooth(np.full((2, 50), 7.0), 10), 7.0)


def test_the_band_is_a_95_percent_bootstrap_interval_of_the_mean():
    rng = np.random.default_rng(0)
    values = rng.normal(10.0, 2.0, size=(16, 5))
    low, high = plots.mean_interval(values)
    mean = values.mean(axis=0)
    assert np.all(low < mean) and np.all(mean < high)
    half = 1.96 * values.std(axis=0, ddof=1) / 4  # the normal approximation's half width, sqrt(16) = 4
    np.testing.assert_allclose(high - low, 2 * half, rtol=0.25)
    low, high = plots.mean_interval(np.full((4, 3), 5.0))  # identical seeds: no width
    np.testing.assert_allclose([low, high], 5.0)


# --- curves.png of run folders written here (no training) -----------------------------------------
def fake_run(folder, metrics, algo="ppo", env="CartPole-v1", steps_per_update=512):
    """A finished run folder as plots.Run reads it: metrics.npz ([seeds, updates] each),
    summary.json and config.json."""
    folder.mkdir(parents=True)
    seeds, updates = metrics["episode_return"].shape
    np.savez(folder / "metrics.npz", **metrics)
    (folder / "config.json").write_text(json.dumps({"num_seeds": seeds}))
    (folder / "summary.json").write_text(json.dumps({
        "algo": algo, "env": env, "num_seeds": seeds, "updates": updates,
        "total_timesteps": updates * steps_per_update}))
    return folder


def rising(seeds, updates, last=358.5):
    """Returns climbing from 20 to `last` (the mean over seeds), the seeds 4 apart."""
    return np.linspace(20.0, last, updates)[None] + 4.0 * (np.arange(seeds)[:, None] - (seeds - 1) / 2)


def evaluated_every(values, every):
    """values where an evaluation ran (every `every` updates and after the last), else NaN."""
    out = np.full_like(values, np.nan)
    out[:, every - 1::every] = values[:, every - 1::every]
    out[:, -1] = values[:, -1]
    return out


def curve(ax, label):
    """The line labelled `label` in ax (the mean over seeds; the faint seeds are unlabelled)."""
    return {line.get_label(): line for line in ax.get_lines()}[label]


def test_the_smoothing_spans_at_most_a_tenth_of_the_points():
    assert [plots.smoothing_window(n) for n in (4, 9, 19, 20, 50, 99, 100, 400)] == [1, 1, 1, 2, 5, 9, 10, 10]
    assert plots.smoothing_window(400, 0) == plots.smoothing_window(400, 1) == 1
    assert plots.smoothing_window(400, 3) == 3


def test_a_short_runs_curve_ends_at_its_last_returns(tmp_path):
    """9 updates: the training curve ends at the last update's return (a 10-point moving average
    plotted the run's mean there: 140 for 358.5), and the title says nothing of smoothing. A long
    run is smoothed over 10 points, the title says so and that the evaluations are raw."""
    returns = rising(2, 9)
    run = fake_run(tmp_path / "short", {"episode_return": returns,
                                        "eval_return": evaluated_every(returns + 5.0, 3)})
    fig = plots.curves(run)
    assert (run / "curves.png").is_file()
    ax = fig.axes[0]
    y = curve(ax, "episode return (training)").get_ydata()
    assert abs(y[-1] - returns[:, -1].mean()) <= 0.03 * returns[:, -1].mean(), y
    assert "moving average" not in ax.get_title() and "evaluations: raw" not in ax.get_title()

    returns = rising(2, 200)
    evals = evaluated_every(returns + 5.0, 20)
    run = fake_run(tmp_path / "long", {"episode_return": returns, "eval_return": evals})
    fig = plots.curves(run)
    ax, title = fig.axes[0], " ".join(fig.axes[0].get_title().split())  # the wrapping undone
    assert "training curves: moving average of 10 points; evaluations: raw" in title, title
    assert "faint: each seed (training curves)" in title
    _, raw = plots.binned(returns)
    y = curve(ax, "episode return (training)").get_ydata()
    np.testing.assert_allclose(y, plots.smooth(raw, 10).mean(axis=0))
    assert not np.allclose(y, raw.mean(axis=0))  # smoothed: the curve changed, not the files
    np.testing.assert_array_equal(np.load(run / "metrics.npz")["episode_return"], returns)
    evaluation = curve(ax, "evaluation return (deterministic)").get_ydata()
    done = ~np.isnan(evals).all(axis=0)
    np.testing.assert_allclose(evaluation, evals[:, done].mean(axis=0))
    half = " ".join(plots.curves(fake_run(tmp_path / "half", {"episode_return": rising(2, 50)}))
                    .axes[0].get_title().split())
    assert "training curves: moving average of 5 points" in half and "evaluations" not in half


def test_the_band_of_fewer_than_4_seeds_is_their_range_and_says_so(tmp_path):
    """2 or 3 seeds: a 95% bootstrap interval of the mean is their min and max, so the band is
    drawn as that and called "range of N seeds"; 5 seeds: the bootstrap band, called so."""
    titles = {}
    for seeds in (1, 2, 3, 5):
        returns = rising(seeds, 9)
        fig = plots.curves(fake_run(tmp_path / f"s{seeds}", {"episode_return": returns}))
        titles[seeds] = " ".join(fig.axes[0].get_title().split())
        if seeds in (2, 3):
            low_high = fig.axes[0].collections[0].get_paths()[0].vertices[:, 1]
            np.testing.assert_allclose([low_high.min(), low_high.max()], [returns.min(), returns.max()])
    assert "band" not in titles[1] and "mean over seeds" not in titles[1]
    for seeds in (2, 3):
        assert f"band: range of {seeds} seeds" in titles[seeds] and "bootstrap" not in titles[seeds]
    assert "band: 95% bootstrap CI" in titles[5] and "range" not in titles[5]
    # a 3-seed bootstrap really is the range (a resample is all the lowest seed 1/27 of the time)
    three = rising(3, 9)
    low, high = plots.mean_interval(three)
    np.testing.assert_allclose([low, high], [three.min(axis=0), three.max(axis=0)])
    assert plots.interval_label(4) == "95% bootstrap CI"
    both = plots.compare([tmp_path / "s2", tmp_path / "s5"], tmp_path / "both.png")
    assert "band: 95% bootstrap CI (a run of fewer than 4 seeds: their range)" in " ".join(
        both.axes[0].get_title().split())
    pair = plots.compare([tmp_path / "s2", tmp_path / "s2"], tmp_path / "pair.png")
    assert "band: range of 2 seeds" in " ".join(pair.axes[0].get_title().split())


def test_pqn_curves_show_epsilon_and_q_taken_under_a_title_that_fits(tmp_path):
    updates = 100
    metrics = {
        "episode_return": rising(2, updates, 40.0), "episode_length": np.full((2, updates), 200.0),
        "td_loss": np.linspace(1.0, 0.1, updates)[None].repeat(2, 0),
        "q_taken": np.linspace(0.0, 30.0, updates)[None].repeat(2, 0),
        "epsilon": np.maximum(1.0 - np.arange(updates) / 20, 0.05)[None].repeat(2, 0),
        "learning_rate": np.full((2, updates), 5e-4),
    }
    metrics["eval_return"] = evaluated_every(metrics["episode_return"], 10)
    metrics["eval_return_sampled"] = evaluated_every(metrics["episode_return"] - 1.0, 10)
    fig = plots.curves(fake_run(tmp_path / "pqn", metrics, "pqn", "SpaceInvaders-MinAtar"))
    assert [a.get_title() for a in fig.axes[1:]] == ["td_loss", "epsilon", "q_taken"]
    for ax, key in zip(fig.axes[2:], ("epsilon", "q_taken")):
        _, raw = plots.binned(metrics[key], fill=False)
        np.testing.assert_allclose(curve(ax, key).get_ydata(), plots.smooth(raw, 10).mean(axis=0))
    renderer = fig.canvas.get_renderer()
    title = fig.axes[0].title
    for ax in fig.axes:
        box = ax.title.get_window_extent(renderer)
        assert 0 <= box.x0 and box.x1 <= fig.bbox.width, (ax.get_title(), box, fig.bbox)
    title.set_text(" ".join(title.get_text().split()))  # unwrapped, it would run off the figure
    assert title.get_window_extent(renderer).width > fig.bbox.width


def test_a_multi_agent_run_shows_its_team_and_each_agents_return(tmp_path):
    updates, seeds = 60, 2
    agents = {f"agent_{i}_return": rising(seeds, updates, 10.0 * (i + 1)) for i in range(2)}
    team = agents["agent_0_return"] + agents["agent_1_return"]
    losses = {k: np.ones((seeds, updates)) for k in ("policy_loss", "value_loss", "entropy")}
    single = fake_run(tmp_path / "single", {"episode_return": team / 2, **losses})
    fig = plots.curves(single)
    assert [a.get_title() for a in fig.axes[1:]] == ["policy_loss", "value_loss", "entropy"]
    assert tuple(fig.get_size_inches()) == (10, 6.5)  # a single-agent picture, as before
    run = fake_run(tmp_path / "team", {"episode_return": team / 2, "team_return": team, **agents, **losses})
    fig = plots.curves(run)
    panels = ["policy_loss", "value_loss", "entropy", "team_return", "agent returns"]
    assert [a.get_title() for a in fig.axes[1:]] == panels
    team_ax, agents_ax = fig.axes[4], fig.axes[5]
    _, raw = plots.binned(team)
    np.testing.assert_allclose(curve(team_ax, "team return").get_ydata(), plots.smooth(raw, 6).mean(axis=0))
    assert [t.get_text() for t in agents_ax.get_legend().get_texts()] == ["agent 0", "agent 1"]
    for i in range(2):
        _, raw = plots.binned(agents[f"agent_{i}_return"])
        np.testing.assert_allclose(curve(agents_ax, f"agent {i}").get_ydata(), plots.smooth(raw, 6).mean(axis=0))
    (title, series), = plots.small_panels({f"agent_{i}_return": None for i in (0, 10, 2, 1)})
    assert title == "agent returns" and [label for _, label in series] == ["agent 0", "agent 1", "agent 2", "agent 10"]


@pytest.mark.slow
def test_eval_from_a_checkpoint_reproduces_that_evaluation(run_dir):
    """Both policies: the table (deterministic; --sample: sampled) per seed, and both means."""
    result = evaluate.main([run_dir, "--checkpoint", "2", "--out", f"{run_dir}/eval2.json"], algos)
    assert result["update"] == 2 and result["policy"] == "checkpoints/update_2.npz"
    metrics = np.load(f"{run_dir}/metrics.npz")
    np.testing.assert_allclose([r["mean"] for r in result["per_seed"]], metrics["eval_return"][:, 1], rtol=1e-6)
    np.testing.assert_allclose(result["mean_return_deterministic"], metrics["eval_return"][:, 1].mean(), rtol=1e-6)
    np.testing.assert_allclose(result["mean_return_sampled"], metrics["eval_return_sampled"][:, 1].mean(), rtol=1e-6)
    sampled = evaluate.main([run_dir, "--checkpoint", "2", "--sample", "--out", f"{run_dir}/eval3.json"], algos)
    np.testing.assert_allclose([r["mean"] for r in sampled["per_seed"]], metrics["eval_return_sampled"][:, 1],
                               rtol=1e-6)
    assert sampled["mean_return_deterministic"] == result["mean_return_deterministic"]


@pytest.mark.slow
def test_eval_env_override_sampling_and_key_change_the_episodes(run_dir):
    base = evaluate.main([run_dir, "--out", f"{run_dir}/e0.json"], algos)
    longer = evaluate.main([run_dir, "--env-params", "length", "2.0", "--out", f"{run_dir}/e1.json"], algos)
    other = evaluate.main([run_dir, "--key", "7", "--episodes", "3", "--sample", "--out", f"{run_dir}/e2.json"], algos)
    assert longer["env_params"] == {"length": 2.0}
    assert [r["returns"] for r in longer["per_seed"]] != [r["returns"] for r in base["per_seed"]]
    assert all(len(r["returns"]) == 3 for r in other["per_seed"]) and not other["deterministic"]
    saved = json.loads(open(f"{run_dir}/e1.json").read())
    assert saved["per_seed"][1]["mean"] == longer["per_seed"][1]["mean"]
    assert set(saved["per_seed"][0]) == {"seed", "mean", "std", "min", "max", "mean_length", "returns"}


@pytest.mark.slow
def test_cross_play_of_a_one_agent_env_is_refused_before_compiling(run_dir, capsys):
    with pytest.raises(SystemExit) as refused:
        evaluate.main([run_dir, "--cross-play"], algos)
    err = capsys.readouterr().err.strip()
    assert refused.value.code == 2 and len(err.splitlines()) == 1, err
    assert "--cross-play: CartPole-v1 is not an env of two or more agents" in err


@pytest.mark.slow
def test_ctrl_c_while_the_gif_draws_keeps_the_evaluation_and_leaves_no_gif(run_dir, tmp_path,
                                                                            monkeypatch, capsys):
    """Ctrl-C at the third frame: exit status 130, one sentence, eval.json written (it comes
    before the GIF), and neither the GIF nor a part of it on disk."""
    drawn, draw = [], render.frame

    def frame(*args, **kwargs):
        drawn.append(1)
        if len(drawn) == 3:
            raise KeyboardInterrupt
        return draw(*args, **kwargs)

    monkeypatch.setattr(render, "frame", frame)
    gif, out = tmp_path / "cut.gif", tmp_path / "e.json"
    with pytest.raises(SystemExit) as stopped:
        evaluate.main([run_dir, "--gif", str(gif), "--out", str(out)], algos)
    assert stopped.value.code == 130 and len(drawn) == 3
    assert json.loads(out.read_text())["per_seed"] and list(tmp_path.iterdir()) == [out]
    assert f"--gif: stopped by Ctrl-C; {gif} not written" in unwrapped(capsys.readouterr().out)


@pytest.mark.slow
def test_gif_draws_each_state_of_the_episode_under_its_own_caption(run_dir, tmp_path):
    """An L-step episode is L + 1 frames: frame t is the state after t steps (frame 0 the reset
    state, the last the episode's end), captioned "step t  return R" with R the return of
    those t steps. L is the evaluation program's own count for the same episode; each frame is
    the one drawn here from that state with that caption (the last a terminal state)."""
    gif = tmp_path / "episode.gif"
    evaluate.main([run_dir, "--gif", str(gif), "--seed-index", "1", "--out", str(tmp_path / "e.json")], algos)
    # The same episode, counted by the evaluation program: seed 1's key, one environment.
    module, config = evaluate.load_config(run_dir, algos)
    env, params = suites.make("CartPole-v1")
    algo = module.make_algorithm(config, env, params)
    policy, update = evaluate.load_policy(run_dir, algo, 2)
    keys = evaluate.evaluation_keys(0, 2, update - 1)
    one = jax.tree.map(lambda x: x[1:], policy)
    returns, lengths = evaluate.episode_returns(algo, params, one, keys[1:], 1)
    states, obs, rewards = evaluate.record_episode(algo, params, jax.tree.map(lambda x: x[0], one), keys[1], True, 500)
    length = int(lengths[0, 0])
    assert len(rewards) == length > 1 and float(rewards.sum()) == float(returns[0, 0])
    at = lambda t: jax.tree.map(lambda x: x[t], states)  # noqa: E731
    assert bool(env.is_terminal(at(length), params)) and not bool(env.is_terminal(at(length - 1), params))
    captions = [f"CartPole-v1  seed 1  step {t}  return {float(rewards[:t].sum()):.1f}" for t in range(length + 1)]
    expected = [render.frame(env, params, at(t), obs[t], caption) for t, caption in enumerate(captions)]
    render.write_gif(tmp_path / "expected.gif", expected)  # the same palette reduction as the GIF's
    with Image.open(gif) as image, Image.open(tmp_path / "expected.gif") as want:
        assert image.n_frames == want.n_frames == length + 1
        assert image.size == (render.WIDTH, render.HEIGHT)
        for t in range(length + 1):
            image.seek(t), want.seek(t)
            assert np.array_equal(np.asarray(image.convert("RGB")), np.asarray(want.convert("RGB"))), t


def test_minatar_frames_draw_the_grid_and_other_envs_are_declined(tmp_path):
    env, params = suites.make("Breakout-MinAtar")
    obs, state = env.reset(jax.random.key(0), params)
    frames = []
    for t in range(5):
        frames.append(render.frame(env, params, state, np.asarray(obs), f"step {t + 1}"))
        obs, state, *_ = env.step(jax.random.key(t), state, 0, params)
    pixels = np.asarray(frames[0])
    grid = np.asarray(obs).any(axis=-1).sum()  # occupied cells, each drawn as a coloured square
    coloured = (np.ptp(pixels.astype(int), axis=-1) > 60).sum()
    assert coloured >= grid * (min(render.WIDTH // 10, (render.HEIGHT - 20) // 10) ** 2) * 0.9
    render.write_gif(tmp_path / "b.gif", frames, 100)
    with Image.open(tmp_path / "b.gif") as image:
        assert image.n_frames == 5
    memory, _ = suites.make("MemoryChain-bsuite")
    assert not render.can_draw(memory, (3,)) and render.can_draw(env, obs.shape)


@pytest.mark.slow
def test_a_failing_plot_is_a_warning_and_scanrl_plot_labels_two_runs(run_dir, tmp_path, monkeypatch, capsys):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    def broken(*args, **kwargs):
        raise RuntimeError("renderer exploded")

    with monkeypatch.context() as m:
        m.setattr(FigureCanvasAgg, "print_png", broken)
        other = short_run(tmp_path, learning_rate=1e-3)
    err = capsys.readouterr().err
    assert "warning: curves.png was not drawn (RuntimeError: renderer exploded)" in err
    names = {p.name for p in (tmp_path / other.split("/")[-1]).iterdir()}
    assert {"config.json", "metrics.npz", "params.npz", "summary.json", "checkpoints"} <= names
    assert "curves.png" not in names

    fig = plots.compare([run_dir, other], tmp_path / "both.png")
    labels = [l.get_label() for l in fig.axes[0].get_lines() if not l.get_label().startswith("_")]  # not the seeds
    assert labels == ["ppo CartPole-v1 learning_rate=0.00025", "ppo CartPole-v1 learning_rate=0.001"]
    for line, folder in zip([l for l in fig.axes[0].get_lines() if not l.get_label().startswith("_")], (run_dir, other)):
        assert np.isfinite(line.get_ydata()).all() and line.get_xdata()[-1] == 4 * 512
    with Image.open(tmp_path / "both.png") as image:
        assert image.size[0] > 400 and image.size[1] > 300


@pytest.mark.slow
def test_tools_command_lines_and_their_errors(run_dir, tmp_path, capsys):
    out = tmp_path / "wall.png"
    proc = run_python(["-m", "scanrl.common.harness.plots", run_dir, run_dir, "--x", "wall", "--out", str(out)])
    assert proc.returncode == 0 and out.is_file(), proc.stderr[-2000:]
    # pip puts console scripts beside the interpreter; that folder need not be on PATH (a venv
    # used without activating it), so they are looked up there, then on PATH.
    scripts = {tool: Path(sys.executable).parent / tool for tool in ("scanrl-plot", "scanrl-eval")}
    scripts = {tool: str(path) if path.is_file() else shutil.which(tool) for tool, path in scripts.items()}
    helps = {tool: subprocess.Popen([path, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for tool, path in scripts.items() if path}
    assert set(helps) == set(scripts), f"not installed as console scripts beside {sys.executable}: {set(scripts) - set(helps)}"
    for tool, proc in helps.items():
        stdout, stderr = proc.communicate(timeout=HANG_GUARD)
        assert proc.returncode == 0 and "usage" in stdout.lower(), (tool, stderr[-2000:])
    evaluate_main = lambda argv: evaluate.main(argv, algos)  # noqa: E731  (as scanrl-eval calls it)
    for main, args, message in [
        (plots.main, [str(tmp_path)], f"{tmp_path} is not a finished run folder (it has no config.json"),
        (plots.main, [run_dir, "--metric", "nope"], "--metric nope: "),
        (evaluate_main, [str(tmp_path)], f"{tmp_path} is not a run folder (it has no config.json)."),
        (evaluate_main, [run_dir, "--checkpoint", "3"], "--checkpoint 3: "),
        (evaluate_main, [run_dir, "--episodes", "0"], "--episodes must be at least 1, got 0."),
        (evaluate_main, [run_dir, "--env-params", "lenth", "2"], "Unknown environment parameter(s) lenth"),
        (evaluate_main, [run_dir, "--env-params", "length"], "--env-params takes KEY VALUE pairs, got length."),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            main(args)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, (args, err)


@pytest.mark.slow
def test_a_renderer_that_fails_here_is_one_sentence_and_the_evaluation_stands(run_dir, tmp_path, monkeypatch, capsys):
    """A suite's renderer may need what a machine lacks (MuJoCo: an EGL or X display): the GIF
    is declined in one sentence naming the reason; the evaluation is still written."""
    def no_display(*args, **kwargs):
        raise RuntimeError("Failed to initialize OpenGL\nsecond line")

    monkeypatch.setattr(render, "frame", no_display)
    gif, out = tmp_path / "episode.gif", tmp_path / "e.json"
    result = evaluate.main([run_dir, "--gif", str(gif), "--out", str(out)], algos)
    printed = capsys.readouterr().out
    assert "--gif: CartPole-v1 cannot be drawn on this machine (RuntimeError: Failed to initialize OpenGL); " \
           "no GIF written, the numbers above stand." in unwrapped(printed), printed
    assert result["gif"] is None and not gif.exists() and json.loads(out.read_text())["per_seed"]
