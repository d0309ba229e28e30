"""The run settings (seeds, devices, evaluation, logging, checkpoints, stop conditions,
output) that the command line adds to an algorithm's hyperparameters, the sets that say what
each one touches, and `Job`: an algorithm's Config and the run settings, as one run of the
command line holds them. An algorithm file knows none of this: its Config is its
hyperparameters, and its `RUN_DEFAULTS` are the run settings it starts from.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import tyro

from scanrl.common import suites
from scanrl.common.algorithm import check_values, flag
from scanrl.common.suites import recipes


@dataclass(frozen=True)
class RunConfig:
    """Run settings shared by every algorithm (flat flags)."""

    seed: int = 0
    """first seed; seed i of the run uses jax.random.key(seed + i)."""
    num_seeds: int = 1
    """independent seeds trained together in one compiled program (vmapped, sharded over
    devices)."""
    env_params: dict[str, float] = field(default_factory=dict)
    """override training env parameters, e.g. --env-params length 0.7 (evaluation uses them too
    unless --eval-env-params is given; it never counts Overcooked's shaped reward)."""
    env_options: tuple[str, ...] = ()
    """KEY VALUE pairs: how a suite builds the env, e.g. --env-options backend positional (Brax's
    physics: generalized, positional, spring, mjx), a MuJoCo Playground config override
    (--env-options action_repeat 2) or JaxMARL's switches (agent_id 1, shaping_anneal 156250)."""
    recipe: Literal[recipes.CHOICES] = "auto"  # type: ignore[valid-type]
    """the suite's own published configuration for --env, where there is one (Brax,
    MuJoCo Playground, Craftax, Navix, XLand-MiniGrid): published, cpu (every count of
    environments and steps / 32), auto (published with a GPU or TPU, else cpu) or none (the
    algorithm's own defaults); td3 and sac: fast (fast-published, fast-cpu), FastTD3's
    published arguments for the env; flags win over it. A choice that gives the env no recipe
    is refused. The default is auto, shown as what auto gives for the --env given (none where
    the env has no recipe; --env ENV --help shows ENV's)."""
    hide_obs: tuple[int, ...] = ()
    """drop these components of the (flattened) observation, for training and evaluation: partial
    observability, e.g. --hide-obs 1 3 hides CartPole's velocities."""
    eval_every: int = 50
    """evaluate the policy every this many updates, and after the last (0: never): its sampled
    actions and its deterministic ones (the mode), both reported."""
    eval_episodes: int = 10
    """episodes per evaluation and policy (run in parallel)."""
    eval_policy: Literal["sampled", "deterministic"] = "sampled"
    """the evaluation --stop-return and --stop-plateau read, the progress shows first and a
    sweep ranks by: sampled (the policy that trained; Brax's trainers' default) or deterministic
    (its mode, or argmax; Stable-Baselines3's)."""
    eval_env_params: dict[str, float] = field(default_factory=dict)
    """evaluate on the default env with these parameters instead, e.g. --eval-env-params length
    0.7."""
    log_every: int = 10
    """progress line, progress.jsonl record and wandb log every this many updates: the run
    advances in chunks of this many updates (0: one chunk, no progress lines). A last, shorter
    chunk computes a whole chunk's updates and keeps its part: a divisor of the run's updates
    wastes none."""
    checkpoint_every: int = 100
    """save the whole training state to RUN_DIR/checkpoints every this many updates (at the first
    chunk boundary past each multiple; the last 3 are kept), and always at the end (0: only at the
    end)."""
    resume: str = ""
    """continue the run in this folder from its newest checkpoint with its saved config; flags that
    would change its results are refused, --total-timesteps may be raised to extend it."""
    config: str = ""
    """read settings from this JSON or YAML file first (any subset of fields; a run folder's
    config.json reproduces that run); flags given with it win."""
    stop_return: float | None = None
    """stop once the mean over seeds of the latest evaluation return (of --eval-policy; the
    episode return with --eval-every 0) reaches this."""
    stop_minutes: float | None = None
    """stop after this many minutes of training (wall clock, this invocation)."""
    stop_plateau: int | None = None
    """stop when this many evaluations in a row bring no new best mean evaluation return (of
    --eval-policy)."""
    num_devices: int = 0
    """devices to use (0: all; on CPU one device per core)."""
    data_parallel: int = 1
    """devices that split each seed's environments, gradients and statistics averaged
    (1: none, seeds fill the devices; 0: automatic, devices left over by too few seeds split
    environments). On CPU splitting costs more than it saves (benchmarks/RESULTS.md)."""
    distributed: bool = False
    """multi-process run: jax.distributed.initialize() before anything else (also implied by
    JAX_COORDINATOR_ADDRESS); only process 0 prints and writes (docs/scaling.md, several nodes or
    processes)."""
    compile_cache: bool = True
    """keep compiled programs in ~/.cache/scanrl/jax (or $JAX_COMPILATION_CACHE_DIR): a repeated run
    starts without tracing or compiling (common/harness/programs.py)."""
    wandb_mode: Literal["disabled", "offline", "online"] = "disabled"
    """wandb logging: disabled (default, needs no account), offline (local files), online."""
    wandb_project: str = "scanrl"
    """wandb project name."""
    out_dir: str = "runs"
    """parent folder of the run folder."""
    sweep: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    """sweep a hyperparameter, repeatable: FIELD=V1,V2,... (grid: the product of every --sweep) or
    FIELD=log:LOW:HIGH / FIELD=uniform:LOW:HIGH (random search, --sweep-samples draws seeded by
    --seed); configs x seeds train in one program (docs/lifecycle.md, Sweeps)."""
    sweep_samples: int = 8
    """random-search draws for log:/uniform: sweeps."""
    sweep_mode: Literal["program", "loop"] = "program"
    """program: every config in one compiled program (float hyperparameters only); loop: one
    program per config, one after another (for sizes and switches)."""
    pbt: bool = False
    """population-based training over the --sweep fields (their ranges or values): --pbt-population
    members train in one program, and every --pbt-interval updates the worst copy the best and
    perturb their hyperparameters (docs: Population-based training)."""
    pbt_population: int = 8
    """--pbt: members per run (every seed of --num-seeds is an independent run of this many)."""
    pbt_interval: int = 10
    """--pbt: updates between exploit/explore steps."""
    pbt_burn_in: int = 0
    """--pbt: updates every member trains on its own values before the first exploit (Ray Tune's
    burn_in_period): early returns are noisy, and a member that starts slowly is not replaced for
    it."""
    pbt_fraction: float = 0.25
    """--pbt: truncation selection: this fraction of the members, the worst by fitness, copy members
    drawn from the same fraction at the top."""
    pbt_perturb: float = 1.25
    """--pbt: explore multiplies each copied hyperparameter by this or divides it by this (even
    odds),
    within its --sweep range; a listed field moves to a neighbouring value."""
    pbt_resample: float = 0.25
    """--pbt: probability that explore draws a hyperparameter afresh from its --sweep range
    instead."""
    pbt_fitness: Literal["episodes", "eval"] = "episodes"
    """--pbt: rank members by the mean return of the interval's training episodes, or of its
    evaluations (of --eval-policy)."""

    def __post_init__(self):
        check_values(
            self,
            positive=("num_seeds", "eval_episodes", "stop_minutes", "stop_plateau"),
            nonnegative=(
                "eval_every",
                "log_every",
                "checkpoint_every",
                "num_devices",
                "data_parallel",
            ),
        )
        for name in ("env_params", "eval_env_params"):
            for key, value in getattr(self, name).items():
                if not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ValueError(f"{flag(name)} {key} must be a finite number, got {value}.")
        if len(self.env_options) % 2:
            raise ValueError(
                f"--env-options takes KEY VALUE pairs, got {' '.join(self.env_options)}."
            )
        if self.stop_plateau is not None and not self.eval_every:
            raise ValueError(
                f"--stop-plateau {self.stop_plateau} counts evaluations, but --eval-every is 0."
            )
        check_values(
            self, positive=("pbt_population", "pbt_interval"), nonnegative=("pbt_burn_in",),
            within={"pbt_fraction": "(0, 0.5]", "pbt_resample": "[0, 1]"},
        )
        if self.pbt_perturb <= 1:
            raise ValueError(f"--pbt-perturb must be greater than 1, got {self.pbt_perturb}.")
        if self.pbt:
            self._check_pbt()
        if self.resume and self.config:
            raise ValueError(
                f"--resume {self.resume} keeps the run's saved config; drop --config {self.config}."
            )

    def _check_pbt(self) -> None:
        if not self.sweep:
            raise ValueError(
                "--pbt searches the --sweep fields: give at least one, e.g. --sweep"
                " learning_rate=log:1e-4:1e-2."
            )
        if self.sweep_mode == "loop":
            raise ValueError(
                "--pbt changes hyperparameters inside one program, so it cannot run with"
                " --sweep-mode loop."
            )
        if int(self.pbt_population * self.pbt_fraction) < 1:
            raise ValueError(
                f"--pbt-population {self.pbt_population} is too small for --pbt-fraction"
                f" {self.pbt_fraction:g}: truncation needs at least"
                f" {math.ceil(1 / self.pbt_fraction)} members."
            )
        if self.pbt_fitness == "eval" and (
            not self.eval_every or self.pbt_interval % self.eval_every
        ):
            raise ValueError(
                "--pbt-fitness eval needs an evaluation within every interval: make --eval-every "
                f"({self.eval_every}) a divisor of --pbt-interval {self.pbt_interval}."
            )

    @property
    def eval_metric(self) -> str:
        """The metric of the evaluation that --eval-policy names."""
        return "eval_return_sampled" if self.eval_policy == "sampled" else "eval_return"

    @property
    def has_stop_condition(self) -> bool:
        return any(v is not None for v in (self.stop_return, self.stop_minutes, self.stop_plateau))


RUN_FIELDS = frozenset(f.name for f in dataclasses.fields(RunConfig))
# What each run setting touches, declared here once; every consumer reads these sets.
LAUNCH_FIELDS = frozenset(
    {"config", "resume"}
)  # how a run was started, not what it is: not in config.json
OUTPUT_FIELDS = frozenset(
    {"out_dir", "wandb_mode", "wandb_project", "compile_cache", "checkpoint_every", "distributed"}
)
STOP_FIELDS = frozenset(
    {"stop_return", "stop_minutes", "stop_plateau", "eval_policy"}
)  # read between chunks
# The compiled program is the same whatever these are (common/harness/programs.py's key leaves them
# out).
NOT_IN_PROGRAM = LAUNCH_FIELDS | OUTPUT_FIELDS | STOP_FIELDS | {"seed"}
# --resume may change these: they change nothing a run computes (total_timesteps may only grow).
RESUMABLE = LAUNCH_FIELDS | OUTPUT_FIELDS | STOP_FIELDS | {"log_every", "total_timesteps"}
# scanrl-plot's legends leave these out: where output goes and how often, not what was run.
NOT_IN_LABELS = OUTPUT_FIELDS | {"log_every", "num_devices"}
assert (LAUNCH_FIELDS | OUTPUT_FIELDS | STOP_FIELDS) <= RUN_FIELDS


@dataclass(frozen=True)
class Job:
    """One run of the command line: an algorithm's Config (its hyperparameters: what `make_train`
    takes) and the run settings. It also reads as its Config (`job.env` is `job.config.env`), so
    the harness asks one object for both. Flat flags, config.json and `--config` files hold the
    two side by side."""

    config: Any
    run: RunConfig

    def __post_init__(self):
        if self.config.total_timesteps == 0 and not self.run.has_stop_condition:
            raise ValueError(
                "--total-timesteps 0 trains until a stop condition holds: give --stop-return, "
                "--stop-minutes or --stop-plateau too."
            )

    def __getattr__(self, name: str) -> Any:  # called only for names Job does not have itself
        if name.startswith("__"):  # copy and pickle probe these before the fields exist
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, "config"), name)

    def replace(self, **values: Any) -> Job:
        """This Job with some flat values changed (hyperparameters or run settings)."""
        hyper = {k: v for k, v in values.items() if k not in RUN_FIELDS}
        settings = {k: v for k, v in values.items() if k in RUN_FIELDS}
        return Job(dataclasses.replace(self.config, **hyper) if hyper else self.config,
                   dataclasses.replace(self.run, **settings) if settings else self.run)


def config_dict(job: Job) -> dict[str, Any]:
    """A Job as flat values, the form flags take and config.json stores."""
    run = {k: v for k, v in dataclasses.asdict(job.run).items() if k not in LAUNCH_FIELDS}
    return {**dataclasses.asdict(job.config), **run}


def compose(module: Any, env: str | None = None, recipe: str = "auto", **values: Any) -> Job:
    """The Job for an algorithm module (its Config, default_config, ALGO and RUN_DEFAULTS) on `env`
    (default: its Config's): the file's defaults and presets (its RUN_DEFAULTS for every env and
    for the env's preset), the suite's recipe for `env` where there is one
    (`recipe`: a `recipes.CHOICES`), then `values`, flat (hyperparameters and run settings
    alike) over both. ValueError or TypeError for a bad value."""
    env = env or module.Config.__dataclass_fields__["env"].default
    name = getattr(module, "ALGO", module.__name__.rsplit(".", 1)[-1])
    applied = recipes.lookup(name, env, recipe)[
        1
    ]  # looked up once: its hyperparameters and run settings
    hyper = {k: v for k, v in {**applied, **values}.items() if k not in RUN_FIELDS}
    config = module.default_config(
        env, recipe="none", **hyper
    )  # presets, then the recipe's, then values
    by_preset = getattr(module, "RUN_DEFAULTS", {})
    settings = {**by_preset.get(None, {}), **by_preset.get(suites.preset_name(env), {}),
                **{k: v for k, v in {**applied, **values}.items() if k in RUN_FIELDS}}
    return Job(config, RunConfig(**settings))
