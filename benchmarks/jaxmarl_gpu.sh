#!/usr/bin/env bash
# scanrl against JaxMARL's own SMAX baselines on one GPU: the GPU form of
# jaxmarl_side_by_side.sh's SMAX cells, which this script runs one sitting each of. In order:
# mappo_smax and ippo_smax on 2s3z, then on 3s5z_vs_3s6z (CELLS, MAPS): per cell scanrl's
# algos/ppo_rnn.py, then JaxMARL's baselines/MAPPO/mappo_rnn_smax.py or IPPO/ippo_rnn_smax.py
# (run unchanged through benchmarks/jaxmarl_baseline.py), one process at a time on the device,
# STEPS env steps per seed (default 1e7, JaxMARL's published budget), SEEDS seeds a side (default
# 5) in one program each, both scored by the same estimator (each agent's first-episode return
# over 128 fresh battles; JaxMARL's win rate beside it).
#
# A cell starts only while more than 100 s of BUDGET (seconds, default 570, counted from the
# script's start) are left; `timeout` stops it at the deadline. Each process's wall goes to the
# cell's walls.tsv (jaxmarl_side_by_side.sh's, timed from outside the same way for both sides).
#
# On the device, from the repo root, with .whl and .gpu (both ignored through .git/info/exclude)
# named in the call's carry:
#   SCANRL_COMMIT=<sha> bash benchmarks/jaxmarl_gpu.sh
# It writes to $OUT (default gpu_out) only: log.txt, device.txt and jaxmarl_gpu.tar.gz, the work
# folder WORK (default /tmp/jaxmarl_gpu: one folder per cell as jaxmarl_side_by_side.sh writes
# it, scanrl's run folders without their weights), rewritten after every cell, so a call stopped
# early still returns the finished cells. `tar -xzf jaxmarl_gpu.tar.gz`, then
# `python benchmarks/jaxmarl_table.py jaxmarl_gpu/mappo_smax_2s3z` prints a cell's table.
#
# Carried, made once on the development machine:
# - .whl: pqn_gpu.sh's wheels (distrax, tfp-nightly and its dependencies, gymnax and its, tyro
#   and its, hydra-core, omegaconf, antlr4-python3-runtime) and jaxmarl's: safetensors,
#   jaxtyping, wadler-lindig, matplotlib and its, pillow, tqdm, imageio; for the image's Python
#   (`pip download --only-binary=:all: --no-deps --python-version 3.X --platform
#   manylinux2014_x86_64 -d .whl NAME==VERSION ...`, the versions of JM_VENV's).
# - .gpu/JaxMARL: a `git archive` of a FLAIROx/JaxMARL checkout (its jaxmarl package and
#   baselines/); its commit in .gpu/jaxmarl_commit.txt (or JAXMARL_COMMIT).
# wandb is replaced by a no-op module made here (JaxMARL's SMAX files call wandb.log through a
# host callback every update; the driver disables wandb, and scanrl imports it only with
# --wandb-mode other than disabled).
#
# A dry run on a CPU: SKIP_INSTALL=1 PY=/work/venv/bin/python JM_PY=$JM_VENV/bin/python
#   JAXMARL_DIR=... STEPS=32768 SEEDS=2 CELLS=mappo_smax MAPS=2s3z bash benchmarks/jaxmarl_gpu.sh
# (PY and JM_PY: each side's Python, default python3; SKIP_INSTALL=1: the wheels are installed
# already; JAXMARL_DIR: default .gpu/JaxMARL.)
set -u
OUT=$(realpath -m "${OUT:-gpu_out}"); WORK=$(realpath -m "${WORK:-/tmp/jaxmarl_gpu}")
[ -e "$WORK" ] && mv "$WORK" "$WORK.$(date +%s)"  # an earlier call's on a warm machine: kept aside
mkdir -p "$OUT" "$WORK"
deadline=$((SECONDS + ${BUDGET:-570}))
ROOT=$PWD
export PY=${PY:-python3} JM_PY=${JM_PY:-python3} DEVICES=1
SITE=${SITE:-/tmp/site}; PKG=${PKG:-/tmp/pkg}
STEPS=${STEPS:-10000000}; SEEDS=${SEEDS:-5}
CELLS=${CELLS:-mappo_smax ippo_smax}; MAPS=${MAPS:-2s3z 3s5z_vs_3s6z}
export JAXMARL_DIR=$(realpath -m "${JAXMARL_DIR:-$ROOT/.gpu/JaxMARL}")
export JAXMARL_COMMIT=${JAXMARL_COMMIT:-$(cat .gpu/jaxmarl_commit.txt 2>/dev/null || echo unknown)}
if [ ! -f "$JAXMARL_DIR/baselines/MAPPO/mappo_rnn_smax.py" ]; then
  echo "no $JAXMARL_DIR/baselines"; exit 3
fi

. benchmarks/gpu_lib.sh
if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  install_wheels "$PY" "$SITE" || exit 3
  link_scanrl "$PKG"
  mkdir -p "$WORK/stubs/wandb"  # last on the path: an installed wandb wins
  printf 'def init(*a, **k):\n    pass\n\n\ndef log(*a, **k):\n    pass\n' \
    > "$WORK/stubs/wandb/__init__.py"
  export PYTHONPATH="$PKG:$SITE:$JAXMARL_DIR:$WORK/stubs"
fi
export PYTHONUNBUFFERED=1 MUJOCO_GL=disable

pack() {  # the work folder into one archive, replaced at once, without scanrl's weights
  find "$WORK" -type f \( -path '*/checkpoints/*' -o -name params.npz -o -size +4M \) \
    -printf '%P\n' | sed "s|^|$(basename "$WORK")/|" > "$WORK.left_out"
  tar -czf "$OUT/jaxmarl_gpu.tar.gz.part" -C "$(dirname "$WORK")" -X "$WORK.left_out" \
    "$(basename "$WORK")" && mv "$OUT/jaxmarl_gpu.tar.gz.part" "$OUT/jaxmarl_gpu.tar.gz"
}

cell() {  # cell CELL MAP: one sitting of jaxmarl_side_by_side.sh, scanrl first
  local left=$((deadline - SECONDS)) dir="$WORK/${1}_${2}"
  if ((left <= 100)); then
    echo "$(date +%T) $1 $2: not run, ${left} s of the budget left"; return
  fi
  echo "$(date +%T) $1 $2: start, ${left} s of the budget left"
  MAP=$2 timeout -k 15 "$left" bash benchmarks/jaxmarl_side_by_side.sh "$1" "$dir" "$SEEDS" \
    "$STEPS" 1 > "$dir.log" 2>&1
  echo "$(date +%T) $1 $2: end, exit $?"; cat "$dir/walls.tsv" 2>/dev/null
  pack
}

main() {
  echo "jaxmarl_gpu.sh: cells [$CELLS] on maps [$MAPS], $STEPS steps x $SEEDS seeds a side," \
       "budget ${BUDGET:-570} s"
  { echo "jaxmarl commit: $JAXMARL_COMMIT"
    "$PY" benchmarks/device_info.py flax optax chex numpy distrax gymnax hydra-core 2>&1
  } | tee "$WORK/device.txt"
  cp "$WORK/device.txt" "$OUT/device.txt"
  for map in $MAPS; do
    for name in $CELLS; do cell "$name" "$map"; done
  done
  echo "$(date +%T) done"
}

main 2>&1 | tee "$OUT/log.txt"
cp "$OUT/log.txt" "$WORK/log.txt"
pack
ls -la "$OUT"
