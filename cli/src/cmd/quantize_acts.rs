//! `qkern quantize-acts`: [tokens][cols] little-endian f32 to `tokens` rows of q8_0, q8_1 or
//! q8_K blocks, exactly as ggml-cpu's x86 `quantize_row_*` (`from_float`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use qkern::Format;

use crate::Result;
use crate::args::{self, DeviceArgs};
use crate::io::{self, F32Reader, OutFile};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Activation format: q8_0, q8_1 or q8_K.
    #[arg(long, value_name = "F", value_parser = args::parse_format)]
    pub format: Format,
    /// Columns (a multiple of the format's block: 32, or 256 for q8_K).
    #[arg(long, value_name = "C")]
    pub cols: usize,
    /// Tokens (rows of activations).
    #[arg(long, value_name = "T")]
    pub tokens: usize,
    /// Activations: tokens x cols little-endian f32, token-major.
    #[arg(long, value_name = "A.f32")]
    pub acts: PathBuf,
    /// Output: tokens rows of raw ggml blocks.
    #[arg(long, value_name = "O.bin")]
    pub out: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
}

pub fn run(a: Args, _out: &mut dyn Write) -> Result<ExitCode> {
    let (cols, tokens) = (a.cols, a.tokens);
    args::require_role(a.format, false)?;
    let row_bytes = a.format.row_bytes(cols)?;
    let x_bytes = args::f32_matrix_bytes(tokens, cols)?;
    args::mul(tokens, row_bytes)?;
    let shape = format!("{tokens} tokens x {cols} cols of f32");
    let mut acts_in = F32Reader::open(&a.acts, "activations", x_bytes, &shape)?;

    let dev = a.device.open()?;
    let chunk = args::chunk_len(tokens, args::mul(cols, 4)?, args::chunk_bytes());
    let mut acts = dev.activations(a.format, cols, chunk)?;
    let mut x = io::alloc::<f32>(args::mul(chunk, cols)?, "activations")?;
    let mut q = io::alloc::<u8>(args::mul(chunk, row_bytes)?, "quantized activations")?;

    let mut out = OutFile::create(&a.out)?;
    let mut done = 0;
    while done < tokens {
        let nt = chunk.min(tokens - done);
        let (x, q) = (&mut x[..nt * cols], &mut q[..nt * row_bytes]);
        acts_in.read(x)?;
        dev.quantize(x, &mut acts)?;
        dev.read_activations(&acts, q)?;
        out.write_bytes(q)?;
        done += nt;
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}
