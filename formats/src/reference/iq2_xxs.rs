//! iq2_xxs weights (q8_K activations).
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_iq2_xxs`
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_iq2_xxs_q8_K` (AVX2 branch): grid bytes
//!   from `iq2xxs_grid`, signs from the local `keven_signs_q2xs` table applied to the q8
//!   activations with `_mm256_sign_epi8`, `maddubs`, `madd` with `2*ls+1`, one fused
//!   multiply-add per block, `0.125 * hsum_float_8`.

use super::simd::{cvt_i32x8, fmadd_bcast, hsum_float_8, madd, maddubs, sign_epi8};
use super::{WeightBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockIq2Xxs, BlockQ8K};
use crate::fp::f16_to_f32;
use crate::tables::{IQ2XXS_GRID, KMASK_IQ2XS, KSIGNS_IQ2XS};

/// quants.c `keven_signs_q2xs` (1024 int8, read as 128 u64): entry `k` holds, for bit `j`
/// of `ksigns_iq2xs[k]` (= `k` with its parity in bit 7), `-1` where set and `+1` where not.
/// Built here from that rule; the test below checks it against `ksigns_iq2xs` and rows of
/// the C literal.
pub(crate) const KEVEN_SIGNS_Q2XS: [[i8; 8]; 128] = {
    let mut t = [[1i8; 8]; 128];
    let mut k = 0;
    while k < 128 {
        let s = k | (((k as u32).count_ones() as usize & 1) << 7);
        let mut j = 0;
        while j < 8 {
            if (s >> j) & 1 != 0 {
                t[k][j] = -1;
            }
            j += 1;
        }
        k += 1;
    }
    t
};

/// The two u32 words of sub-block `ib32` (`memcpy(aux32, x[i].qs + 4*ib32, 8)`): word 0
/// holds the four grid indices (bytes), word 1 four 7-bit sign indices and the 4-bit scale.
#[inline(always)]
fn aux32(b: &BlockIq2Xxs, ib32: usize) -> (u32, u32) {
    let q = &b.qs[4 * ib32..4 * ib32 + 4];
    (q[0] as u32 | (q[1] as u32) << 16, q[2] as u32 | (q[3] as u32) << 16)
}

/// `dequantize_row_iq2_xxs`: `y = (d * (0.5 + ls) * 0.25) * grid[j] * (+-1)`.
pub fn dequantize_iq2_xxs(x: &[BlockIq2Xxs], y: &mut [f32]) {
    debug_check("iq2_xxs dequantize", x.len() * 256, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(256)) {
        let d = f16_to_f32(b.d);
        for (ib32, o32) in out.chunks_exact_mut(32).enumerate() {
            let (a0, a1) = aux32(b, ib32);
            // const float db = d * (0.5f + (aux32[1] >> 28)) * 0.25f;
            let db = d * (0.5 + (a1 >> 28) as f32) * 0.25;
            for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
                let grid = IQ2XXS_GRID[((a0 >> (8 * l)) & 0xff) as usize].to_le_bytes();
                let signs = KSIGNS_IQ2XS[((a1 >> (7 * l)) & 127) as usize];
                for j in 0..8 {
                    let v = db * grid[j] as f32;
                    // `* (signs & kmask ? -1.f : 1.f)`: multiplying by +-1 is exact negation.
                    o8[j] = if signs & KMASK_IQ2XS[j] != 0 { -v } else { v };
                }
            }
        }
    }
}

/// The 8 int32 lanes of one sub-block of 32: `madd(maddubs(grid, sign(q8, signs)), 2*ls+1)`;
/// lane `L` covers elements `4L..4L+4`.
#[inline(always)]
fn sub_block_lanes(b: &BlockIq2Xxs, ib32: usize, q8: &[i8; 32]) -> [i32; 8] {
    let (a0, a1) = aux32(b, ib32);
    let mut q2 = [0u8; 32];
    let mut q8s = [0i8; 32];
    for l in 0..4 {
        // q2_1 = _mm256_set_epi64x(grid[aux8[3]], .., grid[aux8[0]]): grid l at bytes 8l..8l+8
        let g = IQ2XXS_GRID[((a0 >> (8 * l)) & 0xff) as usize].to_le_bytes();
        // s2_1 = _mm256_set_epi64x(signs64[(aux32[1] >> 21) & 127], .., signs64[aux32[1] & 127])
        let s = &KEVEN_SIGNS_Q2XS[((a1 >> (7 * l)) & 127) as usize];
        for j in 0..8 {
            q2[8 * l + j] = g[j];
            q8s[8 * l + j] = sign_epi8(q8[8 * l + j], s[j]);
        }
    }
    let dot = maddubs(&q2, &q8s);
    // _mm256_madd_epi16(dot, _mm256_set1_epi16(2*ls+1)), ls = aux32[1] >> 28
    let ls = (2 * (a1 >> 28) + 1) as i16;
    madd(&dot, &[ls; 16])
}

/// `ggml_vec_dot_iq2_xxs_q8_K`, AVX2 branch.
pub fn vec_dot_iq2_xxs(x: &[BlockIq2Xxs], y: &[BlockQ8K]) -> f32 {
    debug_check("iq2_xxs vec_dot", x.len(), y.len());
    let mut acc = [0f32; 8];
    for (bx, by) in x.iter().zip(y) {
        // const float d = GGML_CPU_FP16_TO_FP32(x[i].d) * y[i].d;
        let d = f16_to_f32(bx.d) * by.d;
        // sumi1 collects the even sub-blocks, sumi2 the odd ones; integer adds wrap and
        // commute, so one wrapping sum gives the same lanes as _mm256_add_epi32(sumi1, sumi2).
        let mut sumi = [0i32; 8];
        for (ib32, q8) in by.qs.chunks_exact(32).enumerate() {
            let q8: &[i8; 32] = q8.try_into().unwrap_or(&[0; 32]);
            let p = sub_block_lanes(bx, ib32, q8);
            for l in 0..8 {
                sumi[l] = sumi[l].wrapping_add(p[l]);
            }
        }
        // accumf = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi1 + sumi2), accumf)
        fmadd_bcast(d, &cvt_i32x8(&sumi), &mut acc);
    }
    // *s = 0.125f * hsum_float_8(accumf);
    0.125 * hsum_float_8(&acc)
}

impl WeightBlock for BlockIq2Xxs {
    const FORMAT: Format = Format::IQ2_XXS;
    type Act = BlockQ8K;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_iq2_xxs(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_iq2_xxs(w, a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keven_signs_match_ksigns_and_c_literal() {
        for k in 0..128 {
            for j in 0..8 {
                let neg = KSIGNS_IQ2XS[k] & KMASK_IQ2XS[j] != 0;
                assert_eq!(KEVEN_SIGNS_Q2XS[k][j], if neg { -1 } else { 1 }, "k={k} j={j}");
            }
        }
        // First 32 and last 32 int8 of the C literal.
        let first: [i8; 32] =
            [1, 1, 1, 1, 1, 1, 1, 1, -1, 1, 1, 1, 1, 1, 1, -1, 1, -1, 1, 1, 1, 1, 1, -1, -1, -1, 1, 1, 1, 1, 1, 1];
        let last: [i8; 32] = [
            1, 1, -1, -1, -1, -1, -1, -1, -1, 1, -1, -1, -1, -1, -1, 1, 1, -1, -1, -1, -1, -1, -1, 1, -1, -1, -1, -1,
            -1, -1, -1, -1,
        ];
        let flat: Vec<i8> = KEVEN_SIGNS_Q2XS.iter().flatten().copied().collect();
        assert_eq!(&flat[..32], &first);
        assert_eq!(&flat[1024 - 32..], &last);
    }
}
