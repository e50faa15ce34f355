//! iq3_xxs weights (3.0625 bpw) against q8_K activations.
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_iq3_xxs`
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_iq3_xxs_q8_K` (AVX2 branch): grid bytes
//!   times q8 bytes signed with `_mm256_sign_epi8` by `keven_signs_q2xs`, `maddubs`, `madd`
//!   by `2*ls+1`, two int32x8 sums (even / odd sub-blocks), per block
//!   `acc = fma(dx*dy, cvt(sumi1+sumi2), acc)`, and `0.25 * hsum_float_8(acc)` at the end.

use super::simd::{cvt_i32x8, fmadd_bcast, hsum_float_8, madd, maddubs, sign_epi8};
use super::{WeightBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockIq3Xxs, BlockQ8K};
use crate::fp::f16_to_f32;
use crate::tables::{IQ3XXS_GRID, KMASK_IQ2XS, KSIGNS_IQ2XS};

/// `keven_signs_q2xs` (ggml-cpu/arch/x86/quants.c, local to the x86 build): entry `k` holds
/// eight bytes, byte `j` is -1 where bit `j` of `ksigns_iq2xs[k]` is set, else +1.
/// Read by the AVX2 kernel as `uint64_t` (`signs64`), i.e. these eight bytes in order.
const KEVEN_SIGNS_Q2XS: [[i8; 8]; 128] = [
    [1, 1, 1, 1, 1, 1, 1, 1],
    [-1, 1, 1, 1, 1, 1, 1, -1],
    [1, -1, 1, 1, 1, 1, 1, -1],
    [-1, -1, 1, 1, 1, 1, 1, 1],
    [1, 1, -1, 1, 1, 1, 1, -1],
    [-1, 1, -1, 1, 1, 1, 1, 1],
    [1, -1, -1, 1, 1, 1, 1, 1],
    [-1, -1, -1, 1, 1, 1, 1, -1],
    [1, 1, 1, -1, 1, 1, 1, -1],
    [-1, 1, 1, -1, 1, 1, 1, 1],
    [1, -1, 1, -1, 1, 1, 1, 1],
    [-1, -1, 1, -1, 1, 1, 1, -1],
    [1, 1, -1, -1, 1, 1, 1, 1],
    [-1, 1, -1, -1, 1, 1, 1, -1],
    [1, -1, -1, -1, 1, 1, 1, -1],
    [-1, -1, -1, -1, 1, 1, 1, 1],
    [1, 1, 1, 1, -1, 1, 1, -1],
    [-1, 1, 1, 1, -1, 1, 1, 1],
    [1, -1, 1, 1, -1, 1, 1, 1],
    [-1, -1, 1, 1, -1, 1, 1, -1],
    [1, 1, -1, 1, -1, 1, 1, 1],
    [-1, 1, -1, 1, -1, 1, 1, -1],
    [1, -1, -1, 1, -1, 1, 1, -1],
    [-1, -1, -1, 1, -1, 1, 1, 1],
    [1, 1, 1, -1, -1, 1, 1, 1],
    [-1, 1, 1, -1, -1, 1, 1, -1],
    [1, -1, 1, -1, -1, 1, 1, -1],
    [-1, -1, 1, -1, -1, 1, 1, 1],
    [1, 1, -1, -1, -1, 1, 1, -1],
    [-1, 1, -1, -1, -1, 1, 1, 1],
    [1, -1, -1, -1, -1, 1, 1, 1],
    [-1, -1, -1, -1, -1, 1, 1, -1],
    [1, 1, 1, 1, 1, -1, 1, -1],
    [-1, 1, 1, 1, 1, -1, 1, 1],
    [1, -1, 1, 1, 1, -1, 1, 1],
    [-1, -1, 1, 1, 1, -1, 1, -1],
    [1, 1, -1, 1, 1, -1, 1, 1],
    [-1, 1, -1, 1, 1, -1, 1, -1],
    [1, -1, -1, 1, 1, -1, 1, -1],
    [-1, -1, -1, 1, 1, -1, 1, 1],
    [1, 1, 1, -1, 1, -1, 1, 1],
    [-1, 1, 1, -1, 1, -1, 1, -1],
    [1, -1, 1, -1, 1, -1, 1, -1],
    [-1, -1, 1, -1, 1, -1, 1, 1],
    [1, 1, -1, -1, 1, -1, 1, -1],
    [-1, 1, -1, -1, 1, -1, 1, 1],
    [1, -1, -1, -1, 1, -1, 1, 1],
    [-1, -1, -1, -1, 1, -1, 1, -1],
    [1, 1, 1, 1, -1, -1, 1, 1],
    [-1, 1, 1, 1, -1, -1, 1, -1],
    [1, -1, 1, 1, -1, -1, 1, -1],
    [-1, -1, 1, 1, -1, -1, 1, 1],
    [1, 1, -1, 1, -1, -1, 1, -1],
    [-1, 1, -1, 1, -1, -1, 1, 1],
    [1, -1, -1, 1, -1, -1, 1, 1],
    [-1, -1, -1, 1, -1, -1, 1, -1],
    [1, 1, 1, -1, -1, -1, 1, -1],
    [-1, 1, 1, -1, -1, -1, 1, 1],
    [1, -1, 1, -1, -1, -1, 1, 1],
    [-1, -1, 1, -1, -1, -1, 1, -1],
    [1, 1, -1, -1, -1, -1, 1, 1],
    [-1, 1, -1, -1, -1, -1, 1, -1],
    [1, -1, -1, -1, -1, -1, 1, -1],
    [-1, -1, -1, -1, -1, -1, 1, 1],
    [1, 1, 1, 1, 1, 1, -1, -1],
    [-1, 1, 1, 1, 1, 1, -1, 1],
    [1, -1, 1, 1, 1, 1, -1, 1],
    [-1, -1, 1, 1, 1, 1, -1, -1],
    [1, 1, -1, 1, 1, 1, -1, 1],
    [-1, 1, -1, 1, 1, 1, -1, -1],
    [1, -1, -1, 1, 1, 1, -1, -1],
    [-1, -1, -1, 1, 1, 1, -1, 1],
    [1, 1, 1, -1, 1, 1, -1, 1],
    [-1, 1, 1, -1, 1, 1, -1, -1],
    [1, -1, 1, -1, 1, 1, -1, -1],
    [-1, -1, 1, -1, 1, 1, -1, 1],
    [1, 1, -1, -1, 1, 1, -1, -1],
    [-1, 1, -1, -1, 1, 1, -1, 1],
    [1, -1, -1, -1, 1, 1, -1, 1],
    [-1, -1, -1, -1, 1, 1, -1, -1],
    [1, 1, 1, 1, -1, 1, -1, 1],
    [-1, 1, 1, 1, -1, 1, -1, -1],
    [1, -1, 1, 1, -1, 1, -1, -1],
    [-1, -1, 1, 1, -1, 1, -1, 1],
    [1, 1, -1, 1, -1, 1, -1, -1],
    [-1, 1, -1, 1, -1, 1, -1, 1],
    [1, -1, -1, 1, -1, 1, -1, 1],
    [-1, -1, -1, 1, -1, 1, -1, -1],
    [1, 1, 1, -1, -1, 1, -1, -1],
    [-1, 1, 1, -1, -1, 1, -1, 1],
    [1, -1, 1, -1, -1, 1, -1, 1],
    [-1, -1, 1, -1, -1, 1, -1, -1],
    [1, 1, -1, -1, -1, 1, -1, 1],
    [-1, 1, -1, -1, -1, 1, -1, -1],
    [1, -1, -1, -1, -1, 1, -1, -1],
    [-1, -1, -1, -1, -1, 1, -1, 1],
    [1, 1, 1, 1, 1, -1, -1, 1],
    [-1, 1, 1, 1, 1, -1, -1, -1],
    [1, -1, 1, 1, 1, -1, -1, -1],
    [-1, -1, 1, 1, 1, -1, -1, 1],
    [1, 1, -1, 1, 1, -1, -1, -1],
    [-1, 1, -1, 1, 1, -1, -1, 1],
    [1, -1, -1, 1, 1, -1, -1, 1],
    [-1, -1, -1, 1, 1, -1, -1, -1],
    [1, 1, 1, -1, 1, -1, -1, -1],
    [-1, 1, 1, -1, 1, -1, -1, 1],
    [1, -1, 1, -1, 1, -1, -1, 1],
    [-1, -1, 1, -1, 1, -1, -1, -1],
    [1, 1, -1, -1, 1, -1, -1, 1],
    [-1, 1, -1, -1, 1, -1, -1, -1],
    [1, -1, -1, -1, 1, -1, -1, -1],
    [-1, -1, -1, -1, 1, -1, -1, 1],
    [1, 1, 1, 1, -1, -1, -1, -1],
    [-1, 1, 1, 1, -1, -1, -1, 1],
    [1, -1, 1, 1, -1, -1, -1, 1],
    [-1, -1, 1, 1, -1, -1, -1, -1],
    [1, 1, -1, 1, -1, -1, -1, 1],
    [-1, 1, -1, 1, -1, -1, -1, -1],
    [1, -1, -1, 1, -1, -1, -1, -1],
    [-1, -1, -1, 1, -1, -1, -1, 1],
    [1, 1, 1, -1, -1, -1, -1, 1],
    [-1, 1, 1, -1, -1, -1, -1, -1],
    [1, -1, 1, -1, -1, -1, -1, -1],
    [-1, -1, 1, -1, -1, -1, -1, 1],
    [1, 1, -1, -1, -1, -1, -1, -1],
    [-1, 1, -1, -1, -1, -1, -1, 1],
    [1, -1, -1, -1, -1, -1, -1, 1],
    [-1, -1, -1, -1, -1, -1, -1, -1],
];

/// Little-endian u32 of `b[o..o+4]` (the C `memcpy(&aux32, ...)`).
#[inline(always)]
fn le32(b: &[u8; 96], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// `dequantize_row_iq3_xxs`: `db = (d * (0.5 + ls)) * 0.5`, `y = (db * grid) * (+-1)`.
pub fn dequantize_iq3_xxs(x: &[BlockIq3Xxs], y: &mut [f32]) {
    debug_check("iq3_xxs dequantize", x.len() * 256, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(256)) {
        let d = f16_to_f32(b.d);
        for (ib32, o32) in out.chunks_exact_mut(32).enumerate() {
            // scales_and_signs = qs + QK_K/4
            let aux32 = le32(&b.qs, 64 + 4 * ib32);
            let db = d * (0.5f32 + (aux32 >> 28) as f32) * 0.5f32;
            for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
                let signs = KSIGNS_IQ2XS[((aux32 >> (7 * l)) & 127) as usize];
                let g1 = IQ3XXS_GRID[b.qs[8 * ib32 + 2 * l] as usize].to_le_bytes();
                let g2 = IQ3XXS_GRID[b.qs[8 * ib32 + 2 * l + 1] as usize].to_le_bytes();
                for j in 0..4 {
                    let s1 = if signs & KMASK_IQ2XS[j] != 0 { -1.0f32 } else { 1.0 };
                    let s2 = if signs & KMASK_IQ2XS[j + 4] != 0 { -1.0f32 } else { 1.0 };
                    o8[j] = db * g1[j] as f32 * s1;
                    o8[j + 4] = db * g2[j] as f32 * s2;
                }
            }
        }
    }
}

/// One 32-element sub-block of the AVX2 loop: `madd(maddubs(grid, sign(q8, s)), 2*ls+1)`.
/// `q3` are the 8 grid indices, `aux` the sub-block's 32-bit sign/scale word.
#[inline(always)]
fn sub_block(q3: &[u8], aux: u32, q8: &[i8]) -> [i32; 8] {
    // q2 = _mm256_set_epi32(grid[q3[7]], ..., grid[q3[0]]): lane k holds grid[q3[k]]
    let mut q2 = [0u8; 32];
    for k in 0..8 {
        q2[4 * k..4 * k + 4].copy_from_slice(&IQ3XXS_GRID[q3[k] as usize].to_le_bytes());
    }
    // s2 = _mm256_set_epi64x(signs64[(aux>>21)&127], ..., signs64[aux&127]): qword k = field k
    let mut q8s = [0i8; 32];
    for k in 0..4 {
        let s = &KEVEN_SIGNS_Q2XS[((aux >> (7 * k)) & 127) as usize];
        for j in 0..8 {
            q8s[8 * k + j] = sign_epi8(q8[8 * k + j], s[j]);
        }
    }
    let dot = maddubs(&q2, &q8s);
    let ls = (aux >> 28) as i16;
    madd(&dot, &[2 * ls + 1; 16])
}

/// `ggml_vec_dot_iq3_xxs_q8_K`, AVX2 branch.
pub fn vec_dot_iq3_xxs(x: &[BlockIq3Xxs], y: &[BlockQ8K]) -> f32 {
    debug_check("iq3_xxs vec_dot", x.len(), y.len());
    let mut accumf = [0f32; 8];
    for (bx, by) in x.iter().zip(y) {
        let d = f16_to_f32(bx.d) * by.d;
        let mut sumi1 = [0i32; 8];
        let mut sumi2 = [0i32; 8];
        for ib32 in (0..8).step_by(2) {
            let q8 = &by.qs[32 * ib32..32 * ib32 + 64];
            let q3 = &bx.qs[8 * ib32..8 * ib32 + 16];
            // memcpy(aux32, gas, 8)
            let a0 = le32(&bx.qs, 64 + 4 * ib32);
            let a1 = le32(&bx.qs, 64 + 4 * ib32 + 4);
            let p1 = sub_block(&q3[..8], a0, &q8[..32]);
            let p2 = sub_block(&q3[8..], a1, &q8[32..]);
            for l in 0..8 {
                sumi1[l] = sumi1[l].wrapping_add(p1[l]);
                sumi2[l] = sumi2[l].wrapping_add(p2[l]);
            }
        }
        let sumi: [i32; 8] = core::array::from_fn(|l| sumi1[l].wrapping_add(sumi2[l]));
        fmadd_bcast(d, &cvt_i32x8(&sumi), &mut accumf);
    }
    // *s = 0.25f * hsum_float_8(accumf)
    0.25f32 * hsum_float_8(&accumf)
}

impl WeightBlock for BlockIq3Xxs {
    const FORMAT: Format = Format::IQ3_XXS;
    type Act = BlockQ8K;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_iq3_xxs(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_iq3_xxs(w, a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ported `keven_signs_q2xs` agrees with `ksigns_iq2xs` bit for bit.
    #[test]
    fn keven_signs_match_ksigns() {
        for (k, row) in KEVEN_SIGNS_Q2XS.iter().enumerate() {
            for (j, &s) in row.iter().enumerate() {
                let neg = KSIGNS_IQ2XS[k] & (1 << j) != 0;
                assert_eq!(s, if neg { -1 } else { 1 }, "entry {k} byte {j}");
            }
        }
    }
}
