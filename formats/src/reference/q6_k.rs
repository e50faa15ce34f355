//! q6_K weights (activations: q8_K).
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_q6_K`: `y = (d*sc) * (q - 32)`
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_q6_K_q8_K` (AVX2 branch): unsigned 6-bit
//!   quants (0..63) `maddubs` the q8 bytes, `madd` by the sign-extended i8 scales (two per 32
//!   elements), and the `-32` offset is subtracted per lane afterwards as
//!   `q8sclsub = madd(bsums, scales) << 5` (from the q8_K `bsums`, not recomputed);
//!   `acc = fma(d, lanes, acc)`, `hsum_float_8`.

use super::simd::{cvt_i32x8, fmadd_bcast, hsum_float_8, madd, maddubs};
use super::{WeightBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockQ6K, BlockQ8K, QK_K};
use crate::fp::f16_to_f32;

/// `dequantize_row_q6_K`.
pub fn dequantize_q6_k(x: &[BlockQ6K], y: &mut [f32]) {
    debug_check("q6_K dequantize", x.len() * QK_K, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(b.d);
        for n in 0..2 {
            let ql = &b.ql[64 * n..64 * n + 64];
            let qh = &b.qh[32 * n..32 * n + 32];
            let sc = &b.scales[8 * n..8 * n + 8];
            let o = &mut out[128 * n..128 * n + 128];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                o[l] = d * sc[is] as f32 * q1 as f32;
                o[l + 32] = d * sc[is + 2] as f32 * q2 as f32;
                o[l + 64] = d * sc[is + 4] as f32 * q3 as f32;
                o[l + 96] = d * sc[is + 6] as f32 * q4 as f32;
            }
        }
    }
}

/// `ggml_vec_dot_q6_K_q8_K`, AVX2 branch.
pub fn vec_dot_q6_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    debug_check("q6_K vec_dot", x.len(), y.len());
    let mut acc = [0f32; 8];
    for (bx, by) in x.iter().zip(y) {
        let d = by.d * f16_to_f32(bx.d);

        // q8sclsub = _mm256_slli_epi32(_mm256_madd_epi16(q8sums, cvtepi8_epi16(scales)), 5)
        let scales_16: [i16; 16] = bx.scales.map(|s| s as i16);
        let q8sclsub = madd(&by.bsums, &scales_16).map(|v| v.wrapping_shl(5));

        let mut sumi = [0i32; 8];
        for j in 0..2 {
            let q4bits1 = &bx.ql[64 * j..64 * j + 32];
            let q4bits2 = &bx.ql[64 * j + 32..64 * j + 64];
            let hb = &bx.qh[32 * j..32 * j + 32];
            let q: [[u8; 32]; 4] = [
                core::array::from_fn(|l| (q4bits1[l] & 15) | ((hb[l] & 3) << 4)),
                core::array::from_fn(|l| (q4bits2[l] & 15) | ((hb[l] & 12) << 2)),
                core::array::from_fn(|l| (q4bits1[l] >> 4) | (hb[l] & 48)),
                core::array::from_fn(|l| (q4bits2[l] >> 4) | ((hb[l] & 192) >> 2)),
            ];
            let mut p = [[0i32; 8]; 4];
            for (k, pk) in p.iter_mut().enumerate() {
                let q8: [i8; 32] = core::array::from_fn(|l| by.qs[128 * j + 32 * k + l]);
                // scale_k = shuffle(scales, get_scale_shuffle(is + k)): 8 x scales[2(is+k)]
                // then 8 x scales[2(is+k)+1], sign-extended to i16.
                let is = 4 * j + k;
                let (s0, s1) = (bx.scales[2 * is] as i16, bx.scales[2 * is + 1] as i16);
                let sc: [i16; 16] = core::array::from_fn(|i| if i < 8 { s0 } else { s1 });
                *pk = madd(&sc, &maddubs(&q[k], &q8));
            }
            for l in 0..8 {
                sumi[l] = sumi[l].wrapping_add(p[0][l].wrapping_add(p[1][l]));
                sumi[l] = sumi[l].wrapping_add(p[2][l].wrapping_add(p[3][l]));
            }
        }
        for l in 0..8 {
            sumi[l] = sumi[l].wrapping_sub(q8sclsub[l]);
        }
        fmadd_bcast(d, &cvt_i32x8(&sumi), &mut acc);
    }
    hsum_float_8(&acc)
}

impl WeightBlock for BlockQ6K {
    const FORMAT: Format = Format::Q6_K;
    type Act = BlockQ8K;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_q6_k(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_q6_k(w, a)
    }
}
