#!/usr/bin/env bash
# PQN side by side: scanrl's algos/pqn.py against purejaxql's own pqn_gymnax.py / pqn_minatar.py
# and rejax's PQN (pip), in one sitting, each side on ONE CPU device (purejaxql and rejax vmap
# their seeds on one device; scanrl gets --num-devices 1), compile and evaluation counted alike.
#
#   bash benchmarks/pqn_side_by_side.sh OUT_DIR [SEEDS] [MINATAR_STEPS] [GAMES...]
#
# TEST_INTERVAL (default 0.05, purejaxql's): the fraction of the updates between greedy tests
# on MinAtar, on both sides; CARTPOLE=0 leaves the two CartPole cells out, MINATAR=0 the MinAtar
# ones (three sittings of the CartPole cells: `python benchmarks/pqn_table.py S1 S2 S3`).
#
# Needs: PUREJAXQL_DIR (a checkout of mttga/purejaxql), REJAX_DIR (a checkout of keraJLi/rejax,
# for its configs/gymnax/cartpole.yaml), and two virtualenvs made once:
#   python3.11 -m venv $PJQ_VENV && $PJQ_VENV/bin/pip install jax==0.10.2 flax optax chex \
#       gymnax==1.0.1 hydra-core omegaconf wandb six safetensors
#   python3.11 -m venv $REJAX_VENV && $REJAX_VENV/bin/pip install rejax jax==0.10.2 gymnax==0.0.9
# purejaxql unpacks gymnax's pre-1.0 5-tuple step: benchmarks/purejaxql_pqn.py gives it a
# wrapper with done = terminated | truncated (as purejaxql expects). rejax 0.1.3 unpacks it too,
# so its venv has gymnax 0.0.9, the version of rejax's own lock file.
#
# Evaluation alike: purejaxql tests its greedy policy every 5% of the updates on 128 envs
# (TEST_INTERVAL, TEST_NUM_ENVS); scanrl evaluates at the same updates with 128 episodes
# (--eval-every, --eval-episodes). rejax evaluates every eval_freq steps on 128 envs with
# epsilon 0.005; scanrl at rejax's settings evaluates at the same updates, greedily.
set -euo pipefail
OUT=${1:?OUT_DIR}; SEEDS=${2:-5}; MINATAR_STEPS=${3:-500000}; shift $(( $# < 3 ? $# : 3 ))
GAMES=("$@"); [ ${#GAMES[@]} -gt 0 ] || GAMES=(Breakout)
PJQ=${PJQ_VENV:?PJQ_VENV}/bin/python; REJ=${REJAX_VENV:?REJAX_VENV}/bin/python
mkdir -p "$OUT"
# scanrl compiles afresh each time (--no-compile-cache), as the peers do: a program loaded from
# the store would leave its compile out of scanrl's wall only
scanrl() { python algos/pqn.py --num-seeds "$SEEDS" --num-devices 1 --log-every 0 --no-compile-cache \
    --out-dir "$OUT/scanrl" "$@"; }

TEST_INTERVAL=${TEST_INTERVAL:-0.05}
if [ "${CARTPOLE:-1}" != 0 ]; then
# CartPole-v1 at purejaxql's pqn_cartpole.yaml (scanrl's defaults): 244 updates, a test every 12
scanrl --env CartPole-v1 --eval-every 12 --eval-episodes 128 | tee "$OUT/scanrl_cartpole.txt"
$PJQ benchmarks/purejaxql_pqn.py --script gymnax --env CartPole-v1 --total-timesteps 500000 \
    --num-seeds "$SEEDS" --out "$OUT/purejaxql_cartpole.json"

# CartPole-v1 at rejax's configs/gymnax/cartpole.yaml (pqn): Adam, lr 3e-4 constant, 16 envs x
# 128 steps, 5 epochs x 16 minibatches, lambda 0.9, epsilon 1 -> 0.05 over half the run, a 64x64
# relu MLP with layer norm, rewards unscaled, an evaluation every 16,384 steps (8 updates).
# rejax clips each gradient element at 10 (optax.clip); scanrl clips the global norm at 10.
scanrl --env CartPole-v1 --total-timesteps 524288 --num-envs 16 --num-steps 128 \
    --num-minibatches 16 --num-epochs 5 --optimizer adam --learning-rate 3e-4 --no-anneal-lr \
    --q-lambda 0.9 --epsilon-end 0.05 --epsilon-fraction 0.5 --reward-scale 1 --hidden 64 64 \
    --eval-every 8 --eval-episodes 128 | tee "$OUT/scanrl_cartpole_rejax.txt"
$REJ benchmarks/rejax_pqn.py --config "${REJAX_DIR:?REJAX_DIR}/configs/gymnax/cartpole.yaml" \
    --num-seeds "$SEEDS" --out "$OUT/rejax_cartpole.json"
fi

# MinAtar at purejaxql's pqn_minatar.yaml, MINATAR_STEPS per seed with the published 1e7-step
# schedules (TOTAL_TIMESTEPS_DECAY, scanrl's --decay-timesteps); a test every TEST_INTERVAL of the
# updates.
updates=$(( MINATAR_STEPS / 4096 )); every=$(python -c "print(int($updates * $TEST_INTERVAL))")
[ "${MINATAR:-1}" != 0 ] || GAMES=()
for game in "${GAMES[@]}"; do
    scanrl --env "$game-MinAtar" --total-timesteps "$MINATAR_STEPS" --decay-timesteps 10000000 \
        --eval-every "$every" --eval-episodes 128 | tee "$OUT/scanrl_$game.txt"
    $PJQ benchmarks/purejaxql_pqn.py --script minatar --env "$game-MinAtar" \
        --total-timesteps "$MINATAR_STEPS" --decay-timesteps 10000000 --num-seeds "$SEEDS" \
        --test-interval "$TEST_INTERVAL" --out "$OUT/purejaxql_$game.json"
done
