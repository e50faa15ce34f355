//! The contenders and their inputs.
//!
//! Every contender of one measurement reads the same bytes: one [`WeightSet`] holds the
//! weight matrix (raw ggml blocks in one 64-byte-aligned buffer), the f32 activations and
//! those activations quantized once (outside any timed loop) to the weight format's
//! `vec_dot_type`. qkern borrows the weight buffer (`Device::upload` does not copy aligned host
//! bytes), ggml's loop and candle read it through pointers, so no contender gets a warmer or
//! better-placed copy than another.
//!
//! - [`ours`]: the `qkern` API (`Device::matmul`, `dequantize`, `quantize`) on any backend.
//! - [`ggml`]: ggml 0.26.0's CPU type traits, called exactly as `ggml_compute_forward_mul_mat`
//!   calls them (feature `ggml`; otherwise every ggml cell says "not built").
//! - [`candle`]: candle-core's CPU quantized matmul (feature `candle`).

use qkern::{AlignedBuf, Device, Format};
use qkern_parity::inputs::{Dist, Rng, floats};

pub mod candle;
pub mod ggml;
pub mod ours;

/// Why a contender has no number for a measurement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Absent {
    /// The contender's cargo feature is off in this build.
    NotBuilt,
    /// The contender has no kernel for this format or shape (with the reason).
    NotSupported(String),
}

impl std::fmt::Display for Absent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Absent::NotBuilt => f.write_str("not built"),
            Absent::NotSupported(why) => write!(f, "not supported ({why})"),
        }
    }
}

/// A weight matrix with its activations, shared by every contender of a measurement.
pub struct WeightSet {
    pub format: Format,
    pub rows: usize,
    pub cols: usize,
    /// `rows` rows of raw ggml blocks.
    pub weights: AlignedBuf,
    /// `max_tokens` x `cols` f32 activations, token-major (standard normal).
    pub x: Vec<f32>,
    /// `x` quantized to `format.vec_dot_type()` by qkern's quantizer (bit-identical to ggml's
    /// `from_float`), `max_tokens` rows.
    pub acts: AlignedBuf,
    pub max_tokens: usize,
}

impl WeightSet {
    /// Random weight blocks (every byte random except the scales, which are finite and of
    /// moderate size, so no contender meets NaN or Inf) and standard-normal activations.
    pub fn random(
        format: Format,
        rows: usize,
        cols: usize,
        max_tokens: usize,
        seed: u64,
    ) -> Result<Self, qkern::Error> {
        let bytes = format.matrix_bytes(rows, cols)?;
        let act = format.vec_dot_type().ok_or(qkern::ShapeError::Role { format, role: "quantized weight" })?;
        let mut rng = Rng::new(seed ^ (u64::from(format.id()) << 32) ^ (rows * 31 + cols) as u64);
        let mut weights = AlignedBuf::zeroed(bytes);
        fill_blocks(&mut rng, format, weights.as_mut_slice());
        let max_tokens = max_tokens.max(1);
        let x = floats(&mut rng, Dist::Gaussian, max_tokens * cols);
        let dev = Device::cpu_with(qkern::CpuPath::Scalar, Some(1))?;
        let mut a = dev.activations(act, cols, max_tokens)?;
        dev.quantize(&x, &mut a)?;
        let mut acts = AlignedBuf::zeroed(act.row_bytes(cols)? * max_tokens);
        dev.read_activations(&a, acts.as_mut_slice())?;
        Ok(WeightSet { format, rows, cols, weights, x, acts, max_tokens })
    }

    /// The activation format (`vec_dot_type`).
    pub fn act_format(&self) -> Format {
        self.format.vec_dot_type().unwrap_or(Format::Q8_0)
    }

    pub fn row_bytes(&self) -> usize {
        self.weights.len() / self.rows
    }

    pub fn act_row_bytes(&self) -> usize {
        self.acts.len() / self.max_tokens
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.weights.len()
    }

    /// The quantized activations of the first `nt` tokens.
    pub fn acts(&self, nt: usize) -> &[u8] {
        &self.acts.as_slice()[..nt.min(self.max_tokens) * self.act_row_bytes()]
    }

    /// The f32 activations of the first `nt` tokens.
    pub fn x(&self, nt: usize) -> &[f32] {
        &self.x[..nt.min(self.max_tokens) * self.cols]
    }
}

/// Random blocks as `qkern_parity::inputs::random_blocks(.., wild = false)` makes them, written
/// in place (no second copy of a 512 MiB matrix), plus finite UE4M3 scales for nvfp4.
fn fill_blocks(rng: &mut Rng, format: Format, out: &mut [u8]) {
    rng.fill_bytes(out);
    let offs = format.f16_scale_offsets();
    for b in out.chunks_exact_mut(format.block_bytes()) {
        for &off in offs {
            let s = half::f16::from_f32((rng.uniform() * 2.0 - 1.0) * 0.05);
            b[off..off + 2].copy_from_slice(&s.to_le_bytes());
        }
        if format == Format::NVFP4 {
            // UE4M3 sub-block scales: exponents 4..7 (0.125 .. ~1), never the NaN code 0x7f.
            for s in &mut b[..4] {
                *s = 0x20 | (*s & 0x1f);
            }
        }
    }
}

/// A fixed-size rayon pool per thread count, for the ggml and candle loops (qkern's CPU
/// device has its own pool of the same size).
#[derive(Default)]
pub struct Pools {
    pools: Vec<(usize, std::sync::Arc<rayon::ThreadPool>)>,
}

impl Pools {
    /// The pool of `threads` workers (`None` for one thread: run on the caller, as ggml and
    /// qkern do).
    pub fn get(&mut self, threads: usize) -> Result<Option<std::sync::Arc<rayon::ThreadPool>>, String> {
        if threads <= 1 {
            return Ok(None);
        }
        if let Some((_, p)) = self.pools.iter().find(|(n, _)| *n == threads) {
            return Ok(Some(p.clone()));
        }
        let p = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("bench-ref-{i}"))
            .build()
            .map_err(|e| e.to_string())?;
        let p = std::sync::Arc::new(p);
        self.pools.push((threads, p.clone()));
        Ok(Some(p))
    }
}

/// Split `0..n` into `parts` contiguous ranges (the first ones one longer).
pub fn split(n: usize, parts: usize) -> Vec<std::ops::Range<usize>> {
    let parts = parts.clamp(1, n.max(1));
    let (q, r) = (n / parts, n % parts);
    let mut v = Vec::with_capacity(parts);
    let mut start = 0;
    for i in 0..parts {
        let len = q + usize::from(i < r);
        v.push(start..start + len);
        start += len;
    }
    v
}

/// ggml's version string (or why it is absent).
pub fn ggml_version() -> String {
    ggml::version()
}

/// candle's version string (or why it is absent).
pub fn candle_version() -> String {
    candle::version()
}

/// Rows dequantized per call by every dequant contender (the output stays in cache).
pub const DEQUANT_CHUNK_ROWS: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits() {
        assert_eq!(split(10, 3), vec![0..4, 4..7, 7..10]);
        assert_eq!(split(2, 4), vec![0..1, 1..2]);
        assert_eq!(split(0, 2), vec![0..0]);
    }

    #[test]
    fn weight_set() {
        let s = WeightSet::random(Format::Q4_K, 8, 512, 3, 1).unwrap();
        assert_eq!(s.bytes(), 8 * 2 * 144);
        assert_eq!(s.acts(2).len(), 2 * 2 * 292);
        assert_eq!(s.x(3).len(), 3 * 512);
        assert!(WeightSet::random(Format::Q4_K, 8, 640, 1, 1).is_err());
    }
}
