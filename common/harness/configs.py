"""Flag values and config files.

`RunConfig` (common/harness/runconfig.py) declares the run settings every algorithm shares,
and the sets beside it say once what each touches (the program, a resume, the plots' labels);
each name is imported from the module that defines it, not from here.

`read_config_file` reads a JSON or YAML file of fields (flat, or with a nested `run:`
mapping), coercing each value by its field's type, with one sentence naming the key and the
file for anything wrong; the flag checks here (unknown names, `--env-params` pairs, whole
numbers, tyro's errors as one sentence) and the grouped `--help` complete what
common/harness/run.py uses to parse a command line.
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
import textwrap
import types
import typing
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import tyro

from scanrl.common.algorithm import flag
from scanrl.common.harness import console
from scanrl.common.harness.runconfig import LAUNCH_FIELDS, RunConfig


def _field_types(config_cls: type) -> dict[str, Any]:
    """Field name -> type of a Config's fields and RunConfig's, flat."""
    hints = {**typing.get_type_hints(config_cls), **typing.get_type_hints(RunConfig)}
    return {k: v for k, v in hints.items() if k not in LAUNCH_FIELDS}


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
        if isinstance(value, bool) or not (
            isinstance(value, int)
            or (isinstance(value, str) and value.strip().lstrip("-").isdigit())
        ):
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
        raise ValueError(
            f"{path} is not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'JSON'}: "
            f"{str(e).splitlines()[0]}."
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(
            f"{path} must hold a mapping of field names to values, not a {type(data).__name__}."
        )
    data = {
        **{k: v for k, v in data.items() if k not in ("run", "algo", "algo_file", "pbt_schedule")},
        **(data.get("run") or {}),
    }
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


def run_algorithm(run_dir: str | Path, required: bool = False) -> str | None:
    """The algorithm that wrote a run folder (or None where nothing says): config.json's
    "algo", else summary.json's, else the folder name's `<algo>__<env>__<time>` prefix.
    `required`: RunFolderError where the folder does not exist or has no config.json, and the
    name's first part where nothing says."""
    run_dir = Path(run_dir)
    if required and not run_dir.exists():
        raise RunFolderError(f"{run_dir} does not exist.")
    if required and not (run_dir / "config.json").is_file():
        raise RunFolderError(f"{run_dir} is not a run folder (it has no config.json).")
    for name in ("config.json", "summary.json"):
        try:
            algo = json.loads((run_dir / name).read_text()).get("algo")
        except (OSError, ValueError, AttributeError):
            continue
        if algo:
            return str(algo)
    return run_dir.name.split("__")[0] if required or run_dir.name.count("__") >= 2 else None


class Run:
    """What a plot needs from a run folder."""

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)
        if not self.dir.exists():
            raise RunFolderError(f"{self.dir} does not exist.")
        for name in ("config.json", "summary.json", "metrics.npz"):
            if not (self.dir / name).is_file():
                raise RunFolderError(
                    f"{self.dir} is not a finished run folder (it has no {name}; a run writes "
                    "metrics.npz and summary.json when it ends or is interrupted)."
                )
        self.config = json.loads((self.dir / "config.json").read_text())
        self.summary = json.loads((self.dir / "summary.json").read_text())
        with np.load(self.dir / "metrics.npz") as z:
            self.metrics = {k: z[k].astype(np.float64) for k in z.files}
        if self.summary.get("num_configs") and self.config.get("pbt"):
            raise RunFolderError(
                f"{self.dir} is a population-based training run: its pbt.png shows the members."
            )
        if self.summary.get("num_configs"):
            raise RunFolderError(
                f"{self.dir} is a sweep of several configs: its sweep.png compares them."
            )
        self.steps_per_update = self.summary["total_timesteps"] / max(self.summary["updates"], 1)

    def steps(self, updates_done: np.ndarray) -> np.ndarray:
        return updates_done * self.steps_per_update

    def seconds(self, updates_done: np.ndarray) -> np.ndarray:
        """Training seconds (compile excluded) at these update counts, from progress.jsonl."""
        records = [
            json.loads(l)
            for l in (self.dir / "progress.jsonl").read_text().splitlines()
            if l.strip()
        ]
        if not records or "seconds" not in records[-1]:
            raise ValueError(
                f"--x wall: {self.dir}/progress.jsonl has no timing (an older scanrl wrote it); use"
                " --x steps."
            )
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
    """What follows `python` to run the algorithm that trained `run_dir`: its file, or scanrl's
    module."""
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
            data = (
                json.loads(Path(config_file).read_text())
                if not config_file.endswith((".yaml", ".yml"))
                else {}
            )
        except ValueError:
            return  # read_config_file says what is wrong with it
        theirs = data.get("algo") if isinstance(data, dict) else None
        if (
            theirs is None
            and Path(config_file).name == "config.json"
            and (Path(config_file).parent / "summary.json").is_file()
        ):
            theirs = run_algorithm(Path(config_file).parent)
        if theirs and theirs != algo:
            command = (
                data.get("algo_file")
                if isinstance(data, dict) and data.get("algo_file")
                else f"-m scanrl.algos.{theirs}"
            )
            fail(
                f"--config {config_file} is the config of a {theirs} run, not a {algo} one: train"
                f" it with `python {command} --config {config_file}`."
            )


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
    """`--flag` -> type hint for every field of a Config and of RunConfig (bools also as
    --no-flag)."""
    hints = {**typing.get_type_hints(config_cls), **typing.get_type_hints(RunConfig)}
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
                fail(
                    f"{name} takes a whole number (such as 1000000, 1e6 or 1_000_000), got"
                    f" {text!r}."
                )
            if not math.isfinite(number) or number != int(number):
                fail(
                    f"{name} takes a whole number (such as 1000000, 1e6 or 1_000_000), got"
                    f" {text!r}."
                )
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
        initials = [
            k
            for k in sorted(known)
            if k.startswith("--")
            and "".join(w[0] for w in k[2:].split("-") if w) == letters
            and not k.startswith("--no-")
        ]
        close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.75)
        hints = list(dict.fromkeys(initials + close))
        hint = f"; did you mean {' or '.join(hints)}?" if hints else "; --help lists the flags."
        fail(f"unknown flag {name}{hint}")


def tyro_error_sentence(text: str) -> str:
    """tyro draws its errors in a box with the flag's help: the message alone, on one line. At a
    terminal the box comes in colour: its escape codes go first."""
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    lines = [line.strip(" │╭╮╰╯|") for line in text.splitlines()]
    sections, current = [], []
    for line in lines:  # separators: rules of box-drawing or ASCII dashes (no terminal)
        # a rule, or the box's titled top rule
        if not line.strip("─━-=+ ") or line.startswith("─"):
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
HELP_GROUPS = (
    {  # box -> (what it holds, its run settings); the algorithm's own fields make a first box
        "environment": (
            "the task",
            ("env", "recipe", "env_options", "env_params", "hide_obs", "eval_env_params"),
        ),
        "run": (
            "seeds and devices",
            ("seed", "num_seeds", "num_devices", "data_parallel", "distributed"),
        ),
        "lifecycle": (
            "evaluation, checkpoints, resume, stop conditions",
            (
                "eval_every",
                "eval_episodes",
                "eval_policy",
                "checkpoint_every",
                "resume",
                "config",
                "stop_return",
                "stop_minutes",
                "stop_plateau",
            ),
        ),
        "logging": (
            "progress, run folder, wandb, compile cache",
            ("log_every", "out_dir", "wandb_mode", "wandb_project", "compile_cache"),
        ),
        "sweeps": (
            "many configs in one program, and population-based training",
            (
                "sweep",
                "sweep_samples",
                "sweep_mode",
                "pbt",
                "pbt_population",
                "pbt_interval",
                "pbt_burn_in",
                "pbt_fraction",
                "pbt_perturb",
                "pbt_resample",
                "pbt_fitness",
            ),
        ),
    }
)


def field_docs(cls: type) -> dict[str, str]:
    """A dataclass's field docstrings (the string under each field), as tyro reads them."""
    import ast
    import inspect

    docs, body = {}, ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    for node, after in zip(body, body[1:]):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
        ):
            docs[node.target.id] = " ".join(str(after.value.value).split())
    return docs


def examples(env: str) -> str:
    """The help's first lines after the description: common command lines for this file."""
    script = sys.argv[0] if sys.argv and sys.argv[0].endswith(".py") else "ALGO.py"
    relative = os.path.relpath(script)  # as typed from here; a file elsewhere by its name
    prog = Path(script).name if relative.startswith("..") else relative
    lines = [f"--env {env} --num-seeds 8", "--config runs/FOLDER/config.json --seed 8",
             "--resume runs/FOLDER", "--sweep learning_rate=1e-4,3e-4,1e-3 --num-seeds 4",
             "--pbt --sweep learning_rate=log:1e-5:1e-2 --pbt-population 8"]
    return "\n\nexamples:\n" + "\n".join(console.command(f"python {prog} {line}", 80)
                                         for line in lines)


WALLS = Path(__file__).with_name("preset_walls.json")  # written by benchmarks/preset_walls.py


def preset_note(module: Any, job: Any) -> str:
    """--help's line on the defaults it shows for the env: the presets and recipe they come
    from, the budget, and how long that budget took on 2 CPU cores where it was measured for
    this algorithm and env (preset_walls.json; its budget must be today's)."""
    from scanrl.common.suites import preset_name

    algo = getattr(module, "ALGO", module.__name__.rsplit(".", 1)[-1])
    env, steps = job.config.env, job.config.total_timesteps
    used = [name for name in (preset_name(env), env) if name in getattr(module, "PRESETS", {})]
    what = [f"the {name} preset" for name in used] or ["this file's defaults"]
    if job.run.recipe not in ("none", None):
        what.append(f"the {job.run.recipe} recipe")
    note = f"On {env}: {' and '.join(what)}, {steps:,} env steps per seed" if steps else (
        f"On {env}: {' and '.join(what)}, until a stop condition holds")
    row = json.loads(WALLS.read_text()).get(f"{algo} {env}") if WALLS.is_file() else None
    if row and row["total_timesteps"] == steps:
        note += f", {took(row['expected_seconds'])} for one seed on 2 CPU cores, compile included"
    return note + "."


def took(seconds: float) -> str:
    """A measured wall as --help and the algorithm pages say it: "about 28 minutes"."""
    minutes = seconds / 60
    if minutes < 1:
        return "under a minute"
    if round(minutes) == 1:
        return "about a minute"
    return f"about {minutes:.0f} minutes" if minutes < 90 else f"about {minutes / 60:.1f} hours"


def grouped_help(config_cls: type, base: Any, description: str, note: str = "") -> typing.NoReturn:
    """Print --help with the flags in boxes (algorithm, environment, run, lifecycle, logging,
    sweeps), defaults from `base` (a Job: the env's presets applied), and exit 0. The flags parse as
    one flat set; only the help is shown through this grouped copy of it."""

    def spec(cls: type, name: str, value: Any) -> tuple:
        hint = typing.get_type_hints(cls, include_extras=True)[name]
        default = (
            field(default_factory=lambda v=value: v)
            if isinstance(value, (dict, list))
            else field(default=value)
        )
        return name, Annotated[hint, tyro.conf.arg(help=field_docs(cls).get(name, ""))], default

    owner = {name: box for box, (_, names) in HELP_GROUPS.items() for name in names}
    boxes: dict[str, list] = {"algorithm": []} | {box: [] for box in HELP_GROUPS}
    for f in dataclasses.fields(config_cls):
        boxes[owner.get(f.name, "algorithm")].append(
            spec(config_cls, f.name, getattr(base.config, f.name))
        )
    for f in dataclasses.fields(RunConfig):
        boxes[owner[f.name]].append(spec(RunConfig, f.name, getattr(base.run, f.name)))
    fields = []
    for name, specs in boxes.items():
        box = dataclasses.make_dataclass(name, specs, frozen=True)
        box.__doc__ = (
            HELP_GROUPS[name][0] if name in HELP_GROUPS else "this algorithm's hyperparameters"
        )
        fields.append((name, box, field(default_factory=box)))
    flags = dataclasses.make_dataclass("Flags", fields, frozen=True)
    try:
        tyro.cli(
            flags, args=["--help"],
            description=textwrap.fill(" ".join(description.split()), 80)
            + examples(base.config.env)
            + ("\n\ndefaults:\n" + textwrap.fill(note, 80, initial_indent="  ",
                                                subsequent_indent="  ") if note else ""),
            config=(tyro.conf.OmitArgPrefixes,),
        )
    except BrokenPipeError:  # `--help | head`: the reader left; no traceback for that
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise SystemExit(0)  # tyro exits after printing the help
