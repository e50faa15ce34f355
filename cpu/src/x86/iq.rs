//! The IQ formats with q8_K activations on AVX2 (quants.c, AVX2 branches):
//! `ggml_vec_dot_iq2_xxs_q8_K`, `ggml_vec_dot_iq2_xs_q8_K`, `ggml_vec_dot_iq2_s_q8_K`,
//! `ggml_vec_dot_iq3_xxs_q8_K`, `ggml_vec_dot_iq3_s_q8_K`, `ggml_vec_dot_iq4_xs_q8_K`.
//!
//! All six share one shape: per super-block, per 32-element group `g` (0..8) the weights
//! give a byte vector `q`, a sign operand and a 16-bit scale vector; per token the group
//! adds `madd(maddubs(q, signed q8), scale)` to the token's integer sum, and per super-block
//! `accumf = fma(set1(d), cvt(sumi1 + sumi2), accumf)`, `d = FP16_TO_FP32(x.d) * y.d`.
//! ggml splits the integer sum into `sumi1` (even groups) and `sumi2` (odd groups); the sums
//! are exact (wrapping) integers, so one sum per token gives the same lanes. [`dot`] is that
//! shape; each format supplies its group unpacking ([`Group`]), built once per group and
//! used for all `NT` tokens.

use core::arch::x86_64::*;

use qkern_formats::blocks::{BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Xs, BlockQ8K};
use qkern_formats::tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS, KVALUES_IQ4NL};

use super::{
    Lane32, Q8KPrep, SCALE_SHUFFLE, SCALE_SHUFFLE_K4, avx2_chunk_fn, f16_to_f32x8, for_tokens, hsum_float_8,
    load_i8x16, load_i8x32, load_u8x16, load_u8x32, madd_acc, q8k_32, q8k_prep, superblocks_g, token_rows,
};

/// quants.c `keven_signs_q2xs`, read as `uint64_t signs64[128]`: byte j of entry k is -1
/// where bit j of `ksigns_iq2xs[k]` is set, +1 elsewhere.
static KEVEN_SIGNS: [u64; 128] = {
    let mut t = [0u64; 128];
    let mut k = 0;
    while k < 128 {
        let s = KSIGNS_IQ2XS[k];
        let mut v = 0u64;
        let mut j = 0;
        while j < 8 {
            let b: u64 = if (s >> j) & 1 != 0 { 0xFF } else { 0x01 };
            v |= b << (8 * j);
            j += 1;
        }
        t[k] = v;
        k += 1;
    }
    t
};

/// The unpacked weights of one 32-element group: the byte vector `q`, the sign operand
/// `s` (unused by iq4_xs) and the 16-bit scale vector.
#[derive(Clone, Copy)]
pub(crate) struct Group {
    q: __m256i,
    s: __m256i,
    scale: __m256i,
}

/// `acc + madd(maddubs(q, sign_epi8(q8, s)), scale)`, `s` bytes of +-1 (iq2_xxs, iq2_xs, iq3_xxs).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot_sign_epi8(acc: __m256i, g: &Group, q8: __m256i) -> __m256i {
    madd_acc(acc, _mm256_maddubs_epi16(g.q, _mm256_sign_epi8(q8, g.s)), g.scale)
}

/// `acc + madd(maddubs(q, (s ^ q8) - s), scale)`, `s` bytes of 0 or -1 (iq2_s, iq3_s).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot_xor_sub(acc: __m256i, g: &Group, q8: __m256i) -> __m256i {
    madd_acc(acc, _mm256_maddubs_epi16(g.q, _mm256_sub_epi8(_mm256_xor_si256(g.s, q8), g.s)), g.scale)
}

/// `acc + madd(mul_add_epi8(q, q8), scale)` = `acc + madd(maddubs(sign(q, q), sign(q8, q)), scale)`
/// (iq4_xs, `q` signed; `madd` is commutative, so the operand order is free).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot_trick(acc: __m256i, g: &Group, q8: __m256i) -> __m256i {
    madd_acc(acc, _mm256_maddubs_epi16(_mm256_sign_epi8(g.q, g.q), _mm256_sign_epi8(q8, g.q)), g.scale)
}

/// The kernel `$dot::<NT>` of one IQ format on [`superblocks_g`]: `$group(x, g)` unpacks group
/// `g` of super-block `x`, `$gdot` meets it with a token's q8 bytes, and the result is
/// `$fscale * hsum_float_8(accumf)` (`$fscale` `0.125f`, `0.25f`, or none). `pairs`: one
/// token walks the groups two at a time (faster for some formats, slower for others);
/// `direct_g`: [`superblocks_g`]'s `DIRECT_G` (iq4_xs only: the grid formats' unpacking is
/// their work, and they lose 10-20 % at 2 tokens without the segment buffer).
macro_rules! iq_kernel {
    ($dot:ident, $X:ty, $group:ident, $gdot:ident, $fscale:expr, pairs: $pairs:expr, direct_g: $dg:literal) => {
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        fn $dot<const NT: usize>(w: &[$X], _a: &[BlockQ8K], apr: usize, sc: &[Lane32], out: &mut [f32; NT]) {
            // Tokens per group of the segment loop ([`superblocks_g`]).
            const G: usize = 2;
            let ys: [&[Q8KPrep]; NT] = token_rows(q8k_prep(sc), apr, w.len());
            let st = superblocks_g::<NT, G, $dg, _, _, _, _>(
                w,
                &ys,
                _mm256_setzero_ps(),
                |x| {
                    // Spelled out: `array::from_fn` would put its closure out of line,
                    // outside this function's target features, and a loop over a zeroed
                    // array costs a `memset` per super-block.
                    let gs = [
                        $group(x, 0),
                        $group(x, 1),
                        $group(x, 2),
                        $group(x, 3),
                        $group(x, 4),
                        $group(x, 5),
                        $group(x, 6),
                        $group(x, 7),
                    ];
                    (gs, f16_to_f32x8(x.d))
                },
                |(gs, d0), _x, y, accumf| {
                    let mut sumi = _mm256_setzero_si256();
                    for g in 0..8 {
                        sumi = $gdot(sumi, &gs[g], load_i8x32(q8k_32(&y.qs, g)));
                    }
                    // `d = FP16_TO_FP32(x[i].d) * y[i].d` (in every lane)
                    let d = _mm256_mul_ps(*d0, _mm256_set1_ps(y.d));
                    _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), accumf)
                },
                // The same for `G` tokens: each unpacked group loaded once for all of them.
                |(gs, d0), _x, ys: [&Q8KPrep; G], accumf: [__m256; G]| {
                    let mut sumi = [_mm256_setzero_si256(); G];
                    for g in 0..8 {
                        let grp = gs[g];
                        for t in 0..G {
                            sumi[t] = $gdot(sumi[t], &grp, load_i8x32(q8k_32(&ys[t].qs, g)));
                        }
                    }
                    let mut out = accumf;
                    for t in 0..G {
                        let d = _mm256_mul_ps(*d0, _mm256_set1_ps(ys[t].d));
                        out[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi[t]), accumf[t]);
                    }
                    out
                },
                // One token: each group unpacked right where it is used, as ggml does; with
                // `$pairs`, two groups a step into ggml's `sumi1` and `sumi2` (LLVM keeps the
                // group loop rolled; measured per format, see the invocations).
                |x, y, accumf| {
                    let sumi = if $pairs {
                        let (mut sumi1, mut sumi2) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                        for g in (0..8).step_by(2) {
                            sumi1 = $gdot(sumi1, &$group(x, g), load_i8x32(q8k_32(&y.qs, g)));
                            sumi2 = $gdot(sumi2, &$group(x, g + 1), load_i8x32(q8k_32(&y.qs, g + 1)));
                        }
                        _mm256_add_epi32(sumi1, sumi2)
                    } else {
                        let mut sumi = _mm256_setzero_si256();
                        for g in 0..8 {
                            sumi = $gdot(sumi, &$group(x, g), load_i8x32(q8k_32(&y.qs, g)));
                        }
                        sumi
                    };
                    let d = _mm256_mul_ps(f16_to_f32x8(x.d), _mm256_set1_ps(y.d));
                    _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), accumf)
                },
            );
            let fscale: Option<f32> = $fscale;
            for_tokens!(NT, t => {
                let h = hsum_float_8(st[t]);
                out[t] = match fscale {
                    Some(f) => f * h,
                    None => h,
                };
            });
        }
    };
}

/// `_mm256_set_epi64x(t[i3], t[i2], t[i1], t[i0])`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn set_u64x4(v: [u64; 4]) -> __m256i {
    let lo = _mm_insert_epi64::<1>(_mm_cvtsi64_si128(v[0] as i64), v[1] as i64);
    let hi = _mm_insert_epi64::<1>(_mm_cvtsi64_si128(v[2] as i64), v[3] as i64);
    _mm256_set_m128i(hi, lo)
}

/// `_mm256_set_epi32(v[7], .., v[0])`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn set_u32x8(v: [u32; 8]) -> __m256i {
    let v: [i32; 8] = bytemuck::cast(v);
    _mm256_setr_epi32(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7])
}

/// `_mm256_set_epi64x(signs64[(a >> 21) & 127], signs64[(a >> 14) & 127], signs64[(a >> 7) & 127], signs64[a & 127])`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn keven_signs_x4(a: u32) -> __m256i {
    let k = |sh: u32| KEVEN_SIGNS[((a >> sh) & 127) as usize];
    set_u64x4([k(0), k(7), k(14), k(21)])
}

/// The `signs[2g] | signs[2g+1] << 16` sign mask of iq2_s / iq3_s:
/// `cmpeq(and(shuffle(set1_epi32(v), mask1), mask2), mask2)`, bytes of 0 or -1.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn xor_sub_signs(v: u32) -> __m256i {
    const K_MASK1: [u8; 32] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x02, 0x02,
        0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03,
    ];
    const K_MASK2: [u8; 32] = [
        0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x01, 0x02,
        0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80,
    ];
    let mask1 = load_u8x32(&K_MASK1);
    let mask2 = load_u8x32(&K_MASK2);
    let aux = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(v as i32), mask1), mask2);
    _mm256_cmpeq_epi8(aux, mask2)
}

// ---------------------------------------------------------------------------------------
// iq2_xxs: per group g, `aux32[2g]` = four grid indices, `aux32[2g+1]` = four 7-bit sign
// indices and the 4-bit scale `ls`; `madd(dot, set1_epi16(2*ls+1))`; `0.125f * hsum`.

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq2_xxs_group(x: &BlockIq2Xxs, g: usize) -> Group {
    // `aux32[2g]`, `aux32[2g + 1]` as two 32-bit loads (from u16 halves, the compiler
    // rebuilt the second with shifts and ors).
    let words = bytemuck::cast_slice::<u16, u8>(&x.qs).as_chunks::<4>().0;
    let (a0, a1) = (u32::from_le_bytes(words[2 * g]), u32::from_le_bytes(words[2 * g + 1]));
    let idx = a0.to_le_bytes();
    let q2 = set_u64x4([
        IQ2XXS_GRID[idx[0] as usize],
        IQ2XXS_GRID[idx[1] as usize],
        IQ2XXS_GRID[idx[2] as usize],
        IQ2XXS_GRID[idx[3] as usize],
    ]);
    let s2 = keven_signs_x4(a1);
    let ls = (a1 >> 28) as i16;
    Group { q: q2, s: s2, scale: _mm256_set1_epi16(2 * ls + 1) }
}

iq_kernel!(iq2_xxs_dot, BlockIq2Xxs, iq2_xxs_group, dot_sign_epi8, Some(0.125), pairs: true, direct_g: false);
avx2_chunk_fn!(scaled mod iq2_xxs_nt, fn iq2_xxs_avx2, iq2_xxs_dot, BlockIq2Xxs, BlockQ8K);

// ---------------------------------------------------------------------------------------
// iq2_xs: entry k of group g is `qs[4g+k]`: grid `iq2xs_grid[q & 511]`, sign byte `q >> 9`
// plus its parity in bit 7 (= `ksigns_iq2xs[q >> 9]`), expanded to bytes of -1/+1 (ggml:
// `cmpeq(and(shuffle(full_signs), bit_selector), bit_selector) | mone`, the same bytes as
// `keven_signs_q2xs`); scales `cvtepi8_epi16(shuffle(scales, get_scale_shuffle(g)))`.

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq2_xs_scales(x: &BlockIq2Xs) -> __m128i {
    let m4 = _mm_set1_epi8(0xf);
    let m1 = _mm_set1_epi8(1);
    let stmp = _mm_set1_epi64x(u64::from_le_bytes(x.scales) as i64);
    let stmp = _mm_unpacklo_epi8(_mm_and_si128(stmp, m4), _mm_and_si128(_mm_srli_epi16::<4>(stmp), m4));
    _mm_add_epi8(_mm_slli_epi16::<1>(stmp), m1)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq2_xs_group(x: &BlockIq2Xs, g: usize) -> Group {
    let scales = iq2_xs_scales(x);
    let q: [u16; 4] = [x.qs[4 * g], x.qs[4 * g + 1], x.qs[4 * g + 2], x.qs[4 * g + 3]];
    let grid = |e: u16| IQ2XS_GRID[(e & 511) as usize];
    let q2 = set_u64x4([grid(q[0]), grid(q[1]), grid(q[2]), grid(q[3])]);
    let sign = |e: u16| KEVEN_SIGNS[(e >> 9) as usize];
    let s2 = set_u64x4([sign(q[0]), sign(q[1]), sign(q[2]), sign(q[3])]);
    let sc = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, load_u8x16(&SCALE_SHUFFLE[g])));
    Group { q: q2, s: s2, scale: sc }
}

iq_kernel!(iq2_xs_dot, BlockIq2Xs, iq2_xs_group, dot_sign_epi8, Some(0.125), pairs: true, direct_g: false);
avx2_chunk_fn!(scaled mod iq2_xs_nt, fn iq2_xs_avx2, iq2_xs_dot, BlockIq2Xs, BlockQ8K);

// ---------------------------------------------------------------------------------------
// iq2_s: entry k of group g: grid `iq2s_grid[qs[4g+k] | ((qh[g] << (8 - 2k)) & 0x300)]`;
// signs from bytes `qs[32 + 4g..]` (xor/sub); scale `shuffle(scales16, get_scale_shuffle_k4(g))`
// with `scales16 = cvtepi8_epi16(((set_epi64x(aux64 >> 4, aux64) & 0xf) << 1) + 1)`.

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq2_s_scales(x: &BlockIq2S) -> __m256i {
    let m4 = _mm_set1_epi8(0xf);
    let m1 = _mm_set1_epi8(1);
    let aux64 = u64::from_le_bytes(x.scales);
    let scales8 =
        _mm_add_epi8(_mm_slli_epi16::<1>(_mm_and_si128(_mm_set_epi64x((aux64 >> 4) as i64, aux64 as i64), m4)), m1);
    _mm256_cvtepi8_epi16(scales8)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq2_s_group(x: &BlockIq2S, g: usize) -> Group {
    let scales16 = iq2_s_scales(x);
    let qh = x.qh[g] as usize;
    let grid = |k: usize| IQ2S_GRID[x.qs[4 * g + k] as usize | ((qh << (8 - 2 * k)) & 0x300)];
    let q2 = set_u64x4([grid(0), grid(1), grid(2), grid(3)]);
    let s2 = xor_sub_signs(u32::from_le_bytes(x.qs.as_chunks::<4>().0[8 + g]));
    let sc = _mm256_shuffle_epi8(scales16, load_u8x32(&SCALE_SHUFFLE_K4[g]));
    Group { q: q2, s: s2, scale: sc }
}

iq_kernel!(iq2_s_dot, BlockIq2S, iq2_s_group, dot_xor_sub, Some(0.125), pairs: true, direct_g: false);
avx2_chunk_fn!(scaled mod iq2_s_nt, fn iq2_s_avx2, iq2_s_dot, BlockIq2S, BlockQ8K);

// ---------------------------------------------------------------------------------------
// iq3_xxs: group g: grid `iq3xxs_grid[qs[8g + k]]` (8 x u32), `aux32 = gas[g]` (the u32 at
// `qs[64 + 4g]`): four 7-bit sign indices and `ls = aux32 >> 28`; `0.25f * hsum`.

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq3_xxs_group(x: &BlockIq3Xxs, g: usize) -> Group {
    let q3 = &x.qs[8 * g..8 * g + 8];
    let grid = |k: usize| IQ3XXS_GRID[q3[k] as usize];
    let q2 = set_u32x8([grid(0), grid(1), grid(2), grid(3), grid(4), grid(5), grid(6), grid(7)]);
    // One 32-bit load (byte by byte, the compiler rebuilt the word with shifts and ors).
    let aux32 = u32::from_le_bytes(x.qs.as_chunks::<4>().0[16 + g]);
    let s2 = keven_signs_x4(aux32);
    let ls = (aux32 >> 28) as i16;
    Group { q: q2, s: s2, scale: _mm256_set1_epi16(2 * ls + 1) }
}

iq_kernel!(iq3_xxs_dot, BlockIq3Xxs, iq3_xxs_group, dot_sign_epi8, Some(0.25), pairs: false, direct_g: false);
avx2_chunk_fn!(scaled mod iq3_xxs_nt, fn iq3_xxs_avx2, iq3_xxs_dot, BlockIq3Xxs, BlockQ8K);

// ---------------------------------------------------------------------------------------
// iq3_s: group g: index k = `qs[8g + k] | ((qh[g] << (8 - k)) & 256)` (ggml's `idx_shift`,
// `idx_mask`), grid `iq3s_grid`; signs from `signs[4g..]` (xor/sub); scale `2*ls+1` with
// `ls` the low (even g) or high (odd g) nibble of `scales[g/2]`; no final factor.

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq3_s_group(x: &BlockIq3S, g: usize) -> Group {
    let qh = x.qh[g] as usize;
    let grid = |k: usize| IQ3S_GRID[x.qs[8 * g + k] as usize | ((qh << (8 - k)) & 256)];
    let q2 = set_u32x8([grid(0), grid(1), grid(2), grid(3), grid(4), grid(5), grid(6), grid(7)]);
    let s2 = xor_sub_signs(u32::from_le_bytes(x.signs.as_chunks::<4>().0[g]));
    let ls = ((x.scales[g / 2] >> (4 * (g & 1))) & 0xf) as i16;
    Group { q: q2, s: s2, scale: _mm256_set1_epi16(2 * ls + 1) }
}

iq_kernel!(iq3_s_dot, BlockIq3S, iq3_s_group, dot_xor_sub, None, pairs: true, direct_g: false);
avx2_chunk_fn!(scaled mod iq3_s_nt, fn iq3_s_avx2, iq3_s_dot, BlockIq3S, BlockQ8K);

// ---------------------------------------------------------------------------------------
// iq4_xs: group g: `MM256_SET_M128I(shuffle(values, qs >> 4), shuffle(values, qs & 15))` of
// `qs[16g..16g+16]`, `mul_add_epi8`; scale `ls = ((scales_l[g/2] >> 4(g&1)) & 0xf |
// ((scales_h >> 2g) & 3) << 4) - 32`; no final factor.

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq4_xs_group(x: &BlockIq4Xs, g: usize) -> Group {
    let values128 = load_i8x16(&KVALUES_IQ4NL);
    let m4b = _mm_set1_epi8(0x0f);
    let q4bits = load_u8x16(&x.qs.as_chunks::<16>().0[g]);
    let q4b = _mm256_set_m128i(
        _mm_shuffle_epi8(values128, _mm_and_si128(_mm_srli_epi16::<4>(q4bits), m4b)),
        _mm_shuffle_epi8(values128, _mm_and_si128(q4bits, m4b)),
    );
    let sh = x.scales_h;
    let ls = (((x.scales_l[g / 2] >> (4 * (g & 1))) & 0xf) as u16 | (((sh >> (2 * g)) & 3) << 4)) as i16 - 32;
    Group { q: q4b, s: q4b, scale: _mm256_set1_epi16(ls) }
}

iq_kernel!(iq4_xs_dot, BlockIq4Xs, iq4_xs_group, dot_trick, None, pairs: false, direct_g: true);
avx2_chunk_fn!(scaled mod iq4_xs_nt, fn iq4_xs_avx2, iq4_xs_dot, BlockIq4Xs, BlockQ8K);

/// `dequantize_row_iq4_xs` (ggml-quants.c): per group of 32, `dl = d * (ls - 32)`, then
/// `y[j] = dl * kvalues_iq4nl[qs[j] & 0xf]`, `y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4]`
/// (one product per element, so the lane-wise `mul` gives the same bits). The group's
/// values are [`iq4_xs_group`]'s byte vector (low nibbles' values, then high nibbles').
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn iq4_xs_dequantize_avx2(x: &[BlockIq4Xs], y: &mut [f32]) {
    let tab = super::f16_table();
    for (b, out) in x.iter().zip(y.as_chunks_mut::<256>().0) {
        let d = tab.get(b.d);
        let out: &mut [[[f32; 8]; 4]; 8] = bytemuck::cast_mut(out);
        for (g, o) in out.iter_mut().enumerate() {
            let grp = iq4_xs_group(b, g);
            let ls = ((b.scales_l[g / 2] >> (4 * (g & 1))) & 0xf) as i32 | (((b.scales_h >> (2 * g)) & 3) << 4) as i32;
            let dl = _mm256_set1_ps(d * (ls - 32) as f32);
            let lo = _mm256_castsi256_si128(grp.q);
            let hi = _mm256_extracti128_si256::<1>(grp.q);
            let parts = [lo, _mm_unpackhi_epi64(lo, lo), hi, _mm_unpackhi_epi64(hi, hi)];
            for (o8, p) in o.iter_mut().zip(parts) {
                let v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(p));
                super::store_f32x8(o8, _mm256_mul_ps(dl, v));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The IQ2 dequantizers (ggml-quants.c `dequantize_row_iq2_xxs`, `_iq2_xs`, `_iq2_s`): per
// grid entry of 8 weights `y[j] = db * grid[j] * (signs & kmask_iq2xs[j] ? -1.f : 1.f)`,
// `db = d * (0.5f + ls) * 0.25f` in scalar f32 as there; the reference (and ggml's build)
// applies the sign as a negation, a flip of the sign bit, NaN included.

/// One grid entry's 8 values: `db * grid[j]` (one product each, as the reference), the sign
/// bit flipped where bit `j` of `signs` is set.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq2_dequant8(db: __m256, grid: u64, signs: u8) -> __m256 {
    _mm256_xor_ps(_mm256_mul_ps(db, grid8(grid)), sign_bits8(signs))
}

/// The 8 grid bytes of `grid` (byte `j` in lane `j`) as floats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn grid8(grid: u64) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(grid as i64)))
}

/// The float sign bit in lane `j` where bit `j` of `signs` is set, else 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn sign_bits8(signs: u8) -> __m256 {
    let bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    let neg = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(signs as i32), bits), bits);
    _mm256_castsi256_ps(_mm256_slli_epi32::<31>(neg))
}

/// `(d * (0.5 + ls)) * 0.25` in every lane (the reference's scalar expression).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq2_db(d: f32, ls: u32) -> __m256 {
    _mm256_set1_ps(d * (0.5 + ls as f32) * 0.25)
}

/// `dequantize_row_iq2_xxs`: sub-block `ib` has `aux32[2ib]` (four grid indices) and
/// `aux32[2ib + 1]` (four 7-bit sign indices into `ksigns_iq2xs`, the scale in bits 28-31).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn iq2_xxs_dequantize_avx2(x: &[BlockIq2Xxs], y: &mut [f32]) {
    for (b, out) in x.iter().zip(y.as_chunks_mut::<256>().0) {
        let d = super::f16_to_f32(b.d);
        let out: &mut [[f32; 8]; 32] = bytemuck::cast_mut(out);
        let words = bytemuck::cast_slice::<u16, u8>(&b.qs).as_chunks::<4>().0;
        for ib in 0..8 {
            let (a0, a1) = (u32::from_le_bytes(words[2 * ib]), u32::from_le_bytes(words[2 * ib + 1]));
            let db = iq2_db(d, a1 >> 28);
            for l in 0..4 {
                let grid = IQ2XXS_GRID[((a0 >> (8 * l)) & 0xff) as usize];
                let signs = KSIGNS_IQ2XS[((a1 >> (7 * l)) & 127) as usize];
                super::store_f32x8(&mut out[4 * ib + l], iq2_dequant8(db, grid, signs));
            }
        }
    }
}

/// `dequantize_row_iq2_xs`: entry `l` of sub-block `ib` is `qs[4ib + l]` (grid index in bits
/// 0-8, sign index in 9-15); entries 0-1 take the low nibble of `scales[ib]`, 2-3 the high.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn iq2_xs_dequantize_avx2(x: &[BlockIq2Xs], y: &mut [f32]) {
    for (b, out) in x.iter().zip(y.as_chunks_mut::<256>().0) {
        let d = super::f16_to_f32(b.d);
        let out: &mut [[f32; 8]; 32] = bytemuck::cast_mut(out);
        for ib in 0..8 {
            let sc = b.scales[ib] as u32;
            let db = [iq2_db(d, sc & 0xf), iq2_db(d, sc >> 4)];
            for l in 0..4 {
                let q = b.qs[4 * ib + l];
                let grid = IQ2XS_GRID[(q & 511) as usize];
                let signs = KSIGNS_IQ2XS[(q >> 9) as usize];
                super::store_f32x8(&mut out[4 * ib + l], iq2_dequant8(db[l / 2], grid, signs));
            }
        }
    }
}

/// `dequantize_row_iq2_s`: entry `l` of sub-block `ib` has grid index `qs[4ib + l] |
/// ((qh[ib] << (8 - 2l)) & 0x300)` and its sign bits in `qs[32 + 4ib + l]`; scales as iq2_xs.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn iq2_s_dequantize_avx2(x: &[BlockIq2S], y: &mut [f32]) {
    for (b, out) in x.iter().zip(y.as_chunks_mut::<256>().0) {
        let d = super::f16_to_f32(b.d);
        let out: &mut [[f32; 8]; 32] = bytemuck::cast_mut(out);
        for ib in 0..8 {
            let sc = b.scales[ib] as u32;
            let db = [iq2_db(d, sc & 0xf), iq2_db(d, sc >> 4)];
            let qh = b.qh[ib] as usize;
            for l in 0..4 {
                let grid = IQ2S_GRID[b.qs[4 * ib + l] as usize | ((qh << (8 - 2 * l)) & 0x300)];
                super::store_f32x8(&mut out[4 * ib + l], iq2_dequant8(db[l / 2], grid, b.qs[32 + 4 * ib + l]));
            }
        }
    }
}

// The IQ3 dequantizers (`dequantize_row_iq3_xxs`, `_iq3_s`): per 8 weights two 4-byte grid
// entries, `y[j] = db * grid[j] * (signs & kmask_iq2xs[j] ? -1.f : 1.f)`; the reference (as
// ggml's C) multiplies by +-1 here, so these multiply too (a NaN keeps its sign).

/// Two grid entries' 8 values: `(db * grid[j]) * (+-1)`, -1 where bit `j` of `signs` is set.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq3_dequant8(db: __m256, g1: u32, g2: u32, signs: u8) -> __m256 {
    let g = grid8(g1 as u64 | (g2 as u64) << 32);
    // +-1.0, negative where bit j of `signs` is set
    let pm1 = _mm256_or_ps(_mm256_set1_ps(1.0), sign_bits8(signs));
    _mm256_mul_ps(_mm256_mul_ps(db, g), pm1)
}

/// `dequantize_row_iq3_xxs`: sub-block `ib` has the grid indices `qs[8ib..8ib + 8]` and the
/// 32-bit word at `qs[64 + 4ib]` (four 7-bit sign indices, the scale in bits 28-31);
/// `db = d * (0.5 + ls) * 0.5`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn iq3_xxs_dequantize_avx2(x: &[BlockIq3Xxs], y: &mut [f32]) {
    for (b, out) in x.iter().zip(y.as_chunks_mut::<256>().0) {
        let d = super::f16_to_f32(b.d);
        let out: &mut [[f32; 8]; 32] = bytemuck::cast_mut(out);
        let words = b.qs[64..].as_chunks::<4>().0;
        for ib in 0..8 {
            let aux = u32::from_le_bytes(words[ib]);
            let db = _mm256_set1_ps(d * (0.5f32 + (aux >> 28) as f32) * 0.5f32);
            for l in 0..4 {
                let g1 = IQ3XXS_GRID[b.qs[8 * ib + 2 * l] as usize];
                let g2 = IQ3XXS_GRID[b.qs[8 * ib + 2 * l + 1] as usize];
                let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                super::store_f32x8(&mut out[4 * ib + l], iq3_dequant8(db, g1, g2, signs));
            }
        }
    }
}

/// `dequantize_row_iq3_s`: entry pair `l` of sub-block `ib` has grid indices `qs[8ib + 2l] |
/// ((qh[ib] << (8 - 2l)) & 256)` and `qs[8ib + 2l + 1] | ((qh[ib] << (7 - 2l)) & 256)`, sign
/// bits `signs[4ib + l]`; `db = d * (1 + 2 ls)` with `ls` nibble `ib % 2` of `scales[ib / 2]`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn iq3_s_dequantize_avx2(x: &[BlockIq3S], y: &mut [f32]) {
    for (b, out) in x.iter().zip(y.as_chunks_mut::<256>().0) {
        let d = super::f16_to_f32(b.d);
        let out: &mut [[f32; 8]; 32] = bytemuck::cast_mut(out);
        for ib in 0..8 {
            let sc = b.scales[ib / 2];
            let ls = if ib % 2 == 0 { sc & 0xf } else { sc >> 4 };
            let db = _mm256_set1_ps(d * (1 + 2 * ls as i32) as f32);
            let qh = b.qh[ib] as u32;
            for l in 0..4 {
                let i1 = b.qs[8 * ib + 2 * l] as u32 | ((qh << (8 - 2 * l)) & 256);
                let i2 = b.qs[8 * ib + 2 * l + 1] as u32 | ((qh << (7 - 2 * l)) & 256);
                let (g1, g2) = (IQ3S_GRID[i1 as usize], IQ3S_GRID[i2 as usize]);
                super::store_f32x8(&mut out[4 * ib + l], iq3_dequant8(db, g1, g2, b.signs[4 * ib + l]));
            }
        }
    }
}
