"""Run settings, flag values and config files.

`RunConfig` declares the run settings every algorithm shares, and the sets below it say
once what each touches (the program, a resume, the plots' labels).

`check_values` is what each algorithm's `Config.__post_init__` calls (finite floats, ranges,
intervals, echoing the bad value); `read_config_file` reads a JSON or YAML file of fields
(flat, or with a nested `run:` mapping), coercing each value by its field's type, with one
sentence naming the key and the file for anything wrong. common/harness/run.py uses them to parse a
command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import os
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import tyro

INDEFINITE_UPDATES = 2**30  # --total-timesteps 0: "until a stop condition holds"


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


def _field_types(config_cls: type) -> dict[str, Any]:
    """Field name -> type of a Config and of its `run` field's RunConfig, flat."""
    own = typing.get_type_hints(config_cls)
    hints = {**own, **typing.get_type_hints(own["run"])}
    return {k: v for k, v in hints.items() if k != "run" and k not in LAUNCH_FIELDS}


def coerce(value: Any, hint: Any) -> Any:
    """`value` read from JSON/YAML as type `hint`; ValueError saying what was expected."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "false"):
            return str(value).lower() == "true"
        raise ValueError("true or false")
    if hint is int:
        if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.strip().lstrip("-").isdigit())):
            raise ValueError("an integer")
        return int(value)
    if hint is float:
        if isinstance(value, bool):
            raise ValueError("a number")
        try:
            return float(value)  # YAML 1.1 reads 3e-4 as a string
        except (TypeError, ValueError):
            raise ValueError("a number") from None
    if hint is str:
        if not isinstance(value, str):
            raise ValueError("a string")
        return value
    if origin is Literal:
        if value not in args:
            raise ValueError(f"one of {', '.join(map(repr, args))}")
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        return coerce(value, next(a for a in args if a is not type(None)))
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError("a list")
        return tuple(coerce(v, args[0]) for v in value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError("a mapping of names to numbers")
        return {str(k): coerce(v, args[1]) for k, v in value.items()}
    return value


def read_config_file(path: str | Path, config_cls: type) -> dict[str, Any]:
    """Flat values from a JSON or YAML file (flat keys, or a nested `run` mapping), each
    coerced to its field's type. ValueError naming the key and the file for anything wrong."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--config {path}: no such file.")
    text = path.read_text()
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as e:  # a syntax error: say where
        raise ValueError(f"{path} is not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'JSON'}: "
                         f"{str(e).splitlines()[0]}.") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a mapping of field names to values, not a {type(data).__name__}.")
    data = {**{k: v for k, v in data.items() if k not in ("run", "algo", "algo_file")}, **(data.get("run") or {})}
    types, values = _field_types(config_cls), {}
    for key, value in data.items():
        if key in LAUNCH_FIELDS:
            raise ValueError(f"key '{key}' in {path}: {flag(key)} can only be given as a flag.")
        if key not in types:
            close = difflib.get_close_matches(key, list(types), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else "."
            raise ValueError(f"unknown key '{key}' in {path}{hint}")
        try:
            values[key] = coerce(value, types[key])
        except ValueError as e:
            raise ValueError(f"key '{key}' in {path} must be {e}, got {value!r}.") from None
    return values


def run_algorithm(run_dir: str | Path) -> str | None:
    """The algorithm that wrote a run folder (or None where nothing says): config.json's
    "algo", else summary.json's, else the folder name's `<algo>__<env>__<time>` prefix."""
    run_dir = Path(run_dir)
    for name in ("config.json", "summary.json"):
        try:
            algo = json.loads((run_dir / name).read_text()).get("algo")
        except (OSError, ValueError, AttributeError):
            continue
        if algo:
            return str(algo)
    return run_dir.name.split("__")[0] if run_dir.name.count("__") >= 2 else None


class Run:
    """What a plot needs from a run folder."""

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)
        for name in ("config.json", "summary.json", "metrics.npz"):
            if not (self.dir / name).is_file():
                raise RunFolderError(f"{self.dir} is not a finished run folder (it has no {name}; a run writes "
                                     f"metrics.npz and summary.json when it ends or is interrupted).")
        self.config = json.loads((self.dir / "config.json").read_text())
        self.summary = json.loads((self.dir / "summary.json").read_text())
        with np.load(self.dir / "metrics.npz") as z:
            self.metrics = {k: z[k].astype(np.float64) for k in z.files}
        if self.summary.get("num_configs"):
            raise RunFolderError(f"{self.dir} is a sweep of several configs: its sweep.png compares them.")
        self.steps_per_update = self.summary["total_timesteps"] / max(self.summary["updates"], 1)

    def steps(self, updates_done: np.ndarray) -> np.ndarray:
        return updates_done * self.steps_per_update

    def seconds(self, updates_done: np.ndarray) -> np.ndarray:
        """Training seconds (compile excluded) at these update counts, from progress.jsonl."""
        records = [json.loads(l) for l in (self.dir / "progress.jsonl").read_text().splitlines() if l.strip()]
        if not records or "seconds" not in records[-1]:
            raise ValueError(f"--x wall: {self.dir}/progress.jsonl has no timing (an older scanrl wrote it); use --x steps.")
        done = np.array([0] + [r["update"] for r in records], np.float64)
        elapsed = np.array([0.0] + [r["seconds"] for r in records])
        return np.interp(updates_done, done, elapsed)


def algorithm_file(run_dir: str | Path) -> str | None:
    """The algorithm file outside scanrl (a copy) that trained a run folder, as its config.json
    records it; None for scanrl's own algorithms."""
    try:
        return json.loads((Path(run_dir) / "config.json").read_text()).get("algo_file")
    except (OSError, ValueError, AttributeError):
        return None


def algorithm_command(run_dir: str | Path, algo: str) -> str:
    """What follows `python` to run the algorithm that trained `run_dir`: its file, or scanrl's module."""
    return algorithm_file(run_dir) or f"-m scanrl.algos.{algo}"


def check_algorithm(argv: list[str], algo: str) -> None:
    """`--resume` / `--config` of another algorithm's run: one sentence naming that algorithm
    and the command that continues (or repeats) the run, before its keys are read (they
    would only say 'unknown key', and suggest the wrong edit)."""
    resume, config_file = flag_value(argv, "--resume"), flag_value(argv, "--config")
    if resume:
        theirs = run_algorithm(resume)
        if theirs and theirs != algo:
            fail(f"--resume {resume} is a {theirs} run, not a {algo} one: continue it with "
                 f"`python {algorithm_command(resume, theirs)} --resume {resume}`.")
    elif config_file and Path(config_file).is_file():
        try:
            data = json.loads(Path(config_file).read_text()) if not config_file.endswith((".yaml", ".yml")) else {}
        except ValueError:
            return  # read_config_file says what is wrong with it
        theirs = data.get("algo") if isinstance(data, dict) else None
        if theirs is None and Path(config_file).name == "config.json" and (Path(config_file).parent / "summary.json").is_file():
            theirs = run_algorithm(Path(config_file).parent)
        if theirs and theirs != algo:
            command = data.get("algo_file") if isinstance(data, dict) and data.get("algo_file") else \
                f"-m scanrl.algos.{theirs}"
            fail(f"--config {config_file} is the config of a {theirs} run, not a {algo} one: train it with "
                 f"`python {command} --config {config_file}`.")


# Reading argv before tyro does
def flag_value(argv: list[str], name: str) -> str | None:
    value = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def check_pairs(argv: list[str], name: str, numbers: bool = True) -> None:
    """`--env-params KEY VALUE ...`: pairs, and with `numbers` every VALUE a number (tyro's own
    message shows none); ValueError otherwise."""
    if name not in argv:
        return
    i = argv.index(name) + 1
    words = []
    while i < len(argv) and not argv[i].startswith("--"):
        words.append(argv[i])
        i += 1
    if len(words) % 2:
        raise ValueError(f"{name} takes KEY VALUE pairs, got {' '.join(words) or 'nothing'}.")
    for key, value in zip(words[::2], words[1::2]) if numbers else ():
        try:
            float(value)
        except ValueError:
            raise ValueError(f"{name} {key} must be a number, got '{value}'.") from None


def _flag_types(config_cls: type) -> dict[str, Any]:
    """`--flag` -> type hint for every field of a Config and its RunConfig (bools also as --no-flag)."""
    own = typing.get_type_hints(config_cls)
    hints = {k: v for k, v in {**own, **typing.get_type_hints(own["run"])}.items() if k != "run"}
    flags = {}
    for name, hint in hints.items():
        flags[flag(name)] = hint
        if hint is bool:
            flags["--no-" + name.replace("_", "-")] = hint
    return flags


def whole_numbers(argv: list[str], config_cls: type) -> list[str]:
    """argv with every integer flag's value written as an integer: `--total-timesteps 1e6`,
    `2.5e5` and `1_000_000` all mean what they say. A value that is no whole number is one
    sentence and exit 2."""
    ints = {name for name, hint in _flag_types(config_cls).items() if hint is int}
    out, i = list(argv), 0
    while i < len(out):
        name, eq, value = out[i].partition("=")
        if name in ints and (eq or i + 1 < len(out)):
            index = i if eq else i + 1
            text = value if eq else out[index]
            try:
                number = float(text.replace("_", ""))
            except ValueError:
                fail(f"{name} takes a whole number (such as 1000000, 1e6 or 1_000_000), got {text!r}.")
            if not math.isfinite(number) or number != int(number):
                fail(f"{name} takes a whole number (such as 1000000, 1e6 or 1_000_000), got {text!r}.")
            out[index] = f"{name}={int(number)}" if eq else str(int(number))
            i = index
        i += 1
    return out


def check_flag_names(argv: list[str], config_cls: type) -> None:
    """An unknown `--flag` is one sentence naming the flags it may have meant: close spellings,
    and flags whose words start with its letters (`--lr`: `--learning-rate`)."""
    known = set(_flag_types(config_cls)) | {"--help", "-h"}
    for arg in argv:
        name = arg.partition("=")[0]
        if not name.startswith("--") or name in known or name.replace("_", "-") in known:
            continue
        letters = name[2:].replace("_", "-").replace("-", "")
        initials = [k for k in sorted(known) if k.startswith("--") and
                    "".join(w[0] for w in k[2:].split("-") if w) == letters and not k.startswith("--no-")]
        close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.75)
        hints = list(dict.fromkeys(initials + close))
        hint = f"; did you mean {' or '.join(hints)}?" if hints else "; --help lists the flags."
        fail(f"unknown flag {name}{hint}")


def tyro_error_sentence(text: str) -> str:
    """tyro draws its errors in a box with the flag's help: the message alone, on one line."""
    lines = [line.strip(" │╭╮╰╯|") for line in text.splitlines()]
    sections, current = [], []
    for line in lines:  # separators: rules of box-drawing or ASCII dashes (no terminal)
        if not line.strip("─━-=+ ") or line.startswith("─"):  # a rule, or the box's titled top rule
            if current:
                sections.append(current)
            current = []
        else:
            current.append(line.strip())
    if current:
        sections.append(current)
    # the box's title ("Value error", "Parsing error") and its pointer to --help are not the message
    sections = [sec for sec in sections if not re.fullmatch(r"[\w ]*error", " ".join(sec), re.I)
                and not sec[0].startswith("For full helptext")]
    if not sections:
        return text.strip()
    message = " ".join(sections[0])
    message = re.sub(r"^Error parsing (Config|run): ", "", message)
    message = re.sub(r"^Error parsing (--[\w-]+): ", r"\1: ", message)
    message = re.sub(r"^Error parsing [\w.-]+: ", "", message)
    for section in sections[1:]:
        if section[0].startswith("Perhaps you meant"):
            message += f"; perhaps you meant {section[1].split()[0].rstrip(',')}"
    return message if message.endswith(".") else message + "."


class RunFolderError(ValueError):
    """A folder that is not (or not yet) a run folder."""


class ToolParser(argparse.ArgumentParser):
    """argparse for the tools (scanrl-eval, scanrl-plot): an error is one sentence and exit 2,
    as for the training flags."""

    def error(self, message: str):
        print(f"error: {message}.", file=sys.stderr)
        raise SystemExit(2)


def fail(message: str) -> typing.NoReturn:
    """A mistake the user can fix: one sentence on stderr, exit code 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


# ---------------------------------------------------------------------------------------------
# --help in groups
# ---------------------------------------------------------------------------------------------
HELP_GROUPS = {  # box -> (what it holds, its run settings); the algorithm's own fields make a first box
    "environment": ("the task", ("env", "recipe", "env_options", "env_params", "hide_obs", "eval_env_params")),
    "run": ("seeds and devices", ("seed", "num_seeds", "num_devices", "data_parallel", "distributed")),
    "lifecycle": ("evaluation, checkpoints, resume, stop conditions", (
        "eval_every", "eval_episodes", "eval_policy", "checkpoint_every", "resume", "config", "stop_return", "stop_minutes",
        "stop_plateau")),
    "logging": ("progress, run folder, wandb, compile cache",
                ("log_every", "out_dir", "wandb_mode", "wandb_project", "compile_cache")),
    "sweeps": ("many configs in one program", ("sweep", "sweep_samples", "sweep_mode")),
}


def field_docs(cls: type) -> dict[str, str]:
    """A dataclass's field docstrings (the string under each field), as tyro reads them."""
    import ast
    import inspect
    import textwrap

    docs, body = {}, ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    for node, after in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            docs[node.target.id] = " ".join(str(after.value.value).split())
    return docs


def grouped_help(config_cls: type, base: Any, description: str) -> typing.NoReturn:
    """Print --help with the flags in boxes (algorithm, environment, run, lifecycle, logging,
    sweeps), defaults from `base` (the env's presets applied), and exit 0. The flags parse as
    one flat Config; only the help is shown through this grouped copy of it."""

    def spec(cls: type, name: str, value: Any) -> tuple:
        hint = typing.get_type_hints(cls, include_extras=True)[name]
        default = field(default_factory=lambda v=value: v) if isinstance(value, (dict, list)) else field(default=value)
        return name, Annotated[hint, tyro.conf.arg(help=field_docs(cls).get(name, ""))], default

    run_cls = type(base.run)
    owner = {name: box for box, (_, names) in HELP_GROUPS.items() for name in names}
    boxes: dict[str, list] = {"algorithm": []} | {box: [] for box in HELP_GROUPS}
    for f in dataclasses.fields(config_cls):
        if f.name != "run":
            boxes[owner.get(f.name, "algorithm")].append(spec(config_cls, f.name, getattr(base, f.name)))
    for f in dataclasses.fields(run_cls):
        boxes[owner[f.name]].append(spec(run_cls, f.name, getattr(base.run, f.name)))
    fields = []
    for name, specs in boxes.items():
        box = dataclasses.make_dataclass(name, specs, frozen=True)
        box.__doc__ = HELP_GROUPS[name][0] if name in HELP_GROUPS else "this algorithm's hyperparameters"
        fields.append((name, box, field(default_factory=box)))
    flags = dataclasses.make_dataclass("Flags", fields, frozen=True)
    try:
        tyro.cli(flags, args=["--help"], description=description, config=(tyro.conf.OmitArgPrefixes,))
    except BrokenPipeError:  # `--help | head`: the reader left; no traceback for that
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise SystemExit(0)  # tyro exits after printing the help


# ---------------------------------------------------------------------------------------------
# The run settings every algorithm shares
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunConfig:
    """Run settings shared by every algorithm (flat flags)."""

    seed: int = 0
    """first seed; seed i of the run uses jax.random.key(seed + i)."""
    num_seeds: int = 1
    """independent seeds trained together in one compiled program (vmapped, sharded over devices)."""
    env_params: dict[str, float] = field(default_factory=dict)
    """override training env parameters, e.g. --env-params length 0.7 (evaluation uses them too unless
    --eval-env-params is given)."""
    env_options: tuple[str, ...] = ()
    """KEY VALUE pairs: how a suite builds the env, e.g. --env-options backend positional (Brax's physics: generalized,
    positional, spring, mjx) or a MuJoCo Playground config override (--env-options action_repeat 2)."""
    recipe: Literal["auto", "published", "cpu", "none"] = "auto"
    """the suite's own published configuration for --env, where common/recipes.py has one (Brax,
    MuJoCo Playground, Craftax, Navix, XLand-MiniGrid): published, cpu (every count of environments and steps / 32), auto (published
    with a GPU or TPU, else cpu) or none (the algorithm's own defaults); flags win over it."""
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
    """evaluate on the default env with these parameters instead, e.g. --eval-env-params length 0.7."""
    log_every: int = 10
    """progress line, progress.jsonl record and wandb log every this many updates: the run
    advances in chunks of this many updates (0: one chunk, no progress lines)."""
    checkpoint_every: int = 100
    """save the whole training state to RUN_DIR/checkpoints every this many updates (at the first
    chunk boundary past each multiple; the last 3 are kept), and always at the end (0: only at the end)."""
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
    """stop when this many evaluations in a row bring no new best mean evaluation return (of --eval-policy)."""
    num_devices: int = 0
    """devices to use (0: all; on CPU one device per core)."""
    data_parallel: int = 1
    """devices that split each seed's environments, gradients and statistics averaged
    (1: none, seeds fill the devices; 0: automatic, devices left over by too few seeds split
    environments). On CPU splitting costs more than it saves (benchmarks/RESULTS.md)."""
    distributed: bool = False
    """multi-process run: jax.distributed.initialize() before anything else (also implied by
    JAX_COORDINATOR_ADDRESS); only process 0 prints and writes. See README, Scaling."""
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
    FIELD=log:LOW:HIGH / FIELD=uniform:LOW:HIGH (random search, --sweep-samples draws seeded by --seed);
    configs x seeds train in one program (README, Sweeps)."""
    sweep_samples: int = 8
    """random-search draws for log:/uniform: sweeps."""
    sweep_mode: Literal["program", "loop"] = "program"
    """program: every config in one compiled program (float hyperparameters only); loop: one
    program per config, one after another (for sizes and switches)."""

    def __post_init__(self):
        check_values(self, positive=("num_seeds", "eval_episodes", "stop_minutes", "stop_plateau"),
                     nonnegative=("eval_every", "log_every", "checkpoint_every", "num_devices", "data_parallel"))
        if len(self.env_options) % 2:
            raise ValueError(f"--env-options takes KEY VALUE pairs, got {' '.join(self.env_options)}.")
        if self.stop_plateau is not None and not self.eval_every:
            raise ValueError(f"--stop-plateau {self.stop_plateau} counts evaluations, but --eval-every is 0.")
        if self.resume and self.config:
            raise ValueError(f"--resume {self.resume} keeps the run's saved config; drop --config {self.config}.")

    @property
    def eval_metric(self) -> str:
        """The metric of the evaluation that --eval-policy names."""
        return "eval_return_sampled" if self.eval_policy == "sampled" else "eval_return"

    @property
    def has_stop_condition(self) -> bool:
        return any(v is not None for v in (self.stop_return, self.stop_minutes, self.stop_plateau))


RUN_FIELDS = frozenset(f.name for f in dataclasses.fields(RunConfig))
# What each run setting touches, declared here once; every consumer reads these sets.
LAUNCH_FIELDS = frozenset({"config", "resume"})  # how a run was started, not what it is: not in config.json
OUTPUT_FIELDS = frozenset({"out_dir", "wandb_mode", "wandb_project", "compile_cache", "checkpoint_every", "distributed"})
STOP_FIELDS = frozenset({"stop_return", "stop_minutes", "stop_plateau", "eval_policy"})  # read between chunks
# The compiled program is the same whatever these are (common/harness/programs.py's key leaves them out).
NOT_IN_PROGRAM = LAUNCH_FIELDS | OUTPUT_FIELDS | STOP_FIELDS | {"seed"}
# --resume may change these: they change nothing a run computes (total_timesteps may only grow).
RESUMABLE = LAUNCH_FIELDS | OUTPUT_FIELDS | STOP_FIELDS | {"log_every", "total_timesteps"}
# scanrl-plot's legends leave these out: where output goes and how often, not what was run.
NOT_IN_LABELS = OUTPUT_FIELDS | {"log_every", "num_devices"}
assert (LAUNCH_FIELDS | OUTPUT_FIELDS | STOP_FIELDS) <= RUN_FIELDS


def build_config(config_cls: type, values: dict[str, Any]):
    """A Config from flat values: names of RunConfig fields go to its `run` field, on top of
    the Config's own default RunConfig; the rest are the algorithm's hyperparameters."""
    run_default = config_cls.__dataclass_fields__["run"].default_factory()
    run = dataclasses.replace(run_default, **{k: v for k, v in values.items() if k in RUN_FIELDS})
    return config_cls(**{k: v for k, v in values.items() if k not in RUN_FIELDS}, run=run)
