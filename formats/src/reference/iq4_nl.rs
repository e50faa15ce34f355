//! iq4_nl weights (activations: q8_0).
//!
//! - dequantize: ggml/src/ggml-quants.c `dequantize_row_iq4_nl`: `y = d * kvalues_iq4nl[q]`
//! - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_iq4_nl_q8_0` (AVX2 branch): blocks in
//!   pairs, the even block into `accum1`, the odd one into `accum2` (sign trick, `maddubs`,
//!   `madd(.., 1)`, `fma(dy*dx, lanes, accum)`), `sumf = hsum_float_8(accum1 + accum2)`;
//!   an odd last block goes through the scalar tail loop (plain int products, no sign trick).

use super::simd::{cvt_i32x8, fmadd_bcast, hsum_float_8, mul_sum_i8_pairs};
use super::{WeightBlock, debug_check};
use crate::Format;
use crate::blocks::{BlockIq4Nl, BlockQ8_0};
use crate::fp::f16_to_f32;
use crate::tables::KVALUES_IQ4NL;

/// The 32 signed values of a block in element order: low nibbles are elements 0..16,
/// high nibbles 16..32 (`MM256_SET_M128I(shuffle(values, hi), shuffle(values, lo))`).
#[inline(always)]
fn values(b: &BlockIq4Nl) -> [i8; 32] {
    core::array::from_fn(|j| {
        let n = if j < 16 { b.qs[j] & 0x0F } else { b.qs[j - 16] >> 4 };
        KVALUES_IQ4NL[n as usize]
    })
}

/// `dequantize_row_iq4_nl`.
pub fn dequantize_iq4_nl(x: &[BlockIq4Nl], y: &mut [f32]) {
    debug_check("iq4_nl dequantize", x.len() * 32, y.len());
    for (b, out) in x.iter().zip(y.chunks_exact_mut(32)) {
        let d = f16_to_f32(b.d);
        for (o, &v) in out.iter_mut().zip(&values(b)) {
            *o = d * v as f32;
        }
    }
}

/// One block's AVX2 step: `accum = fma(set1(dy*dx), cvtepi32(madd(mul_add_epi8(q4, q8), 1)), accum)`.
#[inline(always)]
fn block_step(bx: &BlockIq4Nl, by: &BlockQ8_0, acc: &mut [f32; 8]) {
    let d = f16_to_f32(by.d) * f16_to_f32(bx.d);
    let q = cvt_i32x8(&mul_sum_i8_pairs(&values(bx), &by.qs));
    fmadd_bcast(d, &q, acc);
}

/// `ggml_vec_dot_iq4_nl_q8_0`, AVX2 branch.
pub fn vec_dot_iq4_nl(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
    debug_check("iq4_nl vec_dot", x.len(), y.len());
    let n = x.len().min(y.len());
    let pairs = n / 2;
    let mut accum1 = [0f32; 8];
    let mut accum2 = [0f32; 8];
    for (bx, by) in x[..2 * pairs].chunks_exact(2).zip(y[..2 * pairs].chunks_exact(2)) {
        block_step(&bx[0], &by[0], &mut accum1);
        block_step(&bx[1], &by[1], &mut accum2);
    }
    // `hsum_float_8(_mm256_add_ps(accum1, accum2))`
    let sum: [f32; 8] = core::array::from_fn(|l| accum1[l] + accum2[l]);
    let mut sumf = hsum_float_8(&sum);
    // Scalar tail (`for (; ib < nb; ++ib)`): at most one block.
    for (bx, by) in x[2 * pairs..n].iter().zip(&y[2 * pairs..n]) {
        let d = f16_to_f32(by.d) * f16_to_f32(bx.d);
        let v = values(bx);
        let (mut sumi1, mut sumi2) = (0i32, 0i32);
        for j in 0..16 {
            sumi1 += by.qs[j] as i32 * v[j] as i32;
            sumi2 += by.qs[j + 16] as i32 * v[j + 16] as i32;
        }
        let si = (sumi1 + sumi2) as f32;
        // `sumf += d * (sumi1 + sumi2);` is contracted by gcc (gnu11, -mfma) into one fma:
        // measured against live ggml, the unfused form differs in the last bit.
        sumf = d.mul_add(si, sumf);
    }
    sumf
}

impl WeightBlock for BlockIq4Nl {
    const FORMAT: Format = Format::IQ4_NL;
    type Act = BlockQ8_0;
    fn dequantize(blocks: &[Self], out: &mut [f32]) {
        dequantize_iq4_nl(blocks, out)
    }
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32 {
        vec_dot_iq4_nl(w, a)
    }
}
