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

from conftest import HANG_GUARD, check_run_tools, once_per_run, run_python


# --- registry -----------------------------------------------------------------------------------
def test_registry_names_and_modules():
    assert algos.names() == ["grpo", "impala", "ppo", "ppo_rnn", "pqn", "sac", "td3"]
    for name in algos.names():
        module = algos.get(name)
        assert module.__name__ == f"scanrl.algos.{name}"
        for piece in ("Config", "default_config", "make_algorithm", "make_train", "main"):
            assert callable(getattr(module, piece)), (name, piece)
    assert algos.get("ppo") is ppo


def test_registry_unknown_name_lists_the_names():
    with pytest.raises(ValueError, match="unknown algorithm 'dqn'; scanrl has: grpo, impala, ppo, ppo_rnn, pqn, sac, td3"):
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
    # the training curve: per-seed bins, smoothed, then the mean over seeds; the files stay raw
    _, raw = plots.binned(metrics["episode_return"])
    y = lines["episode return (training)"].get_ydata()
    np.testing.assert_allclose(y, plots.smooth(raw, plots.SMOOTH).mean(axis=0))
    unsmoothed = plots.curves(run_dir, f"{run_dir}/raw.png", smooth_bins=0)
    y_raw = {l.get_label(): l for l in unsmoothed.axes[0].get_lines()}["episode return (training)"].get_ydata()
    np.testing.assert_allclose(y_raw, raw.mean(axis=0))
    assert not np.allclose(y, y_raw)  # the smoothing changed the curve, not the run's files
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
           "no GIF written, the numbers above stand." in printed, printed
    assert result["gif"] is None and not gif.exists() and json.loads(out.read_text())["per_seed"]
