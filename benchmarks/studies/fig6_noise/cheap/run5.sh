#!/bin/bash
export OPENBLAS_NUM_THREADS=1
cd "$(dirname "$0")"
while kill -0 $(cat run4.pid) 2>/dev/null; do sleep 2; done
for s in 1 2; do for c in m3_ez3_r10 m5_ez2_r10 m10_ez3_r10 m10_ez1_r10 m1_ez1_r5; do taskset -c 0 python lna_orth.py $c lna 8 $s > results/log_orth8_${c}_s$s.txt 2>&1; echo orth8 $c $s done; done; done
for c in m3_ez3_r10 m5_ez2_r10 m10_ez3_r10 m10_ez1_r10 m1_ez1_r5; do taskset -c 0 python lna.py $c lna 8 3 > results/log_mc8_${c}_s3.txt 2>&1; echo mc8 $c 3 done; done
