#!/bin/bash
# One device run: stage-2 tests + parity on the Xeon, then benches (stage 2: avx2 vs avx512 vs
# ggml; stage 1: avx512 only, NT 4 and 8). Progress lines (with results) go to the .txt files.
O=${OUT:-/tmp/out}; C=.carry-avx512; mkdir -p "$O"
{
  nproc; grep -m1 "model name" /proc/cpuinfo; grep -o -w 'avx512[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
  echo "== s2 t_paths"; time timeout 70 $C/s2/t_paths --test-threads 14 2>&1 | tail -8
  $C/s2/t_paths simd_paths_present unsupported --nocapture 2>&1 | grep -i "note\|paths under\|test result"
  echo "== s2 parity cpu-avx512"; timeout 25 $C/s2/qkern parity --backend cpu-avx512 2>&1 | tail -17
  echo "== s2 parity cpu (best path)"; timeout 25 $C/s2/qkern parity --backend cpu 2>&1 | tail -2
  echo "== s2 formats"; $C/s2/qkern formats 2>&1 | grep -i "path" | head -3
  echo "== forced avx2"; QKERN_CPU=avx2 timeout 25 $C/s2/qkern parity --backend cpu 2>&1 | tail -1
} > "$O/tests.txt" 2>&1
cat "$O/tests.txt"
B="--threads 1 --shape out-of-cache --weights-mib 256 --ops matmul --seconds 0.08 --min-reps 3"
time timeout ${T2:-80} $C/s2/qkern bench --backends cpu-avx2,cpu-avx512 --tokens 1,4,8 $B --note "stage 2 (VNNI helpers)" --out-dir "$O/bench-s2" > "$O/bench-s2.txt" 2> "$O/bench-s2.progress"
echo "bench s2 rc=$?"
time timeout ${T1:-40} $C/s1/qkern bench --backends cpu-avx512 --tokens 4,8 $B --note "stage 1 (AVX2 source, AVX-512 features)" --out-dir "$O/bench-s1" > "$O/bench-s1.txt" 2> "$O/bench-s1.progress"
echo "bench s1 rc=$?"
