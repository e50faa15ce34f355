//! `qkern dequant`: raw ggml weight blocks to [rows][cols] little-endian f32, as ggml's
//! `to_float` (`dequantize_row_*`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use qkern::{Format, WeightsRef};

use crate::Result;
use crate::args::{self, DeviceArgs};
use crate::io::{self, OutFile};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Weight format (q8_0, q4_K, iq2_xxs, ...).
    #[arg(long, value_name = "F", value_parser = args::parse_format)]
    pub format: Format,
    /// Weight rows.
    #[arg(long, value_name = "R")]
    pub rows: usize,
    /// Columns (a multiple of the format's block).
    #[arg(long, value_name = "C")]
    pub cols: usize,
    /// Weights: rows x row-bytes of raw ggml blocks.
    #[arg(long, value_name = "W.bin")]
    pub weights: PathBuf,
    /// Output: rows x cols little-endian f32, row-major.
    #[arg(long, value_name = "O.f32")]
    pub out: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
}

pub fn run(a: Args, _out: &mut dyn Write) -> Result<ExitCode> {
    let (rows, cols) = (a.rows, a.cols);
    args::require_role(a.format, true)?;
    let w_bytes = a.format.matrix_bytes(rows, cols)?;
    args::mul(args::mul(rows, cols)?, 4)?;
    let row_bytes = a.format.row_bytes(cols)?;
    let shape = format!("{rows} rows x {cols} cols of {}", a.format);
    let w_file = io::open_sized(&a.weights, "weights", w_bytes, &shape)?;
    let dev = a.device.open()?;
    let weights = io::read_whole(w_file, &a.weights, "weights", w_bytes)?;
    // Rows in chunks keep the f32 output bounded; dequantization is per block, so the bits
    // do not depend on the split.
    let chunk = args::chunk_len(rows, args::mul(cols, 4)?, args::chunk_bytes());
    let mut y = io::alloc::<f32>(args::mul(chunk, cols)?, "output")?;
    let mut out = OutFile::create(&a.out)?;
    for part in weights.chunks(chunk * row_bytes) {
        let n = part.len() / row_bytes;
        let w = dev.upload(WeightsRef::new(a.format, n, cols, part)?)?;
        let y = &mut y[..n * cols];
        dev.dequantize(&w, y)?;
        out.write_f32(y)?;
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}
