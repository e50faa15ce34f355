//! iq3_s weights (3.4375 bpw) against q8_K activations.
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_iq3_s`
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_iq3_s_q8_K` (AVX2 branch): 9-bit grid
//!   indices (`qs | qh` bit via `sllv` by `idx_shift`), signs spread with `k_mask1`/`k_mask2`
//!   and applied as `(s ^ q8) - s`, `maddubs`, `madd` by `2*ls+1`, two int32x8 sums,
//!   per block `acc = fma(dx*dy, cvt(sumi1+sumi2), acc)`, `hsum_float_8(acc)` unscaled.

use super::simd::{cvt_i32x8, fmadd_bcast, hsum_float_8, madd, maddubs};
use super::{WeightBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockIq3S, BlockQ8K};
use crate::fp::f16_to_f32;
use crate::tables::{IQ3S_GRID, KMASK_IQ2XS};

/// `k_mask1` (local to the AVX2 branch): `_mm256_shuffle_epi8` byte selectors.
const K_MASK1: [u8; 32] = [
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, //
    0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03,
];

/// `k_mask2` (local to the AVX2 branch): the bit each byte tests.
const K_MASK2: [u8; 32] = [
    0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, //
    0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80,
];

/// `idx_shift = _mm256_set_epi32(1, 2, 3, 4, 5, 6, 7, 8)`: lane k shifts by `8 - k`.
const IDX_SHIFT: [u32; 8] = [8, 7, 6, 5, 4, 3, 2, 1];

/// `dequantize_row_iq3_s`: `db = d * (1 + 2*ls)`, `y = (db * grid) * (+-1)`.
pub fn dequantize_iq3_s(x: &[BlockIq3S], y: &mut [f32]) {
    debug_check("iq3_s dequantize", x.len() * 256, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(256)) {
        let d = f16_to_f32(b.d);
        for (ib32, o32) in out.chunks_exact_mut(32).enumerate() {
            let sc = b.scales[ib32 / 2];
            let ls = if ib32 % 2 == 0 { sc & 0xf } else { sc >> 4 };
            let db = d * (1 + 2 * ls as i32) as f32;
            let qh = b.qh[ib32] as u32;
            for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
                let i1 = b.qs[8 * ib32 + 2 * l] as u32 | ((qh << (8 - 2 * l)) & 256);
                let i2 = b.qs[8 * ib32 + 2 * l + 1] as u32 | ((qh << (7 - 2 * l)) & 256);
                let g1 = IQ3S_GRID[i1 as usize].to_le_bytes();
                let g2 = IQ3S_GRID[i2 as usize].to_le_bytes();
                let signs = b.signs[4 * ib32 + l];
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

/// One 32-element sub-block of the AVX2 loop.
/// `qs`: its 8 low index bytes; `qh`: its high-bit byte; `signs`: its 4 sign bytes.
#[inline(always)]
fn sub_block(qs: &[u8], qh: u8, signs: &[u8], ls: u8, q8: &[i8]) -> [i32; 8] {
    // idx = ((set1(qh) << idx_shift) & 256) | cvtepu8(qs); q2 = set_epi32(grid[idx[7]]..grid[idx[0]])
    let mut q2 = [0u8; 32];
    for k in 0..8 {
        let idx = ((qh as u32) << IDX_SHIFT[k]) & 256 | qs[k] as u32;
        q2[4 * k..4 * k + 4].copy_from_slice(&IQ3S_GRID[idx as usize].to_le_bytes());
    }
    // aux256 = set1_epi32(signs[0] | signs[1] << 16); shuffle_epi8 by k_mask1 (in-lane, and
    // both 128-bit lanes hold the same 4 bytes), & k_mask2; s2 = cmpeq(aux, k_mask2);
    // q8s = (s2 ^ q8) - s2  (a wrapping negation where s2 = -1: -128 stays -128).
    let mut q8s = [0i8; 32];
    for e in 0..32 {
        let sel = (K_MASK1[e] & 0x0f) as usize; // index into the broadcast dword (< 4)
        let bit = signs[sel & 3] & K_MASK2[e];
        let s2: i8 = if bit == K_MASK2[e] { -1 } else { 0 };
        q8s[e] = (s2 ^ q8[e]).wrapping_sub(s2);
    }
    let dot = maddubs(&q2, &q8s);
    madd(&dot, &[2 * ls as i16 + 1; 16])
}

/// `ggml_vec_dot_iq3_s_q8_K`, AVX2 branch.
pub fn vec_dot_iq3_s(x: &[BlockIq3S], y: &[BlockQ8K]) -> f32 {
    debug_check("iq3_s vec_dot", x.len(), y.len());
    let mut accumf = [0f32; 8];
    for (bx, by) in x.iter().zip(y) {
        let d = f16_to_f32(bx.d) * by.d;
        let mut sumi1 = [0i32; 8];
        let mut sumi2 = [0i32; 8];
        for ib32 in (0..8).step_by(2) {
            let q8 = &by.qs[32 * ib32..32 * ib32 + 64];
            let qs = &bx.qs[8 * ib32..8 * ib32 + 16];
            let signs = &bx.signs[4 * ib32..4 * ib32 + 8];
            let sc = bx.scales[ib32 / 2];
            let p1 = sub_block(&qs[..8], bx.qh[ib32], &signs[..4], sc & 0xf, &q8[..32]);
            let p2 = sub_block(&qs[8..], bx.qh[ib32 + 1], &signs[4..], sc >> 4, &q8[32..]);
            for l in 0..8 {
                sumi1[l] = sumi1[l].wrapping_add(p1[l]);
                sumi2[l] = sumi2[l].wrapping_add(p2[l]);
            }
        }
        let sumi: [i32; 8] = core::array::from_fn(|l| sumi1[l].wrapping_add(sumi2[l]));
        fmadd_bcast(d, &cvt_i32x8(&sumi), &mut accumf);
    }
    hsum_float_8(&accumf)
}

impl WeightBlock for BlockIq3S {
    const FORMAT: Format = Format::IQ3_S;
    type Act = BlockQ8K;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_iq3_s(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_iq3_s(w, a)
    }
}
