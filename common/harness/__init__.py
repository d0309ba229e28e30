"""The harness that runs an algorithm: driver, programs and compile cache, checkpoints, logging,
plots, evaluation, sweeps (the kit the math imports is common/envs.py, nets.py, onpolicy.py and
recipes.py). It never imports an algorithm file; its command-line tools find one by name in
the scanrl.algos registry."""
