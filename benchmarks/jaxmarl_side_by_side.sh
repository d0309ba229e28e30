#!/usr/bin/env bash
# IPPO side by side: scanrl's algos/ppo.py on jaxmarl/MPE_simple_spread_v3 at JaxMARL's
# ippo_ff_mpe.yaml (the suite's recipe: 16 envs x 128 steps, 4 epochs x 4 minibatches, tanh
# 64 x 64) against JaxMARL's own baselines/IPPO/ippo_ff_mpe.py, run from its file by
# benchmarks/jaxmarl_baseline.py. Each side on ONE CPU device with its SEEDS seeds vmapped, the
# same jaxmarl package, imports, compile and a final evaluation of 128 episodes counted alike,
# both scored by the same estimator (each agent's first-episode return). SITTINGS sittings
# alternate the sides (scanrl, JaxMARL, scanrl, ...); benchmarks/jaxmarl_table.py reads them.
#
#   bash benchmarks/jaxmarl_side_by_side.sh OUT_DIR [SEEDS] [STEPS] [SITTINGS]
#
# Needs JAXMARL_DIR (a checkout of FLAIROx/JaxMARL) and JM_VENV, a virtualenv made once:
#   python3.11 -m venv $JM_VENV && $JM_VENV/bin/pip install jax==0.10.2 "jaxmarl[algs]==0.2.0"
set -euo pipefail
OUT=${1:?OUT_DIR}; SEEDS=${2:-5}; STEPS=${3:-2000000}; SITTINGS=${4:-3}
JM=${JM_VENV:?JM_VENV}/bin/python
export JAXMARL_COMMIT=${JAXMARL_COMMIT:-$(git -C "${JAXMARL_DIR:?JAXMARL_DIR}" rev-parse HEAD 2>/dev/null || echo unknown)}
mkdir -p "$OUT"
updates=$(( STEPS / (16 * 128) ))  # one evaluation, after the last update
for i in $(seq 1 "$SITTINGS"); do
    python algos/ppo.py --env jaxmarl/MPE_simple_spread_v3 --num-seeds "$SEEDS" --num-devices 1 \
        --total-timesteps "$STEPS" --eval-every "$updates" --eval-episodes 128 --log-every 0 \
        --out-dir "$OUT/run$i/scanrl" | tee "$OUT/run$i.txt"
    $JM benchmarks/jaxmarl_baseline.py --script IPPO/ippo_ff_mpe.py \
        --config IPPO/config/ippo_ff_mpe.yaml --total-timesteps "$STEPS" --num-seeds "$SEEDS" \
        --out "$OUT/run$i/jaxmarl_ippo.json"
done
