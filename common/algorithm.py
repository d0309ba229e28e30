"""What every algorithm file's `make_train` needs besides its own math: the `Algorithm` it
builds (its pieces for one seed), the env a Config trains on, the seeds' vmap, the device
mesh and the compiler options. The command line's harness (common/harness/loop.py) builds
its chunked, evaluated programs from the same pieces, so the two train bit for bit alike
(tests/test_loop.py).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
from jax.sharding import Mesh

from scanrl.common import envs

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
    divide --num-seeds evenly, on one axis "seed"."""
    from scanrl.common.harness import devices  # here: a warning where JAX started with fewer devices than cores

    devices.use_cpu_cores()
    run = config.run
    if run.data_parallel > 1:
        raise ValueError(f"make_train shards seeds only, got --data-parallel {run.data_parallel}: "
                         "train one seed's environments over several devices from the command line.")
    count = math.gcd(run.num_seeds, run.num_devices or jax.device_count())
    return Mesh(jax.devices()[:count], ("seed",))
