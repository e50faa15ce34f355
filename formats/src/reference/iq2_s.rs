//! iq2_s weights (q8_K activations).
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_iq2_s`
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_iq2_s_q8_K` (AVX2 branch): grid bytes
//!   from `iq2s_grid[qs | (qh bits << 8)]`, sign bytes (`qs[32..64]`) expanded with
//!   `k_mask1`/`k_mask2` and applied as `(s ^ q8) - s` (not `_mm256_sign_epi8`; the result is
//!   the same, -128 stays -128), `maddubs`, `madd` with the per-16 scales `2*s+1`, one fused
//!   multiply-add per block, `0.125 * hsum_float_8`.

use super::simd::{cvt_i32x8, fmadd_bcast, hsum_float_8, madd, maddubs};
use super::{WeightBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockIq2S, BlockQ8K};
use crate::fp::f16_to_f32;
use crate::tables::{IQ2S_GRID, KMASK_IQ2XS};

/// quants.c `k_mask2` (period 8): the bit tested for byte `j` of each group of 8.
const K_MASK2: [u8; 8] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80];

/// Grid index of entry `l` (0..4) of sub-block `ib32`: `qs[l] | ((qh[ib32] << (8-2l)) & 0x300)`.
#[inline(always)]
fn grid_index(b: &BlockIq2S, ib32: usize, l: usize) -> usize {
    b.qs[4 * ib32 + l] as usize | ((b.qh[ib32] as usize) << (8 - 2 * l)) & 0x300
}

/// `dequantize_row_iq2_s`: `y = (d * (0.5 + s) * 0.25) * grid[j] * (+-1)`.
pub fn dequantize_iq2_s(x: &[BlockIq2S], y: &mut [f32]) {
    debug_check("iq2_s dequantize", x.len() * 256, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(256)) {
        let d = f16_to_f32(b.d);
        for (ib32, o32) in out.chunks_exact_mut(32).enumerate() {
            let sc = b.scales[ib32];
            let db = [d * (0.5 + (sc & 0xf) as f32) * 0.25, d * (0.5 + (sc >> 4) as f32) * 0.25];
            for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
                let grid = IQ2S_GRID[grid_index(b, ib32, l)].to_le_bytes();
                let signs = b.qs[32 + 4 * ib32 + l];
                for j in 0..8 {
                    let v = db[l / 2] * grid[j] as f32;
                    o8[j] = if signs & KMASK_IQ2XS[j] != 0 { -v } else { v };
                }
            }
        }
    }
}

/// One sub-block of 32 (`ib`, 0..8): `madd(maddubs(grid, (s ^ q8) - s), sc)`; lane `L`
/// covers elements `4L..4L+4`; lanes 0-3 take the low-nibble scale of `scales[ib]`, lanes 4-7
/// the high one (`_mm256_shuffle_epi8(scales16, get_scale_shuffle_k4(ib))`: scales16 holds the
/// 8 low-nibble scales in its low 128-bit lane and the 8 high-nibble ones in its high lane).
#[inline(always)]
fn sub_block_lanes(b: &BlockIq2S, ib: usize, q8: &[i8; 32]) -> [i32; 8] {
    let mut q2 = [0u8; 32];
    let mut q8s = [0i8; 32];
    for l in 0..4 {
        // q2_1 = _mm256_set_epi64x(iq2s_grid[..qs[3]..], .., iq2s_grid[..qs[0]..])
        let g = IQ2S_GRID[grid_index(b, ib, l)].to_le_bytes();
        // aux256 = set1_epi32(signs bytes 4ib..4ib+4); shuffle(k_mask1) sends sign byte l to
        // bytes 8l..8l+8; s2 = cmpeq(and(aux, k_mask2), k_mask2): 0xff where the bit is set.
        let sb = b.qs[32 + 4 * ib + l];
        for j in 0..8 {
            let s2: i8 = if sb & K_MASK2[j] == K_MASK2[j] { -1 } else { 0 };
            q2[8 * l + j] = g[j];
            // q8s = _mm256_sub_epi8(_mm256_xor_si256(s2, q8), s2)
            q8s[8 * l + j] = (s2 ^ q8[8 * l + j]).wrapping_sub(s2);
        }
    }
    let dot = maddubs(&q2, &q8s);
    // scales8 = ((set_epi64x(aux64 >> 4, aux64) & 0xf) << 1) + 1
    let sc = b.scales[ib];
    let (lo, hi) = ((2 * (sc & 0xf) + 1) as i16, (2 * (sc >> 4) + 1) as i16);
    let scv: [i16; 16] = core::array::from_fn(|k| if k < 8 { lo } else { hi });
    madd(&dot, &scv)
}

/// `ggml_vec_dot_iq2_s_q8_K`, AVX2 branch.
pub fn vec_dot_iq2_s(x: &[BlockIq2S], y: &[BlockQ8K]) -> f32 {
    debug_check("iq2_s vec_dot", x.len(), y.len());
    let mut acc = [0f32; 8];
    for (bx, by) in x.iter().zip(y) {
        // const float d = GGML_CPU_FP16_TO_FP32(x[i].d) * y[i].d;
        let d = f16_to_f32(bx.d) * by.d;
        // sumi1 (sub-blocks 0,2,4,6) + sumi2 (1,3,5,7): wrapping integer adds, order-free.
        let mut sumi = [0i32; 8];
        for (ib, q8) in by.qs.chunks_exact(32).enumerate() {
            let q8: &[i8; 32] = q8.try_into().unwrap_or(&[0; 32]);
            let p = sub_block_lanes(bx, ib, q8);
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

impl WeightBlock for BlockIq2S {
    const FORMAT: Format = Format::IQ2_S;
    type Act = BlockQ8K;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_iq2_s(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_iq2_s(w, a)
    }
}

#[cfg(test)]
mod tests {
    use super::super::simd::sign_epi8;

    /// `(s ^ q8) - s` equals `_mm256_sign_epi8(q8, s | 1)` for every byte, -128 included.
    #[test]
    fn xor_sub_is_sign_epi8() {
        for q in i8::MIN..=i8::MAX {
            for s in [-1i8, 0] {
                assert_eq!((s ^ q).wrapping_sub(s), sign_epi8(q, s | 1));
            }
        }
    }
}
