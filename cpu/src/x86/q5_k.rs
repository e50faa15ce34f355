//! q5_K weights with q8_K activations on AVX2: the dot kernel (quants.c
//! `ggml_vec_dot_q5_K_q8_K`, AVX2 branch) and `dequantize_row_q5_K` (ggml-quants.c).

use core::arch::x86_64::*;

use qkern_formats::blocks::{BlockQ5K, BlockQ8K};

use super::q4_k::{mins_prod, scales_mins, utmp};
use super::{
    SCALE_SHUFFLE_K4, avx2_chunk_fn, f16_to_f32, f16_to_f32x8, for_tokens, hsum_float_8, load_i8x32, load_u8x32,
    q8k_32, store_f32x8, token_rows,
};

/// The two 32-element quant vectors of step `j`: low/high nibbles of `qs[32j..]` plus
/// `((qh & hmask) >> bit) << 4` with `hmask = 1 << bit` per byte, `bit = 2j, 2j+1`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn quants(x: &BlockQ5K, hbits: __m256i, j: usize) -> [__m256i; 2] {
    let m4 = _mm256_set1_epi8(0xF);
    let q5bits = load_u8x32(&x.qs.as_chunks::<32>().0[j]);
    let (b0, b1) = (2 * j as i32, 2 * j as i32 + 1);
    // `hmask` after `bit` doublings of `mone` (epi16 shifts of 0x0101: never crosses a byte
    // for bit <= 7).
    let hmask0 = _mm256_set1_epi8((1u8 << b0) as i8);
    let hmask1 = _mm256_set1_epi8((1u8 << b1) as i8);
    let q5l_0 = _mm256_and_si256(q5bits, m4);
    let q5h_0 = _mm256_slli_epi16::<4>(_mm256_srl_epi16(_mm256_and_si256(hbits, hmask0), _mm_cvtsi32_si128(b0)));
    let q5l_1 = _mm256_and_si256(_mm256_srli_epi16::<4>(q5bits), m4);
    let q5h_1 = _mm256_slli_epi16::<4>(_mm256_srl_epi16(_mm256_and_si256(hbits, hmask1), _mm_cvtsi32_si128(b1)));
    [_mm256_add_epi8(q5l_0, q5h_0), _mm256_add_epi8(q5l_1, q5h_1)]
}

/// `ggml_vec_dot_q5_K_q8_K` for `NT` tokens (structure as q4_K's kernel). The mins go to a
/// scalar `summs += dmin * hsum(prod)`, which gcc contracts into one `vfmadd231ss` (see the
/// reference); the `NT` scalar `summs` are the lanes of one vector, token t in lane t.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot<const NT: usize>(w: &[BlockQ5K], a: &[BlockQ8K], apr: usize, out: &mut [f32; NT]) {
    let n = w.len();
    let ys: [&[BlockQ8K]; NT] = token_rows(a, apr, n);
    let mut acc = [_mm256_setzero_ps(); NT];
    let mut summs = _mm256_setzero_ps();
    for (i, x) in w.iter().enumerate() {
        let dx = f16_to_f32x8(x.d);
        let dminx = f16_to_f32x8(x.dmin);
        let (scales, mins) = scales_mins(&x.scales);
        let mut neg_yd = [0f32; 8];
        let mut hs = [0i32; 8];
        for_tokens!(NT, t => {
            let y = &ys[t][i];
            neg_yd[t] = -y.d;
            let prod = mins_prod(mins, y);
            let mzero = _mm_setzero_si128();
            let hsum = _mm_hadd_epi32(_mm_hadd_epi32(prod, mzero), mzero);
            hs[t] = _mm_extract_epi32::<0>(hsum);
        });
        // `summs += dmin * (float)hsum`, fused, lane t = token t.
        let hs = _mm256_cvtepi32_ps(_mm256_setr_epi32(hs[0], hs[1], hs[2], hs[3], hs[4], hs[5], hs[6], hs[7]));
        // `dmin = -y[i].d * FP16_TO_FP32(x[i].dmin)`, lane t = token t.
        let n = neg_yd;
        let dmin = _mm256_mul_ps(_mm256_setr_ps(n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]), dminx);
        summs = _mm256_fmadd_ps(dmin, hs, summs);

        let hbits = load_u8x32(&x.qh);
        let mut sumi = [_mm256_setzero_si256(); NT];
        for j in 0..4 {
            let scale_0 = _mm256_shuffle_epi8(scales, load_u8x32(&SCALE_SHUFFLE_K4[2 * j]));
            let scale_1 = _mm256_shuffle_epi8(scales, load_u8x32(&SCALE_SHUFFLE_K4[2 * j + 1]));
            let q5 = quants(x, hbits, j);
            for_tokens!(NT, t => {
                let y = &ys[t][i];
                let p16_0 = _mm256_madd_epi16(scale_0, _mm256_maddubs_epi16(q5[0], load_i8x32(q8k_32(&y.qs, 2 * j))));
                let p16_1 = _mm256_madd_epi16(scale_1, _mm256_maddubs_epi16(q5[1], load_i8x32(q8k_32(&y.qs, 2 * j + 1))));
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p16_0, p16_1));
            });
        }
        for_tokens!(NT, t => {
            // `d = y[i].d * FP16_TO_FP32(x[i].d)` (in every lane)
            let d = _mm256_mul_ps(_mm256_set1_ps(ys[t][i].d), dx);
            acc[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi[t]), acc[t]);
        });
    }
    let mut sm = [0f32; 8];
    store_f32x8(&mut sm, summs);
    for_tokens!(NT, t => {
        // `*s = hsum_float_8(acc) + summs;`
        out[t] = hsum_float_8(acc[t]) + sm[t];
    });
}

avx2_chunk_fn!(mod nt, fn chunk_avx2, dot, BlockQ5K, BlockQ8K);

/// `dequantize_row_q5_K`: `y = (d*sc) * (q + 16h) - (dmin*m)` (unfused, as ggml-base).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dequantize_avx2(x: &[BlockQ5K], y: &mut [f32]) {
    for (b, out) in x.iter().zip(y.as_chunks_mut::<256>().0) {
        let d = f16_to_f32(b.d);
        let min = f16_to_f32(b.dmin);
        let sm: [u8; 16] = bytemuck::cast(utmp(&b.scales));
        let hbits = load_u8x32(&b.qh);
        let out: &mut [[f32; 8]; 32] = bytemuck::cast_mut(out);
        for j in 0..4 {
            for (h, q) in quants(b, hbits, j).into_iter().enumerate() {
                let sb = 2 * j + h;
                let dd = _mm256_set1_ps(d * sm[sb] as f32);
                let mm = _mm256_set1_ps(min * sm[8 + sb] as f32);
                let lo = _mm256_castsi256_si128(q);
                let hi = _mm256_extracti128_si256::<1>(q);
                let parts = [lo, _mm_unpackhi_epi64(lo, lo), hi, _mm_unpackhi_epi64(hi, hi)];
                for (k, p) in parts.into_iter().enumerate() {
                    let v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(p));
                    store_f32x8(&mut out[4 * sb + k], _mm256_sub_ps(_mm256_mul_ps(dd, v), mm));
                }
            }
        }
    }
}
