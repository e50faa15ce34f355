//! Scalar float conversions exactly as ggml-cpu's x86 build performs them.

use half::{bf16, f16};

/// fp16 -> f32 (exact; `_cvtsh_ss` in ggml-cpu's F16C build).
#[inline]
pub fn f16_to_f32(h: f16) -> f32 {
    h.to_f32()
}

/// f32 -> fp16 exactly as ggml's software converter `ggml_compute_fp32_to_fp16`
/// (ggml-impl.h), which ggml-cpu's x86 quantizers use on this build: round to nearest even,
/// and every NaN becomes `sign | 0x7E00` (no payload kept, unlike F16C or `half`).
#[inline]
pub fn f32_to_f16(f: f32) -> f16 {
    let scale_to_inf = f32::from_bits(0x7780_0000); // 0x1.0p+112
    let scale_to_zero = f32::from_bits(0x0880_0000); // 0x1.0p-110
    let mut base = (f.abs() * scale_to_inf) * scale_to_zero;
    let w = f.to_bits();
    let shl1_w = w.wrapping_add(w);
    let sign = w & 0x8000_0000;
    let mut bias = shl1_w & 0xFF00_0000;
    if bias < 0x7100_0000 {
        bias = 0x7100_0000;
    }
    base += f32::from_bits((bias >> 1) + 0x0780_0000);
    let bits = base.to_bits();
    let exp_bits = (bits >> 13) & 0x0000_7C00;
    let mantissa_bits = bits & 0x0000_0FFF;
    let nonsign = exp_bits + mantissa_bits;
    f16::from_bits(((sign >> 16) | if shl1_w > 0xFF00_0000 { 0x7E00 } else { nonsign }) as u16)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_to_f16_matches_rne_and_canonical_nan() {
        // Finite values: identical to IEEE round-to-nearest-even (half's converter).
        let mut x = 0x0000_0001u32;
        while x < 0x7F80_0000 {
            for v in [f32::from_bits(x), -f32::from_bits(x)] {
                assert_eq!(f32_to_f16(v).to_bits(), f16::from_f32(v).to_bits(), "{v:e}");
            }
            x = x.wrapping_mul(3).wrapping_add(0x1357);
        }
        assert_eq!(f32_to_f16(0.0).to_bits(), 0);
        assert_eq!(f32_to_f16(-0.0).to_bits(), 0x8000);
        assert_eq!(f32_to_f16(f32::INFINITY).to_bits(), 0x7C00);
        assert_eq!(f32_to_f16(1e9).to_bits(), 0x7C00);
        assert_eq!(f32_to_f16(f32::from_bits(0x7FC0_1234)).to_bits(), 0x7E00);
        assert_eq!(f32_to_f16(f32::from_bits(0xFF80_0001)).to_bits(), 0xFE00);
    }

    #[test]
    fn ue4m3_table() {
        assert_eq!(ue4m3_to_f32(0), 0.0);
        assert_eq!(ue4m3_to_f32(0x7F), 0.0);
        assert_eq!(ue4m3_to_f32(0x38), 0.5); // exp 7, man 0: 1.0 * 0.5
        assert_eq!(ue4m3_to_f32(0x01), 2f32.powi(-10));
        assert_eq!(ue4m3_to_f32(0xFF), 240.0);
        assert_eq!(ue4m3_to_f32(0x80), 0.0);
    }
}
