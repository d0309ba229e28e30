# Side by side, one sitting: a base checkout against this one, alternating, a cold compile cache each run.
# Usage: edit the two trees and venvs below; prints label, command, env steps/s, compile s, wall s.
run() { # tree venv label args...
  local tree=$1 venv=$2 label=$3; shift 3; local out=$(mktemp -d)
  JAX_COMPILATION_CACHE_DIR=$(mktemp -d) $venv/bin/python $tree/algos/$1 "${@:2}" --out-dir $out --log-every 10 > /dev/null 2>&1
  python3 -c "import json,glob; s=json.load(open(glob.glob('$out/*/summary.json')[0])); print('$label', '${*}', round(s['env_steps_per_second']), round(s['compile_seconds'],2), round(s['wall_seconds'],2))"
}
for r in 1 2 3; do
 for cfg in "ppo.py --num-seeds 1" "ppo.py --num-seeds 8" "sac.py --num-seeds 1 --total-timesteps 20000"; do
  if [ $((r % 2)) = 1 ]; then order="base head"; else order="head base"; fi
  for w in $order; do
   if [ $w = base ]; then run /work/base /work/venv-base base $cfg; else run /work/ci-check/main /work/ci-check/venv head $cfg; fi
  done
 done
done
