#!/bin/bash
export OPENBLAS_NUM_THREADS=1
cd "$(dirname "$0")"
export NOISE_CHEAP_OUT="${NOISE_CHEAP_OUT:-$PWD/results}"; mkdir -p "$NOISE_CHEAP_OUT"
taskset -c 0 python lowrank.py m3_ez3_r10 6 class
taskset -c 0 python lowrank.py m3_ez3_r10 12 class
taskset -c 0 python lowrank.py m5_ez2_r10 10 class
taskset -c 0 python hybrid.py m3_ez3_r10 12 class 4 0
taskset -c 0 python hybrid.py m5_ez2_r10 20 class 4 0
taskset -c 0 python hybrid.py m1_ez1_r5 4 class 4 0
taskset -c 0 python lowrank.py m10_ez1_r10 40 class
taskset -c 0 python hybrid.py m10_ez3_r10 40 class 8 0
taskset -c 0 python hybrid.py m10_ez1_r10 40 class 8 0
for c in m3_ez3_r10 m10_ez3_r10; do taskset -c 0 python lowrank.py $c 8 gauss 8 1; done
for c in m3_ez3_r10 m5_ez2_r10 m10_ez3_r10 m10_ez1_r10 m1_ez1_r5; do NOISE_STUDY_OUT="$NOISE_CHEAP_OUT" taskset -c 0 python ../lna.py $c lna 4 1 > "$NOISE_CHEAP_OUT"/log_mc4_${c}_s1.txt 2>&1; echo mc4 $c done; done
