"""MuJoCo Playground (`--env playground/NAME`, e.g. playground/CartpoleBalance), through
Playground's own API, as gymnax environments.

`mujoco_playground.registry.load(NAME, config_overrides={"impl": "jax"})` gives the raw
environment: `reset(key)` and `step(state, action)`, with `done` for a termination and no
time limit (Playground's training wrapper adds it, and its auto-reset drops the observation
reached before the reset). The physics is MJX's pure-JAX implementation: its default, Warp,
compiles kernels for about 50 s on first use and runs slower on a CPU. common/suites/base.py
does the wrapper's work: the cut at `max_steps_in_episode` (the task's `episode_length`,
1000 for the DM Control Suite tasks) is `truncated`, never `terminated`, with the true
final observation.

The DM Control Suite tasks ship with the package. The locomotion and manipulation tasks
fetch their model files (MuJoCo Menagerie) at first use, which needs the network: offline,
loading one is a one-sentence error. Actions: Box(-1, 1) of `action_size`; observations: a
flat vector, which for the locomotion tasks is [state, privileged_state] (common/suites/base.py:
the policy reads state; PPO's value net reads privileged_state where the recipe says so).
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

from scanrl.common.suites.recipes import Recipe
from scanrl.common.suites.brax_args import ppo_args, sac_args
from scanrl.common.suites.fasttd3_args import SOURCE as FASTTD3, fasttd3_args
from scanrl.common.suites.base import RawStateEnv

ACTIONS = "box"  # every env of the suite: suites.is_continuous answers without building one


def registry():
    """`mujoco_playground.registry` (its import prints that the optional Warp is missing: muted)."""
    with contextlib.redirect_stdout(io.StringIO()):
        from mujoco_playground import registry
    return registry


def NAMES() -> list[str]:
    return sorted(registry().ALL_ENVS)


class PlaygroundEnv(RawStateEnv):
    """One Playground environment; `self.env` is Playground's own object."""

    def __init__(self, name: str, overrides: dict[str, Any] | None = None):
        super().__init__()
        reg = registry()
        self.suite, self.raw_name = "playground", name
        overrides = overrides or {}
        self.episode_length = int(
            overrides.get("episode_length", reg.get_default_config(name).episode_length)
        )
        if (
            name in LOCOMOTION
        ):  # the cached starts are drawn anew as often as the task's published recipe does
            self.cached_starts = steps_between_resets(*LOCOMOTION[name][:3])
        try:  # muted: a failed model download prints its own line before raising
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                self.env = reg.load(name, config_overrides={"impl": "jax", **overrides})
        except Exception as e:  # noqa: BLE001 - e.g. a task whose model files must be downloaded
            first = (str(e).strip().splitlines() or [""])[0][:200]
            raise ValueError(
                f"--env playground/{name}: MuJoCo Playground could not load it ({type(e).__name__}:"
                f" {first}); its locomotion and manipulation tasks fetch model files at first use,"
                " which needs the network, while the DM Control Suite tasks (e.g. CartpoleBalance,"
                " CheetahRun) ship with it."
            ) from None

    def mujoco_model(self) -> Any:
        return self.env.mj_model

    def joints(self, raw: Any) -> tuple[Any, Any]:
        return raw.data.qpos, raw.data.qvel


OPTIONS = (  # --env-options: any top-level number or switch of its default config
    "the task's config_overrides"
)


def overrides(name: str, options: dict[str, str]) -> dict[str, Any]:
    """`--env-options` as Playground `config_overrides`, each value typed like the default it
    replaces (ValueError for a name the task's config lacks, or a value of the wrong kind)."""
    defaults, typed = registry().get_default_config(name), {}
    for key, text in options.items():
        if (
            key not in defaults
            or key == "impl"
            or not isinstance(defaults[key], (bool, int, float))
        ):
            known = ", ".join(
                sorted(k for k, v in defaults.items() if isinstance(v, (bool, int, float)))
            )
            raise ValueError(
                f"--env-options {key}: playground/{name}'s config has no such number or switch; "
                f"it has {known}."
            )
        default = defaults[key]
        try:
            if isinstance(default, bool):
                if text.lower() not in ("true", "false"):
                    raise ValueError
                typed[key] = text.lower() == "true"
            elif isinstance(default, float):
                typed[key] = float(text)
            elif isinstance(default, int):
                typed[key] = int(text)
            else:
                raise ValueError
        except ValueError:
            raise ValueError(
                f"--env-options {key} {text}: playground/{name}'s {key} is {default!r}; give a"
                " value of that kind."
            ) from None
    return typed


def make(name: str, options: dict[str, str] | None = None) -> tuple[PlaygroundEnv, Any]:
    env = PlaygroundEnv(name, overrides(name, options) if options else None)
    return env, env.default_params


# Recipes: Playground's DM Control Suite parameters with each task's own changes. Brax's trainer,
# which Playground trains with, does three things scanrl's PPO does only when asked, and these
# recipes ask for all three: whole unrolls shuffled into the minibatches with GAE computed inside
# each one by the current value net (`unroll_length`), each batch added to the observation
# statistics before its SGD (`fresh_obs_stats`), and lecun-uniform layers (`init`; scanrl's
# default is orthogonal with a 0.01 policy head). Together they brought scanrl's PPO level with
# Brax's trainer on CheetahRun and WalkerWalk, where GAE once per rollout had left it at about
# 0.7x (benchmarks/HISTORY.md, 2026-11-26, 08:08-09:35).
DMC_PARAMS = "mujoco_playground/config/dm_control_suite_params.py"
BRAX_PPO_UPDATE = dict(fresh_obs_stats=True, init="lecun_uniform")
DMC_TASKS = (
    "AcrobotSwingup",
    "AcrobotSwingupSparse",
    "BallInCup",
    "CartpoleBalance",
    "CartpoleBalanceSparse",
    "CartpoleSwingup",
    "CartpoleSwingupSparse",
    "CheetahRun",
    "FingerSpin",
    "FingerTurnEasy",
    "FingerTurnHard",
    "FishSwim",
    "HopperHop",
    "HopperStand",
    "HumanoidRun",
    "HumanoidStand",
    "HumanoidWalk",
    "PendulumSwingup",
    "PointMass",
    "ReacherEasy",
    "ReacherHard",
    "SwimmerSwimmer6",
    "WalkerRun",
    "WalkerStand",
    "WalkerWalk",
)


def dmc_ppo(task: str) -> Recipe:
    """`brax_ppo_config` with the task's changes: 100M steps for the hardest, gamma 0.95 for two.
    Its PendulumSwingUp change (action repeat 4, 4 epochs) is keyed by a name the registry spells
    PendulumSwingup, so Playground's own code never applies it; neither does this table."""
    args = ppo_args(2048, 30, 1024, 32, 16, 0.995, 1e-3, 1e-2, 10.0, 60_000_000)
    if task.startswith(("AcrobotSwingup", "Swimmer")) or task == "WalkerRun":
        args["num_timesteps"] = 100_000_000
    if task in ("BallInCup", "FingerSpin"):
        args["discounting"] = 0.95
    return Recipe(
        DMC_PARAMS, "ppo", args, dict(BRAX_PPO_UPDATE, unroll_length=args["unroll_length"])
    )


def dmc_sac(task: str) -> Recipe:
    """`brax_sac_config` with the task's changes: 10M steps for the harder tasks; layer-normed Q
    networks."""
    args = dict(
        sac_args(128, 512, 8, 0.99, 1e-3, 1.0, 8192, 5_000_000),
        network_factory={"q_network_layer_norm": True},
    )
    if task.startswith(("Acrobot", "Swimmer", "Finger", "Hopper")) or task in (
        "CheetahRun",
        "HumanoidWalk",
        "WalkerRun",
    ):
        args["num_timesteps"] = 10_000_000
    return Recipe(DMC_PARAMS, "sac", args, {})


# Locomotion: `brax_ppo_config` of mujoco_playground/config/locomotion_params.py. Its defaults (8192
# envs, unroll 20, batch 256, 32 minibatches, 4 epochs, gamma 0.97, lr 3e-4, entropy 1e-2, gradient
# norm 1.0, policy 128x4, value 256x5), then each task's changes: the budget, the evaluations and
# the resets per evaluation, and for most a 512-256-128 policy and value, the value net reading
# privileged_state. Their physics is slow on a CPU: PPO on T1JoystickFlatTerrain's `cpu` form (256
# envs) runs about 570 env steps/s on 2 cores, so its 6.25M steps take about 3 hours
# (benchmarks/HISTORY.md, 2026-11-28, 07:00-07:55).
LOCO_PARAMS = "mujoco_playground/config/locomotion_params.py"
ASYMMETRIC = dict(
    policy_hidden_layer_sizes=(512, 256, 128), value_hidden_layer_sizes=(512, 256, 128),
    value_obs_key="privileged_state",
)
HUMANOID = dict(clipping_epsilon=0.2, entropy_cost=0.005)  # G1, T1, Berkeley Humanoid, Apollo
# task -> (num_timesteps, num_evals, num_resets_per_eval, its changes to the defaults)
LOCOMOTION: dict[str, tuple[int, int, int, dict]] = {
    **{
        t: (200_000_000, 10, 10, dict(network_factory=ASYMMETRIC))
        for t in ("Go1JoystickFlatTerrain", "Go1JoystickRoughTerrain")
    },
    **{
        t: (100_000_000, 5, 10, dict(network_factory=ASYMMETRIC))
        for t in ("Go1Handstand", "Go1Footstand")
    },
    "Go1Getup": (50_000_000, 5, 10, dict(network_factory=ASYMMETRIC)),
    **{
        t: (200_000_000, 20, 1, dict(HUMANOID, network_factory=ASYMMETRIC))
        for t in (
            "G1JoystickFlatTerrain",
            "G1JoystickRoughTerrain",
            "T1JoystickFlatTerrain",
            "T1JoystickRoughTerrain",
            "ApolloJoystickFlatTerrain",
        )
    },
    **{
        t: (150_000_000, 15, 10, dict(HUMANOID, network_factory=ASYMMETRIC))
        for t in ("BerkeleyHumanoidJoystickFlatTerrain", "BerkeleyHumanoidJoystickRoughTerrain")
    },
    **{
        t: (100_000_000, 10, 10, {})
        for t in (
            "BarkourJoystick",
            "H1InplaceGaitTracking",
            "H1JoystickGaitTracking",
            "Op3Joystick",
            "SpotFlatTerrainJoystick",
            "SpotGetup",
            "SpotJoystickGaitTracking",
        )
    },
}


def loco_ppo(task: str) -> Recipe:
    """`brax_ppo_config(task)`: the defaults above with the task's changes, in Brax's own argument
    names."""
    steps, _, _, changes = LOCOMOTION[task]
    args = ppo_args(8192, 20, 256, 32, 4, 0.97, 3e-4, changes.get("entropy_cost", 1e-2), 1.0, steps)
    args.update(
        clipping_epsilon=changes.get("clipping_epsilon", 0.3),
        max_grad_norm=1.0,
        network_factory=dict(
            dict(
                policy_hidden_layer_sizes=(128,) * 4, value_hidden_layer_sizes=(256,) * 5,
                value_obs_key="state",
            ),
            **changes.get("network_factory", {}),
        ),
    )
    return Recipe(
        LOCO_PARAMS, "ppo", args, dict(BRAX_PPO_UPDATE, unroll_length=args["unroll_length"])
    )


def steps_between_resets(num_timesteps: int, num_evals: int, resets_per_eval: int) -> int:
    """Steps per environment between Brax's PPO re-drawing the cached starts
    (brax/training/agents/ppo/ train.py: every ceil(T / ((num_evals - 1) * max(resets, 1) * S))
    iterations of S env steps), with the recipe's sizes: 20 steps per environment per iteration. The
    same in the `cpu` form, where the environments and the budget are both divided by 32."""
    per_env, per_iteration = 20, 20 * 256 * 32
    return per_env * -(
        -num_timesteps // ((num_evals - 1) * max(resets_per_eval, 1) * per_iteration)
    )


# TD3: FastTD3's published arguments (common/suites/fasttd3_args.py), for DM Control its
# CheetahRunArgs, which it says work for most DM Control tasks
def fast_td3(task: str) -> Recipe:
    return Recipe(FASTTD3, "fast_td3", fasttd3_args(task, dm_control=task in DMC_TASKS), {})


# (algorithm, env name) -> its recipe (common/suites/recipes.py applies it)
RECIPES: dict[tuple[str, str], Recipe] = {
    **{("ppo", task): dmc_ppo(task) for task in DMC_TASKS},
    **{("sac", task): dmc_sac(task) for task in DMC_TASKS},
    **{("ppo", task): loco_ppo(task) for task in LOCOMOTION},
    **{("td3", task): fast_td3(task) for task in DMC_TASKS + tuple(LOCOMOTION)},
}
