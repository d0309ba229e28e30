"""The run lifecycle: checkpoints, resume, signals, stop conditions, config files, env overrides,
the non-finite watch, and every bad input a user can give (one sentence, exit 2, no folder)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import HANG_GUARD, REPO, assert_same_run, held, unwrapped, wait_until

from scanrl.algos import grpo, impala, ppo, pqn, sac, td3
from scanrl.common.harness import checkpoint, devices, run
from scanrl.common.harness.runconfig import compose

ALGOS = {"ppo": ppo, "impala": impala, "grpo": grpo, "pqn": pqn, "sac": sac, "td3": td3}
# Small runs with many chunks (one update each) and a checkpoint every 2 updates.
SMALL = {
    "ppo": ["--total-timesteps", "102400", "--num-seeds", "2", "--eval-every", "20"],
    "sac": ["--num-steps", "50", "--total-timesteps", "4000", "--learning-starts", "200", "--num-seeds", "2",
            "--eval-every", "20", "--eval-episodes", "2", "--batch-size", "64"],
    "impala": ["--total-timesteps", "40960", "--eval-every", "5"],
    "grpo": ["--num-envs", "16", "--num-steps", "128", "--total-timesteps", "20480", "--eval-every", "5"],
    "pqn": ["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "4", "--hidden", "32",
            "--total-timesteps", "1280", "--eval-every", "5"],
    "td3": ["--num-seeds", "2", "--num-envs", "2", "--num-steps", "20", "--total-timesteps", "400", "--learning-starts", "60",
            "--actor-hidden", "32", "32", "--critic-hidden", "32", "32", "--batch-size", "32",
            "--exploration-noise-max", "0.3", "--eval-every", "5", "--eval-episodes", "2"],
}
LIFECYCLE = ["--log-every", "1", "--checkpoint-every", "2"]


def run_dir_of(out: Path) -> Path:
    (run_dir,) = list(out.iterdir())
    return run_dir


def start(algo, out, *extra, after=0):
    """`python algos/ALGO.py`, held at its first checkpoint past update `after` (conftest.held)."""
    return subprocess.Popen(held(after, f"algos/{algo}.py", *SMALL[algo], *LIFECYCLE, "--out-dir", out, *extra),
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def signal_after_checkpoint(proc, out, sig, after=0):
    """Send `sig` once a checkpoint newer than update `after` exists (a process started through
    conftest.held with the same `after` waits there for it); returns (stdout, stderr)."""
    wait_until(lambda: [p for p in out.glob("*/checkpoints/update_*.npz") if checkpoint.update_of(p) > after],
               [proc], f"checkpoint past update {after}")
    proc.send_signal(sig)
    return proc.communicate(timeout=HANG_GUARD)


def resume(run_dir, after=None):
    """`python -m scanrl.algos.ALGO --resume RUN_DIR`; held as `start` is unless `after` is None."""
    command = ["-m", f"scanrl.algos.{run_dir.name.split('__')[0]}", "--resume", str(run_dir)]
    command = held(after, *command) if after is not None else [sys.executable, *command]
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("algo", ["ppo", "sac", "td3"])
@pytest.mark.slow
def test_interrupted_then_killed_run_resumes_bit_identical(tmp_path, algo):
    """Ctrl-C after the first checkpoint (exit 130, every file written, one sentence on how to
    resume); the resumed run SIGKILLed after a later checkpoint; resumed again, it ends bit
    for bit as the run that was never stopped."""
    reference = Path(ALGOS[algo].main([*SMALL[algo], *LIFECYCLE, "--out-dir", str(tmp_path / "ref")])["run_dir"])
    updates = json.loads((reference / "summary.json").read_text())["updates"]

    proc = start(algo, tmp_path / "run")
    stdout, stderr = signal_after_checkpoint(proc, tmp_path / "run", signal.SIGINT)
    run_dir = run_dir_of(tmp_path / "run")
    assert proc.returncode == 130, stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    stopped = summary["updates"]
    assert summary["stopped_by"] == "interrupt" and stopped < updates
    assert checkpoint.update_of(checkpoint.all_checkpoints(run_dir / "checkpoints")[-1]) == stopped
    assert np.load(run_dir / "metrics.npz")["episode_return"].shape[1] == stopped
    assert np.load(run_dir / "params.npz")["params/actor/0/w"].shape[0] == 2
    assert f"--resume {run_dir}" in unwrapped(stdout)
    assert (f"stopped at update {stopped}: return per seed (mean over the last 10% of the updates trained)"
            in unwrapped(stdout))

    proc = resume(run_dir, after=stopped)
    signal_after_checkpoint(proc, tmp_path / "run", signal.SIGKILL, after=stopped)
    assert proc.returncode == -signal.SIGKILL
    killed_at = checkpoint.update_of(checkpoint.all_checkpoints(run_dir / "checkpoints")[-1])
    assert stopped < killed_at < updates  # killed mid-run: summary.json is still the interrupted one's
    assert json.loads((run_dir / "summary.json").read_text())["updates"] == stopped

    proc = resume(run_dir)
    assert proc.wait(timeout=HANG_GUARD) == 0, proc.communicate()[1][-3000:]
    assert_same_run(reference, run_dir)
    assert json.loads((run_dir / "summary.json").read_text())["resumed_from"] == [stopped, killed_at]
    sessions = json.loads((run_dir / "provenance.json").read_text())["sessions"]
    assert [s["update"] for s in sessions] == [0, stopped, killed_at]  # each start and resume recorded


@pytest.mark.slow
def test_sigterm_exits_143_with_files_written(tmp_path):
    proc = start("ppo", tmp_path)
    signal_after_checkpoint(proc, tmp_path, signal.SIGTERM)
    assert proc.returncode == 143
    summary = json.loads((run_dir_of(tmp_path) / "summary.json").read_text())
    assert summary["stopped_by"] == "interrupt" and (run_dir_of(tmp_path) / "params.npz").exists()


@pytest.mark.parametrize("algo", ["impala", "grpo", "pqn"])
@pytest.mark.slow
def test_a_stopped_run_resumes_to_the_uninterrupted_result(tmp_path, algo):
    """In-process, for the others: a run cut short (by a tiny --stop-minutes, after its
    first chunk) and resumed ends as the run that never stopped."""
    module = ALGOS[algo]
    args = [*SMALL[algo], *LIFECYCLE]
    module.main([*args, "--out-dir", str(tmp_path / "ref")])
    module.main([*args, "--out-dir", str(tmp_path / "cut"), "--stop-minutes", "1e-9"])
    cut = run_dir_of(tmp_path / "cut")
    summary = json.loads((cut / "summary.json").read_text())
    assert summary["stopped_by"] == "stop_minutes" and summary["updates"] <= 2
    module.main(["--resume", str(cut), "--stop-minutes", "None"])  # else the saved condition stops it again
    assert_same_run(run_dir_of(tmp_path / "ref"), cut)


# --- stop conditions -----------------------------------------------------------------------
STOP_RUN = ["--total-timesteps", "204800", "--num-seeds", "2", "--log-every", "5", "--eval-every", "5"]


EVAL_METRIC = {"sampled": "eval_return_sampled", "deterministic": "eval_return"}  # --eval-policy -> metric


@pytest.mark.parametrize("policy", ["sampled", "deterministic"])
@pytest.mark.slow
def test_stop_return_ends_the_run_once_the_evaluation_reaches_it(tmp_path, policy, capsys):
    """It reads the evaluation of --eval-policy (default sampled)."""
    extra = [] if policy == "sampled" else ["--eval-policy", policy]
    summary = ppo.main([*STOP_RUN, "--stop-return", "150", *extra, "--out-dir", str(tmp_path)])
    assert summary["stopped_by"] == "stop_return" and summary["updates"] < 400 and summary["eval_policy"] == policy
    assert f"Stopped after update {summary['updates']}: the {policy} policy's mean evaluation return reached " \
           f"--stop-return 150." in unwrapped(capsys.readouterr().out)
    assert summary["total_timesteps"] == summary["updates"] * 512 < 204800
    evals = np.load(Path(summary["run_dir"]) / "metrics.npz")[EVAL_METRIC[policy]]
    means = np.nanmean(evals[:, ~np.isnan(evals).all(axis=0)], axis=0)
    reached = np.nonzero(means >= 150)[0]
    assert reached.size and reached[0] >= len(means) - 2  # stopped within a chunk (one evaluation) of reaching it
    assert json.loads((Path(summary["run_dir"]) / "config.json").read_text())["total_timesteps"] == 204800


@pytest.mark.slow
def test_stop_plateau_counts_evaluations_without_a_new_best(tmp_path):
    summary = ppo.main([*STOP_RUN, "--stop-plateau", "2", "--out-dir", str(tmp_path)])
    assert summary["stopped_by"] == "stop_plateau" and summary["updates"] < 400
    evals = np.load(Path(summary["run_dir"]) / "metrics.npz")[EVAL_METRIC[summary["eval_policy"]]]
    means = np.nanmean(evals[:, ~np.isnan(evals).all(axis=0)], axis=0)  # one evaluation per chunk
    best, since_best, held = -np.inf, 0, None
    for i, mean in enumerate(means):
        best, since_best = (mean, 0) if mean > best else (best, since_best + 1)
        if since_best >= 2 and held is None:
            held = i
    assert held is not None and held >= len(means) - 2  # the chunk in flight when it held may finish


@pytest.mark.slow
def test_without_a_budget_training_runs_until_the_stop_condition(tmp_path):
    summary = ppo.main(["--total-timesteps", "0", "--stop-return", "100", "--log-every", "5", "--eval-every", "5",
                        "--out-dir", str(tmp_path)])
    assert summary["stopped_by"] == "stop_return" and summary["total_timesteps"] == summary["updates"] * 512 > 0
    assert json.loads((Path(summary["run_dir"]) / "config.json").read_text())["total_timesteps"] == 0


# --- config files, env overrides ------------------------------------------------------------
@pytest.mark.slow
def test_config_file_reproduces_a_run_and_flags_override_it(tmp_path):
    args = ["--total-timesteps", "4096", "--num-seeds", "2", "--learning-rate", "1e-3", "--eval-every", "4"]
    first = Path(ppo.main([*args, "--out-dir", str(tmp_path / "a")])["run_dir"])
    again = Path(ppo.main(["--config", str(first / "config.json"), "--out-dir", str(tmp_path / "b")])["run_dir"])
    assert_same_run(first, again)
    other = Path(ppo.main(["--config", str(first / "config.json"), "--seed", "5", "--out-dir", str(tmp_path / "c")])["run_dir"])
    saved = json.loads((other / "config.json").read_text())
    assert saved["seed"] == 5 and saved["learning_rate"] == 1e-3 and saved["total_timesteps"] == 4096
    assert not np.array_equal(np.load(other / "params.npz")["params/actor/0/w"], np.load(first / "params.npz")["params/actor/0/w"])


def test_yaml_file_with_a_subset_of_fields(tmp_path):
    """YAML 1.1 reads 3e-4 as a string: it is coerced by the field's type."""
    path = tmp_path / "c.yaml"
    path.write_text("learning_rate: 3e-4\nnum_envs: 8\nactor_hidden: [32, 32]\nrun:\n  num_seeds: 2\n")
    config = run.parse_config(ppo, ["--config", str(path), "--num-envs", "16"])
    assert config.learning_rate == 3e-4 and config.num_envs == 16 and config.actor_hidden == (32, 32)
    assert config.run.num_seeds == 2 and config.gamma == ppo.Config().gamma


@pytest.mark.slow
def test_env_params_change_training_and_evaluation(tmp_path):
    """CartPole episodes capped at 20 steps: training and evaluation returns stay <= 20, unless
    --eval-env-params names the evaluation env (the default one with those overrides)."""
    args = ["--total-timesteps", "4096", "--eval-every", "4", "--env-params", "max_steps_in_episode", "20"]
    summary = ppo.main([*args, "--out-dir", str(tmp_path / "a")])
    metrics = np.load(Path(summary["run_dir"]) / "metrics.npz")
    assert np.nanmax(metrics["episode_return"]) <= 20 and np.nanmax(metrics["eval_return"]) == 20
    summary = ppo.main([*args, "--eval-env-params", "length", "0.5", "--out-dir", str(tmp_path / "b")])
    assert np.nanmax(np.load(Path(summary["run_dir"]) / "metrics.npz")["eval_return"]) > 20


# --- non-finite watch ------------------------------------------------------------------------
@pytest.mark.slow
def test_a_diverging_run_stops_with_exit_1_naming_seed_and_update(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        ppo.main(["--total-timesteps", "20480", "--learning-rate", "1e30", "--num-seeds", "2", "--log-every", "2",
                  "--out-dir", str(tmp_path)])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "went non-finite at update" in err and "seed" in err
    run_dir = run_dir_of(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "non-finite" and summary["updates"] < 40
    update = int(err.split("at update ")[1].split(":")[0])
    assert update <= summary["updates"]
    assert not checkpoint.all_checkpoints(run_dir / "checkpoints") or \
        checkpoint.update_of(checkpoint.all_checkpoints(run_dir / "checkpoints")[-1]) < update


# --- checkpoint files ------------------------------------------------------------------------
def test_checkpoint_round_trip_keys_shardings_and_keep_last(tmp_path):
    mesh = jax.make_mesh((len(jax.devices()),), ("seed",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("seed"))
    n = len(jax.devices()) * 2
    tree = {"w": jax.device_put(jnp.arange(n * 3.0).reshape(n, 3), sharding),
            "key": jax.device_put(devices.seed_keys(0, n), sharding), "step": jnp.int32(7)}
    for update in range(5):
        checkpoint.save(tmp_path, update, tree, extra={"metric_x": np.ones((2, update))})
    assert [checkpoint.update_of(p) for p in checkpoint.all_checkpoints(tmp_path)] == [2, 3, 4]
    (tmp_path / ".update_9.tmp").write_bytes(b"half a file")  # a write cut short is ignored
    template = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree)
    restored, extra = checkpoint.load(checkpoint.all_checkpoints(tmp_path)[-1], template)
    np.testing.assert_array_equal(restored["w"], tree["w"])
    assert restored["w"].sharding == sharding and restored["key"].dtype == tree["key"].dtype
    np.testing.assert_array_equal(jax.random.key_data(restored["key"]), jax.random.key_data(tree["key"]))
    assert extra["metric_x"].shape == (2, 4)
    with pytest.raises(ValueError, match="does not match"):
        checkpoint.load(checkpoint.all_checkpoints(tmp_path)[-1], {**template, "w": jax.ShapeDtypeStruct((n, 4), jnp.float32)})



def test_a_list_of_runs_starts_skips_resumes_or_restarts_each_folder_by_what_it_holds(tmp_path):
    """checkpoint.run_state, which a loop-mode sweep's configs and a suite's cells both follow."""
    def folder(name, summary=None, checkpoints=0, budget=1000):
        d = tmp_path / name
        (d / "checkpoints").mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"total_timesteps": budget}))
        if summary:
            (d / "summary.json").write_text(json.dumps(summary))
        for u in range(checkpoints):
            (d / "checkpoints" / f"update_{u}.npz").write_bytes(b"")
        return d

    assert checkpoint.run_state(None) == checkpoint.run_state(tmp_path / "absent") == "start"
    assert checkpoint.run_state(folder("no_checkpoint")) == "restart"
    assert checkpoint.run_state(folder("interrupted", checkpoints=2,
                                       summary={"stopped_by": "interrupt", "total_timesteps": 400, "updates": 4})) == "resume"
    for reason in ("budget", "non-finite", "stop_return", "stop_minutes"):
        assert checkpoint.run_state(folder(reason, {"stopped_by": reason, "total_timesteps": 400, "updates": 4})) == "finished"
    # interrupted with less than one update of the budget left: a resume would refuse it, it is done
    last = folder("last", checkpoints=1, summary={"stopped_by": "interrupt", "total_timesteps": 960, "updates": 16})
    assert checkpoint.finished(last) and checkpoint.run_state(last) == "finished"
    # an indefinite run (budget 0) that was interrupted always resumes
    assert checkpoint.run_state(folder("indefinite", checkpoints=1, budget=0,
                                       summary={"stopped_by": "interrupt", "total_timesteps": 950, "updates": 19})) == "resume"

# --- bad inputs: one sentence, exit 2, before compiling, no run folder -------------------------
BAD_INPUTS = [
    (["--learning-rate", "inf"], "--learning-rate must be a finite number, got inf"),
    (["--gamma", "2"], "--gamma must lie in (0, 1], got 2.0"),
    (["--max-grad-norm", "-1"], "--max-grad-norm must be 0 or positive, got -1.0"),
    (["--eval-env-params", "max_steps_in_episode", "abc"], "--eval-env-params max_steps_in_episode must be a number, got 'abc'"),
    (["--env-params", "lenght", "0.5"], "--env-params: Unknown environment parameter(s) lenght"),
    (["--env", "CartPol-v1"], "Did you mean"),
    (["--total-timesteps", "0"], "--total-timesteps 0 trains until a stop condition holds"),
    (["--stop-plateau", "3", "--eval-every", "0"], "--stop-plateau 3 counts evaluations, but --eval-every is 0"),
]


@pytest.mark.parametrize("algo", list(ALGOS))
def test_bad_inputs_are_one_sentence_with_exit_2(cli_error, capsys, tmp_path, algo):
    module = ALGOS[algo]
    for args, message in BAD_INPUTS:
        if algo in ("sac", "td3") and args[0] == "--env":
            args, message = ["--env", "Pendulum-v2"], "Did you mean 'Pendulum-v1'"
        code, err = cli_error(module.main, args)
        assert code == 2 and message in err and err.startswith("error: ") and "Traceback" not in err, (args, err)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for out_dir, message in ((a_file, f"--out-dir {a_file} is a file, not a folder"),
                             (Path("/proc/scanrl/out"), "--out-dir /proc/scanrl/out is not writable")):
        with pytest.raises(SystemExit) as exit_info:
            module.main(["--out-dir", str(out_dir)])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    code, err = cli_error(module.main, ["--resume", str(tmp_path)])
    assert code == 2 and "is not a run folder" in err


@pytest.mark.parametrize("algo,args", [
    ("ppo", ["--num-envs", "1000000", "--total-timesteps", "128000000"]),
    ("sac", ["--buffer-size", "300000000", "--total-timesteps", "300000000", "--num-seeds", "4"]),
    ("td3", ["--buffer-size", "300000000", "--total-timesteps", "300000000", "--num-seeds", "4"]),
])
def test_a_run_too_big_for_memory_is_refused_with_the_estimate(cli_error, algo, args):
    code, err = cli_error(ALGOS[algo].main, args)
    assert code == 2 and "this run needs at least" in err and "GiB" in err and "--num-envs" in err, err


@pytest.mark.slow
def test_a_run_whose_compiled_programs_do_not_fit_is_refused_before_its_folder(cli_error, monkeypatch):
    """The check before compiling is a lower bound (the state and the largest array); XLA's count
    of the compiled programs, temporaries included, is checked after compiling and before the
    run folder (XLand's recipe at 5 seeds passed the first and was OOM-killed while running)."""
    from scanrl.common.harness import memory

    needed = []
    real = memory.check_compiled_memory
    monkeypatch.setattr(memory, "check_memory", lambda *args: None)  # the lower bound passes
    monkeypatch.setattr(memory, "_available_memory", lambda: (2**16, "available RAM"))
    monkeypatch.setattr(memory, "check_compiled_memory", lambda *args: needed.append(args[1]) or real(*args))
    code, err = cli_error(ppo.main, ["--total-timesteps", "2048", "--no-compile-cache"])
    assert code == 2 and "of memory (XLA's count for the compiled programs) but there is 64 KiB of" in err, err
    assert "--num-envs" in err and len(needed) == 1
    sizes = [m.temp_size_in_bytes + m.argument_size_in_bytes for m in map(lambda c: c.memory_analysis(), needed[0])]
    assert max(sizes) > 2**16  # it needed more than the 64 KiB said to be there


def test_resume_errors(cli_error, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    saved = run.config_dict(compose(ppo, total_timesteps=4096))
    (run_dir / "config.json").write_text(json.dumps(saved))
    code, err = cli_error(ppo.main, ["--resume", str(run_dir)])
    assert code == 2 and "has no checkpoint" in err
    code, err = cli_error(ppo.main, ["--resume", str(run_dir), "--learning-rate", "0.1"])
    assert code == 2 and "--learning-rate cannot change when resuming (the run used 0.00025, got 0.1)" in err
    code, err = cli_error(ppo.main, ["--resume", str(run_dir), "--total-timesteps", "2048"])
    assert code == 2 and "--total-timesteps can only be raised" in err


def test_config_file_errors_name_the_key_and_the_file(cli_error, tmp_path):
    for text, message in (('{"lerning_rate": 0.1}', "unknown key 'lerning_rate' in"),
                          ('{"num_envs": "many"}', "key 'num_envs' in"),
                          ('{"gamma": 2}', "--gamma must lie in (0, 1], got 2")):
        path = tmp_path / "c.json"
        path.write_text(text)
        code, err = cli_error(ppo.main, ["--config", str(path)])
        assert code == 2 and message in err and str(path) in err, err


# --- signals before training --------------------------------------------------------------
# The script runs ppo.main and sends itself the signal at one phase of the start: while an
# update is traced (lowering), or as XLA's compile starts (a fresh cache, so the start
# compiles; the main thread waits on it and sees the signal at once, on a machine of any
# speed). A script file, not `python -c`, so the kept-programs path is taken.
STARTUP = """
import os, signal, sys, time
from scanrl.algos import ppo
from scanrl.common.harness import programs
phase, sig, argv = sys.argv[1], getattr(signal, sys.argv[2]), sys.argv[3:]
send = lambda: os.kill(os.getpid(), sig)
if phase == "lowering":
    loss = ppo.ppo_loss
    ppo.ppo_loss = lambda *a, **k: (send(), loss(*a, **k))[1]
elif phase == "gc":  # from inside a gc callback, whose exceptions Python prints and drops
    import gc
    def callback(stage, info):
        if stage == "start":
            gc.callbacks.remove(callback)
            send()
            time.sleep(0.2)  # the signal is handled while the callback still runs
    loss = ppo.ppo_loss
    ppo.ppo_loss = lambda *a, **k: (gc.callbacks.append(callback), gc.collect(), loss(*a, **k))[2]
else:
    keep = programs.compile_and_keep
    programs.compile_and_keep = lambda *a, **k: (send(), keep(*a, **k))[1]
ppo.main(argv)
"""


@pytest.mark.parametrize("phase, sig, background, extra", [
    ("lowering", "SIGINT", False, []),  # as from a terminal: the default handler gave a traceback
    ("gc", "SIGINT", False, []),  # the handler raised into a gc callback: "Exception ignored", and the run trained
    ("compiling", "SIGINT", True, []),  # a script's background job starts with SIGINT ignored
    ("compiling", "SIGTERM", False, []),
    ("compiling", "SIGINT", False, ["--sweep", "learning_rate=1e-3,2e-3", "--sweep-mode", "loop"]),
])
@pytest.mark.slow
def test_a_signal_before_training_exits_with_one_line_and_no_run_folder(tmp_path, phase, sig, background, extra):
    """Ctrl-C or SIGTERM while the start lowers or compiles: exit 130 / 143 with one line, no
    traceback, and no run folder (nothing was computed). Whatever the process inherited:
    an ignored SIGINT was silently swallowed and the run trained its whole budget."""
    script = tmp_path / "startup.py"
    script.write_text(STARTUP)
    command = [sys.executable, str(script), phase, sig, "--total-timesteps", "1000000",
               "--out-dir", str(tmp_path / "runs"), *extra]
    if background:  # `command &` in a script: bash starts it with SIGINT ignored
        command = ["bash", "-c", '"$@" & wait $!', "bash", *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD, cwd=tmp_path,
                          env={**os.environ, "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache")})
    number = getattr(signal, sig)
    assert proc.returncode == 128 + number, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr and "] update" not in proc.stdout, proc.stderr[-3000:]  # no progress line
    name = {"SIGINT": "Ctrl-C", "SIGTERM": "SIGTERM"}[sig]
    assert proc.stdout.strip().splitlines()[-1] == f"{name} before training started: stopped, nothing was written."
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.slow
def test_ctrl_c_after_the_first_progress_line_keeps_the_run(tmp_path):
    """Pressed once the first progress line is out: the chunk in flight ends, a checkpoint
    and every file are written, exit 130, no traceback."""
    proc = subprocess.Popen([sys.executable, "algos/ppo.py", "--total-timesteps", "5000000", "--log-every", "2",
                             "--out-dir", str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    for line in proc.stdout:
        if line.startswith("[ppo"):
            break
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=HANG_GUARD)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    run_dir = run_dir_of(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "interrupt" and 2 <= summary["updates"] < 9765
    assert checkpoint.update_of(checkpoint.all_checkpoints(run_dir / "checkpoints")[-1]) == summary["updates"]
    assert f"--resume {run_dir}" in unwrapped(stdout)


def test_a_second_signal_exits_at_once(monkeypatch):
    """The first signal only asks for a stop; the second leaves at once with 128 + signal."""
    from scanrl.common.harness import signals as handling
    from scanrl.common.harness.signals import Interrupted, Signals, interruptible

    exits = []
    monkeypatch.setattr(handling.os, "_exit", exits.append)
    signals = Signals(say=lambda text: None, training=True)
    signals._handle(signal.SIGINT, None)
    assert signals.received == signal.SIGINT and exits == []
    signals._handle(signal.SIGINT, None)
    assert exits == [130]
    signals = Signals(say=lambda text: None, training=True)
    signals._handle(signal.SIGTERM, None)
    signals._handle(signal.SIGTERM, None)
    assert exits == [130, 143]
    signals = Signals()  # before training: the handler only records; the waiting thread stops the start
    signals._handle(signal.SIGTERM, None)
    with pytest.raises(Interrupted) as raised:
        signals.check()
    assert raised.value.sig == signal.SIGTERM and isinstance(raised.value, KeyboardInterrupt)
    signals = Signals()
    with pytest.raises(Interrupted):  # a signal during the work: interruptible raises it at once
        interruptible(lambda: (signals._handle(signal.SIGINT, None), time.sleep(30)), signals)


def test_a_checkpoint_fingerprint_leaves_out_object_addresses(tmp_path):
    """Some environments' states (MuJoCo MJX's, in Playground) carry static data that prints
    as `<... object at 0x...>`, an address that differs in every process: the fingerprint a
    resume checks must not include it, or no such run could ever resume."""
    import dataclasses

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class Node:
        x: jax.Array
        static: object = dataclasses.field(metadata=dict(static=True))

    saved, now = Node(jnp.zeros(2), object()), Node(jnp.ones(2), object())  # two processes' objects
    assert " at 0x" in str(jax.tree.structure(saved))
    assert checkpoint.describe(saved) == checkpoint.describe(now)
    path = checkpoint.save(tmp_path, 1, saved)
    checkpoint.verify(path, now)  # no ValueError
    with pytest.raises(ValueError, match="does not match"):
        checkpoint.verify(path, Node(jnp.ones(3), object()))


def catches_sigterm(pid: int) -> bool:
    """Whether a process has a SIGTERM handler (/proc's SigCgt mask): Python installs none of
    its own, so the algorithm file's first lines (harness.quiet_start) have run."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True  # it has ended: nothing left to wait for
    caught = int(next(l for l in status.splitlines() if l.startswith("SigCgt:")).split()[1], 16)
    return bool(caught >> (signal.SIGTERM - 1) & 1)


def outcome_of_a_signal(tmp_path, delay, name, timesteps="20000"):
    """`python algos/ppo.py` sent SIGINT `delay` seconds after its file's first line ran (before
    it, in Python's own start-up, a Ctrl-C is Python's: "KeyboardInterrupt", exit 1): (exit code,
    stdout, stderr, its out folder)."""
    out = tmp_path / name
    proc = subprocess.Popen([sys.executable, "algos/ppo.py", "--total-timesteps", timesteps, "--log-every", "5",
                             "--out-dir", str(out)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    while not catches_sigterm(proc.pid):
        time.sleep(0.005)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=HANG_GUARD)
    return proc.returncode, stdout, stderr, out


def check_one_outcome(code, stdout, stderr, out):
    """Whenever it came: no traceback and nothing Python dropped; before training one line,
    exit 130 and no run folder; during training the run kept (its summary says interrupt)."""
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr[-3000:]
    assert code in (0, 130), (code, stdout[-2000:], stderr[-2000:])
    folders = list(out.iterdir()) if out.exists() else []
    if code == 130 and stdout.strip().splitlines()[-1] == "Ctrl-C before training started: stopped, nothing was written.":
        assert not folders
    else:
        (run_dir,) = folders
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["stopped_by"] == ("interrupt" if code == 130 else "budget"), (code, summary["stopped_by"])


@pytest.mark.slow
def test_ctrl_c_while_the_imports_run_is_one_line(tmp_path):
    """As soon as the file's first line has run, JAX's import is still to come: one line,
    exit 130, no traceback."""
    code, stdout, stderr, out = outcome_of_a_signal(tmp_path, 0.0, "imports")
    assert code == 130 and stderr == "" and not out.exists(), (stdout, stderr)
    assert stdout == "Ctrl-C before training started: stopped, nothing was written.\n"


@pytest.mark.slow
def test_ctrl_c_at_random_moments_never_loses_the_signal_or_prints_a_traceback(tmp_path):
    """20 runs, each sent SIGINT at a seeded random moment of its first 12 seconds (imports,
    parsing, lowering, compiling, the first chunks), two at a time: every one ends as
    check_one_outcome says."""
    from concurrent.futures import ThreadPoolExecutor

    delays = np.random.default_rng(0).uniform(0.0, 12.0, 20)
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(lambda i: outcome_of_a_signal(tmp_path, delays[i], f"run{i}"), range(20)))
    for delay, outcome in zip(delays, outcomes):
        try:
            check_one_outcome(*outcome)
        except AssertionError as e:
            raise AssertionError(f"SIGINT after {delay:.2f} s: {e}") from None
