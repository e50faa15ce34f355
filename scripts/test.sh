#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs every test of the
# workspace, the live-ggml properties included (ggml 0.26.0 built with the ISA pinned in
# .cargo/config.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace --exclude qkern-cuda --features qkern-parity/ggml "$@"
# The committed vectors on the wgpu backend through the qkern facade (lavapipe in CI; the
# workspace run above builds qkern without `wgpu`, so this test skipped there).
cargo test -p qkern-wgpu --features qkern/wgpu --test vectors
# The engine's layer on every backend (wgpu included): identical output hashes. In CI
# (CI=true) a missing wgpu adapter fails the run instead of skipping.
QKERN_TEST_REQUIRE="${CI:+wgpu}" cargo test -p qkern-engine --features qkern/wgpu --test layer
# The CUDA backend's host tests: every kernel compiled to PTX by NVRTC (pip's, when present),
# and every kernel run by the host emulator against the reference; GPU tests skip without one.
NVRTC_LIB="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)/nvidia/cu13/lib"
if [ -d "$NVRTC_LIB" ]; then export LD_LIBRARY_PATH="$NVRTC_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
cargo test -p qkern-cuda "$@"
# The matmul kernels again with their compile-time knobs away from the defaults (as
# QKERN_CUDA_NVRTC_OPTS sets them on a GPU): one copy of the IQ grids and sign tables, lookups
# by shared address at every token count, q6_K's tensor-core loads for 1 CTA, the NT 1
# prefetches on, the constant-bank row kernels with tokens 4.. and the scales from global
# memory, the row kernels' prefetch 2 blocks ahead for every format, q4_K's and q5_K's
# activation addresses from a per-block base, q6_K's and iq4_xs's from the whole index; then the
# IQ formats with their signs computed instead of looked up; then iq2_s and iq3_s with the grid
# copies, sign tables and lookups by address the others take; then the IQ2 grids as grid entries
# and 0/1 sign bytes instead of byte-permute selectors.
QKERN_EMU_DEFINES="-DQK_GRID_REP=0 -DQK_IQ_SA_NTM=8 -DQK_MINB_MMA_Q6K=1 -DQK_PF1_Q4K=2 -DQK_PF1_Q5K=2 -DQK_PF1_Q6K=2 -DQK_PF1_IQ4XS=2 -DQK_PF1_IQ=2 -DQK_PF1_NV=2 -DQK_CACT_NT=4 -DQK_CACT_F=0 -DQK_PF_R=2 -DQK_ACT_AT=1 -DQK_ACT_AT_Q6K=0 -DQK_ACT_AT_IQ4XS=0" \
  cargo test -p qkern-cuda --test emu mm_
QKERN_EMU_DEFINES="-DQK_SIGN_TAB=0 -DQK_IQ_SA_NTM=0" cargo test -p qkern-cuda --test emu mm_iq
QKERN_EMU_DEFINES="-DQK_IQ_S_LOOKS=1" cargo test -p qkern-cuda --test emu mm_iq
QKERN_EMU_DEFINES="-DQK_IQ2_SEL=0" cargo test -p qkern-cuda --test emu mm_iq2
# Every kernel and the q8_K quantizer again with the q8_K activations as words (QKERN_CUDA_Q8K).
QKERN_CUDA_Q8K=words cargo test -p qkern-cuda --test emu
# The IQ2/IQ3 formats row-major (QKERN_CUDA_IQ_TILE=0; tiled by default since session 31): matmul
# (lanes, S = 4, tensor cores) and dequantize, both IQ products.
QKERN_CUDA_IQ_TILE=0 cargo test -p qkern-cuda --test emu -- mm_iq2 mm_iq3 deq_iq2 deq_iq3 iq_layout
QKERN_CUDA_IQ_TILE=0 QKERN_EMU_DEFINES="-DQK_IQ_HMMA=0" cargo test -p qkern-cuda --test emu mm_iq
# The row kernels' staged activations in the constant bank instead of shared memory
# (QK_CACT_SMEM=0, the smaller GPUs' default), and the shared-memory kernels' fallback to global
# memory for buffers over their budget.
QKERN_EMU_DEFINES="-DQK_CACT_SMEM=0" cargo test -p qkern-cuda --test emu -- mm_q5_1 mm_q8_0 mm_iq4_nl mm_nvfp4
QKERN_EMU_DEFINES="-DQK_SACT_BYTES=512" cargo test -p qkern-cuda --test emu -- mm_q5_1 mm_q8_0 mm_iq4_nl mm_nvfp4
# The two-phase kernels' 4-byte result stores (QK_MMK_ST4=0, as before session 35), with q5_1's s
# factors read in its summs chain (QK_MMK_SA=0, as before session 34) and q4_K's chain factors and
# mins products on 4 threads a warp (QK_MMK_KSPREAD=0, as before session 35).
QKERN_EMU_DEFINES="-DQK_MMK_ST4=0 -DQK_MMK_SA=0 -DQK_MMK_KSPREAD=0" cargo test -p qkern-cuda --test emu -- mm_q5_1 mm_q8_0 mm_iq4_nl mm_nvfp4 mm_q4_k
# The row kernels (one and two threads a row) without their one-ahead weight loads
# (QK_PIPE_R=0 overrides every format's PIPE_R and PIPE_C masks; the defaults have them at
# most token counts).
QKERN_EMU_DEFINES="-DQK_PIPE_R=0" cargo test -p qkern-cuda --test emu -- mm_q5_1 mm_q8_0 mm_iq4_nl mm_nvfp4
# The IQ tables' smaller budget (devices with less than 160 KiB of shared memory per SM).
QKERN_EMU_DEFINES="-DQK_GRID_WORDS=2048 -DQK_SIGN_WORDS=1024" cargo test -p qkern-cuda --test emu mm_iq
# The IQ2/IQ3 tensor-core kernels on int8 tensor cores (QK_IQ_HMMA=0; the default is fp16).
QKERN_EMU_DEFINES="-DQK_IQ_HMMA=0" cargo test -p qkern-cuda --test emu mm_iq
