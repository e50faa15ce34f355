//! iq4_xs weights (4.25 bpw) against q8_K activations.
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_iq4_xs`
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_iq4_xs_q8_K` (AVX2 branch): nibbles
//!   looked up in `kvalues_iq4nl` (low nibbles of 16 bytes, then high nibbles), `mul_add_epi8`
//!   (sign trick + `maddubs`), `madd` by the signed 6-bit scale `ls - 32`, two int32x8 sums,
//!   per block `acc = fma(dx*dy, cvt(sumi1+sumi2), acc)`, `hsum_float_8(acc)` unscaled.

use super::simd::{cvt_i32x8, fmadd_bcast, hsum_float_8, madd, maddubs, sign_epi8};
use super::{WeightBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockIq4Xs, BlockQ8K};
use crate::fp::f16_to_f32;
use crate::tables::KVALUES_IQ4NL;

/// `dequantize_row_iq4_xs`: `dl = d * (ls - 32)`, `y = dl * kvalues_iq4nl[nibble]`.
pub fn dequantize_iq4_xs(x: &[BlockIq4Xs], y: &mut [f32]) {
    debug_check("iq4_xs dequantize", x.len() * 256, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(256)) {
        let d = f16_to_f32(b.d);
        for (ib, o32) in out.chunks_exact_mut(32).enumerate() {
            let ls =
                ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) as i32 | ((((b.scales_h >> (2 * ib)) & 3) as i32) << 4);
            let dl = d * (ls - 32) as f32;
            let qs = &b.qs[16 * ib..16 * ib + 16];
            for j in 0..16 {
                o32[j] = dl * KVALUES_IQ4NL[(qs[j] & 0xf) as usize] as f32;
                o32[j + 16] = dl * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as f32;
            }
        }
    }
}

/// One 32-element sub-block: `madd(mul_add_epi8(q4b, q8b), ls)`.
#[inline(always)]
fn sub_block(qs: &[u8], ls: i16, q8: &[i8]) -> [i32; 8] {
    // q4b = MM256_SET_M128I(shuffle(values, hi nibbles), shuffle(values, lo nibbles))
    let q4b: [i8; 32] = core::array::from_fn(|e| {
        let nib = if e < 16 { qs[e] & 0xf } else { qs[e - 16] >> 4 };
        KVALUES_IQ4NL[nib as usize]
    });
    // mul_add_epi8(x, y) = maddubs(sign(x, x), sign(y, x))
    let ax: [u8; 32] = core::array::from_fn(|e| sign_epi8(q4b[e], q4b[e]) as u8);
    let sy: [i8; 32] = core::array::from_fn(|e| sign_epi8(q8[e], q4b[e]));
    madd(&maddubs(&ax, &sy), &[ls; 16])
}

/// `ggml_vec_dot_iq4_xs_q8_K`, AVX2 branch.
pub fn vec_dot_iq4_xs(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
    debug_check("iq4_xs vec_dot", x.len(), y.len());
    let mut accum = [0f32; 8];
    for (bx, by) in x.iter().zip(y) {
        let mut sh = bx.scales_h;
        let mut sumi1 = [0i32; 8];
        let mut sumi2 = [0i32; 8];
        for ib in (0..8).step_by(2) {
            let qs = &bx.qs[16 * ib..16 * ib + 32];
            let q8 = &by.qs[32 * ib..32 * ib + 64];
            let sl = bx.scales_l[ib / 2];
            let ls1 = ((sl & 0xf) as i16 | ((sh << 4) & 0x30) as i16) - 32;
            let ls2 = ((sl >> 4) as i16 | ((sh << 2) & 0x30) as i16) - 32;
            sh >>= 4;
            let p1 = sub_block(&qs[..16], ls1, &q8[..32]);
            let p2 = sub_block(&qs[16..], ls2, &q8[32..]);
            for l in 0..8 {
                sumi1[l] = p1[l].wrapping_add(sumi1[l]);
                sumi2[l] = p2[l].wrapping_add(sumi2[l]);
            }
        }
        let sumi: [i32; 8] = core::array::from_fn(|l| sumi1[l].wrapping_add(sumi2[l]));
        // _mm256_set1_ps(GGML_CPU_FP16_TO_FP32(x[ibl].d) * y[ibl].d)
        let d = f16_to_f32(bx.d) * by.d;
        fmadd_bcast(d, &cvt_i32x8(&sumi), &mut accum);
    }
    hsum_float_8(&accum)
}

impl WeightBlock for BlockIq4Xs {
    const FORMAT: Format = Format::IQ4_XS;
    type Act = BlockQ8K;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_iq4_xs(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_iq4_xs(w, a)
    }
}
