"""scanrl's PPO against PureJaxRL's PPO (`purejaxrl/ppo.py` of luchris429/purejaxrl) on a
discrete-action env, side by side: the same settings, the same env steps, the same number of
seeds, in one sitting, each side on one CPU device.

PureJaxRL's side is its `ppo.py`, fetched, not copied (`--purejaxrl DIR`, DIR a checkout):
`make_train(config)` jitted once and called once per seed, one seed after another in one
process (as navix_ppo.py runs its `ppo_minigrid.py`, whose seeds vmapped hung on this CPU),
with its own wrappers (`FlattenObservationWrapper`, `LogWrapper`) and its own network (two
hidden layers of 64 for the actor and the critic). Its `make_train` builds the env with
`gymnax.make(ENV_NAME)`, and its wrappers take gymnax's `step` from before gymnax 1.0
(`(obs, state, reward, done, info)`). The child process hands it scanrl's env for ENV (gymnax's
own, or scanrl's adapter of a suite's, common/suites/) with that `step`: gymnax 1.0's, which
resets where an episode ended or was cut, with `done` the two together. Both sides see the
same observations. PureJaxRL's PPO reads no action mask, so scanrl's side runs
twice: without masks (`scanrl`, the like-for-like side: its child process makes VecEnv report
none, so every action is open to the policy, as on PureJaxRL's side) and as a user runs it
(`scanrl_masked`). On Snake the mask closes the moves that leave the board or hit the body,
each of which ends the episode. A difference that stays: PureJaxRL bootstraps from nothing at
a time-limit cut (at the default budget no Snake episode reaches its 4,000-step limit). Its
config is the cell's settings, with the keys of the config the file's `__main__` runs; `DEBUG`
is off (it prints every episode from inside the program).

scanrl's side is `scanrl.algos.ppo.main(FLAGS)` (what `python -m scanrl.algos.ppo FLAGS` runs)
with the same settings and `--num-devices 1`: by default the flags of the README's Jumanji row
(64 environments x 64 steps, learning rate 1e-3, ReLU) at PureJaxRL's 64x64 networks, and PPO's
defaults, which are PureJaxRL's, for the rest. The script refuses settings PureJaxRL's file
cannot express. Every side runs in a fresh process without a compile cache; the wall times are
those processes', imports and compiling included.

Per cell: each seed's final return, the mean return of the training episodes that ended in
the last 10% of updates (scanrl's summary.json; PureJaxRL's from its `LogWrapper`'s
`returned_episode_returns`, as navix_ppo.py reads them); the IQM over seeds with its 95%
stratified-bootstrap interval (rliable); the wall seconds of each side and their ratio. A JSON
per cell in --out; `--table` renders them.

    python benchmarks/purejaxrl_ppo.py --purejaxrl DIR --env jumanji/Snake-v1 --timesteps 204800 --seeds 5
    python benchmarks/purejaxrl_ppo.py --table
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sidebyside

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "reference" / "purejaxrl_ppo"
# The README's Jumanji row, at PureJaxRL's fixed widths.
SETTINGS = {"num_envs": 64, "num_steps": 64, "learning_rate": 1e-3, "activation": "relu", "actor_hidden": (64, 64),
            "critic_hidden": (64, 64)}
SCANRL_FLAGS = [word for k, v in SETTINGS.items()
                for word in ["--" + k.replace("_", "-"), *map(str, v if isinstance(v, tuple) else (v,))]]
# scanrl's PPO fields PureJaxRL's ppo.py has no setting for, at the value that matches what it does.
FIXED = {"adam_eps": 1e-5, "dual_clip_param": None, "clip_value_loss": True, "target_kl": None,
         "normalize_advantages": True, "recompute_advantages": False, "unroll_length": 0, "normalize_obs": False,
         "normalize_reward": False, "reward_scale": 1.0, "actor_hidden": (64, 64), "critic_hidden": (64, 64),
         "critic_obs": "state", "init": "orthogonal"}

SCANRL = r"""
import sys
from scanrl.common import envs
if sys.argv[1] == "off":  # every action open to the policy, as PureJaxRL's PPO sees them
    init = envs.VecEnv.__init__
    def unmasked(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.masked = False
    envs.VecEnv.__init__ = unmasked
from scanrl.algos import ppo
ppo.main(sys.argv[2:])
"""

PUREJAXRL = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import gymnax, jax, numpy as np
env_id, seeds, config = sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
from gymnax.environments import environment
from scanrl.common import suites
env, params = suites.make(env_id)  # gymnax's env, or scanrl's adapter of a suite's

class Before1(environment.Environment):  # gymnax's step before 1.0, the one PureJaxRL's wrappers take
    default_params = params
    def step(self, key, state, action, p=None):  # reset where the episode ended or was cut
        obs, state, reward, terminated, truncated, _ = env.step(key, state, action, p)
        return obs, state, reward, terminated | truncated, {}
    def reset(self, key, p=None):
        return env.reset(key, p)
    def observation_space(self, p):
        return env.observation_space(p)
    def action_space(self, p):
        return env.action_space(p)

gymnax.make = lambda name: (Before1(), params)
import ppo
train = jax.jit(ppo.make_train(config))  # one program, one seed per call (the docstring says why)
""" + sidebyside.PUREJAXRL_SEEDS


def scanrl_config(env: str, timesteps: int) -> dict:
    """scanrl's PPO Config for the cell, as flat values; SystemExit where a field PureJaxRL's
    ppo.py cannot express is not at the value that matches it."""
    from scanrl.algos import ppo

    config = dataclasses.asdict(ppo.default_config(env, total_timesteps=timesteps, **SETTINGS))
    differ = {k: (config[k], v) for k, v in FIXED.items() if config[k] != v}
    if differ:
        raise SystemExit(f"PureJaxRL's ppo.py cannot run these settings (ours, what it does): {differ}")
    return config


def purejaxrl_config(fields: dict, env: str, checkout: Path) -> dict:
    """PureJaxRL's ppo.py config for scanrl's fields; SystemExit where its keys differ from those
    of the config the file's `__main__` runs."""
    config = {"LR": fields["learning_rate"], "NUM_ENVS": fields["num_envs"], "NUM_STEPS": fields["num_steps"],
              "TOTAL_TIMESTEPS": fields["total_timesteps"], "UPDATE_EPOCHS": fields["num_epochs"],
              "NUM_MINIBATCHES": fields["num_minibatches"], "GAMMA": fields["gamma"],
              "GAE_LAMBDA": fields["gae_lambda"], "CLIP_EPS": fields["clip_eps"], "ENT_COEF": fields["ent_coef"],
              "VF_COEF": fields["vf_coef"], "MAX_GRAD_NORM": fields["max_grad_norm"],
              "ACTIVATION": fields["activation"], "ENV_NAME": env, "ANNEAL_LR": fields["anneal_lr"], "DEBUG": False}
    tree = ast.parse((checkout / "ppo.py").read_text())
    (published,) = [ast.literal_eval(node.value) for node in ast.walk(tree)
                    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "config"]
    if set(published) != set(config):
        raise SystemExit(f"ppo.py's config has other keys than ours: {sorted(set(published) ^ set(config))}")
    return config


def run_purejaxrl(checkout: Path, env: str, seeds: int, config: dict) -> dict:
    """PureJaxRL's side in a fresh process: its wall and its RESULT."""
    return sidebyside.run_snippet(PUREJAXRL, [str(checkout), env, str(seeds), json.dumps(config)], "PureJaxRL's PPO")


def run_scanrl(env: str, timesteps: int, seeds: int, masks: str) -> dict:
    """scanrl's side in a fresh process, with action masks "on" or "off": its wall and results."""
    flags = [*SCANRL_FLAGS, "--env", env, "--total-timesteps", str(timesteps), "--num-seeds", str(seeds),
             "--num-devices", "1", "--eval-every", "0", "--log-every", "0", "--no-compile-cache"]
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", SCANRL, masks, *flags, "--out-dir", out],
                              capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode:
            raise SystemExit(f"scanrl's PPO failed: {proc.stderr[-3000:]}")
        (run_dir,) = Path(out).iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
    return {"command": "python -m scanrl.algos.ppo " + " ".join(flags), "action_masks": masks, "wall": wall,
            "updates": summary["updates"], "compile_seconds": summary["compile_seconds"],
            "final_returns": summary["final_return_per_seed"]}


def cell(args: argparse.Namespace) -> dict:
    checkout = args.purejaxrl / "purejaxrl"
    fields = scanrl_config(args.env, args.timesteps)
    config = purejaxrl_config(fields, args.env, checkout)
    commit = subprocess.run(["git", "-C", str(args.purejaxrl), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    started = time.strftime("%Y-%m-%d %H:%M")
    scanrl = run_scanrl(args.env, args.timesteps, args.seeds, "off")
    print(f"scanrl: {json.dumps(scanrl)}", flush=True)
    masked = run_scanrl(args.env, args.timesteps, args.seeds, "on")
    print(f"scanrl_masked: {json.dumps(masked)}", flush=True)
    theirs = run_purejaxrl(checkout, args.env, args.seeds, config)
    print(f"purejaxrl: {json.dumps(theirs)}", flush=True)
    return {"env": args.env, "timesteps": args.timesteps, "seeds": args.seeds, "started": started,
            "finished": time.strftime("%Y-%m-%d %H:%M"), "purejaxrl_commit": commit or None,
            "purejaxrl_config": config, "purejaxrl_seeds": "one after another, one compiled program",
            "devices": {"scanrl": 1, "purejaxrl": 1}, "scanrl": scanrl, "purejaxrl": theirs,
            "scanrl_masked": masked}


def table(out: Path) -> str:
    rows = ["| env | steps/seed | seeds | scanrl, no masks: IQM [95% CI] | PureJaxRL's IQM [95% CI] | "
            "wall scanrl / PureJaxRL (s) | wall ratio | scanrl with masks: IQM, wall (s) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for path in sorted(out.glob("*.json")):
        c = json.loads(path.read_text())
        s, p, m = c["scanrl"], c["purejaxrl"], c["scanrl_masked"]
        rows.append(f"| {c['env']} | {c['timesteps']:,} | {c['seeds']} | {sidebyside.iqm_text(s['final_returns'], 2)} | "
                    f"{sidebyside.iqm_text(p['final_returns'], 2)} | {s['wall']:,.0f} / {p['wall']:,.0f} | "
                    f"{s['wall'] / p['wall']:.2f}x | {sidebyside.iqm_text(m['final_returns'], 2)}, "
                    f"{m['wall']:,.0f} |")
    return "\n".join(rows)


def main() -> None:
    parser = sidebyside.command_line(__doc__, "jumanji/Snake-v1", OUT)
    parser.add_argument("--timesteps", type=int, default=204_800, help="env steps per seed")
    parser.add_argument("--purejaxrl", type=Path, help="a checkout of luchris429/purejaxrl")
    args = parser.parse_args()
    if not args.table and not (args.purejaxrl and (args.purejaxrl / "purejaxrl" / "ppo.py").is_file()):
        parser.error(f"--purejaxrl needs a checkout of luchris429/purejaxrl; got {args.purejaxrl}")
    sidebyside.finish(args, cell, table, "ppo")


if __name__ == "__main__":
    main()
