//! One module per subcommand: its clap `Args` and a `run` that writes its report to `out` and
//! returns the exit code. To add a subcommand (bench, layer, gguf, ...): add a module with
//! `pub struct Args` (`#[derive(clap::Args)]`) and `pub fn run(args, out) -> Result<ExitCode>`,
//! a variant to [`Command`] and an arm to [`Command::run`].

use std::io::Write;
use std::process::ExitCode;

use crate::Result;

pub mod bench;
pub mod dequant;
pub mod dot;
pub mod formats;
pub mod gguf;
pub mod gguf_synth;
pub mod layer;
pub mod parity;
pub mod quantize_acts;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Weights x activations: out[t][r] = vec_dot(weight row r, token t), as ggml computes it.
    Dot(dot::Args),
    /// Dequantize weights to little-endian f32 ([rows][cols]).
    Dequant(dequant::Args),
    /// Quantize f32 activations to q8_0, q8_1 or q8_K blocks, as ggml-cpu's x86 from_float.
    QuantizeActs(quantize_acts::Args),
    /// Run the committed ggml reference vectors on every backend present (or those named).
    Parity(parity::Args),
    /// The formats qkern supports, their geometry and the backends that run them.
    Formats(formats::Args),
    /// Benchmark qkern beside ggml's vec_dot loop and candle, against the memory bandwidth.
    Bench(bench::Args),
    /// A GGUF file's metadata and tensors.
    Gguf(gguf::Args),
    /// Write a synthetic MoE GGUF (random weights) to try `qkern layer` on.
    GgufSynth(gguf_synth::Args),
    /// Run one layer's FFN (MoE or dense) of a GGUF on seeded inputs: stage times, output hash.
    Layer(layer::Args),
}

impl Command {
    pub fn run(self, out: &mut dyn Write) -> Result<ExitCode> {
        match self {
            Command::Dot(a) => dot::run(a, out),
            Command::Dequant(a) => dequant::run(a, out),
            Command::QuantizeActs(a) => quantize_acts::run(a, out),
            Command::Parity(a) => parity::run(a, out),
            Command::Formats(a) => formats::run(a, out),
            Command::Gguf(a) => gguf::run(a, out),
            Command::GgufSynth(a) => gguf_synth::run(a, out),
            Command::Layer(a) => layer::run(a, out),
            Command::Bench(a) => bench::run(a, out),
        }
    }
}
