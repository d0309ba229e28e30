#!/usr/bin/env bash
# The truncation fix measured: IPPO (algos/ppo.py at the suite's recipe, JaxMARL's
# ippo_ff_mpe.yaml) on jaxmarl/MPE_simple_spread_v3, whose episodes end only at the time limit,
# with that limit read as a truncation that bootstraps from V(final observation) (scanrl's
# default), against the same run with it read as a termination (--env-options
# time_limit_as_termination 1: JaxMARL's baselines' (1 - done)). The same SEEDS seeds, budget
# and final evaluation (128 episodes, each agent's first-episode return) for both;
# `python benchmarks/jaxmarl_table.py --truncation OUT_DIR` makes the row.
#
#   bash benchmarks/jaxmarl_truncation.sh OUT_DIR [SEEDS] [STEPS]
set -euo pipefail
OUT=${1:?OUT_DIR}; SEEDS=${2:-10}; STEPS=${3:-2000000}
mkdir -p "$OUT"
updates=$(( STEPS / (16 * 128) ))  # one evaluation, after the last update
for reading in truncated terminated; do
    options=(); [ "$reading" = terminated ] && options=(--env-options time_limit_as_termination 1)
    python algos/ppo.py --env jaxmarl/MPE_simple_spread_v3 "${options[@]}" --num-seeds "$SEEDS" \
        --total-timesteps "$STEPS" --eval-every "$updates" --eval-episodes 128 --log-every 0 \
        --out-dir "$OUT/$reading" | tee "$OUT/$reading.txt"
done
