//! Scalar emulation of the x86 SIMD primitives whose exact semantics decide ggml's bits
//! (ggml-cpu/arch/x86/quants.c helpers). Every function here mirrors one intrinsic or one
//! ggml helper, lane for lane, including saturation, NaN and wrap-around behaviour.

/// `_mm256_sign_epi8(a, b)` for one lane: `a` negated (wrapping) where `b < 0`, zero where
/// `b == 0`. Note `sign(-128, negative) == -128`: the known wart of the sign trick.
#[inline(always)]
pub fn sign_epi8(a: i8, b: i8) -> i8 {
    match b {
        0 => 0,
        b if b < 0 => a.wrapping_neg(),
        _ => a,
    }
}

/// `_mm256_maddubs_epi16(a, b)` for one output lane: `a0*b0 + a1*b1` (u8 x i8), saturated to i16.
#[inline(always)]
pub fn maddubs_pair(a0: u8, b0: i8, a1: u8, b1: i8) -> i16 {
    let s = a0 as i32 * b0 as i32 + a1 as i32 * b1 as i32;
    s.clamp(i16::MIN as i32, i16::MAX as i32) as i16
}

/// `_mm256_maddubs_epi16` over 32 bytes -> 16 saturated i16.
#[inline(always)]
pub fn maddubs(a: &[u8; 32], b: &[i8; 32]) -> [i16; 16] {
    core::array::from_fn(|i| maddubs_pair(a[2 * i], b[2 * i], a[2 * i + 1], b[2 * i + 1]))
}

/// `_mm256_madd_epi16(x, y)`: `x0*y0 + x1*y1` per i32 lane (wrapping, as the instruction).
#[inline(always)]
pub fn madd(x: &[i16; 16], y: &[i16; 16]) -> [i32; 8] {
    core::array::from_fn(|i| {
        (x[2 * i] as i32 * y[2 * i] as i32).wrapping_add(x[2 * i + 1] as i32 * y[2 * i + 1] as i32)
    })
}

/// `sum_i16_pairs_int32x8` / `_mm256_madd_epi16(ones, x)`: adjacent i16 pairs summed to i32.
#[inline(always)]
pub fn sum_i16_pairs(x: &[i16; 16]) -> [i32; 8] {
    core::array::from_fn(|i| x[2 * i] as i32 + x[2 * i + 1] as i32)
}

/// ggml `mul_sum_us8_pairs_int32x8` (AVX2 branch): `madd(ones, maddubs(ax, sy))`.
#[inline(always)]
pub fn mul_sum_us8_pairs(ax: &[u8; 32], sy: &[i8; 32]) -> [i32; 8] {
    sum_i16_pairs(&maddubs(ax, sy))
}

/// ggml `mul_sum_i8_pairs_float`'s integer part (AVX2 branch): the sign trick
/// `ax = sign(x, x)`, `sy = sign(y, x)`, then `mul_sum_us8_pairs(ax, sy)`.
#[inline(always)]
pub fn mul_sum_i8_pairs(x: &[i8; 32], y: &[i8; 32]) -> [i32; 8] {
    let ax: [u8; 32] = core::array::from_fn(|i| sign_epi8(x[i], x[i]) as u8);
    let sy: [i8; 32] = core::array::from_fn(|i| sign_epi8(y[i], x[i]));
    mul_sum_us8_pairs(&ax, &sy)
}

/// `_mm256_cvtepi32_ps` per lane (round to nearest even for |v| > 2^24).
#[inline(always)]
pub fn cvt_i32x8(v: &[i32; 8]) -> [f32; 8] {
    v.map(|x| x as f32)
}

/// `acc = _mm256_fmadd_ps(a, b, acc)` with one broadcast factor `a`.
#[inline(always)]
pub fn fmadd_bcast(a: f32, b: &[f32; 8], acc: &mut [f32; 8]) {
    for i in 0..8 {
        acc[i] = a.mul_add(b[i], acc[i]);
    }
}

/// ggml `hsum_float_8`: `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`.
#[inline(always)]
pub fn hsum_float_8(x: &[f32; 8]) -> f32 {
    let r0 = x[4] + x[0];
    let r1 = x[5] + x[1];
    let r2 = x[6] + x[2];
    let r3 = x[7] + x[3];
    (r0 + r2) + (r1 + r3)
}

/// ggml `hsum_i32_8`: wrapping integer horizontal sum (order does not matter for bits).
#[inline(always)]
pub fn hsum_i32_8(x: &[i32; 8]) -> i32 {
    x.iter().fold(0i32, |a, &b| a.wrapping_add(b))
}

/// `_mm_max_ps(a, b)` per lane: `a > b ? a : b`, so the second operand wins on NaN or ties.
#[inline(always)]
pub fn max_ps(a: f32, b: f32) -> f32 {
    if a > b { a } else { b }
}

/// `_mm256_cvtps_epi32` of an already-rounded value: NaN and out-of-range give `i32::MIN`
/// (the "integer indefinite" value).
#[inline(always)]
pub fn cvtps_epi32(x: f32) -> i32 {
    if x.is_nan() || !(-2147483648.0..2147483648.0).contains(&x) { i32::MIN } else { x as i32 }
}

/// `_mm256_packs_epi32` then `_mm256_packs_epi16` for one value: i32 saturated to i8.
#[inline(always)]
pub fn sat_i8(x: i32) -> i8 {
    x.clamp(-128, 127) as i8
}

/// The x86 q8 quantizers' block amax: `|v|` for 4x8 lanes folded with `_mm256_max_ps`
/// in ggml's order, then `_mm_max_ps(hi, lo)`, `movehl` and `max_ss(movehdup)`.
#[inline(always)]
pub fn amax_x86_32(x: &[f32]) -> f32 {
    debug_assert_eq!(x.len(), 32);
    let mut m = [0f32; 8];
    for l in 0..8 {
        m[l] = x[l].abs();
    }
    for v in 1..4 {
        for l in 0..8 {
            m[l] = max_ps(m[l], x[8 * v + l].abs());
        }
    }
    // max4 = _mm_max_ps(hi, lo)
    let m4: [f32; 4] = core::array::from_fn(|l| max_ps(m[4 + l], m[l]));
    // max4 = _mm_max_ps(max4, movehl(max4, max4)) -> lanes 0,1 matter
    let a0 = max_ps(m4[0], m4[2]);
    let a1 = max_ps(m4[1], m4[3]);
    // _mm_max_ss(max4, movehdup(max4))
    max_ps(a0, a1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_trick_wart() {
        assert_eq!(sign_epi8(-128, -1), -128);
        assert_eq!(sign_epi8(5, -1), -5);
        assert_eq!(sign_epi8(5, 0), 0);
        assert_eq!(maddubs_pair(255, 127, 255, 127), i16::MAX);
        assert_eq!(maddubs_pair(128, -128, 128, -128), i16::MIN);
    }

    #[test]
    fn max_ps_nan_semantics() {
        assert!(max_ps(1.0, f32::NAN).is_nan());
        assert_eq!(max_ps(f32::NAN, 1.0), 1.0);
        assert_eq!(cvtps_epi32(f32::NAN), i32::MIN);
        assert_eq!(cvtps_epi32(3e9), i32::MIN);
        assert_eq!(cvtps_epi32(-5.0), -5);
    }
}
