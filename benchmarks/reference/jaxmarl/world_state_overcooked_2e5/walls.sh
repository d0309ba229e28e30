#!/bin/bash
# walls.sh OUT: IPPO on Overcooked cramped_room at its recipe, main's tree against this one,
# 3 rounds, the order alternating; each process timed whole from outside. MAIN_PY, MAIN_TREE:
# a virtualenv with main installed and its checkout; TREE_PY, TREE: the same for this tree
OUT=$1; mkdir -p $OUT
run() {  # run SIDE ROUND
    local py tree; if [ $1 = main ]; then py=$MAIN_PY; tree=$MAIN_TREE
    else py=$TREE_PY; tree=$TREE; fi
    cd $tree; local s=$(date +%s.%N)
    $py algos/ppo.py --env jaxmarl/overcooked_cramped_room --recipe published --num-seeds 5 \
        --num-devices 1 --no-compile-cache --total-timesteps 204800 --eval-every 100 \
        --eval-episodes 128 --log-every 0 --out-dir $OUT/$1_$2 > $OUT/$1_$2.txt 2>&1
    local e=$(date +%s.%N)
    awk -v s=$s -v e=$e -v side=$1 -v r=$2 'BEGIN {printf "%s\t%s\t%.2f\n", r, side, e - s}' >> $OUT/walls.tsv
}
run main 1; run tree 1; run tree 2; run main 2; run main 3; run tree 3
