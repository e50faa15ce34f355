//! q4_K weights with q8_K activations on AVX2: the dot kernel (quants.c
//! `ggml_vec_dot_q4_K_q8_K`, AVX2 branch) and `dequantize_row_q4_K` (ggml-quants.c).

use core::arch::x86_64::*;

use qkern_formats::blocks::{BlockQ4K, BlockQ8K};

use super::{
    Lane32, Q8KPrep, SCALE_SHUFFLE_K4, avx2_chunk_fn, f16_to_f32, f16_to_f32x8, for_tokens, hsum_float_8, load_i8x32,
    load_i16x8, load_u8x32, madd_acc, q8k_32, q8k_prep, store_f32x8, superblocks_g, token_rows,
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

/// `prod = _mm_madd_epi16(mins, _mm_hadd_epi16(bsums[0..8], bsums[8..16]))`, the `hadd`
/// precomputed once per token and super-block (`Q8KPrep::q8s`, the same wrapping sums).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mins_prod(mins: __m128i, y: &Q8KPrep) -> __m128i {
    _mm_madd_epi16(mins, load_i16x8(&y.q8s))
}

/// A super-block's integer sums for `G` tokens (q4_K and q5_K): per token,
/// `sum_k madd(sc[k], maddubs(q[k], q8[k]))` over the 8 steps (ggml's `sumi`, wrapping i32
/// lanes); each weight vector is loaded once for the `G` tokens.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn ksums<const G: usize>(q: &[__m256i; 8], sc: &[__m256i; 8], ys: [&Q8KPrep; G]) -> [__m256i; G] {
    let mut sumi = [_mm256_setzero_si256(); G];
    for k in 0..8 {
        for g in 0..G {
            let p16 = _mm256_maddubs_epi16(q[k], load_i8x32(q8k_32(&ys[g].qs, k)));
            sumi[g] = madd_acc(sumi[g], sc[k], p16);
        }
    }
    sumi
}

/// A q4_K super-block unpacked: the 8 nibble vectors (step k = 2j + h: nibbles `h` of
/// `qs[32j..32j+32]`), their scales `shuffle(scales, get_scale_shuffle_k4(k))`, the mins,
/// and `FP16_TO_FP32(d)`, `FP16_TO_FP32(dmin)` in every lane.
#[derive(Clone, Copy)]
struct Unpacked {
    q: [__m256i; 8],
    sc: [__m256i; 8],
    mins: __m128i,
    dx: __m256,
    dminx: __m128,
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn unpack(x: &BlockQ4K) -> Unpacked {
    let m4 = _mm256_set1_epi8(0xF);
    let (scales, mins) = scales_mins(&x.scales);
    let mut q = [_mm256_setzero_si256(); 8];
    for j in 0..4 {
        let q4bits = load_u8x32(&x.qs.as_chunks::<32>().0[j]);
        q[2 * j] = _mm256_and_si256(q4bits, m4);
        q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits), m4);
    }
    let mut sc = [_mm256_setzero_si256(); 8];
    for (k, s) in sc.iter_mut().enumerate() {
        *s = _mm256_shuffle_epi8(scales, load_u8x32(&SCALE_SHUFFLE_K4[k]));
    }
    Unpacked { q, sc, mins, dx: f16_to_f32x8(x.d), dminx: _mm256_castps256_ps128(f16_to_f32x8(x.dmin)) }
}

/// `ggml_vec_dot_q4_K_q8_K` for `NT` tokens ([`superblocks_g`]). Per token and super-block:
/// `acc_m = fma(dmin, cvt(prod), acc_m)` with `dmin = -y.d * dmin_x`, the 8 steps
/// `sumi += madd(scale, maddubs(q4, q8))` (exact integers: the grouping is free), then
/// `acc = fma(y.d * d_x, cvt(sumi), acc)`; at the end `hsum_float_8(acc) + ((m0+m2)+(m1+m3))`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot<const NT: usize>(w: &[BlockQ4K], _a: &[BlockQ8K], apr: usize, sc: &[Lane32], out: &mut [f32; NT]) {
    // Tokens per group of the segment loop ([`superblocks_g`]).
    const G: usize = 2;
    let ys: [&[Q8KPrep]; NT] = token_rows(q8k_prep(sc), apr, w.len());
    let step = |u: &Unpacked, y: &Q8KPrep, (acc, acc_m)| {
        // `dmin = -y[i].d * FP16_TO_FP32(x[i].dmin)` (in every lane)
        let dmin = _mm_mul_ps(_mm_set1_ps(y.nd), u.dminx);
        let acc_m = _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(mins_prod(u.mins, y)), acc_m);
        let [sumi] = ksums(&u.q, &u.sc, [y]);
        // `d = y[i].d * FP16_TO_FP32(x[i].d)` (in every lane)
        let d = _mm256_mul_ps(_mm256_set1_ps(y.d), u.dx);
        (_mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc), acc_m)
    };
    // `step` for `G` tokens at once: each unpacked vector loaded once for the group.
    let stepg = |u: &Unpacked, ys: [&Q8KPrep; G], st: [(__m256, __m128); G]| {
        let sumi = ksums(&u.q, &u.sc, ys);
        let mut out = st;
        for g in 0..G {
            let (y, (acc, acc_m)) = (ys[g], st[g]);
            let dmin = _mm_mul_ps(_mm_set1_ps(y.nd), u.dminx);
            let acc_m = _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(mins_prod(u.mins, y)), acc_m);
            let d = _mm256_mul_ps(_mm256_set1_ps(y.d), u.dx);
            out[g] = (_mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi[g]), acc), acc_m);
        }
        out
    };
    let st = superblocks_g::<NT, G, true, _, _, _, _>(
        w,
        &ys,
        (_mm256_setzero_ps(), _mm_setzero_ps()),
        |x| unpack(x),
        |u, _x, y, s| step(u, y, s),
        |u, _x, ys, s| stepg(u, ys, s),
        |x, y, s| step(&unpack(x), y, s),
    );
    for_tokens!(NT, t => {
        let (acc, acc_m) = st[t];
        let mut m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        out[t] = hsum_float_8(acc) + _mm_cvtss_f32(m);
    });
}

avx2_chunk_fn!(scaled mod nt, fn chunk_avx2, dot, BlockQ4K, BlockQ8K);

/// `dequantize_row_q4_K`: `y = (d*sc) * q - (dmin*m)` (unfused, as ggml-base).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
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
