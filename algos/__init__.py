"""scanrl algorithms: one self-contained file each, picked by name.

    from scanrl import algos
    algos.names()               # ['grpo', 'impala', 'ppo', 'ppo_rnn', 'sac']
    ppo = algos.get("ppo")      # the module: ppo.Config, ppo.make_algorithm, ppo.make_train, ...

To add an algorithm, put `algos/<name>.py` beside the others (same anatomy: Config,
default_config, make_algorithm, make_train, main) and add its name to ALGORITHMS.
"""

from __future__ import annotations

import importlib
from types import ModuleType

ALGORITHMS = ("grpo", "impala", "ppo", "ppo_rnn", "sac")


def names() -> list[str]:
    """The registered algorithm names, sorted."""
    return sorted(ALGORITHMS)


def get(name: str) -> ModuleType:
    """The algorithm module called `name` (imported on first use); ValueError for an unknown name."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; scanrl has: {', '.join(names())}.")
    return importlib.import_module(f"{__name__}.{name}")
