"""common/harness/loop.py: chunked runs equal the whole run bit for bit, programs hold no host
callback, a user's own env object trains, and the install is namespaced."""

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile

import jax
import numpy as np
import pytest

from scanrl import algos
from scanrl.algos import grpo, impala, ppo, ppo_rnn, pqn, pqn_rnn, sac, td3
from scanrl.common import envs
from scanrl.common.harness import devices, evaluate, loop
from scanrl.common.harness.runconfig import compose
from conftest import HANG_GUARD, REPO, run_python

# Small configs that still exercise what matters: evaluation inside the chunks, padding
# (3 seeds on 2 devices), IMPALA's lagged parameters, SAC's buffer and learning start.
CONFIGS = {
    "ppo": (ppo, dict(env="CartPole-v1", num_seeds=3, total_timesteps=4 * 32 * 5, num_envs=4, num_steps=32,
                      eval_every=2, eval_episodes=2)),
    "ppo_data_parallel": (ppo, dict(env="Pendulum-v1", num_seeds=1, data_parallel=2, total_timesteps=16 * 32 * 5,
                                    num_steps=32, num_minibatches=8, num_epochs=2, eval_every=2, eval_episodes=2)),
    # image observations through the conv torso (--torso auto) for IMPALA and GRPO
    "impala": (impala, dict(env="Breakout-MinAtar", num_seeds=2, total_timesteps=16 * 16 * 5, num_envs=16, num_steps=16,
                            actor_lag=2, eval_every=2, eval_episodes=2)),
    "grpo": (grpo, dict(env="SpaceInvaders-MinAtar", num_seeds=2, total_timesteps=16 * 16 * 5, num_envs=16, num_steps=16,
                        eval_every=2, eval_episodes=2)),
    # SAC with FastSAC's knobs: a categorical critic, 3-step returns, AdamW
    "sac": (sac, dict(env="Pendulum-v1", num_seeds=2, total_timesteps=5 * 40, num_steps=40, learning_starts=60,
                      batch_size=32, num_atoms=11, v_min=-50.0, v_max=0.0, n_step=3, weight_decay=0.01,
                      eval_every=2, eval_episodes=2)),
    # 2 envs, each with its own exploration std; the actor learns every second critic step; the
    # categorical critic with 3-step returns
    "td3": (td3, dict(env="Pendulum-v1", num_seeds=2, total_timesteps=5 * 2 * 20, num_envs=2, num_steps=20,
                      learning_starts=50, batch_size=32, actor_hidden=(32, 32), critic_hidden=(32, 32),
                      exploration_noise_min=0.05, exploration_noise_max=0.3, num_atoms=11, v_min=-50.0,
                      v_max=0.0, n_step=3, eval_every=2, eval_episodes=2)),
    "ppo_rnn": (ppo_rnn, dict(env="CartPole-v1", num_seeds=3, hide_obs=(1, 3), total_timesteps=4 * 32 * 5, num_envs=4,
                              num_steps=32, seq_len=8, burn_in=4, num_minibatches=4, gru_size=16, encoder_hidden=(16,),
                              head_hidden=(16,), eval_every=2, eval_episodes=2)),
    # epsilon decays within the run; 3 seeds on 2 devices pad as PPO's do
    "pqn": (pqn, dict(env="CartPole-v1", num_seeds=3, total_timesteps=8 * 16 * 5, num_envs=8, num_steps=16,
                      num_minibatches=4, num_epochs=2, hidden=(32,), eval_every=2, eval_episodes=2)),
    # the recurrent state carried across rollouts and chunks; --hide-obs through the harness
    "pqn_rnn": (pqn_rnn, dict(env="CartPole-v1", num_seeds=3, hide_obs=(1, 3), total_timesteps=4 * 16 * 5,
                              num_envs=4, num_steps=16, num_minibatches=2, num_epochs=1, hidden=(16,), gru_size=16,
                              eval_every=2, eval_episodes=2)),
}


def config_of(name, **extra):
    module, kw = CONFIGS[name]
    kw = {**kw, **extra}
    return module, compose(module, kw.pop("env"), log_every=0, **kw)


def run_in_chunks(program, keys):
    state, chunks, done = program.start(keys), [], 0
    while done < program.num_updates:
        n = min(program.chunk, program.num_updates - done)
        state, metrics = program.advance(state, done, n)
        assert np.asarray(metrics.pop("_policy_finite"))[:, :n].all()  # the driver's non-finite watch
        chunks.append({k: np.asarray(v)[:, :n] for k, v in metrics.items()})
        done += n
    metrics = {k: np.concatenate([c[k] for c in chunks], axis=1) for k in chunks[0]}
    return jax.device_get(program.policy(state)), metrics


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.slow
def test_chunks_back_to_back_equal_the_whole_run_bit_for_bit(name):
    """Chunks of 2 (2 + 2 + 1, the last one masked) for every algorithm, and of 3 (3 + 2)
    for PPO; test_cli checks chunks of 1, 3 and the whole run through the command line."""
    module, config = config_of(name)
    keys = devices.seed_keys(0, config.run.num_seeds)
    whole = jax.device_get(loop.build(module.make_algorithm, config).train(keys))
    assert whole["metrics"]["episode_return"].shape == (config.run.num_seeds, 5)
    assert np.isfinite(whole["metrics"]["eval_return"][:, [1, 3, 4]]).all()  # evaluated inside the chunks
    for chunk in (2, 3) if name == "ppo" else (2,):
        program = loop.build(module.make_algorithm, config, chunk=chunk)
        policy, metrics = run_in_chunks(program, keys)
        assert metrics.keys() == whole["metrics"].keys()
        for k in metrics:
            np.testing.assert_array_equal(metrics[k], whole["metrics"][k], err_msg=f"{name}, chunk {chunk}: {k}")
        for got, want in zip(jax.tree.leaves(policy), jax.tree.leaves(whole["policy"])):
            np.testing.assert_array_equal(got, want, err_msg=f"{name}, chunk {chunk}: policy")


def as_flags(kw: dict) -> list[str]:
    """{"num_envs": 4, "hide_obs": (1, 3)} -> ["--num-envs", "4", "--hide-obs", "1", "3"]"""
    return [s for k, v in kw.items() for s in ("--" + k.replace("_", "-"), *map(str, v if isinstance(v, tuple) else (v,)))]


@pytest.mark.parametrize("name, num_devices", [("ppo", 1), ("ppo", 2), ("impala", 2), ("grpo", 2), ("sac", 2),
                                               ("ppo_rnn", 2), ("pqn", 2), ("pqn_rnn", 2), ("td3", 2)])
@pytest.mark.slow
def test_each_files_make_train_equals_the_command_line_run_bit_for_bit(name, num_devices, tmp_path):
    """The file's own make_train (one scan of its update, seeds vmapped, shard_map over the
    devices, no evaluation) and the command line's run of the same flags (chunks of 2 updates,
    evaluated, written to a run folder) end with the same policy and training metrics, bit
    for bit: 2 seeds on 1 device (vmapped) and on 2 (one seed each)."""
    module, kw = CONFIGS[name]
    kw = {**kw, "num_seeds": 2, "num_devices": num_devices}
    env = kw.pop("env")
    module.main(["--env", env, *as_flags(kw), "--log-every", "2", "--out-dir", str(tmp_path)])
    (run_dir,) = tmp_path.iterdir()
    saved, metrics = np.load(run_dir / "params.npz"), np.load(run_dir / "metrics.npz")
    kw.pop("num_devices")
    job = compose(module, env, **kw)
    # the env the command line builds from its run settings (ppo_rnn's --hide-obs), handed to make_train
    env_object, _, env_params = loop.environment(job)
    out = jax.device_get(module.make_train(job.config, env_object, env_params, num_devices)(devices.seed_keys(0, 2)))
    policy = {jax.tree_util.keystr(path, simple=True, separator="/"): leaf
              for path, leaf in jax.tree_util.tree_flatten_with_path(out["policy"])[0]}
    assert sorted(policy) == sorted(saved.files)
    for k in saved.files:
        np.testing.assert_array_equal(policy[k], saved[k], err_msg=f"{name}: policy {k}")
    assert set(out["metrics"]) < set(metrics.files) and "eval_return" in metrics.files  # the run also evaluates
    for k, m in out["metrics"].items():
        assert m.shape == (2, job.config.num_updates), k
        np.testing.assert_array_equal(np.asarray(m, np.float32), metrics[k], err_msg=f"{name}: metric {k}")


@pytest.mark.parametrize("module", [grpo, impala, ppo, ppo_rnn, pqn, pqn_rnn, sac, td3], ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_config_holds_hyperparameters_and_the_job_adds_the_run_settings(module):
    """No run setting is a field of an algorithm's Config, and default_config refuses one; the
    harness's Job adds them: the file's RUN_DEFAULTS for every env and for the env's preset,
    then the values given. make_train trains a fixed budget: 0 steps is one sentence."""
    from scanrl.common.harness.runconfig import RUN_FIELDS, Job

    fields = {f.name for f in dataclasses.fields(module.Config)}
    assert fields & RUN_FIELDS == set() and "env" in fields and "total_timesteps" in fields
    with pytest.raises(TypeError, match="num_seeds"):
        module.default_config("Pendulum-v1", num_seeds=2)
    job = compose(module, "Pendulum-v1", num_seeds=3, gamma=0.9)
    assert isinstance(job, Job) and job.config == module.default_config("Pendulum-v1", gamma=0.9)
    assert job.run.num_seeds == 3 and job.gamma == 0.9  # a Job reads as its Config too
    want = {**module.RUN_DEFAULTS.get(None, {}), **module.RUN_DEFAULTS.get("continuous", {})}
    assert want and all(getattr(job.run, k) == v for k, v in want.items())
    assert job.replace(num_seeds=5, gamma=0.8) == Job(module.default_config("Pendulum-v1", gamma=0.8),
                                                      dataclasses.replace(job.run, num_seeds=5))
    with pytest.raises(ValueError, match="make_train runs a fixed budget"):
        module.make_train(dataclasses.replace(job.config, total_timesteps=0))


@pytest.mark.slow
def test_an_algorithm_file_imports_only_the_kit(python_process):
    """Importing any algorithm file loads scanrl's kit and nothing else: no module of the
    command line's harness (common/harness/), and not the registry of env ids and recipes
    (common/suites/, its recipes.py), which loads when an env is named by its id."""
    proc = python_process(["-c", "import sys; from scanrl.algos import grpo, impala, ppo, ppo_rnn, pqn, "
                                 "pqn_rnn, sac, td3; "
                                 "print(sorted(m for m in sys.modules if m.startswith('scanrl.common')))"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = eval(proc.stdout.strip().splitlines()[-1])
    kit = ["scanrl.common", "scanrl.common.algorithm", "scanrl.common.cores", "scanrl.common.envs",
           "scanrl.common.nets", "scanrl.common.offpolicy", "scanrl.common.onpolicy", "scanrl.common.qlearning",
           "scanrl.common.recurrent"]
    assert loaded == kit, loaded


@pytest.mark.slow
def test_make_train_builds_and_runs_without_the_harness(python_process):
    """The Python API's whole path, a Config, `make_train` and its run, loads no harness module
    either: a copied file's own training needs only the kit. On a user's own env object it
    does not load the registry of env ids and recipes either; naming the env by id does."""
    proc = python_process(["-c", """
import sys
import jax
from scanrl.algos import ppo
from scanrl.common import cores
cores.use_cpu_cores()
import gymnax
loaded = lambda: sorted(m for m in sys.modules if m.startswith(('scanrl.common.harness', 'scanrl.common.suites')))
env, params = gymnax.make("CartPole-v1")
own = ppo.Config(env="my-cartpole", total_timesteps=512, num_envs=4, num_steps=16)
out = ppo.make_train(own, env, params)(jax.random.split(jax.random.key(0), 2))
print(jax.tree.leaves(out["metrics"])[0].shape, loaded())
config = ppo.default_config("CartPole-v1", total_timesteps=512, num_envs=4, num_steps=16)
named = ppo.make_train(config)(jax.random.split(jax.random.key(0), 2))
same = all(bool((a == b).all()) for a, b in zip(jax.tree.leaves(out["policy"]), jax.tree.leaves(named["policy"])))
print(jax.tree.leaves(named["metrics"])[0].shape, same, loaded())
"""])
    assert proc.returncode == 0, proc.stderr[-2000:]
    own, named = proc.stdout.strip().splitlines()[-2:]
    assert own == "(2, 8) []"  # 2 seeds x 512 / (4 x 16) updates; no harness module, no registry
    assert named == "(2, 8) True ['scanrl.common.suites', 'scanrl.common.suites.recipes']"  # the same run, by its id


def has_host_callback(lowered) -> bool:
    text = lowered.as_text()
    return "callback" in text


def test_the_callback_detector_sees_a_callback():
    def with_callback(x):
        jax.debug.callback(print, x)
        return x + 1

    assert has_host_callback(jax.jit(with_callback).lower(1.0))
    assert not has_host_callback(jax.jit(lambda x: x + 1).lower(1.0))


@pytest.mark.parametrize("name", ["ppo", "impala", "grpo", "sac", "ppo_rnn", "pqn", "pqn_rnn", "td3"])
@pytest.mark.slow
def test_no_training_program_contains_a_host_callback(name):
    """Whole run, start and advance: without callbacks JAX's persistent cache can store them."""
    module, config = config_of(name)
    keys = devices.seed_keys(0, config.run.num_seeds)
    program = loop.build(module.make_algorithm, config, chunk=2)
    assert not has_host_callback(program.train.lower(keys))
    assert not has_host_callback(program.start.lower(keys))
    state = jax.eval_shape(program.start, keys)
    assert not has_host_callback(program.advance.lower(state, 0, 2))


@pytest.mark.slow
def test_a_users_own_env_object_trains():
    """make_train(config, env, env_params) trains on the env object given: gymnax's CartPole
    instance with its default parameters reproduces the run by id bit for bit, and with a
    longer pole (built by the test, not by id) the same seed trains differently."""
    from gymnax.environments.classic_control import CartPole

    module, config = config_of("ppo")
    keys = devices.seed_keys(0, config.run.num_seeds)
    config = config.config  # make_train takes the hyperparameters alone
    by_id = jax.device_get(module.make_train(config)(keys))
    env = CartPole()
    same = jax.device_get(module.make_train(config, env, env.default_params)(keys))
    np.testing.assert_array_equal(same["metrics"]["policy_loss"], by_id["metrics"]["policy_loss"])
    long_pole = env.default_params.replace(length=2.0)
    custom = jax.device_get(module.make_train(config, env, long_pole)(keys))
    assert np.isfinite(custom["metrics"]["policy_loss"]).all()
    assert not np.array_equal(custom["metrics"]["episode_return"], by_id["metrics"]["episode_return"])



@pytest.mark.slow
def test_a_state_with_empty_leaves_starts_and_advances_on_every_device():
    """MuJoCo MJX's state (Playground) holds empty arrays (e.g. [seeds, envs, 0] for a model
    without mocap bodies). `start` must hand them to `advance` sharded over seeds like every
    other leaf, and `advance` must return them so to the next chunk; they came out
    replicated, and Playground runs of more seeds than one device holds were refused before
    their first update, then at their second chunk."""
    from flax import struct
    from gymnax.environments.classic_control import CartPole

    @struct.dataclass
    class State:
        inner: object
        empty: jax.Array  # [0, 3]
        time: int = 0

    class WithEmpty(CartPole):
        def reset_env(self, key, params):
            obs, inner = super().reset_env(key, params)
            return obs, State(inner, jax.numpy.zeros((0, 3)), inner.time)

        def step_env(self, key, state, action, params):
            obs, inner, reward, done, info = super().step_env(key, state.inner, action, params)
            return obs, State(inner, state.empty, inner.time), reward, done, info

        def is_truncated(self, state, params):
            return super().is_truncated(state.inner, params)

    env = WithEmpty()
    config = compose(ppo, num_envs=4, num_steps=8, num_minibatches=2, total_timesteps=64, num_seeds=4,
                     eval_every=0)
    program = loop.build(ppo.make_algorithm, config, env, env.default_params, chunk=1)
    assert len(program.layout.mesh.devices.flat) == jax.device_count() >= 2
    state = program.start(devices.seed_keys(0, 4))
    empty = state.train.env_state.env_state.empty
    assert empty.shape == (4, 4, 0, 3) and empty.sharding == program.state_sharding
    for first in (0, 1):  # two chunks: the second takes the state the first returned
        state, metrics = program.advance(state, first, 1)
        assert state.train.env_state.env_state.empty.sharding == program.state_sharding
        assert np.isfinite(np.asarray(metrics["policy_loss"])).all()


# --- the install --------------------------------------------------------------------------------
@pytest.mark.slow
def test_install_exposes_scanrl_and_no_top_level_algos_or_common(tmp_path):
    """Outside the repo (so its folders are not on sys.path): scanrl.algos.ppo and
    scanrl.common import, `algos` and `common` do not, and the distribution's only
    top-level package is scanrl."""
    code = (
        "import importlib.util as u, json, scanrl.algos.ppo, scanrl.common.harness.loop;"
        "print(json.dumps([u.find_spec('algos') is None, u.find_spec('common') is None]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=HANG_GUARD)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [True, True]
    top_level = importlib.metadata.distribution("scanrl").read_text("top_level.txt")
    assert top_level is None or top_level.split() == ["scanrl"]


@pytest.mark.slow
def test_built_wheel_holds_scanrl_algos_and_common_only(tmp_path):
    """A regular (non-editable) build maps algos/ and common/ under scanrl/."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        capture_output=True, text=True, timeout=HANG_GUARD,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("scanrl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"scanrl/algos/ppo.py", "scanrl/common/envs.py", "scanrl/common/harness/loop.py"} <= set(names)
    packages = {n.split("/")[0] for n in names if not n.startswith("scanrl-")}
    assert packages == {"scanrl"}, packages


@pytest.mark.slow
def test_a_copied_algorithm_file_runs_from_another_folder_and_its_edits_are_never_served_stale(tmp_path, capsys):
    """A copy of ppo.py runs as is. A repeated start loads its compiled programs without
    tracing (summary.json: program_cache "hit") and computes bit for bit what the first did;
    a comment edit traces again but reuses the compiled program; a code edit compiles anew
    and changes the result. The copy's runs carry its name and path, and scanrl-eval evaluates
    them with the copy's code: a Config field only the copy has loads, and a copy that is gone
    is one sentence."""
    script = tmp_path / "my_ppo.py"
    shutil.copy(REPO / "algos" / "ppo.py", script)

    def run(name):
        proc = subprocess.run(
            [sys.executable, "my_ppo.py", "--total-timesteps", "1024", "--num-steps", "64", "--eval-every", "0",
             "--log-every", "0", "--out-dir", name],
            cwd=tmp_path, capture_output=True, text=True, timeout=HANG_GUARD,
            env={**os.environ, "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache")},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        (run_dir,) = (tmp_path / name).iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
        return summary, dict(np.load(run_dir / "params.npz"))

    first, params = run("first")
    assert first["total_timesteps"] == 1024 and first["program_cache"] == "miss"
    (first_dir,) = (tmp_path / "first").iterdir()
    saved = json.loads((first_dir / "config.json").read_text())
    assert first_dir.name.startswith("my_ppo__") and saved["algo"] == "my_ppo"
    assert saved["algo_file"] == str(script.resolve())
    first_hash = hashlib.sha256(script.read_bytes()).hexdigest()
    (session,) = json.loads((first_dir / "provenance.json").read_text())["sessions"]
    assert session["algorithm_file"] == {"path": str(script.resolve()), "sha256": first_hash}
    again, same = run("again")
    assert again["program_cache"] == "hit"
    assert all(np.array_equal(params[k], same[k]) for k in params)

    script.write_text(script.read_text() + "\n# a comment changes no program\n")
    commented, same = run("commented")
    assert commented["program_cache"] == "program"
    (commented_dir,) = (tmp_path / "commented").iterdir()  # the edited file's hash, not the first's
    (session,) = json.loads((commented_dir / "provenance.json").read_text())["sessions"]
    assert session["algorithm_file"]["sha256"] == hashlib.sha256(script.read_bytes()).hexdigest() != first_hash
    assert all(np.array_equal(params[k], same[k]) for k in params)

    source = script.read_text()
    edit = "return policy_loss + config.vf_coef * v_loss"  # ppo_loss, in the copied file itself
    assert edit in source
    script.write_text(source.replace(edit, "return 2.0 * policy_loss + config.vf_coef * v_loss"))
    edited, changed = run("edited")
    assert edited["program_cache"] == "miss"
    assert not all(np.array_equal(params[k], changed[k]) for k in params)

    field = '    env: str = "CartPole-v1"\n'  # a field scanrl's own ppo.py does not have
    script.write_text(script.read_text().replace(field, field + '    my_knob: float = 1.0\n    """a new idea."""\n', 1))
    run("knob")
    (knob_dir,) = (tmp_path / "knob").iterdir()
    assert json.loads((knob_dir / "config.json").read_text())["my_knob"] == 1.0
    result = evaluate.main([str(knob_dir), "--episodes", "2", "--out", str(tmp_path / "eval.json")], algos)
    assert result["algo"] == "my_ppo" and len(result["per_seed"]) == 1
    assert evaluate.load_algorithm(knob_dir, algos).__file__ == str(script.resolve())
    script.rename(tmp_path / "moved.py")
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main([str(knob_dir), "--out", str(tmp_path / "eval2.json")], algos)
    assert exit_info.value.code == 2 and f"was trained by {script.resolve()}, which is gone" in capsys.readouterr().err


@pytest.mark.slow
def test_programs_kept_by_an_importing_process_serve_a_main_process(tmp_path):
    """Programs kept by a script that imports scanrl.algos.ppo are reused by `python
    algos/ppo.py`, whose classes live in `__main__`: a resume there (state rebuilt from the
    checkpoint with __main__'s classes) runs the kept executables with its own pytrees and
    ends bit for bit as the importing script's uninterrupted run."""
    (tmp_path / "store.py").write_text("import sys\nfrom scanrl.algos import ppo\nppo.main(sys.argv[1:])\n")
    args = ["--total-timesteps", "4096", "--num-steps", "64", "--eval-every", "0", "--log-every", "1",
            "--checkpoint-every", "1"]
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache")}

    def run(*command, cwd):
        proc = subprocess.run([sys.executable, *command], cwd=cwd, capture_output=True, text=True, timeout=HANG_GUARD, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]

    def summary(out):
        (run_dir,) = out.iterdir()
        return run_dir, json.loads((run_dir / "summary.json").read_text())

    run("store.py", *args, "--stop-minutes", "1e-9", "--out-dir", str(tmp_path / "cut"), cwd=tmp_path)
    cut, first = summary(tmp_path / "cut")
    assert first["program_cache"] == "miss" and first["stopped_by"] == "stop_minutes" and first["updates"] < 16
    run("algos/ppo.py", "--resume", str(cut), "--stop-minutes", "None", cwd=REPO)
    resumed = json.loads((cut / "summary.json").read_text())
    assert resumed["program_cache"] == "program" and resumed["updates"] == 16
    run("store.py", *args, "--out-dir", str(tmp_path / "whole"), cwd=tmp_path)
    whole, straight = summary(tmp_path / "whole")
    assert straight["program_cache"] == "hit"
    for name in ("params.npz", "metrics.npz"):
        want, got = np.load(whole / name), np.load(cut / name)
        assert sorted(want.files) == sorted(got.files)
        for k in want.files:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{name} {k}")


def test_a_folder_that_cannot_keep_programs_is_one_warning_not_a_failure(tmp_path, capsys):
    from scanrl.common.harness import programs

    blocker = tmp_path / "scanrl-programs"
    blocker.write_text("a file where the folder would go")
    programs._write(blocker / "a.ref", "key")
    programs._write(blocker / "b.programs", {})
    err = capsys.readouterr().err
    assert err.count("warning: the compiled programs were not kept in") == 1, err
    assert list(tmp_path.iterdir()) == [blocker]  # no temporary file left behind


KEEP_LAPACK = """
import sys, jax, jax.numpy as jnp
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
from scanrl.common.harness import programs
x = jnp.eye(3, dtype=jnp.float32) * 4.0
step = jax.jit(lambda a: (jnp.linalg.cholesky(a), {"trace": jnp.trace(a)}))  # LAPACK's potrf on the CPU
if sys.argv[2] == "keep":
    low = step.lower(x)
    key = programs.program_key(low, low, jax.devices()[:1], {})
    programs.compile_and_keep(key, low, low, None, 0)
    programs.link("source", key)
else:  # a fresh process that lowers nothing: served by the source key alone
    entry = programs.load("source", jax.devices()[:1])
    print(float(entry.advance(x)[0][2, 2]))
"""


@pytest.mark.slow
def test_a_kept_program_that_calls_lapack_runs_in_a_process_that_lowered_nothing(tmp_path):
    """MuJoCo MJX's physics (Playground) factorises with LAPACK. jaxlib sets up its LAPACK
    kernels only when a program using them is lowered, so a process served a kept program by
    its source key alone crashed (SIGSEGV) at the first call: every repeat of a Playground
    run did. Loading sets them up first."""
    cache = str(tmp_path / "cache")
    assert run_python(["-c", KEEP_LAPACK, cache, "keep"]).returncode == 0
    loaded = run_python(["-c", KEEP_LAPACK, cache, "load"])
    assert loaded.returncode == 0 and loaded.stdout.strip() == "2.0", (loaded.returncode, loaded.stderr[-800:])


@pytest.mark.slow
def test_evaluation_reports_the_sampled_and_the_deterministic_policy():
    """A corridor where action 1 reaches the goal (return 1) and action 0 waits until the
    10-step time limit (return 0). The policy's mode always waits; its samples take action 1
    with probability 1/2, so nearly every sampled episode ends at the goal (1 - 2**-10). The
    run's evaluation reports both: eval_return (the mode, as before) 0, eval_return_sampled
    above 0.9; the final table says which one the stop conditions read and that they differ."""
    import jax.numpy as jnp
    from flax import struct
    from gymnax.environments import environment, spaces

    from scanrl.common.harness.logging import evaluation_lines

    @struct.dataclass
    class State(environment.EnvState):
        pass

    @struct.dataclass
    class Params(environment.EnvParams):
        max_steps_in_episode: int = 10

    class Corridor(environment.Environment):
        default_params = Params()

        def step_env(self, key, state, action, params):
            state = State(time=state.time + 1)
            done = (action == 1) | (state.time >= params.max_steps_in_episode)
            return jnp.zeros(1), state, (action == 1).astype(jnp.float32), done, {"discount": 1.0 - done}

        def reset_env(self, key, params):
            return jnp.zeros(1), State(time=0)

        def action_space(self, params=None):
            return spaces.Discrete(2)

        def observation_space(self, params):
            return spaces.Box(0.0, 1.0, (1,))

    def make_algorithm(config, env, env_params):
        def act(policy, obs, key, deterministic, mask=None):
            waits = jnp.zeros(obs.shape[0], jnp.int32)
            return waits if deterministic else jax.random.bernoulli(key, 0.5, waits.shape).astype(jnp.int32)

        return loop.Algorithm(init=lambda key: {"w": jnp.zeros(1)}, update=lambda s, u: (s, {"episode_return": 0.0}),
                              act=act, policy_params=lambda s: s, vec_env=envs.VecEnv(env, env_params, 1),
                              num_updates=2, steps_per_update=1)

    config = compose(ppo, "CartPole-v1", num_seeds=2, eval_every=1, eval_episodes=64, log_every=0)
    env = Corridor()
    program = loop.build(make_algorithm, config, env, env.default_params)
    metrics = jax.device_get(program.train(devices.seed_keys(0, 2))["metrics"])
    np.testing.assert_array_equal(metrics["eval_return"], 0.0)
    assert (metrics["eval_return_sampled"] > 0.9).all(), metrics["eval_return_sampled"]
    summary = {"eval_return_deterministic_mean": 0.0, "eval_return_sampled_mean": float(metrics["eval_return_sampled"].mean()),
               "eval_policy": config.run.eval_policy}
    first, note = evaluation_lines(summary)
    sampled = f"{summary['eval_return_sampled_mean']:.2f}"
    assert first == f"last evaluation, mean over seeds: sampled {sampled}, deterministic 0.00"
    assert note.startswith(f"note: the deterministic policy returns 0.00 where the sampled one returns {sampled};")
    assert "(sampled here)" in note
    assert evaluation_lines({**summary, "eval_return_deterministic_mean": summary["eval_return_sampled_mean"]})[1:] == []
    # a run folder from before the deterministic policy's key was named: eval_return_mean
    old = {"eval_return_mean" if k == "eval_return_deterministic_mean" else k: v for k, v in summary.items()}
    assert evaluation_lines(old) == [first, note]


def test_an_evaluation_keeps_how_each_environments_first_episode_ended():
    """An env that reports how an episode ended (StepInfo.outcomes: SMAX's battle won) has each
    environment's FIRST episode's outcome in the evaluation, not a later one's: here episodes
    last 1-6 steps, drawn at each reset, and the outcome says whether the episode lasted an odd
    number of steps. The run's evaluation adds eval_odd and eval_odd_sampled beside the returns;
    an env without outcomes reports none (CartPole)."""
    import jax.numpy as jnp
    from flax import struct
    from gymnax.environments import environment, spaces

    @struct.dataclass
    class State(environment.EnvState):
        length: jax.Array

    @struct.dataclass
    class Params(environment.EnvParams):
        max_steps_in_episode: int = 100

    class Race(environment.Environment):
        default_params = Params()

        def step_env(self, key, state, action, params):
            state = state.replace(time=state.time + 1)
            odd = (state.time % 2 == 1).astype(jnp.float32)
            return (jnp.zeros(1), state, jnp.float32(1.0), state.time >= state.length,
                    {"outcomes": {"odd": odd}})

        def reset_env(self, key, params):
            return jnp.zeros(1), State(time=0, length=jax.random.randint(key, (), 1, 7))

        def action_space(self, params=None):
            return spaces.Discrete(2)

        def observation_space(self, params):
            return spaces.Box(0.0, 1.0, (1,))

    env = Race()
    wait = lambda obs, key, carry, mask: (jnp.zeros(obs.shape[0], jnp.int32), carry)  # noqa: E731
    episodes = jax.jit(lambda key: loop.run_episodes(envs.VecEnv(env, env.default_params, 64),
                                                     wait, key))(jax.random.key(0))
    returns = np.asarray(episodes.returns)
    assert len(set(returns.tolist())) == 6  # every length, so later episodes end otherwise
    np.testing.assert_array_equal(episodes.lengths, returns)
    np.testing.assert_array_equal(episodes.outcomes["odd"], returns % 2 == 1)
    cartpole = envs.VecEnv(*envs.gymnax().make("CartPole-v1"), 4)
    assert jax.jit(lambda key: loop.run_episodes(cartpole, wait, key))(
        jax.random.key(0)).outcomes == {}

    def make_algorithm(config, env, env_params):
        def act(policy, obs, key, deterministic, mask=None):
            return jnp.zeros(obs.shape[0], jnp.int32)

        return loop.Algorithm(init=lambda key: {"w": jnp.zeros(1)},
                              update=lambda s, u: (s, {"episode_return": 0.0}), act=act,
                              policy_params=lambda s: s,
                              vec_env=envs.VecEnv(env, env_params, 1), num_updates=2,
                              steps_per_update=1)

    config = compose(ppo, "CartPole-v1", num_seeds=2, eval_every=2, eval_episodes=256,
                     log_every=0)
    program = loop.build(make_algorithm, config, env, env.default_params)
    metrics = jax.device_get(program.train(devices.seed_keys(0, 2))["metrics"])
    for policy in ("eval_odd", "eval_odd_sampled"):  # half the lengths 1-6 are odd
        assert np.isnan(metrics[policy][:, 0]).all()  # no evaluation after the first update
        assert (np.abs(metrics[policy][:, 1] - 0.5) < 0.1).all(), metrics[policy]


# --- the layering of the code ------------------------------------------------------------------
def scanrl_imports() -> dict[str, set[str]]:
    """Every scanrl module (algos/, common/) -> the scanrl modules it imports anywhere in its
    text, at module level or inside a function, read from the source (nothing is imported)."""
    import ast

    modules = {}
    for path in [*(REPO / "algos").glob("*.py"), *(REPO / "common").rglob("*.py")]:
        parts = path.relative_to(REPO).with_suffix("").parts
        modules[".".join(("scanrl",) + (parts[:-1] if parts[-1] == "__init__" else parts))] = path
    graph = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                            for a in node.names}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def test_no_import_circles_and_no_algorithm_file_imported_by_the_kit_or_the_harness():
    """The modules import each other without a circle (lazy imports inside functions count), no
    algorithm file imports another, the suites and their recipes import nothing above the kit's
    envs and cores, and neither the kit nor the harness imports an algorithm
    file or the scanrl.algos registry: the console scripts that find algorithms by name
    (scanrl-eval, scanrl-bench) live in the registry and hand it to the harness."""
    graph = scanrl_imports()
    assert len(graph) > 30 and "scanrl.common.harness.run" in graph["scanrl.algos.ppo"]
    done, on_path = set(), []

    def visit(module):
        if module in on_path:
            raise AssertionError("import circle: " + " -> ".join(on_path[on_path.index(module):] + [module]))
        if module not in done:
            on_path.append(module)
            for target in sorted(graph[module]):
                visit(target)
            on_path.pop()
            done.add(module)

    for module in sorted(graph):
        visit(module)
    algorithm_files = {m for m in graph if m.startswith("scanrl.algos.")}
    for module, targets in graph.items():
        assert not targets & algorithm_files, (module, targets & algorithm_files)
    # the suites (their adapters and recipes) sit on the kit: no import out of suites/ goes higher
    kit = {"scanrl.common.cores", "scanrl.common.envs"}
    for module, targets in graph.items():
        if module.startswith("scanrl.common.suites"):
            upward = {t for t in targets if not t.startswith("scanrl.common.suites")} - kit
            assert not upward, (module, upward)
    registry_users = {m for m, targets in graph.items() if "scanrl.algos" in targets}
    assert not {m for m in registry_users if m.startswith("scanrl.common.")}, registry_users
    assert {"scanrl.common.harness.evaluate", "scanrl.common.harness.bench"} <= graph["scanrl.algos"]



def design_layers(graph: dict[str, set[str]]) -> list[tuple[str, set[str], list[str]]]:
    """docs/design.md's "The harness in layers" table, from the bottom: (layer, its modules as
    scanrl module names, the layers it may import); graph: `scanrl_imports()`."""
    import re

    text = (REPO / "docs/design.md").read_text()
    section = text.split("### The harness in layers", 1)[1].split("\n#", 1)[0]
    kit = {m for m in graph if m.startswith("scanrl.common")
           and not m.startswith("scanrl.common.harness")}
    layers = []
    row = r"^\| (the [\w ]+?) \| (.+?) \| (.+?) \|$"
    for name, modules, allowed in re.findall(row, section, re.M):
        if name == "the kit":
            members = kit
        else:
            files = re.findall(r"`([\w]+)\.py`", modules)
            members = {"scanrl.common.harness" + ("" if f == "__init__" else f".{f}")
                       for f in files}
        layers.append((name, members, [a.strip() for a in allowed.split(",")]))
    return layers


def test_the_harness_imports_only_down_its_layers():
    """docs/design.md's table of the harness's layers says what each module may import: its own
    layer and the layers below it. Every module of common/ is in exactly one layer, each row
    allows exactly the layers below it, and every import of a harness module (at module level
    or inside a function, read by ast) stays within what its row allows; the program builder
    (loop.py) reaches no plots, statistics or reports, even lazily."""
    graph = scanrl_imports()
    layers = design_layers(graph)
    names = [name for name, _, _ in layers]
    assert names == ["the kit", "the settings", "the programs", "the reports", "the run",
                     "the command lines"], names
    for i, (name, _, allowed) in enumerate(layers):
        assert sorted(allowed) == sorted(names[:i] or ["the kit"]), (name, allowed)
    placed = [m for _, members, _ in layers for m in members]
    common = {m for m in graph if m.startswith("scanrl.common")}
    assert sorted(placed) == sorted(common), (sorted(common - set(placed)),
                                              sorted(set(placed) - common),
                                              sorted(m for m in placed if placed.count(m) > 1))
    layer_of = {m: i for i, (_, members, _) in enumerate(layers) for m in members}
    upward = {m: sorted(t for t in targets if t in layer_of and layer_of[t] > layer_of[m])
              for m, targets in graph.items() if m in layer_of}
    assert not {m: t for m, t in upward.items() if t}, {m: t for m, t in upward.items() if t}
    reached, todo = set(), ["scanrl.common.harness.loop"]
    while todo:
        for t in graph[todo.pop()] - reached:
            reached.add(t)
            todo.append(t)
    harness = "scanrl.common.harness."
    files = {harness + m for m in ("plots", "stats", "reports", "logging", "checkpoint")}
    assert not reached & files, reached

# the folders held to 100 columns: a folder joins with one entry (its *.py files, not below)
NARROW_FOLDERS = ("algos", "common", "common/harness", "common/suites")


def test_every_algorithm_file_keeps_its_lines_within_100_columns():
    """An algorithm file is read, and copied, as one page: no line of algos/*.py is wider than
    100 columns; nor of the kit, the harness and the suites (NARROW_FOLDERS)."""
    algos = {f.name for f in (REPO / "algos").glob("*.py")}
    assert {"ppo.py", "impala.py", "grpo.py", "sac.py", "ppo_rnn.py", "pqn.py", "td3.py"} <= algos
    files = sorted(f for folder in NARROW_FOLDERS for f in (REPO / folder).glob("*.py"))
    assert all(any((REPO / folder).glob("*.py")) for folder in NARROW_FOLDERS), NARROW_FOLDERS
    wide = [f"{f.relative_to(REPO)}:{n}: {len(line)} columns" for f in files
            for n, line in enumerate(f.read_text().splitlines(), 1) if len(line) > 100]
    assert not wide, wide


def test_the_design_page_names_every_module_with_its_lines():
    """docs/design.md's file tables name every module of algos/ and common/ (a new module gets its
    row and its one job), and each row's line count is within 10% of the file's (a table that
    says what the code is)."""
    import re

    rows = dict(re.findall(r"^\| `([\w/]+\.py)` \| ([\d,]+) \|", (REPO / "docs/design.md").read_text(), re.M))
    modules = {str(f.relative_to(REPO)) for folder in ("algos", "common") for f in (REPO / folder).rglob("*.py")}
    assert set(rows) == modules, (sorted(modules - set(rows)), sorted(set(rows) - modules))
    lines = {name: len((REPO / name).read_text().splitlines()) for name in modules}
    off = {name: (int(rows[name].replace(",", "")), lines[name]) for name in modules
           if abs(int(rows[name].replace(",", "")) - lines[name]) > 0.1 * lines[name]}
    assert not off, f"docs/design.md's (table, file) line counts: {off}"
