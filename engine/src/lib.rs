//! `qkern-engine`: the thinnest real consumer of the `qkern` API, to prove the API is enough
//! for an MoE engine and to get the load path right.
//!
//! - [`gguf`]: a GGUF v2/v3 reader that validates everything (typed errors naming the field
//!   and its offset) and a streaming writer byte-identical to ggml's.
//! - [`load`]: tensors read with positional reads on several threads into one page-aligned
//!   arena, no memory map of the file; optional `O_DIRECT`, page-cache drop, a load report.
//! - [`ffn`]: one MoE FFN layer (router, softmax, top-k, per-expert gate/up, SiLU, down,
//!   weighted sum) and a dense FFN, computed only through `qkern::Device`.
//! - [`synth`]: synthetic MoE GGUF files for tests and demos.

pub mod ffn;
pub mod gguf;
pub mod load;
pub mod synth;
