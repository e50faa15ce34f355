#!/usr/bin/env bash
# Instruction mix of a kernel's block loop as ptxas assembles it for sm_90, on a machine without
# a GPU (NVRTC, ptxas 13.0, cuobjdump and nvdisasm from PyPI): the instructions between the longest
# backward branch and its target, by opcode. A proxy for the issue-bound kernels' speed
# (e.g. the IQ lane kernels at NT 1, benches/results/2026-12-05-h200-session13/NOTES.md), never a
# substitute for timing them on a GPU.
#   bash cuda/scripts/sass-loop.sh module kernel [module kernel ...]
#   e.g. bash cuda/scripts/sass-loop.sh iq2_xxs qk_mm_iq2_xxs_n1_s1 q4_K qk_mm_q4_k_n1_s1
# QKERN_CUDA_NVRTC_OPTS (-D knobs) applies, as in the backend.
set -euo pipefail
cd "$(dirname "$0")/../.."
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
b="$site/nvidia/cu13/bin"
[ -x "$b/ptxas" ] || python3 -m pip install -q nvidia-cuda-nvcc==13.0.88
[ -x "$b/cuobjdump" ] || python3 -m pip install -q nvidia-cuda-cuobjdump==13.2.51
[ -x "$b/nvdisasm" ] || python3 -m pip install -q nvidia-cuda-nvdisasm==13.2.51
export PATH="$b:$PATH"
export LD_LIBRARY_PATH="$site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cargo build -q --release -p qkern-cuda --example cuda_ptx
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
while [ $# -ge 2 ]; do
  m=$1 k=$2; shift 2
  target/release/examples/cuda_ptx "$m" > "$d/k.ptx"
  "$b/ptxas" -arch=sm_90 "$d/k.ptx" -o "$d/k.cubin"
  "$b/cuobjdump" -sass -fun "$k" "$d/k.cubin" > "$d/k.sass"
  python3 - "$k" "$d/k.sass" <<'PY'
import re, sys
from collections import Counter
ins = []
for line in open(sys.argv[2]):
    m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
    if m:
        ins.append((int(m.group(1), 16), m.group(2)))
best = None
for a, t in ins:
    m = re.search(r"BRA (0x[0-9a-f]+)", t)
    if m and int(m.group(1), 16) < a:
        lo = int(m.group(1), 16)
        n = sum(1 for x, _ in ins if lo <= x <= a)
        if best is None or n > best[0]:
            best = (n, lo, a)
if best is None:
    print(f"{sys.argv[1]}: no loop")
    sys.exit()
n, lo, hi = best
ops = Counter()
for a, t in ins:
    if lo <= a <= hi:
        w = t.split()
        op = w[1] if w[0].startswith("@") else w[0]
        ops[op.split(".")[0]] += 1
print(f"{sys.argv[1]}: {n} instructions in the loop; " + " ".join(f"{o} {c}" for o, c in ops.most_common(12)))
PY
done
