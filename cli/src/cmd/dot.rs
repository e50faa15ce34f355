//! `qkern dot`: raw ggml weight blocks ([rows] rows of row bytes) times f32 activations
//! ([tokens][cols], little-endian), the activations quantized to the paired format first as
//! ggml does; writes [tokens][rows] little-endian f32.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use qkern::{Format, WeightsRef};

use crate::Result;
use crate::args::{self, DeviceArgs};
use crate::io::{self, F32Reader, OutFile};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Weight format (q8_0, q4_K, iq2_xxs, ...).
    #[arg(long, value_name = "F", value_parser = args::parse_format)]
    pub format: Format,
    /// Weight rows (outputs per token).
    #[arg(long, value_name = "R")]
    pub rows: usize,
    /// Columns (elements per row; a multiple of the format's block).
    #[arg(long, value_name = "C")]
    pub cols: usize,
    /// Tokens (activation rows).
    #[arg(long, value_name = "T")]
    pub tokens: usize,
    /// Weights: rows x row-bytes of raw ggml blocks.
    #[arg(long, value_name = "W.bin")]
    pub weights: PathBuf,
    /// Activations: tokens x cols little-endian f32, token-major.
    #[arg(long, value_name = "A.f32")]
    pub acts: PathBuf,
    /// Output: tokens x rows little-endian f32, token-major.
    #[arg(long, value_name = "O.f32")]
    pub out: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
}

pub fn run(a: Args, _out: &mut dyn Write) -> Result<ExitCode> {
    let (rows, cols, tokens) = (a.rows, a.cols, a.tokens);
    args::require_role(a.format, true)?;
    let w_bytes = a.format.matrix_bytes(rows, cols)?;
    let x_bytes = args::f32_matrix_bytes(tokens, cols)?;
    args::mul(tokens, rows)?;
    let w_shape = format!("{rows} rows x {cols} cols of {}", a.format);
    let x_shape = format!("{tokens} tokens x {cols} cols of f32");
    // Every size is checked (file metadata) and the device opened before anything is read.
    let w_file = io::open_sized(&a.weights, "weights", w_bytes, &w_shape)?;
    let mut acts_in = F32Reader::open(&a.acts, "activations", x_bytes, &x_shape)?;
    let dev = a.device.open()?;
    let weights = io::read_whole(w_file, &a.weights, "weights", w_bytes)?;
    let w = dev.upload(WeightsRef::new(a.format, rows, cols, &weights)?)?;
    let chunk = args::chunk_len(tokens, cols.max(rows).saturating_mul(4), args::chunk_bytes());
    let mut acts = dev.activations_for(&w, chunk)?;
    let mut x = io::alloc::<f32>(args::mul(chunk, cols)?, "activations")?;
    let mut y = io::alloc::<f32>(args::mul(chunk, rows)?, "output")?;

    let mut out = OutFile::create(&a.out)?;
    let mut done = 0;
    while done < tokens {
        let nt = chunk.min(tokens - done);
        let (x, y) = (&mut x[..nt * cols], &mut y[..nt * rows]);
        acts_in.read(x)?;
        dev.quantize(x, &mut acts)?;
        dev.matmul(&w, &acts, y)?;
        out.write_f32(y)?;
        done += nt;
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}
