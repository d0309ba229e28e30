"""`scanrl-bench` (common/harness/bench.py): a suite file's mistakes are one sentence and exit
2 before anything runs; a suite writes its results file and report; an interrupted suite
resumes without re-running its finished cells. Tiny PPO runs, no learning."""

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import HANG_GUARD, REPO, held, once_per_run, unwrapped
from test_lifecycle import assert_same_run, signal_after_checkpoint

from scanrl import algos
from scanrl.common.harness import bench, stats

# Every chunk one update and a checkpoint every 2, so an interrupt finds the Catch cell mid-run.
FLAGS = "{num-envs: 4, num-steps: 32, log-every: 1, checkpoint-every: 2, eval-every: 50, eval-episodes: 4}"
SUITE = f"""
seeds: 2
flags: {FLAGS}
cells:
  - algos: [ppo]
    envs: [CartPole-v1]
    total_timesteps: 1024
  - algos: ppo
    envs: Catch-bsuite
    total_timesteps: 12800
"""
REPS = ["--reps", "200"]


def write_suite(folder: Path, text: str, name: str = "suite.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def files_of(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under `folder`: (modification time in ns, content)."""
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """The two-cell suite, run once per test run: (suite file, its folder)."""
    def compute():
        folder = tmp_path_factory.mktemp("bench")
        path = write_suite(folder, SUITE)
        bench.main([str(path), "--out-dir", str(folder / "out"), *REPS], algos)
        return path, folder / "out"

    return once_per_run(tmp_path_factory, "bench_suite", compute)


def run_dir(out: Path, cell: str) -> Path:
    (found,) = bench.run_folders(out / "runs" / cell)
    return found


@pytest.mark.slow
def test_a_suite_writes_results_that_round_trip_and_a_report(suite):
    path, out = suite
    results = bench.load_results(out / "results.json")
    assert set(results["gymnax"]) == {"CartPole-v1", "Catch-bsuite"}
    evaluated = {"CartPole-v1": [8], "Catch-bsuite": [50, 100]}  # --eval-every 50, and after the last update
    for env, cell in (("CartPole-v1", "ppo__CartPole-v1"), ("Catch-bsuite", "ppo__Catch-bsuite")):
        summary = json.loads((run_dir(out, cell) / "summary.json").read_text())
        assert summary["stopped_by"] == "budget" and summary["num_seeds"] == 2
        last_eval = np.load(run_dir(out, cell) / "metrics.npz")["eval_return"][:, -1]
        runs = results["gymnax"][env]["ppo"]
        assert list(runs) == ["seed_0", "seed_1"]
        assert [r["absolute_metrics"]["return"] for r in runs.values()] == [[v] for v in summary["final_return_per_seed"]]
        np.testing.assert_allclose([r["absolute_metrics"]["eval_return"][0] for r in runs.values()], last_eval)
        steps = [v for k, v in runs["seed_0"].items() if k.startswith("step_")]  # the curve: one point per evaluation
        assert [v["step_count"] for v in steps] == [128 * u for u in evaluated[env]]
        assert steps[-1]["eval_return"] == runs["seed_0"]["absolute_metrics"]["eval_return"]
    # The file is what the finished runs give, written and read back unchanged.
    assert results == stats.results_from_runs(bench.collect(bench.read_suite(path, str(out), algos)))
    scores, tasks = stats.score_dict(results)
    assert tasks == {"ppo": ["CartPole-v1", "Catch-bsuite"]} and scores["ppo"].shape == (2, 2)  # [runs, tasks]

    report = json.loads((out / "report.json").read_text())
    assert [(c["algo"], c["env"], c["seeds"]) for c in report["cells"]] == [("ppo", "CartPole-v1", 2),
                                                                          ("ppo", "Catch-bsuite", 2)]
    cartpole = report["cells"][0]
    expected = stats.iqm_interval(np.array(json.loads((run_dir(out, "ppo__CartPole-v1") / "summary.json").read_text())
                                           ["final_return_per_seed"]), reps=200)
    assert cartpole["iqm"] == expected.as_list()
    assert set(report["aggregates"]["ppo"]) == set(stats.AGGREGATES)
    markdown = (out / "report.md").read_text()
    assert "| ppo | CartPole-v1 | 2 | 1,024 |" in markdown and "| ppo | Catch-bsuite | 2 | 12,800 |" in markdown
    assert "## Aggregates (normalised scores)" in markdown and "measured: `python benchmarks/reference/" in markdown
    for picture in ("aggregates.png", "profiles.png"):
        assert (out / picture).stat().st_size > 5000


@pytest.mark.slow
def test_rescore_writes_the_report_again_from_its_two_files_with_the_reference_points_of_now(suite, tmp_path,
                                                                                              monkeypatch, capsys):
    """--rescore needs only results.json and report.json: the same IQMs and per-cell columns, and
    the normalised scores of the reference points as they are now (here CartPole's is taken away:
    its normalised column empties, Catch's stays, and the aggregates are over Catch alone)."""
    path, out = suite
    again = tmp_path / "again"
    again.mkdir()
    for name in ("results.json", "report.json"):
        shutil.copy(out / name, again / name)
    before = json.loads((out / "report.json").read_text())
    monkeypatch.delitem(stats.REFERENCE_POINTS, "CartPole-v1")
    bench.main([str(path), "--out-dir", str(again), "--rescore", *REPS], algos)
    after = json.loads((again / "report.json").read_text())
    for old, new in zip(before["cells"], after["cells"], strict=True):
        assert {k: v for k, v in new.items() if k != "normalised_iqm"} == {
            k: v for k, v in old.items() if k != "normalised_iqm"}
    assert after["cells"][0]["normalised_iqm"] is None and before["cells"][0]["normalised_iqm"] is not None
    assert after["cells"][1]["normalised_iqm"] == before["cells"][1]["normalised_iqm"]
    assert after["aggregate_envs"] == {"ppo": ["Catch-bsuite"]}
    assert "| ppo | CartPole-v1 | 2 | 1,024 |" in (again / "report.md").read_text()
    with pytest.raises(SystemExit) as exit_info:
        bench.main([str(path), "--out-dir", str(tmp_path / "empty"), "--rescore"], algos)
    assert exit_info.value.code == 2 and "--rescore reads " in capsys.readouterr().err
    assert not (tmp_path / "empty").exists()


@pytest.mark.slow
def test_an_interrupted_suite_resumes_without_rerunning_finished_cells(suite, tmp_path):
    """The finished suite copied, its Catch cell removed: run again and interrupted (Ctrl-C)
    once that cell checkpointed, then run once more: the CartPole cell is never touched, the
    Catch cell resumes from its checkpoint and ends bit for bit as in the uninterrupted suite."""
    path, original = suite
    out = tmp_path / "out"
    shutil.copytree(original, out)  # copy2: modification times kept
    shutil.rmtree(out / "runs" / "ppo__Catch-bsuite")
    finished = files_of(out / "runs" / "ppo__CartPole-v1")

    proc = subprocess.Popen(held(0, scanrl_bench(), path, "--out-dir", out, *REPS), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = signal_after_checkpoint(proc, out / "runs" / "ppo__Catch-bsuite", signal.SIGINT)
    assert proc.returncode == 130, stderr[-3000:]
    assert "cell 1/2: ppo on CartPole-v1: finished, skipped" in stdout
    assert f"Suite interrupted in cell 2/2 (ppo on Catch-bsuite): continue with scanrl-bench {path}" in unwrapped(stdout)
    interrupted = run_dir(out, "ppo__Catch-bsuite")
    assert json.loads((interrupted / "summary.json").read_text())["stopped_by"] == "interrupt"

    result = subprocess.run([scanrl_bench(), str(path), "--out-dir", str(out),
                             *REPS], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cell 1/2: ppo on CartPole-v1: finished, skipped" in result.stdout
    assert f"cell 2/2: ppo on Catch-bsuite: resuming {interrupted}" in unwrapped(result.stdout)
    assert "bootstrapping… IQMs of 2 cells, then the aggregates, 200 resamples per interval\n" in result.stdout
    assert "bootstrapped 3 steps in " in result.stdout  # not a terminal: plain lines, no bar
    assert files_of(out / "runs" / "ppo__CartPole-v1") == finished  # not rewritten
    assert_same_run(run_dir(original, "ppo__Catch-bsuite"), interrupted)
    assert json.loads((interrupted / "summary.json").read_text())["stopped_by"] == "budget"
    assert bench.load_results(out / "results.json") == bench.load_results(original / "results.json")


def test_a_cell_resumes_from_its_checkpoint_or_starts_again_without_one(tmp_path, monkeypatch):
    path = write_suite(tmp_path, SUITE)
    suite = bench.read_suite(path, str(tmp_path / "out"), algos)
    started = suite.folder(suite.cells[0]) / "ppo__CartPole-v1__20260101-000000"  # stopped before a checkpoint
    (started / "checkpoints").mkdir(parents=True)
    (started / "config.json").write_text("{}")
    stopped = suite.folder(suite.cells[1]) / "ppo__Catch-bsuite__20260101-000000"  # stopped after one
    (stopped / "checkpoints").mkdir(parents=True)
    (stopped / "config.json").write_text("{}")
    (stopped / "checkpoints" / "update_2.npz").write_bytes(b"")
    calls = []
    monkeypatch.setattr(bench, "run_cell", lambda cell, argv: calls.append(argv) or 0)
    assert bench.run_suite(suite) == 0
    assert not started.exists() and calls[0][:2] == ["--env", "CartPole-v1"]
    assert calls[1][:2] == ["--resume", str(stopped)] and stopped.exists()


@pytest.mark.parametrize("text, message", [
    ("cells: [", "is not valid YAML"),
    ("seeds: 2\n", "cells must be a non-empty list of groups"),
    ("sedes: 2\ncells: []\n", "unknown key 'sedes'; a suite has cells, flags, metric, out_dir, reference_points, seeds."),
    ("metric: best\ncells: [{algos: [ppo], envs: [CartPole-v1]}]", "metric must be return or eval_return, got 'best'."),
    ("cells: [{algos: [ppx], envs: [CartPole-v1]}]", "cells[0].algos: unknown algorithm 'ppx'; scanrl has grpo, impala"),
    ("cells: [{algos: [ppo], envs: [CartPole-v1], total_timesteps: lots}]",
     "cells[0].total_timesteps must be a whole number of at least 1 (such as 500000 or 5e5), got 'lots'."),
    ("cells: [{algos: [ppo], envs: [CartPole-v1], flags: {num-seeds: 4}}]",
     "cells[0].flags: --num-seeds is set by the suite's `seeds:` key, got 4."),
    ("cells: [{algos: [ppo], envs: [CartPole-v1]}, {algos: [ppo], envs: CartPole-v1}]",
     "cells[1]: ppo on CartPole-v1 is already in cells[0]; each (algorithm, environment) appears once."),
    ("cells: [{algos: [ppo], envs: [CartPol-v1]}]",
     "cells[0] (ppo on CartPol-v1): --env 'CartPol-v1' is not a gymnax environment. Did you mean 'CartPole-v1'?"),
    ("cells: [{algos: [ppo, sac], envs: [CartPole-v1]}]",
     "cells[0] (sac on CartPole-v1): SAC needs continuous (Box) actions and --env CartPole-v1 has discrete ones"),
    ("cells: [{algos: [ppo], envs: [CartPole-v1], flags: {lr: 0.001}}]",
     "cells[0] (ppo on CartPole-v1): unknown flag --lr; did you mean --learning-rate?"),
    ("cells: [{algos: [ppo], envs: [CartPole-v1], flags: {gamma: 1.5}}]",
     "cells[0] (ppo on CartPole-v1): --gamma must lie in (0, 1], got 1.5."),
])
def test_a_bad_suite_is_one_sentence_and_exit_2_before_anything_runs(tmp_path, capsys, text, message):
    path = write_suite(tmp_path, text)
    with pytest.raises(SystemExit) as exit_info:
        bench.main([str(path), "--out-dir", str(tmp_path / "out")], algos)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"error: {path}"), err
    assert message in err, err
    assert not (tmp_path / "out").exists()


def scanrl_bench() -> str:
    """The installed console script: beside the interpreter (a venv used without activating
    it), else on PATH."""
    script = Path(sys.executable).parent / "scanrl-bench"
    path = str(script) if script.is_file() else shutil.which("scanrl-bench")
    assert path, f"scanrl-bench is not installed beside {sys.executable} (pip install -e .)"
    return path


@pytest.mark.slow
def test_scanrl_bench_is_installed_as_a_console_script():
    result = subprocess.run([scanrl_bench(), "--help"], capture_output=True, text=True, timeout=HANG_GUARD)
    assert result.returncode == 0 and "usage: scanrl-bench" in result.stdout and "--dry-run" in result.stdout


# --- the benchmarks page and its raw data -------------------------------------------------------
def benchmark_paths(text: str) -> list[str]:
    """Every path under benchmarks/ a Markdown text names, as written (a folder keeps its /)."""
    import re

    return re.findall(r"benchmarks/[A-Za-z0-9_./-]*[A-Za-z0-9_/]", text)


def test_every_side_by_side_row_of_the_results_names_raw_data_that_exists():
    """benchmarks/RESULTS.md's side-by-side table (section 1): each row has a row of the same
    number in the sittings table after it, whose raw-data column names at least one path under
    benchmarks/reference*, and every path that column names exists."""
    import re

    text = (REPO / "benchmarks" / "RESULTS.md").read_text()
    section = text[text.index("## 1."):text.index("## 2.")]
    rows, sittings = section.split("**Sittings, versions, raw data and commands.**")
    cells = lambda table: {int(c[1]): c for c in (  # noqa: E731
        [x.strip() for x in line.split("|")] for line in table.splitlines() if re.match(r"\| \d+ \|", line))}
    numbered, raw = cells(rows), cells(sittings)
    assert len(numbered) >= 20 and sorted(numbered) == sorted(raw), (sorted(numbered), sorted(raw))
    for number, row in raw.items():
        named = re.findall(r"`(benchmarks/reference[^`]*)`", row[4])
        assert named, f"row {number} names no raw data: {row[4]!r}"
        assert all((REPO / path).exists() for path in named), (number, named)


def test_every_side_by_side_cell_json_of_the_results_names_its_scanrl_commit():
    """Every JSON that RESULTS.md section 1's sittings table names (directly, or one level inside
    a named folder) records the scanrl commit that made the cell (`scanrl_commit`, as
    benchmarks/sidebyside.py's scanrl_commit writes it), or null with the reason
    (`scanrl_commit_missing`) where no record of the sitting names one, and then its row in
    the sittings table says "scanrl commit not recorded"."""
    import re

    text = (REPO / "benchmarks" / "RESULTS.md").read_text()
    sittings = text[text.index("## 1."):text.index("## 2.")].split("**Sittings, versions, raw data and commands.**")[1]
    checked, problems = 0, []
    for line in sittings.splitlines():
        if not re.match(r"\| \d+ \|", line):
            continue
        row = [x.strip() for x in line.split("|")]
        for named in re.findall(r"`(benchmarks/reference[^`]*)`", row[4]):
            path = REPO / named
            for cell in [path] if path.is_file() else sorted(path.glob("*.json")):
                if cell.suffix != ".json":
                    continue
                checked += 1
                data = json.loads(cell.read_text())
                commit = data.get("scanrl_commit") if isinstance(data, dict) else None
                if isinstance(commit, str) and re.fullmatch(r"[0-9a-f]{7,40}", commit):
                    continue
                if not isinstance(data, dict) or "scanrl_commit" not in data or commit is not None:
                    problems.append(f"row {row[1]}: {named} {cell.name} names no scanrl commit")
                elif not data.get("scanrl_commit_missing"):
                    problems.append(f"row {row[1]}: {cell.name} has a null scanrl commit and no reason")
                elif "scanrl commit not recorded" not in line:
                    problems.append(f"row {row[1]}: {cell.name} has no scanrl commit and the row does not say so")
    assert checked >= 26 and not problems, (checked, problems)


def test_every_table_of_the_benchmarks_page_names_raw_data_that_exists():
    """docs/benchmarks.md names only files and folders that exist under benchmarks/, and each of
    its tables names, between the table before it and the table after it, the raw data its
    figures come from (a folder or file in benchmarks/reference*, or a JSON file), with no
    table exempt."""
    text = (REPO / "docs" / "benchmarks.md").read_text()
    named = benchmark_paths(text)
    assert len(set(named)) > 20, named
    assert not [p for p in named if not (REPO / p).exists()], "named but missing"
    is_raw = lambda p: p.startswith("benchmarks/reference") or p.endswith((".json", ".jsonl"))  # noqa: E731
    tables = 0
    for heading, header, context in docs_tables(text):
        tables += 1
        assert any(map(is_raw, benchmark_paths(context))), \
            f"the table under {heading!r} headed {header[:60]!r} names no raw data"
    assert tables >= 15, tables


# The docs' tables that hold no measurement, by their header row as written, each with why. A
# table whose header is not here must name its raw data (test below), so a new table of figures
# cannot slip through under a new wording; a new table of settings needs one line here.
TABLES_WITHOUT_MEASUREMENTS = {
    "| flag | default | meaning |": "an algorithm's or tool's flags and their defaults: settings",
    "| flag | default | what it does |": "PBT's flags and their defaults: settings",
    "| flag | meaning |": "scanrl-plot's flags",
    "| learner | command | what it is |": "the multi-agent learners: commands",
    "| `--env jaxmarl/...` | agents | ends |": "JaxMARL's environments: names and how they end",
    "| preset | when | settings |": "an algorithm's presets: the values it starts from",
    "| preset | when | settings (source) |": "PQN's presets, each value with its published source",
    "| name | what it is |": "the Python API's registry: names",
    "| field | what it is |": "the fields of an algorithm's pieces: names",
    "| file | lines | its one job |": "the source files; their line counts are the files' own, "
                                      "checked against them by tests/test_loop.py",
    "| script | measures |": "the benchmark scripts and what each measures: a list of files",
    "| file | content |": "the files of a PBT run folder",
    "| metric | what it is | where it comes from |": "definitions of the scores",
    "| statistic | definition | rliable |": "definitions of the statistics",
    "| algorithm | envs | source | published | `cpu` form |":
        "the suites' published configurations (environments, budgets), each with its source",
    "| `--recipe` | what applies |": "the recipe forms: settings",
    "| layer | its modules | may import |": "the harness's layers: module names, checked against the "
                                           "imports by tests/test_loop.py",
}


def docs_tables(text: str):
    """Each Markdown table of a page: (its section's heading, its header row, the text between
    the table before it and the table after it, in the same section, itself included)."""
    import re

    for section in re.split(r"\n(?=#{1,3} )", text):
        lines = section.splitlines()
        starts = [i for i in range(1, len(lines))
                  if re.match(r"\|\s*:?-", lines[i]) and lines[i - 1].startswith("|")]
        ends = []
        for start in starts:
            end = start
            while end + 1 < len(lines) and lines[end + 1].startswith("|"):
                end += 1
            ends.append(end)
        for k, start in enumerate(starts):
            before = ends[k - 1] + 1 if k else 0
            after = starts[k + 1] - 1 if k + 1 < len(starts) else len(lines)
            yield lines[0], lines[start - 1].strip(), "\n".join(lines[before:after])


def test_every_table_of_every_docs_page_names_raw_data_that_exists():
    """Every page under docs/ (docs/*.md and docs/algorithms/*.md) names only paths under
    benchmarks/ that exist, and each of its tables that holds measured figures names, between
    the table before it and the table after it in its section, the raw data they come from: a
    folder or file under benchmarks/reference*, or a .json/.jsonl file.

    Which tables hold measurements is decided by exemption, not by guessing from the wording:
    every table must name raw data unless its header row is in TABLES_WITHOUT_MEASUREMENTS,
    where each entry says why it holds no measurement (flags, presets, API names, definitions,
    published configurations, line counts that another test checks). A word list ("IQM",
    "wall", ...) would let a table of figures under a plain header through (the MinAtar
    conv-against-MLP table had none of those words); the list fails closed instead. Every entry
    must still match a table somewhere, so a stale one is removed."""
    pages = sorted((REPO / "docs").glob("*.md")) + sorted((REPO / "docs" / "algorithms").glob("*.md"))
    assert len(pages) >= 15, pages
    is_raw = lambda p: p.startswith("benchmarks/reference") or p.endswith((".json", ".jsonl"))  # noqa: E731
    missing, unnamed, used, measured = [], [], set(), 0
    for page in pages:
        text, name = page.read_text(), page.relative_to(REPO).as_posix()
        missing += [(name, p) for p in benchmark_paths(text) if not (REPO / p).exists()]
        for heading, header, context in docs_tables(text):
            if header in TABLES_WITHOUT_MEASUREMENTS:
                used.add(header)
                continue
            measured += 1
            if not any(map(is_raw, benchmark_paths(context))):
                unnamed.append(f"{name}: the table under {heading!r} headed {header[:60]!r}")
    assert not missing, f"named but missing: {missing}"
    assert not unnamed, "tables of figures that name no raw data:\n" + "\n".join(unnamed)
    assert used == set(TABLES_WITHOUT_MEASUREMENTS), set(TABLES_WITHOUT_MEASUREMENTS) - used
    assert measured >= 20, measured


def test_the_pqn_side_by_side_scores_each_envs_first_episode_and_also_the_peers_window_mean(monkeypatch):
    """benchmarks/purejaxql_pqn.py's two estimators of a greedy test: env 0 ends a 5 at step 1
    and a 1 at step 3, env 1 a 10 at step 2, env 2 nothing: the first-episode estimator (scanrl's)
    is (5 + 10) / 2, purejaxql's window mean (5 + 1 + 10) / 3, over 2 envs and 3 episodes."""
    import importlib.util

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # its sidebyside import, as when run as a script
    spec = importlib.util.spec_from_file_location("purejaxql_pqn", REPO / "benchmarks" / "purejaxql_pqn.py")
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)  # imports no JAX at module level
    ended = np.zeros((4, 3), bool)
    returns = np.zeros((4, 3))
    ended[1, 0], returns[1, 0] = True, 5.0
    ended[3, 0], returns[3, 0] = True, 1.0
    ended[2, 1], returns[2, 1] = True, 10.0
    first, window, n_first, n_window = driver.both_estimators(ended, returns, np)
    assert (first, n_first, n_window) == (7.5, 2, 3)
    assert np.isclose(window, 16 / 3)


def test_the_committed_transformer_xl_curves_are_read_with_numpy_types_only(tmp_path, monkeypatch):
    """benchmarks/trxl_curves.py's loader: an `np.save`d dict of jax and numpy arrays comes back
    as numpy arrays; a pickle that names anything else (here a pathlib path) is refused, never
    built. And its score at a step count uses the committed updates up to that count only."""
    import importlib.util
    import io
    import pickle

    import jax.numpy as jnp

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location("trxl_curves", REPO / "benchmarks" / "trxl_curves.py")
    curves = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(curves)

    def saved(value) -> bytes:
        f = io.BytesIO()
        holder = np.empty((), object)
        holder[()] = value
        np.save(f, holder)
        return f.getvalue()

    got = curves.load_metrics(saved({"r": jnp.arange(3.0), "n": np.array([1, 2])}))
    assert type(got["r"]) is np.ndarray and got["r"].tolist() == [0.0, 1.0, 2.0]
    assert got["n"].tolist() == [1, 2]
    with pytest.raises(pickle.UnpicklingError, match="pathlib"):
        curves.load_metrics(saved({"r": tmp_path}))

    committed = REPO / "benchmarks" / "reference" / "trxl_ppo" / "committed_curves.npz"
    returns = np.load(committed)["returned_episode_returns"]
    assert returns.shape == (5, 7629)
    assert np.allclose(curves.committed_at(committed, 2 * 131072 - 1), returns[:, 0])
    assert np.allclose(curves.committed_at(committed, 20 * 131072), returns[:, 18:20].mean(1))


def test_each_peer_side_with_per_update_returns_is_scored_by_scanrls_estimator(monkeypatch):
    """Both sides of a cell count alike: where a peer's side keeps its per-update training
    returns (Craftax_Baselines' `curves`, the Transformer-XL PPO's `per_update`), the score its
    JSON publishes is scanrl's own (stats.final_returns, the last ceil(10%) of updates, updates
    where none ended skipped), as `sidebyside.final_return` computes it."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import sidebyside

    # the estimator itself: 13 of 128 updates (not 128 // 10 = 12), a None update skipped
    series = [0.0] * 115 + [None] + [1.0] * 12
    assert sidebyside.final_return(series) == 1.0
    assert sidebyside.final_return([0.0] * 115 + [3.0] * 13) == 3.0
    cells = 0
    for path in sorted((REPO / "benchmarks").glob("reference*/**/*.json")):
        cell = json.loads(path.read_text())
        peer = (cell.get("baseline") or cell.get("purejaxql")) if isinstance(cell, dict) else None
        curves = isinstance(peer, dict) and (peer.get("curves") or peer.get("per_update"))
        if not curves:
            continue
        cells += 1
        assert np.allclose(peer["training_scores"], [sidebyside.final_return(c) for c in curves]), path
    assert cells >= 10  # the Craftax cells (GPU and CPU), the Transformer-XL's and recurrent PQN's


def test_sittings_alternate_their_sides_and_the_table_gives_median_walls_and_ratios(tmp_path,
                                                                                  monkeypatch):
    """benchmarks/sidebyside.py's sittings (trxl_ppo.py, pqn_rnn_craftax.py): sitting k runs the
    sides in their order on even k and reversed on odd k, writes sitting{k+1}.json, and a cell
    stopped between sittings goes on from the next; the table gives each side's median [min,
    max] wall and the wall ratios' median [min, max], and says whether the scores repeat."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import sidebyside

    ran, walls = [], iter([100.0, 400.0, 500.0, 120.0, 90.0, 300.0])

    def side(name, rate):
        def run():
            ran.append(name)
            return {"wall": next(walls), "env_steps": 1000, "run_steps_per_second": rate,
                    "training_scores": [1.0, 2.0, 3.0]}
        return run

    sides = {"scanrl": side("scanrl", 40.0), "peer": side("peer", 20.0)}
    sidebyside.run_sittings(tmp_path, 2, lambda k: sidebyside.write_sitting(
        tmp_path, k, {"env": "E"}, sides))
    sidebyside.run_sittings(tmp_path, 3, lambda k: sidebyside.write_sitting(
        tmp_path, k, {"env": "E"}, sides))  # sittings 1-2 written: only the third runs
    assert ran == ["scanrl", "peer", "peer", "scanrl", "scanrl", "peer"]
    cells = [json.loads((tmp_path / f"sitting{k}.json").read_text()) for k in (1, 2, 3)]
    assert [c["order"] for c in cells] == [["scanrl", "peer"], ["peer", "scanrl"],
                                          ["scanrl", "peer"]]
    table = sidebyside.sittings_table(cells, "peer", ("ours", "theirs", "the peer"))
    # scanrl's walls 100, 120, 90 against 400, 500, 300: ratios 0.25, 0.24, 0.30
    assert "| ours | 1,000 | " in table and "| 100 [90, 120] | 40 |" in table
    assert "| 400 [300, 500] | 20 |" in table
    assert "wall ratio scanrl / peer 0.25x [0.24, 0.30]" in table
    assert "left out 0.50x [0.50, 0.50]" in table and "identical in every sitting" in table


def test_presets_sittings_keep_finished_runs_and_refuse_an_unfinished_one(tmp_path, monkeypatch):
    """benchmarks/pqn_presets.py run again with the same folder and more sittings starts only
    the sides not yet run, in the sitting's order (PQN first in odd sittings), keeps finished
    runs and stops at a run folder without summary.json."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("pqn_presets",
                                                  REPO / "benchmarks" / "pqn_presets.py")
    presets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(presets)
    started = []

    def fake_run(cmd, **kwargs):  # a side's process: a run folder with its summary
        algo, out = Path(cmd[1]).stem, Path(cmd[cmd.index("--out-dir") + 1])
        started.append((out.parent.name, algo))
        (out / f"{algo}__run").mkdir()
        (out / f"{algo}__run" / "summary.json").write_text("{}")

    monkeypatch.setattr(presets.subprocess, "run", fake_run)
    monkeypatch.setattr(presets, "table", lambda out: None)
    for sittings in (2, 3):
        monkeypatch.setattr(sys, "argv", ["pqn_presets.py", "--sittings", str(sittings),
                                          "--out", str(tmp_path)])
        presets.main()
    assert started == [("sitting1", "pqn"), ("sitting1", "ppo"), ("sitting2", "ppo"),
                       ("sitting2", "pqn"), ("sitting3", "pqn"), ("sitting3", "ppo")]
    (tmp_path / "sitting4" / "ppo" / "ppo__run").mkdir(parents=True)  # a run cut off
    monkeypatch.setattr(sys, "argv", ["pqn_presets.py", "--sittings", "4", "--out",
                                      str(tmp_path)])
    with pytest.raises(SystemExit, match="holds an unfinished run"):
        presets.main()
    assert len(started) == 6  # sitting 4 starts with PPO, whose folder holds the cut-off run


def test_a_wall_over_sittings_is_the_median_ratio_with_its_range_for_every_kind_of_cell(tmp_path,
                                                                                       monkeypatch):
    """benchmarks/wall_sittings.py reads the cells of navix_ppo.py, brax_trainers.py and
    jumanji_a2c.py alike: each run's ratio of the two walls, the median ratio and its [min, max],
    the sides' order, and whether the runs' stamps follow one another."""
    import importlib.util

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location("wall_sittings", REPO / "benchmarks" / "wall_sittings.py")
    sittings = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sittings)
    walls = [(10.0, 20.0), (30.0, 20.0), (12.0, 10.0)]  # ratios 0.5, 1.5, 1.2
    for peer, extra in (("brax", {}), ("jumanji", {}), ("navix", {"peer": "navix"})):
        folder = tmp_path / peer
        for i, (ours, theirs) in enumerate(walls, 1):
            run = folder / f"run{i}"
            run.mkdir(parents=True)
            cell = {"started": f"2026-12-04 09:0{2 * i}", "finished": f"2026-12-04 09:0{2 * i + 1}",
                    "scanrl": {"wall": ours}, peer: {"wall": theirs}, **extra}
            (run / "cell.json").write_text(json.dumps(cell))
        got = sittings.summary(folder)
        assert got["peer"] == peer and got["in_order"] and got["runs"] == ["run1", "run2", "run3"]
        assert np.allclose(got["ratios"], [0.5, 1.5, 1.2])
        assert got["order"] == {sittings.ORDER[peer]}
    (tmp_path / "brax" / "run1" / "cell.json").write_text(json.dumps(
        {"started": "2026-12-04 09:05", "finished": "2026-12-04 09:09", "scanrl": {"wall": 1.0},
         "brax": {"wall": 1.0}}))  # run1 now ends after run2 starts
    assert not sittings.summary(tmp_path / "brax")["in_order"]


def test_the_pqn_table_over_sittings_takes_the_median_wall_ratio_and_the_last_sittings_scores(
        tmp_path, capsys, monkeypatch):
    """benchmarks/pqn_table.py with three sitting folders: the wall ratio is the median [min, max]
    of the sittings' ratios (scanrl's summary.json wall against the peer's imports + compile +
    run), the scores the last sitting's, and a sitting whose returns differ is named."""
    import importlib.util

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location("pqn_table", REPO / "benchmarks" / "pqn_table.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    outs = []
    for i, (ours, theirs, last) in enumerate([(100.0, 200.0, 9.0), (300.0, 200.0, 9.0),
                                              (240.0, 200.0, 8.0)], 1):  # 0.5, 1.5, 1.2
        out = tmp_path / f"sitting{i}"
        run = out / "scanrl" / "pqn__CartPole-v1__1"
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"env": "CartPole-v1"}))
        (run / "summary.json").write_text(json.dumps(
            {"wall_seconds": ours, "compile_seconds": 5.0, "total_timesteps": 1000}))
        np.savez(run / "metrics.npz", eval_return=np.array([[0.0, last]] * 5))
        (out / "purejaxql_cartpole.json").write_text(json.dumps(
            {"final_test_return_per_seed": [7.0] * 5, "first_episode_return_per_seed": [7.0] * 5,
             "wall_import_s": 10.0, "wall_compile_s": 40.0, "wall_run_s": theirs - 50.0,
             "env_steps_per_seed": 1000}))
        outs.append(out)
    table.main(outs)
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if line.startswith("| CartPole-v1"))
    assert "1.20x [0.50, 1.50]" in row and "240 / 200" in row and "| 8.0 [8.0, 8.0] |" in row
    assert printed.count("differ from the last sitting's") == 2  # sittings 1 and 2: 9.0, not 8.0
