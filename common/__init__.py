"""What the algorithm files share: the kit (envs, nets, onpolicy, algorithm, cores), the registry
of env ids and recipes (suites/, with suites/recipes.py), and the run harness (harness/: devices,
the loop, the run driver, evaluation, statistics)."""
