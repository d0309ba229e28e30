"""XLand-MiniGrid (`--env xminigrid/NAME`, e.g. xminigrid/MiniGrid-Empty-5x5), through its
own API, as gymnax environments.

`xminigrid.make(NAME)` gives `(env, env_params)`; `env.reset(params, key)` and
`env.step(params, timestep, action)` return a TimeStep whose `step_type` is 2 (LAST) when
an episode ends: with `discount` 0 it ended (`terminated`), with `discount` 1 its time
limit (`params.max_steps`) cut it (`truncated`). gymnax's `Environment.step` starts the
next episode from a fresh `reset` with its own key and keeps the observation the step
reached as `final_observation`. Its EnvParams are XLand's own, so `--env-params max_steps
50` works.

Observations: the agent's egocentric view (7x7x2 for the MiniGrid envs), as float32.
Actions: Discrete(6).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import environment, spaces

from scanrl.common.suites.recipes import Recipe

ACTIONS = "discrete"  # every env of the suite: suites.is_continuous answers without building one


def NAMES() -> list[str]:
    import xminigrid

    return sorted(xminigrid.registered_environments())


class XMiniGridEnv(environment.Environment):
    """One XLand-MiniGrid environment; `self.env` is XLand's own object, and the state its
    TimeStep."""

    def __init__(self, name: str):
        import xminigrid

        super().__init__()
        self.xminigrid_name = name
        self.env, self.params = xminigrid.make(name)

    @property
    def default_params(self) -> Any:
        return self.params

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        timestep = self.env.reset(params, key)
        return timestep.observation.astype(jnp.float32), timestep

    def step_env(self, key: jax.Array, state: Any, action: jax.Array, params: Any):
        # XLand draws its randomness from the key kept in its state: `key` is not used.
        timestep = self.env.step(params, state, action)
        return timestep.observation.astype(jnp.float32), timestep, timestep.reward, \
            self.is_terminated(timestep, params), {}

    def is_terminated(self, state: Any, params: Any) -> jax.Array:
        return (state.step_type == 2) & (state.discount == 0)

    def is_truncated(self, state: Any, params: Any) -> jax.Array:
        return (state.step_type == 2) & (state.discount > 0)

    def action_space(self, params: Any = None) -> spaces.Discrete:
        return spaces.Discrete(self.env.num_actions(params or self.params))

    def observation_space(self, params: Any = None) -> spaces.Box:
        return spaces.Box(
            0.0, 255.0, tuple(self.env.observation_shape(params or self.params)), jnp.float32
        )

    def render_rgb(self, state: Any, params: Any) -> np.ndarray:
        """XLand-MiniGrid's own picture of the whole grid (its "rgb_array" render mode)."""
        return np.asarray(self.env.render(params.replace(render_mode="rgb_array"), state))

    @property
    def name(self) -> str:
        return f"xminigrid/{self.xminigrid_name}"

    @property
    def num_actions(self) -> int:
        return self.env.num_actions(self.params)


def make(name: str) -> tuple[XMiniGridEnv, Any]:
    env = XMiniGridEnv(name)
    return env, env.default_params


# Recipe: XLand-MiniGrid's single-task recurrent PPO, as scanrl's fields, for every env of the
# suite. Its observation encoder embeds each tile and colour id, then runs three 2x2 convolutions of
# 16, 32 and 64: here the ids are read one-hot (an embedding is a linear map of the one-hot code,
# which the first convolution absorbs; 13 codes, XLand's NUM_TILES, covering its 12 colours too)
# into the same convolutions, with the recipe's tanh where XLand's convolutions use relu, and
# scanrl's 64-unit layer before the GRU.
XLAND_PPO = (
    "corl-team/xland-minigrid @ a46e78c, configs/single.yaml (the paper's single-task settings)"
    " over training/train_single_task.py `TrainConfig`, and training/nn.py's encoder; its"
    " direction, previous-action and previous-reward inputs to the GRU are not in scanrl's ppo_rnn"
)
RECIPES: dict[tuple[str, str], Recipe] = {
    ("ppo_rnn", "*"): Recipe(
        XLAND_PPO,
        "fields",
        dict(
            num_envs=16384, num_steps=256, total_timesteps=1_000_000_000, learning_rate=1e-3,
            anneal_lr=True, num_epochs=1, num_minibatches=16, gamma=0.99, gae_lambda=0.95,
            clip_eps=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5, adam_eps=1e-8,
            clip_value_loss=True, normalize_advantages=True, gru_size=1024, head_hidden=(256,),
            activation="tanh", obs_one_hot=13, conv_kernel=2, conv_channels=(16, 32, 64),
        ),
        {},
    ),
}
