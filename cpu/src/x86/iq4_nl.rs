//! iq4_nl weights with q8_0 activations on AVX2: the dot kernel (quants.c
//! `ggml_vec_dot_iq4_nl_q8_0`, AVX2 branch) and `dequantize_row_iq4_nl` (ggml-quants.c).

use core::arch::x86_64::*;

use qkern_formats::blocks::{BlockIq4Nl, BlockQ8_0};
use qkern_formats::tables::KVALUES_IQ4NL;

use super::{
    avx2_chunk_fn, f16_to_f32, f16_to_f32x8, for_tokens, hsum_float_8, load_i8x16, load_i8x32, load_u8x16,
    mul_sum_i8_pairs_float, store_f32x8, superblocks, token_rows,
};

/// The 32 values of a block: `MM256_SET_M128I(shuffle(values, qs >> 4 & 15), shuffle(values, qs & 15))`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn values(x: &BlockIq4Nl, values128: __m128i) -> __m256i {
    let m4b = _mm_set1_epi8(0x0f);
    let q4bits = load_u8x16(&x.qs);
    _mm256_set_m128i(
        _mm_shuffle_epi8(values128, _mm_and_si128(_mm_srli_epi16::<4>(q4bits), m4b)),
        _mm_shuffle_epi8(values128, _mm_and_si128(q4bits, m4b)),
    )
}

/// One step of a block into one token's accumulator:
/// `accum = fma(set1(dy * dx), cvtepi32(madd(mul_add_epi8(q4b, q8b), mone)), accum)`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn step(q4b: __m256i, dx: __m256, y: &BlockQ8_0, accum: __m256) -> __m256 {
    // `mul_add_epi8` + `madd(.., mone)` is `mul_sum_i8_pairs_float` (madd is commutative).
    let p = mul_sum_i8_pairs_float(q4b, load_i8x32(&y.qs));
    // `set1(FP16_TO_FP32(y.d) * FP16_TO_FP32(x.d))`, the product in every lane.
    _mm256_fmadd_ps(_mm256_mul_ps(f16_to_f32x8(y.d), dx), p, accum)
}

/// `ggml_vec_dot_iq4_nl_q8_0` for `NT` tokens. ggml walks the blocks in pairs, the even
/// block into `accum1`, the odd one into `accum2`. Up to 2 tokens, every pair is unpacked
/// and used by the tokens at once (4 accumulators in registers); from 3 tokens on the pairs
/// go through [`superblocks`] (a pair as its "super-block": unpacked once per segment, then
/// token after token with only that token's two accumulators live).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot<const NT: usize>(w: &[BlockIq4Nl], a: &[BlockQ8_0], apr: usize, out: &mut [f32; NT]) {
    let n = w.len();
    let ys: [&[BlockQ8_0]; NT] = token_rows(a, apr, n);
    let values128 = load_i8x16(&KVALUES_IQ4NL);
    let pairs = n / 2;
    let mut accum1 = [_mm256_setzero_ps(); NT];
    let mut accum2 = [_mm256_setzero_ps(); NT];
    if NT <= 2 {
        for p in 0..pairs {
            let (i1, i2) = (2 * p, 2 * p + 1);
            let (x1, x2) = (&w[i1], &w[i2]);
            let (q1, q2) = (values(x1, values128), values(x2, values128));
            let (d1, d2) = (f16_to_f32x8(x1.d), f16_to_f32x8(x2.d));
            for_tokens!(NT, t => {
                accum1[t] = step(q1, d1, &ys[t][i1], accum1[t]);
                accum2[t] = step(q2, d2, &ys[t][i2], accum2[t]);
            });
        }
    } else {
        let wp: &[[BlockIq4Nl; 2]] = w[..2 * pairs].as_chunks::<2>().0;
        let mut yp = [wp_empty(); NT];
        for_tokens!(NT, t => {
            yp[t] = ys[t][..2 * pairs].as_chunks::<2>().0;
        });
        let zf = _mm256_setzero_ps();
        let unpack = |x: &[BlockIq4Nl; 2]| {
            (values(&x[0], values128), values(&x[1], values128), f16_to_f32x8(x[0].d), f16_to_f32x8(x[1].d))
        };
        let st = superblocks(
            wp,
            &yp,
            (zf, zf),
            unpack,
            |&(q1, q2, d1, d2), _x, y: &[BlockQ8_0; 2], (a1, a2)| (step(q1, d1, &y[0], a1), step(q2, d2, &y[1], a2)),
            |x, y, (a1, a2)| {
                let (q1, q2, d1, d2) = unpack(x);
                (step(q1, d1, &y[0], a1), step(q2, d2, &y[1], a2))
            },
        );
        for_tokens!(NT, t => {
            (accum1[t], accum2[t]) = st[t];
        });
    }
    for_tokens!(NT, t => {
        // `sumf = hsum_float_8(_mm256_add_ps(accum1, accum2));`
        out[t] = hsum_float_8(_mm256_add_ps(accum1[t], accum2[t]));
    });
    if n % 2 == 1 {
        // The scalar tail block: plain integer products (exact, so any grouping), then
        // `sumf += d * (sumi1 + sumi2)`, contracted into one fma by gcc (see the reference).
        let x = &w[n - 1];
        let q = values(x, values128);
        let (q_lo, q_hi) =
            (_mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)), _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(q)));
        let dx = f16_to_f32(x.d);
        for_tokens!(NT, t => {
            let y = &ys[t][n - 1];
            let qy = load_i8x32(&y.qs);
            let y_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(qy));
            let y_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(qy));
            let prod = _mm256_add_epi32(_mm256_madd_epi16(q_lo, y_lo), _mm256_madd_epi16(q_hi, y_hi));
            let sumi = super::hsum_i32_8(prod);
            let d = f16_to_f32(y.d) * dx;
            out[t] = d.mul_add(sumi as f32, out[t]);
        });
    }
}

/// An empty slice of q8_0 block pairs (the initial value of the per-token pair rows).
#[inline(always)]
fn wp_empty<'a>() -> &'a [[BlockQ8_0; 2]] {
    &[]
}

avx2_chunk_fn!(mod nt, fn chunk_avx2, dot, BlockIq4Nl, BlockQ8_0);

/// `dequantize_row_iq4_nl`: `y = d * kvalues_iq4nl[q]`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dequantize_avx2(x: &[BlockIq4Nl], y: &mut [f32]) {
    let values128 = load_i8x16(&KVALUES_IQ4NL);
    for (b, out) in x.iter().zip(y.as_chunks_mut::<32>().0) {
        let d = _mm256_set1_ps(f16_to_f32(b.d));
        let q = values(b, values128);
        let out: &mut [[f32; 8]; 4] = bytemuck::cast_mut(out);
        let lo = _mm256_castsi256_si128(q);
        let hi = _mm256_extracti128_si256::<1>(q);
        let parts = [lo, _mm_unpackhi_epi64(lo, lo), hi, _mm_unpackhi_epi64(hi, hi)];
        for (o, p) in out.iter_mut().zip(parts) {
            let v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(p));
            store_f32x8(o, _mm256_mul_ps(d, v));
        }
    }
}
