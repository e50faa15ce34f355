//! nvfp4 weights (activations: q8_0; one 64-element nvfp4 block pairs with two q8_0 blocks).
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_nvfp4`: sub-block s (16 elements)
//!   is `kvalues_fp4[q] * ggml_ue4m3_to_fp32(d[s])` (doubled E2M1 table, halved scale);
//!   element j of a sub-block is the low nibble of `qs[8s + j]`, element j+8 the high nibble
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_nvfp4_q8_0` (AVX2 branch): per nvfp4
//!   block two 8-lane steps, one per q8_0 block; lanes 0-3 of a step cover the first
//!   sub-block (scale `d[2k]`) and lanes 4-7 the second (`d[2k+1]`), each scale multiplied
//!   by that q8_0 block's `d` (`ue4m3 * dy`) before `fma(scales, lanes, accum)`.

use super::simd::{cvt_i32x8, hsum_float_8, mul_sum_i8_pairs};
use super::{WeightBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockNvfp4, BlockQ8_0};
use crate::fp::{e2m1_doubled, f16_to_f32, ue4m3_to_f32};

/// The 16 doubled E2M1 values of sub-block `s` in element order.
#[inline(always)]
fn sub_values(b: &BlockNvfp4, s: usize) -> [i8; 16] {
    core::array::from_fn(|j| {
        let byte = b.qs[8 * s + (j & 7)];
        e2m1_doubled(if j < 8 { byte & 0x0F } else { byte >> 4 })
    })
}

/// `dequantize_row_nvfp4`: `v * d` per element.
pub fn dequantize_nvfp4(x: &[BlockNvfp4], y: &mut [f32]) {
    debug_check("nvfp4 dequantize", x.len() * 64, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(64)) {
        for (s, o16) in out.chunks_exact_mut(16).enumerate() {
            let d = ue4m3_to_f32(b.d[s]);
            for (o, &v) in o16.iter_mut().zip(&sub_values(b, s)) {
                *o = v as f32 * d;
            }
        }
    }
}

/// `ggml_vec_dot_nvfp4_q8_0`, AVX2 branch. `y` holds two q8_0 blocks per nvfp4 block.
pub fn vec_dot_nvfp4(x: &[BlockNvfp4], y: &[BlockQ8_0]) -> f32 {
    debug_check("nvfp4 vec_dot", x.len() * 2, y.len());
    let mut accum = [0f32; 8];
    for (bx, by) in x.iter().zip(y.chunks_exact(2)) {
        for (k, byk) in by.iter().enumerate() {
            // q4_01 / q4_23: `MM256_SET_M128I(unpackhi_epi64(lo, hi), unpacklo_epi64(lo, hi))`
            // = sub-block 2k then 2k+1, i.e. elements 32k..32k+32 in order.
            let a = sub_values(bx, 2 * k);
            let b = sub_values(bx, 2 * k + 1);
            let q4: [i8; 32] = core::array::from_fn(|j| if j < 16 { a[j] } else { b[j - 16] });
            // `madd(mul_add_epi8(q4, q8), mone)`: the sign trick, as mul_sum_i8_pairs.
            let p = cvt_i32x8(&mul_sum_i8_pairs(&q4, &byk.qs));
            let dy = f16_to_f32(byk.d);
            // `s0 = UE4M3(d[0]) * dy0; s1 = UE4M3(d[1]) * dy0;` (and s2, s3 with dy1)
            let s_lo = ue4m3_to_f32(bx.d[2 * k]) * dy;
            let s_hi = ue4m3_to_f32(bx.d[2 * k + 1]) * dy;
            // `accum = _mm256_fmadd_ps(_mm256_set_m128(set1(s_hi), set1(s_lo)), p, accum)`
            for l in 0..8 {
                let s = if l < 4 { s_lo } else { s_hi };
                accum[l] = s.mul_add(p[l], accum[l]);
            }
        }
    }
    hsum_float_8(&accum)
}

impl WeightBlock for BlockNvfp4 {
    const FORMAT: Format = Format::NVFP4;
    type Act = BlockQ8_0;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_nvfp4(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_nvfp4(w, a)
    }
}
