#!/usr/bin/env bash
# The reference table's weak cells (benchmarks/reference/core/: GRPO on CartPole, Catch and
# Pendulum, IMPALA on Pendulum at 5e5 steps), each run again as the table runs it (10 seeds,
# its defaults) but for the one thing under test: the budget its defaults document, or a
# setting that fits the env. Then a table of every run: IQM of the final return with its 95%
# interval.
#
#   bash benchmarks/weak_cells.sh OUT_DIR
set -euo pipefail
OUT=${1:?OUT_DIR}; mkdir -p "$OUT"
cell() {  # name algo env flags...
    local name=$1 algo=$2 env=$3; shift 3
    [ -e "$OUT/$name/summary.json" ] && return 0  # a finished cell is kept
    rm -rf "$OUT/$name"
    python "algos/$algo.py" --env "$env" --num-seeds 10 --log-every 0 --out-dir "$OUT/$name.tmp" "$@" \
        > "$OUT/$name.log" 2>&1
    mv "$OUT/$name.tmp/"* "$OUT/$name" && rmdir "$OUT/$name.tmp"
}
# GRPO's CartPole defaults document 3e6 steps: at 5e5 a run is 15 updates.
cell grpo_cartpole_3e6 grpo CartPole-v1 --total-timesteps 3000000
# Catch's episodes are 9 steps; GRPO trains on each env's first episode in its 512-step window,
# 9 of every 512 steps. A window that fits the episode, or windows that carry on and train on
# every step (the MinAtar preset's form):
cell grpo_catch_window16 grpo Catch-bsuite --total-timesteps 500000 --num-steps 16
cell grpo_catch_continuing grpo Catch-bsuite --total-timesteps 500000 --num-steps 128 \
    --no-reset-every-rollout --no-truncate-at-first-done
# Pendulum (with the continuous preset's 64 envs and step size 1e-3): every group member from the
# same start (the "one prompt, G completions" form), and 4x the budget.
cell grpo_pendulum_shared_reset grpo Pendulum-v1 --total-timesteps 500000 --shared-group-reset \
    --num-envs 64 --learning-rate 1e-3
cell grpo_pendulum_2e6 grpo Pendulum-v1 --total-timesteps 2000000 --num-envs 64 --learning-rate 1e-3
# Pendulum at the cell's 5e5 steps: the continuous preset (64 envs x 200 steps: 39 updates, step
# size 1e-3), and fewer envs per update (PPO's continuous preset has 16), so more updates of the
# same budget.
cell grpo_pendulum_5e5 grpo Pendulum-v1 --total-timesteps 500000 --num-envs 64 --learning-rate 1e-3
cell grpo_pendulum_32envs grpo Pendulum-v1 --total-timesteps 500000 --num-envs 32 --learning-rate 1e-3
cell grpo_pendulum_16envs grpo Pendulum-v1 --total-timesteps 500000 --num-envs 16 --learning-rate 1e-3
cell grpo_pendulum_16envs_lr3e-3 grpo Pendulum-v1 --total-timesteps 500000 --num-envs 16 \
    --learning-rate 3e-3
# ... which is now GRPO's preset for Pendulum-v1 (5e5 steps, 16 envs, 3e-3); the same step size
# over the continuous preset's 3e6 steps, and 16 envs at its step size of 1e-3 over 3e6:
cell grpo_pendulum_preset_3e6 grpo Pendulum-v1 --total-timesteps 3000000
cell grpo_pendulum_16envs_lr1e-3_3e6 grpo Pendulum-v1 --total-timesteps 3000000 --learning-rate 1e-3
# IMPALA's continuous preset documents 2e6 steps.
cell impala_pendulum_2e6 impala Pendulum-v1 --total-timesteps 2000000
python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
import numpy as np
from scanrl.common.harness import stats
print("| cell | env steps/seed | seeds | final return IQM [95% CI] | wall (s) |")
print("|---|---:|---:|---:|---:|")
for d in sorted(Path(sys.argv[1]).iterdir()):
    if (d / "summary.json").exists():
        s = json.loads((d / "summary.json").read_text())
        x = np.array([np.nan if v is None else v for v in s["final_return_per_seed"]], float)
        print(f"| {d.name} | {s['total_timesteps']:,} | {len(x)} | {stats.iqm_interval(x)} | "
              f"{s['wall_seconds']:.0f} |")
PY
