#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool), from the checkout, with .carry (built here by
# scripts/gpu-bundle.sh) and .gl (the Vulkan loader debs) carried.
#   bash scripts/gpu-run.sh [enginediag] [parity] [cparity] [rpsplit] [cudasweep] [hmma] [ntsweep] [pipec] [pairs] [ktile] [retune] [mmant] [wparity] [wgpulat] [callpath] [envsweep] [pending] [cudabench] [wgpubench] [qbench] [engine] [enginepar] [avx512] [cpudefault] [cublas] [coop] [ncu] [unmeasured] [cact] [mma2] [prows] [q8k] [cq8k] [iqnt] [ab] [abc] [dout] [wstage] [stream] [ciqtile] [experts] [layer] [groups] [qknobs] [auto]
#   (default: all)
# Each step has its own timeout so one hang cannot eat the run.
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json CI=true
[ -e /work/main ] || { mkdir -p /work; ln -s "$PWD" /work/main; }
# Logs go to /tmp/gpu-results, packed at the end into $OUT/results.tgz (the tool returns at
# most 8 files).
C=.carry; R=/tmp/gpu-results; rm -rf "$R"; mkdir -p "$R"
# cuBLAS for cuda_bench's dense bf16 reference: the image's pip wheels (nvidia-cublas), else
# the toolkit's.
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
for d in "$site"/nvidia/cu13/lib "$site"/nvidia/cublas/lib /usr/local/cuda/lib64; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; done
steps=${*:-parity cudabench wgpubench qbench engine enginepar avx512}
# `auto`: the steps for the card that came (the device tool may lend an H100 for an H200 call):
# AUTO_H200 on an H200 (the issues' goals are set there), AUTO_OTHER on any other card.
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$card" in *H200*) auto=${AUTO_H200:-parity experts layer qbench cudabench} ;; *) auto=${AUTO_OTHER:-parity experts layer} ;; esac
steps=$(for s in $steps; do if [ "$s" = auto ]; then echo $auto; else echo "$s"; fi; done)
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv;
  nvcc --version 2>/dev/null | tail -2; lscpu | grep -E 'Model name'; grep -o 'avx512[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo; } > "$R/env.txt" 2>&1
# cuda_bench --mma-sweep (every NT 1..8 of every kernel family) once per "opts|formats" variant of
# $1 (';'-separated), the NVRTC defines in QKERN_CUDA_NVRTC_OPTS, into $R/ntsweep.md.
ntsweep_run() {
  IFS=';' read -ra vs <<< "$1"
  for v in "${vs[@]}"; do o=${v%%|*}; f=${v##*|}; echo "## QKERN_CUDA_NVRTC_OPTS='$o' formats $f" >> "$R/ntsweep.md"
    QKERN_CUDA_NVRTC_OPTS="$o" timeout ${NTSWEEP_TIMEOUT:-150} $C/cuda_bench --gib 1 --iters 10 --kernels-only --no-forced --no-cublas --mma-sweep \
      --formats "$f" 2>&1 | grep -E 'NT 1..8|^\| (q|iq|nv)|regs|rror' >> "$R/ntsweep.md"
  done
}
# `layer` and `groups`: $Q, the qkern to run, and the Qwen3-30B-A3B-shaped layer in /tmp/moe.gguf
# (written once a run).
moe_gguf() {
  Q=$C/qkern_gpu; [ -x "$Q" ] || Q=$C/qkern
  [ -e /tmp/moe.gguf ] || $Q gguf-synth --out /tmp/moe.gguf --experts 128 --top-k 8 --hidden 2048 --ffn 768 --format q4_K --down-format q5_1
}
for s in $steps; do case $s in
parity)
  { QKERN_RESULTS_DIR=$R timeout 100 $C/t_cuda_gpu --nocapture --test-threads 1
    timeout 60 $C/t_wgpu_float_ops --nocapture
    timeout 150 $C/t_wgpu_random_parity --nocapture
    timeout 40 $C/t_wgpu_vectors --nocapture
    timeout 30 $C/qkern parity --backend cuda; timeout 40 $C/qkern parity --backend wgpu
  } > "$R/parity.log" 2>&1
  grep -E "test result|FAILED|panicked|adapter|bit-equal|differ|normal domain|FTZ" "$R/parity.log" | head -40 ;;
# The IQ2/IQ3 tensor-core kernels: bits of each QK_IQ_HMMA value in HMMA_VALUES (default 0, the
# int8 products; 1 is the default fp16, the only other value the backend accepts) with the live
# GPU test and `qkern parity`, then every NT per HMMA_SWEEP variant (default: 0 and 1, twice,
# interleaved), appended to ntsweep.md. (Both former 2s, B staged a CTA in session 28 and B from
# a q8_K fp16 copy in session 29, measured slower than 1 and are removed.)
hmma) F=${HMMA_FORMATS:-iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s}
  for v in ${HMMA_VALUES:-0}; do
    { QKERN_CUDA_NVRTC_OPTS=-DQK_IQ_HMMA=$v QKERN_RESULTS_DIR=$R timeout 100 $C/t_cuda_gpu --nocapture --test-threads 1
      QKERN_CUDA_NVRTC_OPTS=-DQK_IQ_HMMA=$v timeout 30 $C/qkern parity --backend cuda; } > "$R/hmma${v}_parity.log" 2>&1
    echo "## QK_IQ_HMMA=$v"; grep -E "test result|FAILED|panicked|bit-equal|differ" "$R/hmma${v}_parity.log" | head -20; done
  ntsweep_run "${HMMA_SWEEP:--DQK_IQ_HMMA=0|$F;|$F;-DQK_IQ_HMMA=0|$F;|$F}"; cat "$R/ntsweep.md" ;;
# CUDA's IQ2/IQ3 formats tiled (QKERN_CUDA_IQ_TILE=1: session 30, the default since session 31):
# the bits (live GPU test, `qkern parity`), then cuda_bench --mma-sweep of the five formats
# row-major / tiled, twice, interleaved.
ciqtile) F=${CIQTILE_FORMATS:-iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s}
  { QKERN_CUDA_IQ_TILE=1 QKERN_RESULTS_DIR=$R timeout 100 $C/t_cuda_gpu --nocapture --test-threads 1
    QKERN_CUDA_IQ_TILE=1 timeout 30 $C/qkern parity --backend cuda; } > "$R/ciqtile_parity.log" 2>&1
  grep -E "test result|FAILED|panicked|bit-equal|differ" "$R/ciqtile_parity.log" | head -20
  for i in 1 2; do for v in 0 1; do echo "## QKERN_CUDA_IQ_TILE=$v round $i" >> "$R/ciqtile.md"
    QKERN_CUDA_IQ_TILE=$v timeout ${CIQTILE_TIMEOUT:-150} $C/cuda_bench --gib 1 --iters 10 --kernels-only --no-forced --no-cublas --mma-sweep \
      --formats "$F" 2>&1 | grep -E 'NT 1..8|^\| (iq)|regs|rror' >> "$R/ciqtile.md"; done; done; cat "$R/ciqtile.md" ;;
# The CUDA half of `parity` alone.
cparity) { QKERN_RESULTS_DIR=$R timeout 160 $C/t_cuda_gpu --nocapture --test-threads 1
    timeout 30 $C/qkern parity --backend cuda; } > "$R/cparity.log" 2>&1
  grep -E "test result|FAILED|panicked|bit-equal|differ" "$R/cparity.log" | head -20 ;;
# wgpu random parity with each test in its own process, all at once (a crash names its test;
# session 39's run1 had the whole binary die silently): rp/<test>.log and each exit status in
# rp/rc.txt (RPSPLIT_BIN: another test binary of .carry).
rpsplit) mkdir -p "$R/rp"; B=$C/${RPSPLIT_BIN:-t_wgpu_random_parity}
  for t in $($B --list 2>/dev/null | sed -n 's/: test$//p'); do
    ( timeout ${RPSPLIT_TIMEOUT:-240} $B --exact "$t" --nocapture > "$R/rp/$t.log" 2>&1; echo "$t rc=$?" >> "$R/rp/rc.txt" ) & done; wait
  sort "$R/rp/rc.txt"; grep -hE "panicked|differ|FAILED" "$R"/rp/*.log | head -20 ;;
# The wgpu half of `parity` alone.
wparity) { timeout 150 $C/t_wgpu_random_parity --nocapture; echo "random parity rc=$?"; timeout 40 $C/t_wgpu_vectors --nocapture
    timeout 40 $C/qkern parity --backend wgpu; } > "$R/wparity.log" 2>&1
  grep -E "test result|FAILED|panicked|adapter|bit-equal|differ|rc=" "$R/wparity.log" | head -20 ;;
# The wgpu matmul call's cost beside its kernel (fixed and per output byte).
wgpulat) timeout 60 $C/wgpu_bench --latency > "$R/wgpu_latency.txt" 2>&1; cat "$R/wgpu_latency.txt" ;;
# Where the call path's time goes: wgpu's call split into phases (`--latency`), then `qkern bench`
# of a few formats with each backend alone and with both interleaved in one process.
callpath) F=${CALLPATH_FORMATS:-q4_K,q5_K,q6_K,q5_1,iq4_xs,iq2_xxs}
  { timeout 120 $C/wgpu_bench --latency
    for b in ${CALLPATH_BACKENDS:-wgpu cuda cuda,wgpu}; do echo "## qkern bench --backends $b"
      timeout 120 $C/qkern_gpu bench --backends $b --formats $F --tokens 1,8 --threads 1 --shape out-of-cache --weights-mib 1024 \
        --ops matmul --seconds 0.1 --quiet --note "callpath $b" --md "$R/callpath_$(echo $b | tr , _).md" > /dev/null 2>&1
      grep -E '^\| (q|iq|nv)' "$R/callpath_$(echo $b | tr , _).md"; done; } > "$R/callpath.txt" 2>&1; cat "$R/callpath.txt" ;;
# `qkern bench` (cuda and wgpu interleaved, call path) once per environment variant:
# ENV_SWEEP="VAR=v VAR2=w;;VAR=x" (an empty variant is the default), formats CALLPATH_FORMATS.
envsweep) F=${CALLPATH_FORMATS:-q4_K,q5_K,q6_K,q5_1,iq4_xs,iq2_xxs}; vs=(); rest="${ENV_SWEEP:-QKERN_WGPU_COPY_THREADS=1;};"
  while [[ $rest == *";"* ]]; do vs+=("${rest%%;*}"); rest=${rest#*;}; done  # keeps an empty variant (read -a drops a trailing one)
  i=0; for v in "${vs[@]}"; do i=$((i + 1)); echo "## variant $i: '${v:-default}'"
    env $v timeout ${QBENCH_TIMEOUT:-150} $C/qkern_gpu bench --backends cuda,wgpu --formats $F --tokens 1,8 --threads 1 --shape out-of-cache \
      --weights-mib 1024 --ops matmul --seconds 0.1 --quiet --note "envsweep '${v:-default}'" --md "$R/envsweep$i.md" > "$R/envsweep$i.log" 2>&1
    grep -E '^\| (q|iq|nv)' "$R/envsweep$i.md"; done 2>&1 | tee "$R/envsweep.txt" ;;
# The wgpu options waiting for a GPU measurement (benches/results/2026-12-04-h200-session9/NOTES.md):
# the q8_K split layout (QKERN_WGPU_Q8K) against ggml's blocks, each with the IQ2/IQ3 formats on
# 8 invocations (default) and on thread pairs (iqpair); kernel-only and call GB/s, bits checked.
pending) F=${PENDING_FORMATS:-q4_K,q5_K,q6_K,iq4_xs,iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s}
  for lay in ggml split; do QKERN_WGPU_Q8K=$lay timeout ${WGPU_BENCH_TIMEOUT:-200} $C/wgpu_bench --gib 1 --reps 8 \
      --variants ${PENDING_VARIANTS:-default,iqpair} --formats $F --csv "$R/pending_$lay.csv" > "$R/pending_$lay.log" 2>&1
    echo "## QKERN_WGPU_Q8K=$lay"; grep -E 'default|iqpair|adapter' "$R/pending_$lay.log"; done 2>&1 | tee "$R/pending.txt" ;;
# The q8_K layouts' defaults side by side (session 16): ggml's blocks alone (the IQ2/IQ3 formats
# on 8 invocations, the default before) against both layouts (the IQ formats on thread pairs
# reading the split copy, the rest ggml's blocks: the default now); kernel-only and call GB/s.
q8k) F=${Q8K_FORMATS:-q4_K,q5_K,q6_K,iq4_xs,iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s}
  for lay in ggml both; do QKERN_WGPU_Q8K=$lay timeout ${WGPU_BENCH_TIMEOUT:-200} $C/wgpu_bench --gib 1 --reps 8 --nt 1,8 \
      --variants default --formats $F --csv "$R/q8k_$lay.csv" > "$R/q8k_$lay.log" 2>&1
    echo "## QKERN_WGPU_Q8K=$lay"; grep -E 'default|adapter|rror' "$R/q8k_$lay.log"; done 2>&1 | tee "$R/q8k.txt" ;;
# The IQ2/IQ3 formats from 1 to 4 tokens and at 8: the default (8 invocations a row on ggml's
# blocks at few tokens, thread pairs on the split copy from each format's own count,
# wgpu/src/lib.rs `iq_pairs_from`; from NT 2 for all of them when session 16 ran it) against
# pairs at every NT (iqpair) and 8 invocations at every NT (iq8), to place Tuning::iq_pairs.
iqnt) timeout ${IQNT_TIMEOUT:-200} $C/wgpu_bench --gib 1 --reps 8 --nt 1,2,3,4,8 --variants default,iqpair,iq8 \
    --formats ${IQNT_FORMATS:-iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s} --csv "$R/iqnt.csv" > "$R/iqnt.log" 2>&1
  grep -E 'default|iqpair|iq8|adapter|rror' "$R/iqnt.log" ;;
# Kernel-only CUDA numbers for NVRTC-option variants: CUDA_SWEEP="OPTS|formats;OPTS|formats"
# (an empty OPTS is the default build), one table row per format and NT in sweep.md.
cudasweep) IFS=';' read -ra vs <<< "${CUDA_SWEEP:-|q4_K,q5_K,q6_K,nvfp4,iq4_nl}"
  for v in "${vs[@]}"; do o=${v%%|*}; f=${v##*|}; echo "## QKERN_CUDA_NVRTC_OPTS='$o' formats $f" >> "$R/sweep.md"
    QKERN_CUDA_NVRTC_OPTS="$o" timeout 90 $C/cuda_bench --gib 1 --iters 10 --kernels-only --formats "$f" 2>&1 | grep -E '^\||regs|rror' >> "$R/sweep.md"
  done; cat "$R/sweep.md" ;;
# cudasweep at every NT 1..8 (cuda_bench --mma-sweep: lanes / tensor cores, two threads / one thread
# per row), one cuda_bench per CUDA_SWEEP variant ("opts|formats;..."), in that order.
ntsweep) ntsweep_run "${CUDA_SWEEP:-|q8_0,q5_1,iq4_nl,nvfp4}"; cat "$R/ntsweep.md" ;;
# The staged row kernels' one-ahead loads (mm_common.cuh MMR_PIPE, U::PIPE_C): the defaults
# against the masks before session 27 (each unit's PIPE_R), twice, interleaved. Session 27 run2
# timed every NT with them against PIPE_R and took the gains into the defaults (the units' .cu).
pipec) F=${PIPEC_FORMATS:-nvfp4,q8_0,iq4_nl}; O="-DQK_PIPE_C_Q8=0x40u -DQK_PIPE_C_NL=0x0bu -DQK_PIPE_C_NV=0x1fu"
  ntsweep_run "|$F;$O|$F;|$F;$O|$F"; grep -E '^##|shared memory' "$R/ntsweep.md" ;;
# The staged kernels with two threads a row (qk_mmp_*, session 27: iq4_nl by block parity, q5_1
# by lane; q8_0's and nvfp4's lost at every NT and are not built) against one (qk_mmc_*) at
# every NT, with the staged kernels' CTA budget and with 3 CTAs (-DQK_MINB_P=3), each twice.
pairs) F=${PAIRS_FORMATS:-q5_1,iq4_nl}
  ntsweep_run "|$F;-DQK_MINB_P=3|$F;|$F;-DQK_MINB_P=3|$F"; grep -E '^##|shared memory|regs' "$R/ntsweep.md" | grep -E '^##|shared|mmp' ;;
# ntsweep with session 20's H100 retuning against the knobs it replaced, for a card it has not
# run on (about 4 minutes): the row kernels' one-ahead loads and NT 1 budget, q6_K's and iq4_xs's
# tensor-core budget and prefetch, and the untried IQ2/IQ3 tensor-core prefetch and budget.
retune) IQ=iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s
  ntsweep_run "-DQK_PIPE_R=0 -DQK_MINB_R1=2|q8_0,q5_1,iq4_nl,nvfp4;|q8_0,q5_1,iq4_nl,nvfp4,q6_K,iq4_xs;-DQK_MINB_MMA_Q6K=2 -DQK_PF_MMA_Q6K=2 -DQK_PF_MMA_IQ4XS=2|q6_K,iq4_xs;|$IQ;-DQK_PF_MMA_IQ=0|$IQ;-DQK_MINB_MMA_IQ=1 -DQK_PF_MMA_IQ=0|$IQ"
  grep -E '^##|NT 1..8' "$R/ntsweep.md" ;;
# q8_K activations as words against quads (QKERN_CUDA_Q8K; quads the default since session 21: the
# 256-element formats' lane kernels load a token's 4 lanes at once; sm_90 block loops 10-32 %
# shorter at NT 1 and 16-24 loads fewer, iq4_xs's lanes worse from NT 4): the bits with quads
# (t_cuda_gpu, qkern parity), then cuda_bench --mma-sweep (every NT, lanes and tensor cores, so
# the layouts' thresholds can be placed) words, quads, words, quads (CQ8K_REPS rounds).
cq8k) { QKERN_CUDA_Q8K=quads QKERN_RESULTS_DIR=$R timeout 160 $C/t_cuda_gpu --nocapture --test-threads 1
    QKERN_CUDA_Q8K=quads timeout 120 $C/qkern parity --backend cuda | tail -3; } > "$R/cq8k_parity.log" 2>&1
  grep -E "test result|FAILED|panicked|bit|differ" "$R/cq8k_parity.log" | head -20
  for i in $(seq ${CQ8K_REPS:-2}); do for lay in words quads; do echo "## QKERN_CUDA_Q8K=$lay ($i)" >> "$R/cq8k.md"
    QKERN_CUDA_Q8K=$lay timeout ${CQ8K_TIMEOUT:-200} $C/cuda_bench --gib 1 --iters 10 --kernels-only --no-forced --no-cublas --mma-sweep \
      --formats ${CQ8K_FORMATS:-q4_K,q5_K,q6_K,iq4_xs,iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s} 2>&1 | grep -E 'NT 1..8|^\| (q|iq)|rror' >> "$R/cq8k.md"
  done; done; cat "$R/cq8k.md" ;;
# The tensor-core kernels against the lane kernels at every NT 1..8 (their default thresholds).
mmant) timeout ${CUDA_BENCH_TIMEOUT:-200} $C/cuda_bench --gib 1 --iters 10 --kernels-only --no-forced --mma-sweep \
    --formats ${MMA_FORMATS:-q4_K,q5_K,q6_K,iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s,iq4_xs,q5_1} > "$R/mmant.md" 2>&1
  grep -E 'NT 1..8|rror' "$R/mmant.md" ;;
# The dense bf16 reference alone (cuda_bench's cuBLAS table), and torch's bf16 matmul of the
# same shapes as a cross-check of it.
cublas) { timeout 120 $C/cuda_bench --gib 1 --iters 20 --formats q8_0 --no-forced --no-experts --kernels-only
    timeout 120 python3 cuda/examples/cublas_gemv.py; } > "$R/cublas.md" 2>&1; cat "$R/cublas.md" ;;
# wgpu q4_K, q5_K and the IQ2/IQ3 formats on cooperative matrices (f16 tiles, Coop::Native): its bits (the random parity
# test's coop backend runs natively where the adapter has them), then lanes against tiles.
coop) { for v in f16 words; do QKERN_TEST_COOP=$v timeout 120 $C/t_wgpu_random_parity q4_k q5_k iq2 iq3 --nocapture; done
    QKERN_WGPU_COOP=1 timeout 400 $C/wgpu_bench --gib 1 --reps 8 --formats q4_K,q5_K,iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s --nt 1,2,4,8 --variants nocoop,coop,coopwords \
      --csv "$R/coop.csv"; } > "$R/coop.log" 2>&1; grep -E "adapter|q[45]_K|iq[23]|test result|fail|rror" "$R/coop.log" | head -30 ;;
# The MoE experts (cuda_bench --experts-only, NT 4: kernel, launch to result, grouped x8), this
# build against .carry/cuda_bench_old (OLD_REV=<commit> bash scripts/gpu-bundle.sh; session 35
# timed d68e9b8 against a235a5e) and against -DQK_MMK_SA=0 (q5_1's s factors read in the chain,
# as before session 34), -DQK_MMK_ST4=0 (the two-phase kernels store each row's result with its
# own 4 bytes, as before session 35: the host-out column) and -DQK_MMK_KSPREAD=0 (q4_K's chain
# factors and mins products on 4 threads a warp, as before session 35), in the order old, new,
# SA=0, ST4=0, KSPREAD=0, twice.
experts) for i in 1 2; do for v in old new sa0 st0 ks0; do x=$C/cuda_bench; o=; [ $v = old ] && x=$C/cuda_bench_old
      [ $v = sa0 ] && o=-DQK_MMK_SA=0; [ $v = st0 ] && o=-DQK_MMK_ST4=0; [ $v = ks0 ] && o=-DQK_MMK_KSPREAD=0
      [ -x "$x" ] || continue
      echo "## $v$i"; QKERN_CUDA_NVRTC_OPTS="$o" timeout ${EXPERTS_TIMEOUT:-60} $x --gib 0.01 --experts-only --no-cublas \
        --formats ${EXPERTS_FORMATS:-q4_K,q5_1,q8_0,iq4_nl} > "$R/experts_$v$i.md" 2>&1
      grep -E '^\| (gate|down)|two-phase|rror' "$R/experts_$v$i.md"; done; done 2>&1 | tee "$R/experts.txt" ;;
# Nsight Compute on the kernels short of a goal (where the runtime lets ncu read the counters:
# Firecracker, not gVisor): one launch each, clocks left alone. NCU_KERNELS="format:kernel-regex[:e] ..."
# (the regex anchored at the kernel's start; the second matching launch is profiled, after
# cuda_bench's warm-up launch; `:e`: an expert of cuda_bench's experts table, NT 4, instead of
# 0.25 GiB at K = 4096). Reports in ncu_<regex>.txt, the headline metrics on stdout.
ncu) N=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$N" ] || { echo "ncu: not found" | tee "$R/ncu.txt"; }
  for e in ${NCU_KERNELS:-q5_1:qk_mm_q5_1_n8_ q4_K:qk_mm_q4_k_n1_ iq2_xxs:qk_mm_iq2_xxs_n1_ q6_K:qk_mma_q6_k iq4_xs:qk_mm_iq4_xs_n1_ q8_0:qk_mm_q8_0_n8_ q4_K:qk_mma_q4_k q4_K:qk_mm_q4_k_n4_:e q5_1:qk_mmk_q5_1_n4:e}; do
    [ -n "$N" ] || break; IFS=: read -r f k x <<< "$e"; L="$R/ncu_$k$x.txt"
    if [ "$x" = e ]; then a="--gib 0.01 --experts-only"; else a="--gib 0.25 --iters 3 --kernels-only --no-forced --no-experts"; fi
    timeout 150 "$N" --clock-control none -k "regex:^$k" --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters \
      $C/cuda_bench $a --no-cublas --formats "$f" > "$L" 2>&1
    echo "## $f $k $x rc=$?"
    grep -E 'Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|^ +qk_|==ERROR|==PROF==' "$L" | head -16
  done 2>&1 | tee -a "$R/ncu.txt" ;;
# What was written without a GPU (sessions 13-14), each against its off switch, kernel-only
# (cuda_bench) unless said: the IQ lane kernels' lookups (all off: one grid copy, signs computed,
# generic addressing; then the grid copies alone; then the default: copies, sign tables, shared
# addresses), the NT 1 L2 prefetch
# distances (QK_PF1_*: 0, 2, 4), iq4_xs's NT 1 register budget (QK_MINB_W1 3, 4), q6_K's tensor cores on 2 CTAs (QK_MINB_MMA_Q6K=2, lazy loads), the
# 32-element formats' row kernels at NT 1-2 on 4 CTAs (QK_MINB_R12=4), q4_K's two-phase expert kernel (its note line, then the experts
# table with it on). (wgpu's grid copies, `gridrep`, were removed in session 35: 2-4x slower on the
# H100.) Bits: run cparity and
# wparity first (t_cuda_gpu runs the default build; QKERN_CUDA_NVRTC_OPTS applies to it too).
# About 9 minutes: a call of its own (UNMEASURED="cuda experts" picks parts).
unmeasured) IQ=iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s; KQ=q4_K,q5_K,q6_K,iq4_xs,nvfp4
  pf() { echo "-DQK_PF1_Q4K=$1 -DQK_PF1_Q5K=$1 -DQK_PF1_Q6K=$1 -DQK_PF1_IQ4XS=$1 -DQK_PF1_IQ=$1 -DQK_PF1_NV=$1"; }
  parts=${UNMEASURED:-cuda experts}
  { [[ $parts == *cuda* ]] && for v in "-DQK_GRID_REP=0 -DQK_SIGN_TAB=0 -DQK_IQ_SA_NTM=0|$IQ" "-DQK_SIGN_TAB=0 -DQK_IQ_SA_NTM=0|$IQ" "|$IQ,$KQ" "$(pf 2)|$IQ,$KQ" "$(pf 4)|$IQ,$KQ" "-DQK_MINB_W1=3|iq4_xs" "-DQK_MINB_W1=4|iq4_xs" "-DQK_MINB_MMA_Q6K=2|q6_K" "-DQK_MINB_R12=4|q5_1,iq4_nl,q8_0,nvfp4"; do o=${v%%|*}; f=${v##*|}
      echo "## QKERN_CUDA_NVRTC_OPTS='$o' formats $f"
      QKERN_CUDA_NVRTC_OPTS="$o" timeout 200 $C/cuda_bench --gib 1 --iters 10 --kernels-only --no-cublas --formats "$f" 2>&1 | grep -E '^\| (q|iq|nv)|rror'
    done
    [[ $parts == *experts* ]] && { echo "## experts (the two-phase kernels' padded shared arrays; the q4_K two-phase note), then QKERN_CUDA_KQ_MMK=0 (the S = 4 or tensor-core kernels)"
      timeout 60 $C/cuda_bench --gib 0.01 --experts-only --no-cublas 2>&1 | grep -E '^\| (gate|down)|two-phase|rror'
      QKERN_CUDA_KQ_MMK=0 timeout 60 $C/cuda_bench --gib 0.01 --experts-only --no-cublas 2>&1 | grep -E '^\| (gate|down)|rror'; }
  } > "$R/unmeasured.txt" 2>&1; cat "$R/unmeasured.txt" ;;
# The one-thread-per-row kernels with the activations in the constant bank (qk_mmc_*,
# QKERN_CUDA_CACT_NT; off by default until measured): kernel-only GB/s at every NT 1..8 with
# two threads per row, one thread per row, and one thread per row from the bank (cuda_bench
# --mma-sweep), at the bank's defaults and with its knobs (tokens 4.. from global memory,
# the scales from global memory, 3 CTAs an SM: the bank kernels need fewer registers) and
# with the row kernels' L2 prefetch 2 and 4 blocks ahead (QK_PF_R, both row kernels).
# CACT_SWEEP="opts;opts" picks the builds (an empty entry: the default build).
cact) IFS=';' read -ra vs <<< "${CACT_SWEEP:-;-DQK_CACT_F=0;-DQK_CACT_NT=4;-DQK_CACT_NT=4 -DQK_CACT_F=0;-DQK_MINB_C=3 -DQK_MINB_C12=4;-DQK_PF_R=2;-DQK_PF_R=4}"
  { for o in "${vs[@]}"; do echo "## QKERN_CUDA_NVRTC_OPTS='$o'"
      QKERN_CUDA_NVRTC_OPTS="$o" timeout 150 $C/cuda_bench --gib 1 --iters 10 --kernels-only --no-cublas --mma-sweep \
        --formats q8_0,q5_1,iq4_nl,nvfp4 2>&1 | grep -E '^\| (q|iq|nv)|rror'; done; } > "$R/cact.txt" 2>&1; cat "$R/cact.txt" ;;
# The tensor-core kernels against the lane kernels at every NT 1..8 (cuda_bench --mma-sweep) for
# the formats whose tensor-core kernel changed (session 15: iq4_xs with two products a lane), to
# place args::mma_default_nt.
mma2) timeout 100 $C/cuda_bench --gib 1 --iters 10 --kernels-only --no-cublas --mma-sweep \
    --formats ${MMA2_FORMATS:-iq4_xs} > "$R/mma2.txt" 2>&1; grep -E '^\| (q|iq|nv)|rror' "$R/mma2.txt" ;;
# wgpu pair and thread-pair kernels at their per-format rows per pair (default) against one row
# everywhere (prow1; Tuning::pair_rows, session 16), kernel-only
# and call GB/s, bits checked against the reference.
prows) timeout ${PROWS_TIMEOUT:-300} $C/wgpu_bench --gib 1 --reps 8 --variants ${PROWS_VARIANTS:-default,prow1} --formats ${PROWS_FORMATS:-q4_K,q5_K,q6_K,iq4_xs,q8_0,q5_1,iq4_nl,nvfp4} \
    --nt ${PROWS_NT:-1,8} --csv "$R/prows.csv" > "$R/prows.log" 2>&1; grep -E '^[a-zA-Z0-9_]+ +[0-9]+ +[0-9]+ +[0-9]+ |^adapter|rror' "$R/prows.log" ;;
# A/B of two cuda_bench builds, kernel-only (old, new, old, new): .carry/cuda_bench_old against
# this one, formats ABC_FORMATS; the summary rows (NT 1, 2, 4, 8) and the forced-kernel rows.
abc) for i in 1 2; do for b in old new; do x=$C/cuda_bench; [ $b = old ] && x=$C/cuda_bench_old
      timeout ${ABC_TIMEOUT:-120} $x --gib 1 --iters 20 --kernels-only --formats ${ABC_FORMATS:-q4_K,q5_K,q6_K,iq4_xs} > "$R/abc_${b}$i.md" 2>&1
      echo "## $b$i"; grep -E '^\| (q|iq)' "$R/abc_${b}$i.md"; done; done ;;
# A/B of two wgpu_bench builds in one process order (old, new, old, new): .carry/wgpu_bench_old
# (`OLD_REV=<commit> bash scripts/gpu-bundle.sh`) against this one, kernel-only and call GB/s,
# under each of AB_VARIANTS (wgpu_bench --variants), the fastest of AB_ROUNDS rounds.
ab) av=${AB_VARIANTS:-default}
  for i in 1 2; do for b in old new; do x=$C/wgpu_bench; [ $b = old ] && x=$C/wgpu_bench_old
      timeout ${AB_TIMEOUT:-120} $x --gib 1 --reps 8 --formats ${AB_FORMATS:-q6_K,iq4_xs} --nt ${AB_NT:-1,8} --variants "$av" \
        --rounds ${AB_ROUNDS:-1} > "$R/ab_${b}$i.log" 2>&1
      grep -E " (${av//,/|}) " "$R/ab_${b}$i.log" | sed "s/^/$b$i /"; done; done ;;
# wgpu_bench with copy-out (its default) and with direct output (as `qkern bench` runs the
# backend): session 18 measured q5_K NT 8 at 315 GB/s in wgpu_bench, 952 in qkern bench.
dout) for v in "" --direct-out; do timeout ${DOUT_TIMEOUT:-90} $C/wgpu_bench --gib 1 --reps 8 --formats ${DOUT_FORMATS:-q5_K,q4_K} --nt ${DOUT_NT:-8} $v \
      > "$R/dout${v:+_direct}.log" 2>&1; echo "== ${v:-copy-out}"; grep -E ' default ' "$R/dout${v:+_direct}.log"; done ;;
# wgpu's staged activations (Tuning::stage): the default (staged per format and NT in these
# 1 GiB calls) against not staged (`nost`), or other variants (WSTAGE_VARIANTS, e.g.
# default,st,st+r64,st+r128), kernel-only and call GB/s, bits checked; token counts
# WSTAGE_NT, formats WSTAGE_FORMATS, WSTAGE_GIB GiB of weights (small matrices: 0.003, about
# 1400 rows of q4_K at 4096 columns), WSTAGE_REPS, WSTAGE_ROUNDS (interleaved rounds, the fastest
# kept; default 3: one round let identical kernels read up to 2.5x apart, session 26).
wstage) timeout ${WGPU_BENCH_TIMEOUT:-200} $C/wgpu_bench --gib ${WSTAGE_GIB:-1} --reps ${WSTAGE_REPS:-8} --rounds ${WSTAGE_ROUNDS:-3} --nt ${WSTAGE_NT:-1,2,4,8} --formats ${WSTAGE_FORMATS:-q8_0,q5_1,iq4_nl,nvfp4} \
    --variants ${WSTAGE_VARIANTS:-default,nost} --csv "$R/wstage.csv" > "$R/wstage.log" 2>&1
  grep -vE '^ *$' "$R/wstage.log" | head -80 ;;
# wgpu's q4_K and q5_K with their blocks tiled (Tuning::ktile: session 27, the default since
# session 28's run3; KTILE_FORMATS=iq2_xxs,... the IQ2/IQ3 formats tiled and split, session 29)
# against ggml's row-major blocks, every variant's bits checked, 3 rounds interleaved
# (KTILE_VARIANTS, e.g. noktile,default,iq8,iqpair).
ktile) timeout ${WGPU_BENCH_TIMEOUT:-300} $C/wgpu_bench --gib 1 --reps 8 --rounds ${KTILE_ROUNDS:-3} --nt ${KTILE_NT:-1,2,4,8} \
    --formats ${KTILE_FORMATS:-q4_K,q5_K} --variants ${KTILE_VARIANTS:-noktile,default} --csv "$R/ktile.csv" > "$R/ktile.log" 2>&1
  grep -vE '^ *$' "$R/ktile.log" | head -60 ;;
# A plain WGSL read kernel (load width, loads in flight, bounds checks) and a buffer copy: the
# adapter's ceiling for wgpu's kernels (wgpu/examples/common/stream.rs).
stream) timeout ${STREAM_TIMEOUT:-120} $C/wgpu_bench --stream --gib ${STREAM_GIB:-1} --reps ${STREAM_REPS:-8} > "$R/stream.log" 2>&1; cat "$R/stream.log" ;;
cudabench) timeout ${CUDA_BENCH_TIMEOUT:-130} $C/cuda_bench --gib 1 --iters 20 ${CUDA_BENCH_ARGS:-} > "$R/cuda_bench.md" 2>&1; cat "$R/cuda_bench.md" ;;
wgpubench) timeout ${WGPU_BENCH_TIMEOUT:-100} $C/wgpu_bench --gib 1 --reps 8 --variants ${WGPU_VARIANTS:-default,emul,u2,rows} ${WGPU_BENCH_ARGS:-} --csv "$R/wgpu_bench.csv" > "$R/wgpu_bench.log" 2>&1
  grep -E 'default|adapter' "$R/wgpu_bench.log" | head -40 ;;
# CUDA knobs measured the way the issues' table is (`qkern bench`, device out, NT 1 and 8): one
# `qkern bench --backends cuda` per QKNOBS variant (';'-separated NVRTC defines, "" the
# defaults), the variants interleaved QKNOBS_ROUNDS times, formats QKNOBS_FORMATS; the device
# out rows of each into qknobs.txt. (Session 37, H100: about 50 s a variant of 4 formats with both
# outputs; now device out alone.)
qknobs) IFS=';' read -ra vs <<< "${QKNOBS:-;-DQK_MINB_W1=3;-DQK_MINB_R1=2;-DQK_MINB_R1=3}"
  for i in $(seq ${QKNOBS_ROUNDS:-2}); do k=0; for o in "${vs[@]}"; do k=$((k + 1))
      echo "## round $i, QKERN_CUDA_NVRTC_OPTS='$o'"
      QKERN_CUDA_NVRTC_OPTS="$o" timeout ${QKNOBS_TIMEOUT:-90} $C/qkern_gpu bench --backends cuda --tokens 1,8 --threads 1 \
        --shape out-of-cache --weights-mib 1024 --ops matmul --gpu-out device --seconds 0.1 --formats ${QKNOBS_FORMATS:-iq4_xs,nvfp4,q8_0,iq4_nl} \
        --quiet --note "$card, QKERN_CUDA_NVRTC_OPTS='$o'" --out-dir "$R/qknobs_r${i}_v$k" > "$R/qknobs_r${i}_v$k.log" 2>&1
      grep -E 'device out|rror' "$R/qknobs_r${i}_v$k.log"; done; done 2>&1 | tee "$R/qknobs.txt" ;;
# `qkern bench` of every format on CUDA and wgpu, NT 1 and 8 (QBENCH_ARGS: more options, e.g.
# "--formats iq2_xxs,iq4_nl" for a short run).
qbench) timeout ${QBENCH_TIMEOUT:-330} $C/qkern_gpu bench --backends cuda,wgpu --tokens 1,8 --threads 1 --shape out-of-cache --weights-mib 1024 \
    --ops matmul --seconds 0.1 ${QBENCH_ARGS:-} --quiet --note "$card run from scripts/gpu-run.sh" --out-dir "$R/qbench" > "$R/qbench.log" 2>&1
  tail -40 "$R/qbench.log" ;;
# `qkern layer` (the engine's MoE layer through the qkern API) on a synthetic layer shaped as
# Qwen3-30B-A3B's (128 experts, top-8, hidden 2048, expert FFN 768; q4_K gate and up, q5_1 down)
# on each of LAYER_BACKENDS (cuda wgpu) at LAYER_TOKENS tokens, this build and .carry/qkern_old
# (OLD_REV in gpu-bundle.sh; session 35: one call per expert before, grouped calls after),
# interleaved; every output hash must agree, the CPU's too.
layer) moe_gguf > "$R/layer.txt" 2>&1
  for be in ${LAYER_BACKENDS:-cuda wgpu}; do for t in ${LAYER_TOKENS:-1 4 16}; do for b in old new; do x=$Q; [ $b = old ] && x=$C/qkern_old
      [ -x "$x" ] || continue
      echo "## $b, $be, $t tokens"; timeout 150 $x layer --gguf /tmp/moe.gguf --tokens "$t" --backend "$be" --report --load-rounds 1 --reps 21 2>&1
    done; done; done >> "$R/layer.txt"
  for t in ${LAYER_TOKENS:-1 4 16}; do echo "## cpu, $t tokens"; timeout 150 $Q layer --gguf /tmp/moe.gguf --tokens "$t" --backend cpu 2>&1 | grep -E "hash|rror"; done >> "$R/layer.txt"
  grep -E "^##|total|hash|kernel calls|rror" "$R/layer.txt" ;;
# `qkern layer` (as `layer`) with each of GROUP_SIZES experts per grouped call (`--group`, default "8
# 32": session 37 made it an option; 8 is the default), interleaved GROUPS_ROUNDS times, on
# LAYER_BACKENDS at GROUPS_TOKENS tokens; every hash must agree.
groups) moe_gguf > /dev/null 2>&1
  for be in ${LAYER_BACKENDS:-cuda wgpu}; do for t in ${GROUPS_TOKENS:-4 16}; do for i in $(seq ${GROUPS_ROUNDS:-2}); do for g in ${GROUP_SIZES:-8 32}; do
      echo "## group $g, $be, $t tokens, round $i"; timeout 150 $Q layer --gguf /tmp/moe.gguf --tokens "$t" --backend "$be" --group "$g" --report --load-rounds 1 --reps 21 2>&1
    done; done; done; done > "$R/groups.txt"
  grep -E "^##|^  (quantize|gate|down|total)|hash|vs its|rror" "$R/groups.txt" ;;
engine) timeout ${ENGINE_TIMEOUT:-120} $C/t_engine_layer --nocapture > "$R/engine.log" 2>&1; grep -E "test result|FAILED|hash|cuda|wgpu" "$R/engine.log" | head -30 ;;
# The engine layer test's SIGSEGV of session 5 (benches/results/2026-12-03-h200-session5/NOTES.md):
# run it first on a fresh machine, with wgpu's direct output off and on, in parallel and serially.
enginediag) i=0; for v in "QKERN_WGPU_DIRECT_OUT=0|" "QKERN_WGPU_DIRECT_OUT=1|" "QKERN_WGPU_DIRECT_OUT=1|--test-threads 1"; do
    i=$((i + 1)); e=${v%%|*}; a=${v#*|}; L="$R/enginediag$i.log"
    env $e timeout 90 $C/t_engine_layer --nocapture $a > "$L" 2>&1
    echo "$e $a: rc=$? $(grep -c '^devices' "$L") device lists, $(grep -h 'test result' "$L")"
  done | tee "$R/enginediag.txt" ;;
# The layer test's three tests in parallel (cpu + cuda + wgpu devices in one process), four
# processes at once: the configuration that died with SIGSEGV at thread exit before the
# process-wide wgpu instance (benches/results/2026-12-03-h200-session3/NOTES.md).
enginepar) for i in 1 2 3 4; do (timeout 150 $C/t_engine_layer > "$R/enginepar$i.log" 2>&1; echo "enginepar$i rc=$?" >> "$R/enginepar.txt") & done; wait
  cat "$R/enginepar.txt"; grep -h "test result" "$R"/enginepar*.log ;;
# The AVX-512 CPU path on the host: bits (paths.rs, parity), then one interleaved bench
# against AVX2 and ggml (benches/results/2026-12-03-xeon-avx512/README.md).
avx512) { timeout 60 $C/t_cpu_paths --test-threads 14; timeout 30 $C/qkern parity --backend cpu-avx512 | tail -2
    timeout 150 $C/qkern bench --backends cpu-avx512,cpu-avx2 --tokens 1,4,8 --threads 1 --shape out-of-cache --weights-mib 128 \
      --ops matmul --seconds 0.05 --quiet --note "H200 host, scripts/gpu-run.sh avx512" --out-dir "$R/avx512bench"
  } > "$R/avx512.log" 2>&1; grep -E "test result|parity:|FAILED" "$R/avx512.log"; tail -45 "$R/avx512bench/table.md" 2>/dev/null ;;
# The default CPU path on the host (AVX-512 where present): which it is, and its bits.
cpudefault) { timeout 20 $C/qkern formats | grep -i "cpu"; timeout 60 $C/t_cpu_paths --test-threads 14 | tail -3
    timeout 30 $C/qkern parity --backend cpu | tail -2; } > "$R/cpudefault.log" 2>&1; cat "$R/cpudefault.log" ;;
esac
# packed after every step, so that a run stopped at its time limit still brings back the steps done
tar czf "${OUT:-/tmp}/results.tgz" -C "$R" .; done
