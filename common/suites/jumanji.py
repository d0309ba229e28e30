"""Jumanji environments (`--env jumanji/NAME`, e.g. jumanji/Snake-v1), through Jumanji's own
API, as gymnax environments.

`jumanji.make(NAME)` gives `reset(key) -> (state, timestep)` and `step(state, action) ->
(state, timestep)`; a timestep's `step_type` is LAST when an episode ends, and its
`discount` says how: 0 for a termination, 1 for a truncation. Some environments (Snake)
end at their own `time_limit` with discount 0; there a LAST step at or past `time_limit`
counts as truncated, so a time-limit cut still bootstraps. gymnax's `Environment.step`
starts the next episode from a fresh `reset` with its own key and keeps the observation the
step reached as `final_observation`.

Observations, one rule for every Jumanji environment: the observation's fields in order,
without `action_mask`, each cast to float32 and scaled to [0, 1] where its spec is bounded
(a DiscreteArray such as Snake's `step_count` is divided by its number of values less one;
a BoundedArray by its range). A single field keeps its shape (an [H, W, C] grid reaches the
conv torso); several are flattened and concatenated into one vector (Snake: 12x12x5 grid
and step count, 721 values). The `action_mask` field, where there is one, is the policy's
mask (`action_mask(state, params)`): a masked action is never sampled.

Actions: one discrete choice (DiscreteArray) or a box of reals (BoundedArray); Jumanji's
multi-discrete environments are refused with one sentence.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces

PICTURE_PIXELS = 240  # render_rgb's longer side: scanrl-eval's GIF shows pictures at most 360 x 220


def NAMES() -> list[str]:
    import jumanji

    return sorted(jumanji.registered_environments())


@struct.dataclass
class EnvState(environment.EnvState):
    inner: Any  # Jumanji's state
    last: jax.Array  # the step ended an episode (step_type LAST)
    discount: jax.Array  # the step's discount: 0 at a termination
    action_mask: Any  # [A] bool valid actions, or None where the env has no mask
    time: int


@struct.dataclass
class EnvParams(environment.EnvParams):
    max_steps_in_episode: int = 1000  # the env's own time_limit where it has one


def _fields(observation: Any) -> list[tuple[str, Any]]:
    """(name, value) of an observation's fields in order; a bare array is one field."""
    return (
        list(observation._asdict().items())
        if hasattr(observation, "_asdict")
        else [("observation", observation)]
    )


def _bounds(spec: Any) -> tuple[Any, Any]:
    """(low, range) that scale a field to [0, 1] by its spec's bounds, or (0, 1) where it has
    none or they are not finite."""
    from jumanji import specs

    if isinstance(spec, specs.DiscreteArray):
        return 0.0, float(max(int(spec.num_values) - 1, 1))
    if isinstance(spec, specs.BoundedArray):
        low, high = np.asarray(spec.minimum, np.float32), np.asarray(spec.maximum, np.float32)
        if np.all(np.isfinite(low) & np.isfinite(high) & (high > low)):
            return low, high - low
    return 0.0, 1.0


class JumanjiEnv(environment.Environment):
    """One Jumanji environment; `self.env` is Jumanji's own object."""

    def __init__(self, name: str):
        import jumanji
        from jumanji import specs

        super().__init__()
        try:
            self.env = jumanji.make(name)
        except Exception as error:  # e.g. Sokoban fetches its levels from the Hugging Face Hub
            raise ValueError(
                f"--env jumanji/{name}: Jumanji could not build it here "
                f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})."
            ) from None
        self.jumanji_name = name
        action = self.env.action_spec
        self.discrete = isinstance(action, specs.DiscreteArray)
        if not self.discrete and not (
            isinstance(action, specs.BoundedArray) and jnp.issubdtype(action.dtype, jnp.floating)
        ):
            raise ValueError(
                f"--env jumanji/{name}: its actions are a {type(action).__name__} of shape"
                f" {tuple(action.shape)}; scanrl's policies take one discrete choice or a box of"
                " reals."
            )
        self.time_limit = getattr(self.env, "time_limit", None)
        example = self.env.observation_spec.generate_value()
        self.has_mask = any(field == "action_mask" for field, _ in _fields(example))
        self.bounds = {
            name: _bounds(getattr(self.env.observation_spec, name, None))
            for name, _ in _fields(example)
        }
        self.obs_shape = tuple(self.observe(example).shape)

    def observe(self, observation: Any) -> jax.Array:
        """Jumanji's observation -> the float32 array the networks read (the module's rule)."""
        parts = [(jnp.asarray(value, jnp.float32) - self.bounds[name][0]) / self.bounds[name][1]
                 for name, value in _fields(observation) if name != "action_mask"]
        if len(parts) == 1:
            return parts[0].reshape(parts[0].shape or (1,))
        return jnp.concatenate([part.reshape(-1) for part in parts])

    @property
    def default_params(self) -> EnvParams:
        return EnvParams(max_steps_in_episode=int(self.time_limit or 1000))

    def _state(self, inner: Any, timestep: Any, time: Any) -> EnvState:
        mask = dict(_fields(timestep.observation)).get("action_mask")
        return EnvState(
            inner=inner, last=timestep.last(), discount=timestep.discount, action_mask=mask,
            time=time,
        )

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        inner, timestep = self.env.reset(key)
        return self.observe(timestep.observation), self._state(inner, timestep, 0)

    def step_env(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams):
        # Jumanji keeps its randomness in its state: `key` is not used.
        inner, timestep = self.env.step(state.inner, action)
        new = self._state(inner, timestep, state.time + 1)
        return self.observe(timestep.observation), new, timestep.reward.astype(jnp.float32), \
            self.is_terminated(new, params), {}

    def _own_limit(self, state: EnvState) -> jax.Array:
        return jnp.asarray(False) if self.time_limit is None else state.time >= self.time_limit

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        return state.last & (state.discount == 0) & ~self._own_limit(state)

    def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
        cut = state.last & ((state.discount > 0) | self._own_limit(state))
        return cut | (state.time >= params.max_steps_in_episode)

    def action_mask(self, state: EnvState, params: EnvParams | None = None) -> jax.Array:
        return state.action_mask

    def action_space(self, params: EnvParams | None = None):
        action = self.env.action_spec
        if self.discrete:
            return spaces.Discrete(int(action.num_values))
        return spaces.Box(
            jnp.asarray(action.minimum, jnp.float32), jnp.asarray(action.maximum, jnp.float32),
            tuple(action.shape), jnp.float32,
        )

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, self.obs_shape, jnp.float32)

    _figure: Any = None  # the viewer's figure, once sized for pictures (render_rgb)

    def render_rgb(self, state: EnvState, params: EnvParams) -> np.ndarray:
        """Jumanji's own picture (its matplotlib viewer), read back from the figure it draws,
        [H, W, 3] about PICTURE_PIXELS high."""
        import matplotlib.pyplot as plt

        viewer = getattr(self.env, "_viewer", None)
        if callable(getattr(viewer, "_display", None)):
            # Its "human" mode draws the figure for a window too; drawing it once, here, halves the
            # cost.
            viewer._display = lambda figure: None
        self.env.render(state.inner)
        figure = plt.gcf()
        if figure is not self._figure:
            # Drawn at the size the GIF shows (not 1000 pixels shrunk to ~220), and laid out once:
            # constrained layout's per-picture pass cost more than the drawing itself.
            figure.set_dpi(PICTURE_PIXELS / max(figure.get_size_inches()))
            figure.canvas.draw()
            figure.set_layout_engine("none")
            self._figure = figure
        figure.canvas.draw()
        return np.asarray(figure.canvas.buffer_rgba())[..., :3].copy()

    @property
    def name(self) -> str:
        return f"jumanji/{self.jumanji_name}"

    @property
    def num_actions(self) -> int:
        action = self.env.action_spec
        return int(action.num_values) if self.discrete else math.prod(action.shape)


def make(name: str) -> tuple[JumanjiEnv, EnvParams]:
    env = JumanjiEnv(name)
    return env, env.default_params
