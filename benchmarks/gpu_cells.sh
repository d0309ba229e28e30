#!/usr/bin/env bash
# Side-by-side cells on one GPU, each within what is left of BUDGET (seconds, default 530; a cell
# starts only while more than 120 s are left, and is stopped when the budget runs out). CELLS
# (default "brax/ant brax/humanoid") names them:
# - brax/ENV or playground/ENV: scanrl's PPO against Brax's own PPO (benchmarks/brax_trainers.py),
#   the published recipe, TIMESTEPS env steps (default 9,830,400), 5 seeds a side (scanrl: one
#   program; Brax: one process per seed, all at once), one sampled 128-episode evaluation at the end;
# - craftax/ENV: scanrl's PPO against Craftax_Baselines' ppo.py (benchmarks/craftax_ppo.py), 5 seeds
#   a side, TIMESTEPS env steps, from an export of that repository in .gpu/cb (craftax_ppo.py's
#   docstring says how to make it);
# - scanrl:ENV: scanrl's PPO alone with the published recipe, 5 seeds, TIMESTEPS env steps, EVALS
#   an evaluation every EVAL_EVERY updates (default 16) and after the last, its run folder under $OUT/runs.
# Run from the repo root on a machine whose Python has jax with CUDA, with the other wheels in .whl
# (benchmarks/HISTORY.md, 2026-11-26, 22:20-22:34, lists them). Where the copy on the machine has
# no .git, pass SCANRL_COMMIT=<git rev-parse HEAD of the copied tree> (and say in the call whether
# the tree was dirty): each cell's JSON records it as scanrl_commit (sidebyside.scanrl_commit).
# The cells of RESULTS rows 7-9 (from trees before the cached-start change, 9cf5eee) re-run with
#   SCANRL_COMMIT=... BUDGET=530 bash benchmarks/gpu_cells.sh
#   SCANRL_COMMIT=... CELLS=brax/ant TIMESTEPS=50135040 BUDGET=580 bash benchmarks/gpu_cells.sh
set -u
OUT=$(realpath -m "${OUT:-gpu_out}")  # absolute: the craftax cell runs from benchmarks/
mkdir -p "$OUT"
deadline=$((SECONDS + ${BUDGET:-530}))
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
mkdir -p /tmp/pkg/scanrl  # scanrl.algos and scanrl.common from this tree, as an install would name them
ln -sfn "$PWD/algos" /tmp/pkg/scanrl/algos
ln -sfn "$PWD/common" /tmp/pkg/scanrl/common
export PYTHONPATH=/tmp/pkg:/tmp/site MUJOCO_GL=disable PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import jax, brax; print('jax', jax.__version__, 'brax', brax.__version__, jax.devices())"; } 2>&1 | tee "$OUT/device.txt"
steps=${TIMESTEPS:-9830400}
cell() {
  local left=$((deadline - SECONDS)) log="$OUT/$(echo "$1" | tr '/:' '__').log"
  if ((left <= 120)); then echo "$1 not run: ${left} s of the budget left"; return; fi
  case "$1" in
    craftax/*) (cd benchmarks && timeout "$left" python3 craftax_ppo.py --env "$1" --timesteps "$steps" --seeds 5 \
                 --baseline ../.gpu/cb --out "$OUT") ;;
    scanrl:*) timeout "$left" python3 algos/ppo.py --env "${1#scanrl:}" --recipe published --total-timesteps "$steps" \
                --num-seeds 5 --eval-every "${EVAL_EVERY:-16}" --log-every 0 --no-compile-cache \
                --out-dir "$OUT/runs" ;;
    *) timeout "$left" python3 benchmarks/brax_trainers.py --form published --env "$1" --timesteps "$steps" --seeds 5 \
         --evals 1 --brax-parallel --out "$OUT" ;;
  esac 2>&1 | tee "$log"
}
for c in ${CELLS:-brax/ant brax/humanoid}; do cell "$c"; done
ls -la "$OUT"
