#!/usr/bin/env bash
# The README's main command: the parity run of the committed ggml vectors on every backend
# this machine has (`qkern parity`). Needs no ggml build.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release -q -p qkern-cli --bin qkern -- parity "$@"
