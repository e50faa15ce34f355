#!/usr/bin/env bash
# Installs what qkern's builds and tests need on a fresh Debian machine of this kind:
# cmake + libclang-dev (ggml's reference build through llama-cpp-sys-2 and bindgen),
# mesa-vulkan-drivers + libvulkan1 (lavapipe, the software Vulkan adapter for the wgpu tests).
# Idempotent: installs only what is missing.
set -euo pipefail
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
# libclang itself (what bindgen loads), not libclang-cpp, which other packages bring along.
compgen -G "/usr/lib/llvm-*/lib/libclang.so*" >/dev/null || need+=(libclang-dev)
ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || need+=(mesa-vulkan-drivers)
ls /usr/lib/x86_64-linux-gnu/libvulkan.so.1* >/dev/null 2>&1 || need+=(libvulkan1)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# NVRTC 13.0 from PyPI (no CUDA toolkit needed): lets `cargo test -p qkern-cuda` compile every
# CUDA kernel to PTX on machines without a GPU. Optional: skipped without pip or network.
if python3 -m pip --version >/dev/null 2>&1; then
  if ! python3 -m pip show -q nvidia-cuda-nvrtc >/dev/null 2>&1; then
    python3 -m pip install -q nvidia-cuda-nvrtc==13.0.88 >/dev/null 2>&1 \
      || echo "setup: could not install nvidia-cuda-nvrtc (the CUDA kernel compile test will skip)"
  fi
fi
