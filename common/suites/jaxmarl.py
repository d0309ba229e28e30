"""JaxMARL's multi-agent environments (`--env jaxmarl/NAME`), through JaxMARL's own API, as
gymnax environments of several agents.

Names: the discrete-action MPE tasks by JaxMARL's ids (jaxmarl/MPE_simple_spread_v3), SMAX
against JaxMARL's heuristic enemies by map (jaxmarl/SMAX_2s3z, jaxmarl/SMAX_smacv2_5_units),
Overcooked by layout (jaxmarl/overcooked_cramped_room) and Hanabi (jaxmarl/hanabi).

An env of M agents returns leaves [M, ...], one row per agent in JaxMARL's agent order, and
says so by `num_agents` (suites.EnvHooks): VecEnv steps N of them as N * M rows, so an algorithm
with one parameter set for every row is its independent-learner form (PPO: IPPO).

Each row's observation is [the agent's own observation, zero-padded to the widest agent's | its
id | the world state | its id], the ids one-hot with the option agent_id 1, else absent. The
policy reads the first two parts (`policy_obs_size`); a critic reading the other two (ppo.py's
--critic-obs privileged_state) is MAPPO's centralised critic. The world state is SMAX's own
`world_state`, elsewhere every agent's observation concatenated (as JaxMARL's MAPPO baselines
build it). With the option world_state 0 a row is the first two parts alone: where nothing
reads the world state (IPPO, PQN: the recipes of ppo.py and pqn.py set it) no step builds,
stores or copies it, which on Overcooked's image observations is most of a row.

Ends: JaxMARL's `step_env` runs without its auto-reset, which would lose the observation an
episode ended in; gymnax's `step` resets and keeps it as `final_observation`. An episode ends
for every row at once, when JaxMARL's dones["__all__"] is set: at the time limit it is
`truncated` (MPE and Overcooked end only there), at the game's own end (a SMAX battle won or
lost, a Hanabi game over) `terminated`. The option time_limit_as_termination 1 reports the
time limit as a termination, as JaxMARL's baselines treat it, to measure what that costs.

Actions: one discrete choice per agent. The policy's mask (`action_mask`) is SMAX's available
actions, Hanabi's legal moves, and for agents with fewer actions than the widest (MPE
simple_world_comm's lead adversary has 20, moves times messages, its other agents 5) the actions
they do not have. Rewards: each agent's own. Overcooked's shaped
reward (JaxMARL's `shaped_reward`: ingredients placed, dishes picked up, soup picked up) is added
with the option shaping 1, at a weight that falls linearly from 1 to 0 over each environment's
first N steps with shaping_anneal N (JaxMARL's IPPO baseline anneals it over REW_SHAPING_HORIZON
steps counted over all its environments: 2.5e6 over 16, N = 156250 here), kept at 1 without.
The weight is the env parameter `shaping` (`--env-params shaping 0.5` scales it); evaluations
score the task alone (`evaluation_params` sets it to 0), and training reports each episode's
task return as `task_return` beside its shaped `episode_return`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces

from scanrl.common.suites.recipes import Recipe

OPTIONS = {"agent_id": ("0", "1"), "world_state": ("0", "1"),
           "time_limit_as_termination": ("0", "1"), "shaping": ("0", "1"),
           "shaping_anneal": "a whole number of steps, 0 or more"}
ACTIONS = "discrete"
# MPE tasks with discrete actions (made with action_type Discrete; the facmac variants have none)
MPE = ("simple", "simple_tag", "simple_world_comm", "simple_spread", "simple_crypto",
       "simple_speaker_listener", "simple_push", "simple_adversary", "simple_reference")

JAXMARL = "FLAIROx/JaxMARL @ c793d09, baselines/"
# IPPO/config/ippo_ff_mpe.yaml's and ippo_ff_overcooked.yaml's PPO, the same in both: 16 envs x
# 128 steps, 4 epochs x 4 minibatches, tanh 64 x 64
IPPO_FF = dict(num_envs=16, num_steps=128, num_epochs=4, num_minibatches=4, learning_rate=2.5e-4,
               anneal_lr=True, gamma=0.99, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.01,
               vf_coef=0.5, max_grad_norm=0.5, adam_eps=1e-5, activation="tanh",
               actor_hidden=(64, 64), critic_hidden=(64, 64))
# Independent learners' recipes (IPPO's, PQN's) leave the world state out of the rows
# (world_state 0): nothing of theirs reads it. MAPPO on them: --env-options world_state 1.
# (algorithm, fnmatch pattern of env names) -> JaxMARL's own baseline settings, name by name
RECIPES: dict[tuple[str, str], Recipe] = {
    ("ppo", "MPE_*"): Recipe(JAXMARL + "IPPO/config/ippo_ff_mpe.yaml", "fields",
                             dict(IPPO_FF, total_timesteps=10_000_000),
                             dict(env_options=("world_state", "0"))),
    # 5e6 steps, its shaped reward annealed from 1 to 0 over REW_SHAPING_HORIZON 2.5e6 steps of
    # its 16 environments: 156,250 each
    ("ppo", "overcooked_*"): Recipe(
        JAXMARL + "IPPO/config/ippo_ff_overcooked.yaml", "fields",
        dict(IPPO_FF, total_timesteps=5_000_000),
        dict(env_options=("shaping_anneal", "156250", "world_state", "0"))),
    # IPPO/config/ippo_rnn_smax.yaml: recurrent IPPO, 128 envs x 128 steps, a 128-unit relu
    # encoder, GRU and head, one GRU for both heads; MAPPO (--critic-obs privileged_state) is
    # MAPPO/config/mappo_homogenous_rnn_smax.yaml with lr 2e-3, clip 0.2 and no entropy bonus
    ("ppo_rnn", "SMAX_*"): Recipe(
        JAXMARL + "IPPO/config/ippo_rnn_smax.yaml", "fields",
        dict(total_timesteps=10_000_000, num_envs=128, num_steps=128, num_epochs=4,
             num_minibatches=4, learning_rate=4e-3, anneal_lr=True, gamma=0.99, gae_lambda=0.95,
             clip_eps=0.05, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.25, adam_eps=1e-5,
             activation="relu", encoder_hidden=(128,), gru_size=128, head_hidden=(128,)), {}),
    # QLearning/config/alg/pqn_vdn_ff_mpe.yaml: VDN, 256 envs x 16 steps, 2 x 256 with layer
    # norm, epsilon 1 -> 0.1 over 10%, lr 5e-4 constant (RAdam), gamma 0.9, lambda 0.3
    ("pqn", "MPE_*"): Recipe(
        JAXMARL + "QLearning/config/alg/pqn_vdn_ff_mpe.yaml", "fields",
        dict(vdn=True, total_timesteps=10_000_000, num_envs=256, num_steps=16, num_epochs=4,
             num_minibatches=16, learning_rate=5e-4, anneal_lr=False, optimizer="radam",
             max_grad_norm=1.0, gamma=0.9, q_lambda=0.3, epsilon_start=1.0, epsilon_end=0.1,
             epsilon_fraction=0.1, reward_scale=1.0, hidden=(256, 256)),
        # its CTRolloutManager adds each agent's one-hot id to the agent's observation
        dict(env_options=("agent_id", "1", "world_state", "0"))),
    # QLearning/config/alg/pqn_vdn_rnn_mpe.yaml: the feedforward recipe's values, 2e6 steps, the
    # two 256-unit layers before a GRU of 256 (MEMORY_WINDOW 0: no burn-in, as pqn_rnn.py)
    ("pqn_rnn", "MPE_*"): Recipe(
        JAXMARL + "QLearning/config/alg/pqn_vdn_rnn_mpe.yaml", "fields",
        dict(vdn=True, total_timesteps=2_000_000, num_envs=256, num_steps=16, num_epochs=4,
             num_minibatches=16, learning_rate=5e-4, anneal_lr=False, optimizer="radam",
             max_grad_norm=1.0, gamma=0.9, q_lambda=0.3, epsilon_start=1.0, epsilon_end=0.1,
             epsilon_fraction=0.1, reward_scale=1.0, hidden=(256, 256), gru_size=256),
        dict(env_options=("agent_id", "1", "world_state", "0"))),
}


def _jaxmarl():
    """The jaxmarl package, imported without the lines its import prints (its MABrax module sets
    sys.stdout back to sys.__stdout__ while importing, so both are swapped)."""
    import io
    import sys
    saved = sys.stdout, sys.__stdout__
    sys.stdout = sys.__stdout__ = io.StringIO()
    try:
        import jaxmarl
    finally:
        sys.stdout, sys.__stdout__ = saved
    return jaxmarl


def _mpe_ids() -> list[str]:
    _jaxmarl()
    from jaxmarl.registration import registered_envs
    return [env_id for env_id in registered_envs
            if env_id.startswith("MPE_") and env_id[4:].rsplit("_", 1)[0] in MPE]


def NAMES() -> list[str]:
    _jaxmarl()
    from jaxmarl.environments.overcooked import overcooked_layouts
    from jaxmarl.environments.smax.smax_env import MAP_NAME_TO_SCENARIO
    return (_mpe_ids() + [f"SMAX_{m}" for m in MAP_NAME_TO_SCENARIO]
            + [f"overcooked_{layout}" for layout in overcooked_layouts] + ["hanabi"])


@struct.dataclass
class EnvState(environment.EnvState):
    inner: Any  # JaxMARL's state
    mask: jax.Array  # [M, A] bool: the actions each agent may take now
    game_over: jax.Array  # bool: the game ended the episode (a battle's end, Hanabi's)
    cut: jax.Array  # bool: the time limit ended it
    time: int
    # steps this environment has taken over all its episodes (a reset keeps it): the clock of
    # Overcooked's shaping anneal
    steps: jax.Array  # int32
    task_return: jax.Array  # [M]: the running episode's return without shaping, each agent's


@struct.dataclass
class EnvParams(environment.EnvParams):
    max_steps_in_episode: int = 1_000_000  # the env's own time limit ends its episodes


@struct.dataclass
class OvercookedParams(EnvParams):
    shaping: float = 0.0  # the shaped reward's weight at the start (options shaping 1: 1)
    shaping_anneal: int = 0  # steps per environment over which it falls to 0; 0: it stays


class MultiAgentEnv(environment.Environment):
    """One JaxMARL environment of `num_agents` agents; `self.env` is JaxMARL's own object."""

    def __init__(self, name: str, options: dict[str, str] | None = None):
        jaxmarl = _jaxmarl()
        super().__init__()
        anneal = _steps((options or {}).get("shaping_anneal", "0"))
        options = _flags({k: v for k, v in (options or {}).items() if k != "shaping_anneal"})
        self.agent_id = options.get("agent_id", False)
        self.world_state = options.get("world_state", True)
        self.limit_terminates = options.get("time_limit_as_termination", False)
        self.family, self.jaxmarl_name = _family(name)
        shaping = options.get("shaping", anneal > 0)
        if anneal and not shaping:
            raise ValueError(f"--env-options shaping 0 shaping_anneal {anneal}: an anneal of "
                             "the shaped reward needs it on; leave shaping out or give 1.")
        for option, given in (("shaping", options.get("shaping")), ("shaping_anneal", anneal)):
            if given and self.family != "overcooked":
                raise ValueError(f"--env-options {option}: jaxmarl/{name} has no shaped reward; "
                                 "only Overcooked's layouts have one.")
        # the shaped reward's weight is an env parameter, which evaluations set to 0
        self.params = (OvercookedParams(shaping=float(shaping), shaping_anneal=anneal)
                       if self.family == "overcooked" else EnvParams())
        if self.family == "smax":
            from jaxmarl.environments.smax import map_name_to_scenario
            self.env = jaxmarl.make("HeuristicEnemySMAX",
                                    scenario=map_name_to_scenario(name[len("SMAX_"):]))
        elif self.family == "overcooked":
            from jaxmarl.environments.overcooked import overcooked_layouts
            self.env = jaxmarl.make("overcooked",
                                    layout=overcooked_layouts[name[len("overcooked_"):]])
        elif self.family == "mpe":  # asked for discrete actions (simple_world_comm's default)
            from jaxmarl.environments.mpe.default_params import DISCRETE_ACT
            self.env = jaxmarl.make(name, action_type=DISCRETE_ACT)
        else:
            self.env = jaxmarl.make(name)
        # JaxMARL's own time limit, and one step more: MPE checks it before counting the step, so
        # its episodes last 26 steps (Hanabi has none: a game ends within a few hundred turns)
        self.episode_limit = int(getattr(self.env, "max_steps", None) or 999) + 1
        self.agents = list(self.env.agents)
        self.num_agents = len(self.agents)
        # (Hanabi's spaces give a bare int for a shape)
        self.obs_dims = [int(np.prod(self.env.observation_space(a).shape)) for a in self.agents]
        self.action_counts = [int(self.env.action_space(a).n) for a in self.agents]
        self.max_actions = max(self.action_counts)
        self.own_dim = max(self.obs_dims) + (self.num_agents if self.agent_id else 0)
        self.policy_obs_size = self.obs_dim = self.own_dim  # the policy reads its own part
        # Overcooked's observations are uint8 images, a quarter of the float rows' bytes: `step`
        # chooses between the stepped and the reset ones before making rows of them (the same
        # rows to the bit). Float observations become rows first: chosen first, XLA fuses MPE's
        # observation arithmetic otherwise and about 1% of its rows move by one ulp
        first = jax.eval_shape(lambda key: self.env.reset(key)[0], jax.random.key(0))
        self.integer_obs = all(jnp.issubdtype(first[a].dtype, jnp.integer) for a in self.agents)
        if self.world_state:  # and a centralised critic the rest: [world state | id]
            world = jax.eval_shape(lambda key: self._world_state(*self.env.reset(key)),
                                   jax.random.key(0))
            self.obs_dim += world.shape[-1] + self.own_dim - max(self.obs_dims)

    # --- observations, masks and ends, JaxMARL's dicts to rows [M, ...] ------------------------
    def _world_state(self, obs: dict, state: Any) -> jax.Array:
        """The world state [W]: SMAX's own, elsewhere every agent's observation concatenated."""
        if "world_state" in obs:
            return obs["world_state"].reshape(-1).astype(jnp.float32)
        return jnp.concatenate([obs[a].reshape(-1).astype(jnp.float32) for a in self.agents])

    def observe(self, obs: dict, state: Any) -> jax.Array:
        """JaxMARL's observations -> rows [M, obs_dim] (the module's rule)."""
        width = max(self.obs_dims)
        own = jnp.stack([jnp.pad(obs[a].reshape(-1).astype(jnp.float32), (0, width - d))
                         for a, d in zip(self.agents, self.obs_dims)])
        ids = [jnp.eye(self.num_agents)] if self.agent_id else []
        if not self.world_state:
            return jnp.concatenate([own, *ids], axis=-1)
        world = self._world_state(obs, state)
        world = jnp.broadcast_to(world, (self.num_agents,) + world.shape)
        return jnp.concatenate([own, *ids, world, *ids], axis=-1)

    def _mask(self, inner: Any) -> jax.Array:
        """[M, A] bool: the suite's own available actions, and no action an agent lacks."""
        have = jnp.arange(self.max_actions)[None] < jnp.array(self.action_counts)[:, None]
        if self.family == "smax":
            avail = self.env.get_avail_actions(inner)
        elif self.family == "hanabi":
            avail = self.env.get_legal_moves(inner)
        else:
            return have
        return have & jnp.stack([avail[a].astype(bool) for a in self.agents])

    def _game_over(self, inner: Any) -> jax.Array:
        """The episode ended by the game itself: a SMAX battle won or lost, Hanabi's end."""
        if self.family == "smax":
            alive, allies = inner.state.unit_alive, self.env.num_allies
            return ~alive[:allies].any() | ~alive[allies:].any()
        return jnp.asarray(self.family == "hanabi")

    # --- gymnax's Environment ------------------------------------------------------------------
    @property
    def default_params(self) -> EnvParams:
        return self.params

    def evaluation_params(self, params: EnvParams) -> EnvParams:
        """What an evaluation scores: the task alone, without Overcooked's shaped reward."""
        return params.replace(shaping=0.0) if isinstance(params, OvercookedParams) else params

    def shaping_weight(self, steps: jax.Array, params: OvercookedParams) -> jax.Array:
        """The shaped reward's weight after `steps` steps of an environment: params.shaping,
        falling linearly to 0 over params.shaping_anneal steps (0: constant)."""
        left = 1.0 - steps / jnp.maximum(params.shaping_anneal, 1)
        return params.shaping * jnp.where(params.shaping_anneal > 0, jnp.clip(left, 0.0, 1.0), 1.0)

    def _start(self, key: jax.Array) -> tuple[dict, EnvState]:
        """A new episode: (JaxMARL's observation dict, the state)."""
        obs, inner = self.env.reset(key)
        return obs, EnvState(inner=inner, mask=self._mask(inner), game_over=jnp.asarray(False),
                             cut=jnp.asarray(False), time=0, steps=jnp.asarray(0, jnp.int32),
                             task_return=jnp.zeros(self.num_agents))

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        obs, state = self._start(key)
        return self.observe(obs, state.inner), state

    def step_env(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams):
        obs, new, reward, terminated, info = self._transition(key, state, action, params)
        return self.observe(obs, new.inner), new, reward, terminated, info

    def _transition(self, key: jax.Array, state: EnvState, action: jax.Array,
                    params: EnvParams) -> tuple[dict, EnvState, jax.Array, jax.Array, dict]:
        """step_env with JaxMARL's observation dict in place of the rows."""
        actions = {a: action[i] for i, a in enumerate(self.agents)}
        obs, inner, reward, dones, info = self.env.step_env(key, state.inner, actions)
        task = jnp.stack([reward[a] for a in self.agents]).astype(jnp.float32)
        reward = task
        if self.family == "overcooked":
            reward = task + self.shaping_weight(state.steps, params) * jnp.stack(
                [info["shaped_reward"][a] for a in self.agents])
        # JaxMARL's dones["__all__"] ends the episode; what ended it is the game's own state
        over = dones["__all__"]
        game_over = over & self._game_over(inner)
        new = EnvState(inner=inner, mask=self._mask(inner), time=state.time + 1,
                       game_over=game_over, cut=over & ~game_over, steps=state.steps + 1,
                       task_return=state.task_return + task)
        terminated = self.is_terminated(new, params)
        info = {}
        if self.family == "smax":  # a battle won: every enemy down, an ally standing
            alive, allies = inner.state.unit_alive, self.env.num_allies
            won = over & alive[:allies].any() & ~alive[allies:].any()
            info["outcomes"] = {"win_rate": jnp.full(self.num_agents, won, jnp.float32)}
        if self.family == "overcooked":  # the return of an episode that ends here, unshaped
            info["outcomes"] = {"task_return": new.task_return}
        return obs, new, reward, jnp.broadcast_to(terminated, (self.num_agents,)), info

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """The game ended it (or, with time_limit_as_termination, the time limit too)."""
        return state.game_over | (self.limit_terminates & state.cut)

    def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """[M]: the time limit cut the episode, which the game had not ended."""
        cut = (state.cut & (not self.limit_terminates)) | (
            state.time >= params.max_steps_in_episode)
        return jnp.broadcast_to(cut, (self.num_agents,))

    def step(self, key: jax.Array, state: EnvState, action: jax.Array,
             params: EnvParams | None = None):
        """gymnax's step (auto-reset, `final_observation`) with the episode's end for all rows
        [M] at once."""
        params = self.default_params if params is None else params
        key_step, key_reset = jax.random.split(key)
        raw_st, state_st, reward, terminated, info = self._transition(key_step, state, action,
                                                                      params)
        truncated = self.is_truncated(state_st, params)
        done = terminated[0] | truncated[0]
        raw_re, state_re = self._start(key_reset)
        state_re = state_re.replace(steps=state_st.steps)  # the anneal's clock runs on
        obs_st = self.observe(raw_st, state_st.inner)
        pick = lambda new, old: jax.tree.map(  # noqa: E731
            lambda x, y: jax.lax.select(done, x, y), new, old)
        if self.integer_obs:  # choose among JaxMARL's own arrays, then make the rows once
            state, raw = pick((state_re, raw_re), (state_st, raw_st))
            obs = self.observe(raw, state.inner)
        else:
            state, obs = pick((state_re, self.observe(raw_re, state_re.inner)), (state_st, obs_st))
        info = {**info, "terminated": terminated, "truncated": truncated,
                "final_observation": obs_st}
        return obs, state, reward, terminated, truncated, info

    def team_reward(self, reward: jax.Array) -> jax.Array:
        """[..., M] -> [...]: MPE's agents' rewards summed (JaxMARL's global reward); SMAX's,
        Overcooked's and Hanabi's agents share theirs, taken once."""
        return reward.sum(-1) if self.family == "mpe" else reward[..., 0]

    def render_rgb(self, state: EnvState, params: EnvParams) -> Any:
        """A picture [H, W, 3] uint8 of one state: Overcooked's own grid renderer; MPE's entities
        as JaxMARL's visualiser draws them (its positions, radii and colours); None elsewhere."""
        inner = state.inner
        if self.family == "overcooked":
            from jaxmarl.viz.overcooked_visualizer import TILE_PIXELS, OvercookedVisualizer
            pad = self.env.agent_view_size - 2
            grid = np.asarray(inner.maze_map[pad:-pad, pad:-pad, :])
            return np.asarray(OvercookedVisualizer._render_grid(
                grid, TILE_PIXELS, highlight_mask=None, agent_dir_idx=inner.agent_dir_idx,
                agent_inv=inner.agent_inv), np.uint8)
        if self.family != "mpe":
            return None
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import Circle
        figure = Figure(figsize=(3, 3), dpi=80)
        canvas, ax = FigureCanvasAgg(figure), figure.add_axes((0, 0, 1, 1))
        ax.set_xlim(-2, 2), ax.set_ylim(-2, 2), ax.set_axis_off()
        for i in range(self.env.num_entities):
            ax.add_patch(Circle(np.asarray(inner.p_pos[i]), float(self.env.rad[i]),
                                color=np.asarray(self.env.colour[i]) / 255))
        canvas.draw()
        return np.asarray(canvas.buffer_rgba())[..., :3].copy()

    def action_mask(self, state: EnvState, params: EnvParams | None = None) -> jax.Array:
        return state.mask

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(self.max_actions)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (self.obs_dim,), jnp.float32)

    @property
    def name(self) -> str:
        return f"jaxmarl/{self.jaxmarl_name}"


def _family(name: str) -> tuple[str, str]:
    if name.startswith("MPE_"):
        return "mpe", name
    if name.startswith("SMAX_"):
        return "smax", name
    if name.startswith("overcooked_"):
        return "overcooked", name
    return "hanabi", name


def _flags(options: dict[str, str]) -> dict[str, bool]:
    """--env-options' on/off switches (0 or 1); a name or value the suite does not know is an
    error, never silently off."""
    for name, value in options.items():
        if name not in OPTIONS:
            raise ValueError(f"--env-options {name}: jaxmarl envs take {', '.join(OPTIONS)}.")
        if value not in OPTIONS[name]:
            raise ValueError(f"--env-options {name} {value}: give {' or '.join(OPTIONS[name])}.")
    return {name: value == "1" for name, value in options.items()}


def _steps(value: str) -> int:
    """--env-options shaping_anneal's value: a whole number of steps, 0 or more."""
    if not value.isdigit():
        raise ValueError(f"--env-options shaping_anneal {value}: give "
                         f"{OPTIONS['shaping_anneal']}.")
    return int(value)


def make(name: str, options: dict[str, str] | None = None) -> tuple[MultiAgentEnv, EnvParams]:
    env = MultiAgentEnv(name, options)
    return env, env.default_params
