//! `qkern-parity` owns the reference side of the parity contract (`shared/REFERENCE.md`):
//! deterministic input generators, the committed ggml reference vectors (`vectors/`) and
//! their file format, bit-for-bit comparison with useful reports, and, behind the `ggml`
//! feature, a small safe wrapper over ggml 0.26.0's CPU type traits that the vector
//! generator and the live property tests call.

pub mod compare;
#[cfg(feature = "ggml")]
pub mod ggml;
#[cfg(feature = "ggml")]
pub mod gguf_writer;
pub mod inputs;
pub mod run;
pub mod vectors;

pub use compare::{Mismatch, bits_equal, bytes_equal};
