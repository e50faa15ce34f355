//! q5_K weights (activations: q8_K).
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_q5_K` (with `get_scale_min_k4`):
//!   `y = (d*sc) * (q + 16*h) - (dmin*m)`, unfused (ggml-base is built `-march=x86-64`)
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_q5_K_q8_K` (AVX2 branch): as q4_K, but the
//!   mins go to a scalar `summs += dmin * hsum(prod)` that gcc contracts into a scalar FMA
//!   (`vfmadd231ss` in the built object; the live test agrees), added after `hsum_float_8`.

use super::q4_k::{get_scale_min_k4, madd_scale, mins_prod, unpack_scales_mins};
use super::simd::{cvt_i32x8, fmadd_bcast, hsum_float_8, maddubs};
use super::{WeightBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockQ5K, BlockQ8K, QK_K};
use crate::fp::f16_to_f32;

/// `dequantize_row_q5_K`.
pub fn dequantize_q5_k(x: &[BlockQ5K], y: &mut [f32]) {
    debug_check("q5_K dequantize", x.len() * QK_K, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(b.d);
        let min = f16_to_f32(b.dmin);
        for j in 0..4 {
            let (sc, m) = get_scale_min_k4(2 * j, &b.scales);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            let (sc, m) = get_scale_min_k4(2 * j + 1, &b.scales);
            let (d2, m2) = (d * sc as f32, min * m as f32);
            let (u1, u2) = (1u8 << (2 * j), 2u8 << (2 * j));
            let ql = &b.qs[32 * j..32 * j + 32];
            let o = &mut out[64 * j..64 * j + 64];
            for l in 0..32 {
                let h1 = if b.qh[l] & u1 != 0 { 16 } else { 0 };
                let h2 = if b.qh[l] & u2 != 0 { 16 } else { 0 };
                o[l] = d1 * ((ql[l] & 0xF) + h1) as f32 - m1;
                o[32 + l] = d2 * ((ql[l] >> 4) + h2) as f32 - m2;
            }
        }
    }
}

/// `ggml_vec_dot_q5_K_q8_K`, AVX2 branch.
pub fn vec_dot_q5_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    debug_check("q5_K vec_dot", x.len(), y.len());
    let mut acc = [0f32; 8];
    let mut summs = 0f32;
    for (bx, by) in x.iter().zip(y) {
        let d = by.d * f16_to_f32(bx.d);
        let dmin = -by.d * f16_to_f32(bx.dmin);
        let (scales, mins) = unpack_scales_mins(&bx.scales);

        // hsum = hadd_epi32(hadd_epi32(prod, 0), 0); summs += dmin * extract_epi32(hsum, 0)
        // (contracted by gcc into vfmadd231ss).
        let prod = mins_prod(&mins, &by.bsums);
        let hsum = prod[0].wrapping_add(prod[1]).wrapping_add(prod[2].wrapping_add(prod[3]));
        summs = dmin.mul_add(hsum as f32, summs);

        let mut sumi = [0i32; 8];
        for j in 0..4 {
            // q5_0: low nibbles + ((qh & (1 << 2j)) >> 2j) << 4; q5_1: high nibbles, bit 2j+1.
            let q5_0: [u8; 32] =
                core::array::from_fn(|l| (bx.qs[32 * j + l] & 0xF) + (((bx.qh[l] >> (2 * j)) & 1) << 4));
            let q5_1: [u8; 32] =
                core::array::from_fn(|l| (bx.qs[32 * j + l] >> 4) + (((bx.qh[l] >> (2 * j + 1)) & 1) << 4));
            let q8_0: [i8; 32] = core::array::from_fn(|l| by.qs[64 * j + l]);
            let q8_1: [i8; 32] = core::array::from_fn(|l| by.qs[64 * j + 32 + l]);
            let p16_0 = madd_scale(scales[2 * j], &maddubs(&q5_0, &q8_0));
            let p16_1 = madd_scale(scales[2 * j + 1], &maddubs(&q5_1, &q8_1));
            for k in 0..8 {
                sumi[k] = sumi[k].wrapping_add(p16_0[k].wrapping_add(p16_1[k]));
            }
        }
        fmadd_bcast(d, &cvt_i32x8(&sumi), &mut acc);
    }
    hsum_float_8(&acc) + summs
}

impl WeightBlock for BlockQ5K {
    const FORMAT: Format = Format::Q5_K;
    type Act = BlockQ8K;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_q5_k(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_q5_k(w, a)
    }
}
