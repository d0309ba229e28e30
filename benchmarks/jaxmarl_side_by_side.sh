#!/usr/bin/env bash
# scanrl against JaxMARL's own baselines, one cell at a time, each side run from its own files:
#   ippo_mpe     algos/ppo.py on jaxmarl/MPE_simple_spread_v3 at the suite's recipe (JaxMARL's
#                ippo_ff_mpe.yaml: 16 envs x 128 steps, 4 epochs x 4 minibatches, tanh 64 x 64)
#                against baselines/IPPO/ippo_ff_mpe.py;
#   pqn_vdn_mpe  algos/pqn.py --vdn on the same env at the published recipe (JaxMARL's
#                pqn_vdn_ff_mpe.yaml: 256 envs x 16 steps, 2 x 256 with layer norm, RAdam) with
#                agent ids in the observation, as JaxMARL's CTRolloutManager adds them, against
#                baselines/QLearning/pqn_vdn_ff.py;
#   pqn_vdn_rnn_mpe  algos/pqn_rnn.py --vdn on the same env at the published recipe (JaxMARL's
#                pqn_vdn_rnn_mpe.yaml: the same values with a GRU of 256 after the two layers)
#                against baselines/QLearning/pqn_vdn_rnn.py (its seeds one after another
#                through one compiled program: vmapped, they hang on a CPU; see
#                benchmarks/jaxmarl_baseline.py);
#   ippo_overcooked  algos/ppo.py on jaxmarl/overcooked_$LAYOUT (default cramped_room) at the
#                suite's recipe (JaxMARL's ippo_ff_overcooked.yaml) against
#                baselines/IPPO/ippo_ff_overcooked.py, the shaped reward annealed from 1 to 0
#                over the first half of the budget on both sides (JaxMARL's REW_SHAPING_HORIZON
#                2.5e6 of 5e6; scanrl's shaping_anneal counts each of its 16 envs' steps), and
#                both scored on the task reward alone;
#   ippo_smax    algos/ppo_rnn.py on jaxmarl/SMAX_$MAP (default 2s3z) at the suite's recipe
#                (JaxMARL's ippo_rnn_smax.yaml: 128 envs x 128 steps, a 128-unit GRU) against
#                baselines/IPPO/ippo_rnn_smax.py;
#   mappo_smax   the same with the critic on the world state (--critic-obs privileged_state) and
#                mappo_homogenous_rnn_smax.yaml's lr 2e-3, clip 0.2 and no entropy bonus, against
#                baselines/MAPPO/mappo_rnn_smax.py (JaxMARL's critic reads the agent's one-hot
#                id with the world state; scanrl's reads the world state alone). On SMAX both
#                sides' evaluations also give the fraction of battles won (JaxMARL's in its JSON).
# Each side on ONE CPU device (scanrl: unless DEVICES, below) with its SEEDS seeds vmapped, the
# same jaxmarl package, one final evaluation of 128 episodes, both scored by the same estimator (each agent's first-episode
# return; benchmarks/jaxmarl_baseline.py runs JaxMARL's file). SITTINGS sittings alternate the
# sides (scanrl, JaxMARL, scanrl, ...); each process's wall, timed from outside the same way for
# both (walls.tsv), counts its imports, compile, training and evaluation;
# benchmarks/jaxmarl_table.py reads them.
#
#   bash benchmarks/jaxmarl_side_by_side.sh CELL OUT_DIR [SEEDS] [STEPS] [SITTINGS]
#
# Needs JAXMARL_DIR (a checkout of FLAIROx/JaxMARL) and JM_VENV, a virtualenv made once:
#   python3.11 -m venv $JM_VENV && $JM_VENV/bin/pip install jax==0.10.2 "jaxmarl[algs]==0.2.0"
# or JM_PY, the Python that runs JaxMARL's side (benchmarks/jaxmarl_gpu.sh: one for both sides,
# with PY for scanrl's; default python).
set -euo pipefail
CELL=${1:?CELL: ippo_mpe, pqn_vdn_mpe, pqn_vdn_rnn_mpe, ippo_overcooked, ippo_smax or mappo_smax}
OUT=${2:?OUT_DIR}
SEEDS=${3:-5}; STEPS=${4:-2000000}; SITTINGS=${5:-3}
# scanrl's CPU devices: 1 (each side on one device), or 0 for all of them, scanrl's own fastest
# way (its seeds sharded over the devices; JaxMARL's files have no device axis: one device)
DEVICES=${DEVICES:-1}
JM=${JM_PY:-${JM_VENV:?JM_VENV or JM_PY}/bin/python}; PY=${PY:-python}
JAXMARL_COMMIT=${JAXMARL_COMMIT:-$(git -C "${JAXMARL_DIR:?JAXMARL_DIR}" rev-parse HEAD \
    2>/dev/null || echo unknown)}
export JAXMARL_COMMIT
case "$CELL" in
    ippo_mpe)
        SCANRL=(algos/ppo.py --env jaxmarl/MPE_simple_spread_v3); PER_UPDATE=$((16 * 128))
        PEER=(--script IPPO/ippo_ff_mpe.py --config IPPO/config/ippo_ff_mpe.yaml) ;;
    pqn_vdn_mpe)
        SCANRL=(algos/pqn.py --env jaxmarl/MPE_simple_spread_v3 --vdn --recipe published
                --env-options agent_id 1 world_state 0); PER_UPDATE=$((256 * 16))
        PEER=(--script QLearning/pqn_vdn_ff.py --config QLearning/config/alg/pqn_vdn_ff_mpe.yaml) ;;
    pqn_vdn_rnn_mpe)
        SCANRL=(algos/pqn_rnn.py --env jaxmarl/MPE_simple_spread_v3 --vdn --recipe published
                --env-options agent_id 1 world_state 0); PER_UPDATE=$((256 * 16))
        PEER=(--script QLearning/pqn_vdn_rnn.py
              --config QLearning/config/alg/pqn_vdn_rnn_mpe.yaml) ;;
    ippo_overcooked)
        LAYOUT=${LAYOUT:-cramped_room}; HORIZON=$(( STEPS / 2 ))
        SCANRL=(algos/ppo.py --env "jaxmarl/overcooked_$LAYOUT"
                --env-options shaping_anneal $(( HORIZON / 16 )) world_state 0)
        PER_UPDATE=$((16 * 128))
        PEER=(--script IPPO/ippo_ff_overcooked.py --config IPPO/config/ippo_ff_overcooked.yaml
              --layout "$LAYOUT" --shaping-horizon "$HORIZON") ;;
    ippo_smax|mappo_smax)
        MAP=${MAP:-2s3z}; PER_UPDATE=$((128 * 128))
        SCANRL=(algos/ppo_rnn.py --env "jaxmarl/SMAX_$MAP" --recipe published)
        PEER=(--script IPPO/ippo_rnn_smax.py --config IPPO/config/ippo_rnn_smax.yaml --map "$MAP")
        if [ "$CELL" = mappo_smax ]; then
            SCANRL+=(--critic-obs privileged_state --learning-rate 0.002 --clip-eps 0.2
                     --ent-coef 0)
            PEER=(--script MAPPO/mappo_rnn_smax.py
                  --config MAPPO/config/mappo_homogenous_rnn_smax.yaml --map "$MAP")
        fi ;;
    *) echo "CELL $CELL: ippo_mpe, pqn_vdn_mpe, pqn_vdn_rnn_mpe, ippo_overcooked, ippo_smax or" \
            "mappo_smax" >&2
       exit 2 ;;
esac
mkdir -p "$OUT"
updates=$(( STEPS / PER_UPDATE ))  # one evaluation, after the last update
timed() {  # timed SIDE SITTING command...: the whole process's wall, the same clock for both sides
    local start end; start=$(date +%s.%N)
    "${@:3}"
    end=$(date +%s.%N)
    awk -v s="$start" -v e="$end" -v i="$2" -v side="$1" \
        'BEGIN { printf "%s\t%s\t%.3f\n", i, side, e - s }' >> "$OUT/walls.tsv"
}
for i in $(seq 1 "$SITTINGS"); do
    # scanrl compiles afresh each time (--no-compile-cache), as JaxMARL's side does: a program
    # loaded from the store would leave its compile out of scanrl's wall only
    timed scanrl "$i" $PY "${SCANRL[@]}" --num-seeds "$SEEDS" --num-devices "$DEVICES" \
        --no-compile-cache --total-timesteps "$STEPS" --eval-every "$updates" --eval-episodes 128 \
        --log-every 0 --out-dir "$OUT/run$i/scanrl" | tee "$OUT/run$i.txt"
    timed jaxmarl "$i" $JM benchmarks/jaxmarl_baseline.py "${PEER[@]}" \
        --total-timesteps "$STEPS" --num-seeds "$SEEDS" --out "$OUT/run$i/jaxmarl.json"
done
