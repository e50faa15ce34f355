//! q6_K weights with q8_K activations on AVX2: the dot kernel (quants.c
//! `ggml_vec_dot_q6_K_q8_K`, AVX2 branch) and `dequantize_row_q6_K` (ggml-quants.c).

use core::arch::x86_64::*;

use qkern_formats::blocks::{BlockQ6K, BlockQ8K};

use super::{
    Lane32, Q8KPrep, avx2_chunk_fn, f16_to_f32, f16_to_f32x8, for_tokens, hsum_float_8, load_i8x16, load_i8x32,
    load_i16x16, load_u8x32, madd_acc, q8k_32, q8k_prep, store_f32x8, superblocks_g, token_rows,
};

/// The unsigned 6-bit quants `q4_k` (k = 0..4) of 128-element half `j`, ggml's
/// `q4_0..q4_3`: low/high nibbles of `ql[64j..64j+32]` / `ql[64j+32..64j+64]` with the
/// matching 2-bit field of `qh[32j..32j+32]` in bits 4-5.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn quants(x: &BlockQ6K, j: usize, k: usize) -> __m256i {
    let m3 = _mm256_set1_epi8(3);
    let m15 = _mm256_set1_epi8(15);
    let ql = x.ql.as_chunks::<32>().0;
    let q4bits = load_u8x32(&ql[2 * j + (k & 1)]);
    let q4bits_h = load_u8x32(&x.qh.as_chunks::<32>().0[j]);
    match k {
        0 => _mm256_or_si256(_mm256_and_si256(q4bits, m15), _mm256_slli_epi16::<4>(_mm256_and_si256(q4bits_h, m3))),
        1 => _mm256_or_si256(
            _mm256_and_si256(q4bits, m15),
            _mm256_slli_epi16::<2>(_mm256_and_si256(q4bits_h, _mm256_set1_epi8(12))),
        ),
        2 => _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits), m15),
            _mm256_and_si256(q4bits_h, _mm256_set1_epi8(48)),
        ),
        _ => _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits), m15),
            _mm256_srli_epi16::<2>(_mm256_and_si256(q4bits_h, _mm256_set1_epi8(-64))),
        ),
    }
}

/// A q6_K super-block unpacked: per 32-element step `4j + k` the quants and
/// `cvtepi8_epi16(shuffle(scales, get_scale_shuffle(4j + k)))`, the sign-extended scales
/// (for `q8sclsub`) and `FP16_TO_FP32(d)` in every lane.
#[derive(Clone, Copy)]
struct Unpacked {
    q: [__m256i; 8],
    sc: [__m256i; 8],
    scales_16: __m256i,
    dx: __m256,
}

/// `cvtepi8_epi16(shuffle(scales, get_scale_shuffle(s)))` (scales `2s` and `2s + 1`, each
/// in 8 i16 lanes) picked from the sign-extended scales instead: row `s` selects, in a vector
/// holding scales `0..8` (s < 4) or `8..16` in both 128-bit lanes, word `2s mod 8` in every
/// word of the low lane and word `2s + 1 mod 8` in the high lane. One in-lane byte shuffle
/// a step; ggml's byte shuffle then widening, with its constant mask, became three shuffles
/// and a widening in LLVM's lowering.
static SCALE_PICK: [[u8; 32]; 8] = {
    let mut t = [[0u8; 32]; 8];
    let mut s = 0;
    while s < 8 {
        let mut b = 0;
        while b < 32 {
            let word = (2 * s + b / 16) % 8;
            t[s][b] = (2 * word + b % 2) as u8;
            b += 1;
        }
        s += 1;
    }
    t
};

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn unpack(x: &BlockQ6K) -> Unpacked {
    let scales_16 = _mm256_cvtepi8_epi16(load_i8x16(&x.scales));
    // scales 0..8 and 8..16, each in both 128-bit lanes
    let halves = [_mm256_permute4x64_epi64::<0x44>(scales_16), _mm256_permute4x64_epi64::<0xEE>(scales_16)];
    let mut q = [_mm256_setzero_si256(); 8];
    let mut sc = [_mm256_setzero_si256(); 8];
    for s in 0..8 {
        q[s] = quants(x, s / 4, s % 4);
        sc[s] = _mm256_shuffle_epi8(halves[s / 4], load_u8x32(&SCALE_PICK[s]));
    }
    Unpacked { q, sc, scales_16, dx: f16_to_f32x8(x.d) }
}

/// `dot`'s step for `G` tokens at once: each unpacked vector loaded once for the group.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn stepg<const G: usize>(u: &Unpacked, ys: [&Q8KPrep; G], acc: [__m256; G]) -> [__m256; G] {
    let mut sumi = [_mm256_setzero_si256(); G];
    for s in 0..8 {
        let (q, sc) = (u.q[s], u.sc[s]);
        for g in 0..G {
            sumi[g] = madd_acc(sumi[g], sc, _mm256_maddubs_epi16(q, load_i8x32(q8k_32(&ys[g].qs, s))));
        }
    }
    let mut out = acc;
    for g in 0..G {
        let q8sclsub = _mm256_slli_epi32::<5>(_mm256_madd_epi16(load_i16x16(&ys[g].bsums), u.scales_16));
        let sumi = _mm256_sub_epi32(sumi[g], q8sclsub);
        let d = _mm256_mul_ps(_mm256_set1_ps(ys[g].d), u.dx);
        out[g] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc[g]);
    }
    out
}

/// `ggml_vec_dot_q6_K_q8_K` for `NT` tokens ([`superblocks_g`]). Per token and super-block:
/// `sumi = sum madd(scale, maddubs(q, q8)) - q8sclsub` with `q8sclsub = madd(bsums,
/// scales_16) << 5` (exact integers: any grouping gives ggml's lanes), then
/// `acc = fma(y.d * d_x, cvt(sumi), acc)`; at the end `hsum_float_8(acc)`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot<const NT: usize>(w: &[BlockQ6K], _a: &[BlockQ8K], apr: usize, sc: &[Lane32], out: &mut [f32; NT]) {
    // Tokens per group of the segment loop ([`superblocks_g`]).
    const G: usize = 4;
    let ys: [&[Q8KPrep]; NT] = token_rows(q8k_prep(sc), apr, w.len());
    let step = |u: &Unpacked, y: &Q8KPrep, acc| {
        let q8sclsub = _mm256_slli_epi32::<5>(_mm256_madd_epi16(load_i16x16(&y.bsums), u.scales_16));
        let mut sumi = _mm256_setzero_si256();
        for s in 0..8 {
            sumi = madd_acc(sumi, u.sc[s], _mm256_maddubs_epi16(u.q[s], load_i8x32(q8k_32(&y.qs, s))));
        }
        let sumi = _mm256_sub_epi32(sumi, q8sclsub);
        // `d = y[i].d * FP16_TO_FP32(x[i].d)` (in every lane)
        let d = _mm256_mul_ps(_mm256_set1_ps(y.d), u.dx);
        _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc)
    };
    // Two tokens: one group of 2 without the segment buffer (`DIRECT_G`); more: groups of
    // `G` through the buffer (2 tokens: 1.11x -> 1.31x ggml out of cache, 0.99x -> 1.21x in
    // cache, against the buffered one-token loop).
    macro_rules! run {
        ($g:expr) => {
            superblocks_g::<NT, { $g }, true, _, _, _, _>(
                w,
                &ys,
                _mm256_setzero_ps(),
                |x| unpack(x),
                |u, _x, y, s| step(u, y, s),
                |u, _x, ys, s| stepg(u, ys, s),
                |x, y, s| step(&unpack(x), y, s),
            )
        };
    }
    let st = if NT == 2 { run!(2) } else { run!(G) };
    for_tokens!(NT, t => {
        out[t] = hsum_float_8(st[t]);
    });
}

avx2_chunk_fn!(scaled mod nt, fn chunk_avx2, dot, BlockQ6K, BlockQ8K);

/// `dequantize_row_q6_K`: `y = d * sc * (q - 32)`, evaluated `(d * sc) * q` left to right
/// as the C expression (both products in f32).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dequantize_avx2(x: &[BlockQ6K], y: &mut [f32]) {
    for (b, out) in x.iter().zip(y.as_chunks_mut::<256>().0) {
        let d = f16_to_f32(b.d);
        let out: &mut [[f32; 8]; 32] = bytemuck::cast_mut(out);
        let m32 = _mm256_set1_epi8(32);
        for j in 0..2 {
            for k in 0..4 {
                // Elements 128j + 32k .. +32; scales[8j + 2k + (l >= 16)].
                let q = _mm256_sub_epi8(quants(b, j, k), m32);
                let lo = _mm256_castsi256_si128(q);
                let hi = _mm256_extracti128_si256::<1>(q);
                let parts = [lo, _mm_unpackhi_epi64(lo, lo), hi, _mm_unpackhi_epi64(hi, hi)];
                for (p8, p) in parts.into_iter().enumerate() {
                    let sc = b.scales[8 * j + 2 * k + p8 / 2] as f32;
                    let dsc = _mm256_set1_ps(d * sc);
                    let v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(p));
                    store_f32x8(&mut out[16 * j + 4 * k + p8], _mm256_mul_ps(dsc, v));
                }
            }
        }
    }
}
