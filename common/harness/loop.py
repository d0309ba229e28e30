"""From an algorithm's pieces to compiled programs: the whole run, and the same run in chunks.

An algorithm file's `make_algorithm(config, env, env_params)` returns an `Algorithm`
(common/algorithm.py): `init(key) -> state`, `update(state, update_index) -> (state, metrics)`,
`act(policy, obs, key, deterministic) -> action`, `policy_params(state) -> policy`, and its env and
sizes. `build(make_algorithm, config)` places the seeds on the device mesh
(common/harness/devices.py) and returns a `Program` of three jitted functions:

- `train(keys[num_seeds]) -> {"state", "policy", "metrics"}`: the whole run in one
  program, evaluated; metrics leaves [num_seeds, num_updates]. Each algorithm file's own
  `make_train` writes out the same run without the evaluation (common/algorithm.py), and
  trains bit for bit alike;
- `start(keys) -> state` and `advance(state, first_update, n) -> (state, metrics)`: the
  same run in chunks of at most `chunk` updates (metrics [num_seeds, chunk], NaN past
  `n`; the updates past `n` are computed and discarded). `advance` is compiled once for every n and
  donates its state. Chunks run back to back give bit for bit the whole run's result. Its metrics
  also hold `_policy_finite` (1 where every policy parameter is finite after the update) for the
  driver's watch.

Seeds are vmapped within a device and sharded over the mesh's "seed" axis by `shard_map`,
which is manual over "seed" only. The "data" axis (data parallelism: one seed's environments
over several devices) is left to XLA's partitioner: the env interface places the environment
axis on it (`envs.shard_envs`), and the partitioner splits that work and inserts the
reductions. The algorithm's code is the same single-device code either way.

Evaluation lives here, the same for every algorithm: every `eval_every` updates and after
the last, `eval_episodes` episodes of the deterministic policy (`act(..., deterministic=True)`,
metric `eval_return`) and as many of the sampled one (`deterministic=False`, metric
`eval_return_sampled`) on the evaluation env (`--eval-env-params`), keyed by
`fold_in(fold_in(seed key, EVAL_STREAM), update)` (the sampled ones fold in SAMPLED_TAG
too), so it never draws from the training randomness and can be replayed from a run folder.
The two can differ widely: an argmax policy may loop where its samples reach the goal.
An env that reports how an episode ended (`StepInfo.outcomes`: SMAX's battle won) adds each
outcome of the first episodes the same way (`eval_win_rate`, `eval_win_rate_sampled`).

No host callbacks: every program can be stored by JAX's persistent compilation cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

import numpy as np

from scanrl.common import envs
from scanrl.common.algorithm import Algorithm, compiler_options, resolve_env, vmap_seeds

from scanrl.common.harness import devices, envsettings, pbt as pbt_lib, sweeps

EVAL_STREAM = 0x5EED  # fold_in tag that separates evaluation keys from training keys
SAMPLED_TAG = (
    1  # fold_in tag of the sampled policy's evaluation keys (the deterministic one keeps its own)
)


def acting(
    algo: Algorithm, policy: Any, deterministic: bool, num_envs: int
) -> tuple[Any, Callable]:
    """(carry, act(obs, key, carry, mask=None) -> (actions, carry)) for `num_envs` environments,
    the same for feed-forward (carry ()) and recurrent policies. mask: the valid actions
    [N, A] where the env has an action mask (passed on to the algorithm's `act` only then)."""
    def act(obs, key, carry, mask=None):
        masking = {} if mask is None else {"mask": mask}
        if algo.init_carry is None:
            return algo.act(policy, obs, key, deterministic, **masking), carry
        return algo.act(policy, obs, key, deterministic, carry, **masking)

    return (() if algo.init_carry is None else algo.init_carry(num_envs)), act


class SeedState(NamedTuple):
    """One seed's (in a sweep: one config and seed's) state between updates."""

    train: Any  # the algorithm's state
    eval_key: jax.Array
    hparams: (
        dict  # a sweep's values of the swept fields for this row (float32 scalars); {} otherwise
    )


class PopulationState(NamedTuple):
    """One member's state in a --pbt population: a SeedState's, and its fitness record
    (common/harness/pbt.py). A class of its own, so a plain run's checkpoints keep their
    structure."""

    train: Any
    eval_key: jax.Array
    hparams: dict
    pbt: dict


@dataclass(frozen=True)
class Program:
    config: Any
    algorithm: Algorithm
    layout: devices.Layout
    num_seeds: int
    chunk: int
    train: Callable
    start: Callable
    advance: Callable
    policy: Callable  # policy(state) -> policy pytree, leaves [num_seeds, ...]
    state_sharding: NamedSharding  # of every leaf of the state
    sweep: Any = None  # common/sweeps.Sweep: num_seeds counts (config, seed) rows
    pbt: Any = None  # common/harness/pbt.Spec with --pbt: the sweep's rows are its population

    @property
    def num_updates(self) -> int:
        return self.algorithm.num_updates

    @property
    def steps_per_update(self) -> int:
        return self.algorithm.steps_per_update


def eval_key(seed_key: jax.Array) -> jax.Array:
    """A seed's evaluation stream; its evaluation after update u uses fold_in(eval_key, u)."""
    return jax.random.fold_in(seed_key, EVAL_STREAM)


def environment(job: Any, env: Any = None, env_params: Any = None) -> tuple[Any, Any, Any]:
    """(env, its default params, the params it trains with) for a Job: its env id or the user's
    own env object, with --env-options and --hide-obs applied and --env-params over the
    defaults (ValueError with one sentence for a bad index, name or value)."""
    run = job.run
    options = dict(zip(run.env_options[::2], run.env_options[1::2]))
    env, params = resolve_env(job.env, env, env_params, options)
    if run.hide_obs:
        env = envsettings.HiddenObs(env, run.hide_obs, params)
    return env, params, envsettings.override_params(params, run.env_params, "--env-params")


def evaluation_params(run: Any, env: Any, base_params: Any) -> Any:
    """The env parameters a run evaluates on: `--eval-env-params` over the env's defaults if
    given, else the training parameters (`--env-params` over the defaults); in both, first the
    env's `evaluation_params` hook (what scores the task alone: Overcooked without shaping)."""
    task = envs.hook(env, "evaluation_params") or (lambda params: params)
    if run.eval_env_params:
        return envsettings.override_params(task(base_params), run.eval_env_params,
                                           "--eval-env-params")
    return task(envsettings.override_params(base_params, run.env_params, "--env-params"))


class Episodes(NamedTuple):
    """The first episode of each of N environments."""

    returns: jax.Array  # [N]
    lengths: jax.Array  # [N] int32
    # {name: [N]} how each ended, by the env (StepInfo.outcomes: SMAX's win_rate); {}: none
    outcomes: dict


def run_episodes(vec_env: envs.VecEnv, act: Callable, key: jax.Array, carry: Any = ()) -> Episodes:
    """The evaluation protocol: return [N], length [N] and the env's outcomes of the first
    episode of each of vec_env's N environments.

    act(obs [N, *obs], key, carry, mask) -> (actions [N, ...], carry), e.g. the mode of the
    policy; mask: the valid actions [N, A] (None without an action mask);
    `carry` is a recurrent policy's state for the N environments (() for a feed-forward one;
    only first episodes count, so it never needs a reset). Steps every environment until
    each has finished its first episode (a while loop inside the program).
    """
    k_reset, k_steps = jax.random.split(key)
    obs, state = vec_env.reset(k_reset)
    n = vec_env.num_envs
    # the names the env reports an episode's end by (traced, not run: no work in the program)
    names = jax.eval_shape(
        lambda: vec_env.step(k_steps, state, act(obs, k_steps, carry,
                                                 vec_env.action_mask(state))[0])[2].outcomes)

    def not_finished(loop_state):
        return ~loop_state[4].all()

    def step(loop_state):
        obs, state, total, length, finished, key, carry, outcomes = loop_state
        key, k_act, k_step = jax.random.split(key, 3)
        action, carry = act(obs, k_act, carry, vec_env.action_mask(state))
        obs, state, info = vec_env.step(k_step, state, action)
        total = total + jnp.where(finished, 0.0, info.reward)
        length = length + jnp.where(finished, 0, 1)
        if outcomes:  # kept where the first episode ends
            ended = ~finished & (info.terminated | info.truncated)
            outcomes = {k: jnp.where(ended, info.outcomes[k], v) for k, v in outcomes.items()}
        finished = finished | info.terminated | info.truncated
        return obs, state, total, length, finished, key, carry, outcomes

    init = (obs, state, jnp.zeros(n), jnp.zeros(n, jnp.int32), jnp.zeros(n, bool), k_steps, carry,
            {k: jnp.zeros(n) for k in names or {}})
    _, _, returns, lengths, _, _, _, outcomes = jax.lax.while_loop(not_finished, step, init)
    return Episodes(returns, lengths, outcomes)


def one_seed(
    run: Any, pieces: Callable, eval_env: envs.VecEnv, num_updates: int, fitness: str | None = None
) -> tuple[Callable, Callable]:
    """`init_one(key, hparams) -> SeedState` and `update_one(state, u) -> (state, metrics)` for one
    seed (one sweep row): the algorithm's update, the non-finite watch and the evaluation.
    `fitness`: with --pbt, the metric each update adds to the member's fitness record."""

    def evaluate(algo, train_state, key):
        """{metric: mean}: eval_return (deterministic) and eval_return_sampled, and each of the
        env's outcomes the same way (SMAX: eval_win_rate, eval_win_rate_sampled)."""
        policy = algo.policy_params(train_state)
        means = {}
        for deterministic, policy_key, suffix in (
            (True, key, ""),
            (False, jax.random.fold_in(key, SAMPLED_TAG), "_sampled"),
        ):
            carry, act = acting(algo, policy, deterministic, eval_env.num_envs)
            episodes = run_episodes(eval_env, act, policy_key, carry)
            means["eval_return" + suffix] = episodes.returns.mean()
            means.update({f"eval_{k}{suffix}": v.mean() for k, v in episodes.outcomes.items()})
        return means

    def init_one(key, hp):
        state = SeedState(train=pieces(hp).init(key), eval_key=eval_key(key), hparams=hp)
        return PopulationState(*state, pbt=pbt_lib.initial_record()) if fitness else state

    def update_one(state, u):
        algo = pieces(state.hparams)
        train, metrics = algo.update(state.train, u)
        # For the driver's non-finite watch (dropped from the results): a diverged loss
        # reaches the policy's parameters within the update.
        policy = [
            x
            for x in jax.tree.leaves(algo.policy_params(train))
            if jnp.issubdtype(x.dtype, jnp.inexact)
        ]
        metrics["_policy_finite"] = jnp.all(jnp.stack([jnp.isfinite(x).all() for x in policy]))
        if run.eval_every:
            due = ((u + 1) % run.eval_every == 0) | (u == num_updates - 1)
            key = jax.random.fold_in(state.eval_key, u)
            evaluated = partial(evaluate, algo, train, key)
            nan = jnp.float32(jnp.nan)  # every evaluation metric is a float32 mean
            nans = jax.tree.map(lambda _: nan, jax.eval_shape(evaluated))
            metrics.update(jax.lax.cond(due, evaluated, lambda: nans))
        metrics = {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}
        if fitness:
            state = state._replace(pbt=pbt_lib.record(state.pbt, metrics[fitness]))
        return state._replace(train=train), metrics

    return init_one, update_one


def seed_mapped(init_one: Callable, update_one: Callable, layout: devices.Layout, pbt: Any = None,
                num_rows: int = 0) -> tuple[Callable, Callable]:
    """`init_all(keys, hparams) -> states` and `updates(length)(states, first, n) -> (states,
    metrics)`: every seed's block vmapped on its device, the blocks shard_mapped over "seed".
    `pbt` (a common/harness/pbt.Spec): after each update, the population's exploit and explore
    where an interval ends, over the `num_rows` rows that are not padding."""
    # A device's block of seeds, vmapped as `make_train` maps them (bit for bit the same run)
    init_block = vmap_seeds(init_one, layout.seeds_per_shard)
    update_block = vmap_seeds(update_one, layout.seeds_per_shard, in_axes=(0, None))

    # With data parallelism the map is manual over "seed" alone: "data" is XLA's to partition.
    # Without, both axes are manual: the partitioner has nothing to do, and compiling is about
    # 12% faster (benchmarks/HISTORY.md, 2026-11-25, 07:57-08:13). check_vma=False: with it on, a
    # parameter built from a constant (e.g. a zero log-std) would count as replicated and its
    # gradient be summed over seeds (tests/test_data_parallel.py checks that seeds stay apart).
    manual = {"seed"} if layout.data_parallel > 1 else {"seed", "data"}
    seed_map = partial(jax.shard_map, mesh=layout.mesh, axis_names=manual, check_vma=False)

    def updates(length):
        def block(states, first, n):
            def body(states, j):
                # Updates past `n` (only in a run's last, shorter chunk) are computed and thrown
                # away: a select, where lax.cond would need the update traced a second time
                # for its output shapes (0.3-0.5 s more at every start, cached or not).
                new_states, metrics = update_block(states, first + j)
                keep = j < n
                states = jax.tree.map(lambda a, b: jnp.where(keep, a, b), new_states, states)
                if pbt is not None:
                    states, population = pbt_lib.step(
                        states, first + j, keep, pbt, layout.seeds_per_shard, num_rows
                    )
                    metrics = {**metrics, **population}
                return states, jax.tree.map(lambda m: jnp.where(keep, m, jnp.nan), metrics)

            states, metrics = jax.lax.scan(body, states, jnp.arange(length))
            return states, jax.tree.map(lambda m: jnp.moveaxis(m, 0, 1), metrics)

        return seed_map(block, in_specs=(P("seed"), P(), P()), out_specs=(P("seed"), P("seed")))

    return seed_map(init_block, in_specs=(P("seed"), P("seed")), out_specs=P("seed")), updates


def strong(x):
    """x without JAX's weak type (a key array as it is)."""
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        return x
    return jax.lax.convert_element_type(x, x.dtype)


def build(
    make_algorithm: Callable, config: Any, env: Any = None, env_params: Any = None,
    chunk: int | None = None, sweep: Any = None,
) -> Program:
    """Programs for `config` (a Job: an algorithm's Config and the run settings); raises ValueError
    with one sentence when no device layout fits or the env or its parameters are wrong.

    With a `sweep` (common/harness/sweeps.py) the rows of the seed axis are (config, seed) pairs,
    config-major, `sweep.size * num_seeds` of them; `keys` then hold one key per row. With
    `run.pbt` the sweep's rows are a population (common/harness/pbt.py) that exploits and
    explores every `run.pbt_interval` updates."""
    # where JAX has not started yet (a library user's make_train); a warning where it started with
    # fewer devices
    devices.use_cpu_cores()
    run = config.run
    num_seeds = run.num_seeds * (sweep.size if sweep else 1)  # rows of the seed axis
    layout = devices.plan_layout(
        num_seeds, {"--num-envs": config.num_envs}, run.data_parallel, run.num_devices
    )
    env, base_params, train_params = environment(config, env, env_params)
    algo = make_algorithm(config.config, env, train_params)
    num_updates = algo.num_updates
    # A sweep's values enter as arrays: the pieces are built inside the program from a view of
    # the Config whose swept fields hold this row's values (tracers), so one compile serves every
    # config.
    hparams = (
        {k: np.repeat(v, run.num_seeds).astype(np.float32) for k, v in sweep.values.items()}
        if sweep
        else {}
    )
    pieces = (
        (lambda hp: make_algorithm(sweeps.with_values(config.config, hp), env, train_params))
        if sweep
        else (lambda hp: algo)
    )
    chunk = min(chunk or num_updates, num_updates)
    data = (
        layout.data_parallel
    )  # evaluation episodes: a multiple of the data devices, so each gets a share
    eval_env = envs.VecEnv(
        algo.env,
        evaluation_params(run, algo.env, base_params),
        math.ceil(run.eval_episodes / data) * data,
    )
    spec = pbt_lib.spec(run, sweep, num_updates) if sweep else None
    fitness = pbt_lib.fitness_metric(run) if spec else None
    init_all, updates = seed_mapped(
        *one_seed(run, pieces, eval_env, num_updates, fitness), layout, spec, num_seeds
    )

    def padded(keys):  # rows that do not fill the mesh evenly are padded with row 0, then dropped
        if keys.shape[0] != num_seeds:
            raise ValueError(f"expected {num_seeds} keys, got {keys.shape[0]}.")
        extra = layout.padded_seeds - num_seeds
        pad = lambda x: (
            jnp.concatenate([x, x[:1].repeat(extra, axis=0)]) if extra else x
        )  # noqa: E731
        return pad(keys), {k: pad(jnp.asarray(v)) for k, v in hparams.items()}

    def policy_of(states):
        return jax.vmap(algo.policy_params)(jax.tree.map(lambda x: x[:num_seeds], states.train))

    jit = partial(jax.jit, compiler_options=compiler_options(layout.mesh.devices.flat))
    replicated = NamedSharding(layout.mesh, P())
    # Between chunks every leaf of the state is sharded over seeds alone, whatever layout the
    # partitioner chose inside (environments over "data"): `advance` is lowered for that one
    # sharding and returns it. A sharding constraint is not enough: MJX's empty
    # [seeds, envs, 0] leaves come out of it replicated, and the next chunk refuses them.
    state_sharding = NamedSharding(layout.mesh, P("seed"))

    @partial(jit, in_shardings=(replicated,))
    def train(keys):
        states, metrics = updates(num_updates)(init_all(*padded(keys)), 0, num_updates)
        metrics = {k: m[:num_seeds] for k, m in metrics.items() if not k.startswith("_")}
        return {
            "state": jax.tree.map(lambda x: x[:num_seeds], states),
            "policy": policy_of(states),
            "metrics": metrics,
        }

    @partial(jit, in_shardings=(replicated,), out_shardings=state_sharding)
    def start(keys):
        # Weak types dropped: `advance` returns every leaf strongly typed, so a weakly typed
        # leaf here (a Python scalar's zeros) would make the second chunk a new program.
        return jax.tree.map(strong, init_all(*padded(keys)))

    @partial(
        jit, donate_argnums=0, out_shardings=(state_sharding, None)
    )  # None: metrics as XLA lays them out
    def advance(states, first, n):
        states, metrics = updates(chunk)(states, first, n)
        return states, jax.tree.map(lambda m: m[:num_seeds], metrics)

    return Program(
        config=config, algorithm=algo, layout=layout, num_seeds=num_seeds, chunk=chunk,
        train=train, start=start, advance=advance, policy=jit(policy_of),
        state_sharding=state_sharding, sweep=sweep, pbt=spec,
    )


def build_run(make_algorithm: Callable, config: Any, env: Any = None,
              env_params: Any = None) -> Program:
    """`build` for a run of the command line: its sweep or population (`--sweep`, `--pbt`)
    parsed, the chunks of `--log-every` updates, and the run checked against the program's
    number of updates (ValueError with one sentence)."""
    run = config.run
    sweep = sweeps.parse(run.sweep, run.sweep_samples, run.seed, config.config,
                         population=run.pbt_population if run.pbt else None)
    program = build(make_algorithm, config, env, env_params, chunk=run.log_every or None,
                    sweep=sweep)
    pbt_lib.check(run, program.num_updates if config.total_timesteps else None)
    if program.num_updates >= 2**31:  # update indices are int32 inside the program
        total = config.total_timesteps
        budget = f"{total:,}" if total < 10**15 else f"{total:.3g}"
        raise ValueError(f"--total-timesteps {budget} is {program.num_updates:.3g} updates of "
                         f"{program.steps_per_update:,} env steps; a run counts at most 2**31 - 1 "
                         f"updates: lower --total-timesteps.")
    return program


def row_keys(run: Any, program: Program) -> jax.Array:
    """One key per row of the seed axis: the seeds' keys, repeated for every config of a sweep."""
    keys = devices.seed_keys(run.seed, run.num_seeds)
    return keys[np.arange(program.num_seeds) % run.num_seeds] if program.sweep else keys
