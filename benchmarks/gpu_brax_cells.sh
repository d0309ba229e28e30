#!/usr/bin/env bash
# scanrl's PPO against Brax's own PPO (benchmarks/brax_trainers.py) on brax/ant, then
# brax/humanoid (CELLS), on one GPU: the training notebook's published sizes, TIMESTEPS env steps
# (default 9,830,400), 5 seeds a side (scanrl: one program; Brax: one process per seed, all at once), one sampled
# 128-episode evaluation at the end. Run from the repo root on a machine whose Python has
# jax with CUDA, with the other wheels in .whl (benchmarks/RESULTS.md lists them); a cell
# starts only while more than 120 s of BUDGET (seconds, default 530) are left.
set -u
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
deadline=$((SECONDS + ${BUDGET:-530}))
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
mkdir -p /tmp/pkg/scanrl  # scanrl.algos and scanrl.common from this tree, as an install would name them
ln -sfn "$PWD/algos" /tmp/pkg/scanrl/algos
ln -sfn "$PWD/common" /tmp/pkg/scanrl/common
export PYTHONPATH=/tmp/pkg:/tmp/site MUJOCO_GL=disable PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import jax, brax; print('jax', jax.__version__, 'brax', brax.__version__, jax.devices())"; } 2>&1 | tee "$OUT/device.txt"
cell() {
  local left=$((deadline - SECONDS))
  if ((left <= 120)); then echo "$1 not run: ${left} s of the budget left"; return; fi
  timeout "$left" python3 benchmarks/brax_trainers.py --form published --env "$1" --timesteps "${TIMESTEPS:-9830400}" --seeds 5 \
    --evals 1 --brax-parallel --out "$OUT" 2>&1 | tee "$OUT/${1#brax/}.log"
}
for env in ${CELLS:-brax/ant brax/humanoid}; do cell "$env"; done
ls -la "$OUT"
