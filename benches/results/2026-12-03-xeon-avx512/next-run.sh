#!/bin/bash
# Next Xeon run (not yet run): the final build's tests + parity, then ONE interleaved bench of
# avx512 vs avx2 (+ ggml) so that the per-format choice in cpu/src/matmul.rs can be made on
# numbers from one run. ~150 s. Progress lines (first backend = cpu-avx512) survive a timeout.
O=${OUT:-/tmp/out}; C=.carry-avx512; mkdir -p "$O"
{
  grep -m1 "model name" /proc/cpuinfo
  timeout 40 $C/final/t_paths --test-threads 14 2>&1 | tail -3
  $C/final/t_paths simd_paths_present --nocapture 2>&1 | grep -i "note\|paths under"
  timeout 25 $C/final/qkern parity --backend cpu-avx512 2>&1 | tail -2
} > "$O/tests.txt" 2>&1; cat "$O/tests.txt"
B="--threads 1 --shape out-of-cache --weights-mib 128 --ops matmul --seconds 0.05 --min-reps 3"
timeout ${T:-100} $C/final/qkern bench --backends cpu-avx512,cpu-avx2 --tokens 1,4,8 $B --note "final: stage 1 + vpdpbusd" --out-dir "$O/bench" > "$O/bench.txt" 2> "$O/bench.progress"
echo "bench rc=$?"; cat "$O/bench.txt" | tail -45
