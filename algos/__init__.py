"""scanrl algorithms: one self-contained file each, picked by name.

    from scanrl import algos
    algos.names()     # ['grpo', 'impala', 'ppo', 'ppo_rnn', 'pqn', 'pqn_rnn', 'sac', 'td3']
    ppo = algos.get("ppo")      # the module: ppo.Config, ppo.make_algorithm, ppo.make_train, ...

To add an algorithm, put `algos/<name>.py` beside the others (same anatomy: Config,
default_config, make_algorithm, make_train, main) and add its name to ALGORITHMS.

The tools that find algorithms by name sit here, above the harness: `scanrl-eval` (a run
folder's algorithm) and `scanrl-bench` (a suite file's cells). The harness itself takes the
algorithm module it runs from its caller and never imports this package.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

ALGORITHMS = ("grpo", "impala", "ppo", "ppo_rnn", "pqn", "pqn_rnn", "sac", "td3")


def names() -> list[str]:
    """The registered algorithm names, sorted."""
    return sorted(ALGORITHMS)


def get(name: str) -> ModuleType:
    """The algorithm module called `name` (imported on first use); ValueError for an unknown
    name."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; scanrl has: {', '.join(names())}.")
    return importlib.import_module(f"{__name__}.{name}")


def scanrl_eval() -> None:
    """The `scanrl-eval RUN_DIR` console script: common/harness/evaluate.py with this registry
    (main's return value would be printed as an exit status)."""
    from scanrl.common.harness import evaluate

    evaluate.main(None, sys.modules[__name__])


def scanrl_bench() -> None:
    """The `scanrl-bench SUITE.yaml` console script: common/harness/bench.py with this registry."""
    from scanrl.common.harness import bench

    bench.main(None, sys.modules[__name__])
