"""Environments by their ids: `make(env_id)` builds a gymnax id such as "CartPole-v1" or a
suite's `SUITE/NAME` (with close-name suggestions for typos), and `preset_name(env_id)` says
which of an algorithm's presets it starts from. An algorithm file loads this module only when
it builds an env or a Config from an id (`algorithm.resolve_env`, `default_config`).

The suites beyond gymnax have one adapter module each, chosen by `--env SUITE/NAME`.

Each adapter presents the suite's environments as gymnax environments (gymnax 1.0's
`Environment`: `reset_env`, `step_env`, spaces, `EnvParams`), so every algorithm, the
evaluation and the tools use them unchanged. gymnax's own `step` then does the auto-reset:
a time limit is reported as `truncated` with the observation reached before the reset in
`info["final_observation"]`. An adapter uses the suite's own environment API, never its
training wrappers (which lose that observation or the time-limit flag).

An adapter module satisfies `Adapter` (`NAMES()` and `make(name) -> (env, env_params)`) and
may add any of `AdapterHooks` (`OPTIONS`, `ACTIONS`, `RECIPES`); its envs may have any of
`EnvHooks` (below). These Protocols are the whole contract of a suite: the optional
members are read only through `adapter_hook` and `envs.hook` (tests/test_suites.py). base.py
is the adapter of a raw environment of the Brax kind (Brax, Playground). A suite is a pip
extra: `pip install "scanrl[brax]"`. Adding one: docs/design.md, "Adding an environment suite".
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
import types
from typing import Any, Protocol, runtime_checkable

import jax

from scanrl.common import cores, envs


@runtime_checkable
class Adapter(Protocol):
    """What every adapter module has (a module satisfies a Protocol: `def NAMES(self)` is the
    module's function `NAMES()`)."""

    def NAMES(self) -> list[str]:
        """The suite's environment names: `--env SUITE/NAME`, and the close-name hints."""

    def make(self, name: str) -> tuple[Any, Any]:
        """`(env, env_params)` of one name: a gymnax `Environment` (`reset_env`, `step_env`,
        spaces, `default_params`) whose time limit is `truncated`, with any of `EnvHooks`.
        An adapter with OPTIONS takes `make(name, options)`: `--env-options` as {name: value}."""


class AdapterHooks(Protocol):
    """What an adapter module may add, each read through `adapter_hook` and `has_adapter_hook`,
    never by getattr, so this class is the whole list (tests/test_suites.py checks both)."""

    OPTIONS: dict[str, tuple[str, ...] | str] | str
    """Its envs take `--env-options`, given to `make(name, options)`: {option: its choices, or a
    sentence saying which} (Brax's backend, JaxMARL's switches and step count), or a sentence
    saying which (Playground's config overrides)."""

    ACTIONS: str
    """"box" or "discrete" for every env of the suite: `is_continuous` answers without building
    one (a suite without it, Jumanji, builds the env to answer)."""

    RECIPES: dict[tuple[str, str], Any]
    """The suite's published training configurations: (algorithm, env name or an fnmatch
    pattern of names) -> recipes.Recipe (common/suites/recipes.py)."""


def members(protocol: type) -> frozenset[str]:
    """The names a Protocol class declares: its methods and its annotated attributes."""
    names = {*vars(protocol), *vars(protocol).get("__annotations__", {})}
    return frozenset(name for name in names if not name.startswith("_"))


ADAPTER_HOOKS = members(AdapterHooks)


class EnvHooks(Protocol):
    """An env's optional hooks: what an env may have beyond gymnax's `Environment` (`reset_env`,
    `step_env`, spaces, `default_params`). Each is optional, and each is read through `envs.hook`,
    never by getattr, so this class is the whole list (tests/test_suites.py checks both). The
    suites' adapters (common/suites/) set them; VecEnv, scanrl-eval and its GIFs read them."""

    def action_mask(self, state: Any, params: Any) -> jax.Array:
        """The valid actions [A] bool of one state: `VecEnv.masked`, and `VecEnv.action_mask`
        gives them, batched, to the policy (Jumanji)."""

    def restart_finished(self, key: jax.Array, done: jax.Array, obs: jax.Array, states: Any,
                         params: Any) -> tuple[jax.Array, Any]:
        """-> (obs, states): the env's `step` does not reset, because its reset is costly, and
        this restarts the `done` ones of a batch [N, ...] at once (Craftax's optimistic reset,
        common/suites/craftax.py). Without it every step computes a reset for every
        environment: a vmapped choice runs both branches."""

    cached_starts: int
    """S: the env's `step` does not reset, and a finished environment returns to its own cached
    first state, as Brax's `AutoResetWrapper` does (Brax's and Playground's resets can cost
    hundreds of physics steps: CheetahRun settles for 200). `VecEnv.with_fresh_starts` draws
    every cache anew about every S steps per environment, as Playground's
    `num_resets_per_eval` does. Evaluation is unchanged: it counts each environment's first
    episode, which starts from a fresh reset."""

    policy_obs_size: int | None
    """The policy reads the observation's first `policy_obs_size` features (`VecEnv.observe(
    policy_part=True)`), a critic all of them: Playground's `state` before its
    `privileged_state` (common/suites/base.py). None or absent: the policy reads all."""

    def render_rgb(self, state: Any, params: Any) -> Any:
        """A picture [H, W, 3] uint8 of one state, by the suite's own renderer
        (common/harness/render.py, `scanrl-eval --gif`)."""

    def render_rgb_jax(self, state: Any, params: Any) -> jax.Array:
        """The same picture as traceable JAX: a whole episode's are drawn by one jitted,
        vmapped call (Navix)."""

    num_agents: int
    """M: the env has M agents (JaxMARL's, common/suites/jaxmarl.py) and its reset and step return
    leaves [M, ...], one row per agent, and take actions [M, ...]. VecEnv presents N such envs
    as N * M rows, each of which an algorithm treats as one environment: with one parameter set,
    PPO over the rows is IPPO. Absent: one agent, no agent axis."""

    def team_reward(self, reward: jax.Array) -> jax.Array:
        """An env of agents: its agents' rewards [..., M] -> the team's [...] (the sum where each
        agent has its own, the shared one where they share it; absent: the sum); PQN's --vdn
        learns from it, and the episode metrics report it as `team_return`."""

    episode_limit: int
    """The most steps an episode can last where `max_steps_in_episode` does not say it (JaxMARL's
    envs end their own episodes: MPE's after 26 steps, SMAX's 100, Overcooked's 400): a recording
    (`scanrl-eval --gif`) runs this many steps, not `max_steps_in_episode`'s."""

    name: str
    """The env's name (gymnax's `Environment.name`): the renderer draws the classic-control
    tasks by it."""

    def evaluation_params(self, params: Any) -> Any:
        """The parameters an evaluation scores the task under, from the training ones: the same
        but for what only helps training (Overcooked's shaped reward, common/suites/jaxmarl.py).
        Absent: the training ones. `--eval-env-params` applies on top."""


ENV_HOOKS = members(EnvHooks)


def _adapter_hook(name: str) -> str:
    if name not in ADAPTER_HOOKS:
        raise ValueError(f"{name!r} is not an optional adapter member: declare it in "
                         "suites.AdapterHooks first.")
    return name


def adapter_hook(module: Any, name: str, default: Any = None) -> Any:
    """An adapter module's optional member `name` (one of AdapterHooks'), `default` where it
    has none."""
    return getattr(module, _adapter_hook(name), default)


def has_adapter_hook(module: Any, name: str) -> bool:
    """Whether an adapter module has the optional member `name` (one of AdapterHooks')."""
    return hasattr(module, _adapter_hook(name))


# suite -> (adapter module, the extra that installs the suite, the package it imports)
SUITES = {
    "brax": ("scanrl.common.suites.brax", "brax", "brax"),
    "craftax": ("scanrl.common.suites.craftax", "craftax", "craftax"),
    "jaxmarl": ("scanrl.common.suites.jaxmarl", "jaxmarl", "jaxmarl"),
    "jumanji": ("scanrl.common.suites.jumanji", "jumanji", "jumanji"),
    "navix": ("scanrl.common.suites.navix", "navix", "navix"),
    "playground": ("scanrl.common.suites.playground", "playground", "mujoco_playground"),
    "xminigrid": ("scanrl.common.suites.xminigrid", "xminigrid", "xminigrid"),
}
# suites whose package needs a newer Python than scanrl's range: their extra's marker in
# pyproject.toml (tests/test_suites.py checks the two agree), below which the extra installs nothing
MIN_PYTHON = {"jaxmarl": (3, 11)}
# gymnax's environments with Box actions (gymnax 1.0; tests/test_envs.py checks this against every
# registered env). Read from here, not from a built env: gymnax's import computes arrays, which
# starts JAX (and inside a trace, to avoid that, it would leave tracers in gymnax's modules).
GYMNAX_BOX = frozenset(
    {"Pendulum-v1", "MountainCarContinuous-v0", "PointRobot-misc", "Reacher-misc", "Swimmer-misc"}
)
# one environment of each, for messages that need an example
EXAMPLES = {
    "gymnax": "CartPole-v1",
    "brax": "brax/ant",
    "craftax": "craftax/Craftax-Classic-Symbolic-v1",
    "jaxmarl": "jaxmarl/MPE_simple_spread_v3",
    "jumanji": "jumanji/Snake-v1",
    "navix": "navix/Navix-DoorKey-5x5-v0",
    "playground": "playground/CheetahRun",
    "xminigrid": "xminigrid/XLand-MiniGrid-R1-9x9",
}


def registered_envs() -> list[str]:
    return list(envs.gymnax().registered_envs)


def suite_of(env_id: str) -> tuple[str, str]:
    """("gymnax", id) for a bare or `gymnax/` id, else (SUITE, NAME) of `SUITE/NAME`."""
    suite, slash, name = env_id.partition("/")
    return (suite, name) if slash else ("gymnax", env_id)


def adapter(env_id: str) -> types.ModuleType:
    """The adapter module of a `SUITE/NAME` id (ValueError when the suite is unknown or not
    installed)."""
    suite, _ = suite_of(env_id)
    if suite not in SUITES:
        raise ValueError(
            f"--env {env_id!r}: unknown suite {suite!r}; the suites are gymnax (bare ids), "
            f"{', '.join(s + '/NAME' for s in SUITES)}."
        )
    _, extra, package = SUITES[suite]
    if importlib.util.find_spec(package) is None:
        need, have = MIN_PYTHON.get(suite), sys.version_info[:2]
        if need and have < need:
            raise ValueError(
                f"--env {env_id!r} needs the {suite} suite, which needs Python "
                f"{need[0]}.{need[1]} or newer (this is Python {have[0]}.{have[1]}), so "
                f"scanrl[{extra}] installs nothing here."
            )
        raise ValueError(
            f"--env {env_id!r} needs the {suite} suite: pip install \"scanrl[{extra}]\" "
            f"(from a clone: pip install -e \".[{extra}]\")."
        )
    return import_adapter(suite)


def import_adapter(suite: str) -> types.ModuleType:
    """A suite's adapter module (not the suite's own package). An adapter imports gymnax, whose
    import starts JAX: JAX first gets one CPU device per core."""
    cores.use_cpu_cores(warn=False)
    return importlib.import_module(SUITES[suite][0])


def check_env_id(env_id: str) -> None:
    """Raise ValueError with close names when `env_id` names no environment."""
    suite, name = suite_of(env_id)
    if not name.strip():  # before importing the suite (Brax's import alone can take a minute)
        example = EXAMPLES.get(suite, f"{suite}/NAME")
        raise ValueError(
            f"--env {env_id!r} names no environment: give one after the slash, e.g. --env {example}"
            f" (--env {suite}/x lists {suite}'s names)."
        )
    known = registered_envs() if suite == "gymnax" else adapter(env_id).NAMES()
    if name in known:
        return
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    prefix = "" if suite == "gymnax" and "/" not in env_id else f"{suite}/"
    hint = f" Did you mean {' or '.join(repr(prefix + c) for c in close)}?" if close else ""
    if suite != "gymnax":
        raise ValueError(
            f"--env {env_id!r} is not a {suite} environment.{hint} Its names: {', '.join(known)}."
        )
    raise ValueError(
        f"--env {env_id!r} is not a gymnax environment.{hint} "
        "All ids: python -c 'import gymnax; print(gymnax.registered_envs)'."
    )


def make(env_id: str, options: dict[str, str] | None = None) -> tuple[Any, Any]:
    """`(env, env_params)` for a gymnax id such as "CartPole-v1" (or "gymnax/CartPole-v1"), or
    a suite's `SUITE/NAME` such as "brax/ant" (common/suites/). `options`: how the suite builds
    it (`--env-options`), for suites whose adapter takes any (ValueError otherwise).

    Building an env starts JAX, so first JAX gets one CPU device per core, as `make_train`
    would give it (`cores.use_cpu_cores`): `default_config` then `make_train` keeps them."""
    cores.use_cpu_cores(warn=False)
    check_env_id(env_id)
    suite, name = suite_of(env_id)
    if options:
        module = None if suite == "gymnax" else adapter(env_id)
        if not has_adapter_hook(module, "OPTIONS"):
            raise ValueError(
                f"--env-options {' '.join(f'{k} {v}' for k, v in options.items())}: {suite}"
                " environments take no options; Brax, MuJoCo Playground and JaxMARL do."
            )
        return module.make(name, options)
    return envs.gymnax().make(name) if suite == "gymnax" else adapter(env_id).make(name)


def is_continuous(env_id: str) -> bool:
    """Whether an env id has continuous (Box) actions; False for ids that name no environment
    (reported later, with the reason).

    Answered without building the env where it can be: gymnax's ids from GYMNAX_BOX, and a
    suite whose adapter declares its ACTIONS. Jumanji's envs are built."""
    try:
        suite, name = suite_of(env_id)
        if suite == "gymnax":
            return name in GYMNAX_BOX
        if not name.strip():  # no name: refused later (check_env_id), before its suite is imported
            return False
        declared = adapter_hook(adapter(env_id), "ACTIONS")
        return declared == "box" if declared is not None else not envs.is_discrete(*make(env_id))
    except ValueError:
        return False


GRID_WORLDS = ("navix", "xminigrid")  # the suites of MiniGrid's tasks: one preset family


def preset_name(env_id: str) -> str | None:
    """Which of an algorithm's PRESETS an env id starts from: "minatar" for the MinAtar games
    (image observations), "grid_world" for Navix's and XLand-MiniGrid's tasks, "continuous"
    for Box actions, "jumanji" for Jumanji's discrete tasks, None for the rest."""
    suite = suite_of(env_id)[0]
    if env_id.endswith("-MinAtar"):
        return "minatar"
    if suite in GRID_WORLDS:
        return "grid_world"
    if is_continuous(env_id):
        return "continuous"
    return "jumanji" if suite == "jumanji" else None
