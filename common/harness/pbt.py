"""Population-based training (Jaderberg et al. 2017, arXiv:1711.09846) inside the compiled program.

`--pbt` turns a sweep's rows into a population: `--pbt-population` members, each starting
from its own values of the `--sweep` fields (a grid's points in turn, the random fields
drawn), all trained in one program like a sweep's configs. Every `--pbt-interval` updates,
on device and inside the scan (no host round trip, no recompile):

- fitness: each member's mean return over the interval: the training episodes' by default,
  or its evaluations' (`--pbt-fitness eval`); a member with no finished episode keeps its
  last fitness (-inf before the first);
- exploit (truncation selection), from the first interval that ends after `--pbt-burn-in`
  updates on: within each independent run (`--num-seeds`), the bottom
  `--pbt-fraction` of the members, ranked by fitness, each copy a member drawn uniformly from
  the top fraction: its parameters, optimizer state and normalisation statistics, every field
  of the algorithm's TrainState except the member's own experience stream (EXPERIENCE: its
  environments, RNG key, replay buffer), which it keeps;
- explore: each copied member's hyperparameters are the parent's, each multiplied by
  `--pbt-perturb` or divided by it (even odds) and clipped to its `--sweep` range, or with
  probability `--pbt-resample` drawn afresh from that range; a grid field moves to a
  neighbouring value of its list, or resamples one.

The hyperparameters are the sweep's traced values (common/harness/sweeps.py), carried in
the state (common/harness/loop.py's PopulationState): a checkpoint holds them, and a resumed
run equals the uninterrupted one bit for bit. Rows are member-major, row `m * num_seeds + s` being
member m of run s, and every member of run s starts from seed s's key, as a sweep's configs do. The
random draws of run s at update u come from fold_in(fold_in(seed s's evaluation key, PBT_TAG), u),
the same on every device. The population is spread over the devices like seeds; the interval's
exploit gathers the fitness and the inherited state over the "seed" axis.

What each interval decided is in the run's metrics (`pbt_parent`: the member copied, -1 for
none; `pbt_fitness`; `pbt_<field>`: the values in effect from the next update on), which
common/harness/reports.py turns into the run folder's `pbt.jsonl`, `pbt.json` (each run's
winner and its whole schedule), `best_config.json` and `pbt.png`.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

PBT_TAG = 0x9B7  # fold_in tag of PBT's random draws
# A member keeps these fields of its TrainState when it copies another's: where its own
# environments stand, its RNG stream and what it has collected. Every other field is learning state.
EXPERIENCE = frozenset(
    {"env_state", "obs", "start", "hidden", "discounted_return", "key", "buffer"}
)


@dataclasses.dataclass(frozen=True)
class Spec:
    """What the compiled program needs to know about the population."""

    members: int
    seeds: int  # independent PBT runs
    interval: int
    fraction: float
    perturb: float
    resample: float
    space: dict  # field -> ("grid", values) | ("log", low, high) | ("uniform", low, high)
    num_updates: int
    burn_in: int = 0  # no member is replaced at an interval ending at or before this update

    @property
    def replaced(self) -> int:
        """Members replaced (and parents drawn from) per interval."""
        return int(self.members * self.fraction)


def check(run: Any, num_updates: int | None) -> None:
    """ValueError with one sentence where the run is too short for --pbt's interval (before
    compiling; RunConfig checks the rest of the --pbt flags)."""
    if not run.pbt or num_updates is None:
        return
    if run.pbt_interval >= num_updates:
        raise ValueError(
            f"--pbt-interval {run.pbt_interval} is not shorter than the run's {num_updates}"
            " updates, so no member would ever be replaced; lower it or raise --total-timesteps."
        )
    first = (
        run.pbt_burn_in // run.pbt_interval + 1
    ) * run.pbt_interval  # the first interval's end after it
    if first >= num_updates:
        raise ValueError(
            f"--pbt-burn-in {run.pbt_burn_in} leaves no interval of --pbt-interval"
            f" {run.pbt_interval} ending inside the run's {num_updates} updates, so no member would"
            " ever be replaced; lower it or raise --total-timesteps."
        )


def spec(run: Any, sweep: Any, num_updates: int) -> Spec | None:
    if not run.pbt:
        return None
    return Spec(
        members=sweep.size, seeds=run.num_seeds, interval=run.pbt_interval,
        fraction=run.pbt_fraction, perturb=run.pbt_perturb, resample=run.pbt_resample,
        space=dict(sweep.space), num_updates=num_updates, burn_in=run.pbt_burn_in,
    )


def fitness_metric(run: Any) -> str:
    return run.eval_metric if run.pbt_fitness == "eval" else "episode_return"


# ---------------------------------------------------------------------------------------------
# On device
# ---------------------------------------------------------------------------------------------
def initial_record():
    """A member's fitness record: the interval's sum and count of returns, its last fitness."""
    import jax.numpy as jnp

    return {"sum": jnp.float32(0.0), "count": jnp.float32(0.0), "fitness": jnp.float32(-jnp.inf)}


def record(acc: dict, value: Any) -> dict:
    """Add one update's return (NaN: none this update) to the record."""
    import jax.numpy as jnp

    ok = jnp.isfinite(value)
    return {**acc, "sum": acc["sum"] + jnp.where(ok, value, 0.0), "count": acc["count"] + ok}


def _explore(key, values, space: tuple, spec: Spec):
    """New values [n] of one field from the parents' `values` [n]."""
    import jax
    import jax.numpy as jnp

    k_fresh, k_coin, k_step = jax.random.split(key, 3)
    resample = jax.random.uniform(k_coin, values.shape) < spec.resample
    up = jax.random.bernoulli(k_step, 0.5, values.shape)
    if space[0] == "grid":
        grid = jnp.asarray(space[1], jnp.float32)
        index = jnp.argmin(jnp.abs(values[:, None] - grid[None, :]), axis=1)
        moved = jnp.clip(index + jnp.where(up, 1, -1), 0, len(space[1]) - 1)
        fresh = jax.random.randint(k_fresh, values.shape, 0, len(space[1]))
        return grid[jnp.where(resample, fresh, moved)]
    kind, low, high = space
    u = jax.random.uniform(k_fresh, values.shape)
    fresh = (
        jnp.exp(jnp.log(low) + u * (jnp.log(high) - jnp.log(low)))
        if kind == "log"
        else low + u * (high - low)
    )
    moved = jnp.clip(values * jnp.where(up, spec.perturb, 1.0 / spec.perturb), low, high)
    return jnp.where(resample, fresh, moved).astype(jnp.float32)


def decide(fitness, hparams: dict, run_keys, u, spec: Spec):
    """The interval's decisions for the whole population: fitness [R] (rows member-major),
    hparams {field: [R]}, run_keys [S] (each run's key). Returns (source row [R], replaced
    [R] bool, new hparams {field: [R]})."""
    import jax
    import jax.numpy as jnp

    M, S, n = spec.members, spec.seeds, spec.replaced
    by_run = jnp.where(jnp.isnan(fitness), -jnp.inf, fitness).reshape(M, S).T  # [S, M]

    def one_run(fit, key, s):
        k_parent, k_explore = jax.random.split(
            jax.random.fold_in(jax.random.fold_in(key, PBT_TAG), u)
        )
        order = jnp.argsort(fit, stable=True)  # worst first; ties keep member order
        bottom, top = order[:n], order[M - n:]
        parent = jnp.arange(M).at[bottom].set(top[jax.random.randint(k_parent, (n,), 0, n)])
        return parent * S + s, jnp.zeros(M, bool).at[bottom].set(True), k_explore

    source, replaced, explore_keys = jax.vmap(one_run)(by_run, run_keys, jnp.arange(S))  # [S, M]
    source, replaced = source.T.reshape(-1), replaced.T.reshape(-1)  # member-major rows [R]
    if spec.burn_in:  # before it ends, the interval ranks the members and replaces none
        replaced = replaced & (u + 1 > spec.burn_in)
        source = jnp.where(replaced, source, jnp.arange(M * S))
    new = {}
    for i, (name, values) in enumerate(sorted(hparams.items())):
        keys = jax.vmap(lambda k: jax.random.fold_in(k, i))(explore_keys)  # [S]
        parents = values[source].reshape(M, S)
        explored = jax.vmap(
            lambda k, v: _explore(k, v, spec.space[name], spec), in_axes=(0, 1), out_axes=1
        )(keys, parents).reshape(-1)
        new[name] = jnp.where(replaced, explored, values)
    return source, replaced, new


def step(
    states: Any, u: Any, active: Any, spec: Spec, shard_rows: int, num_rows: int
) -> tuple[Any, dict]:
    """After update u, on one device's block of rows (leaves [shard_rows, ...], inside the
    shard_map over "seed"): the interval's exploit and explore where it is due. Returns the
    block and its PBT metrics [shard_rows]."""
    import jax
    import jax.numpy as jnp

    due = active & ((u + 1) % spec.interval == 0) & (u + 1 < spec.num_updates)
    mine = jnp.minimum(
        jax.lax.axis_index("seed") * shard_rows + jnp.arange(shard_rows), num_rows - 1
    )
    gather = lambda x: jax.lax.all_gather(x, "seed", tiled=True)[:num_rows]  # noqa: E731
    gather_tree = partial(jax.tree.map, gather)

    def exploit(states):
        acc = states.pbt
        own_fitness = jnp.where(
            acc["count"] > 0, acc["sum"] / jnp.maximum(acc["count"], 1.0), acc["fitness"]
        )
        fitness = gather(own_fitness)
        run_keys = jax.random.wrap_key_data(
            gather(jax.random.key_data(states.eval_key))[: spec.seeds]
        )
        source, replaced, hparams = decide(fitness, gather_tree(states.hparams), run_keys, u, spec)
        src, copy = source[mine], replaced[mine]
        train = states.train
        fields = getattr(type(train), "_fields", None)

        def inherit(own):
            return jax.tree.map(
                lambda x: jnp.where(copy.reshape((-1,) + (1,) * (x.ndim - 1)), gather(x)[src], x),
                own,
            )

        if fields is None:
            train = inherit(train)
        else:
            train = train._replace(
                **{f: inherit(getattr(train, f)) for f in fields if f not in EXPERIENCE}
            )
        new_acc = {"sum": jnp.zeros_like(acc["sum"]), "count": jnp.zeros_like(acc["count"]),
                   "fitness": fitness[src]}
        states = states._replace(
            train=train, hparams={k: v[mine] for k, v in hparams.items()}, pbt=new_acc
        )
        return states, jnp.where(copy, src // spec.seeds, -1).astype(jnp.float32), fitness[mine]

    def skip(states):
        nan = jnp.full(shard_rows, jnp.nan, jnp.float32)
        return states, nan, nan

    states, parent, fitness = jax.lax.cond(due, exploit, skip, states)
    metrics = {"pbt_parent": parent, "pbt_fitness": fitness,
               **{f"pbt_{k}": v.astype(jnp.float32) for k, v in states.hparams.items()}}
    return states, metrics
