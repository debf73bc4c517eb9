#!/bin/bash
# all heavy work pinned to core 0, one BLAS thread
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
cd "$(dirname "$0")"
export NOISE_STUDY_OUT="${NOISE_STUDY_OUT:-$PWD/results}"
for c in m1_ez1_r5 m5_ez2_r10; do
  for m in lna mc2; do taskset -c 0 python lna.py $c $m 128 > log_lna_${c}_${m}.txt 2>&1; done
done
taskset -c 0 python lna.py m3_ez3_r10 mc2 128 > log_lna_m3_ez3_r10_mc2.txt 2>&1
for c in m1_ez1_r5 m3_ez3_r10 m5_ez2_r10 m10_ez1_r10 m10_ez3_r10; do
  taskset -c 0 python nl.py $c gauss 40 > log_nl_${c}.txt 2>&1
done
for c in m10_ez3_r10 m10_ez1_r10; do
  for m in lna mc2; do taskset -c 0 python lna.py $c $m 64 > log_lna_${c}_${m}.txt 2>&1; done
done
echo done > all_done
