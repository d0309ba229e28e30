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
  published, and each minibatch holds 32x fewer transitions. For SAC: `num_envs`,
  `learning_starts`, `total_timesteps` and the gradient steps per vector step divided by
  32, or by the gradient steps per vector step where those are fewer, so the replay ratio
  (gradient steps per env step) and the minibatch stay as published. Brax's 128 evaluation
  episodes become 16.
- `auto` (the default): `published` where JAX has a GPU or TPU plugin installed, else `cpu`.
- `none`: no recipe; the algorithm file's own defaults and presets.

How Brax's trainer's sizes map to scanrl's: Brax collects `batch_size * num_minibatches`
unrolls of `unroll_length` steps per iteration over `num_envs` environments, so scanrl's
`num_steps = unroll_length * batch_size * num_minibatches / num_envs`, with the same
`num_minibatches` and epochs (`num_updates_per_batch`). Three things Brax's trainer does
that scanrl's PPO does only when asked, and the Playground recipes ask for all three:
whole unrolls shuffled into the minibatches with GAE computed inside each one by the
current value net (`unroll_length`), each batch added to the observation statistics
before its SGD (`fresh_obs_stats`), and lecun-uniform layers (`init="lecun_uniform"`;
scanrl's default is orthogonal with a 0.01 policy head). Together they brought scanrl's
PPO level with Brax's trainer on CheetahRun and WalkerWalk, where GAE once per rollout
had left it at about 0.7x (benchmarks/RESULTS.md). The Brax notebook recipes leave them
off: there scanrl already matches Brax's trainer, and they have not been measured with
them.

The grid worlds and Craftax publish PureJaxRL-style scripts, whose settings are scanrl's own
fields under other names; those recipes (`trainer="fields"`) hold the fields directly, and
apply to every env of the suite their key's pattern matches (`craftax/Craftax*-Symbolic-v1`).
Where a baseline's network has parts scanrl's files lack, the source says which.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
from typing import NamedTuple

CPU_FACTOR = 32
CHOICES = ("auto", "published", "cpu", "none")

BRAX_NOTEBOOK = "Brax notebooks/training.ipynb (`train_fns`)"
PLAYGROUND_DMC = "mujoco_playground/config/dm_control_suite_params.py"

# Brax's trainers' own defaults (brax/training/agents/ppo/train.py, losses.py, networks.py),
# as scanrl's PPO fields: a tanh-squashed normal with a softplus std, clip 0.3, no value clip,
# no gradient clipping, no schedule, Adam eps 1e-8, a constant reward scale instead of
# running statistics, observation normalisation, policy 32x4 and value 256x5 swish MLPs.
BRAX_PPO = dict(action_dist="tanh_normal", min_std=0.001, clip_eps=0.3, clip_value_loss=False, max_grad_norm=0.0,
                anneal_lr=False, adam_eps=1e-8, gae_lambda=0.95, vf_coef=0.5, normalize_advantages=True,
                normalize_obs=True, normalize_reward=False, actor_hidden=(32, 32, 32, 32),
                critic_hidden=(256, 256, 256, 256, 256), activation="swish")
# brax/training/agents/sac: ReLU MLPs 256x256, tau 0.005, target entropy -A/2, obs normalisation
BRAX_SAC = dict(actor_hidden=(256, 256), critic_hidden=(256, 256), activation="relu", tau=0.005,
                target_entropy_scale=0.5, normalize_obs=True)


class Recipe(NamedTuple):
    source: str  # where the values are published
    # "ppo" or "sac": which of Brax's trainers `args` are for; "fields": `args` are scanrl's
    # Config fields already (a PureJaxRL-style script's settings, translated name by name)
    trainer: str
    args: dict  # the trainer's own arguments as published (its names: num_envs, unroll_length, ...)
    fields: dict  # scanrl Config fields beyond what `args` give (env_options)


def ppo_args(num_envs: int, unroll_length: int, batch_size: int, num_minibatches: int, num_updates_per_batch: int,
             discounting: float, learning_rate: float, entropy_cost: float, reward_scaling: float,
             num_timesteps: int) -> dict:
    """Brax's `ppo.train` arguments, in its order of the notebook's configurations."""
    return dict(num_envs=num_envs, unroll_length=unroll_length, batch_size=batch_size, num_minibatches=num_minibatches,
                num_updates_per_batch=num_updates_per_batch, discounting=discounting, learning_rate=learning_rate,
                entropy_cost=entropy_cost, reward_scaling=float(reward_scaling), num_timesteps=num_timesteps,
                num_eval_envs=128)


def sac_args(num_envs: int, batch_size: int, grad_updates_per_step: int, discounting: float, learning_rate: float,
             reward_scaling: float, min_replay_size: int, num_timesteps: int) -> dict:
    """Brax's `sac.train` arguments."""
    return dict(num_envs=num_envs, batch_size=batch_size, grad_updates_per_step=grad_updates_per_step,
                discounting=discounting, learning_rate=learning_rate, reward_scaling=float(reward_scaling),
                min_replay_size=min_replay_size, num_timesteps=num_timesteps, num_eval_envs=128)


def ppo_fields(a: dict) -> dict:
    """scanrl's PPO fields for Brax `ppo.train` arguments."""
    return dict(BRAX_PPO, num_envs=a["num_envs"],
                num_steps=a["unroll_length"] * a["batch_size"] * a["num_minibatches"] // a["num_envs"],
                num_minibatches=a["num_minibatches"], num_epochs=a["num_updates_per_batch"], gamma=a["discounting"],
                learning_rate=a["learning_rate"], ent_coef=a["entropy_cost"], reward_scale=a["reward_scaling"],
                total_timesteps=a["num_timesteps"], eval_episodes=a["num_eval_envs"])


def sac_fields(a: dict) -> dict:
    """scanrl's SAC fields for Brax `sac.train` arguments."""
    return dict(BRAX_SAC, num_envs=a["num_envs"], batch_size=a["batch_size"], updates_per_step=a["grad_updates_per_step"],
                gamma=a["discounting"], learning_rate=a["learning_rate"], reward_scale=a["reward_scaling"],
                learning_starts=a["min_replay_size"], total_timesteps=a["num_timesteps"],
                eval_episodes=a["num_eval_envs"])


# Brax's trainer as scanrl's PPO reproduces it: whole unrolls with GAE in every minibatch, the
# observation statistics updated before the SGD, lecun-uniform layers (the module docstring)
BRAX_PPO_UPDATE = dict(fresh_obs_stats=True, init="lecun_uniform")


def playground_ppo(task: str) -> Recipe:
    """Playground's DM Control Suite PPO (`brax_ppo_config`) with the task's own changes, run
    as Brax's trainer runs it (`unroll_length`, BRAX_PPO_UPDATE)."""
    args = {**ppo_args(2048, 30, 1024, 32, 16, 0.995, 1e-3, 1e-2, 10.0, 60_000_000), **dmc_ppo_changes(task)}
    return Recipe(PLAYGROUND_DMC, "ppo", args, dict(BRAX_PPO_UPDATE, unroll_length=args["unroll_length"]))


def playground_sac(task: str) -> Recipe:
    """Playground's DM Control Suite SAC (`brax_sac_config`) with the task's own changes."""
    args = sac_args(128, 512, 8, 0.99, 1e-3, 1.0, 8192, 5_000_000)
    return Recipe(PLAYGROUND_DMC + "; its Q-network layer norm is not in scanrl's SAC", "sac",
                  {**args, **dmc_sac_changes(task)}, {})


DMC_TASKS = ("AcrobotSwingup", "AcrobotSwingupSparse", "BallInCup", "CartpoleBalance", "CartpoleBalanceSparse",
             "CartpoleSwingup", "CartpoleSwingupSparse", "CheetahRun", "FingerSpin", "FingerTurnEasy", "FingerTurnHard",
             "FishSwim", "HopperHop", "HopperStand", "HumanoidRun", "HumanoidStand", "HumanoidWalk", "PendulumSwingup",
             "PointMass", "ReacherEasy", "ReacherHard", "SwimmerSwimmer6", "WalkerRun", "WalkerStand", "WalkerWalk")


def dmc_ppo_changes(task: str) -> dict:
    """`brax_ppo_config`'s per-task changes. Its PendulumSwingUp change (action repeat 4, 4 epochs)
    is keyed by a name the registry spells PendulumSwingup, so Playground's own code never applies
    it; neither does this table."""
    if task.startswith(("AcrobotSwingup", "Swimmer")) or task == "WalkerRun":
        return dict(num_timesteps=100_000_000)
    return dict(discounting=0.95) if task in ("BallInCup", "FingerSpin") else {}


def dmc_sac_changes(task: str) -> dict:
    """`brax_sac_config`'s per-task changes: 10M steps for the harder tasks."""
    harder = task.startswith(("Acrobot", "Swimmer", "Finger", "Hopper")) or task in (
        "CheetahRun", "HumanoidWalk", "WalkerRun")
    return dict(num_timesteps=10_000_000) if harder else {}


POSITIONAL = dict(env_options=("backend", "positional"))  # the notebook trains on Brax's positional pipeline


def notebook(trainer: str, args: dict, note: str = "") -> Recipe:
    return Recipe(BRAX_NOTEBOOK + note, trainer, args, POSITIONAL)


# (algorithm, env) -> its recipe
RECIPES: dict[tuple[str, str], Recipe] = {
    # Brax: the training notebook's configurations
    ("ppo", "brax/inverted_pendulum"): notebook("ppo", ppo_args(2048, 5, 1024, 32, 4, 0.97, 3e-4, 1e-2, 10, 2_000_000)),
    ("ppo", "brax/inverted_double_pendulum"): notebook(
        "ppo", ppo_args(2048, 5, 1024, 32, 4, 0.97, 3e-4, 1e-2, 10, 20_000_000)),
    ("ppo", "brax/ant"): notebook("ppo", ppo_args(4096, 5, 2048, 32, 4, 0.97, 3e-4, 1e-2, 10, 50_000_000)),
    ("ppo", "brax/humanoid"): notebook("ppo", ppo_args(2048, 10, 1024, 32, 8, 0.97, 3e-4, 1e-3, 0.1, 50_000_000)),
    ("ppo", "brax/halfcheetah"): notebook("ppo", ppo_args(2048, 20, 512, 32, 8, 0.95, 3e-4, 1e-3, 1, 50_000_000)),
    ("ppo", "brax/reacher"): notebook("ppo", ppo_args(2048, 50, 256, 32, 8, 0.95, 3e-4, 1e-3, 5, 50_000_000),
                                      "; its action_repeat 4 is not applied"),
    ("ppo", "brax/pusher"): notebook("ppo", ppo_args(2048, 30, 512, 16, 8, 0.95, 3e-4, 1e-2, 5, 50_000_000)),
    ("ppo", "brax/humanoidstandup"): notebook(
        "ppo", ppo_args(2048, 15, 1024, 32, 8, 0.97, 6e-4, 1e-2, 0.1, 100_000_000)),
    ("sac", "brax/hopper"): notebook("sac", sac_args(128, 512, 64, 0.997, 6e-4, 30, 8192, 6_553_600)),
    ("sac", "brax/walker2d"): notebook("sac", sac_args(128, 128, 32, 0.997, 6e-4, 5, 8192, 7_864_320)),
    # MuJoCo Playground: the DM Control Suite parameters, with each task's own changes
    **{("ppo", f"playground/{task}"): playground_ppo(task) for task in DMC_TASKS},
    **{("sac", f"playground/{task}"): playground_sac(task) for task in DMC_TASKS},
}

CRAFTAX_BASELINES = "MichaelTMatthews/Craftax_Baselines @ 7ce36fa"
# ppo.py's argparse defaults (ppo.py L669-722) and its network (models/actor_critic.py `ActorCritic`:
# separate actor and critic, three tanh layers of `layer_size` 512, orthogonal init with a 0.01
# policy head, as scanrl's); clipped value loss, advantages normalised per minibatch, no observation
# or reward normalisation, Adam eps 1e-5 after a global-norm clip of 1.0, lr annealed to 0.
CRAFTAX_PPO = dict(num_envs=1024, num_steps=64, total_timesteps=1_000_000_000, learning_rate=2e-4, anneal_lr=True,
                   num_epochs=4, num_minibatches=8, gamma=0.99, gae_lambda=0.8, clip_eps=0.2, ent_coef=0.01,
                   vf_coef=0.5, max_grad_norm=1.0, adam_eps=1e-5, clip_value_loss=True, normalize_advantages=True,
                   normalize_obs=False, normalize_reward=False)
NAVIX_PPO = "epignatelli/navix @ 03b056a, navix/agents/ppo.py `PPOHparams` and agents/models.py `ActorCritic`"
XLAND_PPO = ("corl-team/xland-minigrid @ a46e78c, configs/single.yaml (the paper's single-task settings) over "
             "training/train_single_task.py `TrainConfig`; its observation encoder (tile and colour embeddings, "
             "three 2x2 convolutions) and its previous-action and previous-reward inputs are not in scanrl's "
             "ppo_rnn, which reads the grid with its own encoder")

# (algorithm, fnmatch pattern of env ids) -> its recipe, for suites whose baselines share one
# configuration; an exact entry in RECIPES wins over these
SUITE_RECIPES: dict[tuple[str, str], Recipe] = {
    ("ppo", "craftax/Craftax*-Symbolic-v1"): Recipe(
        CRAFTAX_BASELINES + ", ppo.py", "fields",
        dict(CRAFTAX_PPO, actor_hidden=(512, 512, 512), critic_hidden=(512, 512, 512), activation="tanh"), {}),
    # ppo_rnn.py: the same defaults (L496-535); Dense 512 + relu, a GRU of 512, then actor and
    # critic heads of two relu layers of 512; minibatches split the environments, as scanrl's do
    ("ppo_rnn", "craftax/Craftax*-Symbolic-v1"): Recipe(
        CRAFTAX_BASELINES + ", ppo_rnn.py", "fields",
        dict(CRAFTAX_PPO, encoder_hidden=(512,), gru_size=512, head_hidden=(512, 512), activation="relu"), {}),
    # 1e6 frames of 16 environments: a CPU's sizes; gamma is the env's own 0.99; its MLPs read
    # the grid flattened (scanrl's `auto` torso would take it for an image)
    ("ppo", "navix/*"): Recipe(NAVIX_PPO, "fields", dict(
        num_envs=16, num_steps=128, total_timesteps=1_000_000, learning_rate=2.5e-4, anneal_lr=True, num_epochs=1,
        num_minibatches=8, gamma=0.99, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
        clip_value_loss=True, normalize_advantages=True, actor_hidden=(64, 64), critic_hidden=(64, 64),
        activation="tanh", torso="mlp"), {}),
    ("ppo_rnn", "xminigrid/*"): Recipe(XLAND_PPO, "fields", dict(
        num_envs=16384, num_steps=256, total_timesteps=1_000_000_000, learning_rate=1e-3, anneal_lr=True,
        num_epochs=1, num_minibatches=16, gamma=0.99, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.01, vf_coef=0.5,
        max_grad_norm=0.5, adam_eps=1e-8, clip_value_loss=True, normalize_advantages=True, gru_size=1024,
        head_hidden=(256,), activation="tanh"), {}),
}

CPU_EVAL_ENVS = 16  # Brax's 128 one-episode evaluations are a GPU's; 16 on a CPU
CPU_SIZED = 64  # a "fields" recipe with at most this many environments is published for a CPU already


def recipe_for(algo: str, env: str) -> Recipe | None:
    """The recipe for `algo` on `env`: an exact entry of RECIPES, else the first SUITE_RECIPES
    pattern that matches, else None."""
    if (algo, env) in RECIPES:
        return RECIPES[(algo, env)]
    return next((r for (a, pattern), r in SUITE_RECIPES.items() if a == algo and fnmatch.fnmatchcase(env, pattern)),
                None)


def cpu_factor(recipe: Recipe) -> int:
    """What a `cpu` recipe divides by: CPU_FACTOR, or for SAC at most its gradient steps per
    vector step, so that they stay whole and the replay ratio stays the published one; 1 for
    a "fields" recipe published at a CPU's sizes."""
    if recipe.trainer == "fields":
        return 1 if recipe.args["num_envs"] <= CPU_SIZED else CPU_FACTOR
    return min(CPU_FACTOR, recipe.args["grad_updates_per_step"]) if recipe.trainer == "sac" else CPU_FACTOR


def trainer_args(recipe: Recipe, form: str) -> dict:
    """The Brax trainer's arguments of a recipe in `form` ("published" or "cpu": each count
    divided by `cpu_factor`, the module docstring's rule). benchmarks/brax_trainers.py hands
    the same arguments to Brax's own trainer."""
    args = dict(recipe.args)
    if form == "cpu":
        counts = {"ppo": ("num_envs", "batch_size", "num_timesteps"), "fields": ("num_envs", "total_timesteps"),
                  "sac": ("num_envs", "grad_updates_per_step", "min_replay_size", "num_timesteps")}[recipe.trainer]
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
    plugins = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin", "jax_rocm7_plugin", "libtpu")
    return any(importlib.util.find_spec(p) is not None for p in plugins)


def resolve(choice: str) -> str:
    """`auto` -> `published` or `cpu`; the others as they are (ValueError for an unknown one)."""
    if choice not in CHOICES:
        raise ValueError(f"--recipe {choice!r} is not one of {', '.join(CHOICES)}.")
    if choice == "auto":
        return "published" if accelerator() else "cpu"
    return choice


def lookup(algo: str, env: str, choice: str = "auto") -> tuple[str, dict]:
    """(the resolved choice, the recipe's Config fields) for `algo` on `env`; no fields where the
    table has no entry or the choice is `none`. The fields include `recipe`, so that config.json
    records which form applied."""
    form = resolve(choice)
    recipe = recipe_for(algo, env)
    if recipe is None or form == "none":
        return "none", {"recipe": "none"}
    args = trainer_args(recipe, form)
    translate = {"ppo": ppo_fields, "sac": sac_fields, "fields": dict}[recipe.trainer]
    return form, {**translate(args), **recipe.fields, "recipe": form}


RUN_SETTINGS = ("recipe", "env_options", "eval_episodes")  # what a recipe sets that is no hyperparameter


def hyperparameters(algo: str, env: str, choice: str = "auto") -> dict:
    """The recipe's values for `algo`'s Config (an algorithm's `default_config` applies them; the
    command line adds the rest, RUN_SETTINGS, to its run settings)."""
    return {k: v for k, v in lookup(algo, env, choice)[1].items() if k not in RUN_SETTINGS}


def source(algo: str, env: str) -> str | None:
    """Where the recipe for `algo` on `env` comes from; None without one."""
    recipe = recipe_for(algo, env)
    return recipe.source if recipe else None
