"""Recipes (common/suites/recipes.py, each suite's table in its adapter's RECIPES): each suite's
published configuration picked by --env, its translation into scanrl's fields, the one CPU scaling rule, flags over recipes, and the
errors of --recipe and --env-options."""

import dataclasses
import subprocess
import sys

import pytest

from scanrl import algos
from scanrl.algos import ppo, ppo_rnn, sac, td3
from scanrl.common.suites import recipes
from scanrl.common.harness import run
from scanrl.common.harness.runconfig import compose

BRAX_ID, PLAYGROUND_ID = "brax/inverted_pendulum", "playground/CartpoleBalance"


def is_pattern(env: str) -> bool:
    return any(c in env for c in "*?[")


EXACT = {key: r for key, r in recipes.every_recipe().items() if not is_pattern(key[1])}
PATTERNS = {key: r for key, r in recipes.every_recipe().items() if is_pattern(key[1])}


def installed(module: str, extra: str):
    return pytest.importorskip(module, reason=f'the {extra} suite is not installed: pip install -e ".[{extra}]"')


def test_every_recipe_builds_a_valid_config_in_both_forms():
    """Each entry, published and scaled, is a Config the algorithm accepts (minibatches divide
    the rollout, values in range). The cpu form divides every count by the one factor and
    keeps the rest: PPO's rollout per env, minibatch count, epochs and number of updates;
    SAC's replay ratio (gradient steps per env step) and minibatch."""
    for (algo, env), recipe in EXACT.items():
        if recipe.trainer == "fast_td3":
            continue  # FastTD3's arguments: the next test
        module = ppo if algo == "ppo" else sac
        forms = {}
        for form in ("published", "cpu"):
            chosen, fields = recipes.lookup(algo, env, form)
            assert chosen == form and fields["recipe"] == form
            # what is not the Config's is a run setting, which the command line applies
            assert set(fields) - {f.name for f in dataclasses.fields(module.Config)} <= set(recipes.RUN_SETTINGS)
            forms[form] = compose(module, env, form)
        pub, cpu = forms["published"], forms["cpu"]
        assert pub.num_envs == recipe.args["num_envs"] and pub.gamma == recipe.args["discounting"]
        assert pub.run.eval_episodes == 128 and cpu.run.eval_episodes == recipes.CPU_EVAL_ENVS
        factor = recipes.cpu_factor(recipe)
        assert cpu.num_envs == pub.num_envs // factor and cpu.total_timesteps == pub.total_timesteps // factor
        if algo == "ppo":
            a = recipe.args
            assert pub.num_steps == a["unroll_length"] * a["batch_size"] * a["num_minibatches"] // a["num_envs"]
            assert (cpu.num_steps, cpu.num_minibatches, cpu.num_epochs) == (pub.num_steps, pub.num_minibatches,
                                                                            pub.num_epochs)
            assert cpu.num_updates == pub.num_updates and cpu.action_dist == "tanh_normal"
            assert cpu.reward_scale == a["reward_scaling"] and cpu.adam_eps == 1e-8 and not cpu.normalize_reward
            # Playground's recipes update as Brax's trainer does (whole unrolls, GAE in every minibatch, fresh
            # observation statistics, lecun-uniform layers); the notebook's keep scanrl's own update
            brax_update = env.startswith("playground/")
            for form in (pub, cpu):
                assert form.unroll_length == (a["unroll_length"] if brax_update else 0)
                assert form.fresh_obs_stats == brax_update and form.init == ("lecun_uniform" if brax_update else "orthogonal")
        else:
            assert cpu.updates_per_step / cpu.num_envs == pub.updates_per_step / pub.num_envs
            assert cpu.batch_size == pub.batch_size and cpu.learning_starts == pub.learning_starts // factor
            assert cpu.target_entropy_scale == 0.5  # Brax's SAC aims at -A/2
        assert cpu.learning_rate == pub.learning_rate and cpu.actor_hidden == pub.actor_hidden


def test_every_suite_recipe_builds_a_valid_config_in_both_forms():
    """The baselines' own fields (Craftax, Navix, XLand-MiniGrid) are the Config's, published and
    scaled: the cpu form divides the environments and the budget by CPU_FACTOR and keeps the
    rollout, minibatches, epochs and number of updates, where a minibatch is a set of whole
    environments (recurrent PQN on MPE) at most one a minibatch; Navix's 16 environments stay as
    published."""
    for (algo, pattern), recipe in PATTERNS.items():
        assert recipe.trainer == "fields"
        env = pattern.replace("*", "-Classic" if pattern.startswith("craftax/") else "X")
        forms = {form: compose(algos.get(algo), env, form) for form in ("published", "cpu")}
        pub, cpu = forms["published"], forms["cpu"]
        assert {k: getattr(pub, k) for k in recipe.args} == recipe.args and pub.run.recipe == "published"
        factor = 1 if recipe.args["num_envs"] <= recipes.CPU_SIZED else recipes.CPU_FACTOR
        assert recipes.cpu_factor(recipe) == factor and cpu.run.recipe == "cpu"
        assert cpu.num_envs == pub.num_envs // factor and cpu.total_timesteps == pub.total_timesteps // factor
        minibatches = pub.num_minibatches
        if algo in recipes.SEQUENCE_MINIBATCHES:
            minibatches = min(minibatches, cpu.num_envs)
        assert (cpu.num_steps, cpu.num_minibatches, cpu.num_epochs, cpu.num_updates) == (
            pub.num_steps, minibatches, pub.num_epochs, pub.num_updates)
    assert recipes.cpu_factor(recipes.recipe_for("ppo", "navix/Navix-DoorKey-5x5-v0")) == 1


@pytest.mark.slow
def test_recipe_envs_exist_in_their_suites():
    """Every exact entry names an env of its suite, and every pattern matches at least one."""
    installed("brax.envs", "brax")
    installed("mujoco_playground", "playground")
    installed("jaxmarl", "jaxmarl")
    from scanrl.common.suites import brax, craftax, jaxmarl, navix, playground, xminigrid

    names = {"brax": set(brax.NAMES()), "playground": set(playground.NAMES()), "craftax": set(craftax.NAMES()),
             "navix": set(navix.NAMES()), "xminigrid": set(xminigrid.NAMES()), "jaxmarl": set(jaxmarl.NAMES())}
    for _, env in EXACT:
        suite, name = env.split("/")
        assert name in names[suite], env
    for algo, pattern in PATTERNS:
        suite = pattern.split("/")[0]
        matched = [n for n in names[suite] if recipes.recipe_for(algo, f"{suite}/{n}") is PATTERNS[(algo, pattern)]]
        assert matched, pattern
    # Craftax's baselines are for its symbolic observations; its pixel envs get none
    assert recipes.recipe_for("ppo", "craftax/Craftax-Symbolic-v1") is not None
    assert recipes.recipe_for("ppo", "craftax/Craftax-Classic-Pixels-v1") is None


# (algorithm, env) -> (source's words, published num_envs, a field of that baseline's own)
SUITE_PICKS = {
    ("ppo", "craftax/Craftax-Classic-Symbolic-v1"): ("Craftax_Baselines", 1024, ("gae_lambda", 0.8)),
    ("ppo_rnn", "craftax/Craftax-Symbolic-v1"): ("Craftax_Baselines", 1024, ("gru_size", 512)),
    ("ppo", "navix/Navix-DoorKey-5x5-v0"): ("navix", 16, ("num_epochs", 1)),
    ("ppo_rnn", "xminigrid/MiniGrid-DoorKey-5x5"): ("xland-minigrid", 16384, ("gru_size", 1024)),
}


@pytest.mark.parametrize("algo, env", sorted(SUITE_PICKS))
def test_the_suite_recipe_follows_env_and_a_flag_wins(algo, env):
    """--env picks its suite's baseline (from the command line, as a user meets it); a flag
    overrides one value and keeps the rest; --recipe none gives the file's own defaults; the
    other algorithm (no baseline for it there) is unchanged by --recipe."""
    module = {"ppo": ppo, "ppo_rnn": ppo_rnn}[algo]
    parse = lambda argv: run.parse_config(module, argv)  # noqa: E731
    words, num_envs, (field, value) = SUITE_PICKS[(algo, env)]
    assert words in recipes.source(algo, env)
    published = parse(["--env", env, "--recipe", "published"])
    assert published.num_envs == num_envs and getattr(published, field) == value
    flagged = parse(["--env", env, "--recipe", "published", "--num-envs", "64"])
    assert flagged.num_envs == 64 and flagged.replace(num_envs=num_envs) == published
    none = parse(["--env", env, "--recipe", "none"])
    assert none.config == module.default_config(env, recipe="none") and getattr(none, field) != value
    other = ppo_rnn if algo == "ppo" else ppo
    if recipes.recipe_for(other.__name__.rsplit(".", 1)[-1], env) is None:
        assert other.default_config(env, recipe="published") == other.default_config(env, recipe="none")


def test_the_recipe_follows_env_and_a_flag_wins():
    """--env picks the suite's published recipe (Brax's notebook here); a flag overrides one
    value and keeps the rest; --recipe none gives the algorithm's own continuous preset; an
    env without a recipe (CartPole) takes the file's own defaults with --recipe auto or none."""
    installed("brax.envs", "brax")
    parse = lambda argv: run.parse_config(ppo, argv)  # noqa: E731
    published = parse(["--env", BRAX_ID, "--recipe", "published"])
    a = recipes.recipe_for("ppo", BRAX_ID).args
    assert (published.num_envs, published.num_steps, published.gamma, published.reward_scale) == (
        a["num_envs"], a["unroll_length"] * a["batch_size"] * a["num_minibatches"] // a["num_envs"], 0.97, 10.0)
    assert published.run.env_options == ("backend", "positional") and published.run.recipe == "published"
    flagged = parse(["--env", BRAX_ID, "--recipe", "published", "--num-envs", "256", "--env-options", "backend",
                     "spring"])
    assert flagged.num_envs == 256 and flagged.run.env_options == ("backend", "spring")
    assert flagged.replace(num_envs=published.num_envs, env_options=published.run.env_options) == published
    cpu = parse(["--env", BRAX_ID, "--recipe", "cpu"])
    assert cpu.num_envs == a["num_envs"] // 32 and cpu.num_steps == published.num_steps
    none = parse(["--env", BRAX_ID, "--recipe", "none"])
    assert none.config == ppo.default_config(BRAX_ID, recipe="none") and none.run.recipe == "none"
    assert (none.num_envs, none.gamma, none.action_dist) == (ppo.PRESETS["continuous"]["num_envs"], 0.95, "gaussian")
    for choice in ("auto", "none"):
        job = parse(["--env", "CartPole-v1", "--recipe", choice])
        assert job.config == ppo.default_config("CartPole-v1", recipe="none")
        assert job.run.recipe == "none"


@pytest.mark.parametrize("algo, env, choice, applied", [
    ("ppo", "navix/Navix-DoorKey-5x5-v0", "published", "published"),
    ("grpo", "Catch-bsuite", "auto", "none"),  # an env id's preset, no recipe
])
def test_a_command_line_looks_its_recipe_up_once_and_builds_default_configs_config(
        monkeypatch, algo, env, choice, applied):
    """A parse of the command line looks the recipe up once, for its hyperparameters and its
    run settings alike, and its Config is the algorithm's own default_config(env)."""
    module, real, looked_up = algos.get(algo), recipes.recipe_for, []
    monkeypatch.setattr(recipes, "recipe_for", lambda *args: looked_up.append(args) or real(*args))
    job = run.parse_config(module, ["--env", env, "--recipe", choice])
    assert looked_up == [(algo, env)]
    assert job.config == module.default_config(env, recipe=choice) and job.run.recipe == applied


@pytest.mark.parametrize("algo", algos.names())
def test_a_chosen_recipe_the_env_has_none_of_is_refused(cli_error, algo):
    """--recipe published, cpu or fast where it gives the algorithm nothing for the env (SAC's
    fast on Pendulum, every algorithm's cpu on its default env) is one sentence naming the flag,
    its value and the suites that have one, exit code 2, before any run folder; a misspelt env
    gets the env's own sentence; auto and none take the file's own defaults there."""
    module = algos.get(algo)
    env = module.Config.__dataclass_fields__["env"].default
    where = {"grpo": "", "impala": "",
             "ppo": " (only for some brax, craftax, jaxmarl and playground envs and every navix env)",
             "ppo_rnn": " (only for some craftax and jaxmarl envs and every xminigrid env)",
             "pqn": " (only for some craftax and jaxmarl envs)",
             "pqn_rnn": " (only for some jaxmarl envs)",
             "sac": " (only for some brax and playground envs)",
             "td3": " (only for some brax and playground envs)"}
    fast = ["fast", "fast-cpu"] if algo in recipes.FIELDS_FOR_FAST else []
    for choice in ["cpu", "published", *fast]:
        code, err = cli_error(module.main, ["--env", env, "--recipe", choice])
        what = f"FastTD3 publishes no arguments for {env}" if choice.startswith("fast") else \
            f"no suite publishes a recipe for {algo} on {env}"
        advice = f"leave --recipe out for {algo}'s own defaults"
        assert code == 2 and err == f"error: --recipe {choice}: {what}{where[algo]}; {advice}.", err
    code, err = cli_error(module.main, ["--env", env.replace("-v", "v"), "--recipe", "cpu"])
    assert code == 2 and f"--env '{env.replace('-v', 'v')}' is not a gymnax environment" in err, err
    for choice in ("auto", "none"):
        assert run.parse_config(module, ["--env", env, "--recipe", choice]).run.recipe == "none"


def test_an_env_ids_own_preset_goes_over_its_kinds_and_under_the_recipe_and_the_flags():
    """default_config layers: the file's defaults, the preset of the env's kind, the preset of
    the env id itself (GRPO's Catch-bsuite), the suite's recipe, then the flags."""
    presets = {"continuous": {"gamma": 0.9, "num_steps": 8}, "Pendulum-v1": {"num_steps": 16, "ent_coef": 0.5}}
    assert recipes.config_fields("grpo", "Pendulum-v1", "auto", presets) == {"gamma": 0.9, "num_steps": 16,
                                                                            "ent_coef": 0.5}
    assert recipes.config_fields("grpo", "MountainCarContinuous-v0", "auto", presets) == presets["continuous"]
    grpo = algos.get("grpo")
    assert grpo.default_config("Catch-bsuite").num_steps == 16 == run.parse_config(grpo, ["--env", "Catch-bsuite"]).num_steps
    assert grpo.default_config("CartPole-v1").num_steps == 512
    assert run.parse_config(grpo, ["--env", "Catch-bsuite", "--num-steps", "32"]).num_steps == 32


def test_auto_means_published_with_an_accelerator_and_cpu_without(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert recipes.resolve("auto") == "cpu"
    monkeypatch.setenv("JAX_PLATFORMS", "cuda,cpu")
    assert recipes.resolve("auto") == "published"
    assert (recipes.resolve("fast"), recipes.resolve("fast-cpu")) == ("fast-published", "fast-cpu")
    choices = "auto, published, cpu, none, fast, fast-published, fast-cpu"
    with pytest.raises(ValueError, match=f"--recipe 'gpu' is not one of {choices}"):
        recipes.resolve("gpu")


def test_bad_recipes_and_env_options_are_one_sentence(cli_error):
    installed("brax.envs", "brax")
    for args, message in [
        (["--recipe", "gpu"], "--recipe 'gpu' is not one of auto, published, cpu, none, fast, fast-published, "
                              "fast-cpu."),
        (["--recipe", "fast"], "--recipe fast is FastTD3's arguments, for td3 and sac, and ppo has none; use --recipe "
                               "auto."),
        (["--env-options", "backend"], "--env-options takes KEY VALUE pairs, got backend."),
        (["--env-options", "backend", "positional"], "--env-options backend positional: gymnax environments take "
                                                     "no options; Brax, MuJoCo Playground and JaxMARL do."),
        (["--env", BRAX_ID, "--env-options", "backend", "warp"], "--env-options backend warp: Brax's backends are "
                                                                 "generalized, positional, spring, mjx."),
        (["--env", BRAX_ID, "--env-options", "physics", "spring"], "--env-options physics: Brax environments take "
                                                                   "backend."),
    ]:
        code, err = cli_error(ppo.main, args)
        assert code == 2 and message in err and err.count("error:") == 1, (args, err)


@pytest.mark.slow
def test_playground_options_are_its_config_overrides():
    installed("mujoco_playground", "playground")
    from scanrl.common.suites import playground

    assert playground.overrides("CartpoleBalance", {"ctrl_dt": "0.02", "episode_length": "500"}) == {
        "ctrl_dt": 0.02, "episode_length": 500}
    env, params = playground.make("CartpoleBalance", {"episode_length": "500"})
    assert params.max_steps_in_episode == 500
    with pytest.raises(ValueError, match="--env-options gravity: playground/CartpoleBalance's config has no such"):
        playground.overrides("CartpoleBalance", {"gravity": "1"})
    with pytest.raises(ValueError, match="--env-options episode_length long: .* give a value of that kind"):
        playground.overrides("CartpoleBalance", {"episode_length": "long"})


@pytest.mark.slow
def test_each_suite_keeps_its_recipes_and_looking_one_up_imports_no_suite():
    """A suite's recipes are its adapter's RECIPES table; finding one loads that adapter module
    only, never the suite's package, and a gymnax env loads no adapter at all."""
    code = """
import sys
from scanrl.common.suites import recipes
assert recipes.recipe_for("ppo", "CartPole-v1") is None
adapters = [m for m in sys.modules if m.startswith("scanrl.common.suites.") and m != recipes.__name__]
assert not adapters, adapters
from scanrl.common.suites import brax, craftax, navix, playground, xminigrid
assert recipes.recipe_for("ppo", "brax/ant") is brax.RECIPES[("ppo", "ant")]
assert recipes.recipe_for("sac", "playground/CheetahRun") is playground.RECIPES[("sac", "CheetahRun")]
assert recipes.recipe_for("ppo", "craftax/Craftax-Symbolic-v1") is craftax.RECIPES[("ppo", "Craftax*-Symbolic-v1")]
assert recipes.recipe_for("ppo", "navix/Navix-Empty-5x5-v0") is navix.RECIPES[("ppo", "*")]
assert recipes.recipe_for("ppo_rnn", "xminigrid/MiniGrid-Empty-5x5") is xminigrid.RECIPES[("ppo_rnn", "*")]
assert recipes.recipe_for("impala", "brax/ant") is None
heavy = [m for m in sys.modules if m.split(".")[0] in ("brax", "mujoco_playground", "craftax", "navix", "xminigrid")]
assert not heavy, heavy
"""
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_locomotion_recipes_are_playgrounds_own():
    """Every Playground locomotion task's PPO recipe holds `locomotion_params.brax_ppo_config`'s
    values (read from Playground itself here), and its cached starts are drawn anew as often
    as Brax's trainer re-draws them with that config's evaluations and resets per evaluation."""
    installed("mujoco_playground", "playground")
    from mujoco_playground.config import locomotion_params
    from mujoco_playground._src import locomotion
    from scanrl.common.suites import playground

    assert set(playground.LOCOMOTION) == set(locomotion.ALL_ENVS)
    for task in locomotion.ALL_ENVS:
        published = locomotion_params.brax_ppo_config(task)
        args = recipes.recipe_for("ppo", f"playground/{task}").args
        for key in ("num_timesteps", "num_envs", "unroll_length", "batch_size", "num_minibatches",
                    "num_updates_per_batch", "discounting", "learning_rate", "entropy_cost", "reward_scaling",
                    "max_grad_norm"):
            assert args[key] == published[key], (task, key)
        assert args["clipping_epsilon"] == published.get("clipping_epsilon", 0.3), task  # 0.3: Brax's default
        network = published.network_factory
        assert args["network_factory"] == dict(policy_hidden_layer_sizes=tuple(network.policy_hidden_layer_sizes),
                                               value_hidden_layer_sizes=tuple(network.value_hidden_layer_sizes),
                                               value_obs_key=network.value_obs_key), task
        assert network.policy_obs_key == "state"
        config = compose(ppo, f"playground/{task}", "published")
        assert config.critic_obs == network.value_obs_key and config.clip_eps == args["clipping_epsilon"]
        assert config.actor_hidden == tuple(network.policy_hidden_layer_sizes) and config.max_grad_norm == 1.0
        # Brax's trainer: a reset every ceil(T / ((evals - 1) * max(resets, 1) * S)) iterations of S env steps
        per_iteration = published.unroll_length * published.batch_size * published.num_minibatches
        iterations = -(-published.num_timesteps // ((published.num_evals - 1) * max(published.num_resets_per_eval, 1)
                                                    * per_iteration))
        assert playground.steps_between_resets(*playground.LOCOMOTION[task][:3]) == (
            iterations * per_iteration // published.num_envs), task


@pytest.mark.slow
def test_playground_sac_recipes_layer_norm_their_q_networks():
    """Playground's DM Control SAC config sets q_network_layer_norm; its recipe turns on
    --critic-layer-norm, and Brax's notebook SAC recipes (no layer norm there) leave it off."""
    installed("mujoco_playground", "playground")
    from mujoco_playground.config import dm_control_suite_params

    for task in ("CheetahRun", "CartpoleSwingup"):
        published = dm_control_suite_params.brax_sac_config(task).network_factory.q_network_layer_norm
        assert compose(sac, f"playground/{task}", "cpu").critic_layer_norm is published is True
    assert compose(sac, "brax/hopper", "cpu").critic_layer_norm is False


def test_td3_recipes_are_fasttd3_s_published_arguments_and_keep_the_replay_ratio_on_a_cpu():
    """Every Playground task's TD3 recipe is FastTD3's MuJoCoPlaygroundArgs with the task's class
    (DM Control: CheetahRunArgs), its vector-step counts multiplied by the environments; the cpu
    form divides the environments and the batch by CPU_FACTOR and keeps the vector steps, the
    rows per environment and the gradient steps per vector step, so the replay ratio too."""
    from scanrl.common.suites import fasttd3_args, playground

    tasks = {env.split("/", 1)[1] for (algo, env) in EXACT if algo == "td3" and env.startswith("playground/")}
    assert tasks == set(playground.DMC_TASKS) | set(playground.LOCOMOTION)
    for task in ("CheetahRun", "WalkerWalk", "T1JoystickFlatTerrain", "Go1Getup", "SpotGetup"):
        env = f"playground/{task}"
        assert recipes.source("td3", env) == "younggyoseo/FastTD3 fast_td3/hyperparams.py"
        pub, cpu = compose(td3, env, "published"), compose(td3, env, "cpu")
        assert (pub.num_envs, pub.batch_size, pub.gamma, pub.tau, pub.weight_decay) == (1024, 32768, 0.97, 0.1, 0.1)
        assert (pub.num_atoms, pub.policy_delay, pub.learning_rate) == (101, 2, 3e-4) and pub.normalize_obs
        assert pub.critic_hidden == (1024, 512, 256) and pub.actor_hidden == (512, 256, 128)
        assert pub.buffer_rows == 10240 and pub.learning_starts == 10 * 1024 and pub.run.eval_episodes == 1024
        dmc, go1 = task in playground.DMC_TASKS, task.startswith("Go1")
        vector_steps = {"T1JoystickFlatTerrain": 100_000, "Go1Getup": 50_000}.get(task, 1_500_000)
        assert pub.total_timesteps == vector_steps * 1024
        assert (pub.n_step, pub.v_min, pub.v_max) == ((3, -500.0, 500.0) if dmc else (1, -10.0, 10.0))
        assert (pub.exploration_noise_min, pub.exploration_noise_max, pub.target_noise) == (
            (0.1, 0.4, 0.1) if dmc else (0.2, 0.8, 0.2) if go1 else (0.001, 0.4, 0.001))
        assert pub.updates_per_step == (8 if go1 else 2)
        factor = recipes.CPU_FACTOR
        assert (cpu.num_envs, cpu.batch_size) == (pub.num_envs // factor, pub.batch_size // factor)
        assert cpu.total_timesteps // cpu.num_envs == pub.total_timesteps // pub.num_envs  # the vector steps
        assert cpu.buffer_rows == pub.buffer_rows and cpu.updates_per_step == pub.updates_per_step
        assert cpu.updates_per_step * cpu.batch_size / cpu.num_envs == pub.updates_per_step * pub.batch_size / pub.num_envs
        assert cpu.run.eval_episodes == recipes.CPU_EVAL_ENVS and cpu.n_step == pub.n_step
    with pytest.raises(ValueError, match="one learning rate"):
        fasttd3_args.td3_fields(dict(fasttd3_args.PLAYGROUND, actor_learning_rate=1e-4))


def test_brax_tasks_take_fasttd3_s_dm_control_arguments_on_the_notebook_s_backend():
    """FastTD3 publishes nothing for Brax: TD3 on a Brax task takes its DM Control arguments
    (CheetahRunArgs), as Playground's DM Control tasks do, on the backend of Brax's notebook
    recipes, in both forms; humanoidstandup, whose returns lie beyond their support, takes
    none; `--recipe fast` gives SAC the same arguments (`sac_fields`) on Brax's tasks."""
    from scanrl.common.suites import brax, fasttd3_args

    assert {env for (algo, env) in EXACT if algo == "td3" and env.startswith("brax/")} == {
        f"brax/{t}" for t in brax.FAST_TD3_TASKS} and "humanoidstandup" not in brax.FAST_TD3_TASKS
    for form in ("published", "cpu"):
        cheetah = compose(td3, "playground/CheetahRun", form)
        for task in ("ant", "humanoid", "inverted_pendulum"):
            job = compose(td3, f"brax/{task}", form)
            assert job.config == dataclasses.replace(cheetah.config, env=f"brax/{task}")
            assert job.run.env_options == ("backend", "positional") and job.run.recipe == form
            assert (job.n_step, job.v_min, job.v_max, job.gamma) == (3, -500.0, 500.0, 0.97)
            assert "FastTD3" in recipes.source("td3", f"brax/{task}")
        standup = compose(td3, "brax/humanoidstandup", form)
        assert standup.run.recipe == "none" and standup.config == compose(td3, "brax/humanoidstandup", "none").config
        fast = compose(sac, "brax/hopper", f"fast-{form}")
        expected = fasttd3_args.sac_fields(recipes.trainer_args(recipes.recipe_for("td3", "brax/hopper"), form))
        assert {k: getattr(fast.run if k in recipes.RUN_SETTINGS else fast.config, k) for k in expected} == expected
        assert fast.run.env_options == ("backend", "positional") and fast.run.recipe == f"fast-{form}"


def test_fasttd3_s_arguments_on_sac_keep_everything_but_td3_s_own_parts():
    """`sac_fields` (FastSAC's move, benchmarks/equal_wall.py's SAC learner) gives SAC every field
    TD3's translation gives, with the same values, except the five TD3 has alone (its delay and
    its two noises); they make a valid SAC Config with the C51 critic, n-step returns and replay
    ratio of the recipe, in both forms."""
    from scanrl.common.suites import fasttd3_args

    for task in ("CheetahRun", "T1JoystickFlatTerrain"):
        recipe = recipes.recipe_for("td3", f"playground/{task}")
        for form in ("published", "cpu"):
            args = recipes.trainer_args(recipe, form)
            td3_f, sac_f = fasttd3_args.td3_fields(args), fasttd3_args.sac_fields(args)
            assert set(td3_f) - set(sac_f) == set(fasttd3_args.TD3_ONLY) and len(fasttd3_args.TD3_ONLY) == 5
            assert all(sac_f[k] == td3_f[k] for k in sac_f)
            assert set(fasttd3_args.TD3_ONLY) <= {f.name for f in dataclasses.fields(td3.Config)}
            config = sac.Config(env=f"playground/{task}", **{k: v for k, v in sac_f.items() if k != "eval_episodes"})
            assert (config.num_atoms, config.n_step, config.batch_size) == (101, args["num_steps"], args["batch_size"])
            assert config.updates_per_step * config.batch_size / config.num_envs == (
                args["num_updates"] * args["batch_size"] / args["num_envs"])


def test_recipe_fast_gives_sac_fasttd3_s_arguments_and_td3_its_own_recipe(monkeypatch):
    """`--recipe fast`: SAC on a Playground task takes FastTD3's arguments (`sac_fields`) in place
    of Playground's SAC recipe, recorded as fast-published or fast-cpu (what a resume looks up
    again); TD3 gets what its own recipe gives; an env without FastTD3's arguments gets no
    recipe; `fast` resolves as `auto` does; the compile line names FastTD3 as the source."""
    from scanrl.common.suites import fasttd3_args

    env = "playground/CheetahRun"
    recipe = recipes.recipe_for("td3", env)
    for form in ("published", "cpu"):
        fast, plain = compose(sac, env, f"fast-{form}"), compose(sac, env, form)
        expected = fasttd3_args.sac_fields(recipes.trainer_args(recipe, form))
        assert {k: getattr(fast.run if k in recipes.RUN_SETTINGS else fast.config, k) for k in expected} == expected
        assert (fast.run.recipe, plain.run.recipe) == (f"fast-{form}", form)
        assert plain.num_atoms == 0 and plain.critic_layer_norm  # Playground's own SAC recipe
        assert compose(td3, env, f"fast-{form}").config == compose(td3, env, form).config
        assert recipes.source("sac", env, f"fast-{form}") == fasttd3_args.SOURCE != recipes.source("sac", env, form)
    none = compose(sac, "Pendulum-v1", "fast-cpu")
    assert none.run.recipe == "none" and none.config == compose(sac, "Pendulum-v1", "none").config
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert run.parse_config(sac, ["--env", env, "--recipe", "fast"]) == compose(sac, env, "fast-cpu")
    monkeypatch.setenv("JAX_PLATFORMS", "cuda,cpu")
    assert compose(sac, env, "fast") == compose(sac, env, "fast-published")
    with pytest.raises(ValueError, match="--recipe fast is FastTD3's arguments, for td3 and sac, and ppo has none"):
        compose(ppo, env, "fast")
