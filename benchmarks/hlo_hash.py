"""Fingerprint of the compiled training programs: run it in two checkouts to see whether a
change altered what a default run computes (same hash: the same program, so the same speed).

Lowers `advance` (one chunk of updates) for the default PPO CartPole run with 8 seeds and the
default SAC and TD3 Pendulum runs, strips source locations, and prints a SHA-256 prefix of the StableHLO text.

    python benchmarks/hlo_hash.py
"""

import hashlib
import re

from scanrl.algos import ppo, sac, td3
from scanrl.common.harness import run
from scanrl.common.harness.runconfig import compose

# compile_cache=False: lower the programs even when common/harness/programs.py keeps them compiled.
for name, module, config in [("ppo CartPole 8 seeds", ppo, compose(ppo, "CartPole-v1", num_seeds=8, compile_cache=False)),
                             ("sac Pendulum 1 seed", sac, compose(sac, "Pendulum-v1", compile_cache=False)),
                             ("td3 Pendulum 1 seed", td3, compose(td3, "Pendulum-v1", compile_cache=False))]:
    text = run.prepare(config, module.make_algorithm).advance.as_text()
    text = re.sub(r"loc\(.*?\)", "", text)  # file paths and line numbers differ between checkouts
    print(f"{name}: {hashlib.sha256(text.encode()).hexdigest()[:16]} ({len(text):,} characters)")
