#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs every test of the
# workspace, the live-ggml properties included (ggml 0.26.0 built with the ISA pinned in
# .cargo/config.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace --features qkern-parity/ggml "$@"
# The committed vectors on the wgpu backend through the qkern facade (lavapipe in CI; the
# workspace run above builds qkern without `wgpu`, so this test skipped there).
cargo test -p qkern-wgpu --features qkern/wgpu --test vectors
