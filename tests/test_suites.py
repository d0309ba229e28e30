"""Environment suites beyond gymnax (common/suites/): each adapter against the suite's own
API, its time limits, auto-reset and errors, and a short learning run. A suite that is not
installed is skipped with the reason; CI installs every suite's extra."""

import ast
import inspect
import subprocess
import sys
import tomllib
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import HANG_GUARD, REPO

from scanrl.algos import ppo
from scanrl.common import algorithm, envs, suites
from scanrl.common.harness.runconfig import compose
from scanrl.common.harness import envsettings

BRAX_ID, PLAYGROUND_ID = "brax/inverted_pendulum", "playground/CartpoleBalance"


def suite(module: str, extra: str):
    return pytest.importorskip(module, reason=f'the {extra} suite is not installed: pip install -e ".[{extra}]"')


@pytest.fixture(scope="module")
def brax_pendulum():
    brax_envs = suite("brax.envs", "brax")
    env, params = suites.make(BRAX_ID)
    return env, params, brax_envs.get_environment("inverted_pendulum", backend="generalized")


@pytest.mark.slow
def test_brax_steps_equal_brax_itself_until_the_pole_falls(brax_pendulum):
    """Same keys, same actions: the adapter's observations, rewards and terminations are
    Brax's raw environment's; the termination is `terminated`, not `truncated`, and its
    final observation is Brax's. The step does not reset: VecEnv returns the environment to
    its cached start (test_vecenv_returns_finished_envs_to_their_cached_starts)."""
    env, params, raw = brax_pendulum
    key = jax.random.key(3)
    obs, state = env.reset(key, params)
    raw_state = jax.jit(raw.reset)(key)
    np.testing.assert_array_equal(obs, raw_state.obs)
    step, raw_step = jax.jit(env.step), jax.jit(raw.step)
    action = jnp.zeros(1)  # the pole, started off balance, falls (after 31 steps from this key)
    for t in range(200):
        step_key = jax.random.fold_in(key, t)
        obs, state, reward, terminated, truncated, info = step(step_key, state, action, params)
        raw_state = raw_step(raw_state, action)
        np.testing.assert_allclose(info["final_observation"], raw_state.obs, rtol=1e-6, atol=1e-6)
        assert float(reward) == float(raw_state.reward) and bool(terminated) == bool(raw_state.done)
        if terminated:
            break
        np.testing.assert_array_equal(obs, info["final_observation"])
    assert terminated and not truncated and 5 < t < 200
    np.testing.assert_array_equal(obs, info["final_observation"])
    assert int(state.time) == t + 1


@pytest.fixture(scope="module", params=["brax", "playground"])
def raw_state_env(request):
    """A suite whose raw environment is `reset(key) -> state`, `step(state, action) -> state`
    with `obs`, `reward` and `done`, and no time limit of its own: (env, params, raw)."""
    if request.param == "brax":
        brax_envs = suite("brax.envs", "brax")
        raw = brax_envs.get_environment("inverted_pendulum", backend="generalized")
        return (*suites.make(BRAX_ID), raw)
    suite("mujoco_playground", "playground")
    env, params = suites.make(PLAYGROUND_ID)
    return env, params, env.env  # the adapter holds Playground's own object, loaded with impl="jax"


@pytest.mark.slow
def test_a_time_limit_is_truncated_with_the_true_final_observation(raw_state_env):
    """Same keys, same actions, five steps: observations and rewards are the suite's own; at
    max_steps_in_episode (the suite's episode length) the cut is `truncated`, never
    `terminated`; `final_observation` is the observation the step reached (what the value
    bootstraps from), and the step itself does not reset."""
    env, params, raw = raw_state_env
    params = envsettings.override_params(params, {"max_steps_in_episode": 5})
    key = jax.random.key(0)
    obs, state = env.reset(key, params)
    raw_state = jax.jit(raw.reset)(key)
    np.testing.assert_array_equal(obs, raw_state.obs)
    step, raw_step, action = jax.jit(env.step), jax.jit(raw.step), jnp.zeros(raw.action_size)
    for t in range(5):
        obs, state, reward, terminated, truncated, info = step(jax.random.fold_in(key, t), state, action, params)
        raw_state = raw_step(raw_state, action)
        np.testing.assert_allclose(info["final_observation"], raw_state.obs, rtol=1e-6, atol=1e-6)
        assert float(reward) == pytest.approx(float(raw_state.reward), rel=1e-6, abs=1e-6)
        assert bool(truncated) == (t == 4) and not terminated
    np.testing.assert_array_equal(obs, info["final_observation"])
    assert int(state.time) == 5


@pytest.mark.slow
def test_vecenv_returns_finished_envs_to_their_cached_starts(raw_state_env):
    """Brax's auto-reset scheme: an environment whose episode ends (here at a 3-step limit)
    continues from its own cached first state, exactly, and the others run on. The caches
    are drawn anew only on the updates `VecEnv.with_fresh_starts` schedules (every `cached_starts`
    steps per environment), by the kit's `Algorithm` before an update that never asks for
    them, and evaluation's episodes start from fresh resets."""
    env, params, _ = raw_state_env
    params = envsettings.override_params(params, {"max_steps_in_episode": 3})
    vec = envs.VecEnv(env, params, num_envs=2)
    assert vec.cached_starts == env.cached_starts == 10_000 and vec.restart_finished is None
    obs0, state = vec.reset(jax.random.key(0))
    np.testing.assert_array_equal(state.starts[0], obs0)
    step = jax.jit(vec.step)
    action = jnp.zeros((2, *vec.action_shape))
    for t in range(3):
        obs, state, info = step(jax.random.key(t), state, action)
    assert info.truncated.all() and not np.allclose(info.final_obs, obs0)
    np.testing.assert_array_equal(obs, obs0)  # back at the cached starts
    np.testing.assert_array_equal(state.env_state.time, 0)
    every = 10_000 // 100  # updates of 100 steps per environment between new starts

    class TrainState(NamedTuple):  # what the kit's refresh reads of an algorithm's state
        env_state: envs.VecEnvState
        key: jax.Array

    # an update that never draws new starts itself, as no algorithm file does
    algo = algorithm.Algorithm(init=None, update=lambda state, u: (state, {}), act=None, policy_params=None,
                               vec_env=vec, num_updates=every, steps_per_update=100 * vec.num_envs)
    update = jax.jit(lambda state, u: algo.update(state, u)[0].env_state)
    kept = update(TrainState(state, jax.random.key(1)), jnp.int32(every - 2))
    np.testing.assert_array_equal(kept.starts[0], state.starts[0])
    renewed = update(TrainState(state, jax.random.key(1)), jnp.int32(every - 1))
    assert not np.allclose(renewed.starts[0], state.starts[0])
    np.testing.assert_array_equal(renewed.env_state.time, state.env_state.time)  # running episodes go on
    fresh = jax.jit(vec.reset)(jax.random.key(5))[0]
    assert not np.allclose(fresh, obs0)  # a new key, a new start: evaluation's episodes begin here


@pytest.mark.slow
def test_brax_spaces_and_vectorised_stepping(brax_pendulum):
    env, params, raw = brax_pendulum
    vec = envs.VecEnv(env, params, num_envs=3)
    assert not vec.discrete and vec.action_shape == (raw.action_size,) and vec.obs_shape == (raw.observation_size,)
    obs, state = vec.reset(jax.random.key(1))
    obs, state, info = jax.jit(vec.step)(jax.random.key(2), state, jnp.full((3, 1), 5.0))  # clipped to 1
    assert obs.shape == (3, raw.observation_size) and info.final_obs.shape == obs.shape
    assert suites.is_continuous(BRAX_ID) and suites.preset_name(BRAX_ID) == "continuous"


@pytest.mark.slow  # over 5 s in the quick tier on a 2-core CI-kind machine (2026-12-03)
def test_suite_ids_and_their_errors(cli_error):
    """gymnax/ ids are gymnax's; an unknown suite, an unknown name and a missing suite are
    one sentence each, exit 2, before compiling, with no run folder."""
    suite("brax.envs", "brax")
    assert suites.make("gymnax/CartPole-v1")[0].name == suites.make("CartPole-v1")[0].name
    for args, message in [
        (["--env", "brax/invertedpendulum"], "--env 'brax/invertedpendulum' is not a brax environment. Did you mean "
                                             "'brax/inverted_pendulum'"),
        (["--env", "nope/ant"], "--env 'nope/ant': unknown suite 'nope'; the suites are gymnax (bare ids), brax/NAME, craftax/NAME, jaxmarl/NAME, jumanji/NAME, navix/NAME, playground/NAME, xminigrid/NAME."),
    ]:
        code, err = cli_error(ppo.main, args)
        assert code == 2 and message in err and err.count("error:") == 1, err


def test_a_missing_suite_names_its_install_command(monkeypatch, cli_error):
    monkeypatch.setitem(suites.SUITES, "brax", ("scanrl.common.suites.brax", "brax", "brax_not_installed_here"))
    code, err = cli_error(ppo.main, ["--env", "brax/ant"])
    assert code == 2 and 'needs the brax suite: pip install "scanrl[brax]"' in err, err
    # a suite whose extra installs nothing on this Python says so, not the install command
    monkeypatch.setitem(suites.MIN_PYTHON, "brax", (99, 0))
    code, err = cli_error(ppo.main, ["--env", "brax/ant"])
    mine = "%d.%d" % sys.version_info[:2]
    assert code == 2 and (f"needs the brax suite, which needs Python 99.0 or newer (this is Python "
                          f'{mine}), so scanrl[brax] installs nothing here.') in err, err


def test_the_suites_python_floors_are_their_extras_markers():
    """suites.MIN_PYTHON names exactly the extras of pyproject.toml with a python_version marker,
    at the marker's version."""
    import re

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    floors = {}
    for name, (_, extra, _) in suites.SUITES.items():
        for requirement in extras[extra]:
            found = re.search(r"python_version >= '(\d+)\.(\d+)'", requirement)
            if found:
                floors[name] = (int(found[1]), int(found[2]))
    assert floors == suites.MIN_PYTHON and floors


# --- the suite contract: suites.Adapter, AdapterHooks and EnvHooks -----------------------------
def test_every_adapter_in_the_registry_satisfies_the_adapter_protocol():
    """Each row of SUITES names an extra of pyproject.toml and an adapter module with Adapter's
    functions (`NAMES()`, and `make(name)`, or `make(name, options)` exactly where the adapter
    has OPTIONS) and AdapterHooks' optional members of their kinds. Imports the adapters
    only, not the suites."""
    from scanrl.common.suites.recipes import Recipe

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    every = extras["envs"][0].removeprefix("scanrl[").removesuffix("]").split(",")  # [envs]: all
    for name, (_, extra, _) in suites.SUITES.items():
        assert extra in extras and extra in every, name
        module = suites.import_adapter(name)
        assert isinstance(module, suites.Adapter), f"{name}: its adapter lacks NAMES or make"
        assert callable(module.NAMES) and not inspect.signature(module.NAMES).parameters, name
        options = suites.has_adapter_hook(module, "OPTIONS")
        wanted = ["name", "options"] if options else ["name"]
        parameters = list(inspect.signature(module.make).parameters)
        assert callable(module.make) and parameters == wanted, (name, parameters)
        assert not options or isinstance(module.OPTIONS, (dict, str)), name
        assert suites.adapter_hook(module, "ACTIONS") in (None, "box", "discrete"), name
        recipes = suites.adapter_hook(module, "RECIPES", {})
        assert isinstance(recipes, dict) and all(
            isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)
            and isinstance(recipe, Recipe) for key, recipe in recipes.items()), name


def test_the_optional_hooks_are_declared_once_and_read_only_through_their_accessors():
    """The optional members that algos/ and common/ read of an env (`envs.hook`) or of an
    adapter module (`suites.adapter_hook`, `has_adapter_hook`) are exactly those declared in
    suites.EnvHooks and suites.AdapterHooks, the accessors take those and no other, and no
    file reads one by getattr or hasattr: a new hook is declared in its Protocol first."""
    accessors = {"hook": suites.ENV_HOOKS, "adapter_hook": suites.ADAPTER_HOOKS,
                 "has_adapter_hook": suites.ADAPTER_HOOKS}
    read = {name: set() for name in accessors}
    by_getattr = []
    for path in sorted([*(REPO / "algos").glob("*.py"), *(REPO / "common").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant)
                    and isinstance(node.args[1].value, str)):
                continue
            func = getattr(node.func, "attr", getattr(node.func, "id", None))
            member = node.args[1].value
            if func in accessors:
                read[func].add(member)
            elif func in ("getattr", "hasattr") and member in suites.ENV_HOOKS | suites.ADAPTER_HOOKS:
                by_getattr.append(f"{path.relative_to(REPO)}:{node.lineno} {func} {member!r}")
    assert not by_getattr, f"read through envs.hook or suites.adapter_hook instead: {by_getattr}"
    assert read["hook"] == suites.ENV_HOOKS, "suites.EnvHooks declares what common/ reads of an env"
    assert envs.ENV_HOOKS == suites.ENV_HOOKS, "the kit's list of names is the contract's"
    assert read["adapter_hook"] | read["has_adapter_hook"] == suites.ADAPTER_HOOKS
    bare = object()
    assert all(envs.hook(bare, name) is None for name in suites.ENV_HOOKS)
    assert not any(suites.has_adapter_hook(bare, name) for name in suites.ADAPTER_HOOKS)
    with pytest.raises(ValueError, match="declare it in suites.EnvHooks and envs.ENV_HOOKS"):
        envs.hook(bare, "undeclared")
    for accessor in (suites.adapter_hook, suites.has_adapter_hook):
        with pytest.raises(ValueError, match="declare it in suites.AdapterHooks"):
            accessor(bare, "UNDECLARED")


@pytest.mark.slow
def test_ppo_learns_brax_inverted_pendulum(tmp_path):
    suite("brax.envs", "brax")
    """PPO's default for this env, Brax's notebook recipe in its cpu form (64 envs x 80
    steps, tanh-normal policy, reward scale 10, the positional backend), 8e4 steps (15
    updates), one seed. A random policy lets the pole fall within about 5-30 steps (return
    about 5-30); balanced for Brax's whole 1000-step episode it scores 1000. The threshold,
    500, is half the maximum: far above chance. Over 10 seeds at 8e4 steps every seed's
    deterministic evaluation scored 1000; at 6e4 one seed scored 200, so not 6e4
    (benchmarks/RESULTS.md, section 5). Evaluated once, after the last update (training does
    not depend on when evaluations run: they draw from their own keys). --log-every 5 divides
    the 15 updates: a run's last, shorter chunk computes a whole chunk and keeps only its part."""
    summary = ppo.main(["--env", BRAX_ID, "--total-timesteps", "80000", "--eval-every", "1000", "--log-every", "5",
                        "--out-dir", str(tmp_path)])
    assert summary["eval_return_deterministic_mean"] >= 500, summary


@pytest.mark.slow
def test_sac_learns_brax_inverted_pendulum(tmp_path):
    """SAC's defaults, 2e4 steps, one seed (about 40 s here, 860 env steps/s). The same
    threshold as PPO's, for the same reasons; the run reached 1000 from about 15k steps
    when this test was written. Evaluated once, after the last update."""
    from scanrl.algos import sac

    suite("brax.envs", "brax")
    summary = sac.main(["--env", BRAX_ID, "--total-timesteps", "20000", "--eval-every", "1000", "--log-every", "25",
                        "--out-dir", str(tmp_path)])
    assert summary["eval_return_deterministic_mean"] >= 500, summary


# --- grid worlds: Navix and XLand-MiniGrid -------------------------------------------------------
GRIDS = {"navix": "navix/Navix-Empty-5x5-v0", "xminigrid": "xminigrid/MiniGrid-Empty-5x5"}


@pytest.fixture(scope="module", params=sorted(GRIDS))
def grid(request):
    """(suite, env, params, raw reset(key), raw step(timestep, action), raw (terminated,
    truncated) of a timestep): the suite's own API, its own end-of-episode flags."""
    module = suite(request.param, request.param)
    env, params = suites.make(GRIDS[request.param])
    if request.param == "navix":
        raw = module.make("Navix-Empty-5x5-v0")
        return (request.param, env, params, jax.jit(raw.reset), jax.jit(raw.step),
                lambda ts: (ts.step_type == 2, ts.step_type == 1))
    raw, raw_params = module.make("MiniGrid-Empty-5x5")
    return (request.param, env, params, jax.jit(lambda k: raw.reset(raw_params, k)),
            jax.jit(lambda ts, a: raw.step(raw_params, ts, a)),
            lambda ts: ((ts.step_type == 2) & (ts.discount == 0), (ts.step_type == 2) & (ts.discount > 0)))


@pytest.mark.slow
def test_grid_steps_equal_the_suite_itself_to_the_goal_and_the_time_limit(grid):
    """Same keys, same actions: the adapter's observations and rewards are the suite's own.
    Its goal end (Navix step_type 2; XLand LAST with discount 0) is `terminated`; its
    100-step limit (Navix step_type 1; XLand LAST with discount 1) is `truncated`, with the
    suite's observation as the final one; both start a fresh episode."""
    _, env, params, raw_reset, raw_step, raw_flags = grid
    step, seen = jax.jit(env.step), set()
    for episode in range(40):
        key = jax.random.key(episode)
        obs, state = env.reset(key, params)
        timestep = raw_reset(key)
        np.testing.assert_array_equal(obs, timestep.observation)
        actions = jax.random.randint(jax.random.fold_in(key, 1), (100,), 0, 3)  # turn left, right, forward
        for t in range(100):
            obs, state, reward, terminated, truncated, info = step(jax.random.fold_in(key, t), state, actions[t], params)
            timestep = raw_step(timestep, actions[t])
            np.testing.assert_array_equal(info["final_observation"], timestep.observation)
            assert float(reward) == float(timestep.reward)
            assert (bool(terminated), bool(truncated)) == tuple(map(bool, raw_flags(timestep)))
            if terminated or truncated:
                break
            np.testing.assert_array_equal(obs, timestep.observation)
        seen.add("terminated" if terminated else "truncated")
        assert truncated == (t == 99)
        _, reset_key = jax.random.split(jax.random.fold_in(key, t))
        np.testing.assert_array_equal(obs, raw_reset(reset_key).observation)
        if seen == {"terminated", "truncated"}:
            break
    assert seen == {"terminated", "truncated"}


def test_grid_spaces(grid):
    name, env, params, raw_reset, _, _ = grid
    vec = envs.VecEnv(env, params, num_envs=2)
    assert vec.discrete and vec.num_actions == {"navix": 7, "xminigrid": 6}[name]
    assert vec.obs_shape == raw_reset(jax.random.key(0)).observation.shape
    assert not suites.is_continuous(GRIDS[name]) and suites.preset_name(GRIDS[name]) == "grid_world"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GRIDS))
@pytest.mark.slow
def test_ppo_learns_an_empty_grid(tmp_path, name):
    """PPO's defaults (`--recipe none`: Navix's own recipe is 1e6 steps of one epoch each),
    1e5 steps (about 10 s of compile and 5-10 s of training here). The
    reward comes only at the goal (Navix: 1; XLand: 1 - 0.9 * steps / 100), which a random
    policy also reaches within 100 steps now and then: what learning shows is the way to
    the goal. The first updates' episodes last 60-90 steps; the shortest path takes 4-6
    moves. Thresholds: every evaluation episode reaches the goal (return above 0.9), and
    the last updates' episodes last at most 10 steps (both runs reached 5-6 when this test
    was written)."""
    suite(name, name)
    summary = ppo.main(["--env", GRIDS[name], "--recipe", "none", "--total-timesteps", "100000", "--eval-every", "39", "--log-every", "39",
                        "--out-dir", str(tmp_path)])
    assert summary["eval_return_deterministic_mean"] > 0.9, summary
    lengths = np.load(f"{summary['run_dir']}/metrics.npz")["episode_length"][0]
    assert np.nanmean(lengths[:5]) > 30 and np.nanmean(lengths[-5:]) <= 10, lengths


@pytest.mark.slow
def test_navix_carries_no_sprite_cache_and_draws_navixs_own_picture():
    """Navix's state holds a sprite picture of its grid that only RGB observations read. The
    adapter's state carries an empty one through reset and step (building, selecting and
    carrying it cost half of PPO's run on DoorKey), and its picture is Navix's own, drawn from
    Navix's state with the cache Navix built."""
    module = suite("navix", "navix")
    env, params = suites.make("navix/Navix-DoorKey-5x5-v0")
    raw = module.make("Navix-DoorKey-5x5-v0")
    env_step, raw_step = jax.jit(env.step), jax.jit(raw.step)
    pictures = set()
    for seed in range(3):
        key = jax.random.key(seed)
        _, state = env.reset(key, params)
        timestep = raw.reset(key)
        for action in (2, 1, 2):  # forward, right, forward
            _, state, *_ = env_step(jax.random.fold_in(key, action), state, action, params)
            timestep = raw_step(timestep, action)
        assert state.timestep.state.cache.patches.shape[0] == 0
        picture = np.asarray(env.render_rgb(state, params))
        np.testing.assert_array_equal(picture, np.asarray(jax.jit(module.observations.rgb)(timestep.state)))
        pictures.add(picture.tobytes())
    assert len(pictures) == 3  # each key lays the room out anew: the pictures are not one constant


# --- MuJoCo Playground -------------------------------------------------------------------------
@pytest.mark.slow
def test_playground_spaces_and_an_offline_task_is_one_sentence(cli_error, monkeypatch):
    """A locomotion task fetches its model files with git at first use; offline that fails
    (as here: the failure is made certain, whatever the machine's network)."""
    import subprocess

    suite("mujoco_playground", "playground")
    vec = envs.VecEnv(*suites.make(PLAYGROUND_ID), num_envs=2)
    assert not vec.discrete and vec.action_shape == (1,) and vec.obs_shape == (5,)

    def offline(name, config_overrides=None):
        print("Error downloading mujoco_menagerie: ...")  # what Playground prints before raising
        raise subprocess.CalledProcessError(128, ["git", "clone"])

    from scanrl.common.suites import playground
    monkeypatch.setattr(playground.registry(), "load", offline)
    code, err = cli_error(ppo.main, ["--env", "playground/Go1JoystickFlatTerrain"])
    assert code == 2 and "MuJoCo Playground could not load it" in err and err.count("error:") == 1, err
    assert len(err.splitlines()) == 1, err


@pytest.mark.slow
def test_ppo_learns_playground_cartpole_balance(tmp_path):
    """PPO's continuous preset (`--recipe none`: Playground's recipe needs more than 2e5 steps),
    2e5 steps, one seed (about 33 s of compile and 20 s of training here). The reward is in [0, 1] per step for 1000 steps; the first updates'
    near-random policy scores about 270. Threshold 400 (the run's evaluations were 388, 475
    and 526 at updates 16, 32 and 48 when this test was written): clearly above chance.
    Evaluated once, after the last update."""
    suite("mujoco_playground", "playground")
    summary = ppo.main(["--env", PLAYGROUND_ID, "--recipe", "none", "--total-timesteps", "200000", "--eval-every", "1000",
                        "--log-every", "16", "--out-dir", str(tmp_path)])
    assert summary["eval_return_deterministic_mean"] >= 400, summary


# --- Jumanji -----------------------------------------------------------------------------------
SNAKE_ID = "jumanji/Snake-v1"


def snake_view(observation) -> np.ndarray:
    """The adapter's documented rule for Snake: grid (12x12x5, already in [0, 1]) and
    step_count / 3999 (its DiscreteArray has 4000 values), flattened; action_mask apart."""
    return np.concatenate([np.asarray(observation.grid).reshape(-1), [observation.step_count / 3999]])


@pytest.mark.slow
def test_jumanji_steps_equal_jumanji_itself_until_the_snake_dies():
    """Same keys, same actions: observations (by the rule), rewards and action masks are
    Jumanji's own; the death (LAST, discount 0, before the time limit) is `terminated`, its
    final observation Jumanji's, and the next observation starts a fresh episode."""
    jumanji = suite("jumanji", "jumanji")
    env, params = suites.make(SNAKE_ID)
    raw = jumanji.make("Snake-v1")
    key = jax.random.key(5)
    obs, state = env.reset(key, params)
    raw_state, timestep = jax.jit(raw.reset)(key)
    np.testing.assert_allclose(obs, snake_view(timestep.observation), rtol=1e-6)
    step, raw_step = jax.jit(env.step), jax.jit(raw.step)
    actions = jax.random.randint(jax.random.key(6), (300,), 0, 4)
    for t in range(300):
        np.testing.assert_array_equal(env.action_mask(state, params), timestep.observation.action_mask)
        obs, state, reward, terminated, truncated, info = step(jax.random.fold_in(key, t), state, actions[t], params)
        raw_state, timestep = raw_step(raw_state, actions[t])
        np.testing.assert_allclose(info["final_observation"], snake_view(timestep.observation), rtol=1e-6)
        assert float(reward) == float(timestep.reward) and bool(terminated) == bool(timestep.last())
        if terminated:
            break
    assert terminated and not truncated and float(timestep.discount) == 0.0
    _, reset_key = jax.random.split(jax.random.fold_in(key, t))
    np.testing.assert_allclose(obs, snake_view(jax.jit(raw.reset)(reset_key)[1].observation), rtol=1e-6)


@pytest.mark.slow
def test_jumanji_snake_time_limit_is_truncated(monkeypatch):
    """Snake ends at its own time_limit with discount 0, as if the snake had died; the
    adapter reports that cut as `truncated`, with the observation reached as the final one.
    (A 5-step limit; the snake circles a 2x2 square, which no wall or body blocks, from a
    start where the square fits.)"""
    import functools

    jumanji = suite("jumanji", "jumanji")
    monkeypatch.setattr(jumanji, "make", functools.partial(jumanji.make, time_limit=5))
    env, params = suites.make(SNAKE_ID)
    assert env.time_limit == 5 and params.max_steps_in_episode == 5
    step = jax.jit(env.step)
    for seed in range(20):
        key = jax.random.key(seed)
        obs, state = env.reset(key, params)
        row, col = np.argwhere(np.asarray(obs[:720]).reshape(12, 12, 5)[..., 1] > 0)[0]  # the head
        square = [0, 1, 2, 3] if row > 0 and col < 11 else [2, 3, 0, 1]  # up right down left, or down left up right
        for t in range(5):
            obs, state, reward, terminated, truncated, info = step(jax.random.fold_in(key, t), state, square[t % 4], params)
            if terminated or truncated:
                break
        if t == 4:
            break
    assert t == 4 and truncated and not terminated, (seed, t)
    assert float(info["final_observation"][-1]) == pytest.approx(5 / 4)  # step_count 5 over its spec's 5 values less one
    assert float(obs[-1]) == 0.0 and int(state.time) == 0  # a fresh episode


@pytest.mark.slow
def test_action_masks_reach_every_categorical_policy():
    """Each algorithm's categorical policy gives a masked action probability 0 and never
    samples it, even where its logits favour it, and `act` takes the mask; Snake's masks
    reach VecEnv as Jumanji gives them."""
    from scanrl.algos import grpo, impala, ppo_rnn

    suite("jumanji", "jumanji")
    env, params = suites.make(SNAKE_ID)
    vec = envs.VecEnv(env, params, num_envs=8)
    obs, state = vec.reset(jax.random.key(0))
    mask = vec.action_mask(state)
    assert vec.masked and mask.shape == (8, 4) and mask.dtype == bool
    mask = jnp.array([[False, True, True, True], [True, False, False, True]] * 4)
    for algo in (ppo, impala, grpo, ppo_rnn):
        config = compose(algo, SNAKE_ID, num_envs=8, num_steps=8)
        params_ = algo.init_params(jax.random.key(1), config, vec)
        # the output layer's bias favours action 0 strongly; the mask must still win
        params_["actor"][-1]["b"] = jnp.array([20.0, 0.0, 0.0, 0.0])
        inputs = jnp.zeros((8, config.gru_size)) if algo is ppo_rnn else obs
        dist = algo.policy(params_, inputs, config.activation, mask)
        probs = dist.probs
        assert float(jnp.where(mask, 0.0, probs).max()) == 0.0 and np.isfinite(dist.entropy()).all()
        samples = dist.sample(seed=jax.random.key(2), sample_shape=(200,))
        assert bool(jnp.take_along_axis(jnp.broadcast_to(mask, (200, 8, 4)), samples[..., None], -1).all())
        unmasked = algo.policy(params_, inputs, config.activation).probs
        assert float(unmasked[:, 0].min()) > 0.99  # without the mask action 0 is almost sure
    # PQN's epsilon-greedy: greedy and random choices alike keep to the valid actions
    from scanrl.algos import pqn

    config = compose(pqn, SNAKE_ID, num_envs=8, num_steps=8).config
    q_params = pqn.init_q_network(jax.random.key(1), config, vec)
    q_params["q"][-1]["b"] = jnp.array([20.0, 0.0, 0.0, 0.0])  # Q favours action 0 strongly
    act = jax.jit(pqn.make_algorithm(config).act, static_argnums=3)
    assert bool((act({"params": q_params}, obs, jax.random.key(0), True) == 0).all())  # unmasked
    for deterministic in (True, False):
        actions = jax.vmap(lambda k: act({"params": q_params}, obs, k, deterministic, mask))(
            jax.random.split(jax.random.key(2), 200))
        assert bool(jnp.take_along_axis(jnp.broadcast_to(mask, (200, 8, 4)), actions[..., None], -1).all())
    explored = jax.vmap(lambda k: pqn.epsilon_greedy(k, jnp.zeros((8, 4)), 1.0, mask))(
        jax.random.split(jax.random.key(3), 200))
    assert bool(jnp.take_along_axis(jnp.broadcast_to(mask, (200, 8, 4)), explored[..., None], -1).all())


# --- Craftax -----------------------------------------------------------------------------------
CRAFTAX_ID = "craftax/Craftax-Classic-Symbolic-v1"


@pytest.fixture(scope="module")
def craftax():
    """(env, params, Craftax's own environment without auto-reset)."""
    craftax_env = suite("craftax.craftax_env", "craftax")
    env, params = suites.make(CRAFTAX_ID)
    return env, params, craftax_env.make_craftax_env_from_name("Craftax-Classic-Symbolic-v1", auto_reset=False)


@pytest.mark.slow
def test_craftax_steps_equal_craftax_itself(craftax):
    """Same keys, same random actions, 150 steps: observations, rewards and ends are
    Craftax's own, and the adapter's step never resets (VecEnv does)."""
    env, params, raw = craftax
    key = jax.random.key(2)
    obs, state = env.reset(key, params)
    raw_obs, raw_state = jax.jit(raw.reset_env)(key, params)
    np.testing.assert_array_equal(obs, raw_obs)
    step, raw_step = jax.jit(env.step), jax.jit(raw.step_env)
    actions = jax.random.randint(jax.random.key(3), (150,), 0, 17)
    for t in range(150):
        k = jax.random.fold_in(key, t)
        obs, state, reward, terminated, truncated, info = step(k, state, actions[t], params)
        raw_obs, raw_state, raw_reward, raw_done, _ = raw_step(k, raw_state, actions[t], params)
        np.testing.assert_array_equal(obs, raw_obs)
        np.testing.assert_array_equal(info["final_observation"], raw_obs)
        assert float(reward) == float(raw_reward) and bool(terminated) == bool(raw_done) and not truncated
        assert int(state.timestep) == t + 1


@pytest.mark.slow
def test_craftax_time_limit_is_truncated_and_vecenv_resets_optimistically(craftax):
    """max_timesteps 5: Craftax's single `done` at the limit is `truncated`, not
    `terminated`, with the observation reached as the final one. VecEnv restarts every
    finished environment from one of ceil(4 / 16) = 1 fresh worlds built that step, and
    leaves a running one as it stepped."""
    env, params, _ = craftax
    params = envsettings.override_params(params, {"max_timesteps": 5})
    vec = envs.VecEnv(env, params, num_envs=4)
    assert env.reset_ratio == 16 and vec.restart_finished == env.restart_finished
    obs, state = vec.reset(jax.random.key(0))
    step = jax.jit(vec.step)
    for t in range(5):
        obs, state, info = step(jax.random.key(10 + t), state, jnp.zeros(4, jnp.int32))  # noop
        assert not info.terminated.any()
        if t < 4:
            assert not info.truncated.any() and (state.env_state.timestep == t + 1).all()
            np.testing.assert_array_equal(obs, info.final_obs)
    assert info.truncated.all() and (state.env_state.timestep == 0).all()
    assert not np.array_equal(obs[0], info.final_obs[0])
    np.testing.assert_array_equal(obs, np.broadcast_to(obs[0], obs.shape))  # one fresh world for all four
    # and a fresh world is a reset's: the same as resetting from the key VecEnv drew
    _, k_reset = jax.random.split(jax.random.key(14))
    k_starts, _ = jax.random.split(k_reset)
    np.testing.assert_array_equal(obs[0], env.reset(jax.random.split(k_starts, 1)[0], params)[0])


def key_data(x):
    """A PRNG key array's raw data, any other array as it is (for comparing env states)."""
    return jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x


@pytest.mark.slow
def test_craftax_fresh_worlds_batched_for_accelerators_equal_the_cpus_one_at_a_time(craftax):
    """The optimistic reset builds its fresh worlds one at a time on a CPU and batched elsewhere
    (`lax.platform_dependent`). Both forms give the same worlds, and the CPU's compiled program
    is the one-at-a-time form's."""
    env, params, _ = craftax
    keys = jax.random.split(jax.random.key(2), 3)
    one_at_a_time, batched = (jax.jit(lambda ks, b=b: env.fresh_worlds(ks, params, batched=b))(keys) for b in (False, True))
    for a, b in zip(jax.tree.leaves(one_at_a_time), jax.tree.leaves(batched)):
        np.testing.assert_array_equal(key_data(a), key_data(b))
    obs, states = jax.vmap(lambda k: env.reset(k, params))(jax.random.split(jax.random.key(0), 64))  # 4 fresh worlds

    def loops(form=None):  # while loops in the CPU's compiled restart, its form chosen by the platform or forced
        with pytest.MonkeyPatch.context() as patch:
            if form is not None:
                patch.setattr(env, "fresh_worlds", lambda keys, p, batched: type(env).fresh_worlds(env, keys, p, form))
            restart = jax.jit(lambda k, o, s: env.restart_finished(k, jnp.arange(64) % 2 == 0, o, s, params))
            return restart.lower(jax.random.key(1), obs, states).compile().as_text().count(" while(")

    assert loops() == loops(form=False) != loops(form=True)


@pytest.mark.slow
def test_craftax_fresh_worlds_stay_one_at_a_time_under_a_seeds_vmap(craftax):
    """Several seeds in one program vmap the optimistic reset. On a CPU each seed's worlds are
    still built one at a time: one more loop, over the seeds, around the loop over worlds (a
    plain vmap would batch the worlds' loop body instead, running the generator's branches as
    selects), and each seed's worlds equal its own call's."""
    env, params, _ = craftax
    keys = jax.random.split(jax.random.key(3), (2, 3))
    build = lambda ks: env.fresh_worlds(ks, params, batched=False)  # noqa: E731
    one, vmapped = jax.jit(build), jax.jit(jax.vmap(build))
    both = vmapped(keys)
    for seed in range(2):
        for a, b in zip(jax.tree.leaves(one(keys[seed])), jax.tree.leaves(both)):
            np.testing.assert_array_equal(key_data(a), key_data(b)[seed])
    loops = lambda f, k: f.lower(k).compile().as_text().count(" while(")  # noqa: E731
    assert loops(vmapped, keys) == loops(one, keys[0]) + 1


# (suite, env, hidden width, env steps, threshold on the last 10% of updates' training return)
SHORT_RUNS = {
    "jumanji": (SNAKE_ID, "128", "650000", 10.0),
    "craftax": (CRAFTAX_ID, "256", "200000", 3.2),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHORT_RUNS))
def test_ppo_learns_snake_and_craftax(tmp_path, name):
    """PPO with 64 environments x 64 steps, a ReLU MLP and learning rate 1e-3 over the file's own
    defaults (`--recipe none`: Craftax's baseline recipe is 1e9 steps), one seed, no
    evaluation (a deterministic Snake policy can circle until the time limit).

    Snake: 128x128, 6.5e5 steps. Reward 1 per fruit; a uniform policy over the valid actions
    eats 6.1 fruit per episode (64 episodes, std 1.9; benchmarks/HISTORY.md, 2026-11-25,
    04:10-05:56). Threshold: the last 10% of updates' training episodes (about a hundred)
    average at least 10 fruit, far above chance. Over 10 seeds at 6.5e5 steps every seed
    reached 13.95 to 19.42, at 8e5 15.7 to 20.8 (benchmarks/RESULTS.md, section 5); at 5e5
    the run reached 8.83 (benchmarks/HISTORY.md, 2026-11-25, 19:38-19:46), so not 5e5.

    Craftax-Classic: 256x256, 2e5 steps. Reward: +1 per achievement unlocked (22 in
    Classic), +-0.1 per health point; a uniform random policy scores 1.6 per episode (64
    episodes, std 1.3; benchmarks/HISTORY.md, 2026-11-25, 04:10-05:56). Threshold: at least
    3.2, twice chance. Over 10 seeds at 2e5 steps every seed reached 3.65 to 3.92
    (benchmarks/RESULTS.md, section 5); at 1.5e5 the lowest was 3.22, at the threshold, so
    not 1.5e5.

    One chunk (`--log-every 0`): chunks of 20 updates would compute 60 for Craftax's 48 (a run's
    last, shorter chunk computes a whole chunk and keeps only its part); the result is the same."""
    env_id, width, steps, threshold = SHORT_RUNS[name]
    suite(name, name)
    summary = ppo.main(["--env", env_id, "--recipe", "none", "--num-envs", "64", "--num-steps", "64", "--learning-rate", "1e-3",
                        "--activation", "relu", "--actor-hidden", width, width, "--critic-hidden", width, width,
                        "--total-timesteps", steps, "--eval-every", "0", "--log-every", "0",
                        "--out-dir", str(tmp_path)])
    assert summary["final_return_mean"] >= threshold, summary


# --- pictures for scanrl-eval --gif ------------------------------------------------------------
PICTURED = {"brax": (BRAX_ID, "brax"), "craftax": (CRAFTAX_ID, "craftax"), "jumanji": (SNAKE_ID, "jumanji"),
            "navix": (GRIDS["navix"], "navix"), "playground": (PLAYGROUND_ID, "mujoco_playground"),
            "xminigrid": (GRIDS["xminigrid"], "xminigrid"),
            "jaxmarl": ("jaxmarl/overcooked_cramped_room", "jaxmarl")}


def mujoco_draws() -> bool:
    """Whether MuJoCo's renderer gets an OpenGL context here, tried in a fresh process (a
    failed context can abort the process that asks for it)."""
    probe = ("import mujoco; m = mujoco.MjModel.from_xml_string(\"<mujoco><worldbody><geom size='.1'/>"
             "</worldbody></mujoco>\"); mujoco.Renderer(m, 8, 8).render()")
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=HANG_GUARD).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PICTURED))
def test_each_suite_draws_a_state_with_its_own_renderer(name):
    """The picture scanrl-eval --gif writes comes from the suite's own renderer (MuJoCo's for
    Brax and Playground; Craftax's pixel renderer; Jumanji's viewer; Navix's and XLand's RGB
    grids; JaxMARL's Overcooked grid, MPE's in the command-line test of tests/test_jaxmarl.py):
    an RGB image that is not blank, fitted into the GIF's frame."""
    from scanrl.common.harness import render

    env_id, module = PICTURED[name]
    suite(module, name)
    env, params = suites.make(env_id)  # the Brax and Playground adapters choose EGL before MuJoCo loads
    if name in ("brax", "playground") and not mujoco_draws():
        pytest.skip("MuJoCo's renderer has no OpenGL context on this machine (it needs EGL or a display)")
    obs, state = env.reset(jax.random.key(0), params)
    state, obs = jax.device_get((state, obs))  # as scanrl-eval passes them
    picture = np.asarray(env.render_rgb(state, params))
    assert picture.ndim == 3 and picture.shape[-1] == 3 and picture.min() < picture.max()
    assert render.can_draw(env, obs.shape)
    image = np.asarray(render.frame(env, params, state, obs, "step 1"))
    drawn = (image[30:] < 250).any(axis=-1).sum()  # pixels below the title that are not the white page
    assert image.shape == (render.HEIGHT, render.WIDTH, 3) and drawn > 1000, drawn
