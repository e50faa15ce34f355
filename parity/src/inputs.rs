//! Deterministic test inputs: weight and activation distributions that stress quantizers
//! and kernels (gaussian, heavy-tailed, all-zero blocks, constant, tiny, huge, outliers,
//! rounding ties), and raw random blocks with sanitised or wild scales.

use qkern_formats::Format;

/// A small, fast, seedable PRNG (SplitMix64): the vectors must be reproducible without
/// depending on a crate's stream stability.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let u2 = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
    }
    pub fn fill_bytes(&mut self, out: &mut [u8]) {
        for c in out.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

/// The value distributions of the reference vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dist {
    Gaussian,
    HeavyTailed,
    ZeroBlocks,
    Constant,
    Tiny,
    Huge,
    Outliers,
    /// Values that land exactly on rounding ties of the q8 quantizers (k + 0.5 steps).
    Ties,
}

impl Dist {
    pub const ALL: [Dist; 8] = [
        Dist::Gaussian,
        Dist::HeavyTailed,
        Dist::ZeroBlocks,
        Dist::Constant,
        Dist::Tiny,
        Dist::Huge,
        Dist::Outliers,
        Dist::Ties,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Dist::Gaussian => "gaussian",
            Dist::HeavyTailed => "heavy-tailed",
            Dist::ZeroBlocks => "zero-blocks",
            Dist::Constant => "constant",
            Dist::Tiny => "tiny",
            Dist::Huge => "huge",
            Dist::Outliers => "outliers",
            Dist::Ties => "ties",
        }
    }
    pub fn code(self) -> u8 {
        Dist::ALL.iter().position(|&d| d == self).unwrap_or(0) as u8
    }
}

/// `n` floats of distribution `d`.
/// Hand-picked activation values for the quantizers: quantization ties (x.5 after scaling),
/// signed zeros, subnormals, the extremes and infinities (no NaN: callers add the NaNs their
/// backend's contract covers).
pub const SPECIALS: [f32; 20] = [
    0.0,
    -0.0,
    0.5,
    -0.5,
    1.5,
    2.5,
    -2.5,
    126.5,
    127.0,
    -127.0,
    1e-40,
    -1e-45,
    6.5e4,
    1e30,
    -1e30,
    f32::MIN_POSITIVE,
    f32::MAX,
    f32::MIN,
    f32::INFINITY,
    f32::NEG_INFINITY,
];

pub fn floats(rng: &mut Rng, d: Dist, n: usize) -> Vec<f32> {
    let mut v = vec![0f32; n];
    match d {
        Dist::Gaussian => v.iter_mut().for_each(|x| *x = rng.normal()),
        Dist::HeavyTailed => v.iter_mut().for_each(|x| {
            // Student-t-like: normal / sqrt(uniform)
            let u = rng.uniform().max(1e-4);
            *x = rng.normal() / u.sqrt();
        }),
        Dist::ZeroBlocks => {
            for (i, x) in v.iter_mut().enumerate() {
                // zero out alternate 32-element spans and one 256-span in four
                let zero = (i / 32) % 2 == 0 || (i / 256) % 4 == 1;
                *x = if zero { 0.0 } else { rng.normal() };
            }
        }
        Dist::Constant => {
            let c = rng.normal();
            v.iter_mut().for_each(|x| *x = c);
        }
        Dist::Tiny => v.iter_mut().for_each(|x| *x = rng.normal() * 1e-6),
        Dist::Huge => v.iter_mut().for_each(|x| *x = rng.normal() * 3e3),
        Dist::Outliers => {
            v.iter_mut().for_each(|x| *x = if rng.below(97) == 0 { rng.normal() * 200.0 } else { rng.normal() * 0.02 })
        }
        Dist::Ties => {
            // Per 32-block: amax 127 (so id = 1) and the rest at k + 0.5.
            for (i, x) in v.iter_mut().enumerate() {
                *x = if i % 32 == 0 { 127.0 } else { (rng.below(254) as f32 - 127.0) + 0.5 * (rng.below(2) as f32) };
            }
        }
    }
    v
}

/// Raw random blocks of a quantized format, with each fp16 scale field set to a finite
/// value of moderate size unless `wild` (then scale bits are random too: NaN, Inf, subnormal).
pub fn random_blocks(rng: &mut Rng, f: Format, nblocks: usize, wild: bool) -> Vec<u8> {
    let bb = f.block_bytes();
    let mut out = vec![0u8; bb * nblocks];
    rng.fill_bytes(&mut out);
    if !wild {
        for b in out.chunks_exact_mut(bb) {
            for &off in f.f16_scale_offsets() {
                let s = half::f16::from_f32((rng.uniform() * 2.0 - 1.0) * 0.05).to_le_bytes();
                b[off..off + 2].copy_from_slice(&s);
            }
            if f == Format::Q8_K {
                let s = (rng.uniform() * 0.05).to_le_bytes();
                b[0..4].copy_from_slice(&s);
            }
        }
    }
    out
}
