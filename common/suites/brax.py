"""Brax environments (`--env brax/NAME`), through Brax's own API, as gymnax environments.

`brax.envs.get_environment(NAME, backend=...)` is the raw environment: `reset(key)` and
`step(state, action)`, with `done` for a termination and no time limit (Brax keeps that in
its training wrapper, whose auto-reset also drops the observation reached before it).
gymnax's `Environment.step` does that wrapper's work here: it counts steps, reports the cut
at `max_steps_in_episode` (Brax's episode_length, 1000) as `truncated`, never `terminated`,
keeps that step's observation as `final_observation`, and starts the next episode from a
fresh `reset` with its own key.

Actions: Box(-1, 1) of the env's `action_size`; observations: Box(-inf, inf) of its
`observation_size`. The physics backend is Brax's default, "generalized" (full rigid-body
dynamics); `make(name, backend=...)` takes "positional", "spring" or "mjx" instead.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

DEFAULT_BACKEND = "generalized"


def brax_envs():
    """`brax.envs`. Its import prints that MuJoCo's optional Warp physics is missing and warns
    that Brax's own pipelines are unmaintained; neither concerns a run, so both are muted."""
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from brax import envs
    return envs


def NAMES() -> list[str]:
    return sorted(brax_envs()._envs)  # Brax's registry (brax.envs.register_environment adds to it)


@struct.dataclass
class EnvState(environment.EnvState):
    brax: Any  # brax.envs.base.State of the raw environment
    time: int


@struct.dataclass
class EnvParams(environment.EnvParams):
    max_steps_in_episode: int = 1000  # Brax's default episode_length


class BraxEnv(environment.Environment):
    """One Brax environment; `self.env` is Brax's own object."""

    def __init__(self, name: str, backend: str = DEFAULT_BACKEND):
        super().__init__()
        self.brax_name, self.backend = name, backend
        with warnings.catch_warnings():  # the same "unmaintained" warning, from loading the model
            warnings.simplefilter("ignore", UserWarning)
            self.env = brax_envs().get_environment(name, backend=backend)

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        state = self.env.reset(key)
        return state.obs, EnvState(brax=state, time=0)

    def step_env(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams):
        # Raw Brax steps are deterministic: the key is not used.
        brax = self.env.step(state.brax, action)
        return brax.obs, EnvState(brax=brax, time=state.time + 1), brax.reward, brax.done > 0.5, {}

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        return state.brax.done > 0.5

    def action_space(self, params: EnvParams | None = None) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (self.env.action_size,), jnp.float32)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (self.env.observation_size,), jnp.float32)

    @property
    def name(self) -> str:
        return f"brax/{self.brax_name}"

    @property
    def num_actions(self) -> int:
        return self.env.action_size


def make(name: str, backend: str = DEFAULT_BACKEND) -> tuple[BraxEnv, EnvParams]:
    env = BraxEnv(name, backend)
    return env, env.default_params
