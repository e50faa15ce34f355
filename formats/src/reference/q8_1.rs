//! q8_1 activations.
//!
//! - quantize: ggml-cpu/arch/x86/quants.c `quantize_row_q8_1` (AVX2 branch): as x86
//!   `quantize_row_q8_0` (`127/amax`, round half to even, saturating packs), plus
//!   `s = fp16(d * hsum_i32_8(i0 + i1 + i2 + i3))` over the *unsaturated* int32 quants
//! - dequantize: ggml has no `to_float` for q8_1; this is `q * d` as `dequantize_row_q8_0`
//!   (for tests and debugging only)

use super::q8_0::{q8_round, q8_scale};
use super::simd::sat_i8;
use super::{ActBlock, debug_check};
use crate::Format;
use crate::blocks::BlockQ8_1;
use crate::fp::{f16_to_f32, f32_to_f16};

/// `q * d` per element (ggml defines no `dequantize_row_q8_1`; `s` is ignored).
pub fn dequantize_q8_1(x: &[BlockQ8_1], y: &mut [f32]) {
    debug_check("q8_1 dequantize", x.len() * 32, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(32)) {
        let d = f16_to_f32(b.d);
        for (o, &q) in out.iter_mut().zip(&b.qs) {
            *o = q as f32 * d;
        }
    }
}

/// x86 `quantize_row_q8_1` (AVX2 branch).
pub fn quantize_q8_1(x: &[f32], y: &mut [BlockQ8_1]) {
    debug_check("q8_1 quantize", y.len() * 32, x.len());
    for (xb, b) in x.chunks_exact(32).zip(y.iter_mut()) {
        let (d, id) = q8_scale(xb);
        b.d = f32_to_f16(d);
        let mut q = [0i32; 32];
        for (qi, &v) in q.iter_mut().zip(xb) {
            *qi = q8_round(v, id);
        }
        // `hsum_i32_8(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)))`:
        // wrapping int32 adds of the cvtps_epi32 results (i32::MIN for NaN/overflow, before
        // the saturating packs), so the order does not matter; then `d * (float)sum`.
        let sum = q.iter().fold(0i32, |a, &v| a.wrapping_add(v));
        b.s = f32_to_f16(d * sum as f32);
        for (o, &v) in b.qs.iter_mut().zip(&q) {
            *o = sat_i8(v);
        }
    }
}

impl ActBlock for BlockQ8_1 {
    const FORMAT: Format = Format::Q8_1;
    fn quantize(x: &[f32], out: &mut [Self]) {
        quantize_q8_1(x, out)
    }
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_q8_1(blocks, out)
    }
    fn has_minus_128(&self) -> bool {
        self.qs.contains(&-128)
    }
}
