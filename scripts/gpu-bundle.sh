#!/usr/bin/env bash
# Builds, on this (GPU-less) machine, every binary the GPU machine runs, into .carry/ (git-ignored):
#   qkern (cli, cuda+wgpu+ggml), qkern_gpu (cli, cuda+wgpu), t_cpu_paths (cpu/tests/paths.rs, the AVX-512 path on the host), t_cuda_gpu (cuda/tests/gpu.rs), cuda_bench, wgpu tests, wgpu_bench
#   (and with OLD_REV set, wgpu_bench_old, cuda_bench_old and qkern_old: see the end).
# Then `scripts/gpu-run.sh` runs them there (see its header). The binaries find the committed
# vectors through /work/main, which gpu-run.sh links to the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
C=.carry; rm -rf "$C"; mkdir -p "$C"
bin_of() { # cargo JSON messages on stdin -> executable paths of the named test/bin targets
  python3 -c 'import json,sys
want=set(sys.argv[1:])
for l in sys.stdin:
    try: m=json.loads(l)
    except Exception: continue
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"] in want:
        print(m["target"]["name"], m["executable"])' "$@"
}
# qkern without ggml too: `qkern bench` on the GPU backends alone (with ggml built in it also
# runs ggml's single-thread CPU loop over every format's weights, minutes at 1 GiB).
cargo build --release -p qkern-cli --features cuda,wgpu
cp target/release/qkern "$C/qkern_gpu"
cargo build --release -p qkern-cli --features cuda,wgpu,ggml
cp target/release/qkern "$C/qkern"
cargo build --release -p qkern-cuda --example cuda_bench
cp target/release/examples/cuda_bench "$C/cuda_bench"
cargo build --release -p qkern-wgpu --example bench
cp target/release/examples/bench "$C/wgpu_bench"
cargo test -p qkern-cuda --test gpu --no-run --message-format=json | bin_of gpu | while read -r n p; do cp "$p" "$C/t_cuda_gpu"; done
cargo test -p qkern-wgpu --features qkern/wgpu --no-run --message-format=json \
  | bin_of float_ops random_parity vectors | while read -r n p; do cp "$p" "$C/t_wgpu_$n"; done
cargo test -p qkern-engine --features qkern/cuda,qkern/wgpu --test layer --no-run --message-format=json \
  | bin_of layer | while read -r n p; do cp "$p" "$C/t_engine_layer"; done
cargo test --release -p qkern-cpu --test paths --no-run --message-format=json | bin_of paths | while read -r n p; do cp "$p" "$C/t_cpu_paths"; done
# OLD_REV=<commit>: also wgpu_bench, cuda_bench and qkern (cuda + wgpu) as of that commit
# (.carry/wgpu_bench_old, .carry/cuda_bench_old, .carry/qkern_old, for gpu-run.sh's `ab`, `abc`,
# `experts` and `layer` steps), built in their own worktree
# *and target directory*: sharing this checkout's target directory let cargo reuse the other tree's qkern-wgpu for this tree's next build (session 18).
if [ -n "${OLD_REV:-}" ]; then
  wt=$(mktemp -d /tmp/qkern-old.XXXXXX); git worktree add -q --detach "$wt" "$OLD_REV"
  (cd "$wt" && CARGO_TARGET_DIR=/tmp/qkern-old-target cargo build --release -p qkern-wgpu --example bench \
    && CARGO_TARGET_DIR=/tmp/qkern-old-target cargo build --release -p qkern-cuda --example cuda_bench \
    && CARGO_TARGET_DIR=/tmp/qkern-old-target cargo build --release -p qkern-cli --features cuda,wgpu)
  cp /tmp/qkern-old-target/release/examples/bench "$C/wgpu_bench_old"
  cp /tmp/qkern-old-target/release/examples/cuda_bench "$C/cuda_bench_old"
  cp /tmp/qkern-old-target/release/qkern "$C/qkern_old"
  git worktree remove --force "$wt"
fi
strip "$C"/* 2>/dev/null || true
ls -la "$C"; du -sh "$C"
