"""What every algorithm file needs besides its own math: the value checks its Config runs, and for
`make_train`: the `Algorithm` it
builds (its pieces for one seed), the env a Config trains on, the seeds' vmap, the device
mesh and the compiler options. The command line's harness (common/harness/loop.py) builds
its chunked, evaluated programs from the same pieces, so the two train bit for bit alike
(tests/test_loop.py).
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
from jax.sharding import Mesh

from scanrl.common import cores, envs

INDEFINITE_UPDATES = 2**30  # --total-timesteps 0: "until a stop condition holds"

# XLA's CPU backend spends most of a train program's compile time in LLVM passes that buy
# nothing measurable for these small, loop-heavy programs (benchmarks/RESULTS.md).
COMPILER_OPTIONS = {"xla_backend_optimization_level": 1, "xla_llvm_disable_expensive_passes": True}


class Algorithm(NamedTuple):
    """An algorithm's pieces for one seed: `init(key) -> state`, `update(state, update_index) ->
    (state, metrics)`, `act(policy, obs, key, deterministic) -> actions`, `policy_params(state)
    -> policy`, and its env and sizes."""

    init: Callable[[jax.Array], Any]
    update: Callable[[Any, jax.Array], tuple[Any, dict]]
    act: Callable[..., jax.Array]
    policy_params: Callable[[Any], Any]
    env: Any
    env_params: Any
    num_updates: int
    steps_per_update: int  # env steps per seed in one update
    # A recurrent policy: init_carry(n) is its state for n environments, and
    # act(policy, obs, key, deterministic, carry) -> (actions, carry). None: act returns actions.
    # Either act takes `mask=` (valid actions [N, A]) where the env has an action mask.
    init_carry: Callable[[int], Any] | None = None


def environment(config: Any, env: Any = None, env_params: Any = None) -> tuple[Any, Any, Any]:
    """(env, its default params, the params it trains with) for `config`: config.env or the
    user's own env object, with --env-options and --hide-obs applied and --env-params over the
    defaults (ValueError with one sentence for a bad index, name or value)."""
    run = config.run
    options = dict(zip(run.env_options[::2], run.env_options[1::2]))
    env, params = envs.resolve(config.env, env, env_params, options)
    if run.hide_obs:
        env = envs.HiddenObs(env, run.hide_obs, params)
    return env, params, envs.override_params(params, run.env_params, "--env-params")


def vmap_seeds(fn: Callable, num_seeds: int, in_axes: Any = 0) -> Callable:
    """`jax.vmap(fn, in_axes)` over a device's block of `num_seeds` seeds, except for a block of
    one, where the seed axis is added and dropped directly: vmap's batching pass would only
    re-trace the whole program (0.7 -> 0.4 s for PPO). Both give the same result; the command
    line makes the same choice, so its runs equal `make_train`'s bit for bit."""
    if num_seeds > 1:
        return jax.vmap(fn, in_axes=in_axes)
    add, drop = partial(jax.tree.map, lambda x: x[None]), partial(jax.tree.map, lambda x: x[0])
    axes = in_axes if isinstance(in_axes, tuple) else None
    return lambda *args: add(fn(*(a if axes and axes[i] is None else drop(a) for i, a in enumerate(args))))


def seed_mesh(config: Any) -> Mesh:
    """The devices `make_train` spreads seeds over: as many of --num-devices (default: all) as
    divide --num-seeds evenly, on one axis "seed". Asking for more devices than JAX has is a
    ValueError; where JAX started with fewer CPU devices than cores, a warning says so."""
    cores.use_cpu_cores()
    run = config.run
    if run.data_parallel > 1:
        raise ValueError(f"make_train shards seeds only, got --data-parallel {run.data_parallel}: "
                         "train one seed's environments over several devices from the command line.")
    available = cores.select_devices(run.num_devices)  # more than JAX has: one sentence, as on the command line
    return Mesh(available[:math.gcd(run.num_seeds, len(available))], ("seed",))


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
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise ValueError(f"{flag(f.name)} {k} must be a finite number, got {v}.")
    for name in positive:
        value = getattr(config, name)
        if value is not None and not value > 0:
            raise ValueError(f"{flag(name)} must be {'at least 1' if isinstance(value, int) else 'positive'}, got {value}.")
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
    """--total-timesteps: 0 (until a stop condition holds) or at least one update's steps."""
    total = config.total_timesteps
    if total < 0:
        raise ValueError(f"--total-timesteps must be 0 or positive, got {total}.")
    if total == 0 and not config.run.has_stop_condition:
        raise ValueError("--total-timesteps 0 trains until a stop condition holds: give --stop-return, "
                         "--stop-minutes or --stop-plateau too.")
    if 0 < total < per_update:
        raise ValueError(f"--total-timesteps {total} is smaller than one {unit} (num_envs * num_steps = {per_update}); "
                         f"raise it or shrink the {unit}.")


def updates_for(config: Any, per_update: int) -> int:
    """Updates in the run: whole updates of the budget, or INDEFINITE_UPDATES for --total-timesteps 0."""
    return config.total_timesteps // per_update if config.total_timesteps else INDEFINITE_UPDATES
