"""scanrl's PPO against Jumanji's own A2C (`jumanji.training`, the trainer of Jumanji's
baselines) on a Jumanji env, side by side: the same env steps per seed, the same number of
seeds, the same number of evaluation episodes, in one sitting.

Jumanji's side is the installed package's trainer, called, not copied: its hydra config
(jumanji/training/configs, composed with `agent=a2c env=GROUP`, GROUP the config whose
`registered_version` is ENV) keeps its network and A2C settings as published; only the budget
(`num_epochs` x `num_learner_steps_per_epoch` learner steps, each a rollout of `n_steps` x
`total_batch_size` env steps), the evaluation batch sizes, the seed and the logger are
overridden. Its hydra entry point `jumanji.training.train.train(cfg)` runs once per seed, one
after another in one process, with one CPU device per core (its pmap splits the batch). The
logger is ours (`setup_logger` replaced): it keeps what the trainer writes (its stochastic and
greedy evaluations at the start of every epoch, its timers) and, through Jumanji's own
checkpoint hook (`save_checkpoint`), the final `training_state`, on which Jumanji's own
stochastic `Evaluator` runs once more, so its score is of the policy after the whole budget.
scanrl's side is `python -m scanrl.algos.ppo --env jumanji/ENV` with the settings of its
README's Jumanji row (on Game2048 with --normalize-reward, SCANRL_ENV_FLAGS), evaluated once, after the last update,
or with `--scanrl-eval-every N` after every N updates: at 10 of Snake's 50 updates it evaluates 5 times, both policies,
the evaluation work of Jumanji's 5 epochs (its one evaluation after the budget aside). An env step is one step of one
environment on both sides; evaluation steps are not counted. Both run in a fresh process
without a compile cache; wall times are those processes', imports and compiling included.

Per cell: each seed's final return, the mean return of the sampled (stochastic) policy over
--episodes fresh evaluation episodes after the budget, by each side's own evaluator; the IQM
over seeds with its 95% stratified-bootstrap interval (rliable); scanrl's training score as in
navix_ppo.py (training episodes that ended in the last 10% of updates; Jumanji's A2C logs no
training returns); wall seconds and env steps/s of each side. A JSON per cell in --out;
`--table` renders them. Versions: jumanji 1.1.2 (with its `train` extra: hydra-core 1.3,
dm-haiku, distrax, neptune-client 0.16.15, tensorboardX), jax 0.10.2. Two adjustments, both
outside Jumanji's code: jax 0.10 hides `jax.device_put_replicated`, which Jumanji's
`setup_training_state` calls, so the child puts JAX's own implementation back under that
name; Jumanji's Game2048 has no time limit, so scanrl's side lifts its adapter's 1000-step cut.

Jumanji's trainer needs packages scanrl does not: install them into a folder of their own
(`pip install --no-deps --target DIR hydra-core==1.3.8 omegaconf antlr4-python3-runtime==4.9.3
dm-haiku==0.0.17 jmp neptune-client==0.16.15` and what neptune-client imports: tabulate bravado
bravado-core swagger-spec-validator jsonschema jsonschema-specifications referencing rpds-py jsonref
importlib-resources monotonic PyJWT oauthlib requests-oauthlib websocket-client boto3 botocore
s3transfer jmespath future) and pass it as `--deps DIR`: only Jumanji's process sees it.

    python benchmarks/jumanji_a2c.py --env jumanji/Snake-v1 --timesteps 204800 --seeds 5 --deps DIR
    python benchmarks/jumanji_a2c.py --env jumanji/Game2048-v1 --timesteps 1024000 --seeds 5 --deps DIR
    python benchmarks/jumanji_a2c.py --table
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import sidebyside

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "reference" / "jumanji_a2c"
SCANRL_FLAGS = ["--num-envs", "64", "--num-steps", "64", "--learning-rate", "1e-3", "--activation", "relu",
                "--actor-hidden", "128", "128", "--critic-hidden", "128", "128"]  # README, suite table: Jumanji
# Jumanji's Game2048 has no time limit; scanrl's adapter would cut its episodes at 1000 steps. Its
# rewards (the merged tiles' values) run into the hundreds per step: scanrl's PPO scales them by the
# running std of the return (--normalize-reward); without it it reached about half the A2C's return
# (benchmarks/RESULTS.md, the first attempt in reference/jumanji_a2c/first/).
SCANRL_ENV_FLAGS = {"jumanji/Game2048-v1": ["--env-params", "max_steps_in_episode", "1000000", "--normalize-reward"]}

JUMANJI = r"""
import json, pickle, sys, tempfile, time
from pathlib import Path
import jax, numpy as np
from jax._src import api
jax.device_put_replicated = api.device_put_replicated  # jumanji 1.1.2's trainer calls it; jax 0.10 hides it
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
import jumanji.training
from jumanji.training import train as trainer
from jumanji.training.loggers import Logger
from jumanji.training.setup_train import setup_agent, setup_env, setup_evaluators
name, seeds, steps, epochs, episodes = sys.argv[1], *map(int, sys.argv[2:6])
configs = Path(jumanji.training.__file__).parent / "configs"
group = next(p.stem for p in sorted((configs / "env").glob("*.yaml")) if OmegaConf.load(p).registered_version == name)

class Record(Logger):  # keeps what the trainer writes; on exit Jumanji's checkpoint hook pickles `training_state`
    def __init__(self, path):
        super().__init__(save_checkpoint=True, checkpoint_file_name=path)
        self.rows = []
    def write(self, data, label=None, env_steps=None):
        kept = {k: float(v) for k, v in data.items() if self.is_loggable(v)}
        self.rows.append({"label": label, "env_steps": env_steps, **kept})

from importlib.metadata import version
result = {"config": group, "seeds": [], "trainer_versions": {p: version(p) for p in ("hydra-core", "dm-haiku", "neptune-client")}}
with initialize_config_dir(config_dir=str(configs), version_base=None):
    base = compose("config", overrides=["agent=a2c", f"env={group}"]).env
    rollout = base.training.n_steps * base.training.total_batch_size
    learner_steps = steps // (epochs * rollout)
    assert learner_steps >= 1, f"{steps} steps are fewer than {epochs} epochs of {rollout}"
    for seed in range(seeds):
        cfg = compose("config", overrides=[
            "agent=a2c", f"env={group}", f"seed={seed}", f"env.training.num_epochs={epochs}",
            f"env.training.num_learner_steps_per_epoch={learner_steps}",
            f"env.evaluation.eval_total_batch_size={episodes}",
            f"env.evaluation.greedy_eval_total_batch_size={episodes}"])
        with tempfile.TemporaryDirectory() as tmp:
            logger = Record(f"{tmp}/training_state")
            trainer.setup_logger = lambda cfg: logger
            started = time.perf_counter()
            trainer.train(cfg)
            wall = time.perf_counter() - started
            with open(logger.checkpoint_file_name, "rb") as file:
                state = pickle.load(file)
        stochastic, _ = setup_evaluators(cfg, setup_agent(cfg, setup_env(cfg)))
        final = stochastic.run_evaluation(state.params_state, jax.random.PRNGKey(10_000 + seed))
        rows = lambda label: [r for r in logger.rows if r["label"] == label]
        result["seeds"].append({
            "final_return": float(np.asarray(final["episode_return"])[0]), "wall": wall,
            "env_steps": epochs * learner_steps * rollout,
            "train_seconds": sum(r["time"] for r in rows("train")),
            "eval_seconds": sum(r["time"] for r in rows("eval_stochastic") + rows("eval_greedy")),
            "train_steps_per_second": [r["steps_per_second"] for r in rows("train")],  # its timer, per epoch
            "eval_stochastic": [(r["env_steps"], r["episode_return"]) for r in rows("eval_stochastic")],
            "eval_greedy": [(r["env_steps"], r["episode_return"]) for r in rows("eval_greedy")]})
        brief = {k: v for k, v in result["seeds"][-1].items() if not isinstance(v, list)}
        print(f"seed {seed}: {json.dumps(brief)}", file=sys.stderr, flush=True)
result["training"] = dict(cfg.env.training)  # the network and a2c sections: as published
print("RESULT" + json.dumps(result))
"""


def run_jumanji(env: str, timesteps: int, seeds: int, epochs: int, episodes: int, deps: str | None) -> dict:
    cores = len(os.sched_getaffinity(0))
    child_env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={cores}"}
    if deps:  # the trainer's own packages, for its process only
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [deps, os.environ.get("PYTHONPATH")]))
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", JUMANJI, env.split("/", 1)[1], str(seeds), str(timesteps),
                           str(epochs), str(episodes)], capture_output=True, text=True, env=child_env)
    wall = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    if not lines:
        raise SystemExit(f"Jumanji's A2C failed on {env}: {proc.stderr[-3000:]}")
    result = json.loads(lines[0][6:])
    per_seed = result.pop("seeds")
    steps = per_seed[0]["env_steps"]
    return {"wall": wall, "devices": cores, "env_steps": steps, "env_steps_per_second": seeds * steps / wall,
            "final_returns": [s["final_return"] for s in per_seed], **result, "per_seed": per_seed}


def run_scanrl(env: str, timesteps: int, seeds: int, episodes: int, eval_every: int = 0) -> dict:
    eval_every = eval_every or timesteps // (64 * 64)  # 0: once, after the last update
    return sidebyside.run_scanrl("ppo", [
        "--env", env, *SCANRL_FLAGS, *SCANRL_ENV_FLAGS.get(env, []), "--total-timesteps", str(timesteps),
        "--num-seeds", str(seeds), "--eval-every", str(eval_every), "--eval-episodes", str(episodes)])


def cell(args: argparse.Namespace) -> dict:
    from importlib.metadata import version

    started = time.strftime("%Y-%m-%d %H:%M")
    scanrl = run_scanrl(args.env, args.timesteps, args.seeds, args.episodes, args.scanrl_eval_every)
    print(f"scanrl: {json.dumps(scanrl)}", flush=True)
    theirs = run_jumanji(args.env, args.timesteps, args.seeds, args.epochs, args.episodes, args.deps)
    print(f"jumanji: {json.dumps({k: v for k, v in theirs.items() if k != 'per_seed'})}", flush=True)
    if scanrl["env_steps"] != theirs["env_steps"]:
        print(f"warning: unequal budgets, scanrl {scanrl['env_steps']:,} and Jumanji {theirs['env_steps']:,} env steps "
              "per seed: --timesteps should be a multiple of 4096 and of --epochs x Jumanji's rollout", flush=True)
    return {"env": args.env, "timesteps": args.timesteps, "seeds": args.seeds, "eval_episodes": args.episodes,
            "scanrl_eval_every": args.scanrl_eval_every,
            "started": started, "finished": time.strftime("%Y-%m-%d %H:%M"),
            "versions": {p: version(p) for p in ("jumanji", "jax")},
            "scanrl": scanrl, "jumanji": theirs}


def table(out: Path) -> str:
    rows = ["| env | steps/seed | seeds | scanrl PPO IQM [95% CI] | Jumanji A2C IQM [95% CI] | scanrl training score | "
            "wall scanrl / Jumanji (s) | env steps/s scanrl / Jumanji |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for path in sorted(out.glob("*.json")):
        c = json.loads(path.read_text())
        s, j = c["scanrl"], c["jumanji"]
        fmt = sidebyside.iqm_text
        rows.append(f"| {c['env']} | {c['timesteps']:,} | {c['seeds']} | {fmt(s['final_returns'])} | "
                    f"{fmt(j['final_returns'])} | {fmt(s['training_scores'])} | {s['wall']:,.0f} / {j['wall']:,.0f} | "
                    f"{s['env_steps_per_second']:,.0f} / {j['env_steps_per_second']:,.0f} |")
    return "\n".join(rows)


def main() -> None:
    parser = sidebyside.command_line(__doc__, "jumanji/Snake-v1", OUT)
    parser.add_argument("--timesteps", type=int, default=204_800, help="env steps per seed: a multiple of 4096 "
                        "(scanrl's rollout) and of epochs x Jumanji's rollout (n_steps x total_batch_size)")
    parser.add_argument("--epochs", type=int, default=5, help="Jumanji's epochs: it evaluates at the start of each")
    parser.add_argument("--episodes", type=int, default=32, help="evaluation episodes per seed, both sides")
    parser.add_argument("--scanrl-eval-every", type=int, default=0, help="scanrl's --eval-every (0: once, after the "
                        "last update; on Snake at the default budget, 10: the evaluation work of Jumanji's epochs)")
    parser.add_argument("--deps", help="a folder holding Jumanji's trainer's packages (the docstring), for its process only")
    sidebyside.finish(parser.parse_args(), cell, table, "a2c")


if __name__ == "__main__":
    main()
