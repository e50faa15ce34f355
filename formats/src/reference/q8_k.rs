//! q8_K activations (the `vec_dot_type` of the K-quants and IQ formats).
//!
//! - quantize: ggml-cpu/arch/x86/quants.c `quantize_row_q8_K`, which on x86 just calls
//!   ggml/src/ggml-quants.c `quantize_row_q8_K_ref`: signed max (the first element of largest
//!   `|x|`), `iscale = -127/max`, `nearest_int` (the `+ 12582912` magic-number rounding),
//!   `MIN(127, v)` stored into `int8_t`, `d = 1/iscale`, `bsums` per 16.
//!   ggml-base is built `-march=x86-64` (no FMA), so `iscale*x + 12582912.f` is not fused.
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_q8_K`: `y = d * q`.

use super::{ActBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockQ8K, QK_K};

/// ggml-quants.c `nearest_int`: `fval + 12582912.f` (1.5 * 2^23), reinterpret the bits,
/// `(i & 0x007fffff) - 0x00400000`. Round half to even for `|fval| <= 4194303`; outside that
/// range, and for Inf / NaN, the same bit formula is applied (the C `assert` is compiled
/// out with `NDEBUG`): e.g. `±Inf -> -4194304`, a NaN gives its payload bits (quiet bit
/// aside), the x86 default NaN (`0xFFC00000`) gives 0.
#[inline(always)]
pub(crate) fn nearest_int(fval: f32) -> i32 {
    let val = fval + 12582912.0f32;
    let i = val.to_bits() as i32;
    (i & 0x007f_ffff) - 0x0040_0000
}

/// `quantize_row_q8_K_ref` (the x86 `quantize_row_q8_K`).
///
/// All-zero blocks (`amax == 0`, which includes blocks whose only nonzero entries are NaN:
/// `fabsf(NaN) > amax` is false) get `d = 0` and zero quants; ggml then `continue`s without
/// writing `bsums` (they keep whatever the output buffer held). We write zeros there, which is
/// what ggml gives on a zeroed buffer.
pub fn quantize_q8_k(x: &[f32], y: &mut [BlockQ8K]) {
    debug_check("q8_K quantize", y.len() * QK_K, x.len());
    for (xb, b) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        // for (j) { ax = fabsf(x[j]); if (ax > amax) { amax = ax; max = x[j]; } }
        let mut max = 0f32;
        let mut amax = 0f32;
        for &v in xb {
            let ax = v.abs();
            if ax > amax {
                amax = ax;
                max = v;
            }
        }
        if amax == 0.0 {
            b.d = 0.0;
            b.qs = [0; QK_K];
            b.bsums = [0; 16];
            continue;
        }
        let iscale = -127.0f32 / max;
        for (q, &v) in b.qs.iter_mut().zip(xb) {
            // y[i].qs[j] = MIN(127, v): int -> int8_t conversion wraps (gcc), e.g. -4194304 -> 0.
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, qs) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *s = qs.iter().map(|&q| q as i32).sum::<i32>() as i16;
        }
        b.d = 1.0 / iscale;
    }
}

/// `dequantize_row_q8_K`: `y = d * q`.
pub fn dequantize_q8_k(x: &[BlockQ8K], y: &mut [f32]) {
    debug_check("q8_K dequantize", x.len() * QK_K, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        for (o, &q) in out.iter_mut().zip(&b.qs) {
            *o = b.d * q as f32;
        }
    }
}

impl ActBlock for BlockQ8K {
    const FORMAT: Format = Format::Q8_K;
    fn quantize(x: &[f32], out: &mut [Self]) {
        quantize_q8_k(x, out)
    }
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_q8_k(blocks, out)
    }
    fn has_minus_128(&self) -> bool {
        self.qs.contains(&-128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_ties_and_specials() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(-2.5), -2);
        assert_eq!(nearest_int(126.5), 126);
        assert_eq!(nearest_int(f32::INFINITY), -0x40_0000);
        assert_eq!(nearest_int(f32::from_bits(0xFFC0_0000)), 0);
    }
}
