"""The harness that runs an algorithm: driver, programs and compile cache, checkpoints, logging,
plots, evaluation, sweeps (the kit the math imports is common/envs.py and common/nets.py)."""
