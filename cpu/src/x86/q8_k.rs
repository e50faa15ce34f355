//! q8_K activations on AVX2: `quantize_row_q8_K`, which on x86 is ggml-quants.c
//! `quantize_row_q8_K_ref` (scalar; `qkern_formats::reference::q8_k` is its Rust twin),
//! vectorized here with the reference's bits for every input: ties, NaN, infinities, zero
//! blocks.

use core::arch::x86_64::*;

use qkern_formats::blocks::BlockQ8K;

use super::{load_f32x8, load_i8x32, store_i8x32};

/// `quantize_row_q8_K_ref` of one row; `x.len() == y.len() * 256`. Per block:
///
/// - `amax`, the largest `fabsf(x[j])`: `max_ps(|x|, m)` keeps `m` where `|x|` is NaN, as the
///   reference's `ax > amax` skips NaN; `max` is the first `x[j]` with `|x[j]| == amax` (the
///   reference updates only on a strictly larger value). `amax == 0` (all zero or NaN): `d = 0`,
///   zero quants and `bsums` (what ggml leaves in a zeroed buffer).
/// - `iscale = -127/max`; `q = MIN(127, nearest_int(iscale * x))` stored into `int8_t` (a
///   wrap: the low byte): `iscale * x` then `+ 12582912` as two roundings (ggml-base is built
///   without FMA), the bits masked and offset. Lane-wise these are the scalar operations, NaN
///   propagation included (only `x` can be NaN in them).
/// - `bsums`: the sums of 16 stored quants; `d = 1/iscale`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_avx2(x: &[f32], y: &mut [BlockQ8K]) {
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    let magic = _mm256_set1_ps(12582912.0);
    let low23 = _mm256_set1_epi32(0x007f_ffff);
    let half = _mm256_set1_epi32(0x0040_0000);
    let (q127, byte) = (_mm256_set1_epi32(127), _mm256_set1_epi32(0xff));
    // after the two packs, dword k of each 128-bit lane holds 4 bytes of vector 2k + lane
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let (ones8, ones16) = (_mm256_set1_epi8(1), _mm256_set1_epi16(1));
    for (xb, b) in x.as_chunks::<256>().0.iter().zip(y.iter_mut()) {
        let v: &[[f32; 8]; 32] = bytemuck::cast_ref(xb);
        let mut m = _mm256_setzero_ps();
        for c in v {
            m = _mm256_max_ps(_mm256_and_ps(load_f32x8(c), abs_mask), m);
        }
        let lanes: [f32; 8] = bytemuck::cast(m);
        // (no NaN in `m`: `max` is exact here)
        let amax = lanes.iter().fold(0f32, |a, &l| a.max(l));
        if amax == 0.0 {
            b.d = 0.0;
            b.qs = [0; 256];
            b.bsums = [0; 16];
            continue;
        }
        let am = _mm256_set1_ps(amax);
        let mut max = 0f32;
        for c in v {
            let hit = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(_mm256_and_ps(load_f32x8(c), abs_mask), am));
            if hit != 0 {
                max = c[hit.trailing_zeros() as usize];
                break;
            }
        }
        let iscale = -127.0f32 / max;
        let is = _mm256_set1_ps(iscale);
        let q = |c: &[f32; 8]| {
            let val = _mm256_add_ps(_mm256_mul_ps(is, load_f32x8(c)), magic);
            let i = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(val), low23), half);
            _mm256_and_si256(_mm256_min_epi32(i, q127), byte)
        };
        let qs: &mut [[i8; 32]; 8] = bytemuck::cast_mut(&mut b.qs);
        for (k, out) in qs.iter_mut().enumerate() {
            let c = &v[4 * k..4 * k + 4];
            // bytes 0..255 through unsigned packs: exact, so each byte is the i32's low byte
            let p =
                _mm256_packus_epi16(_mm256_packus_epi32(q(&c[0]), q(&c[1])), _mm256_packus_epi32(q(&c[2]), q(&c[3])));
            store_i8x32(out, _mm256_permutevar8x32_epi32(p, order));
        }
        for (k, s) in b.bsums.as_chunks_mut::<2>().0.iter_mut().enumerate() {
            // quad sums: lanes 0-3 the first 16 quants, lanes 4-7 the next 16
            let quads: [i32; 8] =
                bytemuck::cast(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load_i8x32(&qs[k])), ones16));
            s[0] = (quads[0] + quads[1] + quads[2] + quads[3]) as i16;
            s[1] = (quads[4] + quads[5] + quads[6] + quads[7]) as i16;
        }
        b.d = 1.0 / iscale;
    }
}
