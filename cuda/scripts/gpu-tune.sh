#!/usr/bin/env bash
# Runs on the GPU machine (`device` tool) with target/qk-cuda-carry carried (cuda_bench and
# t_cuda_gpu built here: see the header of cuda/examples/cuda_bench.rs). GPU parity first, then
# the bench, then NVRTC-option sweeps (QKERN_CUDA_NVRTC_OPTS) on chosen formats.
#   bash cuda/scripts/gpu-tune.sh "OPTS|formats" ...
set -uo pipefail
C=target/qk-cuda-carry; R=${OUT:-/tmp/out}; mkdir -p "$R"
[ -e /work/main ] || { mkdir -p /work; ln -s "$PWD" /work/main; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/env.txt" 2>&1
QKERN_RESULTS_DIR=$R timeout 150 $C/t_cuda_gpu --nocapture --test-threads 1 > "$R/parity.log" 2>&1
grep -E "test result|FAILED|panicked|differ" "$R/parity.log" | head -20
QKERN_RESULTS_DIR=$R timeout 150 $C/cuda_bench --gib 1 --iters 20 > "$R/cuda_bench.md" 2>&1; cat "$R/cuda_bench.md"
for v in "$@"; do
  o=${v%%|*}; f=${v##*|}
  echo "## QKERN_CUDA_NVRTC_OPTS='$o' formats $f" >> "$R/sweep.md"
  QKERN_CUDA_NVRTC_OPTS="$o" timeout 60 $C/cuda_bench --gib 1 --iters 10 --no-experts --formats "$f" 2>&1 | grep '^|' >> "$R/sweep.md"
done
cat "$R/sweep.md" 2>/dev/null
