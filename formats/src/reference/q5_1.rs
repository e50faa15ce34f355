//! q5_1 weights (activations: q8_1).
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_q5_1`: `y = x*d + m`
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_q5_1_q8_1` (AVX2 branch): unsigned 5-bit
//!   quants times raw q8_1 bytes (`maddubs`, no sign trick), `acc = fma(q, dx*dy, acc)` per
//!   lane; the `m*s` terms go into a separate scalar `summs`, and the result is
//!   `hsum_float_8(acc) + summs`.

use super::simd::{cvt_i32x8, fmadd_bcast, hsum_float_8, mul_sum_us8_pairs};
use super::{WeightBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockQ5_1, BlockQ8_1};
use crate::fp::f16_to_f32;

/// The 32 unsigned 5-bit quants of a block in element order: `bytes_from_nibbles_32(qs)`
/// (low nibbles = elements 0..16, high nibbles = 16..32) OR'd with
/// `bytes_from_bits_32(qh) & 0x10` (bit j of the little-endian `qh` is element j's fifth bit).
#[inline(always)]
fn quants(b: &BlockQ5_1) -> [u8; 32] {
    let qh = u32::from_le_bytes(b.qh);
    core::array::from_fn(|j| {
        let nib = if j < 16 { b.qs[j] & 0x0F } else { b.qs[j - 16] >> 4 };
        nib | ((((qh >> j) & 1) as u8) << 4)
    })
}

/// `dequantize_row_q5_1`. Whether gcc contracts `x0*d + m` does not matter: a 5-bit
/// quant times an fp16 scale is exact in f32 (both forms checked against live ggml).
pub fn dequantize_q5_1(x: &[BlockQ5_1], y: &mut [f32]) {
    debug_check("q5_1 dequantize", x.len() * 32, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(32)) {
        let d = f16_to_f32(b.d);
        let m = f16_to_f32(b.m);
        for (o, &q) in out.iter_mut().zip(&quants(b)) {
            *o = q as f32 * d + m;
        }
    }
}

/// `ggml_vec_dot_q5_1_q8_1`, AVX2 branch.
pub fn vec_dot_q5_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    debug_check("q5_1 vec_dot", x.len(), y.len());
    let mut acc = [0f32; 8];
    let mut summs = 0f32;
    for (bx, by) in x.iter().zip(y) {
        let dx = f16_to_f32(bx.d);
        // `summs += m * s;`
        let (m, s) = (f16_to_f32(bx.m), f16_to_f32(by.s));
        // Contracted or not, the bits are the same: the product of two fp16 values has at
        // most 22 significant bits, so `m * s` is exact in f32 (checked both against ggml).
        summs += m * s;
        let q = cvt_i32x8(&mul_sum_us8_pairs(&quants(bx), &by.qs));
        // `acc = _mm256_fmadd_ps(q, _mm256_mul_ps(dx, dy), acc)`
        let d = dx * f16_to_f32(by.d);
        fmadd_bcast(d, &q, &mut acc);
    }
    hsum_float_8(&acc) + summs
}

impl WeightBlock for BlockQ5_1 {
    const FORMAT: Format = Format::Q5_1;
    type Act = BlockQ8_1;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_q5_1(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_q5_1(w, a)
    }
}
