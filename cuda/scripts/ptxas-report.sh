#!/usr/bin/env bash
# Registers, spills and stack of every matmul kernel as ptxas assembles them for sm_90, on a
# machine without a GPU: NVRTC and ptxas from PyPI (nvidia-cuda-nvrtc, nvidia-cuda-nvcc 13.0).
#   bash cuda/scripts/ptxas-report.sh [module ...]     (e.g. q4_K iq4_nl; default: every module)
set -euo pipefail
cd "$(dirname "$0")/../.."
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
python3 -m pip show -q nvidia-cuda-nvcc >/dev/null 2>&1 || python3 -m pip install -q nvidia-cuda-nvcc==13.0.88
export LD_LIBRARY_PATH="$site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
d=$(mktemp -d)
cargo run -q -p qkern-cuda --example ptx -- "$d" sm_90 "$@" >/dev/null
for p in "$d"/*.ptx; do
  "$site/nvidia/cu13/bin/ptxas" -arch=sm_90 -v "$p" -o /dev/null 2>&1 \
    | awk '/Compiling entry function/ {match($0, /function .[a-z0-9_]+/); k=substr($0, RSTART+10, RLENGTH-10)}
           /bytes stack frame/ {sub(/^ */, ""); st=$0} /Used [0-9]+ registers/ {sub(/.*Used/, "Used"); print k": "$0"; "st}' \
    | sed -E 's/ptxas info *: *//' | grep -E 'qk_mm' || true
done
rm -rf "$d"
