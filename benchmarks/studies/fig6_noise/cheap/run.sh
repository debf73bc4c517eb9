#!/bin/bash
export OPENBLAS_NUM_THREADS=1
cd "$(dirname "$0")"
export NOISE_CHEAP_OUT="${NOISE_CHEAP_OUT:-$PWD/results}"; mkdir -p "$NOISE_CHEAP_OUT"
CELLS="m3_ez3_r10 m5_ez2_r10 m10_ez3_r10 m10_ez1_r10 m1_ez1_r5"
for c in $CELLS; do taskset -c 0 python lowrank.py $c 8 gauss 8 0; done
for c in $CELLS; do taskset -c 0 python lowrank.py $c 20 class; done
for c in $CELLS; do taskset -c 0 python lowrank.py $c 16 gauss 16 0; done
for c in $CELLS; do taskset -c 0 python lowrank.py $c 8 gauss 8 1; done
for c in $CELLS; do taskset -c 0 python lowrank.py $c 4 gauss 4 0; done
for c in $CELLS; do for s in 1 2; do NOISE_STUDY_OUT="$NOISE_CHEAP_OUT" taskset -c 0 python ../lna.py $c lna 8 $s > "$NOISE_CHEAP_OUT"/log_mc8_${c}_s$s.txt 2>&1; echo mc8 $c $s done; done; done
for c in $CELLS; do taskset -c 0 python lowrank.py $c 32 gauss 32 0; done
