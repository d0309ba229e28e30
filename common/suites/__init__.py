"""Environment suites beyond gymnax, one adapter module each, chosen by `--env SUITE/NAME`.

Each adapter presents the suite's environments as gymnax environments (gymnax 1.0's
`Environment`: `reset_env`, `step_env`, spaces, `EnvParams`), so every algorithm, the
evaluation and the tools use them unchanged. gymnax's own `step` then does the auto-reset:
a time limit is reported as `truncated` with the observation reached before the reset in
`info["final_observation"]`. An adapter uses the suite's own environment API, never its
training wrappers (which lose that observation or the time-limit flag).

base.py is the adapter of a raw environment of the Brax kind (Brax, Playground). An adapter
module has `NAMES` (a function listing the suite's environment names) and
`make(name) -> (env, env_params)`. A suite is a pip extra: `pip install "scanrl[brax]"`.
"""

# suite -> (adapter module, the extra that installs the suite, the package it imports)
SUITES = {
    "brax": ("scanrl.common.suites.brax", "brax", "brax"),
    "craftax": ("scanrl.common.suites.craftax", "craftax", "craftax"),
    "jumanji": ("scanrl.common.suites.jumanji", "jumanji", "jumanji"),
    "navix": ("scanrl.common.suites.navix", "navix", "navix"),
    "playground": ("scanrl.common.suites.playground", "playground", "mujoco_playground"),
    "xminigrid": ("scanrl.common.suites.xminigrid", "xminigrid", "xminigrid"),
}
# one environment of each, for messages that need an example
EXAMPLES = {"gymnax": "CartPole-v1", "brax": "brax/ant", "craftax": "craftax/Craftax-Classic-Symbolic-v1",
            "jumanji": "jumanji/Snake-v1", "navix": "navix/Navix-DoorKey-5x5-v0", "playground": "playground/CheetahRun",
            "xminigrid": "xminigrid/XLand-MiniGrid-R1-9x9"}
