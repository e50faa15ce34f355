//! q5_K weights with q8_K activations on AVX2: the dot kernel (quants.c
//! `ggml_vec_dot_q5_K_q8_K`, AVX2 branch) and `dequantize_row_q5_K` (ggml-quants.c).

use core::arch::x86_64::*;

use qkern_formats::blocks::{BlockQ5K, BlockQ8K};

use super::q4_k::{ksums, mins_prod, scales_mins, utmp};
use super::{
    Lane32, Q8KPrep, SCALE_SHUFFLE_K4, avx2_chunk_fn, f16_to_f32, f16_to_f32x8, for_tokens, hsum_float_8, load_u8x32,
    q8k_prep, store_f32x8, superblocks_g, token_rows,
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

/// A q5_K super-block unpacked: the 8 quant vectors, their scales, the mins and
/// `FP16_TO_FP32(d)` (every lane), `FP16_TO_FP32(dmin)`.
#[derive(Clone, Copy)]
struct Unpacked {
    q: [__m256i; 8],
    sc: [__m256i; 8],
    mins: __m128i,
    dx: __m256,
    dminx: f32,
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn unpack(x: &BlockQ5K) -> Unpacked {
    let (scales, mins) = scales_mins(&x.scales);
    let hbits = load_u8x32(&x.qh);
    let mut q = [_mm256_setzero_si256(); 8];
    for j in 0..4 {
        let [q0, q1] = quants(x, hbits, j);
        q[2 * j] = q0;
        q[2 * j + 1] = q1;
    }
    let mut sc = [_mm256_setzero_si256(); 8];
    for (k, s) in sc.iter_mut().enumerate() {
        *s = _mm256_shuffle_epi8(scales, load_u8x32(&SCALE_SHUFFLE_K4[k]));
    }
    Unpacked { q, sc, mins, dx: f16_to_f32x8(x.d), dminx: f16_to_f32(x.dmin) }
}

/// `ggml_vec_dot_q5_K_q8_K` for `NT` tokens ([`superblocks_g`]; as q4_K's kernel). The mins
/// go to a scalar `summs += dmin * hsum(prod)`, which gcc contracts into one `vfmadd231ss`
/// (see the reference); the result is `hsum_float_8(acc) + summs`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot<const NT: usize>(w: &[BlockQ5K], _a: &[BlockQ8K], apr: usize, sc: &[Lane32], out: &mut [f32; NT]) {
    // Tokens per group of the segment loop ([`superblocks_g`]).
    const G: usize = 2;
    let ys: [&[Q8KPrep]; NT] = token_rows(q8k_prep(sc), apr, w.len());
    let step = |u: &Unpacked, y: &Q8KPrep, (acc, summs)| {
        // `dmin = -y[i].d * FP16_TO_FP32(x[i].dmin)`
        let dmin = y.nd * u.dminx;
        let prod = mins_prod(u.mins, y);
        let mzero = _mm_setzero_si128();
        let hsum = _mm_hadd_epi32(_mm_hadd_epi32(prod, mzero), mzero);
        // `summs += dmin * _mm_extract_epi32(hsum, 0)`, contracted: one fused multiply-add.
        let summs = dmin.mul_add(_mm_extract_epi32::<0>(hsum) as f32, summs);
        let [sumi] = ksums(&u.q, &u.sc, [y]);
        // `d = y[i].d * FP16_TO_FP32(x[i].d)` (in every lane)
        let d = _mm256_mul_ps(_mm256_set1_ps(y.d), u.dx);
        (_mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc), summs)
    };
    // `step` for `G` tokens at once: each unpacked vector loaded once for the group.
    let stepg = |u: &Unpacked, ys: [&Q8KPrep; G], st: [(__m256, f32); G]| {
        let sumi = ksums(&u.q, &u.sc, ys);
        let mut out = st;
        for g in 0..G {
            let (y, (acc, summs)) = (ys[g], st[g]);
            let dmin = y.nd * u.dminx;
            let prod = mins_prod(u.mins, y);
            let mzero = _mm_setzero_si128();
            let hsum = _mm_hadd_epi32(_mm_hadd_epi32(prod, mzero), mzero);
            let summs = dmin.mul_add(_mm_extract_epi32::<0>(hsum) as f32, summs);
            let d = _mm256_mul_ps(_mm256_set1_ps(y.d), u.dx);
            out[g] = (_mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi[g]), acc), summs);
        }
        out
    };
    let st = superblocks_g::<NT, G, true, _, _, _, _>(
        w,
        &ys,
        (_mm256_setzero_ps(), 0f32),
        |x| unpack(x),
        |u, _x, y, s| step(u, y, s),
        |u, _x, ys, s| stepg(u, ys, s),
        |x, y, s| step(&unpack(x), y, s),
    );
    for_tokens!(NT, t => {
        let (acc, summs) = st[t];
        // `*s = hsum_float_8(acc) + summs;`
        out[t] = hsum_float_8(acc) + summs;
    });
}

avx2_chunk_fn!(scaled mod nt, fn chunk_avx2, dot, BlockQ5K, BlockQ8K);

/// `dequantize_row_q5_K`: `y = (d*sc) * (q + 16h) - (dmin*m)` (unfused, as ggml-base).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
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
