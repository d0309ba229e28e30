#!/usr/bin/env bash
# The CPU cells that the cached-start change (9cf5eee, 2026-11-30 02:51) could have moved, run
# again with the commands that made them: PPO, IMPALA, GRPO (and recurrent PPO, PQN) now draw a
# Brax or Playground env's new cached starts from the state's key, not their rollout key, so
# a cell whose environments draw new starts within its budget differs bit for bit from its run
# as published (benchmarks/HISTORY.md, 2026-12-02, lists the cells with their old figures; its section of
# 2026-12-04, 22:24-, has the last of them: the cells whose environments never draw came out
# equal, on the machine that first ran them). Each cell writes to
# benchmarks/reference/rerun_cached_start/<cell>/, so the old raw
# data stays where it is; each prints its elapsed seconds. Run from the repository root, on the
# 2-core CPU with nothing else on the cores:
#
#   bash benchmarks/rerun_cached_start.sh            # every cell, about 95 minutes in all
#   bash benchmarks/rerun_cached_start.sh CELL ...   # some of them (the names below)
#
# Estimated walls, from each cell's old raw data (that machine; the 2026-11-30 machine ran the
# Craftax baseline about 1.8x faster, so these are upper figures):
#   core_ppo_brax_inverted_pendulum       ~5 min  (283 s in benchmarks/reference/rerun/report.json,
#                                                   cores shared then)
#   suites_ppo_playground_CartpoleBalance ~15 min (896 s, benchmarks/reference/rerun_unroll/report.json)
#   suites_impala_playground_CartpoleBalance ~3 min (150 s, rerun/report.json)
#   suites_grpo_playground_CartpoleBalance   ~3 min (129 s, rerun/report.json)
#   pbt_brax_idp                          ~9 min  (sweep 267 s + PBT 273 s, benchmarks/reference/pbt/brax_idp.json)
#   pbt_brax_idp_eval_fitness             ~10 min (289 + 330 s, pbt/brax_idp_eval_fitness.json)
#   pbt_brax_idp_burn_in                  ~9 min  (272 + 278 s, pbt/brax_idp_burn_in.json)
#   pbt_brax_idp_interval6                ~9 min  (282 + 278 s, pbt/brax_idp_interval6.json; the docs' 3,895)
#   gae_per_rollout_CheetahRun            ~15 min (scanrl 899 s; Brax's side kept, see below)
#   gae_per_rollout_WalkerWalk            ~17 min (scanrl 1,006 s; Brax's side kept)
#
# The reference-table cells run as scanrl-bench suites of one cell each, written into the cell's
# folder as suite.yaml: the cell exactly as benchmarks/suites/reference_rerun.yaml (PPO on
# brax/inverted_pendulum, IMPALA and GRPO on CartpoleBalance) or reference_unroll.yaml (PPO on
# CartpoleBalance) has it, 10 seeds; each run folder keeps its provenance.json (the scanrl commit),
# and its checkpoints are removed afterwards. The PBT cells are benchmarks/pbt.py's cells of the
# same names, 5 repetitions, as published. The gae_per_rollout cells are scanrl's PPO with its own
# update (GAE once per rollout, as when they ran on 2026-11-25/26): today's recipe sets
# --unroll-length 30 --fresh-obs-stats --init lecun_uniform, so the flags set those back; Brax's
# side does not depend on scanrl's tree and is kept from the old cell (--reuse-brax checks that
# the trainer arguments and seeds are the same; they were on 2026-12-02), so only scanrl's returns
# (the docs' 105.8 and 71.7) are new and the wall ratio is not of one sitting.
set -euo pipefail
ROOT=benchmarks/reference/rerun_cached_start
[ -f benchmarks/rerun_cached_start.sh ] || { echo "run from the repository root" >&2; exit 2; }
echo "scanrl at $(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!benchmarks/reference' || echo ' (dirty)')"

bench_cell() {  # bench_cell NAME ALGO ENV STEPS [FLAGS]: a one-cell scanrl-bench suite in ROOT/NAME
  local dir="$ROOT/$1"
  mkdir -p "$dir"
  {
    echo "# $1: one cell of the cached-start re-run (benchmarks/rerun_cached_start.sh)"
    echo "seeds: 10"
    echo "metric: return"
    echo "cells:"
    echo "  - algos: [$2]"
    echo "    envs: [$3]"
    echo "    total_timesteps: $4"
    [ -z "${5:-}" ] || echo "    flags: $5"
  } > "$dir/suite.yaml"
  scanrl-bench "$dir/suite.yaml" --out-dir "$dir"
  find "$dir/runs" -type d -name checkpoints -prune -exec rm -rf {} +
}

run_cell() {
  case "$1" in
    core_ppo_brax_inverted_pendulum) bench_cell "$1" ppo brax/inverted_pendulum 200000 ;;
    suites_ppo_playground_CartpoleBalance) bench_cell "$1" ppo playground/CartpoleBalance 200000 ;;
    suites_impala_playground_CartpoleBalance) bench_cell "$1" impala playground/CartpoleBalance 200000 ;;
    suites_grpo_playground_CartpoleBalance) bench_cell "$1" grpo playground/CartpoleBalance 200000 "{num-steps: 1000}" ;;
    pbt_brax_idp|pbt_brax_idp_eval_fitness|pbt_brax_idp_burn_in|pbt_brax_idp_interval6)
      python benchmarks/pbt.py --cell "${1#pbt_}" --out "$ROOT/$1" ;;
    gae_per_rollout_CheetahRun|gae_per_rollout_WalkerWalk)
      python benchmarks/brax_trainers.py --env "playground/${1#gae_per_rollout_}" --timesteps 245760 --seeds 5 \
        --scanrl-flags "--unroll-length 0 --no-fresh-obs-stats --init orthogonal" \
        --reuse-brax "benchmarks/reference/brax_trainers/gae_per_rollout/ppo__playground-${1#gae_per_rollout_}.json" \
        --out "$ROOT/$1" ;;
    *) echo "no cell $1" >&2; return 2 ;;
  esac
}

CELLS=(core_ppo_brax_inverted_pendulum suites_ppo_playground_CartpoleBalance
       suites_impala_playground_CartpoleBalance suites_grpo_playground_CartpoleBalance
       pbt_brax_idp pbt_brax_idp_eval_fitness pbt_brax_idp_burn_in pbt_brax_idp_interval6
       gae_per_rollout_CheetahRun gae_per_rollout_WalkerWalk)
[ $# -eq 0 ] || CELLS=("$@")
for cell in "${CELLS[@]}"; do
  start=$(date +%s)
  echo "== $cell, started $(date -u '+%Y-%m-%d %H:%M:%S') UTC"
  run_cell "$cell"
  echo "== $cell: $(( $(date +%s) - start )) s"
done
