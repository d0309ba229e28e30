#!/usr/bin/env bash
# PQN side by side on one GPU: scanrl's algos/pqn.py against purejaxql's own pqn_minatar.py (run
# unchanged through benchmarks/purejaxql_pqn.py), the GPU form of pqn_side_by_side.sh's MinAtar
# cells. Per game (Breakout, Asterix, SpaceInvaders, Freeway, in that order): scanrl, then
# purejaxql, one process at a time on the same device. The full recipe (purejaxql's
# pqn_minatar.yaml, scanrl's minatar preset): STEPS env steps per seed (default 1e7) with the
# published 1e7-step schedules, SEEDS seeds a side (default 5) in one program each, a greedy test
# every TEST_INTERVAL (default 0.05) of the updates on both sides (scanrl: --eval-every, 128
# episodes; purejaxql: its TEST_INTERVAL on its 128 test envs).
#
# A cell starts only while more than 100 s of BUDGET (seconds, default 540, counted from the
# script's start) are left; `timeout` stops it at the deadline (SIGTERM, SIGKILL 15 s later).
# Each cell's process wall (date +%s.%N before and after) goes to walls.tsv.
#
# On the device, from the repo root, with .whl and .gpu (both ignored through .git/info/exclude)
# named in the call's carry:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/pkg:/tmp/site || exit
#   SKIP_INSTALL=1 SCANRL_COMMIT=<sha> bash benchmarks/pqn_gpu.sh
# It writes to $OUT (default gpu_out) only: log.txt (everything printed), device.txt, walls.tsv
# and pqn_gpu.tar.gz. The archive holds the work folder WORK (default /tmp/pqn_gpu): scanrl's run
# folders (config.json, summary.json, metrics.npz...; not their weights), purejaxql's JSON per
# game, each cell's log, walls.tsv, device.txt and log.txt. It is rewritten after every cell, so
# a call stopped early still returns the finished cells. `tar -xzf pqn_gpu.tar.gz`, then
# `python benchmarks/pqn_table.py pqn_gpu` prints the table.
#
# Carried, made once on the development machine:
# - .whl: distrax, tfp-nightly (+ decorator, gast, dm-tree), gymnax (+ gymnasium,
#   farama-notifications), tyro (+ docstring-parser, typeguard), and purejaxql's omegaconf,
#   hydra-core, antlr4-python3-runtime; the image's own jax, flax, optax, chex and numpy.
# - .gpu/purejaxql: a `git archive` of a purejaxql checkout; its commit in
#   .gpu/purejaxql_commit.txt (or PUREJAXQL_COMMIT), which purejaxql_pqn.py writes into its JSON.
# - .gpu/stubs/wandb: a no-op wandb in place of the real (large) wheel. pqn_minatar.py imports
#   wandb at module level and calls it only when WANDB_MODE is not "disabled" (purejaxql_pqn.py
#   disables it and replaces wandb.log); scanrl imports wandb only with --wandb-mode other than
#   disabled. The stub comes last on PYTHONPATH, so an installed wandb wins.
#
# Other settings, for a dry run elsewhere or a second call: PY_SCANRL / PY_PJQ (each side's
# Python, default python3), SKIP_INSTALL=1 (the wheels are installed already, or not needed),
# SITE (the wheels' target, default /tmp/site), PKG (where scanrl.algos and scanrl.common are
# linked, default /tmp/pkg), GAMES (default "Breakout Asterix SpaceInvaders Freeway"), SIDES
# (default "scanrl purejaxql"), STEPS, SEEDS, TEST_INTERVAL, BUDGET.
set -u
OUT=$(realpath -m "${OUT:-gpu_out}"); WORK=$(realpath -m "${WORK:-/tmp/pqn_gpu}")
[ -e "$WORK" ] && mv "$WORK" "$WORK.$(date +%s)"  # an earlier call's on a warm machine: kept aside
mkdir -p "$OUT" "$WORK"
deadline=$((SECONDS + ${BUDGET:-540}))
PY_SCANRL=${PY_SCANRL:-python3}; PY_PJQ=${PY_PJQ:-python3}
SITE=${SITE:-/tmp/site}; PKG=${PKG:-/tmp/pkg}
STEPS=${STEPS:-10000000}; SEEDS=${SEEDS:-5}; TEST_INTERVAL=${TEST_INTERVAL:-0.05}
GAMES=${GAMES:-Breakout Asterix SpaceInvaders Freeway}; SIDES=${SIDES:-scanrl purejaxql}
ROOT=$PWD
export PUREJAXQL_DIR="$ROOT/.gpu/purejaxql"
export PUREJAXQL_COMMIT=${PUREJAXQL_COMMIT:-$(cat .gpu/purejaxql_commit.txt 2>/dev/null)}
[ -f "$PUREJAXQL_DIR/purejaxql/pqn_minatar.py" ] || { echo "no $PUREJAXQL_DIR/purejaxql"; exit 3; }

. benchmarks/gpu_lib.sh
if [ "${SKIP_INSTALL:-0}" != 1 ]; then install_wheels "$PY_SCANRL" "$SITE" || exit 3; fi
link_scanrl "$PKG"
export PYTHONPATH="$PKG:$SITE:$ROOT/.gpu/stubs" PYTHONUNBUFFERED=1 MUJOCO_GL=disable

pack() {  # the work folder into one archive, replaced at once; scanrl's weights (params.npz,
  # checkpoints/: about 9 MB a 5-seed run) and any file over 4 MB stay out, listed in left_out.txt
  find "$WORK" -type f \( -path '*/checkpoints/*' -o -name params.npz -o -size +4M \) \
    -printf '%P\t%s\n' > "$WORK/left_out.txt"
  tar -czf "$OUT/pqn_gpu.tar.gz.part" -C "$(dirname "$WORK")" \
    -X <(cut -f1 "$WORK/left_out.txt" | sed "s|^|$(basename "$WORK")/|") \
    "$(basename "$WORK")" && mv "$OUT/pqn_gpu.tar.gz.part" "$OUT/pqn_gpu.tar.gz"
  cp "$WORK/walls.tsv" "$OUT/walls.tsv" 2>/dev/null
}

# each side's updates: STEPS // (128 envs x 32 steps); a test every int(updates x TEST_INTERVAL)
# (purejaxql's own rule), the same updates on scanrl's side
every=$("$PY_SCANRL" -c "print(int(($STEPS // 4096) * $TEST_INTERVAL))")

cell() {  # cell SIDE GAME
  local side=$1 game=$2 left=$((deadline - SECONDS)) log="$WORK/${1}_${2}.log" t0 t1 rc wall
  if ((left <= 100)); then
    echo "$(date +%T) $side $game: not run, ${left} s of the budget left"
    printf '%s\t%s\tnot run\t\t\t\n' "$game" "$side" >> "$WORK/walls.tsv"; return
  fi
  echo "$(date +%T) $side $game: start, ${left} s of the budget left"
  t0=$(date +%s.%N)
  { case $side in
    scanrl) timeout -k 15 "$left" "$PY_SCANRL" algos/pqn.py --env "$game-MinAtar" \
              --total-timesteps "$STEPS" --decay-timesteps 10000000 --num-seeds "$SEEDS" \
              --num-devices 1 --eval-every "$every" --eval-episodes 128 --log-every 0 \
              --no-compile-cache --out-dir "$WORK/scanrl" ;;
    purejaxql) timeout -k 15 "$left" "$PY_PJQ" benchmarks/purejaxql_pqn.py --script minatar \
                 --env "$game-MinAtar" --total-timesteps "$STEPS" --decay-timesteps 10000000 \
                 --num-seeds "$SEEDS" --test-interval "$TEST_INTERVAL" \
                 --out "$WORK/purejaxql_$game.json" ;;
    *) echo "unknown side $side"; false ;;
  esac; } 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  t1=$(date +%s.%N)
  wall=$(awk "BEGIN { printf \"%.3f\", $t1 - $t0 }")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$game" "$side" "$rc" "$wall" "$t0" "$t1" >> "$WORK/walls.tsv"
  echo "$(date +%T) $side $game: end, exit $rc, wall $wall s"
  pack
}

main() {
  echo "pqn_gpu.sh: games [$GAMES], sides [$SIDES], $STEPS steps x $SEEDS seeds a side, a test" \
       "every $every updates (TEST_INTERVAL $TEST_INTERVAL), budget ${BUDGET:-540} s"
  { echo "purejaxql commit: ${PUREJAXQL_COMMIT:-unknown}"
    echo "scanrl python: $("$PY_SCANRL" -V 2>&1); purejaxql python: $("$PY_PJQ" -V 2>&1)"
    echo "PYTHONPATH=$PYTHONPATH"
    "$PY_SCANRL" benchmarks/device_info.py jax-cuda13-plugin flax optax chex numpy gymnax \
      distrax tfp-nightly tyro hydra-core omegaconf 2>&1
  } | tee "$WORK/device.txt"
  cp "$WORK/device.txt" "$OUT/device.txt"
  printf 'game\tside\texit\twall_s\tstart\tend\n' > "$WORK/walls.tsv"
  for game in $GAMES; do
    for side in $SIDES; do cell "$side" "$game"; done
  done
  echo "$(date +%T) done; walls:"; cat "$WORK/walls.tsv"
}

main 2>&1 | tee "$OUT/log.txt"
cp "$OUT/log.txt" "$WORK/log.txt"
pack
ls -la "$OUT"
