"""scanrl's PPO against Navix's own PPO (`navix.agents.PPO`, the agent of Navix's baselines), or
against PureJaxRL's PPO for Navix (`--peer purejaxrl`), on a Navix env, side by side: the same
settings (the recipe in common/suites/navix.py, which is Navix's `PPOHparams`), the same env
steps, the same number of seeds, in one sitting.

Navix's side is the installed package's own agent: `PPO(PPOHparams(budget=...),
ActorCritic(...), env)` on `navix.make(ENV)`, its MLP encoders reading the symbolic grid
flattened (as its baselines feed it), its `train` vmapped over the seeds and jitted in one program. scanrl's
side is `algos/ppo.py --env navix/ENV` with the recipe, on one CPU device as Navix's side is
(`--scanrl-devices`; the JSON records both). Both run in a fresh process without a compile
cache; the wall times are those processes', imports and compiling included.

PureJaxRL's side (`--peer purejaxrl --purejaxrl DIR`, DIR a checkout of luchris429/purejaxrl) is
its `purejaxrl/ppo_minigrid.py`: `make_train(config)` jitted once and called once per seed,
one seed after another in one process (as the file's `__main__` runs one), with its own wrappers
(`NavixGymnaxWrapper`, `FlattenObservationWrapper`, `LogWrapper`). Its seeds are not vmapped:
five of them vmapped in one program hung on this CPU with jaxlib 0.10 (every thread asleep
after 6 minutes), where one and two seeds ran; the cause was not pinned down (a suspect: flax's
orthogonal initialiser is a QR factorisation, and common/nets.py's `orthogonal` avoids a
vmapped QR for a hang of this kind). Its config is the recipe's fields, checked equal to the
one the file's `__main__` runs; `DEBUG` is off (it prints every episode from inside the
program). The file's `train` stops in the debugger (`pdb.set_trace()`) while it is traced:
this side replaces `pdb.set_trace` with a no-op before importing it, and changes nothing else.

Per cell: each seed's final return, the mean return of the training episodes that ended in
the last 10% of updates (scanrl's summary.json computes it per update, then averages the
updates; Navix's side the same from its per-step `returns` and `done_mask` logs, PureJaxRL's
from its `LogWrapper`'s `returned_episode_returns` and `returned_episode`); the IQM
over seeds with its 95% stratified-bootstrap interval (rliable); the wall seconds of each side
and their ratio. A JSON per cell in --out; `--table` renders them.

    python benchmarks/navix_ppo.py --env navix/Navix-DoorKey-5x5-v0 --seeds 5
    python benchmarks/navix_ppo.py --peer purejaxrl --purejaxrl DIR --out OUT
    python benchmarks/navix_ppo.py --table
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import sidebyside

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "reference" / "navix_ppo"
PEERS = {"navix": "Navix's PPO", "purejaxrl": "PureJaxRL's PPO"}

NAVIX = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
import flax.linen as nn
import navix as nx
from navix.agents import PPO, PPOHparams, ActorCritic
from navix.agents.models import MLPEncoder
name, seeds, hp = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
env = nx.make(name)  # its registered observation: the symbolic grid [H, W, 3]
flat = lambda: nn.Sequential([lambda x: jnp.ravel(x).astype(jnp.float32), MLPEncoder()])  # one env's grid, flattened
network = ActorCritic(action_dim=len(env.action_set), actor_encoder=flat(), critic_encoder=flat())
agent = PPO(hparams=PPOHparams(**hp), network=network, env=env)
_, logs = jax.jit(jax.vmap(agent.train))(jax.random.split(jax.random.key(0), seeds))
done, returns = np.asarray(logs["done_mask"], bool), np.asarray(logs["returns"], np.float64)  # [seeds, updates, T, N]
with np.errstate(all="ignore"):
    per_update = np.where(done, returns, 0.0).sum((2, 3)) / done.sum((2, 3))  # [seeds, updates], NaN: none ended
tail = per_update[:, -max(1, -(-per_update.shape[1] // 10)):]  # ceil(10%), as stats.final_returns
print("RESULT" + json.dumps({"updates": per_update.shape[1], "final_returns": np.nanmean(tail, 1).tolist()}))
"""

PUREJAXRL = r"""
import json, pdb, sys
pdb.set_trace = lambda *args, **kwargs: None  # ppo_minigrid's train() calls it while traced
sys.path.insert(0, sys.argv[1])
import jax, numpy as np
import ppo_minigrid
seeds, config = int(sys.argv[2]), json.loads(sys.argv[3])
train = jax.jit(ppo_minigrid.make_train(config))  # one program, one seed per call (the docstring says why)
""" + sidebyside.PUREJAXRL_SEEDS


def purejaxrl_config(fields: dict, timesteps: int, env: str, checkout: Path) -> dict:
    """PureJaxRL's ppo_minigrid config for the recipe's fields; SystemExit where it differs from
    the config the file's `__main__` runs (other than the budget, the env and DEBUG)."""
    config = {"LR": fields["learning_rate"], "NUM_ENVS": fields["num_envs"], "NUM_STEPS": fields["num_steps"],
              "TOTAL_TIMESTEPS": timesteps, "UPDATE_EPOCHS": fields["num_epochs"],
              "NUM_MINIBATCHES": fields["num_minibatches"], "GAMMA": fields["gamma"],
              "GAE_LAMBDA": fields["gae_lambda"],
              "CLIP_EPS": fields["clip_eps"], "ENT_COEF": fields["ent_coef"], "VF_COEF": fields["vf_coef"],
              "MAX_GRAD_NORM": fields["max_grad_norm"], "ACTIVATION": fields["activation"],
              "ENV_NAME": env.split("/", 1)[1], "ANNEAL_LR": fields["anneal_lr"], "DEBUG": False}
    tree = ast.parse((checkout / "ppo_minigrid.py").read_text())
    (published,) = [ast.literal_eval(node.value) for node in ast.walk(tree)
                    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "config"]
    differ = {k: (config[k], v) for k, v in published.items()
              if k not in ("TOTAL_TIMESTEPS", "ENV_NAME", "DEBUG") and config.get(k) != v}
    if differ or set(published) != set(config):
        raise SystemExit(f"the recipe differs from ppo_minigrid.py's config (ours, theirs): {differ}")
    return config


def hparams(fields: dict, timesteps: int) -> dict:
    """Navix's PPOHparams for the recipe's fields."""
    return {"budget": timesteps, "num_envs": fields["num_envs"], "num_steps": fields["num_steps"],
            "num_minibatches": fields["num_minibatches"], "num_epochs": fields["num_epochs"],
            "gae_lambda": fields["gae_lambda"], "clip_eps": fields["clip_eps"], "ent_coef": fields["ent_coef"],
            "vf_coef": fields["vf_coef"], "max_grad_norm": fields["max_grad_norm"], "lr": fields["learning_rate"],
            "anneal_lr": fields["anneal_lr"], "normalise_advantage": fields["normalize_advantages"],
            "clip_value_loss": fields["clip_value_loss"]}


def run_peer(peer: str, *argv: str) -> dict:
    """The peer's snippet (NAVIX or PUREJAXRL) in a fresh process: its wall and its RESULT."""
    return sidebyside.run_snippet({"navix": NAVIX, "purejaxrl": PUREJAXRL}[peer], list(argv), PEERS[peer])


def run_scanrl(env: str, timesteps: int, seeds: int, num_devices: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        command = ["algos/ppo.py", "--env", env, "--total-timesteps", str(timesteps), "--num-seeds", str(seeds),
                   "--num-devices", str(num_devices), "--eval-every", "0", "--log-every", "0", "--no-compile-cache",
                   "--out-dir", out]
        started = time.perf_counter()
        subprocess.run([sys.executable, *command], cwd=REPO, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - started
        (run_dir,) = Path(out).iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
    return {"command": "python " + " ".join(command[:-2]), "wall": wall, "updates": summary["updates"],
            "final_returns": summary["final_return_per_seed"]}


def cell(args: argparse.Namespace) -> dict:
    from importlib.metadata import version

    from scanrl.common.suites import recipes

    fields = recipes.lookup("ppo", args.env, "published")[1]
    timesteps = args.timesteps or fields["total_timesteps"]
    started = time.strftime("%Y-%m-%d %H:%M")
    scanrl = run_scanrl(args.env, timesteps, args.seeds, args.scanrl_devices)
    print(f"scanrl: {json.dumps(scanrl)}", flush=True)
    if args.peer == "purejaxrl":
        checkout = args.purejaxrl / "purejaxrl"
        config = purejaxrl_config(fields, timesteps, args.env, checkout)
        commit = subprocess.run(["git", "-C", str(args.purejaxrl), "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        theirs = run_peer("purejaxrl", str(checkout), str(args.seeds), json.dumps(config))
        settings = {"purejaxrl_commit": commit or None, "purejaxrl_config": config,
                    "purejaxrl_seeds": "one after another"}
    else:
        settings = {"navix_hparams": hparams(fields, timesteps)}
        theirs = run_peer("navix", args.env.split("/", 1)[1], str(args.seeds), json.dumps(settings["navix_hparams"]))
    print(f"{args.peer}: {json.dumps(theirs)}", flush=True)
    return {"env": args.env, "timesteps": timesteps, "seeds": args.seeds, "started": started,
            "finished": time.strftime("%Y-%m-%d %H:%M"), "navix_version": version("navix"), "peer": args.peer,
            **settings,
            # the peer's side is one jitted program on JAX's default device: one CPU device (PureJaxRL: its
            # seeds one after another)
            "devices": {"scanrl": args.scanrl_devices, args.peer: 1},
            "scanrl": scanrl, args.peer: theirs}


def table(out: Path) -> str:
    from scanrl.common.harness import stats

    rows = ["| env | peer | steps/seed | seeds | scanrl IQM [95% CI] | the peer's IQM [95% CI] | "
            "wall scanrl / peer (s) | wall ratio |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for path in sorted(out.glob("*.json")):
        c = json.loads(path.read_text())
        peer = c.get("peer", "navix")
        s, n = c["scanrl"], c[peer]
        fmt = lambda v: (lambda e: f"{e.point:.3f} [{e.low:.3f}, {e.high:.3f}]")(  # noqa: E731
            stats.iqm_interval(np.array(v["final_returns"], np.float64)))
        rows.append(f"| {c['env']} | {PEERS[peer]} | {c['timesteps']:,} | {c['seeds']} | {fmt(s)} | {fmt(n)} | "
                    f"{s['wall']:,.0f} / {n['wall']:,.0f} | {s['wall'] / n['wall']:.2f}x |")
    return "\n".join(rows)


def main() -> None:
    parser = sidebyside.command_line(__doc__, "navix/Navix-DoorKey-5x5-v0", OUT)
    parser.add_argument("--timesteps", type=int, default=0, help="env steps per seed (0: the recipe's, 1e6)")
    parser.add_argument("--peer", choices=sorted(PEERS), default="navix",
                        help="the other side: Navix's own PPO agent, or PureJaxRL's ppo_minigrid.py")
    parser.add_argument("--purejaxrl", type=Path, help="a checkout of luchris429/purejaxrl (--peer purejaxrl)")
    parser.add_argument("--scanrl-devices", type=int, default=1,
                        help="CPU devices for scanrl's seeds (1: the same hardware as Navix's one jitted program)")
    args = parser.parse_args()
    if args.peer == "purejaxrl" and not args.table and not (args.purejaxrl and (args.purejaxrl / "purejaxrl").is_dir()):
        parser.error(f"--peer purejaxrl needs --purejaxrl, a checkout of luchris429/purejaxrl; got {args.purejaxrl}")
    sidebyside.finish(args, cell, table, "ppo")


if __name__ == "__main__":
    main()
