"""Flag values and config files: the checks every Config runs, and `--config FILE`.

`check_values` is what each algorithm's `Config.__post_init__` calls (finite floats, ranges,
intervals, echoing the bad value); `read_config_file` reads a JSON or YAML file of fields
(flat, or with a nested `run:` mapping), coercing each value by its field's type, with one
sentence naming the key and the file for anything wrong. common/run.py uses them to parse a
command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

INDEFINITE_UPDATES = 2**30  # --total-timesteps 0: "until a stop condition holds"
LAUNCH_FIELDS = frozenset({"config", "resume"})  # how a run was started, not what it is: not in config.json


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


def _coerce(value: Any, hint: Any) -> Any:
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
        return _coerce(value, next(a for a in args if a is not type(None)))
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError("a list")
        return tuple(_coerce(v, args[0]) for v in value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError("a mapping of names to numbers")
        return {str(k): _coerce(v, args[1]) for k, v in value.items()}
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
    data = {**{k: v for k, v in data.items() if k != "run"}, **(data.get("run") or {})}
    types, values = _field_types(config_cls), {}
    for key, value in data.items():
        if key in LAUNCH_FIELDS:
            raise ValueError(f"key '{key}' in {path}: {flag(key)} can only be given as a flag.")
        if key not in types:
            close = difflib.get_close_matches(key, list(types), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else "."
            raise ValueError(f"unknown key '{key}' in {path}{hint}")
        try:
            values[key] = _coerce(value, types[key])
        except ValueError as e:
            raise ValueError(f"key '{key}' in {path} must be {e}, got {value!r}.") from None
    return values


# Reading argv before tyro does
def flag_value(argv: list[str], name: str) -> str | None:
    value = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def check_pairs(argv: list[str], name: str) -> None:
    """`--env-params KEY VALUE ...`: every VALUE must be a number (tyro's own message shows none);
    ValueError otherwise."""
    if name not in argv:
        return
    i = argv.index(name) + 1
    words = []
    while i < len(argv) and not argv[i].startswith("--"):
        words.append(argv[i])
        i += 1
    if len(words) % 2:
        raise ValueError(f"{name} takes KEY VALUE pairs, got {' '.join(words) or 'nothing'}.")
    for key, value in zip(words[::2], words[1::2]):
        try:
            float(value)
        except ValueError:
            raise ValueError(f"{name} {key} must be a number, got '{value}'.") from None


def tyro_error_sentence(text: str) -> str:
    """tyro draws its errors in a box with the flag's help: the message alone, on one line."""
    lines = [line.strip(" │╭╮╰╯") for line in text.splitlines()]
    sections, current = [], []
    for line in lines:
        if line.startswith("─") or not line.strip("─ "):
            if current:
                sections.append(current)
            current = []
        elif not line.startswith("─"):
            current.append(line.strip())
    if current:
        sections.append(current)
    if not sections:
        return text.strip()
    message = " ".join(sections[0])
    message = re.sub(r"^Error parsing Config: ", "", message)
    message = re.sub(r"^Error parsing (--[\w-]+): ", r"\1: ", message)
    for section in sections[1:]:
        if section[0].startswith("Perhaps you meant"):
            message += f"; perhaps you meant {section[1].split()[0]}"
    return message if message.endswith(".") else message + "."


class RunFolderError(ValueError):
    """A folder that is not (or not yet) a run folder."""


class ToolParser(argparse.ArgumentParser):
    """argparse for the tools (scanrl-eval, scanrl-plot): an error is one sentence and exit 2,
    as for the training flags."""

    def error(self, message: str):
        print(f"error: {message}.", file=sys.stderr)
        raise SystemExit(2)
