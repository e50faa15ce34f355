//! Arguments shared by several subcommands (`--backend`, `--threads`) and shape arithmetic.

use qkern::{BackendSpec, Device, DeviceOptions, Format, ShapeError};

use crate::{CliError, Result};

/// Which device to run on.
#[derive(Debug, Clone, clap::Args)]
pub struct DeviceArgs {
    /// Backend: cpu (the default CPU path, or QKERN_CPU), cpu-scalar, cpu-avx2, cpu-avx512, cuda,
    /// cuda:N, wgpu, wgpu:N. Default: the best backend present.
    #[arg(long, value_name = "B", value_parser = parse_backend)]
    pub backend: Option<BackendSpec>,
    /// CPU worker threads (default: all cores; ignored by GPU backends).
    #[arg(long, value_name = "N", value_parser = parse_threads)]
    pub threads: Option<usize>,
}

impl DeviceArgs {
    /// Open the device: the one named, else the best present (`Device::best`).
    pub fn open(&self) -> Result<Device> {
        let opts = DeviceOptions { threads: self.threads };
        let dev = match self.backend {
            Some(spec) => Device::open(spec, opts)?,
            None => {
                let best = Device::best()?;
                match (best.spec(), self.threads) {
                    // Re-open the best CPU path with the thread count asked for.
                    (spec @ BackendSpec::Cpu(_), Some(_)) => {
                        drop(best);
                        Device::open(spec, opts)?
                    }
                    _ => best,
                }
            }
        };
        Ok(dev)
    }
}

/// clap value parser for backend names (`qkern::BackendSpec`).
pub fn parse_backend(s: &str) -> std::result::Result<BackendSpec, qkern::Error> {
    s.parse()
}

/// clap value parser for a format name (any ggml name qkern knows, case-insensitive).
pub fn parse_format(s: &str) -> std::result::Result<Format, qkern::FormatError> {
    s.parse()
}

pub fn parse_threads(s: &str) -> std::result::Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("the thread count must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a thread count: {e}")),
    }
}

/// `a * b`, or a shape overflow error.
pub fn mul(a: usize, b: usize) -> Result<usize> {
    a.checked_mul(b).ok_or_else(|| ShapeError::Overflow.into())
}

/// Bytes of `tokens` x `cols` little-endian f32 (checked; zero tokens is an error).
pub fn f32_matrix_bytes(tokens: usize, cols: usize) -> Result<usize> {
    if tokens == 0 {
        return Err(ShapeError::ZeroTokens.into());
    }
    if cols == 0 {
        return Err(ShapeError::ZeroCols.into());
    }
    mul(mul(tokens, cols)?, 4)
}

/// Check that `format` can play `role` (a weight format for `dot`/`dequant`, an activation
/// format for `quantize-acts`), naming the formats that can.
pub fn require_role(format: Format, weight: bool) -> Result<()> {
    let (ok, role, list): (bool, &str, &[Format]) = if weight {
        (format.is_weight(), "a quantized weight", &Format::WEIGHTS)
    } else {
        (format.is_activation(), "an activation", &Format::ACTIVATIONS)
    };
    if ok {
        return Ok(());
    }
    let names: Vec<&str> = list.iter().map(|f| f.name()).collect();
    Err(CliError::new(format_args!("{format} is not {role} format (expected one of: {})", names.join(", "))))
}

/// Items per chunk so that one chunk of `item_bytes` each stays near `budget` bytes
/// (at least 1, at most `total`). Chunking keeps memory bounded for large token counts;
/// the bits do not depend on it (every output is one whole `vec_dot`).
pub fn chunk_len(total: usize, item_bytes: usize, budget: usize) -> usize {
    (budget / item_bytes.max(1)).clamp(1, total.max(1))
}

/// Memory budget of one chunk of f32 inputs or outputs: 64 MiB, or `QKERN_CHUNK_BYTES`
/// (a test knob: the CLI tests set it small to run the multi-chunk path on small data).
pub fn chunk_bytes() -> usize {
    std::env::var("QKERN_CHUNK_BYTES").ok().and_then(|v| v.trim().parse().ok()).filter(|&n| n > 0).unwrap_or(64 << 20)
}
