"""scanrl's PPO or SAC against Brax's own trainer (`brax.training.agents.ppo` / `.sac`) on a
Brax or MuJoCo Playground task, side by side: the same recipe, the same env steps, the same
evaluation protocol, the same seeds, in one sitting.

Both sides take the task's recipe (common/suites/recipes.py, the suite's table) in its `cpu` form (or `--form
published`): Brax's trainer gets the recipe's own arguments (`recipes.trainer_args`), scanrl
the Config fields they translate to, and both the networks of Brax's defaults. Evaluation on
both sides samples actions (Brax's `deterministic_eval=False`) over the recipe's evaluation
episodes, one episode per environment. scanrl trains all seeds in one program (`--num-seeds`);
Brax's trainer trains one seed per call, so each of its seeds runs in a fresh process, with
a persistent compile cache that its first seed fills and the others load; scanrl runs
without one. On a GPU, `--brax-parallel` starts Brax's seed processes at once instead, sharing
the GPU, and its wall is from the first `train` call's start to the last one's end. The wall
times include compiling.

brax 0.14.2's trainer calls `jax.device_put_replicated`, which jax 0.10 removed: the Brax
process defines it for its one device (a leading axis of 1) before training.

Per cell: the IQM of the last evaluation's return over the seeds with its 95% stratified-
bootstrap interval (rliable), the wall seconds of all seeds together, and env steps/s over
that wall, each side, and their ratios; a JSON per cell in --out, and `--table` renders them.

    python benchmarks/brax_trainers.py --env brax/inverted_double_pendulum --timesteps 300000 --seeds 5
    python benchmarks/brax_trainers.py --algo sac --env brax/hopper --timesteps 100000 --seeds 5
    python benchmarks/brax_trainers.py --table
    python benchmarks/brax_trainers.py --form published --env brax/ant --timesteps 9830400 --evals 1 --brax-parallel

`--scanrl-flags=FLAGS` adds flags to scanrl's side (a variant; its JSON and table row are named by
them), `--reuse-brax CELL.json` keeps an earlier cell's Brax side (checked: the same trainer
arguments and seeds) and `--scanrl-run DIR` reads a finished scanrl run folder made with the
cell's command instead of running it again.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import sidebyside

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "reference" / "brax_trainers"

BRAX = r"""
import functools, json, os, sys, time, warnings
warnings.simplefilter("ignore")
import jax, jax.numpy as jnp
jax.device_put_replicated = lambda x, devices: jax.device_put(
    jax.tree.map(lambda a: jnp.stack([a] * len(devices)), x), devices[0])
algo, env_id, backend, seed, num_evals = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
args = json.loads(sys.argv[6])
suite, name = env_id.split("/")
extra = {}
if suite == "brax":
    from brax import envs
    env = envs.get_environment(name, backend=backend)
else:  # Playground's own way into Brax's trainers (its training notebooks)
    from mujoco_playground import registry, wrapper
    env = registry.load(name, config_overrides={"impl": "jax"})
    # Playground's recipe re-randomises the cached starts every 10 evaluations, but Brax's PPO then trains
    # 10 x the steps asked at small budgets (it rounds each evaluation period up to whole reset periods): once
    # per evaluation keeps the budget equal
    extra = dict(wrap_env_fn=wrapper.wrap_for_brax_training, **({"num_resets_per_eval": 1} if algo == "ppo" else {}))
evals = []
def progress(step, metrics):
    if "eval/episode_reward" in metrics:
        evals.append((int(step), float(metrics["eval/episode_reward"])))
        # each evaluation as it happens, for a reader that stops the process at a wall budget
        print("EVAL" + json.dumps({"time": time.time(), "step": evals[-1][0], "eval": evals[-1][1]}), flush=True)
common = dict(environment=env, episode_length=1000, normalize_observations=True, action_repeat=1, num_evals=num_evals,
              deterministic_eval=os.environ.get("BRAX_DETERMINISTIC_EVAL") == "1", progress_fn=progress, seed=seed,
              **extra)
t, start = time.perf_counter(), time.time()
if algo == "ppo":
    from brax.training.agents.ppo import networks, train
    if "network_factory" in args:  # a Playground locomotion recipe's sizes and observation keys
        args["network_factory"] = functools.partial(networks.make_ppo_networks, **args["network_factory"])
    train.train(**common, **args)
else:
    from brax.training.agents.sac import networks, train
    if "network_factory" in args:  # Playground's DM Control recipe: layer-normed Q networks
        args["network_factory"] = functools.partial(networks.make_sac_networks, **args["network_factory"])
    train.train(**common, **args, max_replay_size=1_048_576)
print("RESULT" + json.dumps({"wall": time.perf_counter() - t, "steps": evals[-1][0], "eval": evals[-1][1],
                             "start": start, "end": time.time()}))
"""


def brax_command(algo: str, env: str, backend: str, args: dict, seed: int, num_evals: int) -> list[str]:
    return [sys.executable, "-c", BRAX, algo, env, backend, str(seed), str(num_evals), json.dumps(args)]


def brax_result(env: str, returncode: int, stdout: str, stderr: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT")]
    if not lines:
        raise SystemExit(f"Brax's trainer failed on {env} (exit {returncode}): {stderr[-2000:]}")
    return json.loads(lines[0][6:])


def run_brax(algo: str, env: str, backend: str, args: dict, seed: int, num_evals: int, cache: str) -> dict:
    proc = subprocess.run(brax_command(algo, env, backend, args, seed, num_evals), capture_output=True, text=True,
                          env={**os.environ, "JAX_COMPILATION_CACHE_DIR": cache,
                               "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"})
    return brax_result(env, proc.returncode, proc.stdout, proc.stderr)


def run_brax_parallel(algo: str, env: str, backend: str, args: dict, seeds: int, num_evals: int) -> list[dict]:
    """Every seed in its own process at once, sharing the accelerator (each takes an equal
    part of its memory): Brax's trainer runs one seed per call, and on a GPU one seed leaves
    room beside it. No compile cache: all seeds compile at the same time."""
    share = {"XLA_PYTHON_CLIENT_MEM_FRACTION": f"{0.9 / seeds:.3f}"}
    procs = [subprocess.Popen(brax_command(algo, env, backend, args, seed, num_evals), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, **share})
             for seed in range(seeds)]
    results = []
    for seed, proc in enumerate(procs):
        out, err = proc.communicate()
        results.append(brax_result(env, proc.returncode, out, err))
        print(f"brax seed {seed}: {json.dumps(results[-1])}", flush=True)
    return results


def run_scanrl(algo: str, env: str, form: str, timesteps: int, seeds: int, evals: int, flags: list[str],
               run_dir: Path | None = None) -> dict:
    """scanrl's side of a cell; `run_dir`: read a finished run folder made with the same command instead."""
    from scanrl.common.suites import recipes

    fields = recipes.lookup(algo, env, form)[1]
    per_update = fields["num_envs"] * (fields.get("num_steps") or 200)
    updates = max(1, timesteps // per_update)
    process = None  # the whole process's seconds, imports included, when run here
    with tempfile.TemporaryDirectory() as out:
        if run_dir is None:
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, f"algos/{algo}.py", "--env", env, "--recipe", form,
                                   "--total-timesteps", str(timesteps), "--num-seeds", str(seeds), "--eval-every",
                                   str(max(1, updates // evals)), "--log-every", "0", "--no-compile-cache",
                                   "--out-dir", out, *flags], cwd=REPO, capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"scanrl failed on {env} (exit {proc.returncode}): {proc.stderr[-3000:]}")
            process = time.perf_counter() - t
            (run_dir,) = Path(out).iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
        last = json.loads((run_dir / "progress.jsonl").read_text().splitlines()[-1])
    return {"wall": summary["compile_seconds"] + summary["run_seconds"], "compile": summary["compile_seconds"],
            "steps": summary["updates"] * per_update, "evals": last["per_seed"]["eval_return_sampled"],
            **({"process_wall": process} if process is not None else {})}


def cell(args: argparse.Namespace) -> dict:
    from scanrl.common.suites import recipes

    recipe = recipes.recipe_for(args.algo, args.env)
    trainer = recipes.trainer_args(recipe, args.form)
    trainer["num_timesteps"] = args.timesteps
    backend = dict(zip(recipe.fields.get("env_options", ())[::2], recipe.fields.get("env_options", ())[1::2])).get(
        "backend", "generalized")
    started = time.strftime("%Y-%m-%d %H:%M")
    source = sidebyside.scanrl_commit()  # the scanrl tree this cell starts from
    flags = args.scanrl_flags.split()
    if args.reuse_scanrl:  # the scanrl side of an earlier run of this cell, e.g. after a Brax-side failure
        earlier = json.loads(args.reuse_scanrl.read_text())
        scanrl = earlier["scanrl"]
        source = {"scanrl_commit": earlier.get("scanrl_commit"), "scanrl_dirty": earlier.get("scanrl_dirty"),
                  "scanrl_commit_source": f"the reused scanrl side, {args.reuse_scanrl.name}"}
    else:
        scanrl = run_scanrl(args.algo, args.env, args.form, args.timesteps, args.seeds, args.evals, flags,
                            args.scanrl_run)
    print(f"scanrl: {json.dumps(scanrl)}", flush=True)
    import brax as brax_package

    if args.reuse_brax:  # Brax's side of an earlier run of this cell (same trainer arguments and seeds)
        earlier = json.loads(args.reuse_brax.read_text())
        assert earlier["trainer_args"] == trainer and earlier["seeds"] == args.seeds, "--reuse-brax: another setting"
        brax_side = earlier["brax"]
    elif args.brax_parallel:
        brax = run_brax_parallel(args.algo, args.env, backend, trainer, args.seeds, args.evals + 1)
        # all seeds together: from the first train call's start to the last one's end
        brax_side = {"wall": max(b["end"] for b in brax) - min(b["start"] for b in brax), "steps": brax[0]["steps"],
                     "evals": [b["eval"] for b in brax], "per_seed_wall": [b["wall"] for b in brax],
                     "seeds_in_parallel": True}
    else:
        brax = []
        with tempfile.TemporaryDirectory() as cache:  # its first seed compiles, the others load the programs
            for seed in range(args.seeds):
                brax.append(run_brax(args.algo, args.env, backend, trainer, seed, args.evals + 1, cache))
                print(f"brax seed {seed}: {json.dumps(brax[-1])}", flush=True)
        brax_side = {"wall": sum(b["wall"] for b in brax), "steps": brax[0]["steps"], "evals": [b["eval"] for b in brax],
                     "per_seed_wall": [b["wall"] for b in brax]}
    return {"algo": args.algo, "env": args.env, "form": args.form, "timesteps": args.timesteps, "seeds": args.seeds,
            "started": started, "finished": time.strftime("%Y-%m-%d %H:%M"), "brax_version": brax_package.__version__,
            "trainer_args": trainer, "backend": backend, "scanrl_flags": flags, "scanrl": scanrl, "brax": brax_side,
            **source,
            **({"brax_reused_from": str(args.reuse_brax.name)} if args.reuse_brax else {})}


def table(out: Path) -> str:
    from scanrl.common.harness import stats

    rows = ["| algo | env | steps/seed | seeds | scanrl IQM [95% CI] | Brax IQM [95% CI] | wall scanrl / Brax (s) | "
            "wall ratio | env steps/s ratio |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for path in sorted(out.glob("*.json")):
        c = json.loads(path.read_text())
        s, b = c["scanrl"], c["brax"]
        est = {k: stats.iqm_interval(np.array(v["evals"])) for k, v in (("s", s), ("b", b))}
        fmt = lambda e: f"{e.point:,.1f} [{e.low:,.1f}, {e.high:,.1f}]"  # noqa: E731
        sps = lambda v: v["steps"] * c["seeds"] / v["wall"]  # noqa: E731
        algo = " ".join([c["algo"], *c.get("scanrl_flags", [])])
        rows.append(f"| {algo} | {c['env']} | {s['steps']:,} / {b['steps']:,} | {c['seeds']} | {fmt(est['s'])} | "
                    f"{fmt(est['b'])} | {s['wall']:,.0f} / {b['wall']:,.0f} | {s['wall'] / b['wall']:.2f}x | "
                    f"{sps(s) / sps(b):.2f}x |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", choices=["ppo", "sac"], default="ppo")
    parser.add_argument("--env", default="brax/inverted_double_pendulum")
    parser.add_argument("--form", choices=["cpu", "published"], default="cpu")
    parser.add_argument("--timesteps", type=int, default=300_000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--evals", type=int, default=4, help="evaluations after the start, the last at the end")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--reuse-scanrl", type=Path, help="a cell's JSON whose scanrl side to keep (same settings)")
    parser.add_argument("--scanrl-flags", default="", help="more flags for scanrl's side, e.g. '--recompute-advantages'")
    parser.add_argument("--scanrl-run", type=Path, help="a finished scanrl run folder made with this cell's command")
    parser.add_argument("--reuse-brax", type=Path, help="a cell's JSON whose Brax side to keep (same trainer arguments)")
    parser.add_argument("--brax-parallel", action="store_true",
                        help="run Brax's seeds at once, one process each, sharing the accelerator (a GPU's form)")
    parser.add_argument("--table", action="store_true", help="render the cells in --out as a markdown table")
    args = parser.parse_args()
    if args.table:
        print(table(args.out))
        return
    result = cell(args)
    args.out.mkdir(parents=True, exist_ok=True)
    variant = "".join(args.scanrl_flags.split()).replace("--", "_")
    path = args.out / f"{args.algo}__{args.env.replace('/', '-')}{variant}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(table(args.out))


if __name__ == "__main__":
    main()
