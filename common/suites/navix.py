"""Navix grid worlds (`--env navix/NAME`, e.g. navix/Navix-Empty-5x5-v0), through Navix's own
API, as gymnax environments.

`navix.make(NAME)` gives `reset(key) -> Timestep` and `step(timestep, action) -> Timestep`;
the Timestep's `step_type` is 0 while an episode runs, 1 when Navix's time limit cut it
(`max_steps`, 100 by default) and 2 when it ended. Those flags are used as they are:
`step_type == 1` is `truncated`, `step_type == 2` is `terminated`, and gymnax's
`Environment.step` starts the next episode from a fresh `reset` with its own key, keeping
the observation the step reached as `final_observation`. (Navix itself would reset on the
next call instead, which returns the terminal observation as the next one's first.)

Observations: the environment's default (for the Empty rooms a 5x5x3 symbolic grid), as
float32. Actions: Discrete(7).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces

from scanrl.common.suites.recipes import Recipe

ACTIONS = "discrete"  # every env of the suite: suites.is_continuous answers without building one


def NAMES() -> list[str]:
    import navix

    return sorted(navix.registry())


@struct.dataclass
class EnvState(environment.EnvState):
    timestep: Any  # navix.Timestep
    time: int


@struct.dataclass
class EnvParams(environment.EnvParams):
    max_steps_in_episode: int = 100  # Navix's own limit applies too: the shorter of the two cuts


class NavixEnv(environment.Environment):
    """One Navix environment; `self.env` is Navix's own object."""

    def __init__(self, name: str):
        import navix

        super().__init__()
        self.navix_name, self.env = name, navix.make(name)
        self._render = None  # render_rgb's jitted picture, made at the first one
        # Navix's state keeps a sprite picture of its grid (`state.cache`, 5 KB on a 5x5 grid) that
        # only RGB observations read. Built at each reset, selected on each step and carried, it
        # took half of PPO's run on DoorKey-5x5; so the state carries an empty one, and a picture
        # builds its own.
        self.rgb_observations = self.env.observation_fn in (
            navix.observations.rgb,
            navix.observations.rgb_first_person,
        )
        tile = navix.rendering.cache.TILE_SIZE
        self.no_cache = navix.rendering.cache.RenderingCache(
            jnp.zeros((0, tile, tile, 3), jnp.uint8)
        )

    @property
    def default_params(self) -> EnvParams:
        return EnvParams(max_steps_in_episode=int(self.env.max_steps))

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        timestep = self.env.reset(key)
        if not self.rgb_observations:
            timestep = timestep.replace(state=timestep.state.replace(cache=self.no_cache))
        return timestep.observation.astype(jnp.float32), EnvState(timestep=timestep, time=0)

    def step_env(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams):
        # Navix draws its randomness from the key kept in its state: `key` is not used. Navix's
        # public `step` is `lax.cond(finished, reset, _step)`; gymnax's `step` has already reset
        # a finished episode, so the timestep here never is finished, and under vmap that cond
        # would compute a second, unused reset on every step.
        timestep = self.env._step(state.timestep, action)
        new = EnvState(timestep=timestep, time=state.time + 1)
        return (
            timestep.observation.astype(jnp.float32), new, timestep.reward,
            self.is_terminated(new, params), {},
        )

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        return state.timestep.step_type == 2

    def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
        return (state.timestep.step_type == 1) | (state.time >= params.max_steps_in_episode)

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(int(self.env.action_space.maximum) + 1)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        space = self.env.observation_space
        return spaces.Box(0.0, float(space.maximum), tuple(space.shape), jnp.float32)

    def render_rgb_jax(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Navix's own picture of the whole grid (`navix.observations.rgb`), [H, W, 3] uint8;
        traceable, so scanrl-eval --gif draws a whole episode in one jitted, vmapped call."""
        import navix

        navix_state = jax.tree.map(jnp.asarray, state.timestep.state)  # it needs jax arrays
        if not self.rgb_observations:
            navix_state = navix_state.replace(
                cache=navix.rendering.cache.RenderingCache.init(navix_state.grid)
            )
        return navix.observations.rgb(navix_state)

    def render_rgb(self, state: EnvState, params: EnvParams) -> np.ndarray:
        """The same picture of one state, [H, W, 3]; jitted (op by op, a picture takes seconds to
        start)."""
        if self._render is None:
            self._render = jax.jit(self.render_rgb_jax)
        return np.asarray(self._render(state, params))

    @property
    def name(self) -> str:
        return f"navix/{self.navix_name}"

    @property
    def num_actions(self) -> int:
        return int(self.env.action_space.maximum) + 1


def make(name: str) -> tuple[NavixEnv, EnvParams]:
    env = NavixEnv(name)
    return env, env.default_params


# Recipe: Navix's own PPO, as scanrl's fields, for every Navix env. 1e6 frames of 16
# environments: a CPU's sizes; gamma is the env's own 0.99; its MLPs read the grid flattened
# (scanrl's `auto` torso would take it for an image)
NAVIX_PPO = (
    "epignatelli/navix @ 03b056a, navix/agents/ppo.py `PPOHparams` and agents/models.py"
    " `ActorCritic`"
)
RECIPES: dict[tuple[str, str], Recipe] = {
    ("ppo", "*"): Recipe(
        NAVIX_PPO,
        "fields",
        dict(
            num_envs=16, num_steps=128, total_timesteps=1_000_000, learning_rate=2.5e-4,
            anneal_lr=True, num_epochs=1, num_minibatches=8, gamma=0.99, gae_lambda=0.95,
            clip_eps=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5, clip_value_loss=True,
            normalize_advantages=True, actor_hidden=(64, 64), critic_hidden=(64, 64),
            activation="tanh", torso="mlp",
        ),
        {},
    ),
}
