//! q5_1 weights with q8_1 activations on AVX2: the dot kernel (quants.c
//! `ggml_vec_dot_q5_1_q8_1`, AVX2 branch), the x86 q8_1 quantizer (`quantize_row_q8_1`,
//! AVX2 branch) and `dequantize_row_q5_1` (ggml-quants.c).

use core::arch::x86_64::*;

use qkern_formats::blocks::{BlockQ5_1, BlockQ8_1};

use super::{
    Lane32, avx2_chunk_fn, bytes_from_bits_32, bytes_from_nibbles_32, f16_table, f16_to_f32, f16_to_f32x8, f32_to_f16,
    for_tokens, hsum_float_8, hsum_i32_8, load_f32x8, load_i8x32, mul_sum_us8_pairs, prefetch_ahead, q8_block, q8_pack,
    store_f32x8, store_i8x32, token_rows,
};

/// The 32 unsigned 5-bit quants of a block: `bytes_from_nibbles_32(qs) | (bytes_from_bits_32(qh) & 0x10)`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn quants(x: &BlockQ5_1) -> __m256i {
    let qx = bytes_from_nibbles_32(&x.qs);
    let bxhi = _mm256_and_si256(bytes_from_bits_32(&x.qh), _mm256_set1_epi8(0x10));
    _mm256_or_si256(qx, bxhi)
}

/// `ggml_vec_dot_q5_1_q8_1` for `NT` tokens: per block the quants are built once; per
/// token `acc[t] = fma(mul_sum_us8_pairs_float(qx, qy), dx * dy, acc[t])` and
/// `summs[t] += m * s`. `sc` holds the tokens' `d` and `s` as f32 (`prep_q8_1`). The `NT`
/// scalar `summs` live in the lanes of one vector (lane t = token t; one fma per lane, as
/// gcc contracts ggml's `summs += m * s`; `m * s`, a product of two halves, is exact in
/// f32, so a mul then add would agree). One token: `dx * dy` as ggml's build forms
/// it (table load, `vmulss`, broadcast); more: `dx` broadcast once per block, then one
/// `vmulps` with a broadcast load per token (the same product in every lane).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot<const NT: usize>(w: &[BlockQ5_1], a: &[BlockQ8_1], apr: usize, sc: &[Lane32], out: &mut [f32; NT]) {
    let n = w.len();
    let ys: [&[BlockQ8_1]; NT] = token_rows(a, apr, n);
    let sc = &sc.as_chunks::<2>().0[..n];
    let tab = f16_table();
    let mut acc = [_mm256_setzero_ps(); NT];
    let mut summs = _mm256_setzero_ps();
    if NT == 1 {
        // The loop below for one token, its block, token and scale rows zipped (no bounds
        // checks in the loop).
        for (i, ((x, y), sc)) in w.iter().zip(ys[0]).zip(sc).enumerate() {
            let (dy, s) = (&sc[0].0, &sc[1].0);
            summs = _mm256_fmadd_ps(_mm256_set1_ps(tab.get(x.m)), load_f32x8(s), summs);
            let qx = quants(x);
            prefetch_ahead(w, i);
            let q = _mm256_cvtepi32_ps(mul_sum_us8_pairs(qx, load_i8x32(&y.qs)));
            let d = _mm256_set1_ps(tab.get(x.d) * dy[0]);
            acc[0] = _mm256_fmadd_ps(q, d, acc[0]);
        }
        out[0] = hsum_float_8(acc[0]) + _mm256_cvtss_f32(summs);
        return;
    }
    for (i, x) in w.iter().enumerate() {
        let (dy, s) = (&sc[i][0].0, &sc[i][1].0);
        // `summs += m * s`, contracted by gcc into `vfmadd231ss`: one fma per lane here.
        summs = _mm256_fmadd_ps(_mm256_set1_ps(tab.get(x.m)), load_f32x8(s), summs);
        // No saturation in `mul_sum_us8_pairs`: qx in [0, 31] (5 bits), y in [-128, 127],
        // so a pair is at most 2 * 31 * 128 = 7936 in magnitude.
        let qx = quants(x);
        prefetch_ahead(w, i);
        let dx = f16_to_f32x8(x.d);
        for_tokens!(NT, t => {
            let y = &ys[t][i];
            let q = _mm256_cvtepi32_ps(mul_sum_us8_pairs(qx, load_i8x32(&y.qs)));
            // `_mm256_mul_ps(dx, dy)`
            let d = _mm256_mul_ps(dx, _mm256_broadcast_ss(&dy[t]));
            acc[t] = _mm256_fmadd_ps(q, d, acc[t]);
        });
    }
    let mut sm = [0f32; 8];
    store_f32x8(&mut sm, summs);
    for_tokens!(NT, t => {
        // `*s = hsum_float_8(acc) + summs;`
        out[t] = hsum_float_8(acc[t]) + sm[t];
    });
}

avx2_chunk_fn!(scaled mod nt, fn chunk_avx2, dot, BlockQ5_1, BlockQ8_1);

/// x86 `quantize_row_q8_1` (AVX2 branch) of one row; `x.len() == y.len() * 32`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_q8_1_avx2(x: &[f32], y: &mut [BlockQ8_1]) {
    for (xb, b) in x.as_chunks::<32>().0.iter().zip(y.iter_mut()) {
        let (d, q) = q8_block(xb);
        b.d = f32_to_f16(d);
        // `d * hsum_i32_8(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)))`
        let sum = hsum_i32_8(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
        b.s = f32_to_f16(d * sum as f32);
        store_i8x32(&mut b.qs, q8_pack(q));
    }
}

/// `dequantize_row_q5_1`: `y = q * d + m` (unfused; exact either way, see the reference).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dequantize_avx2(x: &[BlockQ5_1], y: &mut [f32]) {
    for (b, out) in x.iter().zip(y.as_chunks_mut::<32>().0) {
        let d = _mm256_set1_ps(f16_to_f32(b.d));
        let m = _mm256_set1_ps(f16_to_f32(b.m));
        let q = quants(b);
        let out: &mut [[f32; 8]; 4] = bytemuck::cast_mut(out);
        let lo = _mm256_castsi256_si128(q);
        let hi = _mm256_extracti128_si256::<1>(q);
        let parts = [lo, _mm_unpackhi_epi64(lo, lo), hi, _mm_unpackhi_epi64(hi, hi)];
        for (o, p) in out.iter_mut().zip(parts) {
            let v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(p));
            store_f32x8(o, _mm256_add_ps(_mm256_mul_ps(v, d), m));
        }
    }
}
