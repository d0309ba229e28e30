"""Recipes (common/recipes.py): each suite's published configuration picked by --env, its
translation into scanrl's fields, the one CPU scaling rule, flags over recipes, and the
errors of --recipe and --env-options."""

import dataclasses

import pytest

from scanrl.algos import ppo, sac
from scanrl.common import recipes
from scanrl.common.harness import run

BRAX_ID, PLAYGROUND_ID = "brax/inverted_pendulum", "playground/CartpoleBalance"


def installed(module: str, extra: str):
    return pytest.importorskip(module, reason=f'the {extra} suite is not installed: pip install -e ".[{extra}]"')


def test_every_recipe_builds_a_valid_config_in_both_forms():
    """Each entry, published and scaled, is a Config the algorithm accepts (minibatches divide
    the rollout, values in range). The cpu form divides every count by the one factor and
    keeps the rest: PPO's rollout per env, minibatch count, epochs and number of updates;
    SAC's replay ratio (gradient steps per env step) and minibatch."""
    for (algo, env), recipe in recipes.RECIPES.items():
        cls = ppo.Config if algo == "ppo" else sac.Config
        forms = {}
        for form in ("published", "cpu"):
            chosen, fields = recipes.lookup(algo, env, form)
            assert chosen == form and fields["recipe"] == form
            forms[form] = run.build_config(cls, {**fields, "env": env})
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


def test_recipe_envs_exist_in_their_suites():
    installed("brax.envs", "brax")
    installed("mujoco_playground", "playground")
    from scanrl.common.suites import brax, playground

    names = {"brax": set(brax.NAMES()), "playground": set(playground.NAMES())}
    for _, env in recipes.RECIPES:
        suite, name = env.split("/")
        assert name in names[suite], env


def test_the_recipe_follows_env_and_a_flag_wins():
    """--env picks the suite's published recipe (Brax's notebook here); a flag overrides one
    value and keeps the rest; --recipe none gives the algorithm's own continuous preset; an
    env without a recipe (CartPole) is unchanged whatever --recipe says."""
    installed("brax.envs", "brax")
    parse = lambda argv: run.parse_config(ppo.Config, ppo.default_config, ppo.__doc__, argv)  # noqa: E731
    published = parse(["--env", BRAX_ID, "--recipe", "published"])
    a = recipes.RECIPES[("ppo", BRAX_ID)].args
    assert (published.num_envs, published.num_steps, published.gamma, published.reward_scale) == (
        a["num_envs"], a["unroll_length"] * a["batch_size"] * a["num_minibatches"] // a["num_envs"], 0.97, 10.0)
    assert published.run.env_options == ("backend", "positional") and published.run.recipe == "published"
    flagged = parse(["--env", BRAX_ID, "--recipe", "published", "--num-envs", "256", "--env-options", "backend",
                     "spring"])
    assert flagged.num_envs == 256 and flagged.run.env_options == ("backend", "spring")
    assert dataclasses.replace(flagged, num_envs=published.num_envs, run=published.run) == published
    cpu = parse(["--env", BRAX_ID, "--recipe", "cpu"])
    assert cpu.num_envs == a["num_envs"] // 32 and cpu.num_steps == published.num_steps
    none = parse(["--env", BRAX_ID, "--recipe", "none"])
    assert none == ppo.default_config(BRAX_ID, recipe="none") and none.run.recipe == "none"
    assert (none.num_envs, none.gamma, none.action_dist) == (ppo.PRESETS["continuous"]["num_envs"], 0.95, "gaussian")
    for choice in ("published", "cpu", "none"):
        assert parse(["--env", "CartPole-v1", "--recipe", choice]) == ppo.default_config("CartPole-v1", recipe="none")


def test_auto_means_published_with_an_accelerator_and_cpu_without(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert recipes.resolve("auto") == "cpu"
    monkeypatch.setenv("JAX_PLATFORMS", "cuda,cpu")
    assert recipes.resolve("auto") == "published"
    with pytest.raises(ValueError, match="--recipe 'gpu' is not one of auto, published, cpu, none"):
        recipes.resolve("gpu")


def test_bad_recipes_and_env_options_are_one_sentence(cli_error):
    installed("brax.envs", "brax")
    for args, message in [
        (["--recipe", "gpu"], "--recipe 'gpu' is not one of auto, published, cpu, none."),
        (["--env-options", "backend"], "--env-options takes KEY VALUE pairs, got backend."),
        (["--env-options", "backend", "positional"], "--env-options backend positional: gymnax environments take "
                                                     "no options; Brax and MuJoCo Playground do."),
        (["--env", BRAX_ID, "--env-options", "backend", "warp"], "--env-options backend warp: Brax's backends are "
                                                                 "generalized, positional, spring, mjx."),
        (["--env", BRAX_ID, "--env-options", "physics", "spring"], "--env-options physics: Brax environments take "
                                                                   "backend."),
    ]:
        code, err = cli_error(ppo.main, args)
        assert code == 2 and message in err and err.count("error:") == 1, (args, err)


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
