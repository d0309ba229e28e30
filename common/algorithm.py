"""What every algorithm file needs besides its own math: the value checks its Config runs, and for
`make_train` the `Algorithm` it builds (its pieces for one seed), the env, the seeds' vmap, the
device mesh and the compiler options. The command line (common/harness/loop.py) builds its
chunked, evaluated programs from the same pieces, bit for bit alike (tests/test_loop.py).
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from scanrl.common import cores

INDEFINITE_UPDATES = 2**30  # --total-timesteps 0: "until a stop condition holds"

# XLA's CPU backend spends most of a train program's compile time in LLVM passes that buy
# nothing measurable for these small, loop-heavy programs (benchmarks/HISTORY.md, 2026-11-27,
# 12:50-13:12). The GPU
# backend reads the same options for its kernels' code, so they are for CPU programs only.
CPU_COMPILER_OPTIONS = {"xla_backend_optimization_level": 1,
                        "xla_llvm_disable_expensive_passes": True}


def compiler_options(devices: Any = None) -> dict:
    """The XLA options a train program is compiled with on `devices` (default: JAX's):
    CPU_COMPILER_OPTIONS on CPUs, XLA's defaults elsewhere."""
    devices = jax.devices() if devices is None else list(devices)
    return dict(CPU_COMPILER_OPTIONS) if all(d.platform == "cpu" for d in devices) else {}


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """An algorithm's pieces for one seed: `init(key) -> state`, `update(state, update_index) ->
    (state, metrics)`, `act(policy, obs, key, deterministic) -> actions`, `policy_params(state)
    -> policy`, the `vec_env` (common/envs.py's VecEnv) that `update` steps, and its sizes.

    The suites' own details stay out of `update`: where the env returns to cached starts (Brax,
    Playground), `self.update` first draws new ones on VecEnv's schedule
    (`VecEnv.with_fresh_starts`), so the state needs `env_state` and `key` fields."""

    init: Callable[[jax.Array], Any]
    update: Callable[[Any, jax.Array], tuple[Any, dict]]
    act: Callable[..., jax.Array]
    policy_params: Callable[[Any], Any]
    vec_env: Any
    num_updates: int
    steps_per_update: int  # env steps per seed in one update
    # A recurrent policy: init_carry(n) is its state for n environments, and
    # act(policy, obs, key, deterministic, carry) -> (actions, carry). None: act returns actions.
    # Either act takes `mask=` (valid actions [N, A]) where the env has an action mask.
    init_carry: Callable[[int], Any] | None = None

    def __post_init__(self):
        steps_per_env = self.steps_per_update // self.vec_env.num_envs
        object.__setattr__(self, "update",
                           self.vec_env.with_fresh_starts(self.update, steps_per_env))

    env = property(lambda self: self.vec_env.env)  # the gymnax-style env and its params
    env_params = property(lambda self: self.vec_env.env_params)


def grad_norm_bound(max_grad_norm: Any) -> jax.Array:
    """The bound a file gives optax.clip_by_global_norm: max_grad_norm, where 0 turns clipping off
    as an infinite bound rather than a Python branch, so a sweep can trace the value."""
    return jnp.where(max_grad_norm > 0, max_grad_norm, jnp.inf)


def vmap_seeds(fn: Callable, num_seeds: int, in_axes: Any = 0) -> Callable:
    """`jax.vmap(fn, in_axes)` over a device's block of `num_seeds` seeds, except for a block of
    one, where the seed axis is added and dropped directly: vmap's batching pass would only
    re-trace the whole program (0.7 -> 0.4 s for PPO). Both give the same result; the command
    line makes the same choice, so its runs equal `make_train`'s bit for bit."""
    if num_seeds > 1:
        return jax.vmap(fn, in_axes=in_axes)
    add, drop = partial(jax.tree.map, lambda x: x[None]), partial(jax.tree.map, lambda x: x[0])
    axes = in_axes if isinstance(in_axes, tuple) else None
    return lambda *args: add(fn(*(a if axes and axes[i] is None else drop(a)
                                  for i, a in enumerate(args))))


def train_env(config: Any, env: Any = None, env_params: Any = None) -> tuple[Any, Any]:
    """(env, env_params) that `make_train` trains on: `config.env` built, or a user's own
    gymnax-style env object and its params (default `env.default_params`). JAX first gets one
    CPU device per core (a warning where it started with fewer). `make_train` runs a fixed
    budget, so --total-timesteps 0 (until a stop condition holds: the command line's) is refused."""
    if not config.total_timesteps:
        raise ValueError("make_train runs a fixed budget: give total_timesteps; 0 (train until a "
                         "stop condition holds) is the command line's.")
    cores.use_cpu_cores()
    return resolve_env(config.env, env, env_params)


def resolve_env(env_id: str, env: Any = None, env_params: Any = None,
                options: dict[str, str] | None = None) -> tuple[Any, Any]:
    """The env an algorithm trains on: a user's own gymnax-style `env` object (with its
    `env_params`, default `env.default_params`) or else `env_id` built with `options`."""
    if env is not None:
        return env, env.default_params if env_params is None else env_params
    # the registry of env ids loads only when an env is named by its id
    from scanrl.common import suites

    return suites.make(env_id, options)


def seed_mesh(num_devices: int = 0) -> Callable[[int], Mesh]:
    """For `make_train`: `mesh(num_seeds)`, the devices its seeds spread over, on one axis
    "seed": of the first `num_devices` (0: all; more than JAX has is a ValueError here), as
    many as divide the seeds evenly."""
    available = cores.select_devices(num_devices)
    return lambda num_seeds: Mesh(available[:math.gcd(num_seeds, len(available))], ("seed",))


# ---------------------------------------------------------------------------------------------
# Value checks every Config runs in __post_init__: one sentence naming the flag
# ---------------------------------------------------------------------------------------------
def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_values(config: Any, positive: tuple[str, ...] = (), nonnegative: tuple[str, ...] = (),
                 within: dict[str, str] | None = None) -> None:
    """Raise ValueError naming the flag and echoing the value for the first bad one.

    Every float field must be finite; `positive` ints are at least 1, floats > 0;
    `within` maps a field to an interval such as "(0, 1]"; None values are not checked.
    """
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{flag(f.name)} must be a finite number, got {value}.")
    for name in positive:
        value = getattr(config, name)
        if value is not None and not value > 0:
            raise ValueError(
                f"{flag(name)} must be "
                f"{'at least 1' if isinstance(value, int) else 'positive'}, got {value}.")
    for name in nonnegative:
        value = getattr(config, name)
        if value is not None and value < 0:
            raise ValueError(f"{flag(name)} must be 0 or positive, got {value}.")
    for name, interval in (within or {}).items():
        value, (low, high) = getattr(config, name), map(float, interval[1:-1].split(","))
        if value is None:
            continue
        above = value >= low if interval[0] == "[" else value > low
        below = value <= high if interval[-1] == "]" else value < high
        if not (above and below):
            raise ValueError(f"{flag(name)} must lie in {interval}, got {value}.")


def check_budget(config: Any, per_update: int, unit: str) -> None:
    """--total-timesteps: 0 (until a stop condition holds: the command line checks for one) or at
    least one update's steps."""
    total = config.total_timesteps
    if total < 0:
        raise ValueError(f"--total-timesteps must be 0 or positive, got {total}.")
    if 0 < total < per_update:
        raise ValueError(f"--total-timesteps {total} is smaller than one {unit} "
                         f"(num_envs * num_steps = {per_update}); raise it or shrink the {unit}.")


def check_critic_obs(critic_obs: str, env_id: str, vec_env: Any) -> None:
    """Before compiling: a value net cannot read a privileged part the env does not observe
    (`vec_env.policy_obs_dim` is all of it)."""
    if critic_obs == "privileged_state" and vec_env.policy_obs_dim == vec_env.obs_dim:
        raise ValueError(f"--critic-obs privileged_state: --env {env_id} observes no "
                         "privileged_state (Playground's locomotion tasks do, and JaxMARL's "
                         "envs but with world_state 0 in --env-options, as the IPPO and PQN "
                         "recipes set it); leave --critic-obs at state.")


def updates_for(config: Any, per_update: int) -> int:
    """Updates in the run: whole updates of the budget, or INDEFINITE_UPDATES for
    --total-timesteps 0."""
    return config.total_timesteps // per_update if config.total_timesteps else INDEFINITE_UPDATES
