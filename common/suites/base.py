"""The gymnax environment over a raw environment of the Brax kind: `reset(key) -> state`,
`step(state, action) -> state` with `state.obs`, `state.reward` and `state.done` (a
termination), `action_size` and `observation_size`, and no time limit of its own. Brax and
MuJoCo Playground are of this kind.

`state.obs` is one vector, or Playground's locomotion dict {"state": what the policy may see,
"privileged_state": what only a critic may (e.g. the base's true velocity and the contact
forces)}. The dict becomes one vector [state, privileged_state], and `policy_obs_size` is the
length of state: every algorithm's policy reads only that first part, and PPO's value net reads
privileged_state with `--critic-obs privileged_state` (Brax's `value_obs_key`).

`step` adds what their training wrappers would: the cut at `max_steps_in_episode` is
`truncated`, never `terminated`, and the step's observation is kept as `final_observation`.
It does not reset: `VecEnv` returns a finished environment to its cached first state, as
Brax's `AutoResetWrapper` does, and draws the caches anew every `cached_starts` steps per
environment (common/envs.py). A reset of these envs can cost hundreds of physics steps
(Playground's CheetahRun settles for 200), and gymnax's own `step` would compute one for
every environment on every step.
"""

from __future__ import annotations

import ctypes.util
import functools
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces

# Without a display, MuJoCo's renderer (`scanrl-eval --gif`) draws through EGL, as Brax's and
# Playground's own notebooks do; MuJoCo reads this when first imported, and only a picture
# needs it. Where libEGL is missing, MuJoCo's import itself fails with "egl" (not only a
# picture), so rendering is switched off there and the picture fails with one sentence.
if not os.environ.get("DISPLAY"):
    os.environ.setdefault("MUJOCO_GL", "egl" if ctypes.util.find_library("EGL") else "disable")


@struct.dataclass
class EnvState(environment.EnvState):
    raw: Any  # the raw environment's state
    time: int


@struct.dataclass
class EnvParams(environment.EnvParams):
    max_steps_in_episode: int = 1000


class RawStateEnv(environment.Environment):
    """Subclasses set `self.env` (the raw environment), `self.suite`, `self.raw_name` and
    `self.episode_length`, and give the MuJoCo model and a state's joint positions and
    velocities (`mujoco_model`, `joints`) for pictures."""

    env: Any
    suite: str
    raw_name: str
    episode_length: int = 1000
    cached_starts: int = 10_000  # steps per environment between new starts: ten 1000-step episodes
    _renderer: Any = None

    def render_rgb(self, state: EnvState, params: EnvParams) -> np.ndarray:
        """A picture [240, 320, 3] of one state, by MuJoCo's renderer (its default camera)."""
        import mujoco

        model = self.mujoco_model()
        if self._renderer is None:
            self._renderer = mujoco.Renderer(model, height=240, width=320)
        data = mujoco.MjData(model)
        data.qpos, data.qvel = self.joints(state.raw)
        mujoco.mj_forward(model, data)
        self._renderer.update_scene(data)
        return self._renderer.render()

    @property
    def default_params(self) -> EnvParams:
        return EnvParams(max_steps_in_episode=self.episode_length)

    def vector(self, obs: Any) -> jax.Array:
        """The raw observation as one vector: itself, or [state, privileged_state] of a dict."""
        if not isinstance(obs, dict):
            return obs
        if not set(obs) <= {"state", "privileged_state"}:
            raise ValueError(
                f"--env {self.name}: its observation has the parts {sorted(obs)}; scanrl takes one "
                "vector, or Playground's {state, privileged_state}."
            )
        return jnp.concatenate(
            [obs["state"], obs.get("privileged_state", obs["state"][..., :0])], axis=-1
        )

    @functools.cached_property
    def policy_obs_size(self) -> int | None:
        """The length of the observation's `state` part, which is all a policy reads; None where the
        raw observation is one vector (the policy reads all of it)."""
        obs = jax.eval_shape(self.env.reset, jax.random.key(0)).obs
        return obs["state"].shape[-1] if isinstance(obs, dict) else None

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        state = self.env.reset(key)
        return self.vector(state.obs), EnvState(raw=state, time=0)

    def step_env(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams):
        # The raw step is deterministic, or draws from a key kept in its state: `key` is unused.
        raw = self.env.step(state.raw, action)
        return (
            self.vector(raw.obs), EnvState(raw=raw, time=state.time + 1), raw.reward,
            raw.done > 0.5, {},
        )

    def step(
        self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams | None = None
    ):
        """gymnax's six values without the reset: the observation returned is the one reached."""
        params = self.default_params if params is None else params
        obs, state, reward, terminated, info = self.step_env(key, state, action, params)
        truncated = self.is_truncated(state, params)
        return obs, state, reward, terminated, truncated, {**info, "final_observation": obs}

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        return state.raw.done > 0.5

    def action_space(self, params: EnvParams | None = None) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (self.env.action_size,), jnp.float32)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, self.obs_shape, jnp.float32)

    @functools.cached_property
    def obs_shape(self) -> tuple[int, ...]:
        """From the shapes of an abstract reset: Brax's `observation_size` runs a real reset,
        un-jitted, every time it is read (14.5 s for ant on a 2-core CPU)."""
        return tuple(
            jax.eval_shape(
                lambda key: self.vector(self.env.reset(key).obs), jax.random.key(0)
            ).shape
        )

    @property
    def name(self) -> str:
        return f"{self.suite}/{self.raw_name}"

    @property
    def num_actions(self) -> int:
        return self.env.action_size
