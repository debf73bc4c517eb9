#!/bin/bash
export OPENBLAS_NUM_THREADS=1
cd "$(dirname "$0")"
export NOISE_CHEAP_OUT="${NOISE_CHEAP_OUT:-$PWD/results}"; mkdir -p "$NOISE_CHEAP_OUT"
for s in 1 2; do for c in m3_ez3_r10 m5_ez2_r10 m10_ez3_r10 m10_ez1_r10 m1_ez1_r5; do NOISE_DRAW=orth NOISE_STUDY_OUT="$NOISE_CHEAP_OUT" taskset -c 0 python ../lna.py $c lna 8 $s > "$NOISE_CHEAP_OUT"/log_orth8_${c}_s$s.txt 2>&1; echo orth8 $c $s done; done; done
for c in m3_ez3_r10 m5_ez2_r10 m10_ez3_r10 m10_ez1_r10 m1_ez1_r5; do NOISE_STUDY_OUT="$NOISE_CHEAP_OUT" taskset -c 0 python ../lna.py $c lna 8 3 > "$NOISE_CHEAP_OUT"/log_mc8_${c}_s3.txt 2>&1; echo mc8 $c 3 done; done
