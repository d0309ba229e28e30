"""Brax environments (`--env brax/NAME`), through Brax's own API, as gymnax environments.

`brax.envs.get_environment(NAME, backend=...)` is the raw environment: `reset(key)` and
`step(state, action)`, with `done` for a termination and no time limit (Brax keeps that in
its training wrapper, whose auto-reset also drops the observation reached before it).
common/suites/base.py does that wrapper's work: the cut at `max_steps_in_episode` (Brax's
episode_length, 1000) is `truncated`, never `terminated`, with the true final observation.

Actions: Box(-1, 1) of the env's `action_size`; observations: Box(-inf, inf) of its
`observation_size`. The physics backend is Brax's default, "generalized" (full rigid-body
dynamics); `--env-options backend B` takes "positional", "spring" or "mjx" instead (Brax's
training notebook, and so its recipes below, use "positional").
"""

from __future__ import annotations

import contextlib
import io
import warnings
from typing import Any

from scanrl.common.suites.recipes import Recipe
from scanrl.common.suites.brax_args import ppo_args, sac_args
from scanrl.common.suites.fasttd3_args import SOURCE as FASTTD3, fasttd3_args
from scanrl.common.suites.base import RawStateEnv

ACTIONS = "box"  # every env of the suite: suites.is_continuous answers without building one

DEFAULT_BACKEND = "generalized"
OPTIONS = {
    "backend": ("generalized", "positional", "spring", "mjx")
}  # --env-options: name -> choices


def brax_envs():
    """`brax.envs`. Its import prints that MuJoCo's optional Warp physics is missing and warns
    that Brax's own pipelines are unmaintained; neither concerns a run, so both are muted."""
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from brax import envs
    return envs


TEST_ENVS = {"fast"}  # in Brax's registry for Brax's own tests: no physics to learn


def NAMES() -> list[str]:
    # Brax's registry (brax.envs.register_environment adds to it), without its test envs
    return sorted(set(brax_envs()._envs) - TEST_ENVS)


class BraxEnv(RawStateEnv):
    """One Brax environment; `self.env` is Brax's own object."""

    def __init__(self, name: str, backend: str = DEFAULT_BACKEND):
        super().__init__()
        self.suite, self.raw_name, self.backend = "brax", name, backend
        with warnings.catch_warnings():  # the same "unmaintained" warning, from loading the model
            warnings.simplefilter("ignore", UserWarning)
            self.env = brax_envs().get_environment(name, backend=backend)

    def mujoco_model(self) -> Any:
        return self.env.sys.mj_model

    def joints(self, raw: Any) -> tuple[Any, Any]:
        return raw.pipeline_state.q, raw.pipeline_state.qd


def make(name: str, options: dict[str, str] | None = None) -> tuple[BraxEnv, Any]:
    """`options`: `--env-options` (ValueError for an unknown name or choice)."""
    options = dict(options or {})
    for key, value in options.items():
        if key not in OPTIONS:
            raise ValueError(f"--env-options {key}: Brax environments take {', '.join(OPTIONS)}.")
        if value not in OPTIONS[key]:
            raise ValueError(
                f"--env-options {key} {value}: Brax's backends are {', '.join(OPTIONS[key])}."
            )
    env = BraxEnv(name, options.get("backend", DEFAULT_BACKEND))
    return env, env.default_params


# The training notebook's recipes (Brax notebooks/training.ipynb, `train_fns`), as Brax's
# trainers' arguments; the notebook trains on the positional pipeline
NOTEBOOK = "Brax notebooks/training.ipynb (`train_fns`)"
POSITIONAL = dict(env_options=("backend", "positional"))


def notebook(trainer: str, args: dict, note: str = "") -> Recipe:
    return Recipe(NOTEBOOK + note, trainer, args, POSITIONAL)


# (algorithm, env name) -> its recipe (common/suites/recipes.py applies it)
RECIPES: dict[tuple[str, str], Recipe] = {
    ("ppo", "inverted_pendulum"): notebook(
        "ppo", ppo_args(2048, 5, 1024, 32, 4, 0.97, 3e-4, 1e-2, 10, 2_000_000)
    ),
    ("ppo", "inverted_double_pendulum"): notebook(
        "ppo", ppo_args(2048, 5, 1024, 32, 4, 0.97, 3e-4, 1e-2, 10, 20_000_000)
    ),
    ("ppo", "ant"): notebook(
        "ppo", ppo_args(4096, 5, 2048, 32, 4, 0.97, 3e-4, 1e-2, 10, 50_000_000)
    ),
    ("ppo", "humanoid"): notebook(
        "ppo", ppo_args(2048, 10, 1024, 32, 8, 0.97, 3e-4, 1e-3, 0.1, 50_000_000)
    ),
    ("ppo", "halfcheetah"): notebook(
        "ppo", ppo_args(2048, 20, 512, 32, 8, 0.95, 3e-4, 1e-3, 1, 50_000_000)
    ),
    ("ppo", "reacher"): notebook(
        "ppo",
        ppo_args(2048, 50, 256, 32, 8, 0.95, 3e-4, 1e-3, 5, 50_000_000),
        "; its action_repeat 4 is not applied",
    ),
    ("ppo", "pusher"): notebook(
        "ppo", ppo_args(2048, 30, 512, 16, 8, 0.95, 3e-4, 1e-2, 5, 50_000_000)
    ),
    ("ppo", "humanoidstandup"): notebook(
        "ppo", ppo_args(2048, 15, 1024, 32, 8, 0.97, 6e-4, 1e-2, 0.1, 100_000_000)
    ),
    ("sac", "hopper"): notebook("sac", sac_args(128, 512, 64, 0.997, 6e-4, 30, 8192, 6_553_600)),
    ("sac", "walker2d"): notebook("sac", sac_args(128, 128, 32, 0.997, 6e-4, 5, 8192, 7_864_320)),
}

# TD3: FastTD3 publishes no arguments for Brax. The closest are its DM Control ones (its
# CheetahRunArgs, which it says work for most DM Control tasks): Brax's tasks are MuJoCo bodies
# with dense rewards over 1,000-step episodes too. Their support [-500, 500] holds these tasks'
# discounted returns at gamma 0.97 (rewards of up to about 13 a step, the humanoid's: under 440),
# but not humanoidstandup's (tens to a hundred a step), which has none. On the notebook's backend.
FAST_TD3_TASKS = ("ant", "halfcheetah", "hopper", "humanoid", "inverted_double_pendulum",
                  "inverted_pendulum", "pusher", "reacher", "walker2d")
RECIPES.update(
    {
        ("td3", task): Recipe(
            f"{FASTTD3} (CheetahRunArgs: none published for Brax)",
            "fast_td3",
            fasttd3_args(task, dm_control=True),
            POSITIONAL,
        )
        for task in FAST_TD3_TASKS
    }
)
