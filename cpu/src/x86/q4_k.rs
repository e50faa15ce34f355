//! q4_K weights with q8_K activations on AVX2: the dot kernel (quants.c
//! `ggml_vec_dot_q4_K_q8_K`, AVX2 branch) and `dequantize_row_q4_K` (ggml-quants.c).

use core::arch::x86_64::*;

use qkern_formats::blocks::{BlockQ4K, BlockQ8K};

use super::{
    SCALE_SHUFFLE_K4, avx2_chunk_fn, f16_to_f32, f16_to_f32x8, for_tokens, hsum_float_8, load_i8x32, load_i16x16,
    load_u8x32, pin_if_shared, q8k_32, store_f32x8, token_rows,
};

/// The kmask unpacking of the 12 scale bytes: `utmp[0..4]` (bytes 0..8 the 8 scales,
/// bytes 8..16 the 8 mins), shared with q5_K.
#[inline(always)]
pub(crate) fn utmp(scales: &[u8; 12]) -> [u32; 4] {
    const KMASK1: u32 = 0x3f3f3f3f;
    const KMASK2: u32 = 0x0f0f0f0f;
    const KMASK3: u32 = 0x03030303;
    let s: &[[u8; 4]; 3] = bytemuck::cast_ref(scales);
    let mut utmp = [u32::from_le_bytes(s[0]), u32::from_le_bytes(s[1]), u32::from_le_bytes(s[2]), 0];
    utmp[3] = ((utmp[2] >> 4) & KMASK2) | (((utmp[1] >> 6) & KMASK3) << 4);
    let uaux = utmp[1] & KMASK1;
    utmp[1] = (utmp[2] & KMASK2) | (((utmp[0] >> 6) & KMASK3) << 4);
    utmp[2] = uaux;
    utmp[0] &= KMASK1;
    utmp
}

/// `mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32(utmp[3], utmp[2], utmp[1], utmp[0]))`:
/// returns `(scales, mins)` = (`MM256_SET_M128I(sc128, sc128)`, the high 128 bits).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn scales_mins(scales: &[u8; 12]) -> (__m256i, __m128i) {
    let u = utmp(scales);
    let mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32(u[3] as i32, u[2] as i32, u[1] as i32, u[0] as i32));
    let sc128 = _mm256_extracti128_si256::<0>(mins_and_scales);
    (_mm256_set_m128i(sc128, sc128), _mm256_extracti128_si256::<1>(mins_and_scales))
}

/// `prod = _mm_madd_epi16(mins, _mm_hadd_epi16(bsums[0..8], bsums[8..16]))`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mins_prod(mins: __m128i, y: &BlockQ8K) -> __m128i {
    let q8sums = load_i16x16(&y.bsums);
    let q8s = _mm_hadd_epi16(_mm256_extracti128_si256::<0>(q8sums), _mm256_extracti128_si256::<1>(q8sums));
    _mm_madd_epi16(mins, q8s)
}

/// `ggml_vec_dot_q4_K_q8_K` for `NT` tokens. Per super-block the scales, mins and the 8
/// nibble vectors (with their `scale_l` / `scale_h` shuffles) are unpacked once; then each
/// token in turn sums its 8 steps into one integer vector (exact, so the grouping is free:
/// ggml's lanes) and updates its own `acc` (8 lanes) and `acc_m` (4 lanes; two tokens share
/// one 256-bit register, lane-wise the same fma). The float steps per token are ggml's.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot<const NT: usize>(w: &[BlockQ4K], a: &[BlockQ8K], apr: usize, out: &mut [f32; NT]) {
    let n = w.len();
    let ys: [&[BlockQ8K]; NT] = token_rows(a, apr, n);
    let m4 = _mm256_set1_epi8(0xF);
    let mut acc = [_mm256_setzero_ps(); NT];
    // acc_m of tokens 2p (low half) and 2p+1 (high half).
    let mut acc_m = [_mm256_setzero_ps(); NT];
    for (i, x) in w.iter().enumerate() {
        let dx = f16_to_f32x8(x.d);
        let dminx = _mm256_castps256_ps128(f16_to_f32x8(x.dmin));
        let (scales, mins) = scales_mins(&x.scales);
        // Step k = 2j + h: the nibbles of `qs[32j..32j+32]` (h = 0 low, 1 high) and
        // `shuffle(scales, get_scale_shuffle_k4(k))`.
        let mut wq = [[_mm256_setzero_si256(); 8]; 2];
        for j in 0..4 {
            let q4bits = load_u8x32(&x.qs.as_chunks::<32>().0[j]);
            wq[0][2 * j] = _mm256_and_si256(q4bits, m4);
            wq[0][2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits), m4);
        }
        for k in 0..8 {
            wq[1][k] = _mm256_shuffle_epi8(scales, load_u8x32(&SCALE_SHUFFLE_K4[k]));
        }
        for_tokens!(NT.div_ceil(2), p => {
            // `dmin = -y[i].d * FP16_TO_FP32(x[i].dmin)`; `acc_m = fma(dmin, cvt(prod), acc_m)`
            let (t0, t1) = (2 * p, (2 * p + 1).min(NT - 1));
            let (y0, y1) = (&ys[t0][i], &ys[t1][i]);
            let dmin = _mm256_set_m128(_mm_mul_ps(_mm_set1_ps(-y1.d), dminx), _mm_mul_ps(_mm_set1_ps(-y0.d), dminx));
            let prod = _mm256_set_m128i(mins_prod(mins, y1), mins_prod(mins, y0));
            acc_m[p] = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(prod), acc_m[p]);
        });
        for_tokens!(NT, t => {
            let y = &ys[t][i];
            pin_if_shared::<_, NT>(&mut wq);
            let mut sumi = _mm256_setzero_si256();
            for k in 0..8 {
                // `madd(scale, maddubs(q4, q8))`
                let p16 = _mm256_maddubs_epi16(wq[0][k], load_i8x32(q8k_32(&y.qs, k)));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(wq[1][k], p16));
            }
            // `d = y[i].d * FP16_TO_FP32(x[i].d)` (in every lane)
            let d = _mm256_mul_ps(_mm256_set1_ps(y.d), dx);
            acc[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc[t]);
        });
    }
    for_tokens!(NT, t => {
        let am = if t % 2 == 0 {
            _mm256_castps256_ps128(acc_m[t / 2])
        } else {
            _mm256_extractf128_ps::<1>(acc_m[t / 2])
        };
        let mut m = _mm_add_ps(am, _mm_movehl_ps(am, am));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        out[t] = hsum_float_8(acc[t]) + _mm_cvtss_f32(m);
    });
}

avx2_chunk_fn!(mod nt, fn chunk_avx2, dot, BlockQ4K, BlockQ8K);

/// `dequantize_row_q4_K`: `y = (d*sc) * q - (dmin*m)` (unfused, as ggml-base).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dequantize_avx2(x: &[BlockQ4K], y: &mut [f32]) {
    for (b, out) in x.iter().zip(y.as_chunks_mut::<256>().0) {
        let d = f16_to_f32(b.d);
        let min = f16_to_f32(b.dmin);
        let u = utmp(&b.scales);
        let sm: [u8; 16] = bytemuck::cast(u);
        let out: &mut [[f32; 8]; 32] = bytemuck::cast_mut(out);
        for j in 0..4 {
            let q4bits = load_u8x32(&b.qs.as_chunks::<32>().0[j]);
            let m4 = _mm256_set1_epi8(0xF);
            let halves = [_mm256_and_si256(q4bits, m4), _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits), m4)];
            for (h, q) in halves.into_iter().enumerate() {
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
