//! Scalar float conversions exactly as ggml-cpu's x86 build performs them.

use half::{bf16, f16};

/// fp16 -> f32 (exact; `_cvtsh_ss` in ggml-cpu's F16C build).
#[inline]
pub fn f16_to_f32(h: f16) -> f32 {
    h.to_f32()
}

/// f32 -> fp16, round to nearest even (`_cvtss_sh(x, 0)` in ggml-cpu's F16C build;
/// the same as ggml's software converter for every non-NaN input).
#[inline]
pub fn f32_to_f16(x: f32) -> f16 {
    f16::from_f32(x)
}

/// bf16 -> f32 (exact).
#[inline]
pub fn bf16_to_f32(h: bf16) -> f32 {
    h.to_f32()
}

/// UE4M3 -> f32 with ggml's x0.5 folded in, exactly `ggml_ue4m3_to_fp32` (ggml-impl.h):
/// the E2M1 table is doubled, so the scale is halved. As in ggml, 0x00 and 0x7F give 0,
/// bit 7 is ignored by the exponent mask (so 0x80 gives 0 and 0xFF gives 240), and every
/// value is exact in f32.
#[inline]
pub const fn ue4m3_to_f32(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = ((x >> 3) & 0xF) as i32;
    let man = (x & 0x7) as u32;
    if exp == 0 {
        // ldexpf(man, -9) * 0.5 == man * 2^-10
        man as f32 * f32::from_bits(((127 - 10) as u32) << 23)
    } else {
        // ldexpf(1 + man/8, exp - 7) * 0.5
        f32::from_bits((((exp - 7 - 1 + 127) as u32) << 23) | (man << 20))
    }
}

/// The doubled E2M1 value of a nibble (`kvalues_fp4`).
#[inline]
pub fn e2m1_doubled(n: u8) -> i8 {
    crate::tables::KVALUES_FP4[(n & 0xF) as usize]
}
