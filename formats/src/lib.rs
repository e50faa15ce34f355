//! `qkern-formats` owns what every qkern backend shares: ggml's block formats (the
//! [`Format`] enum with ggml's type ids and names, one `#[repr(C)]` Pod struct per block),
//! ggml's tables, the float conversions, and the **scalar reference**: dequantize,
//! activation quantize and dot product for every format, bit-identical to ggml 0.26.0's
//! x86 AVX2 kernels (`shared/REFERENCE.md`). The reference is safe Rust, the oracle every
//! optimised path is tested against, and the fallback on CPUs without AVX2. Also the
//! backends' shared parsing of their environment tuning knobs ([`mod@env`]) and the GPU backends'
//! threaded copy of large results to the host ([`par`]).

pub mod blocks;
pub mod env;
mod format;
pub mod fp;
pub mod par;
pub mod reference;
pub mod repack;
pub mod tables;

pub use format::{Format, FormatError};

/// A shape or buffer that does not fit a format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("zero columns")]
    ZeroCols,
    #[error("zero rows")]
    ZeroRows,
    #[error("zero tokens")]
    ZeroTokens,
    #[error("{format}: {cols} columns is not a multiple of its block size {block}")]
    ColsNotBlockMultiple { format: Format, cols: usize, block: usize },
    #[error("shape overflows usize")]
    Overflow,
    #[error("{what}: expected {expected} bytes, got {got}")]
    ByteLength { what: &'static str, expected: usize, got: usize },
    #[error("{what}: expected {expected} elements, got {got}")]
    Length { what: &'static str, expected: usize, got: usize },
    #[error("{format} is not a {role} format")]
    Role { format: Format, role: &'static str },
    #[error("weights of {weights} pair with {expected} activations, got {got}")]
    Pairing { weights: Format, expected: Format, got: Format },
}
