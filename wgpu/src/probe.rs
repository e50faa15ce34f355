//! What the adapter does with float arithmetic, measured bit for bit against the CPU:
//! whether `fma()` is a true fused multiply-add (it must be: every dot product's lane chain is
//! a chain of fused multiply-adds), whether a plain `a*b + c` is contracted into one, whether
//! a product laundered through an integer XOR with a runtime zero escapes contraction, how
//! accurate native division is and whether `div_rn` repairs it, and the exactness of the fp16
//! conversions, `round()`, `f32(i32)` and subnormal results.

use crate::{WgpuBackend, WgpuError};

/// The probe kernel: for each case (a, b, c) as u32 bits, `PER` output words.
pub(crate) const PER: usize = 13;

pub(crate) const PROBE_WGSL: &str = r#"
struct PP { n: u32, zero: u32 }
@group(0) @binding(0) var<storage, read> PI: array<u32>;
@group(0) @binding(1) var<storage, read_write> PO: array<u32>;
@group(0) @binding(2) var<uniform> PPar: PP;

fn zero_u() -> u32 {
    return PPar.zero;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= PPar.n) {
        return;
    }
    let ua = PI[3u * i];
    let a = bitcast<f32>(ua);
    let b = bitcast<f32>(PI[3u * i + 1u]);
    let c = bitcast<f32>(PI[3u * i + 2u]);
    let o = 13u * i;
    PO[o + 0u] = bitcast<u32>(fma(a, b, c));
    PO[o + 1u] = bitcast<u32>(a * b + c);
    PO[o + 2u] = bitcast<u32>(bitcast<f32>(bitcast<u32>(a * b) ^ PPar.zero) + c);
    PO[o + 3u] = bitcast<u32>(a / b);
    PO[o + 4u] = bitcast<u32>(div_rn(a, b));
    PO[o + 5u] = bitcast<u32>(f16f(ua & 0xffffu));
    PO[o + 6u] = bitcast<u32>(unpack2x16float(ua).x);
    PO[o + 7u] = f32_to_f16_bits(a);
    PO[o + 8u] = bitcast<u32>(round(a));
    PO[o + 9u] = bitcast<u32>(f32(bitcast<i32>(ua)));
    PO[o + 10u] = bitcast<u32>(a * b);
    PO[o + 11u] = bitcast<u32>(a + b);
    PO[o + 12u] = bitcast<u32>(fma_emul(a, b, c));
}
"#;

/// Counts over the probe's cases (each `(equal, total)` unless said otherwise).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FloatReport {
    /// Cases run.
    pub cases: usize,
    /// `fma(a, b, c)` bit-equal to `f32::mul_add`.
    pub fma_fused: usize,
    /// `a*b + c` bit-equal to the unfused CPU result.
    pub plain_unfused: usize,
    /// `a*b + c` bit-equal to the fused result, among the cases where fused != unfused.
    pub plain_fused_where_differs: usize,
    /// Cases where fused and unfused results differ (the informative ones).
    pub fused_differs: usize,
    /// The laundered `a*b + c` bit-equal to the unfused result.
    pub laundered_unfused: usize,
    /// Native `a / b` correctly rounded.
    pub div_native_exact: usize,
    /// `div_rn(a, b)` correctly rounded (normal quotients).
    pub div_rn_exact: usize,
    /// Cases with a normal quotient (those `div_rn` is checked on).
    pub div_normal: usize,
    /// `f16f` equal to the exact conversion (non-NaN fp16 inputs).
    pub f16f_exact: usize,
    /// `unpack2x16float` equal to the exact conversion (non-NaN fp16 inputs).
    pub unpack_exact: usize,
    /// Non-NaN fp16 inputs.
    pub f16_inputs: usize,
    /// `f32_to_f16_bits` equal to ggml's converter.
    pub to_f16_exact: usize,
    /// `round()` equal to round-half-to-even (finite inputs).
    pub round_exact: usize,
    /// `f32(i32)` correctly rounded.
    pub i2f_exact: usize,
    /// The emulated fma (`fma_emul`) bit-equal to `f32::mul_add`, among cases in its range.
    pub emul_exact: usize,
    /// Cases in the emulation's range (operands and product within 2^-100..2^100 or zero).
    pub emul_cases: usize,
    /// `a * b` bit-equal to the CPU, among products whose exact result is subnormal.
    pub subnormal_products_exact: usize,
    /// Products with a subnormal result.
    pub subnormal_products: usize,
    /// Cases in the normal domain: a, b, c, the exact product a*b and the fused and unfused
    /// results all zero or normal (no subnormal anywhere, so flush-to-zero cannot matter).
    pub normal_cases: usize,
    /// `fma()` bit-equal to `f32::mul_add`, among the normal-domain cases: what decides
    /// whether the kernels may use the adapter's `fma()`.
    pub fma_fused_normal: usize,
    /// `a*b + c` bit-equal to the unfused result, among the normal-domain cases.
    pub plain_unfused_normal: usize,
    /// The laundered `a*b + c` bit-equal to the unfused result, among the normal-domain cases.
    pub laundered_unfused_normal: usize,
    /// Normal-domain cases where fused and unfused differ.
    pub fused_differs_normal: usize,
    /// `a*b + c` bit-equal to the fused result, among those (contraction, if > 0).
    pub plain_fused_where_differs_normal: usize,
    /// `div_rn(a, b)` correctly rounded, among the cases with normal operands and quotient.
    pub div_rn_exact_normal: usize,
    /// The first few normal-domain cases where `div_rn` missed: `[a, b, got, want]` bits.
    pub div_rn_misses: Vec<[u32; 4]>,
    /// Cases with normal operands and a normal quotient.
    pub div_normal_operands: usize,
    /// Subnormal products (nonzero in the CPU's result) that came back as a signed zero:
    /// the adapter flushes subnormal results to zero (FTZ) if this is > 0.
    pub subnormal_products_flushed: usize,
    /// Additions with a subnormal operand whose result equals the CPU's with that operand
    /// replaced by zero (and differs from the CPU's): subnormal inputs flushed (DAZ).
    pub subnormal_adds_flushed: usize,
    /// `a + b` bit-equal where an operand is subnormal.
    pub subnormal_adds_exact: usize,
    /// Additions with a subnormal operand.
    pub subnormal_adds: usize,
}

impl std::fmt::Display for FloatReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.cases;
        writeln!(f, "fma() fused (== f32::mul_add):      {}/{n}", self.fma_fused)?;
        writeln!(f, "a*b+c == unfused:                   {}/{n}", self.plain_unfused)?;
        writeln!(
            f,
            "a*b+c == fused, where they differ:  {}/{} (contracted if > 0)",
            self.plain_fused_where_differs, self.fused_differs
        )?;
        writeln!(f, "fma_emul == f32::mul_add:           {}/{}", self.emul_exact, self.emul_cases)?;
        writeln!(f, "laundered a*b+c == unfused:         {}/{n}", self.laundered_unfused)?;
        writeln!(f, "native a/b correctly rounded:       {}/{n}", self.div_native_exact)?;
        writeln!(f, "div_rn correctly rounded:           {}/{}", self.div_rn_exact, self.div_normal)?;
        writeln!(f, "f16f exact:                         {}/{}", self.f16f_exact, self.f16_inputs)?;
        writeln!(f, "unpack2x16float exact:              {}/{}", self.unpack_exact, self.f16_inputs)?;
        writeln!(f, "f32_to_f16_bits == ggml:            {}/{n}", self.to_f16_exact)?;
        writeln!(f, "round() ties-to-even:               {}/{n}", self.round_exact)?;
        writeln!(f, "f32(i32) correctly rounded:         {}/{n}", self.i2f_exact)?;
        writeln!(
            f,
            "subnormal products exact:           {}/{}",
            self.subnormal_products_exact, self.subnormal_products
        )?;
        writeln!(f, "adds with a subnormal operand exact: {}/{}", self.subnormal_adds_exact, self.subnormal_adds)?;
        writeln!(f, "-- normal domain (no subnormal operand, product or result): {} cases", self.normal_cases)?;
        writeln!(f, "fma() fused:                        {}/{}", self.fma_fused_normal, self.normal_cases)?;
        writeln!(f, "a*b+c == unfused:                   {}/{}", self.plain_unfused_normal, self.normal_cases)?;
        writeln!(
            f,
            "a*b+c == fused, where they differ:  {}/{} (contracted if > 0)",
            self.plain_fused_where_differs_normal, self.fused_differs_normal
        )?;
        writeln!(f, "laundered a*b+c == unfused:         {}/{}", self.laundered_unfused_normal, self.normal_cases)?;
        writeln!(f, "div_rn correctly rounded:           {}/{}", self.div_rn_exact_normal, self.div_normal_operands)?;
        for [a, b, got, want] in &self.div_rn_misses {
            let g = |x: &u32| f32::from_bits(*x);
            writeln!(f, "  div_rn({:e}, {:e}) = {:e}, want {:e}", g(a), g(b), g(got), g(want))?;
        }
        writeln!(
            f,
            "-- subnormals: products flushed to zero {}/{}, adds with the subnormal operand read as zero {}/{} ({})",
            self.subnormal_products_flushed,
            self.subnormal_products,
            self.subnormal_adds_flushed,
            self.subnormal_adds,
            if self.flushes_subnormals() { "FTZ" } else { "subnormals kept" }
        )
    }
}

/// SplitMix64, for reproducible probe inputs.
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn f(&mut self, lo_exp: i32, hi_exp: i32) -> f32 {
        let r = self.next();
        let span = (hi_exp - lo_exp + 1) as u64;
        let e = (lo_exp + (r % span) as i32 + 127) as u32;
        let sign = ((r >> 40) & 1) as u32;
        f32::from_bits(sign << 31 | e << 23 | ((r >> 8) as u32 & 0x7f_ffff))
    }
}

/// Probe inputs: products with cancellation (fused != unfused often), random values over a
/// wide exponent range, subnormal operands and products, fp16 bit patterns, rounding ties.
fn cases(n: usize, seed: u64) -> Vec<[u32; 3]> {
    let mut m = Mix(seed);
    (0..n)
        .map(|i| {
            let (a, b, c) = match i % 8 {
                0 | 1 => {
                    let a = m.f(-10, 10);
                    let b = m.f(-10, 10);
                    // c close to -(a*b): the rounding of the product decides the result
                    let p = a * b;
                    let c = -p * (1.0 + (m.next() % 64) as f32 * f32::EPSILON * 0.5);
                    (a, b, c)
                }
                2 => (m.f(-60, 60), m.f(-60, 60), m.f(-60, 60)),
                3 => (m.f(-70, -60), m.f(-70, -60), m.f(-130, -120)), // subnormal products
                4 => (f32::from_bits(m.next() as u32 & 0x807f_ffff), m.f(-126, -100), m.f(-5, 5)),
                5 => {
                    // fp16 patterns in the low half, and q8-style divisions
                    let h = (m.next() & 0xffff) as u32;
                    (f32::from_bits(h | 0x3f80_0000), 127.0, m.f(-5, 5))
                }
                6 => {
                    // rounding ties and integers
                    let k = (m.next() % 4096) as i32 - 2048;
                    (k as f32 * 0.5, m.f(-20, 20), m.f(-5, 5))
                }
                _ => (f32::from_bits(m.next() as u32), f32::from_bits(m.next() as u32), m.f(-20, 20)),
            };
            [a.to_bits(), b.to_bits(), c.to_bits()]
        })
        .collect()
}

fn is_sub(x: f32) -> bool {
    x != 0.0 && x.abs() < f32::MIN_POSITIVE
}

/// Zero or normal (not subnormal, not infinite, not NaN).
fn zn(x: f32) -> bool {
    x == 0.0 || x.is_normal()
}

impl FloatReport {
    /// Whether the adapter flushes subnormal results (or inputs) to zero.
    pub fn flushes_subnormals(&self) -> bool {
        self.subnormal_products_flushed > 0 || self.subnormal_adds_flushed > 0
    }

    /// Whether the adapter's `fma()` was fused in every normal-domain case (the kernels'
    /// domain: see the crate docs, "Subnormals").
    pub fn fma_fused_in_normal_domain(&self) -> bool {
        self.normal_cases > 0 && self.fma_fused_normal == self.normal_cases
    }
}

impl WgpuBackend {
    /// Run the float-behaviour probe on `n` cases (seeded) and compare every output with the
    /// CPU's bits.
    pub fn float_probe(&self, n: usize, seed: u64) -> Result<FloatReport, WgpuError> {
        let input = cases(n, seed);
        let words: Vec<u32> = input.iter().flatten().copied().collect();
        let out = self.run_probe(&words, n, PER)?;
        let mut r = FloatReport { cases: n, ..FloatReport::default() };
        for (i, c) in input.iter().enumerate() {
            let (a, b, cc) = (f32::from_bits(c[0]), f32::from_bits(c[1]), f32::from_bits(c[2]));
            let o = &out[PER * i..PER * i + PER];
            let same = |x: u32, y: f32| x == y.to_bits() || (f32::from_bits(x).is_nan() && y.is_nan());
            let fused = a.mul_add(b, cc);
            let unfused = a * b + cc;
            r.fma_fused += same(o[0], fused) as usize;
            r.plain_unfused += same(o[1], unfused) as usize;
            if fused.to_bits() != unfused.to_bits() && !(fused.is_nan() && unfused.is_nan()) {
                r.fused_differs += 1;
                r.plain_fused_where_differs += same(o[1], fused) as usize;
            }
            r.laundered_unfused += same(o[2], unfused) as usize;
            let inr = |x: f32| x == 0.0 || (x.abs() > 7.9e-31 && x.abs() < 1.2e30);
            if inr(a) && inr(b) && inr(cc) && inr(a * b) && inr(fused) {
                r.emul_cases += 1;
                r.emul_exact += same(o[12], fused) as usize;
            }
            let q = a / b;
            r.div_native_exact += same(o[3], q) as usize;
            if q.is_normal() {
                r.div_normal += 1;
                r.div_rn_exact += same(o[4], q) as usize;
            }
            let h = half::f16::from_bits((c[0] & 0xffff) as u16);
            if !h.is_nan() {
                r.f16_inputs += 1;
                r.f16f_exact += (o[5] == h.to_f32().to_bits()) as usize;
                r.unpack_exact += (o[6] == h.to_f32().to_bits()) as usize;
            }
            r.to_f16_exact += (o[7] == qkern_formats::fp::f32_to_f16(a).to_bits() as u32) as usize;
            r.round_exact += (!a.is_finite() || o[8] == a.round_ties_even().to_bits()) as usize;
            r.i2f_exact += (o[9] == (c[0] as i32 as f32).to_bits()) as usize;
            let p = a * b;
            if is_sub(p) || (p == 0.0 && a != 0.0 && b != 0.0) {
                r.subnormal_products += 1;
                r.subnormal_products_exact += same(o[10], p) as usize;
                r.subnormal_products_flushed += (is_sub(p) && f32::from_bits(o[10]) == 0.0) as usize;
            }
            if is_sub(a) || is_sub(b) {
                r.subnormal_adds += 1;
                r.subnormal_adds_exact += same(o[11], a + b) as usize;
                let daz = if is_sub(a) { 0.0 + if is_sub(b) { 0.0 } else { b } } else { a };
                r.subnormal_adds_flushed += (!same(o[11], a + b) && same(o[11], daz)) as usize;
            }
            // The normal domain: exact product a*b (as f64, exact for f32 operands) normal too.
            let pe = a as f64 * b as f64;
            let pe_normal = pe == 0.0 || (pe.abs() >= f32::MIN_POSITIVE as f64 && pe.abs() <= f32::MAX as f64);
            if zn(a) && zn(b) && zn(cc) && pe_normal && zn(p) && zn(fused) && zn(unfused) {
                r.normal_cases += 1;
                r.fma_fused_normal += same(o[0], fused) as usize;
                r.plain_unfused_normal += same(o[1], unfused) as usize;
                r.laundered_unfused_normal += same(o[2], unfused) as usize;
                if fused.to_bits() != unfused.to_bits() {
                    r.fused_differs_normal += 1;
                    r.plain_fused_where_differs_normal += same(o[1], fused) as usize;
                }
            }
            if a.is_normal() && b.is_normal() && q.is_normal() {
                r.div_normal_operands += 1;
                r.div_rn_exact_normal += same(o[4], q) as usize;
                if !same(o[4], q) && r.div_rn_misses.len() < 8 {
                    r.div_rn_misses.push([c[0], c[1], o[4], q.to_bits()]);
                }
            }
        }
        Ok(r)
    }
}
