"""Two processes on JAX's distributed runtime train like one process with two devices.

Each process has one CPU device and talks gloo over a local port; process 0 prints and
writes the run folder, which must cover every seed. JAX's processes ignore SIGTERM, so a
hung pair is killed with SIGKILL.
"""

import json
import os
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

from conftest import HANG_GUARD, REPO, held, wait_until

COMMON = ["--total-timesteps", "1536", "--num-steps", "32", "--eval-every", "2", "--log-every", "4"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    return {**env, **extra}


def run_two_processes(out_dir, args, timeout=HANG_GUARD, script="algos/ppo.py"):
    """Launch process 0 and 1 of one run; returns [(returncode, stdout, stderr)] * 2."""
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = clean_env(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES="2",
                        JAX_PROCESS_ID=str(rank))
        procs.append(subprocess.Popen(
            [sys.executable, script, "--distributed", "--out-dir", str(out_dir / f"p{rank}"), *args],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            results.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
    return results


def run_one_process(out_dir, args, script="algos/ppo.py"):
    proc = subprocess.run(
        [sys.executable, script, "--out-dir", str(out_dir), *args], cwd=REPO, capture_output=True,
        text=True, timeout=HANG_GUARD, env=clean_env(XLA_FLAGS="--xla_force_host_platform_device_count=2"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = out_dir.iterdir()
    return run_dir


@pytest.mark.slow
def test_the_data_axis_across_two_processes_equals_one_process_with_two_devices(tmp_path):
    """One seed whose environments are split over the two processes' devices. (Seeds across
    processes, one each: the signal test below.)"""
    args = COMMON + ["--num-seeds", "1", "--data-parallel", "2"]
    results = run_two_processes(tmp_path / "multi", args)
    for rank, (code, out, err) in enumerate(results):
        assert code == 0, f"process {rank}: {err[-3000:]}"
    assert not (tmp_path / "multi" / "p1").exists()  # only process 0 writes
    assert "update" in results[0][1] and "update" not in results[1][1]  # only process 0 prints
    (multi_dir,) = (tmp_path / "multi" / "p0").iterdir()
    single_dir = run_one_process(tmp_path / "single", args)

    summary = json.loads((multi_dir / "summary.json").read_text())
    assert summary["processes"] == 2
    assert "1 seed shard(s) x 1 seed(s), each seed's environments split over 2" in summary["layout"]
    assert len(summary["final_return_per_seed"]) == 1
    multi, single = np.load(multi_dir / "metrics.npz"), np.load(single_dir / "metrics.npz")
    for k in ("policy_loss", "value_loss", "entropy", "episode_return", "eval_return"):
        assert multi[k].shape == (1, 12)
        np.testing.assert_allclose(multi[k], single[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.slow
def test_sac_with_each_process_holding_its_own_environments_and_buffer(tmp_path):
    """SAC's data axis across two processes: each steps one of the two environments (and holds
    its half of the replay buffer); equal to one process with two devices (itself a
    --data-parallel 2 run)."""
    args = ["--num-envs", "2", "--num-steps", "50", "--total-timesteps", "400", "--learning-starts", "100",
            "--batch-size", "64", "--data-parallel", "2", "--eval-every", "2", "--log-every", "4"]
    results = run_two_processes(tmp_path / "multi", args, script="algos/sac.py")
    for rank, (code, out, err) in enumerate(results):
        assert code == 0, f"process {rank}: {err[-3000:]}"
    assert not (tmp_path / "multi" / "p1").exists()
    (multi_dir,) = (tmp_path / "multi" / "p0").iterdir()
    single_dir = run_one_process(tmp_path / "single", args, script="algos/sac.py")
    assert json.loads((multi_dir / "summary.json").read_text())["processes"] == 2
    single_summary = json.loads((single_dir / "summary.json").read_text())
    assert "split over 2 device(s)" in single_summary["layout"] and single_summary["final_return_mean"] is not None
    multi, single = np.load(multi_dir / "metrics.npz"), np.load(single_dir / "metrics.npz")
    for k in ("critic_loss", "actor_loss", "alpha", "episode_return", "eval_return"):
        assert multi[k].shape == (1, 4)
        np.testing.assert_allclose(multi[k], single[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert np.isfinite(multi["critic_loss"][0, 1:]).all()


@pytest.mark.slow
def test_seeds_that_cannot_be_spread_over_processes_are_a_clear_error(tmp_path):
    results = run_two_processes(tmp_path, ["--num-seeds", "3", "--data-parallel", "1"])
    for code, out, err in results:
        assert code == 2
        message = " ".join(err.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())
        assert "--num-seeds 3 cannot be spread evenly over the 2 seed shards" in message
        assert "use a multiple of 2" in message
    assert not any(tmp_path.rglob("summary.json"))


@pytest.mark.slow
def test_a_signal_to_one_process_stops_both_and_the_pair_resumes(tmp_path):
    """Seeds across processes (one seed each). Ctrl-C reaches only process 1: both agree to
    stop after the same chunk, process 0 prints and writes every file; resumed as a pair,
    the run ends as one process with two devices does. (The same pair without the signal
    was a test of its own; this one checks all it did, and shares its compiled programs.)"""
    updates = 32  # the signal's moment is fixed by `held` below, not by the run's length
    args = ["--total-timesteps", str(128 * updates), "--num-steps", "32", "--eval-every", "8", "--log-every", "1",
            "--checkpoint-every", "2", "--num-seeds", "2", "--data-parallel", "1"]
    port = free_port()
    # Process 1 waits at its first checkpoint for the signal (conftest.held), and process 0 in
    # the next chunk's collective: the signal lands mid-run on a machine of any speed.
    commands = [[sys.executable, "algos/ppo.py"], held(0, "algos/ppo.py")]
    procs = [subprocess.Popen(
        [*commands[rank], "--distributed", "--out-dir", str(tmp_path / f"p{rank}"), *args], cwd=REPO,
        env=clean_env(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(rank)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    try:
        wait_until(lambda: list((tmp_path / "p0").glob("*/checkpoints/update_*.npz")), procs, "checkpoint")
        procs[1].send_signal(signal.SIGINT)
        outputs = [p.communicate(timeout=HANG_GUARD) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [130, 130], [o[1][-2000:] for o in outputs]
    (run_dir,) = (tmp_path / "p0").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "interrupt" and summary["updates"] < updates and not (tmp_path / "p1").exists()
    assert "update" in outputs[0][0] and "update" not in outputs[1][0]  # only process 0 prints

    results = run_two_processes(tmp_path / "again", ["--resume", str(run_dir)])
    for rank, (code, out, err) in enumerate(results):
        assert code == 0, f"process {rank}: {err[-3000:]}"
    single_dir = run_one_process(tmp_path / "single", args)
    multi, single = np.load(run_dir / "metrics.npz"), np.load(single_dir / "metrics.npz")
    for k in ("policy_loss", "value_loss", "entropy", "episode_return", "eval_return"):
        assert multi[k].shape == (2, updates)
        np.testing.assert_allclose(multi[k], single[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert not np.allclose(multi["policy_loss"][0], multi["policy_loss"][1])  # two distinct seeds
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["processes"] == 2 and len(summary["final_return_per_seed"]) == 2
    assert "2 seed shard(s) x 1 seed(s), each seed's environments split over 1" in summary["layout"]
    assert not (tmp_path / "again" / "p1").exists()
    progress = [json.loads(l)["update"] for l in (run_dir / "progress.jsonl").read_text().splitlines()]
    assert progress == list(range(1, updates + 1))
