#!/bin/bash
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
cd "$(dirname "$0")"
export NOISE_STUDY_OUT="${NOISE_STUDY_OUT:-$PWD/results}"
for c in m3_ez3_r10 m5_ez2_r10; do for b in Y Z; do
  NOISE_BLOCK=$b taskset -c 0 python nl.py $c gauss 40 > log_nl_${c}_only$b.txt 2>&1; done; done
LEVEL_T_N=256 taskset -c 0 python nl.py m1_ez1_r5 gauss 40 > log_nl_m1_N256.txt 2>&1
for c in m3_ez3_r10 m10_ez3_r10; do taskset -c 0 python runs.py $c 40 512 > log_runs_${c}_B512.txt 2>&1; done
taskset -c 0 python lna_dense.py m1_ez1_r5 > log_lna_dense_m1.txt 2>&1
echo done > extra_done
