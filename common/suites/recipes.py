"""Recipes: the suites' own published training configurations, chosen by `--env`.

One table per suite, each entry a published configuration translated into an algorithm's
Config fields, with its source. `default_config(env)` in an algorithm file applies the
entry's hyperparameters for (algorithm, env) over the file's own defaults and presets; the
command line adds its run settings (RUN_SETTINGS: evaluation episodes, env options). A flag,
or a value in `--config FILE`, still wins over the recipe. `--recipe` chooses the form:

- `published`: the values as the source publishes them (thousands of environments: a GPU).
- `cpu`: the same, scaled for a CPU in one way: every count of environments, samples and
  steps is divided by CPU_FACTOR (32), and everything else is kept. A recipe published for
  a CPU's sizes (Navix's 16 environments) is kept as it is. For PPO: `num_envs`,
  Brax's `batch_size` and `total_timesteps` / 32, so `num_steps` (the rollout per
  environment), the minibatch count, the epochs and the number of updates stay as
  published, and each minibatch holds 32x fewer transitions. Where a minibatch is a set of
  whole environments' sequences (ppo_rnn, pqn_rnn: SEQUENCE_MINIBATCHES) the count is at
  most the scaled environments, one environment a minibatch. For SAC: `num_envs`,
  `learning_starts`, `total_timesteps` and the gradient steps per vector step divided by
  32, or by the gradient steps per vector step where those are fewer, so the replay ratio
  (gradient steps per env step) and the minibatch stay as published. Brax's 128 evaluation
  episodes become 16.
- `auto` (the default): `published` where JAX has a GPU or TPU plugin installed, else `cpu`.
- `none`: no recipe; the algorithm file's own defaults and presets.
- `fast` (`fast-published`, `fast-cpu`; `fast` resolves as `auto` does): for td3.py and
  sac.py, FastTD3's published arguments for the env (its TD3 recipe, where its suite has one),
  translated into the algorithm's fields: TD3's own recipe, or SAC with FastTD3's envs,
  batch, replay ratio, n-step returns, C51 critic and widths (FastSAC's move, common/suites/
  fasttd3_args.py `sac_fields`) in place of the suite's own SAC recipe.

How Brax's trainer's sizes map to scanrl's: Brax collects `batch_size * num_minibatches`
unrolls of `unroll_length` steps per iteration over `num_envs` environments, so scanrl's
`num_steps = unroll_length * batch_size * num_minibatches / num_envs`, with the same
`num_minibatches` and epochs (`num_updates_per_batch`).

The tables are the suites' own: each adapter in common/suites/ that has recipes keeps them in
its `RECIPES`, keyed by (algorithm, env name or an fnmatch pattern of names), with each
value's source. A recipe for Brax's trainers holds the trainer's own arguments (`ppo_args`,
`sac_args`), translated by common/suites/brax_args.py; the grid worlds and Craftax publish
PureJaxRL-style scripts, whose settings are scanrl's own fields under other names, so their
recipes (`trainer="fields"`) hold the fields directly. An exact name wins over a pattern.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
from typing import NamedTuple

from scanrl.common.suites import (SUITES, adapter_hook, check_env_id, import_adapter, preset_name,
                                  suite_of)

CPU_FACTOR = 32
# the algorithms whose minibatch is a set of whole environments' sequences (the cpu form's rule)
SEQUENCE_MINIBATCHES = ("ppo_rnn", "pqn_rnn")
FAST = "fast"  # FastTD3's arguments, for the algorithms that FIELDS_FOR_FAST translates them into
CHOICES = ("auto", "published", "cpu", "none", FAST, f"{FAST}-published", f"{FAST}-cpu")
FIELDS_FOR_FAST = {"td3": "fast_td3", "sac": "fast_sac"}  # algorithm -> its translation of them

class Recipe(NamedTuple):
    source: str  # where the values are published
    # "ppo" or "sac": which of Brax's trainers `args` are for; "fast_td3": FastTD3's arguments;
    # "fields": `args` are scanrl's Config fields already (a PureJaxRL-style script's settings,
    # translated name by name)
    trainer: str
    args: dict  # the trainer's own arguments as published (its names: num_envs, unroll_length, ...)
    fields: dict  # scanrl Config fields beyond what `args` give (env_options)


CPU_EVAL_ENVS = 16  # Brax's 128 one-episode evaluations are a GPU's; 16 on a CPU
CPU_SIZED = (
    64  # a "fields" recipe with at most this many environments is published for a CPU already
)


def table(suite: str) -> dict[tuple[str, str], Recipe]:
    """A suite's recipes, from its adapter's `RECIPES` ({} for gymnax and a suite without any).
    Only the adapter module is imported, not the suite's package."""
    return adapter_hook(import_adapter(suite), "RECIPES", {}) if suite in SUITES else {}


def every_recipe() -> dict[tuple[str, str], Recipe]:
    """Every suite's recipes, keyed by (algorithm, SUITE/NAME or SUITE/PATTERN)."""
    return {
        (algo, f"{suite}/{key}"): r for suite in SUITES for (algo, key), r in table(suite).items()
    }


def recipe_for(algo: str, env: str) -> Recipe | None:
    """The recipe for `algo` on `env`: its suite's entry for the exact name, else the first
    pattern that matches it, else None."""
    suite, name = suite_of(env)
    recipes = table(suite)
    if (algo, name) in recipes:
        return recipes[(algo, name)]
    return next(
        (
            r
            for (a, pattern), r in recipes.items()
            if a == algo and fnmatch.fnmatchcase(name, pattern)
        ),
        None,
    )


def cpu_factor(recipe: Recipe) -> int:
    """What a `cpu` recipe divides by: CPU_FACTOR, or for SAC at most its gradient steps per
    vector step, so that they stay whole and the replay ratio stays the published one; 1 for
    a "fields" recipe published at a CPU's sizes."""
    if recipe.trainer == "fields":
        return 1 if recipe.args["num_envs"] <= CPU_SIZED else CPU_FACTOR
    return (
        min(CPU_FACTOR, recipe.args["grad_updates_per_step"])
        if recipe.trainer == "sac"
        else CPU_FACTOR
    )


def trainer_args(recipe: Recipe, form: str) -> dict:
    """The Brax trainer's arguments of a recipe in `form` ("published" or "cpu": each count
    divided by `cpu_factor`, the module docstring's rule). benchmarks/brax_trainers.py hands
    the same arguments to Brax's own trainer."""
    args = dict(recipe.args)
    if form == "cpu":
        counts = {
            "ppo": ("num_envs", "batch_size", "num_timesteps"),
            "fields": ("num_envs", "total_timesteps"),
            "sac": ("num_envs", "grad_updates_per_step", "min_replay_size", "num_timesteps"),
            # FastTD3 counts its budget in vector steps: fewer envs are fewer env steps
            "fast_td3": ("num_envs", "batch_size"),
        }[recipe.trainer]
        args.update({name: max(1, args[name] // cpu_factor(recipe)) for name in counts})
        if recipe.trainer != "fields":
            args["num_eval_envs"] = CPU_EVAL_ENVS
    return args


def accelerator() -> bool:
    """Whether JAX will find a GPU or TPU, judged without starting a backend (starting one here
    would fix the CPU device count before `--num-devices` is read)."""
    platforms = os.environ.get("JAX_PLATFORMS", "").lower()
    if platforms:
        return any(p in platforms for p in ("cuda", "gpu", "rocm", "tpu"))
    plugins = (
        "jax_cuda12_plugin",
        "jax_cuda13_plugin",
        "jax_rocm60_plugin",
        "jax_rocm7_plugin",
        "libtpu",
    )
    return any(importlib.util.find_spec(p) is not None for p in plugins)


def resolve(choice: str) -> str:
    """`auto` -> `published` or `cpu`, `fast` -> `fast-published` or `fast-cpu`; the others as
    they are (ValueError for an unknown one)."""
    if choice not in CHOICES:
        raise ValueError(f"--recipe {choice!r} is not one of {', '.join(CHOICES)}.")
    if choice.startswith(FAST):
        return f"{FAST}-{resolve(choice[len(FAST) + 1:] or 'auto')}"
    if choice == "auto":
        return "published" if accelerator() else "cpu"
    return choice


def chosen(algo: str, env: str, resolved: str) -> Recipe | None:
    """The recipe a resolved choice takes for `algo` on `env`: the suite's entry, or with `fast-`
    FastTD3's arguments (the env's TD3 recipe, where it is FastTD3's); None for `none`, or where
    there is none."""
    if resolved == "none":
        return None
    if resolved.startswith(FAST):
        recipe = recipe_for("td3", env)
        return recipe if recipe is not None and recipe.trainer == FIELDS_FOR_FAST["td3"] else None
    return recipe_for(algo, env)


def lookup(algo: str, env: str, choice: str = "auto") -> tuple[str, dict]:
    """(the resolved choice, the recipe's Config fields) for `algo` on `env`; no fields where the
    table has no entry or the choice is `none`. The fields include `recipe`, so that config.json
    records which form applied. ValueError (one sentence) for `fast` with an algorithm it is not
    for."""
    resolved = resolve(choice)
    if resolved.startswith(FAST) and algo not in FIELDS_FOR_FAST:
        raise ValueError(
            f"--recipe {choice} is FastTD3's arguments, for {' and '.join(FIELDS_FOR_FAST)}, "
            f"and {algo} has none; use --recipe auto."
        )
    recipe = chosen(algo, env, resolved)
    if recipe is None:
        return "none", {"recipe": "none"}
    args = trainer_args(recipe, resolved.removeprefix(f"{FAST}-"))
    if algo in SEQUENCE_MINIBATCHES and "num_minibatches" in args:  # no emptier than one env
        args["num_minibatches"] = min(args["num_minibatches"], args["num_envs"])
    if recipe.trainer == "fields":
        translate = dict
    # a trainer's arguments, translated where they are defined (the recipe's adapter imported it)
    else:
        from scanrl.common.suites import brax_args, fasttd3_args

        trainer = FIELDS_FOR_FAST[algo] if resolved.startswith(FAST) else recipe.trainer
        translate = {**brax_args.FIELDS, **fasttd3_args.FIELDS}[trainer]
    return resolved, {**translate(args), **recipe.fields, "recipe": resolved}


def joined(words: list[str]) -> str:
    """Words listed in a sentence: a; a and b; a, b and c."""
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 2 else words)


def refuse_missing(algo: str, env: str, choice: str) -> None:
    """ValueError (one sentence) for a `--recipe` the user chose that gives `algo` no recipe on
    `env`, naming the suites where it has one; an `env` that names no environment gets that
    sentence instead. For a choice (not auto or none) that applied none."""
    check_env_id(env)
    fast = resolve(choice).startswith(FAST)
    wanted = ("td3", FIELDS_FOR_FAST["td3"]) if fast else None  # FastTD3's: the envs' TD3 recipes
    keys = [key.split("/", 1) for (a, key), r in every_recipe().items()
            if ((a, r.trainer) == wanted if fast else a == algo)]
    every = sorted({suite for suite, pattern in keys if pattern == "*"})
    some = sorted({suite for suite, _ in keys} - set(every))
    where = joined([f"some {joined(some)} envs"] * bool(some)
                   + [f"every {joined(every)} env"] * bool(every))
    what = f"FastTD3 publishes no arguments for {env}" if fast else \
        f"no suite publishes a recipe for {algo} on {env}"
    only = f" (only for {where})" if where else ""
    raise ValueError(f"--recipe {choice}: {what}{only}; leave --recipe out for {algo}'s own "
                     "defaults.")


RUN_SETTINGS = (
    "recipe",
    "env_options",
    "eval_episodes",
)  # what a recipe sets that is no hyperparameter


def hyperparameters(algo: str, env: str, choice: str = "auto") -> dict:
    """The recipe's values for `algo`'s Config (an algorithm's `default_config` applies them; the
    command line adds the rest, RUN_SETTINGS, to its run settings)."""
    return {k: v for k, v in lookup(algo, env, choice)[1].items() if k not in RUN_SETTINGS}


def config_fields(algo: str, env: str, choice: str, presets: dict) -> dict:
    """What an algorithm's `default_config(env)` starts from: its preset for env's kind
    (`presets[preset_name(env)]`: "minatar", "grid_world", "continuous"), then its preset for
    the env id itself where it has one (`presets[env]`), then the recipe's hyperparameters."""
    return {
        **presets.get(preset_name(env), {}), **presets.get(env, {}),
        **hyperparameters(algo, env, choice),
    }


def source(algo: str, env: str, resolved: str = "cpu") -> str | None:
    """Where the recipe for `algo` on `env` (a resolved choice: `fast-` or not) comes from; None
    without one."""
    recipe = chosen(algo, env, resolved)
    return recipe.source if recipe else None
