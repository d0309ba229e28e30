"""Hyperparameter sweeps: (config, seed) rows in one program, the spec parser, what a sweep writes."""

import json
import signal
import subprocess
import sys
import types
from pathlib import Path

import jax
import numpy as np
import pytest

from scanrl.algos import ppo
from scanrl.common.harness import devices, loop, run, sweeps
from scanrl.common.harness.runconfig import compose

from conftest import REPO, held, once_per_run

SMALL = dict(num_envs=4, num_steps=32, num_epochs=2, num_minibatches=2, total_timesteps=4 * 32 * 3, eval_every=0,
             log_every=0)


# --- the spec parser ------------------------------------------------------------------------------
def test_grid_is_the_product_of_every_sweep_flag():
    config = compose(ppo, "CartPole-v1")
    sweep = sweeps.parse(("learning_rate=1e-4,3e-4,1e-3", "gamma=0.9,0.99"), 8, 0, config.config)
    assert sweep.size == 6
    np.testing.assert_allclose(sweep.values["learning_rate"], [1e-4, 1e-4, 3e-4, 3e-4, 1e-3, 1e-3])
    np.testing.assert_allclose(sweep.values["gamma"], [0.9, 0.99] * 3)
    assert sweep.log_fields == {"learning_rate"}  # 3 values over 10x: a log axis in sweep.png; gamma: linear
    assert sweeps.parse((), 8, 0, config.config) is None


def test_random_search_draws_within_bounds_and_repeats_with_the_seed():
    config = compose(ppo, "CartPole-v1")
    specs = ("learning_rate=log:1e-5:1e-2", "clip_eps=uniform:0.1:0.3")
    a, b = sweeps.parse(specs, 16, 3, config.config), sweeps.parse(specs, 16, 3, config.config)
    other = sweeps.parse(specs, 16, 4, config.config)
    assert a.size == 16 and a.log_fields == {"learning_rate"}
    for k in a.values:
        np.testing.assert_array_equal(a.values[k], b.values[k])
        assert not np.array_equal(a.values[k], other.values[k])
    lr = a.values["learning_rate"]
    assert (lr >= 1e-5).all() and (lr <= 1e-2).all() and (np.log10(lr) < -3.5).any() and (np.log10(lr) > -3.5).any()
    assert ((a.values["clip_eps"] >= 0.1) & (a.values["clip_eps"] <= 0.3)).all()


@pytest.mark.parametrize("spec, message", [
    ("num_envs=4,8", "--sweep num_envs=4,8: num_envs sets array shapes or loop lengths (an integer), so it cannot "
                     "vary inside one program; use --sweep-mode loop"),
    ("normalize_obs=0,1", "normalize_obs switches parts of the program on or off"),
    ("actor_hidden=64,128", "actor_hidden sets the program's structure"),
    ("learning_rte=1e-3", "ppo has no hyperparameter learning_rte"),
    ("learning_rate", "write FIELD=V1,V2,..."),
    ("learning_rate=log:0:1", "needs two finite numbers with LOW < HIGH and LOW > 0"),
    ("learning_rate=1e-3,abc", "the values must be finite numbers"),
    ("gamma=0.9,1.5", "--gamma must lie in (0, 1], got 1.5"),
])
def test_sweep_errors_are_one_sentence(spec, message):
    with pytest.raises(ValueError, match=None) as info:
        sweeps.parse((spec,), 8, 0, ppo.default_config("CartPole-v1"))
    assert message in str(info.value), str(info.value)


def test_cli_refuses_a_shape_field_and_a_python_branch_before_compiling(cli_error):
    code, err = cli_error(ppo.main, ["--sweep", "num_envs=4,8", "--total-timesteps", "1024"])
    assert code == 2 and "num_envs sets array shapes" in err, err
    # A copied file that turns a part off with a Python branch on a float: found when tracing.
    def branching(config, env=None, env_params=None):
        if config.ent_coef > 0:  # a researcher's edit: a Python branch on a float
            config = config
        return ppo.make_algorithm(config, env, env_params)

    edited = types.SimpleNamespace(__name__="my_ppo", __doc__=ppo.__doc__, Config=ppo.Config,
                                   default_config=ppo.default_config, ALGO=ppo.ALGO, make_algorithm=branching)
    main = lambda argv: run.main(edited, argv)
    code, err = cli_error(main, ["--sweep", "ent_coef=0.0,0.1", "--total-timesteps", "1024"])
    assert code == 2 and "a swept field (ent_coef) drives Python control flow" in err, err


def test_a_tanh_normal_policy_sweeps_in_one_program():
    """The squashed normal's bounds check runs once, before the program: inside it the bounds
    are traced, and a sweep of a tanh_normal config (the Brax and Playground recipes) lowers."""
    config = compose(ppo, "Pendulum-v1", **{**SMALL, "num_steps": 64}, action_dist="tanh_normal",
                     sweep=("learning_rate=log:1e-4:1e-2",))
    sweep = sweeps.parse(config.run.sweep, 2, 0, config.config)
    program = loop.build(ppo.make_algorithm, config, sweep=sweep)
    state = program.start.lower(devices.seed_keys(0, 1)[np.zeros(2, int)]).out_info
    assert {leaf.shape[0] for leaf in jax.tree.leaves(state)} == {2}  # one row per config, in one program
    assert state.hparams["learning_rate"].shape == (2,) and len(set(sweep.values["learning_rate"])) == 2
    assert state.train.params["actor"][-1]["w"].shape[-1] == 2  # tanh_normal's mean and log-std of 1 action


@pytest.mark.slow
def test_max_grad_norm_varies_inside_one_program():
    """0 turns PPO's clipping off as an infinite bound, not a Python branch: max_grad_norm is a
    traced value like any float, and a tight bound changes the update."""
    config = compose(ppo, "CartPole-v1", **SMALL, num_seeds=1)
    out = sweep_program(config, sweeps.parse(("max_grad_norm=0,1e-3",), 8, 0, config.config), 2)
    loss = out["metrics"]["policy_loss"]
    assert np.isfinite(loss).all() and not np.allclose(loss[0, 1:], loss[1, 1:])


# --- one program equals the single runs ---------------------------------------------------------------
def sweep_program(config, sweep, num_devices):
    run = config.run
    config = compose(ppo, "CartPole-v1", **{**SMALL, "num_seeds": run.num_seeds, "num_devices": num_devices})
    program = loop.build(ppo.make_algorithm, config, sweep=sweep)
    keys = devices.seed_keys(0, run.num_seeds)[np.arange(program.num_seeds) % run.num_seeds]
    return jax.device_get(program.train(keys))


@pytest.mark.parametrize("seeds", [1, 2])
@pytest.mark.slow
def test_each_config_and_seed_equals_the_single_run(seeds):
    """2 learning rates x `seeds` seeds on 2 devices against the single runs of each learning
    rate on one device. One seed: one row per device in both, bit for bit. Two seeds: two rows
    vmapped per device in both, but the learning rate is a vmapped array in the sweep and a
    constant in the single run, and XLA rounds the two programs' Adam steps differently in the
    last bits (measured: 3e-8 absolute on losses of 1e-4 after 3 updates): bounded as seeds
    are in test_ppo.py."""
    config = compose(ppo, "CartPole-v1", **SMALL, num_seeds=seeds)
    sweep = sweeps.parse(("learning_rate=1e-3,3e-2",), 8, 0, config.config)
    out = sweep_program(config, sweep, 2)
    same = np.testing.assert_array_equal if seeds == 1 else \
        lambda a, b, err_msg="": np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=err_msg)
    for c, lr in enumerate([1e-3, 3e-2]):
        single = compose(ppo, "CartPole-v1", **SMALL, num_seeds=seeds, num_devices=1, learning_rate=lr)
        want = jax.device_get(ppo.make_train(single.config, num_devices=1)(devices.seed_keys(0, seeds)))
        for k in ("policy_loss", "value_loss", "entropy", "episode_return"):
            same(out["metrics"][k][c * seeds:(c + 1) * seeds], want["metrics"][k], err_msg=k)
        for got, ref in zip(jax.tree.leaves(out["policy"]), jax.tree.leaves(want["policy"])):
            same(got[c * seeds:(c + 1) * seeds], ref)
    assert not np.allclose(out["metrics"]["policy_loss"][0], out["metrics"]["policy_loss"][seeds])


# --- the sweep's run folder, best_config.json, interrupt and resume ----------------------------------
SWEEP_RUN = ["--sweep", "learning_rate=1e-3,3e-2", "--sweep", "gamma=0.9,0.99", "--num-seeds", "2",
             "--total-timesteps", "2048", "--num-steps", "64", "--log-every", "1", "--eval-every", "4",
             "--checkpoint-every", "2"]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """The sweep's run, once per test run."""
    def compute():
        summary = ppo.main([*SWEEP_RUN, "--out-dir", str(tmp_path_factory.mktemp("sweep"))])
        assert summary["exit_code"] == 0 and summary["num_configs"] == 4 and summary["num_seeds"] == 2
        return Path(summary["run_dir"])

    return once_per_run(tmp_path_factory, "sweep_dir", compute)


@pytest.mark.slow
def test_a_sweep_writes_its_table_best_config_and_plot(sweep_dir):
    metrics = np.load(sweep_dir / "metrics.npz")
    assert metrics["episode_return"].shape == (4, 2, 8)  # configs, seeds, updates
    assert np.load(sweep_dir / "params.npz")["params/actor/0/w"].shape == (4, 2, 4, 64)
    report = json.loads((sweep_dir / "sweep.json").read_text())
    assert report["fields"] == ["learning_rate", "gamma"] and report["num_configs"] == 4
    rows = report["configs"]
    assert [r["values"] for r in rows] == [{"learning_rate": 1e-3, "gamma": 0.9}, {"learning_rate": 1e-3, "gamma": 0.99},
                                           {"learning_rate": 3e-2, "gamma": 0.9}, {"learning_rate": 3e-2, "gamma": 0.99}]
    final = np.nanmean(metrics["episode_return"][..., -1:], axis=-1)  # the last 10% of 8 updates: the last one
    for c, row in enumerate(rows):
        np.testing.assert_allclose(row["final_return_per_seed"], final[c])
        np.testing.assert_allclose(row["final_return_mean"], final[c].mean())
        np.testing.assert_allclose(row["final_return_min"], final[c].min())
        # after updates 4 and 8; of the policy --eval-policy names (default: sampled)
        evaluated = metrics["eval_return_sampled"][c][:, [3, 7]]
        np.testing.assert_allclose(row["best_eval_return"], evaluated.mean(axis=0).max())
    best = max(rows, key=lambda r: r["final_return_mean"])
    assert report["best"] == best
    saved = json.loads((sweep_dir / "best_config.json").read_text())
    assert saved["learning_rate"] == best["values"]["learning_rate"] and saved["gamma"] == best["values"]["gamma"]
    assert "sweep" not in saved and saved["num_seeds"] == 2
    from PIL import Image

    with Image.open(sweep_dir / "sweep.png") as image:
        assert image.size[0] >= 800


@pytest.mark.slow
def test_best_config_round_trips_through_config(sweep_dir):
    """--config best_config.json gives the sweep's Config with the best config's values and no
    sweep: the single run that the sweep's rows of that config equal (tested above)."""

    best = json.loads((sweep_dir / "sweep.json").read_text())["best"]["values"]
    config = run.parse_config(ppo, ["--config", str(sweep_dir / "best_config.json")])
    saved = json.loads((sweep_dir / "config.json").read_text())
    assert saved.pop("algo") == "ppo"  # config.json names the algorithm; a Config has no such field
    assert config.learning_rate == best["learning_rate"] and config.gamma == best["gamma"]
    assert config.run.sweep == () and config.run.num_seeds == 2
    now = run.config_dict(config)
    differ = {k for k in saved if json.dumps(saved[k]) != json.dumps(now.get(k))}
    assert differ == {"sweep"} | {k for k in ("learning_rate", "gamma") if saved[k] != best[k]}, differ


@pytest.mark.slow
def test_an_interrupted_sweep_resumes_to_the_uninterrupted_result(sweep_dir, tmp_path):
    from test_lifecycle import assert_same_run, signal_after_checkpoint

    proc = subprocess.Popen(held(0, "algos/ppo.py", *SWEEP_RUN, "--out-dir", tmp_path), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = signal_after_checkpoint(proc, tmp_path, signal.SIGINT)
    assert proc.returncode == 130, stderr[-3000:]
    (run_dir,) = list(tmp_path.iterdir())
    assert run_dir.name.startswith("ppo__CartPole-v1__sweep-")  # named as a sweep
    assert json.loads((run_dir / "summary.json").read_text())["stopped_by"] == "interrupt"
    assert (run_dir / "sweep.json").is_file()  # an interrupted sweep still reports its configs so far
    ppo.main(["--resume", str(run_dir)])
    assert_same_run(sweep_dir, run_dir)
    assert json.loads((run_dir / "sweep.json").read_text()) == json.loads((sweep_dir / "sweep.json").read_text())


@pytest.mark.slow
def test_the_run_tools_point_a_sweep_folder_elsewhere(sweep_dir, capsys):
    from scanrl import algos
    from scanrl.common.harness import evaluate, plots

    for main, message in [(lambda argv: evaluate.main(argv, algos), "is a sweep of several configs; train one of them"),
                          (plots.main, "is a sweep of several configs: its sweep.png compares them.")]:
        with pytest.raises(SystemExit) as exit_info:
            main([str(sweep_dir)])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


# --- loop mode: one program per config ------------------------------------------------------------------
LOOP_RUN = ["--sweep", "num_envs=2,4", "--sweep", "activation=tanh,relu", "--sweep-mode", "loop", "--num-seeds", "2",
            "--total-timesteps", "1024", "--num-steps", "64", "--log-every", "2", "--eval-every", "2"]


@pytest.mark.slow
def test_loop_mode_runs_each_config_as_its_own_run_and_resumes_what_is_missing(tmp_path, capsys):
    summary = ppo.main([*LOOP_RUN, "--out-dir", str(tmp_path)])
    sweep_dir = Path(summary["run_dir"])
    assert summary["exit_code"] == 0 and summary["configs_done"] == 4
    assert sweep_dir.name.startswith("ppo__CartPole-v1__sweep-")
    report = json.loads((sweep_dir / "sweep.json").read_text())
    assert [r["values"] for r in report["configs"]] == [
        {"num_envs": 2, "activation": "tanh"}, {"num_envs": 2, "activation": "relu"},
        {"num_envs": 4, "activation": "tanh"}, {"num_envs": 4, "activation": "relu"}]
    for c, (num_envs, activation) in enumerate([(2, "tanh"), (2, "relu"), (4, "tanh"), (4, "relu")]):
        sub = sweep_dir / f"config_{c}"
        config = json.loads((sub / "config.json").read_text())
        assert config["num_envs"] == num_envs and config["activation"] == activation and config["sweep"] == []
        returns = np.load(sub / "metrics.npz")["episode_return"]
        assert returns.shape == (2, 1024 // (num_envs * 64))  # each config its own number of updates
        final = np.nanmean(returns[:, -1:], axis=1)
        np.testing.assert_allclose(report["configs"][c]["final_return_per_seed"], final)
    assert not (sweep_dir / "metrics.npz").exists()  # 8 and 4 updates: no common array
    best = json.loads((sweep_dir / "best_config.json").read_text())
    assert isinstance(best["num_envs"], int) and best["activation"] in ("tanh", "relu")
    assert (sweep_dir / "sweep.png").is_file()

    # As if the sweep had been killed while config 3 started: resuming runs only config 3.
    import shutil

    shutil.rmtree(sweep_dir / "config_3")
    (sweep_dir / "sweep.json").unlink()
    capsys.readouterr()
    again = ppo.main(["--resume", str(sweep_dir)])
    out = capsys.readouterr().out
    assert "sweep config 4/4" in out and "sweep config 1/4" not in out and again["configs_done"] == 4
    assert json.loads((sweep_dir / "sweep.json").read_text()) == report


def test_loop_mode_values_are_checked_before_anything_runs(cli_error):
    code, err = cli_error(ppo.main, ["--sweep", "num_envs=2,x", "--sweep-mode", "loop"])
    assert code == 2 and "--sweep num_envs=2,x: x is not an integer." in err, err
    code, err = cli_error(ppo.main, ["--sweep", "num_minibatches=3,4", "--sweep-mode", "loop"])
    assert code == 2 and "--num-minibatches 3" in err, err
    code, err = cli_error(ppo.main, ["--sweep", "env=Pendulum-v1", "--sweep-mode", "loop"])
    assert code == 2 and "start one sweep per env" in err, err
