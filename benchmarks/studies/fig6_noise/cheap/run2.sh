#!/bin/bash
export OPENBLAS_NUM_THREADS=1
cd "$(dirname "$0")"
export NOISE_CHEAP_OUT="${NOISE_CHEAP_OUT:-$PWD/results}"; mkdir -p "$NOISE_CHEAP_OUT"
CELLS="m3_ez3_r10 m5_ez2_r10 m10_ez3_r10 m10_ez1_r10 m1_ez1_r5"
for c in $CELLS; do taskset -c 0 python lowrank.py $c 4 class; done
for c in $CELLS; do taskset -c 0 python hybrid.py $c 8 class 8 0; done
for c in $CELLS; do taskset -c 0 python lowrank.py $c 8 class; done
for c in $CELLS; do taskset -c 0 python hybrid.py $c 8 class 8 1; done
