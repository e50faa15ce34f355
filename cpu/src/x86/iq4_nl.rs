//! iq4_nl weights with q8_0 activations on AVX2: the dot kernel (quants.c
//! `ggml_vec_dot_iq4_nl_q8_0`, AVX2 branch) and `dequantize_row_iq4_nl` (ggml-quants.c).

use core::arch::x86_64::*;

use qkern_formats::blocks::{BlockIq4Nl, BlockQ8_0};
use qkern_formats::tables::KVALUES_IQ4NL;

use super::{
    F16Table, Lane32, avx2_chunk_fn, f16_table, f16_to_f32, f16_to_f32x8, for_tokens, hsum_float_8, load_i8x16,
    load_i8x32, load_u8x16, mul_sum_i8_pairs_float, mul_sum_us8_pairs, prefetch_ahead, store_f32x8, token_rows,
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
fn step(tab: &F16Table, q4b: __m256i, dx: __m256, y: &BlockQ8_0, accum: __m256) -> __m256 {
    // `mul_add_epi8` + `madd(.., mone)` is `mul_sum_i8_pairs_float` (madd is commutative).
    // No saturation: |q4b| <= 127 (`kvalues_iq4nl` lies in [-127, 113]) and sign(y, q4b) in
    // [-128, 127], so a pair is at most 2 * 127 * 128 = 32512 in magnitude.
    let p = mul_sum_i8_pairs_float(q4b, load_i8x32(&y.qs));
    // `set1(FP16_TO_FP32(y.d) * FP16_TO_FP32(x.d))`, the product in every lane.
    _mm256_fmadd_ps(_mm256_mul_ps(tab.x8(y.d), dx), p, accum)
}

/// The scalar tail block of an odd block count for one token: plain integer products
/// (exact, so any grouping), then `sumf += d * (sumi1 + sumi2)`, contracted into one fma by
/// gcc (see the reference). `q_lo`, `q_hi`: the block's values widened to int16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tail(q_lo: __m256i, q_hi: __m256i, dx: f32, dy: f32, y: &BlockQ8_0, sumf: f32) -> f32 {
    let qy = load_i8x32(&y.qs);
    let y_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(qy));
    let y_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(qy));
    let prod = _mm256_add_epi32(_mm256_madd_epi16(q_lo, y_lo), _mm256_madd_epi16(q_hi, y_hi));
    let sumi = super::hsum_i32_8(prod);
    let d = dy * dx;
    d.mul_add(sumi as f32, sumf)
}

/// The widened values of the tail block and its `dx`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tail_block(x: &BlockIq4Nl, values128: __m128i, tab: &F16Table) -> (__m256i, __m256i, f32) {
    let q = values(x, values128);
    let q_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q));
    let q_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(q));
    (q_lo, q_hi, tab.get(x.d))
}

/// Tokens `t0..t0 + K` (`K <= 4`) of [`dot`], results into `out[t0..t0 + K]`: the block
/// pairs, every pair unpacked once and used by the `K` tokens at once (`2 K` accumulators
/// in registers): per token `accum = fma(set1(dy * dx), p, accum)`, the product formed as a
/// vector of equal lanes (`dx` broadcast once per block, `dy` a broadcast load from the
/// prepared scales `sc`); then `hsum_float_8(accum1 + accum2)` and the tail block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn span<const NT: usize, const K: usize>(
    w: &[BlockIq4Nl],
    ys: &[&[BlockQ8_0]; NT],
    sc: &[Lane32],
    t0: usize,
    out: &mut [f32; NT],
) {
    let n = w.len();
    let values128 = load_i8x16(&KVALUES_IQ4NL);
    let yk: [&[BlockQ8_0]; K] = core::array::from_fn(|t| ys[t0 + t]);
    let mut a1 = [_mm256_setzero_ps(); K];
    let mut a2 = [_mm256_setzero_ps(); K];
    // Block `i` into the accumulators `acc` of the K tokens.
    macro_rules! block {
        ($i:expr, $acc:ident) => {{
            let i = $i;
            let x = &w[i];
            let q = values(x, values128);
            let aq = _mm256_sign_epi8(q, q);
            let dx = f16_to_f32x8(x.d);
            let dy = &sc[i].0;
            for_tokens!(K, t => {
                // `mul_add_epi8(q4b, q8b)` + `madd(.., mone)`: `mul_sum_i8_pairs_float` (no
                // saturation: as in `step`).
                let sy = _mm256_sign_epi8(load_i8x32(&yk[t][i].qs), q);
                let pf = _mm256_cvtepi32_ps(mul_sum_us8_pairs(aq, sy));
                let d = _mm256_mul_ps(dx, _mm256_broadcast_ss(&dy[t0 + t]));
                $acc[t] = _mm256_fmadd_ps(d, pf, $acc[t]);
            });
        }};
    }
    for p in 0..n / 2 {
        // The first span streams the row from memory (the second, of 5-8 tokens, finds it in
        // L1): ask for it ahead, as the one-token loop does.
        if t0 == 0 {
            prefetch_ahead(w, 2 * p);
        }
        block!(2 * p, a1);
        block!(2 * p + 1, a2);
    }
    for_tokens!(K, t => {
        // `sumf = hsum_float_8(_mm256_add_ps(accum1, accum2));`
        out[t0 + t] = hsum_float_8(_mm256_add_ps(a1[t], a2[t]));
    });
    if n % 2 == 1 {
        let (q_lo, q_hi, dx) = tail_block(&w[n - 1], values128, f16_table());
        for_tokens!(K, t => {
            out[t0 + t] = tail(q_lo, q_hi, dx, sc[n - 1].0[t0 + t], &yk[t][n - 1], out[t0 + t]);
        });
    }
}

/// `ggml_vec_dot_iq4_nl_q8_0` for `NT` tokens. ggml walks the blocks in pairs, the even
/// block into `accum1`, the odd one into `accum2`. One token: ggml's loop (scales by
/// table). More: [`span`] over at most 4 tokens at a time (8 accumulators); 5 to 8 tokens
/// run two spans (4 + the rest), each unpacking the (L1-resident) row again. `sc`: the prepared scales.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot<const NT: usize>(w: &[BlockIq4Nl], a: &[BlockQ8_0], apr: usize, sc: &[Lane32], out: &mut [f32; NT]) {
    let n = w.len();
    let ys: [&[BlockQ8_0]; NT] = token_rows(a, apr, n);
    let sc = &sc[..n];
    if NT == 1 {
        let values128 = load_i8x16(&KVALUES_IQ4NL);
        let tab = f16_table();
        let (mut accum1, mut accum2) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        // (pairs of weight and activation blocks zipped: no bounds checks in the loop)
        for (p, ([x1, x2], [y1, y2])) in w.as_chunks::<2>().0.iter().zip(ys[0].as_chunks::<2>().0).enumerate() {
            prefetch_ahead(w, 2 * p);
            let (q1, q2) = (values(x1, values128), values(x2, values128));
            let (d1, d2) = (tab.x8(x1.d), tab.x8(x2.d));
            accum1 = step(tab, q1, d1, y1, accum1);
            accum2 = step(tab, q2, d2, y2, accum2);
        }
        out[0] = hsum_float_8(_mm256_add_ps(accum1, accum2));
        if n % 2 == 1 {
            let (q_lo, q_hi, dx) = tail_block(&w[n - 1], values128, tab);
            out[0] = tail(q_lo, q_hi, dx, tab.get(ys[0][n - 1].d), &ys[0][n - 1], out[0]);
        }
        return;
    }
    match NT {
        2 => span::<NT, 2>(w, &ys, sc, 0, out),
        3 => span::<NT, 3>(w, &ys, sc, 0, out),
        4 => span::<NT, 4>(w, &ys, sc, 0, out),
        5 => {
            span::<NT, 3>(w, &ys, sc, 0, out);
            span::<NT, 2>(w, &ys, sc, 3, out);
        }
        // (Each `span` instance has one call site, so that LLVM inlines it.)
        6 => {
            span::<NT, 4>(w, &ys, sc, 0, out);
            span::<NT, 2>(w, &ys, sc, 4, out);
        }
        7 => {
            span::<NT, 3>(w, &ys, sc, 0, out);
            span::<NT, 4>(w, &ys, sc, 3, out);
        }
        _ => {
            for t0 in [0, 4] {
                span::<NT, 4>(w, &ys, sc, t0, out);
            }
        }
    }
}

avx2_chunk_fn!(scaled mod nt, fn chunk_avx2, dot, BlockIq4Nl, BlockQ8_0);

/// `dequantize_row_iq4_nl`: `y = d * kvalues_iq4nl[q]`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
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
