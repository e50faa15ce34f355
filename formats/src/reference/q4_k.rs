//! q4_K weights (activations: q8_K).
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_q4_K` (with `get_scale_min_k4`):
//!   `y = (d*sc) * q - (dmin*m)`, unfused (ggml-base is built `-march=x86-64`, no FMA)
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_q4_K_q8_K` (AVX2 branch): the kmask
//!   scale unpacking, 8 int32 lanes per super-block `acc = fma(d, lanes, acc)`, the mins in a
//!   4-lane f32 accumulator `acc_m = fma(dmin, prod, acc_m)` (prod from the q8_K `bsums`,
//!   not recomputed) reduced `(m0+m2)+(m1+m3)` and added after `hsum_float_8`.

use super::simd::{cvt_i32x8, fmadd_bcast, hsum_float_8, madd, maddubs};
use super::{WeightBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockQ4K, BlockQ8K, QK_K};
use crate::fp::f16_to_f32;

/// ggml-quants.c `get_scale_min_k4(j, q)`: the 6-bit scale and min of sub-block `j` (0..8).
#[inline(always)]
pub(crate) fn get_scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// The AVX2 kernels' kmask unpacking of the 12 scale bytes (`utmp[0..4]`, little-endian):
/// bytes 0..8 are the 8 scales, bytes 8..16 the 8 mins (equal to `get_scale_min_k4`).
#[inline(always)]
pub(crate) fn unpack_scales_mins(scales: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    const KMASK1: u32 = 0x3f3f3f3f;
    const KMASK2: u32 = 0x0f0f0f0f;
    const KMASK3: u32 = 0x03030303;
    let mut utmp = [0u32; 4];
    for (k, u) in utmp.iter_mut().take(3).enumerate() {
        *u = u32::from_le_bytes([scales[4 * k], scales[4 * k + 1], scales[4 * k + 2], scales[4 * k + 3]]);
    }
    utmp[3] = ((utmp[2] >> 4) & KMASK2) | (((utmp[1] >> 6) & KMASK3) << 4);
    let uaux = utmp[1] & KMASK1;
    utmp[1] = (utmp[2] & KMASK2) | (((utmp[0] >> 6) & KMASK3) << 4);
    utmp[2] = uaux;
    utmp[0] &= KMASK1;
    let b: [u8; 16] = core::array::from_fn(|i| utmp[i / 4].to_le_bytes()[i % 4]);
    (core::array::from_fn(|i| b[i]), core::array::from_fn(|i| b[8 + i]))
}

/// The mins' integer products of the q4_K / q5_K AVX2 kernels:
/// `q8s = _mm_hadd_epi16(bsums[0..8], bsums[8..16])` (wrapping i16: `bsums[2k] + bsums[2k+1]`),
/// `prod = _mm_madd_epi16(mins, q8s)` (4 i32 lanes).
#[inline(always)]
pub(crate) fn mins_prod(mins: &[u8; 8], bsums: &[i16; 16]) -> [i32; 4] {
    let q8s: [i16; 8] = core::array::from_fn(|k| bsums[2 * k].wrapping_add(bsums[2 * k + 1]));
    core::array::from_fn(|l| {
        (mins[2 * l] as i32 * q8s[2 * l] as i32).wrapping_add(mins[2 * l + 1] as i32 * q8s[2 * l + 1] as i32)
    })
}

/// `_mm256_madd_epi16(set1_epi16(scale), p16)`: 8 i32 lanes `scale*p[2k] + scale*p[2k+1]`.
#[inline(always)]
pub(crate) fn madd_scale(scale: u8, p16: &[i16; 16]) -> [i32; 8] {
    madd(&[scale as i16; 16], p16)
}

/// `dequantize_row_q4_K`.
pub fn dequantize_q4_k(x: &[BlockQ4K], y: &mut [f32]) {
    debug_check("q4_K dequantize", x.len() * QK_K, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(b.d);
        let min = f16_to_f32(b.dmin);
        for j in 0..4 {
            let (sc, m) = get_scale_min_k4(2 * j, &b.scales);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            let (sc, m) = get_scale_min_k4(2 * j + 1, &b.scales);
            let (d2, m2) = (d * sc as f32, min * m as f32);
            let q = &b.qs[32 * j..32 * j + 32];
            let o = &mut out[64 * j..64 * j + 64];
            for l in 0..32 {
                o[l] = d1 * (q[l] & 0xF) as f32 - m1;
                o[32 + l] = d2 * (q[l] >> 4) as f32 - m2;
            }
        }
    }
}

/// `ggml_vec_dot_q4_K_q8_K`, AVX2 branch.
pub fn vec_dot_q4_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    debug_check("q4_K vec_dot", x.len(), y.len());
    let mut acc = [0f32; 8];
    let mut acc_m = [0f32; 4];
    for (bx, by) in x.iter().zip(y) {
        let d = by.d * f16_to_f32(bx.d);
        let dmin = -by.d * f16_to_f32(bx.dmin);
        let (scales, mins) = unpack_scales_mins(&bx.scales);

        // acc_m = _mm_fmadd_ps(set1(dmin), cvtepi32_ps(prod), acc_m)
        let prod = mins_prod(&mins, &by.bsums);
        for l in 0..4 {
            acc_m[l] = dmin.mul_add(prod[l] as f32, acc_m[l]);
        }

        let mut sumi = [0i32; 8];
        for j in 0..4 {
            let q4l: [u8; 32] = core::array::from_fn(|l| bx.qs[32 * j + l] & 0xF);
            let q4h: [u8; 32] = core::array::from_fn(|l| bx.qs[32 * j + l] >> 4);
            let q8l: [i8; 32] = core::array::from_fn(|l| by.qs[64 * j + l]);
            let q8h: [i8; 32] = core::array::from_fn(|l| by.qs[64 * j + 32 + l]);
            let p16l = madd_scale(scales[2 * j], &maddubs(&q4l, &q8l));
            let p16h = madd_scale(scales[2 * j + 1], &maddubs(&q4h, &q8h));
            for k in 0..8 {
                sumi[k] = sumi[k].wrapping_add(p16l[k].wrapping_add(p16h[k]));
            }
        }
        fmadd_bcast(d, &cvt_i32x8(&sumi), &mut acc);
    }
    // acc_m = add(acc_m, movehl(acc_m)); acc_m = add_ss(acc_m, movehdup(acc_m))
    let m = (acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]);
    hsum_float_8(&acc) + m
}

impl WeightBlock for BlockQ4K {
    const FORMAT: Format = Format::Q4_K;
    type Act = BlockQ8K;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_q4_k(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_q4_k(w, a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kmask_unpacking_matches_get_scale_min_k4() {
        let mut s = [0u8; 12];
        for seed in 0..64u32 {
            for (i, b) in s.iter_mut().enumerate() {
                *b = (seed.wrapping_mul(2654435761).rotate_left(i as u32 * 3) >> 7) as u8 ^ (i as u8).wrapping_mul(37);
            }
            let (sc, m) = unpack_scales_mins(&s);
            for j in 0..8 {
                assert_eq!(get_scale_min_k4(j, &s), (sc[j], m[j]));
            }
        }
    }
}
