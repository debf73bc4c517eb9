#!/bin/bash
export OPENBLAS_NUM_THREADS=1
cd "$(dirname "$0")"
export NOISE_CHEAP_OUT="${NOISE_CHEAP_OUT:-$PWD/results}"; mkdir -p "$NOISE_CHEAP_OUT"
for s in 2 3; do for c in m3_ez3_r10 m5_ez2_r10 m10_ez3_r10 m10_ez1_r10 m1_ez1_r5; do NOISE_STUDY_OUT="$NOISE_CHEAP_OUT" taskset -c 0 python ../lna.py $c lna 4 $s > "$NOISE_CHEAP_OUT"/log_mc4_${c}_s$s.txt 2>&1; echo mc4 $c $s; done; done
for s in 1 2 3; do for c in m3_ez3_r10 m5_ez2_r10 m10_ez3_r10 m10_ez1_r10 m1_ez1_r5; do NOISE_STUDY_OUT="$NOISE_CHEAP_OUT" taskset -c 0 python ../lna.py $c lna 2 $s > "$NOISE_CHEAP_OUT"/log_mc2_${c}_s$s.txt 2>&1; echo mc2 $c $s; done; done
