//! iq2_xs weights (q8_K activations).
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_iq2_xs`
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_iq2_xs_q8_K` (AVX2 branch): grid bytes
//!   from `iq2xs_grid[q & 511]`, sign bytes rebuilt from `q >> 9` plus a parity bit
//!   (`k_bit_helper` shuffle), expanded per byte with `block_sign_shuffle_mask_*` /
//!   `bit_selector_mask` and applied with `_mm256_sign_epi8(q8, signs | 1)`; `maddubs`, `madd`
//!   with the per-16 scales `2*s+1`, one fused multiply-add per block, `0.125 * hsum_float_8`.

use super::simd::{cvt_i32x8, fmadd_bcast, hsum_float_8, madd, maddubs, sign_epi8};
use super::{WeightBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockIq2Xs, BlockQ8K};
use crate::fp::f16_to_f32;
use crate::tables::{IQ2XS_GRID, KMASK_IQ2XS, KSIGNS_IQ2XS};

/// quants.c `k_bit_helper` (one 128-bit lane; both lanes are equal): `0x80` where the
/// nibble index has odd parity.
const K_BIT_HELPER: [u8; 16] =
    [0x00, 0x80, 0x80, 0x00, 0x80, 0x00, 0x00, 0x80, 0x80, 0x00, 0x00, 0x80, 0x00, 0x80, 0x80, 0x00];

/// quants.c `bit_selector_mask_bytes` (period 8).
const BIT_SELECTOR: [u8; 8] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80];

/// The AVX2 sign byte of one `qs` entry (`full_sign_bits`, low byte of its u16 lane):
/// `(q >> 9) | k_bit_helper[((q >> 9) ^ (q >> 13)) & 15]`, i.e. 7 sign bits and their
/// parity in bit 7 (equal to `ksigns_iq2xs[q >> 9]`; the high byte of the lane is 0).
#[inline(always)]
fn full_sign_byte(q: u16) -> u8 {
    let partial = q >> 9;
    let for_counting = partial ^ (q >> 13);
    // _mm256_shuffle_epi8(bit_helper, x): index byte < 0x80, low 4 bits select.
    (partial as u8) | K_BIT_HELPER[(for_counting & 15) as usize]
}

/// The 16 per-16-element scales (`scales` in the C: `_mm_unpacklo_epi8(s & 0xf, s >> 4) * 2 + 1`):
/// entry `2*ib32` is the low nibble of `scales[ib32]`, `2*ib32+1` the high one.
#[inline(always)]
fn scales16(b: &BlockIq2Xs) -> [i16; 16] {
    core::array::from_fn(|k| {
        let s = b.scales[k / 2];
        let n = if k % 2 == 0 { s & 0xf } else { s >> 4 };
        (2 * n + 1) as i16
    })
}

/// `dequantize_row_iq2_xs`: `y = (d * (0.5 + s) * 0.25) * grid[j] * (+-1)`.
pub fn dequantize_iq2_xs(x: &[BlockIq2Xs], y: &mut [f32]) {
    debug_check("iq2_xs dequantize", x.len() * 256, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(256)) {
        let d = f16_to_f32(b.d);
        for (ib32, o32) in out.chunks_exact_mut(32).enumerate() {
            let sc = b.scales[ib32];
            let db = [d * (0.5 + (sc & 0xf) as f32) * 0.25, d * (0.5 + (sc >> 4) as f32) * 0.25];
            for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
                let q = b.qs[4 * ib32 + l];
                let grid = IQ2XS_GRID[(q & 511) as usize].to_le_bytes();
                let signs = KSIGNS_IQ2XS[(q >> 9) as usize];
                for j in 0..8 {
                    let v = db[l / 2] * grid[j] as f32;
                    o8[j] = if signs & KMASK_IQ2XS[j] != 0 { -v } else { v };
                }
            }
        }
    }
}

/// One sub-block of 32 (`ib`, 0..8): `madd(maddubs(grid, sign(q8, signs | 1)), sc)`; lane `L`
/// covers elements `4L..4L+4`, lanes 0-3 take scale `2*ib`, lanes 4-7 scale `2*ib+1`
/// (`_mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, get_scale_shuffle(ib)))`).
#[inline(always)]
fn sub_block_lanes(b: &BlockIq2Xs, sc: &[i16; 16], ib: usize, q8: &[i8; 32]) -> [i32; 8] {
    let mut q2 = [0u8; 32];
    let mut q8s = [0i8; 32];
    for l in 0..4 {
        let q = b.qs[4 * ib + l];
        // q2_k = _mm256_set_epi64x(grid[gindex[4k+3]], .., grid[gindex[4k]])
        let g = IQ2XS_GRID[(q & 511) as usize].to_le_bytes();
        // block_sign_shuffle_mask_{1,2} broadcast sign byte of entry 4*ib+l to bytes 8l..8l+8;
        // cmpeq(and(signs, bit_selector), bit_selector) | 1 gives -1 or +1.
        let s = full_sign_byte(q);
        for j in 0..8 {
            let sel = BIT_SELECTOR[j];
            let sign: i8 = if s & sel == sel { -1 } else { 1 };
            q2[8 * l + j] = g[j];
            q8s[8 * l + j] = sign_epi8(q8[8 * l + j], sign);
        }
    }
    let dot = maddubs(&q2, &q8s);
    let scv: [i16; 16] = core::array::from_fn(|k| if k < 8 { sc[2 * ib] } else { sc[2 * ib + 1] });
    madd(&dot, &scv)
}

/// `ggml_vec_dot_iq2_xs_q8_K`, AVX2 branch.
pub fn vec_dot_iq2_xs(x: &[BlockIq2Xs], y: &[BlockQ8K]) -> f32 {
    debug_check("iq2_xs vec_dot", x.len(), y.len());
    let mut acc = [0f32; 8];
    for (bx, by) in x.iter().zip(y) {
        // const float d = GGML_CPU_FP16_TO_FP32(x[i].d) * y[i].d;
        let d = f16_to_f32(bx.d) * by.d;
        let sc = scales16(bx);
        // sumi1 (sub-blocks 0,2,4,6) + sumi2 (1,3,5,7): wrapping integer adds, order-free.
        let mut sumi = [0i32; 8];
        for (ib, q8) in by.qs.chunks_exact(32).enumerate() {
            let q8: &[i8; 32] = q8.try_into().unwrap_or(&[0; 32]);
            let p = sub_block_lanes(bx, &sc, ib, q8);
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

impl WeightBlock for BlockIq2Xs {
    const FORMAT: Format = Format::IQ2_XS;
    type Act = BlockQ8K;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_iq2_xs(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_iq2_xs(w, a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avx2_sign_byte_is_ksigns() {
        for q in 0..=u16::MAX {
            assert_eq!(full_sign_byte(q), KSIGNS_IQ2XS[(q >> 9) as usize], "q={q:#x}");
        }
    }
}
