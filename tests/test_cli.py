"""The command line: --help, clear errors before compiling, run folder, wandb."""

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import re
import subprocess

import jax
import numpy as np
import pytest

from conftest import HANG_GUARD, REPO, four_device_snippet, once_per_run, run_python, run_scripts, unwrapped

from scanrl.algos import grpo, impala, ppo, pqn, sac, td3
from scanrl.common.harness import provenance, run
from scanrl.common.harness.runconfig import compose

PPO = "algos/ppo.py"


HELP_LINES = {  # every --help below, run as scripts in one process (run_scripts)
    **{algo.__name__: [algo.__file__, "--help"] for algo in (ppo, impala, grpo, pqn, sac, td3)},
    "ppo Pendulum": [PPO, "--env", "Pendulum-v1", "--help"],
    **{f"{algo.__name__} MinAtar": [algo.__file__, "--env", "SpaceInvaders-MinAtar", "--help"] for algo in (ppo, impala, grpo, pqn)},
}


@pytest.fixture(scope="module")
def help_of(tmp_path_factory):
    """{name in HELP_LINES: the process result of that command line}, once per test run."""
    return once_per_run(tmp_path_factory, "help_of", lambda: dict(zip(HELP_LINES, run_scripts(HELP_LINES.values()))))


@pytest.mark.parametrize(
    "algo,phrase", [(ppo, "GAE lambda"), (impala, "V-trace traces"), (grpo, "group std"), (pqn, "Q(lambda)'s lambda"),
                     (sac, "Polyak rate"), (td3, "policy_delay critic steps")]
)
@pytest.mark.slow
def test_help_lists_every_flag_with_its_help(help_of, algo, phrase):
    proc = help_of[algo.__name__]
    assert proc["returncode"] == 0
    text = " ".join(proc["stdout"].split())  # help text may wrap
    from scanrl.common.harness.run import RunConfig

    names = [f.name for f in dataclasses.fields(algo.Config)]
    names += [f.name for f in dataclasses.fields(RunConfig)]
    for name in names:
        flag = "--" + name.replace("_", "-")
        assert flag in text, flag
    assert phrase in text and "Adam step size" in text


@pytest.mark.parametrize("algo", [ppo, sac])
def test_help_groups_every_flag_in_boxes(algo, capsys):
    """--help shows the flags in boxes (algorithm, environment, run, lifecycle, logging, sweeps),
    and every flag the parser takes is in exactly one of them."""
    from scanrl.common.algorithm import flag
    from scanrl.common.harness.runconfig import RunConfig

    with pytest.raises(SystemExit) as exit_info:
        algo.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    parts = re.split(r"^[╭─ ]*([a-z]*) ?options\b.*$", text, flags=re.M)  # boxes, or plain headings without a tty
    titles, boxes = parts[1::2], parts[2::2]
    assert titles == ["", "algorithm", "environment", "run", "lifecycle", "logging", "sweeps"]
    titles, boxes = titles[1:], boxes[1:]
    names = [f.name for f in dataclasses.fields(algo.Config)]
    names += [f.name for f in dataclasses.fields(RunConfig)]
    for name in names:
        defined = re.compile(rf"^[│ ]*{flag(name)}[ ,]", re.M)  # where the flag is listed, not mentioned
        shown = [title for title, box in zip(titles, boxes) if defined.search(box)]
        assert len(shown) == 1, (name, shown)
    expected = {"learning_rate": "algorithm", "env": "environment", "num_seeds": "run", "resume": "lifecycle",
                "out_dir": "logging", "sweep": "sweeps"}
    for name, title in expected.items():
        assert re.search(rf"^[│ ]*{flag(name)}[ ,]", boxes[titles.index(title)], re.M), name


def test_the_help_says_where_the_defaults_come_from_and_how_long_they_took(tmp_path, monkeypatch):
    """--help's "defaults:" note names the presets and recipe behind the defaults it shows and
    the budget; the wall it quotes is the one measured for this algorithm, env and budget
    (preset_walls.json), and none where the budget differs from the measured one."""
    from scanrl.common.harness import configs

    walls = tmp_path / "walls.json"
    walls.write_text(json.dumps({"pqn Breakout-MinAtar": {"total_timesteps": 10_000_000, "expected_seconds": 1680},
                                 "ppo CartPole-v1": {"total_timesteps": 500_000, "expected_seconds": 41}}))
    monkeypatch.setattr(configs, "WALLS", walls)
    assert configs.preset_note(pqn, compose(pqn, "Breakout-MinAtar")) == (
        "On Breakout-MinAtar: the minatar preset, 10,000,000 env steps per seed, about 28 minutes for one seed on"
        " 2 CPU cores, compile included.")
    assert configs.preset_note(ppo, compose(ppo, "CartPole-v1")) == (
        "On CartPole-v1: this file's defaults, 500,000 env steps per seed, under a minute for one seed on 2 CPU"
        " cores, compile included.")
    assert configs.preset_note(ppo, compose(ppo, "CartPole-v1", total_timesteps=10**6)) == (
        "On CartPole-v1: this file's defaults, 1,000,000 env steps per seed.")  # not the measured budget
    assert configs.preset_note(grpo, compose(grpo, "Catch-bsuite")).startswith(
        "On Catch-bsuite: the Catch-bsuite preset, ")


def test_the_measured_walls_are_of_todays_budgets_and_their_pages_say_them():
    """Every wall in preset_walls.json was measured at the budget that --help shows today (a
    preset whose budget changes is measured again: benchmarks/preset_walls.py), and each
    algorithm's page gives its rows as --help words them."""
    from scanrl.algos import get
    from scanrl.common.harness import configs

    table = {k: v for k, v in json.loads(configs.WALLS.read_text()).items() if not k.startswith("_")}
    assert {case.split(" ")[0] for case in table} == {"ppo", "impala", "grpo", "ppo_rnn", "pqn", "pqn_rnn", "sac", "td3"}
    for case, row in table.items():
        algo, env = case.split(" ")
        assert row["total_timesteps"] == compose(get(algo), env).config.total_timesteps, case
        assert row["expected_seconds"] >= row["compile_seconds"] > 0, case
        page = (REPO / "docs" / "algorithms" / f"{algo}.md").read_text()
        assert f"| {env} | {row['total_timesteps']:,} | {configs.took(row['expected_seconds'])} |" in page, case


@pytest.mark.slow
def test_help_shows_continuous_defaults_for_a_continuous_env(help_of):
    proc = help_of["ppo Pendulum"]
    assert proc["returncode"] == 0
    assert "0.95" in proc["stdout"] and "1000000" in proc["stdout"].replace("_", "")


@pytest.mark.parametrize("algo", [ppo, impala, grpo, pqn])
@pytest.mark.slow
def test_help_shows_the_minatar_preset_for_a_minatar_env(help_of, algo):
    proc = help_of[f"{algo.__name__} MinAtar"]
    assert proc["returncode"] == 0
    text = " ".join(proc["stdout"].translate({ord(c): " " for c in "│╭╮╰╯─"}).split())

    def default_of(flag):  # the "(default: ...)" at the end of the flag's help
        return text.split(f"{flag} ")[1].split("(default: ")[1].split(")")[0]

    preset = algo.PRESETS["minatar"]
    assert default_of("--learning-rate") == str(preset["learning_rate"]) != str(algo.Config.learning_rate)
    assert default_of("--activation") == "relu" and default_of("--torso") == "auto"
    assert default_of("--total-timesteps") == str(preset["total_timesteps"])


@pytest.mark.parametrize(
    "args,message",
    [
        (["--env", "CartPol-v1"], "Did you mean 'CartPole-v1'"),
        (["--torso", "cnn"], "--torso cnn needs image observations [H, W, C], but this env's have shape [4]"),
        (["--env", "Breakout-MinAtar", "--conv-channels", "8", "8", "8", "8", "8", "--total-timesteps", "8192"],
         "--conv-channels (8, 8, 8, 8, 8): 5 3x3 convolutions do not fit a 10x10 image"),
        (["--num-envs", "3", "--num-steps", "5", "--num-minibatches", "4"], "not divisible by --num-minibatches"),
        (["--learning-rate", "0"], "--learning-rate must be positive"),
        (["--learning-rate", "-1e-3"], "--learning-rate must be positive"),
        (["--total-timesteps", "100"], "smaller than one rollout"),
        (["--total-timesteps", "1e99"], "--total-timesteps 1e+99 is 1.95e+96 updates of 512 env steps; a run counts at "
                                        "most 2**31 - 1 updates: lower --total-timesteps."),
        (["--eval-env-params", "lenght", "0.7"], "Unknown environment parameter"),
        (["--total-timesteps", "2.5"], "--total-timesteps takes a whole number (such as 1000000, 1e6 or 1_000_000), got '2.5'"),
        (["--num-seeds=1.5e0"], "--num-seeds takes a whole number"),
        (["--lr", "1e-3"], "unknown flag --lr; did you mean --learning-rate?"),
        (["--num-seed", "2"], "unknown flag --num-seed; did you mean --num-seeds"),
        (["--unroll-length", "48"], "--unroll-length 48 must divide --num-steps 128 into unrolls that --num-minibatches 4"),
        (["--unroll-length", "-8"], "--unroll-length must be 0 or positive, got -8"),
        (["--unroll-length", "16", "--recompute-advantages"],
         "--recompute-advantages has no effect with --unroll-length 16, which recomputes GAE in every minibatch"),
    ],
)
def test_user_errors_exit_2_with_one_sentence_before_compiling(cli_error, args, message):
    code, stderr = cli_error(ppo.main, args)
    assert code == 2 and message in stderr, stderr
    assert "Error parsing" not in stderr and len(stderr.strip().splitlines()) == 1, stderr


def test_a_seed_with_no_episode_ended_in_the_last_tenth_shows_the_latest_that_did(tmp_path, capsys):
    """Episodes longer than the last 10% of updates (Brax's 1000-step ones on a short budget): the
    final return stays null, and the table and summary.json give the latest update's return where
    an episode ended, per seed."""
    from scanrl.common.harness.logging import RunLogger

    nan = np.nan
    returns = np.array([[nan, 5.0, nan, nan, nan, nan, nan, nan, nan, 7.0],  # ended in the last 10%
                        [nan, 998.0, nan, 1000.0, nan, nan, nan, nan, nan, nan],  # ended before it only
                        [nan] * 10])  # never ended
    logger = RunLogger(algo="ppo", env="brax/inverted_pendulum", config={}, num_seeds=3, steps_per_update=8,
                       num_updates=10, out_dir=str(tmp_path), progress=False)
    summary = logger.finish(metrics={"episode_return": returns}, params={"w": np.zeros((3, 2))}, total_timesteps=80,
                            compile_seconds=1.0, run_seconds=1.0, wall_seconds=3.0)
    assert summary["final_return_per_seed"] == [7.0, None, None] and summary["final_return_mean"] == 7.0
    assert summary["latest_return_per_seed"] == [7.0, 1000.0, None]
    assert summary["latest_return_update_per_seed"] == [10, 4, 0]
    out = capsys.readouterr().out
    assert "final return per seed (mean over the last 10% of updates)" in out
    assert "seed    1  no episode ended in the last 10%; the latest that did: 1000.00 (update 4)" in out
    assert "seed    2  no episode ended\n" in out


def test_an_error_on_a_value_the_recipe_set_says_so(cli_error):
    """Navix's recipe sets --num-minibatches 8: an error naming it says it is the recipe's (and how
    to change it); once the user sets it, the error is theirs alone."""
    env = ["--env", "navix/Navix-Empty-5x5-v0", "--num-envs", "5", "--num-steps", "5"]
    code, stderr = cli_error(ppo.main, env)
    assert code == 2 and stderr == ("error: num_envs * num_steps = 25 is not divisible by --num-minibatches 8; pick a "
                                    "divisor of 25 (--num-minibatches is the cpu recipe's for navix/Navix-Empty-5x5-v0: "
                                    "set it, or pass --recipe none)."), stderr
    code, stderr = cli_error(ppo.main, [*env, "--num-minibatches", "8"])
    assert code == 2 and stderr.endswith("pick a divisor of 25.") and "recipe" not in stderr, stderr


@pytest.mark.parametrize("text,value", [("1e6", 1_000_000), ("2.5e5", 250_000), ("1_000_000", 1_000_000), ("4096", 4096)])
def test_integer_flags_take_1e6_and_underscores(text, value):
    from scanrl.common.harness import run

    config = run.parse_config(ppo, ["--total-timesteps", text, "--num-seeds=2e0"])
    assert config.total_timesteps == value and config.run.num_seeds == 2


@pytest.mark.parametrize("flags,notes", [
    (["--total-timesteps", "2048", "--num-envs", "4", "--num-steps", "256"], ["only 2 updates"]),
    (["--total-timesteps", "512", "--num-envs", "4", "--num-steps", "64"],
     ["only 2 updates", "each environment steps 128 times, fewer than the 500"]),
    (["--total-timesteps", "8192", "--num-envs", "4", "--num-steps", "128"], []),
])
def test_a_budget_too_short_to_say_much_is_noted_before_compiling(flags, notes):
    """CartPole's episodes end at 500 steps: 4 environments of 128 steps in all can count only
    the episodes that fail sooner; 2 updates leave the curves 2 points."""
    from scanrl.common.harness import loop

    config = run.parse_config(ppo, flags)
    program = loop.build_run(ppo.make_algorithm, config)
    said = run._short_budget(config, program)
    assert len(said) == len(notes) and all(s.startswith(n) for s, n in zip(said, notes)), said


@pytest.mark.parametrize("text", [
    "Value error\n" + "-" * 40 + "\nError parsing Config: --x must be 1\n" + "-" * 40 + "\nFor full helptext, see x --help.",
    "╭─ Parsing error ───────╮\n│ Error parsing run: --x must be 1 │\n│ ─────────── │\n│ For full helptext, run x │\n╰───────╯",
    # as tyro draws it at a terminal: in colour
    "\x1b[31m╭─\x1b[0m \x1b[31mValue error\x1b[0m \x1b[31m───────╮\x1b[0m\n\x1b[31m│\x1b[0m \x1b[91;1mError parsing "
    "config:\x1b[0m \x1b[m--x must\x1b[0m \x1b[31m│\x1b[0m\n\x1b[31m│\x1b[0m \x1b[mbe 1\x1b[0m \x1b[31m│\x1b[0m\n"
    "\x1b[31m│ ─────────── │\x1b[0m\n\x1b[31m│\x1b[0m For full helptext, see \x1b[1mx --help\x1b[0m \x1b[31m│\x1b[0m\n"
    "\x1b[31m╰───────╯\x1b[0m",
])
def test_tyro_boxes_become_one_sentence(text):
    from scanrl.common.harness.configs import tyro_error_sentence

    assert tyro_error_sentence(text) == "--x must be 1."


LAYOUT_ERRORS = [
    (["--data-parallel", "3"], "--data-parallel 3 does not split the 4 devices into equal groups"),
    (["--num-envs", "6", "--data-parallel", "4"], "--num-envs (6) is not divisible by --data-parallel 4"),
    (["--num-devices", "8"], "asks for more devices than the 4 available"),
]


# `python algos/ppo.py ARGS --out-dir OUT` as a script, on 4 devices: its exit code, stderr, and
# what it wrote in OUT (a fresh folder).
LAYOUT_ERROR = """
import contextlib, io, json, os, runpy, sys, tempfile
out, err, code = tempfile.mkdtemp(), io.StringIO(), 0
sys.argv = [sys.argv[1], *json.loads(sys.argv[2]), "--out-dir", out]
with contextlib.redirect_stderr(err):
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
print("RESULT" + json.dumps({"returncode": code, "stderr": err.getvalue(), "written": os.listdir(out)}))
"""
LAYOUT_ERRORS_ON_4 = four_device_snippet("test_cli: layout errors", LAYOUT_ERROR,
                                         *[(PPO, json.dumps(args)) for args, _ in LAYOUT_ERRORS])


@pytest.mark.parametrize("args,message", LAYOUT_ERRORS)
@pytest.mark.slow
def test_device_layout_errors_exit_2_before_compiling(four_devices, args, message):
    proc = four_devices(LAYOUT_ERRORS_ON_4)[LAYOUT_ERRORS.index((args, message))]
    assert proc["returncode"] == 2, proc["stderr"][-2000:]
    unboxed = proc["stderr"].translate({ord(c): " " for c in "│╭╮╰╯─"})
    assert message in " ".join(unboxed.split())
    assert proc["written"] == []


@pytest.mark.parametrize(
    "args,message",
    [
        (["--num-envs", "6", "--num-minibatches", "4"], "minibatches are whole trajectories"),
        (["--env", "Pendulum-v2"], "Did you mean 'Pendulum-v1'"),
        (["--clip-rho-threshold", "0"], "--clip-rho-threshold must be positive"),
        (["--actor-lag", "-1"], "--actor-lag"),
    ],
)
def test_impala_user_errors_exit_2_before_compiling(cli_error, args, message):
    code, stderr = cli_error(impala.main, args)
    assert code == 2 and message in stderr, stderr


@pytest.mark.slow
def test_an_error_from_the_command_line_is_one_sentence_without_traceback(python_process, tmp_path):
    """The same path as the in-process checks above, once through a real process."""
    proc = python_process([PPO, "--env", "CartPol-v1", "--out-dir", str(tmp_path)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "Did you mean 'CartPole-v1'" in proc.stderr and not any(tmp_path.iterdir())


def run_cli(tmp_path, *extra):
    proc = run_python(
        [PPO, "--total-timesteps", "2048", "--num-seeds", "2", "--log-every", "1", "--eval-every", "2",
         "--out-dir", str(tmp_path), *extra]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = list(tmp_path.iterdir())
    return proc, run_dir


@pytest.fixture(scope="module")
def logged_every_update(tmp_path_factory):
    return once_per_run(tmp_path_factory, "logged_every_update", lambda: run_cli(tmp_path_factory.mktemp("log1")))


@pytest.mark.slow
def test_run_folder_contents(logged_every_update):
    proc, run_dir = logged_every_update
    names = {p.name for p in run_dir.iterdir()}
    assert {"config.json", "progress.jsonl", "metrics.npz", "params.npz", "summary.json"} <= names
    assert "wandb" not in names  # the default mode writes nothing for wandb
    summary = json.loads((run_dir / "summary.json").read_text())
    for key in ("algo", "env", "num_seeds", "total_timesteps", "final_return_per_seed", "final_return_mean",
                "eval_return_deterministic_mean", "eval_return_sampled_mean", "env_steps_per_second",
                "compile_seconds", "wall_seconds"):
        assert key in summary, key
    assert summary["algo"] == "ppo" and summary["num_seeds"] == 2 and len(summary["final_return_per_seed"]) == 2
    assert summary["total_timesteps"] == 2048 and summary["eval_return_deterministic_mean"] is not None
    assert summary["wall_seconds"] > summary["compile_seconds"] + summary["run_seconds"]  # from process start
    progress = [json.loads(l) for l in (run_dir / "progress.jsonl").read_text().splitlines()]
    assert [p["update"] for p in progress] == [1, 2, 3, 4]
    assert len(progress[0]["per_seed"]["policy_loss"]) == 2
    metrics = np.load(run_dir / "metrics.npz")
    assert metrics["policy_loss"].shape == (2, 4)
    params = np.load(run_dir / "params.npz")
    assert params["params/actor/0/w"].shape == (2, 4, 64)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["num_seeds"] == 2 and config["learning_rate"] == 2.5e-4  # flat, as the flags
    assert "compiling…" in proc.stdout and "run folder" in proc.stdout and "seed    1" in proc.stdout
    lines = [l for l in proc.stdout.splitlines() if l.startswith("[ppo CartPole-v1] update")]
    assert len(lines) == 4 and all("return" in l and len(l) <= 100 for l in lines)  # not a terminal: plain lines
    assert lines[-1].startswith("[ppo CartPole-v1] update 4/4") and "eval " in lines[-1]
    check_provenance(run_dir, PPO)


def check_provenance(run_dir, script):
    """provenance.json: one session from update 0 with the command line, the checkout's commit and
    whether tracked files differ from it, the algorithm file's hash and the package versions."""
    (session,) = json.loads((run_dir / "provenance.json").read_text())["sessions"]
    assert session["update"] == 0 and session["argv"][0] == script
    git = lambda *a: subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    assert session["scanrl"] == {"version": importlib.metadata.version("scanrl"), "commit": git("rev-parse", "HEAD"),
                                 "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    algo_file = REPO / script
    assert session["algorithm_file"] == {"path": str(algo_file), "sha256": hashlib.sha256(algo_file.read_bytes()).hexdigest()}
    assert session["packages"]["jax"] == jax.__version__ and session["packages"]["gymnax"]
    assert session["devices"].startswith(f"{len(jax.devices())} x ")


def test_provenance_adds_a_session_per_resume_and_hashes_the_file_as_it_was(tmp_path, monkeypatch):
    """A copied algorithm file edited between sessions: each session holds the hash of the file it
    ran; a resume appends, a new run starts the list again; outside a git checkout (an installed
    wheel) the commit and the dirty flag are null."""
    copy = tmp_path / "my_ppo.py"
    copy.write_text("# a copy\n")
    provenance.record(tmp_path, 0, "my_ppo", str(copy))
    copy.write_text("# edited\n")
    provenance.record(tmp_path, 7, "my_ppo", str(copy), resumed=True)
    sessions = json.loads((tmp_path / "provenance.json").read_text())["sessions"]
    assert [s["update"] for s in sessions] == [0, 7]
    assert [s["algorithm_file"]["sha256"] for s in sessions] == [hashlib.sha256(b"# a copy\n").hexdigest(),
                                                                  hashlib.sha256(b"# edited\n").hexdigest()]
    provenance.record(tmp_path, 0, "my_ppo", str(copy))
    assert len(json.loads((tmp_path / "provenance.json").read_text())["sessions"]) == 1
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    assert provenance.scanrl_source()["commit"] is None and provenance.scanrl_source()["dirty"] is None
    assert provenance.algorithm_path("ppo", None) == tmp_path / "algos" / "ppo.py"


@pytest.mark.slow
def test_on_a_terminal_a_spinner_then_a_progress_bar(tmp_path, logged_every_update):
    """The same run as `logged_every_update`, its stdout a pseudo-terminal 80 columns wide:
    rich's spinner and bar instead of plain lines, every line within 80 columns (a path
    longer than that alone on its line), and the same files bit for bit (the display changes
    nothing)."""
    import os
    import pty
    import re
    import subprocess
    import sys

    main, child = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "80", "LINES": "24"}
    proc = subprocess.Popen([sys.executable, PPO, "--total-timesteps", "2048", "--num-seeds", "2", "--log-every", "1",
                             "--eval-every", "2", "--out-dir", str(tmp_path)], stdout=child, stderr=child, env=env,
                            cwd=REPO)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=HANG_GUARD) == 0
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode(errors="replace"))  # no colours
    assert not too_wide(shown.replace("\r", "\n"), 80), too_wide(shown.replace("\r", "\n"), 80)
    assert "compiling… CartPole-v1: 2 seeds" in shown and "compiled in" in shown
    assert f"run folder in {tmp_path}/" in unwrapped(shown)  # never cut: above the spinner if need be
    assert "4/4" in shown and "ETA" in shown and "env steps/s" in shown  # at 80 columns: no "updates"
    assert "[ppo CartPole-v1] update" not in shown  # no plain lines on a terminal
    assert "mean" in shown and "run folder:" in shown
    (run_dir,) = list(tmp_path.iterdir())
    _, plain = logged_every_update
    for name in ("params.npz", "metrics.npz"):
        want, got = np.load(plain / name), np.load(run_dir / name)
        assert sorted(want.files) == sorted(got.files)
        for k in want.files:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{name} {k}")


def too_wide(text, columns):
    """The lines of `text` wider than `columns`, but for a line that is one word alone (a path
    longer than the line, which is never broken)."""
    return [line for line in text.splitlines() if len(line) > columns and len(line.split()) > 1]


@pytest.mark.parametrize("columns", [80, 100])
def test_what_a_run_prints_fits_80_columns_on_a_terminal_and_100_off_one(tmp_path, capsys, monkeypatch,
                                                                           columns):
    """The closing report (with the deterministic-vs-sampled note and a long run folder), the
    interrupted run's line and a sweep table of two flags with four-figure returns, at the
    width console.width() gives (80: a terminal; 100: off one): each line fits, broken between
    words, nothing lost; a command to copy breaks as the shell reads it, a path is never cut."""
    from scanrl.common.harness import console, reports, sweeps
    from scanrl.common.harness.logging import RunLogger

    monkeypatch.setattr(console, "width", lambda: columns)
    logger = RunLogger(algo="ppo", env="brax/inverted_double_pendulum", config={"eval_policy": "sampled"},
                       num_seeds=2, steps_per_update=8, num_updates=10, progress=False,
                       out_dir=str(tmp_path / ("runs-of-a-long-experiment-name-" * 2)))
    returns = np.tile(np.linspace(-1234.5, 9012.25, 10), (2, 1))
    logger.finish(metrics={"episode_return": returns, "eval_return_sampled": returns / 10, "eval_return": returns},
                  params={"w": np.zeros((2, 2))}, total_timesteps=80, compile_seconds=123.4, run_seconds=1.0,
                  wall_seconds=3.0)
    logger.say("Interrupted after update 7: continue with", f"python algos/ppo.py --resume {logger.run_dir}")
    config = compose(ppo, "CartPole-v1", num_seeds=2)
    sweep = sweeps.parse(("learning_rate=1e-3,3e-3", "clip_eps=0.1,0.2"), 8, 0, config.config)
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    rows = reports.sweep_report(sweep_dir, sweep, [np.tile([[-1171.77], [-1122.41]], (1, 10)) + c
                                                   for c in range(sweep.size)], None, {}, 2)
    out = capsys.readouterr().out
    assert not too_wide(out, columns), too_wide(out, columns)
    flat = " ".join(out.split())
    assert (f"note: the deterministic policy returns {returns[0, -1]:.2f} where the sampled one returns"
            f" {returns[0, -1] / 10:.2f};") in flat
    assert f"run folder: {logger.run_dir}" in flat
    assert f"\n  python algos/ppo.py --resume \\\n      {logger.run_dir}\n" in out  # pastes as one
    for row in rows:  # every cell of the table whole, on one line
        assert re.search(rf"(?<!\S){row['final_return_mean']:.2f}(?!\S)", out)
        low, high = row["final_return_iqm_ci95"]
        assert f"[{low:.2f}, {high:.2f}]" in out.replace(",\n", ", ")  # a pair may break after its comma
    assert f"best config: {sweep_dir / 'best_config.json'}" in flat
    assert "iqm range (2 seeds)" in flat and "learning_rate" in out and "clip_eps" in out


def test_a_command_in_the_help_breaks_before_a_flag_and_pastes_as_one():
    from scanrl.common.harness.console import command

    text = "python algos/grpo.py --pbt --sweep learning_rate=log:1e-5:1e-2 --pbt-population 8"
    shown = command(text, 80)
    assert shown.splitlines() == ["  python algos/grpo.py --pbt --sweep learning_rate=log:1e-5:1e-2 \\",
                                  "      --pbt-population 8"]
    assert " ".join(shown.replace("\\\n", " ").split()) == text  # one command once pasted
    assert command("python algos/ppo.py --resume runs/FOLDER", 80) == "  python algos/ppo.py --resume runs/FOLDER"
    path = "/tmp/" + "a-long-folder-name/" * 5
    assert command(f"python algos/ppo.py --resume {path}", 80).splitlines() == [
        "  python algos/ppo.py --resume \\", f"      {path}"]  # a path longer than a line: alone


def test_a_plain_progress_line_fits_100_columns(tmp_path):
    """What does not fit is left out: steps per seed, the spread over seeds, the other policy's
    evaluation, the evaluation's policy name, the ETA, the eval. `evals`: the sampled policy's
    (shown first as "eval sampled", the default --eval-policy), `mode`: the deterministic
    one's (shown as "deterministic")."""
    from scanrl.common.harness.logging import RunLogger

    def line(env, returns, evals, eta, done=1220, total=12207, mode=None, policy="sampled"):
        logger = RunLogger(algo="ppo", env=env, config={"eval_policy": policy}, num_seeds=3, steps_per_update=512,
                           num_updates=total, out_dir=str(tmp_path))
        table = {"episode_return": np.array(returns)}
        if evals is not None:
            table["eval_return_sampled"] = np.array(evals)
        if mode is not None:
            table["eval_return"] = np.array(mode)
        shown = logger._line(done, done * 512, 1.234e6, table, eta=eta)
        assert len(shown) <= 100 and shown.startswith(f"[ppo {env}] update {done}/{total}  "), shown
        return shown

    assert line("Catch-bsuite", [0.5], None, 25.0, 12, 97) == (
        "[ppo Catch-bsuite] update 12/97  6.14k steps/seed  1.23M env steps/s  return 0.5  ETA 0:25")
    assert line("Catch-bsuite", [0.5], [1.0], 25.0, 12, 97) == (
        "[ppo Catch-bsuite] update 12/97  1.23M env steps/s  return 0.5  eval sampled 1.0  ETA 0:25")
    assert line("CartPole-v1", [12.5, 500.0, 200.0], None, 25.0, 12, 97) == (
        "[ppo CartPole-v1] update 12/97  1.23M env steps/s  return 237.5 [12.5, 500.0]  ETA 0:25")
    assert line("CartPole-v1", [12.5, 500.0, 200.0], [500.0] * 3, 25.0, 12, 97) == (
        "[ppo CartPole-v1] update 12/97  1.23M env steps/s  return 237.5  eval sampled 500.0  ETA 0:25")
    assert line("CartPole-v1", [-1234.5, -1500.2, -800.1], [-1111.1] * 3, 3725.0).endswith(
        "update 1220/12207  1.23M env steps/s  return -1178  eval -1111  ETA 1:02:05")
    assert line("craftax/Craftax-Classic-Symbolic-v1", [-1234.5, -1500.2, -800.1], [-1111.1] * 3, 3725.0).endswith(
        "update 1220/12207  1.23M env steps/s  return -1178")
    assert line("Catch-bsuite", [0.5], [1.0], 25.0, 12, 97, mode=[-1.0]) == (
        "[ppo Catch-bsuite] update 12/97  1.23M env steps/s  return 0.5  eval sampled 1.0  ETA 0:25")
    assert line("Catch-bsuite", [0.5], [1.0], float("nan"), 1, 9, mode=[-1.0]) == (
        "[ppo Catch-bsuite] update 1/9  1.23M env steps/s  return 0.5  eval sampled 1.0 (deterministic -1.0)")
    assert line("Catch-bsuite", [0.5], [1.0], float("nan"), 1, 9, mode=[-1.0], policy="deterministic") == (
        "[ppo Catch-bsuite] update 1/9  1.23M env steps/s  return 0.5  eval deterministic -1.0 (sampled 1.0)")
    assert line("navix/Navix-DoorKey-5x5-v0", [0.98] * 3, [1.0] * 3, 25.0, 12, 97, mode=[0.05] * 3) == (
        "[ppo navix/Navix-DoorKey-5x5-v0] update 12/97  1.23M env steps/s  return 1.0  eval 1.0  ETA 0:25")


def test_the_shown_speed_is_the_average_since_training_began(tmp_path, capsys):
    """A run's last chunk may be partly masked (4 of 10 updates computed for nothing) and so
    slow: the line shows the average over the session, which ends at summary.json's figure,
    while progress.jsonl keeps each chunk's own rate. Resumed at update 20: both count only
    this process's updates."""
    from scanrl.common.harness.logging import RunLogger

    logger = RunLogger(algo="ppo", env="CartPole-v1", config={}, num_seeds=2, steps_per_update=500,
                       num_updates=34, out_dir=str(tmp_path), resume_update=20)
    chunk = lambda n: {"episode_return": np.ones((2, n))}  # noqa: E731
    logger.on_chunk(30, chunk(10), seconds=1.0)  # 10 updates x 500 steps x 2 seeds in 1 s
    logger.on_chunk(34, chunk(4), seconds=1.0)   # the last 4 updates cost a whole chunk
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[ppo")]
    assert "10k env steps/s" in lines[0] and "7k env steps/s" in lines[1], lines  # 14 x 1000 / 2 s
    records = [json.loads(r) for r in (logger.run_dir / "progress.jsonl").read_text().splitlines()]
    assert [r["env_steps_per_second"] for r in records[-2:]] == [10_000, 4_000]
    summary = logger.finish(metrics={"episode_return": np.ones((2, 34))}, params={"w": np.zeros((2, 1))},
                            total_timesteps=34 * 500, compile_seconds=1.0, run_seconds=2.0, wall_seconds=4.0)
    assert summary["env_steps_per_second"] == 7_000


@pytest.mark.slow
def test_params_and_metrics_do_not_depend_on_log_every(logged_every_update, tmp_path):
    """--log-every only sets the chunk size: 4 chunks of 1 update, 2 of 3 (the last masked),
    or one of 4 give the same files bit for bit."""
    _, reference = logged_every_update
    for log_every in ("3", "0"):
        _, run_dir = run_cli(tmp_path / log_every, "--log-every", log_every)
        for name in ("params.npz", "metrics.npz"):
            want, got = np.load(reference / name), np.load(run_dir / name)
            assert sorted(want.files) == sorted(got.files)
            for k in want.files:
                np.testing.assert_array_equal(got[k], want[k], err_msg=f"--log-every {log_every}: {name} {k}")
    progress = [json.loads(l) for l in (tmp_path / "3").iterdir().__next__().joinpath("progress.jsonl").read_text().splitlines()]
    assert [p["update"] for p in progress] == [3, 4]


@pytest.mark.slow
def test_a_progress_line_without_finished_episodes_shows_a_dash(python_process, tmp_path):
    """Pendulum's episodes last 200 steps: a 64-step first chunk has none."""
    proc = python_process([PPO, "--env", "Pendulum-v1", "--num-envs", "2", "--num-steps", "32", "--num-minibatches", "2",
                           "--total-timesteps", "256", "--log-every", "1", "--eval-every", "0", "--out-dir", str(tmp_path)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = next(l for l in proc.stdout.splitlines() if l.startswith("[ppo Pendulum-v1] update"))
    assert first.split("return")[1].split()[0] == "-", first


@pytest.mark.slow
def test_wandb_offline_writes_per_seed_keys_without_network(tmp_path):
    _, run_dir = run_cli(tmp_path, "--wandb-mode", "offline")
    runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    data = b"".join(p.read_bytes() for p in runs[0].glob("*.wandb"))
    assert b"seed_0/policy_loss" in data and b"seed_1/episode_return" in data and b"mean/policy_loss" in data


@pytest.mark.parametrize("width", [60, 80, 100, 140])
def test_the_bar_keeps_count_elapsed_eta_and_return_at_any_width(width):
    """rich cut the update count and the ETA ('950/9… updates 0:01:38 ETA 0:00:…') once the
    texts grew past the terminal: the bar is laid out for the width, and the label, the word
    "updates", the bar's length and the last texts give way instead. From 80 columns the bar
    keeps the return, env steps/s and the evaluation, which names its policy ("eval sampled")
    where the width allows and is "eval" where it does not."""
    from rich.console import Console

    from scanrl.common.harness import console

    screen = Console(width=width, force_terminal=True, file=open(os.devnull, "w"))
    bar = console.Bar("ppo navix/Navix-DoorKey-5x5-v0", 9765, 0, screen=screen)
    texts = ["return 0.98", "337k env steps/s", "eval sampled 1.0", "deterministic 0.1"]
    bar.update(950, 3723.0, texts, [t.replace("eval sampled ", "eval ") for t in texts])
    shot = Console(width=width, record=True, file=open(os.devnull, "w"))  # what the terminal shows, as text
    shot.print(bar._progress.get_renderable())
    bar.stop()
    (line,) = [l for l in shot.export_text().splitlines() if l.strip()]
    assert len(line) <= width and "950/9765" in line and "0:00:0" in line and "ETA 1:02:03  return 0.98" in line, line
    evaluated = "eval sampled 1.0" in line or "eval 1.0" in line
    assert ("337k env steps/s" in line) == evaluated == (width >= 80), line
    assert ("deterministic 0.1" in line) == (width >= 100), line
    assert ("eval sampled 1.0" in line) == (width >= 140), line


def test_what_xla_writes_during_the_compile_goes_to_the_log_not_the_terminal(capfd):
    """XLA's C++ writes to file descriptor 2 (its slow-compile alarm) are kept in `text` for
    the run's compile.log; Python's own stderr stays on the terminal."""
    from scanrl.common.harness import console

    with console.NativeStderr() as xla:
        os.write(2, b"E0000 slow_operation_alarm.cc:73] Very slow compile? If you want to file a bug\n")
    assert "Very slow compile" in xla.text
    assert "Very slow compile" not in capfd.readouterr().err
    os.write(2, b"after\n")  # fd 2 is the terminal's again
    assert capfd.readouterr().err == "after\n"


def test_resuming_another_algorithms_folder_names_it(cli_error, tmp_path):
    """impala.py --resume <a PPO run> said "unknown key 'gae_lambda' ... did you mean
    'vtrace_lambda'?": now one sentence naming the folder's algorithm and its command, from
    config.json's "algo", or for a folder written before it was recorded, summary.json's."""
    from scanrl.algos import impala

    run_dir = tmp_path / "ppo__CartPole-v1__20260101-000000"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"algo": "ppo", **run.config_dict(compose(ppo))}))
    code, err = cli_error(impala.main, ["--resume", str(run_dir)])
    assert code == 2 and err == (f"error: --resume {run_dir} is a ppo run, not a impala one: continue it with "
                                 f"`python -m scanrl.algos.ppo --resume {run_dir}`."), err
    code, err = cli_error(impala.main, ["--config", str(run_dir / "config.json")])
    assert code == 2 and "is the config of a ppo run, not a impala one: train it with `python -m scanrl.algos.ppo" in err
    old = tmp_path / "older"  # no "algo" in config.json: summary.json says it
    old.mkdir()
    (old / "config.json").write_text(json.dumps(run.config_dict(compose(ppo))))
    (old / "summary.json").write_text(json.dumps({"algo": "ppo"}))
    code, err = cli_error(impala.main, ["--resume", str(old)])
    assert code == 2 and f"--resume {old} is a ppo run" in err


def test_resuming_a_folder_that_does_not_exist_says_so(cli_error, tmp_path):
    """--resume of a missing folder is one sentence saying so, before its name (an algorithm's
    `<algo>__<env>__<time>`) is read as another algorithm's run."""
    from scanrl.algos import impala

    named = tmp_path / "ppo__CartPole-v1__20260101-000000"
    for main, missing in [(ppo.main, tmp_path / "nope"), (impala.main, named)]:
        code, err = cli_error(main, ["--resume", str(missing)])
        assert code == 2 and err == f"error: --resume {missing}: that folder does not exist.", err


@pytest.mark.parametrize("args, message", [
    (["--env-params", "max_steps_in_episode", "-1"],
     "--env-params max_steps_in_episode is a time limit and must be at least 1 step, got -1."),
    (["--eval-env-params", "length", "0"], "--eval-env-params length must be above 0, got 0.0."),
    (["--env-params", "masspole", "nan"], "--env-params masspole must be a finite number, got nan."),
])
def test_env_parameters_outside_their_range_are_refused_before_compiling(cli_error, args, message):
    """A negative time limit compiled and ended an episode on every step."""
    code, err = cli_error(ppo.main, args)
    assert code == 2 and err == f"error: {message}", err


def test_a_suite_without_a_name_is_refused_before_the_suite_is_imported(cli_error, monkeypatch):
    """`--env brax/` spent Brax's whole import (106 s under load) before saying the name is empty."""
    from scanrl.common import suites

    def imported(env_id):
        raise AssertionError(f"the suite of {env_id} was imported")

    monkeypatch.setattr(suites, "adapter", imported)
    code, err = cli_error(ppo.main, ["--env", "brax/"])
    assert code == 2 and err == ("error: --env 'brax/' names no environment: give one after the slash, e.g. --env "
                                 "brax/ant (--env brax/x lists brax's names)."), err


@pytest.mark.slow
def test_brax_lists_no_test_env():
    """Brax registers `fast`, an env for its own tests with no physics to learn."""
    pytest.importorskip("brax")
    from scanrl.common.suites import brax

    names = brax.NAMES()
    assert "fast" not in names and "ant" in names
