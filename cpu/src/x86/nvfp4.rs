//! nvfp4 weights with q8_0 activations on AVX2: the dot kernel (quants.c
//! `ggml_vec_dot_nvfp4_q8_0`, AVX2 branch) and `dequantize_row_nvfp4` (ggml-quants.c).

use core::arch::x86_64::*;

use qkern_formats::blocks::{BlockNvfp4, BlockQ8_0};
use qkern_formats::fp::ue4m3_to_f32;
use qkern_formats::tables::KVALUES_FP4;

use super::{
    avx2_chunk_fn, f16_table, for_tokens, hsum_float_8, load_i8x16, load_i8x32, load_u8x32, mul_sum_us8_pairs,
    prefetch_ahead, store_f32x8, superblocks_g, token_rows,
};

/// `GGML_CPU_UE4M3_TO_FP32` of every byte (exact values, from the reference's converter).
static UE4M3: [f32; 256] = {
    let mut t = [0f32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = ue4m3_to_f32(i as u8);
        i += 1;
    }
    t
};

/// The block's values as ggml reorders them: `q4_01` (elements 0..32: sub-blocks 0 and 1)
/// and `q4_23` (elements 32..64), each `MM256_SET_M128I(unpackhi_epi64(lo, hi),
/// unpacklo_epi64(lo, hi))` of one 16-byte half of `qs`. Here both halves at once: one 32-byte
/// load, the two nibble lookups and the two unpacks in 256-bit registers (each 128-bit lane
/// one half), then two lane permutes put each half's pieces together (9 operations a block
/// instead of 16).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn values(x: &BlockNvfp4, values256: __m256i) -> [__m256i; 2] {
    let m4b = _mm256_set1_epi8(0x0f);
    let q4bits = load_u8x32(&x.qs);
    let lo = _mm256_shuffle_epi8(values256, _mm256_and_si256(q4bits, m4b));
    let hi = _mm256_shuffle_epi8(values256, _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits), m4b));
    // lane h: unpacklo_epi64 / unpackhi_epi64 of half h's lo and hi
    let a = _mm256_unpacklo_epi64(lo, hi);
    let b = _mm256_unpackhi_epi64(lo, hi);
    [_mm256_permute2x128_si256::<0x20>(a, b), _mm256_permute2x128_si256::<0x31>(a, b)]
}

/// `KVALUES_FP4` in both 128-bit lanes (the table of [`values`]' in-lane lookups).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn values256() -> __m256i {
    _mm256_broadcastsi128_si256(load_i8x16(&KVALUES_FP4))
}

/// The sub-block scales of step k: lanes 0-3 `UE4M3(d[2k])`, lanes 4-7 `UE4M3(d[2k+1])`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scales(x: &BlockNvfp4) -> [__m256; 2] {
    let u = [UE4M3[x.d[0] as usize], UE4M3[x.d[1] as usize], UE4M3[x.d[2] as usize], UE4M3[x.d[3] as usize]];
    [_mm256_set_m128(_mm_set1_ps(u[1]), _mm_set1_ps(u[0])), _mm256_set_m128(_mm_set1_ps(u[3]), _mm_set1_ps(u[2]))]
}

/// `ggml_vec_dot_nvfp4_q8_0` for `NT` tokens: per block values and sub-block scales built
/// once; per token and q8_0 block k, `accum = fma([u(2k) * dy; 4] ++ [u(2k+1) * dy; 4],
/// cvtepi32(madd(mul_add_epi8(q4, q8), mone)), accum)` (`s0 = UE4M3(d[0]) * dy0` etc.,
/// here lane-wise: the same products).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot<const NT: usize>(w: &[BlockNvfp4], a: &[BlockQ8_0], apr: usize, out: &mut [f32; NT]) {
    let n = w.len();
    let ys: [&[BlockQ8_0]; NT] = token_rows(a, apr, 2 * n);
    // Tokens per group of the segment loop ([`superblocks_g`], beyond 5 tokens).
    const G: usize = 4;
    let vals = values256();
    let tab = f16_table();
    // Step k of a block for one token: `accum = fma(scales_k * dy, cvt(madd(mul_add_epi8(q4, q8), mone)), accum)`.
    let step = |q4: &[__m256i; 2], u: &[__m256; 2], y: &[BlockQ8_0; 2], mut accum: __m256| {
        for k in 0..2 {
            let q8 = load_i8x32(&y[k].qs);
            // `mul_add_epi8(q4, q8)`: the sign trick and maddubs; then `madd(p, mone)` (madd is
            // commutative: `mul_sum_us8_pairs`). No saturation: |q4| <= 12 (the doubled E2M1
            // values), |sign(q8, q4)| <= 128, so a pair is at most 2 * 12 * 128 = 3072.
            let p = mul_sum_us8_pairs(_mm256_sign_epi8(q4[k], q4[k]), _mm256_sign_epi8(q8, q4[k]));
            let s = _mm256_mul_ps(u[k], tab.x8(y[k].d));
            accum = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(p), accum);
        }
        accum
    };
    let mut accum = [_mm256_setzero_ps(); NT];
    let mut yp = [y_empty(); NT];
    for_tokens!(NT, t => {
        yp[t] = ys[t].as_chunks::<2>().0;
    });
    if NT <= 5 {
        // Each block unpacked and used by all tokens at once (NT accumulators in registers).
        for (i, x) in w.iter().enumerate() {
            if NT == 1 {
                prefetch_ahead(w, i);
            }
            let (q4, u) = (values(x, vals), scales(x));
            for_tokens!(NT, t => {
                accum[t] = step(&q4, &u, &yp[t][i], accum[t]);
            });
        }
    } else {
        // Beyond, [`superblocks_g`]: segments unpacked once, then token after token.
        let zf = _mm256_setzero_ps();
        accum = superblocks_g::<NT, G, false, _, _, _, _>(
            w,
            &yp,
            zf,
            |x| (values(x, vals), scales(x)),
            |(q4, u), _x, y, acc| step(q4, u, y, acc),
            |(q4, u), _x, ys: [&[BlockQ8_0; 2]; G], st: [__m256; G]| {
                let mut out = st;
                for g in 0..G {
                    out[g] = step(q4, u, ys[g], st[g]);
                }
                out
            },
            |x, y, acc| step(&values(x, vals), &scales(x), y, acc),
        );
    }
    for_tokens!(NT, t => {
        out[t] = hsum_float_8(accum[t]);
    });
}

/// An empty slice of q8_0 block pairs (the initial value of the per-token pair rows).
#[inline(always)]
fn y_empty<'a>() -> &'a [[BlockQ8_0; 2]] {
    &[]
}

avx2_chunk_fn!(mod nt, fn chunk_avx2, dot, BlockNvfp4, BlockQ8_0);

/// `dequantize_row_nvfp4`: `kvalues_fp4[q] * UE4M3(d[s])` per sub-block of 16 (element j
/// the low nibble of byte j, element j+8 the high nibble).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dequantize_avx2(x: &[BlockNvfp4], y: &mut [f32]) {
    let vals = values256();
    for (b, out) in x.iter().zip(y.as_chunks_mut::<64>().0) {
        // q4[k] holds elements 32k..32k+32 in order.
        let q4 = values(b, vals);
        let out: &mut [[f32; 8]; 8] = bytemuck::cast_mut(out);
        for k in 0..2 {
            let lo = _mm256_castsi256_si128(q4[k]);
            let hi = _mm256_extracti128_si256::<1>(q4[k]);
            let parts = [lo, _mm_unpackhi_epi64(lo, lo), hi, _mm_unpackhi_epi64(hi, hi)];
            for (j, p) in parts.into_iter().enumerate() {
                let d = _mm256_set1_ps(UE4M3[b.d[2 * k + j / 2] as usize]);
                let v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(p));
                store_f32x8(&mut out[4 * k + j], _mm256_mul_ps(v, d));
            }
        }
    }
}
