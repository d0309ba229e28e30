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
run equals the uninterrupted one bit for bit. Rows are member-major, row `m * num_seeds + s` being member m of run s, and every
member of run s starts from seed s's key, as a sweep's configs do. The random draws of
run s at update u come from fold_in(fold_in(seed s's evaluation key, PBT_TAG), u), the same
on every device. The population is spread over the devices like seeds; the interval's
exploit gathers the fitness and the inherited state over the "seed" axis.

What each interval decided is in the run's metrics (`pbt_parent`: the member copied, -1 for
none; `pbt_fitness`; `pbt_<field>`: the values in effect from the next update on), which
this module turns into the run folder's `pbt.jsonl`, `pbt.json` (each run's winner and its
whole schedule), `best_config.json` and `pbt.png`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

PBT_TAG = 0x9B7  # fold_in tag of PBT's random draws
# A member keeps these fields of its TrainState when it copies another's: where its own
# environments stand, its RNG stream and what it has collected. Every other field is learning state.
EXPERIENCE = frozenset({"env_state", "obs", "start", "hidden", "discounted_return", "key", "buffer"})


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
        raise ValueError(f"--pbt-interval {run.pbt_interval} is not shorter than the run's {num_updates} updates, so no "
                         f"member would ever be replaced; lower it or raise --total-timesteps.")
    first = (run.pbt_burn_in // run.pbt_interval + 1) * run.pbt_interval  # the first interval's end after it
    if first >= num_updates:
        raise ValueError(f"--pbt-burn-in {run.pbt_burn_in} leaves no interval of --pbt-interval {run.pbt_interval} "
                         f"ending inside the run's {num_updates} updates, so no member would ever be replaced; "
                         "lower it or raise --total-timesteps.")


def spec(run: Any, sweep: Any, num_updates: int) -> Spec | None:
    if not run.pbt:
        return None
    return Spec(members=sweep.size, seeds=run.num_seeds, interval=run.pbt_interval, fraction=run.pbt_fraction,
                perturb=run.pbt_perturb, resample=run.pbt_resample, space=dict(sweep.space), num_updates=num_updates,
                burn_in=run.pbt_burn_in)


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
    fresh = jnp.exp(jnp.log(low) + u * (jnp.log(high) - jnp.log(low))) if kind == "log" else low + u * (high - low)
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
        k_parent, k_explore = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, PBT_TAG), u))
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
        explored = jax.vmap(lambda k, v: _explore(k, v, spec.space[name], spec), in_axes=(0, 1), out_axes=1)(
            keys, parents).reshape(-1)
        new[name] = jnp.where(replaced, explored, values)
    return source, replaced, new


def step(states: Any, u: Any, active: Any, spec: Spec, shard_rows: int, num_rows: int) -> tuple[Any, dict]:
    """After update u, on one device's block of rows (leaves [shard_rows, ...], inside the
    shard_map over "seed"): the interval's exploit and explore where it is due. Returns the
    block and its PBT metrics [shard_rows]."""
    import jax
    import jax.numpy as jnp

    due = active & ((u + 1) % spec.interval == 0) & (u + 1 < spec.num_updates)
    mine = jnp.minimum(jax.lax.axis_index("seed") * shard_rows + jnp.arange(shard_rows), num_rows - 1)
    gather = lambda x: jax.lax.all_gather(x, "seed", tiled=True)[:num_rows]  # noqa: E731
    gather_tree = partial(jax.tree.map, gather)

    def exploit(states):
        acc = states.pbt
        own_fitness = jnp.where(acc["count"] > 0, acc["sum"] / jnp.maximum(acc["count"], 1.0), acc["fitness"])
        fitness = gather(own_fitness)
        run_keys = jax.random.wrap_key_data(gather(jax.random.key_data(states.eval_key))[:spec.seeds])
        source, replaced, hparams = decide(fitness, gather_tree(states.hparams), run_keys, u, spec)
        src, copy = source[mine], replaced[mine]
        train = states.train
        fields = getattr(type(train), "_fields", None)

        def inherit(own):
            return jax.tree.map(lambda x: jnp.where(copy.reshape((-1,) + (1,) * (x.ndim - 1)), gather(x)[src], x), own)

        if fields is None:
            train = inherit(train)
        else:
            train = train._replace(**{f: inherit(getattr(train, f)) for f in fields if f not in EXPERIENCE})
        new_acc = {"sum": jnp.zeros_like(acc["sum"]), "count": jnp.zeros_like(acc["count"]),
                   "fitness": fitness[src]}
        states = states._replace(train=train, hparams={k: v[mine] for k, v in hparams.items()}, pbt=new_acc)
        return states, jnp.where(copy, src // spec.seeds, -1).astype(jnp.float32), fitness[mine]

    def skip(states):
        nan = jnp.full(shard_rows, jnp.nan, jnp.float32)
        return states, nan, nan

    states, parent, fitness = jax.lax.cond(due, exploit, skip, states)
    metrics = {"pbt_parent": parent, "pbt_fitness": fitness,
               **{f"pbt_{k}": v.astype(jnp.float32) for k, v in states.hparams.items()}}
    return states, metrics


# ---------------------------------------------------------------------------------------------
# What a PBT run writes
# ---------------------------------------------------------------------------------------------
def intervals(metrics: dict[str, np.ndarray]) -> np.ndarray:
    """The updates (0-based) at whose end an exploit ran: where pbt_fitness is set."""
    return np.flatnonzero(np.isfinite(metrics["pbt_fitness"]).any(axis=0))


def lineage(metrics: dict[str, np.ndarray], sweep: Any, spec: Spec, first_seed: int, steps_per_update: int
            ) -> list[dict]:
    """One record per interval so far: every member's fitness, parent and hyperparameters after it."""
    fields = sorted(sweep.values)
    records = []
    for u in intervals(metrics):
        members = []
        for row in range(spec.members * spec.seeds):
            parent = metrics["pbt_parent"][row, u]
            members.append({
                "member": row // spec.seeds, "seed": first_seed + row % spec.seeds,
                "fitness": _float32_or_none(metrics["pbt_fitness"][row, u]),
                "parent": int(parent) if parent >= 0 else None,
                "hparams": {k: _value(metrics[f"pbt_{k}"][row, u]) for k in fields},
            })
        records.append({"update": int(u + 1), "steps_per_seed": int((u + 1) * steps_per_update), "members": members})
    return records


def write_lineage(run_dir: Path, records: list[dict]) -> None:
    """pbt.jsonl, rewritten whole after every chunk (a rename: never half a file)."""
    path = run_dir / "pbt.jsonl"
    temporary = path.with_suffix(".jsonl.tmp")
    temporary.write_text("".join(json.dumps(r) + "\n" for r in records))
    temporary.replace(path)


def _float32_or_none(x: float) -> float | None:
    """x with float32's 7 significant digits, or None (null) where it is NaN or infinite."""
    return float(f"{x:.7g}") if math.isfinite(x) else None


def _value(x: Any) -> float:
    """A hyperparameter as the program held it (float32), written with the digits float32 has."""
    return float(f"{np.float32(x):.7g}")


def schedule(metrics: dict[str, np.ndarray], sweep: Any, spec: Spec, row: int) -> list[dict]:
    """The hyperparameters row `row` trained with at each update, following its ancestry back
    through every copy: segments {first_update, last_update (1-based, inclusive), member, values}."""
    fields = sorted(sweep.values)
    num_updates = metrics["pbt_parent"].shape[1]
    used = []  # (member row, values) per update, from the last back
    current = row
    for u in range(num_updates - 1, -1, -1):
        values = {k: _value(sweep.values[k][current // spec.seeds] if u == 0 else metrics[f"pbt_{k}"][current, u - 1])
                  for k in fields}
        used.append((current, values))
        if u > 0 and metrics["pbt_parent"][current, u - 1] >= 0:  # copied at the end of update u - 1
            current = int(metrics["pbt_parent"][current, u - 1]) * spec.seeds + current % spec.seeds
    used.reverse()
    segments = []
    for u, (r, values) in enumerate(used):
        if segments and segments[-1]["member"] == r // spec.seeds and segments[-1]["values"] == values:
            segments[-1]["last_update"] = u + 1
        else:
            segments.append({"first_update": u + 1, "last_update": u + 1, "member": r // spec.seeds, "values": values})
    return segments


def report(run_dir: Path, sweep: Any, spec: Spec, metrics: dict[str, np.ndarray], config_values: dict[str, Any],
           first_seed: int, steps_per_update: int) -> dict:
    """pbt.json (per run: the members' final returns, the winner and its schedule), best_config.json
    (the winner of the first run: its final values as constants and its schedule), the table."""
    from scanrl.common.harness.logging import final_returns

    final = final_returns(metrics["episode_return"])  # [R]: mean over the last 10% of updates
    runs = []
    for s in range(spec.seeds):
        rows = [m * spec.seeds + s for m in range(spec.members)]
        scores = np.array([-np.inf if np.isnan(final[r]) else final[r] for r in rows])
        best = rows[int(np.argmax(scores))]
        runs.append({
            "seed": first_seed + s, "winner": best // spec.seeds, "winner_final_return": _float32_or_none(final[best]),
            "final_return_per_member": [_float32_or_none(final[r]) for r in rows],
            "schedule": schedule(metrics, sweep, spec, best),
        })
    summary = {
        "members": spec.members, "seeds": spec.seeds, "interval": spec.interval, "burn_in": spec.burn_in,
        "fraction": spec.fraction, "perturb": spec.perturb, "resample": spec.resample, "fields": sorted(sweep.values),
        "space": {k: list(v) if v[0] != "grid" else ["grid", list(v[1])] for k, v in spec.space.items()},
        "ranked_by": "final return (mean episode return over the last 10% of updates)", "runs": runs,
    }
    (run_dir / "pbt.json").write_text(json.dumps(summary, indent=2) + "\n")
    winner = runs[0]
    best = {k: v for k, v in config_values.items() if not k.startswith("pbt") and k not in ("sweep", "sweep_samples")}
    best.update(winner["schedule"][-1]["values"])
    best["pbt_schedule"] = {
        "note": "PBT found a schedule, not a constant: the values above are the winner's last ones, which training "
                "with --config holds fixed from the start; the segments below are what the winner trained with.",
        "seed": winner["seed"], "member": winner["winner"], "segments": winner["schedule"]}
    (run_dir / "best_config.json").write_text(json.dumps(best, indent=2, default=str) + "\n")
    burn_in = f", none replaced before update {spec.burn_in + 1}" if spec.burn_in else ""
    print(f"\npbt: {spec.members} members x {spec.seeds} runs, interval {spec.interval} updates{burn_in}")
    for r in runs:
        last = r["schedule"][-1]["values"]
        shown = ", ".join(f"{k}={v:.4g}" for k, v in last.items())
        final = "none" if r["winner_final_return"] is None else f"{r['winner_final_return']:.2f}"
        print(f"  seed {r['seed']}: winner member {r['winner']}, final return {final}, "
              f"{len(r['schedule'])} segments, last values {shown}")
    print(f"  schedule and values: {run_dir / 'pbt.json'}, {run_dir / 'best_config.json'}", flush=True)
    return summary


def draw(run_dir: Path, sweep: Any, spec: Spec, metrics: dict[str, np.ndarray], summary: dict,
         steps_per_update: int) -> None:
    """pbt.png: per field, every member's values over training (the first run's winner's schedule
    bold), and every member's fitness at each interval."""
    from scanrl.common.harness import plots

    fields = sorted(sweep.values)
    fig = plots.figure(4 * (len(fields) + 1), 4)
    updates = metrics["pbt_parent"].shape[1]
    x = (np.arange(updates) + 1) * steps_per_update
    winner = summary["runs"][0]["schedule"]
    for i, name in enumerate(fields):
        ax = fig.add_subplot(1, len(fields) + 1, i + 1)
        for m in range(spec.members):
            ax.step(np.concatenate([[0], x]), np.concatenate([[_value(sweep.values[name][m])], metrics[f"pbt_{name}"][m * spec.seeds]]),
                    where="post", lw=0.8, alpha=0.4)
        sx = [(seg["first_update"] - 1) * steps_per_update for seg in winner] + [winner[-1]["last_update"] * steps_per_update]
        sy = [seg["values"][name] for seg in winner] + [winner[-1]["values"][name]]
        ax.step(sx, sy, where="post", color="k", lw=2, label="winner's schedule")
        if name in sweep.log_fields or spec.space[name][0] == "log":
            ax.set_yscale("log")
        ax.set(xlabel="env steps per member", ylabel=name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        plots.steps_axis(ax)
    ax = fig.add_subplot(1, len(fields) + 1, len(fields) + 1)
    at = intervals(metrics)
    for m in range(spec.members):
        ax.plot((at + 1) * steps_per_update, metrics["pbt_fitness"][m * spec.seeds, at], "o-", ms=3, lw=0.8, alpha=0.6)
    ax.set(xlabel="env steps per member", ylabel="fitness at each interval", title=f"{spec.members} members (seed run 0)")
    ax.grid(alpha=0.3)
    plots.steps_axis(ax)
    fig.tight_layout()
    plots.save(fig, run_dir / "pbt.png")


def write(run_dir: Path, sweep: Any, spec: Spec, metrics: dict[str, np.ndarray], config_values: dict[str, Any],
          first_seed: int, steps_per_update: int) -> None:
    """A finished PBT run's files: pbt.jsonl (`write_lineage`), pbt.json, best_config.json and
    the table (`report`), then pbt.png (a plotting failure is only a warning)."""
    import sys

    write_lineage(run_dir, lineage(metrics, sweep, spec, first_seed, steps_per_update))
    summary = report(run_dir, sweep, spec, metrics, config_values, first_seed, steps_per_update)
    try:
        draw(run_dir, sweep, spec, metrics, summary, steps_per_update)
    except Exception as e:  # noqa: BLE001 - a picture must never fail a finished run
        print(f"warning: pbt.png was not drawn ({type(e).__name__}: {e}); the run's other files are complete.",
              file=sys.stderr)
