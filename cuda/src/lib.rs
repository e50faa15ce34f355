//! `qkern-cuda`: qkern's CUDA backend, bit-identical to ggml 0.26.0's x86 AVX2 kernels
//! (`shared/REFERENCE.md`), on cudarc 0.19 (driver API and NVRTC, both loaded at run time:
//! the crate builds and its host tests run on machines without CUDA).
//!
//! - Kernels are CUDA C++ sources in `cuda/kernels/`, compiled once per process with NVRTC
//!   for the device's architecture with `--fmad=false`; every fused step is an explicit
//!   `__fmaf_rn`, every other float operation a single IEEE operation.
//! - Each weight row is handled by 2 (or 2 x 4) threads, each owning 4 of the 8 AVX2 lanes
//!   and reading its share of a block with 16- or 8-byte loads: integer lane sums are exact
//!   and split freely; each lane's float accumulator runs over the blocks in ggml's order; the
//!   end is `hsum_float_8`'s order (see `kernels/mm_common.cuh`). Weights are read once for up
//!   to 8 tokens per launch.
//! - From a few tokens on (the token counts per format: [`args::mma_default_mask`]; `QKERN_CUDA_MMA_NT`), the
//!   super-block formats run on tensor cores (compute capability 8.0+): `mma.sync` m16n8k32
//!   computes the same exact integer lane sums for 16 rows x 8 tokens at once, with the
//!   sub-block scales split into byte-sized digits; the float chains stay per lane and in block
//!   order ("Tensor-core kernels" in `kernels/mm_common.cuh`). The IQ2/IQ3 formats use fp16
//!   products instead (`mma.sync` m16n8k16 with f32 sums, `iq_hmma_lane`): each f16 operand is
//!   an exact integer (a grid byte times its sign and sub-block scale, below 2^11; a q8 byte),
//!   every partial sum an integer below 2^24, so the lane sums are the same exact integers
//!   (`-DQK_IQ_HMMA=0` in `QKERN_CUDA_NVRTC_OPTS` restores the int8 products).
//! - The 32-element formats also have one-thread-per-row kernels (a warp's activation loads
//!   serve 32 rows), one of them reading a staged copy of the activations
//!   ([`args::PlanKnobs::cact_mask`], `QKERN_CUDA_CACT_NT`): on sm_80/sm_90-class GPUs each CTA
//!   first copies its job's tokens into its dynamic shared memory
//!   ([`args::PlanKnobs::cact_smem`], [`kernels::cact_smem`]); on the others the backend copies
//!   the activation buffer into the module's constant bank before the launch (stream-ordered,
//!   skipped when the bank already holds it), read by uniform loads. The staged kernels also
//!   come with two threads a row, each with half the accumulators ([`args::has_pair`],
//!   [`args::pair_default_mask`], `QKERN_CUDA_PAIR_NT`): iq4_nl's two float chains (ggml's
//!   accum1 and accum2) on different threads, q5_1's lanes 0-3 and 4-7.
//! - q8_K activations lie in the device buffer as words interleaved by token, or as quads like
//!   q8_0's ([`layout::Q8kLayout`], `QKERN_CUDA_Q8K`: one value per process, given to NVRTC
//!   and to every [`layout::ActLayout`] alike).
//! - The IQ2/IQ3 formats' split blocks are tiled as the other formats' blocks (since session
//!   31), or row-major with `QKERN_CUDA_IQ_TILE=0` ([`layout::iq_tile`]: one value per process,
//!   given to NVRTC and to every [`layout::WeightLayout`] alike).
//! - Engine shape: weights uploaded once ([`CudaBackend::upload_weights`]); activation
//!   buffers reused ([`CudaBackend::alloc_acts`]) and quantized on the device; one stream per
//!   backend; `matmul` allocates nothing once its output buffers have grown to size, and
//!   returns its result through pinned, device-mapped host memory ([`HostOut`]), copied into
//!   the caller's slice by several threads when large ([`CudaBackend::copy_threads`]), waiting
//!   by a flag word the stream writes ([`WaitMode`]);
//!   [`CudaBackend::matmul_device`] leaves the result on the device and
//!   [`CudaBackend::matmul_grouped`] runs many (weights, activations) pairs, e.g. a layer's
//!   routed experts, in one launch.
//! - Without a driver, NVRTC or a device, [`CudaBackend::new`] returns a [`CudaError`]
//!   saying which (cudarc would panic; the libraries are probed first).
//!
//! The kernel sources also build as host C++ for an emulator (`cuda/emu/`), which the tests
//! use to check every kernel's bits against the scalar reference on machines without a GPU
//! (`QKERN_EMU_DEFINES` builds them with other compile-time knobs). Without a GPU too,
//! `cuda/scripts/ptxas-report.sh` prints every kernel's registers and spills and
//! `cuda/scripts/sass-loop.sh` a kernel's block-loop instruction mix, both for sm_90 with
//! ptxas from PyPI.

pub mod args;
mod backend;
pub mod kernels;
pub mod layout;
pub mod probe;

pub use args::DeqKind;
pub use backend::{CudaActs, CudaBackend, CudaF32, CudaWeights, HostOut, SyncMode, WaitMode};

use qkern_formats::ShapeError;

/// Everything that can go wrong in the CUDA backend.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    #[error("no NVRTC: {0}")]
    NoNvrtc(String),
    #[error("no CUDA device {index}: {reason}")]
    NoDevice { index: usize, reason: String },
    #[error("CUDA driver error: {0}")]
    Driver(String),
    #[error("NVRTC could not compile the {module} kernels:\n{log}")]
    Compile { module: String, log: String },
    #[error(transparent)]
    Shape(#[from] ShapeError),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Env(#[from] qkern_formats::env::EnvError),
}

impl From<cudarc::driver::DriverError> for CudaError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        CudaError::Driver(e.to_string())
    }
}

pub type Result<T, E = CudaError> = std::result::Result<T, E>;

/// Whether a CUDA device can be opened here: `Ok(device count)` or the reason it cannot.
pub fn available() -> Result<usize> {
    probe::devices()
}
