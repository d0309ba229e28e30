"""Craftax (`--env craftax/NAME`, e.g. craftax/Craftax-Classic-Symbolic-v1), through Craftax's
own API, as gymnax environments.

Craftax's auto-reset variants build a new world on every step, whether an episode ended or
not (about 40 times the cost of a step). The adapter takes the variant without auto-reset
(`make_craftax_env_from_name(NAME, auto_reset=False)`) and resets optimistically, as Craftax's
baselines do (Matthews et al. 2024): `VecEnv` calls `restart_finished`, which builds
ceil(num_envs / 16) new worlds a step, and every environment whose episode ended starts in one
of them (two that end on the same step may share one).

Craftax reports one `done` for death, lava and its time limit (`max_timesteps`, 10,000 steps
by default; 100,000 in full Craftax). The adapter rebuilds the distinction from the state:
`state.timestep >= max_timesteps` is `truncated`, any other end `terminated` (an agent
that dies on the very last step counts as truncated). `--env-params` sets Craftax's own
EnvParams fields (e.g. max_timesteps).

Observations are Craftax's own: the symbolic forms a flat vector (1,345 values in Classic),
the pixel forms an [H, W, 3] image that reaches the conv torso. Actions: Discrete(17), or
Discrete(43) in full Craftax.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import environment, spaces

from scanrl.common.suites.recipes import Recipe

ACTIONS = "discrete"  # every env of the suite: suites.is_continuous answers without building one

# The forms `make_craftax_env_from_name` builds without auto-reset.
_NAMES = [
    "Craftax-Classic-Pixels-v1",
    "Craftax-Classic-Symbolic-v1",
    "Craftax-Pixels-v1",
    "Craftax-Symbolic-v1",
]


def NAMES() -> list[str]:
    return list(_NAMES)


class CraftaxEnv(environment.Environment):
    """One Craftax environment without auto-reset; `self.env` is Craftax's own object, and its
    state and EnvParams are used as they are. `step` does not reset: `VecEnv` calls
    `restart_finished`."""

    reset_ratio = 16  # Craftax's own optimistic-reset wrapper uses the same ratio
    _render: Any = None  # Craftax's pixel renderer, made at the first picture

    def __init__(self, name: str):
        from craftax.craftax_env import make_craftax_env_from_name

        super().__init__()
        self.craftax_name, self.env = name, make_craftax_env_from_name(name, auto_reset=False)

    @property
    def default_params(self) -> Any:
        return self.env.default_params

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        return self.env.reset_env(key, params)

    def step_env(self, key: jax.Array, state: Any, action: jax.Array, params: Any):
        obs, state, reward, done, _ = self.env.step_env(key, state, action, params)
        return (
            obs, state, jnp.asarray(reward, jnp.float32), done & ~self.is_truncated(state, params),
            {},
        )

    def step(self, key: jax.Array, state: Any, action: jax.Array, params: Any = None):
        """gymnax's six values without the reset: the observation returned is the one reached."""
        params = self.default_params if params is None else params
        obs, state, reward, terminated, info = self.step_env(key, state, action, params)
        truncated = self.is_truncated(state, params)
        return obs, state, reward, terminated, truncated, {**info, "final_observation": obs}

    def restart_finished(
        self, key: jax.Array, done: jax.Array, obs: jax.Array, states: Any, params: Any
    ):
        """obs and states [N, ...] with each `done` [N] environment restarted from one of
        K = ceil(N / reset_ratio) fresh worlds, K whatever number of episodes ended."""
        num_envs = done.shape[0]
        k_starts, k_pick = jax.random.split(key)
        starts = -(-num_envs // self.reset_ratio)
        new_obs, new_states = jax.lax.platform_dependent(
            jax.random.split(k_starts, starts), params,
            cpu=partial(self.fresh_worlds, batched=False),
            default=partial(self.fresh_worlds, batched=True),
        )
        pick = jax.vmap(lambda k: jax.random.randint(k, (), 0, starts))(
            jax.random.split(k_pick, num_envs)
        )

        def restart(new, old):
            return jnp.where(done.reshape(done.shape + (1,) * (old.ndim - 1)), new[pick], old)

        return restart(new_obs, obs), jax.tree.map(restart, new_states, states)

    def fresh_worlds(self, keys: jax.Array, params: Any, batched: bool) -> tuple[jax.Array, Any]:
        """Resets for keys [K]: obs and states [K, ...]. On a CPU one at a time (`batched` False): a
        batched reset runs the world generator's branches as selects, every branch for every world
        (64 worlds: 27 ms against 36 ms on this project's 2-core machine). On an accelerator a loop
        of K resets would launch each reset's kernels K times in a row, so there they are batched,
        as Craftax's own optimistic-reset wrapper does. Both give the same values. Under a vmap
        (several seeds in one program) the CPU's resets still run one at a time: batching them
        over 2 seeds cost 3.7x one seed's steps (0.67 s against 0.18 s; benchmarks/HISTORY.md,
        2026-11-28, 03:34-04:19)."""
        if batched:
            return jax.vmap(partial(self.reset, params=params))(keys)
        # jax.vmap of a lax.map batches the loop's body: under the seeds' vmap each reset would run
        # batched again. sequential_vmap makes a vmap around this loop a loop of loops.
        one_at_a_time = jax.custom_batching.sequential_vmap(
            lambda keys, params: jax.lax.map(partial(self.reset, params=params), keys))
        return one_at_a_time(keys, params)

    def is_truncated(self, state: Any, params: Any) -> jax.Array:
        return state.timestep >= params.max_timesteps

    def action_space(self, params: Any = None) -> spaces.Discrete:
        return spaces.Discrete(int(self.env.num_actions))

    def observation_space(self, params: Any = None) -> spaces.Box:
        space = self.env.observation_space(self.default_params if params is None else params)
        return spaces.Box(0.0, 1.0, tuple(space.shape), jnp.float32)

    def render_rgb(self, state: Any, params: Any) -> np.ndarray:
        """Craftax's own pixel renderer (16-pixel blocks): the agent's view and inventory."""
        if self._render is None:
            if "Classic" in self.craftax_name:
                from craftax.craftax_classic.constants import BLOCK_PIXEL_SIZE_IMG
                from craftax.craftax_classic.renderer import make_craftax_pixel_renderer
            else:
                from craftax.craftax.constants import BLOCK_PIXEL_SIZE_IMG
                from craftax.craftax.renderer import make_craftax_pixel_renderer
            self._render = jax.jit(make_craftax_pixel_renderer(BLOCK_PIXEL_SIZE_IMG))
        return np.asarray(self._render(state)).astype(np.uint8)

    @property
    def name(self) -> str:
        return f"craftax/{self.craftax_name}"

    @property
    def num_actions(self) -> int:
        return int(self.env.num_actions)


def make(name: str) -> tuple[CraftaxEnv, Any]:
    env = CraftaxEnv(name)
    return env, env.default_params


# Recipes: Craftax_Baselines' own settings, as scanrl's fields, for the symbolic envs
BASELINES = "MichaelTMatthews/Craftax_Baselines @ 7ce36fa"
# ppo.py's argparse defaults (ppo.py L669-722) and its network (models/actor_critic.py
# `ActorCritic`: separate actor and critic, three tanh layers of `layer_size` 512, orthogonal init
# with a 0.01 policy head, as scanrl's); clipped value loss, advantages normalised per minibatch, no
# observation or reward normalisation, Adam eps 1e-5 after a global-norm clip of 1.0, lr annealed to
# 0.
PPO = dict(
    num_envs=1024, num_steps=64, total_timesteps=1_000_000_000, learning_rate=2e-4, anneal_lr=True,
    num_epochs=4, num_minibatches=8, gamma=0.99, gae_lambda=0.8, clip_eps=0.2, ent_coef=0.01,
    vf_coef=0.5, max_grad_norm=1.0, adam_eps=1e-5, clip_value_loss=True, normalize_advantages=True,
    normalize_obs=False, normalize_reward=False,
)
PUREJAXQL = "mttga/purejaxql @ 47af6d7"
# (algorithm, fnmatch pattern of env names) -> its recipe (common/suites/recipes.py applies it)
RECIPES: dict[tuple[str, str], Recipe] = {
    ("ppo", "Craftax*-Symbolic-v1"): Recipe(
        BASELINES + ", ppo.py",
        "fields",
        dict(PPO, actor_hidden=(512, 512, 512), critic_hidden=(512, 512, 512), activation="tanh"),
        {},
    ),
    # ppo_rnn.py: the same defaults (L496-535); Dense 512 + relu, a GRU of 512, then actor and
    # critic heads of two relu layers of 512; minibatches split the environments, as scanrl's do
    ("ppo_rnn", "Craftax*-Symbolic-v1"): Recipe(
        BASELINES + ", ppo_rnn.py",
        "fields",
        dict(PPO, encoder_hidden=(512,), gru_size=512, head_hidden=(512, 512), activation="relu"),
        {},
    ),
    # pqn.py: purejaxql's feed-forward PQN for Craftax (purejaxql @ 47af6d7,
    # config/alg/pqn_craftax.yaml; its recurrent form is pqn_rnn_craftax.yaml): one step of 1,024
    # envs per update, one full-batch step, one-step Q-learning (Q_LAMBDA False), four relu layers
    # of 1,024 with layer norm, RAdam, clip 1.0. Its normalised input (NORM_INPUT: a batch
    # renormalisation with running statistics) is --normalize-obs, running statistics frozen
    # during each rollout.
    ("pqn", "Craftax*-Symbolic-v1"): Recipe(
        PUREJAXQL + ", config/alg/pqn_craftax.yaml",
        "fields",
        dict(
            total_timesteps=1_000_000_000, num_envs=1024, num_steps=1, num_epochs=1,
            num_minibatches=1, learning_rate=1e-4, max_grad_norm=1.0, gamma=0.99, q_lambda=0.0,
            epsilon_start=0.1, epsilon_end=0.005, epsilon_fraction=0.2, reward_scale=1.0,
            hidden=(1024,) * 4, normalize_obs=True,
        ),
        {},
    ),
}
