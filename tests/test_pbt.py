"""Population-based training (--pbt): the exploit/explore math, the state it copies, its
equality with the plain sweep when no interval ends, the lineage file against the parameters,
exact resume after kill -9, scanrl-eval on a population, every algorithm, and bad input."""

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import HANG_GUARD, REPO, held, once_per_run

from scanrl.algos import grpo, impala, ppo, ppo_rnn, pqn, pqn_rnn, sac, td3
from scanrl.common.harness import devices, loop, pbt, sweeps
from scanrl.common.harness.runconfig import compose

SPACE = {"learning_rate": ("log", 1e-4, 1e-2), "clip_eps": ("uniform", 0.1, 0.3), "gamma": ("grid", (0.9, 0.95, 0.99))}


def spec(members=8, seeds=3, **kw):
    return pbt.Spec(**{"members": members, "seeds": seeds, "interval": 5, "fraction": 0.25, "perturb": 1.25,
                       "resample": 0.25, "space": SPACE, "num_updates": 100, **kw})


# --- exploit and explore ------------------------------------------------------------------------------
@pytest.mark.slow
def test_exploit_replaces_the_bottom_fraction_by_the_top_within_each_run():
    s = spec()
    M, S, n = s.members, s.seeds, s.replaced
    rng = np.random.default_rng(0)
    fitness = rng.permutation(M * S).astype(np.float32)  # rows member-major: row m * S + seed
    fitness[3 * S + 1] = np.nan  # no episode yet: ranks last
    hparams = {"learning_rate": np.full(M * S, 1e-3, np.float32), "clip_eps": np.full(M * S, 0.2, np.float32),
               "gamma": np.full(M * S, 0.95, np.float32)}
    keys = devices.seed_keys(0, S)
    decide = jax.jit(lambda f, h, k, u: pbt.decide(f, h, k, u, s))
    source, replaced, new = jax.device_get(decide(fitness, hparams, keys, 7))
    assert n == 2
    for seed in range(S):
        rows = np.arange(M) * S + seed
        fit = np.where(np.isnan(fitness[rows]), -np.inf, fitness[rows])
        bottom, top = set(rows[np.argsort(fit)[:n]]), set(rows[np.argsort(fit)[-n:]])
        assert set(rows[replaced[rows]]) == bottom
        for r in rows:
            if r in bottom:
                assert source[r] in top and source[r] % S == seed  # a parent of the same run
            else:
                assert source[r] == r
                for k in hparams:
                    assert new[k][r] == hparams[k][r]  # kept members keep their values
    assert replaced[3 * S + 1]  # the NaN member
    again = jax.device_get(decide(fitness, hparams, keys, 7))
    np.testing.assert_array_equal(again[0], source)  # the same key and update draw the same decisions
    assert any(not np.array_equal(jax.device_get(decide(fitness, hparams, keys, u))[0], source) for u in range(8, 16))


@pytest.mark.slow
def test_explore_keeps_hyperparameters_inside_their_bounds():
    s = spec(members=16, seeds=2, resample=0.3)
    M, S = s.members, s.seeds
    fitness = np.arange(M * S, dtype=np.float32)
    rng = np.random.default_rng(1)
    hparams = {"learning_rate": np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), M * S)).astype(np.float32),
               "clip_eps": rng.uniform(0.1, 0.3, M * S).astype(np.float32),
               "gamma": rng.choice([0.9, 0.95, 0.99], M * S).astype(np.float32)}
    hparams["learning_rate"][-S:] = 1e-2  # the top members sit on the upper bounds: a x1.25 step must be clipped
    hparams["clip_eps"][-S:] = 0.3
    decide = jax.jit(lambda f, h, k, u: pbt.decide(f, h, k, u, s))
    moved, resampled = 0, 0
    for u in range(40):
        source, replaced, new = jax.device_get(decide(fitness, hparams, devices.seed_keys(u, S), u))
        for r in np.flatnonzero(replaced):
            lr, clip, gamma = new["learning_rate"][r], new["clip_eps"][r], new["gamma"][r]
            parent = {k: hparams[k][source[r]] for k in hparams}
            assert 1e-4 * (1 - 1e-6) <= lr <= 1e-2 * (1 + 1e-6) and 0.1 - 1e-7 <= clip <= 0.3 + 1e-7
            assert np.isclose(gamma, [0.9, 0.95, 0.99]).any()
            steps = {np.float32(parent["learning_rate"] * f) for f in (1.25, 0.8)}
            if lr in steps or lr == np.float32(min(parent["learning_rate"] * 1.25, 1e-2)):
                moved += 1
            else:
                resampled += 1
    assert moved and resampled  # both kinds of explore happen


class Train(NamedTuple):  # an algorithm's state, as PBT sees its fields
    params: dict
    opt_state: jax.Array
    env_state: jax.Array
    key: jax.Array


@pytest.mark.parametrize("num_devices", [1, 2])
@pytest.mark.slow
def test_exploit_copies_exactly_the_parents_learning_state_and_keeps_the_members_own_experience(num_devices):
    """On one device and across two (the parent's state gathered from the other device)."""
    s = spec(members=4, seeds=2, space={"learning_rate": ("log", 1e-4, 1e-2)}, interval=3)
    R = s.members * s.seeds
    layout = devices.plan_layout(R, {}, 1, num_devices)
    rows = jnp.arange(R, dtype=jnp.float32)
    states = loop.PopulationState(
        train=Train(params={"w": rows[:, None] * jnp.ones((R, 3))}, opt_state=rows * 10,
                    env_state=rows * 100, key=devices.seed_keys(0, R)),
        eval_key=jax.vmap(loop.eval_key)(devices.seed_keys(0, s.seeds)[np.arange(R) % s.seeds]),
        hparams={"learning_rate": jnp.full(R, 1e-3)},
        pbt={"sum": rows, "count": jnp.ones(R), "fitness": jnp.full(R, -jnp.inf)})  # fitness = row index
    step = jax.jit(jax.shard_map(lambda st, u: pbt.step(st, u, True, s, layout.seeds_per_shard, R), mesh=layout.mesh,
                                 in_specs=(jax.sharding.PartitionSpec("seed"), None),
                                 out_specs=jax.sharding.PartitionSpec("seed"), check_vma=False))
    skipped, metrics = jax.device_get(step(states, 1))  # update 1: no interval ends
    assert np.isnan(metrics["pbt_parent"]).all()
    np.testing.assert_array_equal(skipped.train.params["w"], states.train.params["w"])
    new, metrics = jax.device_get(step(states, 2))  # update 2 ends the first interval of 3
    parent = metrics["pbt_parent"]
    for r in range(R):
        seed = r % s.seeds
        if r // s.seeds == 0:  # the worst member of each run (fitness = row index)
            p = int(parent[r]) * s.seeds + seed
            assert int(parent[r]) == 3  # the best member of its run
            np.testing.assert_array_equal(new.train.params["w"][r], states.train.params["w"][p])
            assert new.train.opt_state[r] == states.train.opt_state[p]
            assert new.hparams["learning_rate"][r] != 1e-3  # explored
        else:
            assert parent[r] == -1
            np.testing.assert_array_equal(new.train.params["w"][r], states.train.params["w"][r])
            assert new.hparams["learning_rate"][r] == np.float32(1e-3)
        assert new.train.env_state[r] == states.train.env_state[r]  # its own environments and key
        np.testing.assert_array_equal(jax.random.key_data(new.train.key[r]), jax.random.key_data(states.train.key[r]))
        assert new.pbt["count"][r] == 0 and new.pbt["sum"][r] == 0  # the next interval starts afresh
    np.testing.assert_array_equal(metrics["pbt_fitness"], np.arange(R))


# --- in the program -----------------------------------------------------------------------------------
SMALL = dict(num_envs=4, num_steps=32, num_epochs=2, num_minibatches=2, total_timesteps=4 * 32 * 6, eval_every=0,
             log_every=0, num_seeds=2, num_devices=2)
SPECS = ("learning_rate=log:1e-4:3e-2", "ent_coef=0.0,0.05")


@pytest.mark.slow
def test_burn_in_ranks_without_replacing_then_exploits_as_without_it():
    """--pbt-burn-in B: an interval ending at or before update B replaces nobody (each row its own
    source, values kept); after it, the decisions are exactly those without a burn-in."""
    plain, burn = spec(), spec(burn_in=10)
    rng = np.random.default_rng(1)
    fitness = rng.permutation(plain.members * plain.seeds).astype(np.float32)
    hparams = {k: rng.uniform(0.1, 0.2, fitness.shape).astype(np.float32) for k in ("learning_rate", "clip_eps")}
    hparams["gamma"] = np.full(fitness.shape, 0.95, np.float32)
    keys = devices.seed_keys(0, plain.seeds)
    decide = lambda s, u: jax.device_get(jax.jit(lambda f, h, k: pbt.decide(f, h, k, u, s))(fitness, hparams, keys))
    for u in (4, 9):  # intervals ending with updates 5 and 10
        source, replaced, new = decide(burn, u)
        assert not replaced.any() and (source == np.arange(fitness.size)).all()
        for k in hparams:
            np.testing.assert_array_equal(new[k], hparams[k])
    for got, want in zip(jax.tree.leaves(decide(burn, 14)), jax.tree.leaves(decide(plain, 14))):
        np.testing.assert_array_equal(got, want)
    assert decide(burn, 14)[1].sum() == plain.replaced * plain.seeds

def train(config, population):
    sweep = sweeps.parse(config.run.sweep, config.run.sweep_samples, 0, config.config, population=population)
    program = loop.build(ppo.make_algorithm, config, sweep=sweep)
    keys = devices.seed_keys(0, config.run.num_seeds)[np.arange(program.num_seeds) % config.run.num_seeds]
    return jax.device_get(program.train(keys))


@pytest.mark.slow
def test_pbt_with_an_interval_longer_than_the_run_is_the_plain_sweep_bit_for_bit():
    """The population starts from the sweep's configs (grid points in turn, the same random draws),
    and with no interval ending inside the run it trains exactly what the sweep trains."""
    plain = compose(ppo, "CartPole-v1", **SMALL, sweep=SPECS, sweep_samples=2)
    population = compose(ppo, "CartPole-v1", **SMALL, sweep=SPECS, pbt=True, pbt_population=4, pbt_interval=50)
    a, b = train(plain, None), train(population, 4)
    for k in ("policy_loss", "value_loss", "entropy", "episode_return"):
        np.testing.assert_array_equal(b["metrics"][k], a["metrics"][k], err_msg=k)
    for got, want in zip(jax.tree.leaves(b["policy"]), jax.tree.leaves(a["policy"])):
        np.testing.assert_array_equal(got, want)
    assert np.isnan(b["metrics"]["pbt_parent"]).all()
    # a plain run's state keeps its structure (its checkpoints too); a population's adds the fitness record
    assert type(a["state"]).__name__ == "SeedState" and type(b["state"]).__name__ == "PopulationState"
    # and with an interval inside the run, members are replaced and their values change
    short = compose(ppo, "CartPole-v1", **SMALL, sweep=SPECS, pbt=True, pbt_population=4, pbt_interval=2)
    c = train(short, 4)
    assert (c["metrics"]["pbt_parent"] >= 0).sum() == 2 * 2 * 1  # 2 intervals x 2 runs x 1 replaced member


@pytest.mark.parametrize("module, flags", [
    (impala, dict(num_envs=4, num_steps=32, total_timesteps=4 * 32 * 4)),
    (grpo, dict(num_envs=8, num_steps=32, total_timesteps=8 * 32 * 4)),
    (ppo_rnn, dict(num_envs=4, num_steps=32, num_minibatches=2, total_timesteps=4 * 32 * 4)),
    (pqn, dict(num_envs=8, num_steps=16, num_minibatches=4, num_epochs=1, hidden=(32,),
               total_timesteps=8 * 16 * 4)),
    (pqn_rnn, dict(num_envs=4, num_steps=16, num_minibatches=2, num_epochs=1, hidden=(16,),
                   gru_size=16, total_timesteps=4 * 16 * 4)),
    (sac, dict(env="Pendulum-v1", num_envs=2, num_steps=8, batch_size=32, learning_starts=32,
               total_timesteps=2 * 8 * 4)),
    (td3, dict(env="Pendulum-v1", num_envs=2, num_steps=8, batch_size=32, learning_starts=32,
               total_timesteps=2 * 8 * 4)),
    # a team: PQN-VDN on JaxMARL's MPE spread, 3 agents' rows per game
    (pqn, dict(env="jaxmarl/MPE_simple_spread_v3", vdn=True, num_envs=4, num_steps=16,
               num_minibatches=2, num_epochs=1, hidden=(32,), total_timesteps=4 * 16 * 4)),
])
@pytest.mark.slow
def test_every_algorithm_exploits_inside_its_program(module, flags):
    """Each algorithm's population (and a team's, PQN-VDN's on a JaxMARL env): a replaced
    member's policy after the interval equals its parent's."""
    flags = {"env": "CartPole-v1", **flags}
    if flags["env"].startswith("jaxmarl/"):
        pytest.importorskip("jaxmarl", reason='the jaxmarl suite is not installed: pip install -e ".[jaxmarl]"')
    config = compose(module, flags.pop("env"), **flags, eval_every=0, log_every=0, num_seeds=1,
                     num_devices=2, sweep=("learning_rate=log:1e-4:1e-3",), pbt=True,
                     pbt_population=4, pbt_interval=3)
    sweep = sweeps.parse(config.run.sweep, 8, 0, config.config, population=4)
    program = loop.build(module.make_algorithm, config, sweep=sweep)
    state = program.start(devices.seed_keys(0, 1)[np.zeros(4, int)])
    state, metrics = jax.device_get(program.advance(state, 0, 3))  # the interval ends with update 3 (index 2)
    parent = metrics["pbt_parent"][:, 2]
    (child,) = np.flatnonzero(parent >= 0)
    policy = jax.device_get(program.policy(state))
    for leaf in jax.tree.leaves(policy):
        np.testing.assert_array_equal(leaf[child], leaf[int(parent[child])])
    assert metrics["pbt_learning_rate"][child, 2] != sweep.values["learning_rate"][child].astype(np.float32)


# --- the run folder -------------------------------------------------------------------------------------
PBT_RUN = ["--total-timesteps", "12288", "--num-steps", "64", "--num-seeds", "2", "--sweep", SPECS[0], "--sweep",
           SPECS[1], "--pbt", "--pbt-population", "4", "--pbt-interval", "4", "--log-every", "4",
           "--checkpoint-every", "4", "--eval-every", "8"]


@pytest.fixture(scope="module")
def pbt_dir(tmp_path_factory):
    """The PBT run, once per test run."""
    def compute():
        summary = ppo.main([*PBT_RUN, "--out-dir", str(tmp_path_factory.mktemp("pbt"))])
        assert summary["exit_code"] == 0 and summary["num_configs"] == 4
        return Path(summary["run_dir"])

    return once_per_run(tmp_path_factory, "pbt_dir", compute)


@pytest.mark.slow
def test_the_lineage_agrees_with_the_parameters_and_the_schedule_with_the_lineage(pbt_dir):
    """pbt.jsonl names who copied whom at each interval: at that checkpoint the member's weights
    equal its parent's, and its hyperparameters are those the file gives."""
    from scanrl.common.harness import evaluate

    records = [json.loads(line) for line in (pbt_dir / "pbt.jsonl").read_text().splitlines()]
    metrics = np.load(pbt_dir / "metrics.npz")
    updates = metrics["episode_return"].shape[-1]
    assert [r["update"] for r in records] == list(range(4, updates, 4))
    config = compose(ppo, "CartPole-v1", num_steps=64)
    algo = ppo.make_algorithm(config)
    copies = 0
    for record in records:
        u = record["update"]
        kept = (pbt_dir / "checkpoints" / f"update_{u}.npz").exists()  # the last 3 checkpoints are kept
        policy = evaluate.load_policy(pbt_dir, algo, 8, u, list(range(8)), ("ent_coef", "learning_rate"))[0] \
            if kept else None
        for i, m in enumerate(record["members"]):
            row = m["member"] * 2 + m["seed"]
            assert i == row
            for k, v in m["hparams"].items():
                assert v == pytest.approx(float(metrics[f"pbt_{k}"][m["member"], m["seed"], u - 1]), rel=1e-6)
            if m["parent"] is not None and policy is not None:
                copies += 1
                parent_row = m["parent"] * 2 + m["seed"]
                for leaf in jax.tree.leaves(policy):
                    np.testing.assert_array_equal(leaf[row], leaf[parent_row])
    assert copies >= 2
    summary = json.loads((pbt_dir / "pbt.json").read_text())
    for r in summary["runs"]:
        segments = r["schedule"]
        assert segments[0]["first_update"] == 1 and segments[-1]["last_update"] == updates
        assert all(a["last_update"] + 1 == b["first_update"] for a, b in zip(segments, segments[1:]))
        assert r["winner_final_return"] == max(r["final_return_per_member"])
    best = json.loads((pbt_dir / "best_config.json").read_text())
    assert "schedule, not a constant" in best["pbt_schedule"]["note"] and "pbt" not in best and "sweep" not in best
    assert best["learning_rate"] == summary["runs"][0]["schedule"][-1]["values"]["learning_rate"]
    from scanrl.common.harness import run as run_module

    loaded = run_module.parse_config(ppo, 
                                     ["--config", str(pbt_dir / "best_config.json")])
    assert not loaded.run.pbt and loaded.run.sweep == () and loaded.learning_rate == best["learning_rate"]
    from PIL import Image

    with Image.open(pbt_dir / "pbt.png") as image:
        assert image.size[0] >= 800


@pytest.mark.slow
def test_a_killed_pbt_run_resumes_bit_for_bit(pbt_dir, tmp_path):
    from test_lifecycle import assert_same_run, signal_after_checkpoint

    proc = subprocess.Popen(held(4, "algos/ppo.py", *PBT_RUN, "--out-dir", tmp_path), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    signal_after_checkpoint(proc, tmp_path, signal.SIGKILL, after=4)
    assert proc.returncode == -signal.SIGKILL
    (run_dir,) = list(tmp_path.iterdir())
    assert run_dir.name.startswith("ppo__") and "__pbt-" in run_dir.name  # named as a population
    proc = subprocess.run([sys.executable, "algos/ppo.py", "--resume", str(run_dir)], cwd=REPO, capture_output=True,
                          text=True, timeout=HANG_GUARD)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_same_run(pbt_dir, run_dir)
    for name in ("pbt.jsonl", "pbt.json"):
        assert (run_dir / name).read_text() == (pbt_dir / name).read_text(), name
    best = [json.loads((d / "best_config.json").read_text()) for d in (run_dir, pbt_dir)]
    assert [{k: v for k, v in b.items() if k != "out_dir"} for b in best] == [
        {k: v for k, v in best[1].items() if k != "out_dir"}] * 2


@pytest.mark.slow
def test_scanrl_eval_takes_the_winner_or_a_chosen_member(pbt_dir, capsys):
    """Unchanged, scanrl-eval reproduces the run's last sampled evaluation of each run's winner."""
    from scanrl import algos
    from scanrl.common.harness import evaluate

    metrics = np.load(pbt_dir / "metrics.npz")["eval_return_sampled"]  # [members, seeds, updates]
    winners = [r["winner"] for r in json.loads((pbt_dir / "pbt.json").read_text())["runs"]]
    result = evaluate.main([str(pbt_dir), "--out", str(pbt_dir / "eval_winner.json")], algos)
    assert result["pbt_members"] == winners
    sampled = json.loads((pbt_dir / "eval_winner.json").read_text())
    want = np.mean([metrics[w, s, -1] for s, w in enumerate(winners)])
    np.testing.assert_allclose(sampled["mean_return_sampled"], want, rtol=1e-5)
    result = evaluate.main([str(pbt_dir), "--member", "2", "--out", str(pbt_dir / "eval_2.json")], algos)
    assert result["pbt_members"] == [2, 2]
    np.testing.assert_allclose(result["mean_return_sampled"], metrics[2, :, -1].mean(), rtol=1e-5)
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main([str(pbt_dir), "--member", "4"], algos)
    assert exit_info.value.code == 2 and "--member 4 is not a member of this population" in capsys.readouterr().err
    from scanrl.common.harness import plots

    with pytest.raises(SystemExit) as exit_info:
        plots.main([str(pbt_dir)])
    assert exit_info.value.code == 2 and "is a population-based training run: its pbt.png" in capsys.readouterr().err


# --- bad input: one sentence, exit 2, before compiling -------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--pbt"], "--pbt searches the --sweep fields: give at least one"),
    (["--pbt", "--sweep", "learning_rate=log:1e-4:1e-2", "--pbt-population", "3"],
     "--pbt-population 3 is too small for --pbt-fraction 0.25: truncation needs at least 4 members."),
    (["--pbt", "--sweep", "learning_rate=log:1e-4:1e-2", "--pbt-interval", "2000"],
     "--pbt-interval 2000 is not shorter than the run's"),
    (["--pbt", "--sweep", "num_envs=4,8"], "num_envs sets array shapes or loop lengths"),
    (["--pbt", "--sweep", "learning_rate=1e-3,2e-3", "--sweep-mode", "loop"], "cannot run with --sweep-mode loop"),
    (["--pbt", "--sweep", "clip_eps=uniform:0.1:1.0"], "the bound 1 fails: --clip-eps must lie in (0, 1), got 1.0."),
    (["--pbt", "--sweep", "learning_rate=log:1e-4:1e-2", "--pbt-fitness", "eval", "--eval-every", "3"],
     "make --eval-every (3) a divisor of --pbt-interval 10"),
    (["--pbt", "--sweep", "gamma=0.9,0.95,0.99"], "--pbt-population 8 is not a multiple of the --sweep grid's 3 points"),
    (["--pbt-fraction", "0.7"], "--pbt-fraction must lie in (0, 0.5], got 0.7."),
    (["--pbt-perturb", "0.9"], "--pbt-perturb must be greater than 1, got 0.9."),
    (["--pbt-burn-in", "-1"], "--pbt-burn-in must be 0 or positive, got -1."),
    (["--pbt", "--sweep", "learning_rate=log:1e-4:1e-2", "--pbt-burn-in", "190"],
     "--pbt-burn-in 190 leaves no interval of --pbt-interval 10 ending inside the run's 200 updates"),
])
def test_bad_pbt_input_is_one_sentence_with_exit_2(cli_error, args, message):
    code, err = cli_error(ppo.main, ["--total-timesteps", "102400", *args])
    assert code == 2 and message in err, err
