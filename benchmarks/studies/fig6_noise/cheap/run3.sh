#!/bin/bash
export OPENBLAS_NUM_THREADS=1
cd "$(dirname "$0")"
export NOISE_CHEAP_OUT="${NOISE_CHEAP_OUT:-$PWD/results}"; mkdir -p "$NOISE_CHEAP_OUT"
for c in m10_ez3_r10 m3_ez3_r10; do taskset -c 0 python hybrid.py $c 20 class 8 0; done
for c in m3_ez3_r10 m5_ez2_r10 m10_ez3_r10 m10_ez1_r10 m1_ez1_r5; do NOISE_STUDY_OUT="$NOISE_CHEAP_OUT" taskset -c 0 python ../lna.py $c lna 8 1 > "$NOISE_CHEAP_OUT"/log_mc8_${c}_s1.txt 2>&1; echo mc8 $c done; done
for c in m10_ez1_r10 m5_ez2_r10 m1_ez1_r5; do taskset -c 0 python hybrid.py $c 20 class 8 0; done
for c in m3_ez3_r10 m5_ez2_r10 m10_ez3_r10 m10_ez1_r10 m1_ez1_r5; do NOISE_STUDY_OUT="$NOISE_CHEAP_OUT" taskset -c 0 python ../lna.py $c lna 8 2 > "$NOISE_CHEAP_OUT"/log_mc8_${c}_s2.txt 2>&1; echo mc8 $c done; done
taskset -c 0 python lowrank.py m10_ez3_r10 40 class
