"""The gymnax environment over a raw environment of the Brax kind: `reset(key) -> state`,
`step(state, action) -> state` with `state.obs`, `state.reward` and `state.done` (a
termination), `action_size` and `observation_size`, and no time limit of its own. Brax and
MuJoCo Playground are of this kind.

gymnax's `Environment.step` adds what their training wrappers would: the cut at
`max_steps_in_episode` is `truncated`, never `terminated`, the step's observation is kept
as `final_observation`, and the next episode starts from a fresh `reset` with its own key.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


@struct.dataclass
class EnvState(environment.EnvState):
    raw: Any  # the raw environment's state
    time: int


@struct.dataclass
class EnvParams(environment.EnvParams):
    max_steps_in_episode: int = 1000


class RawStateEnv(environment.Environment):
    """Subclasses set `self.env` (the raw environment), `self.suite`, `self.raw_name` and
    `self.episode_length`."""

    env: Any
    suite: str
    raw_name: str
    episode_length: int = 1000

    @property
    def default_params(self) -> EnvParams:
        return EnvParams(max_steps_in_episode=self.episode_length)

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        state = self.env.reset(key)
        return state.obs, EnvState(raw=state, time=0)

    def step_env(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams):
        # The raw step is deterministic, or draws from a key kept in its state: `key` is unused.
        raw = self.env.step(state.raw, action)
        return raw.obs, EnvState(raw=raw, time=state.time + 1), raw.reward, raw.done > 0.5, {}

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        return state.raw.done > 0.5

    def action_space(self, params: EnvParams | None = None) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (self.env.action_size,), jnp.float32)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (self.env.observation_size,), jnp.float32)

    @property
    def name(self) -> str:
        return f"{self.suite}/{self.raw_name}"

    @property
    def num_actions(self) -> int:
        return self.env.action_size
