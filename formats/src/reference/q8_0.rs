//! q8_0 weights and activations.
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_q8_0`
//! - quantize (activations): ggml-cpu/arch/x86/quants.c `quantize_row_q8_0` (AVX2 branch):
//!   `127/amax` multiplier, round half to even, saturating packs
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_q8_0_q8_0` (AVX2 branch)

use super::simd::{amax_x86_32, cvt_i32x8, cvtps_epi32, fmadd_bcast, hsum_float_8, mul_sum_i8_pairs, sat_i8};
use super::{ActBlock, WeightBlock, debug_check};
use crate::Format;
use crate::blocks::BlockQ8_0;
use crate::fp::{f16_to_f32, f32_to_f16};

/// `dequantize_row_q8_0`: `y = q * d`.
pub fn dequantize_q8_0(x: &[BlockQ8_0], y: &mut [f32]) {
    debug_check("q8_0 dequantize", x.len() * 32, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(32)) {
        let d = f16_to_f32(b.d);
        for (o, &q) in out.iter_mut().zip(&b.qs) {
            *o = q as f32 * d;
        }
    }
}

/// x86 `quantize_row_q8_0`.
pub fn quantize_q8_0(x: &[f32], y: &mut [BlockQ8_0]) {
    debug_check("q8_0 quantize", y.len() * 32, x.len());
    for (xb, b) in x.chunks_exact(32).zip(y.iter_mut()) {
        let (d, id) = q8_scale(xb);
        b.d = f32_to_f16(d);
        for (q, &v) in b.qs.iter_mut().zip(xb) {
            *q = sat_i8(q8_round(v, id));
        }
    }
}

/// The x86 q8_0 / q8_1 block scale: `(amax / 127, amax != 0 ? 127 / amax : 0)`.
#[inline(always)]
pub(crate) fn q8_scale(xb: &[f32]) -> (f32, f32) {
    let amax = amax_x86_32(xb);
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    (d, id)
}

/// `_mm256_cvtps_epi32(_mm256_round_ps(v * id, _MM_ROUND_NEAREST))`.
#[inline(always)]
pub(crate) fn q8_round(v: f32, id: f32) -> i32 {
    cvtps_epi32((v * id).round_ties_even())
}

/// `ggml_vec_dot_q8_0_q8_0`, AVX2 branch: per block, `acc = fma(dx*dy, lanes, acc)`.
pub fn vec_dot_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    debug_check("q8_0 vec_dot", x.len(), y.len());
    let mut acc = [0f32; 8];
    for (bx, by) in x.iter().zip(y) {
        let d = f16_to_f32(bx.d) * f16_to_f32(by.d);
        let q = cvt_i32x8(&mul_sum_i8_pairs(&bx.qs, &by.qs));
        fmadd_bcast(d, &q, &mut acc);
    }
    hsum_float_8(&acc)
}

impl WeightBlock for BlockQ8_0 {
    const FORMAT: Format = Format::Q8_0;
    type Act = BlockQ8_0;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_q8_0(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_q8_0(w, a)
    }
}

impl ActBlock for BlockQ8_0 {
    const FORMAT: Format = Format::Q8_0;
    fn quantize(x: &[f32], out: &mut [Self]) {
        quantize_q8_0(x, out)
    }
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_q8_0(blocks, out)
    }
    fn has_minus_128(&self) -> bool {
        self.qs.contains(&-128)
    }
}
