#!/usr/bin/env bash
# Recurrent PPO's cores on one GPU at the Transformer-XL PPO's Craftax config
# (Reytuag/transformerXL_PPO_JAX's train_PPO_trXL_pmap.py: 1,024 envs x 128 steps, embedding 256,
# 8 heads, 2 layers, memory window 128, gradient window 64, lr 2e-4 annealed over 1e9 steps,
# gamma 0.999, lambda 0.8, 4 epochs x 8 minibatches, entropy 0.002, grad norm 1): scanrl's
# `--core trxl`, then `gru` and `lstm` at the same settings, each for the same MINUTES of
# training (`--stop-minutes`, default 2; compiling not counted), one process at a time on
# craftax/Craftax-Symbolic-v1. `python benchmarks/trxl_curves.py --table WORK` then scores each
# run against the repository's 5 committed seed curves (benchmarks/reference/trxl_ppo/
# committed_curves.npz) at the env steps that run reached.
#
# SEEDS defaults to 1, as each committed curve is one seed. XLA counts 12.8 GiB for one seed's
# update of --core trxl at this config (`python benchmarks/trxl_memory.py trxl`, on a CPU), so
# more seeds fit on one H200.
#
# A core starts only while more than 100 s of BUDGET (seconds, default 570, counted from the
# script's start) are left; `timeout` stops it at the deadline. Each run's process wall goes to
# walls.tsv.
#
# On the device, from the repo root, with .whl (as pqn_gpu.sh's, plus craftax's wheel) named in
# the call's carry:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/pkg:/tmp/site || exit
#   SKIP_INSTALL=1 SCANRL_COMMIT=<sha> bash benchmarks/trxl_gpu.sh
# It writes to $OUT (default gpu_out) only: log.txt, device.txt, walls.tsv and trxl_gpu.tar.gz
# (the work folder WORK, default /tmp/trxl_gpu: scanrl's run folders without their weights),
# rewritten after every core, so a call stopped early still returns the finished ones.
#
# A dry run on a CPU at the sizes of benchmarks/trxl_ppo.py:
#   SKIP_INSTALL=1 NUM_ENVS=16 NUM_STEPS=32 SEQ=16 WINDOW=32 EMBED=64 HEADS=4 MINUTES=0.5 \
#       BUDGET=900 bash benchmarks/trxl_gpu.sh
set -u
OUT=$(realpath -m "${OUT:-gpu_out}"); WORK=$(realpath -m "${WORK:-/tmp/trxl_gpu}")
[ -e "$WORK" ] && mv "$WORK" "$WORK.$(date +%s)"  # an earlier call's on a warm machine: kept aside
mkdir -p "$OUT" "$WORK"
deadline=$((SECONDS + ${BUDGET:-570}))
PY=${PY:-python3}; SITE=${SITE:-/tmp/site}; PKG=${PKG:-/tmp/pkg}
CORES=${CORES:-trxl gru lstm}; SEEDS=${SEEDS:-1}; MINUTES=${MINUTES:-2}
NUM_ENVS=${NUM_ENVS:-1024}; NUM_STEPS=${NUM_STEPS:-128}; SEQ=${SEQ:-64}; WINDOW=${WINDOW:-128}
EMBED=${EMBED:-256}; HEADS=${HEADS:-8}
ROOT=$PWD

. benchmarks/gpu_lib.sh
if [ "${SKIP_INSTALL:-0}" != 1 ]; then install_wheels "$PY" "$SITE" || exit 3; fi
link_scanrl "$PKG"
export PYTHONPATH="$PKG:$SITE:${PYTHONPATH:-}" PYTHONUNBUFFERED=1

pack() {  # the work folder without weights or files over 4 MB, replaced at once
  find "$WORK" -type f \( -path '*/checkpoints/*' -o -name params.npz -o -size +4M \) \
    -printf '%P\n' > "$WORK/left_out.txt"
  tar -czf "$OUT/trxl_gpu.tar.gz.part" -C "$(dirname "$WORK")" \
    -X <(sed "s|^|$(basename "$WORK")/|" "$WORK/left_out.txt") "$(basename "$WORK")" \
    && mv "$OUT/trxl_gpu.tar.gz.part" "$OUT/trxl_gpu.tar.gz"
  cp "$WORK/walls.tsv" "$OUT/walls.tsv" 2>/dev/null
}

run_core() {  # run_core CORE
  local core=$1 left=$((deadline - SECONDS)) t0 t1 rc
  if ((left <= 100)); then
    echo "$(date +%T) $core: not run, ${left} s of the budget left"
    printf '%s\tnot run\t\n' "$core" >> "$WORK/walls.tsv"; return
  fi
  echo "$(date +%T) $core: start, ${left} s of the budget left"
  t0=$(date +%s.%N)
  timeout -k 15 "$left" "$PY" algos/ppo_rnn.py --env craftax/Craftax-Symbolic-v1 --recipe none \
    --core "$core" --num-seeds "$SEEDS" --num-devices 1 --total-timesteps 1000000000 \
    --stop-minutes "$MINUTES" --eval-every 0 --log-every 10 --no-compile-cache \
    --num-envs "$NUM_ENVS" --num-steps "$NUM_STEPS" --seq-len "$SEQ" --trxl-window "$WINDOW" \
    --gru-size "$EMBED" --trxl-heads "$HEADS" --trxl-layers 2 --encoder-hidden "$EMBED" \
    --head-hidden "$EMBED" "$EMBED" --activation relu --learning-rate 2e-4 --num-epochs 4 \
    --num-minibatches 8 --gamma 0.999 --gae-lambda 0.8 --clip-eps 0.2 --ent-coef 0.002 \
    --vf-coef 0.5 --max-grad-norm 1.0 --out-dir "$WORK/$core" 2>&1 | tee "$WORK/$core.log"
  rc=${PIPESTATUS[0]}
  t1=$(date +%s.%N)
  printf '%s\t%s\t%s\n' "$core" "$rc" "$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }")" \
    >> "$WORK/walls.tsv"
  echo "$(date +%T) $core: end, exit $rc"
  pack
}

main() {
  echo "trxl_gpu.sh: cores [$CORES], $SEEDS seed(s), $MINUTES minutes each, budget ${BUDGET:-570} s"
  "$PY" benchmarks/device_info.py flax optax numpy gymnax distrax craftax tyro 2>&1 \
    | tee "$WORK/device.txt"
  cp "$WORK/device.txt" "$OUT/device.txt"
  printf 'core\texit\twall_s\n' > "$WORK/walls.tsv"
  for core in $CORES; do run_core "$core"; done
  "$PY" benchmarks/trxl_curves.py --table "$WORK" 2>&1 | tee "$WORK/table.md"
}

main 2>&1 | tee "$OUT/log.txt"
cp "$OUT/log.txt" "$WORK/log.txt"
pack
ls -la "$OUT"
