//! q8_0 on AVX2: the dot kernel (quants.c `ggml_vec_dot_q8_0_q8_0`, AVX2 branch), the x86
//! activation quantizer (`quantize_row_q8_0`, AVX2 branch) and `dequantize_row_q8_0`.

use core::arch::x86_64::*;

use qkern_formats::blocks::BlockQ8_0;

use super::{
    Lane32, avx2_chunk_fn, f16_table, f16_to_f32x8, f32_to_f16, for_tokens, hsum_float_8, load_i8x8, load_i8x32,
    mul_sum_i8_pairs_float, mul_sum_us8_pairs, prefetch_ahead, q8_block, q8_pack, store_f32x8, store_i8x32, token_rows,
};

/// `ggml_vec_dot_q8_0_q8_0` for `NT` tokens at once. Per block: `qx` loaded once; per
/// token `acc[t] = fma(set1(dx * dy), mul_sum_i8_pairs_float(qx, qy), acc[t])`. `sc` holds
/// the tokens' `dy` as f32 (`prep_q8_0`). One token: the product as ggml's build forms it
/// (table load, `vmulss`, broadcast); more: `dx` broadcast once per block and `dx * dy`
/// per token as a vector product of equal lanes (the same product), one `vmulps` with a
/// broadcast load.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot<const NT: usize>(w: &[BlockQ8_0], a: &[BlockQ8_0], apr: usize, sc: &[Lane32], out: &mut [f32; NT]) {
    let n = w.len();
    let ys: [&[BlockQ8_0]; NT] = token_rows(a, apr, n);
    let sc = &sc[..n];
    let tab = f16_table();
    let mut acc = [_mm256_setzero_ps(); NT];
    for (i, x) in w.iter().enumerate() {
        let qx = load_i8x32(&x.qs);
        let dy = &sc[i].0;
        prefetch_ahead(w, i);
        if NT == 1 {
            let d = _mm256_set1_ps(tab.get(x.d) * dy[0]);
            // No saturation (`mul_sum_us8_pairs`' contract): |x| <= 128 as u8 and sign(y, x) in
            // [-128, 127] (a -128 byte of y stays -128), so a pair lies in [2 * 128 * -128,
            // 2 * 128 * 127] = [-32768, 32512], inside i16.
            let q = mul_sum_i8_pairs_float(qx, load_i8x32(&ys[0][i].qs));
            acc[0] = _mm256_fmadd_ps(d, q, acc[0]);
        } else {
            let dx = f16_to_f32x8(x.d);
            let ax = _mm256_sign_epi8(qx, qx);
            for_tokens!(NT, t => {
                let y = &ys[t][i];
                // `_mm256_set1_ps(FP16_TO_FP32(x.d) * FP16_TO_FP32(y.d))`, the product in every lane.
                let d = _mm256_mul_ps(dx, _mm256_broadcast_ss(&dy[t]));
                let sy = _mm256_sign_epi8(load_i8x32(&y.qs), qx);
                // No saturation: as for one token above.
                let q = _mm256_cvtepi32_ps(mul_sum_us8_pairs(ax, sy));
                acc[t] = _mm256_fmadd_ps(d, q, acc[t]);
            });
        }
    }
    for_tokens!(NT, t => {
        out[t] = hsum_float_8(acc[t]);
    });
}

/// One token against two weight rows at once (`avx2_chunk_fn!`'s `pairs`): per row the
/// one-token loop of [`dot`] (the same operations, so the same bits), the two rows' blocks
/// interleaved. A row's fma chain (one fma per block, each waiting for the last) bounds the
/// one-row loop when the weights are in cache; two independent chains fill each other's
/// latency, and each token block is loaded once for both rows. Both rows' weights are
/// prefetched [`PREFETCH_BYTES`] ahead.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot_pair(w0: &[BlockQ8_0], w1: &[BlockQ8_0], a: &[BlockQ8_0], sc: &[Lane32]) -> [[f32; 1]; 2] {
    let n = w0.len();
    let (w1, y, sc) = (&w1[..n], &a[..n], &sc[..n]);
    let tab = f16_table();
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    for (i, (((x0, x1), y), s)) in w0.iter().zip(w1).zip(y).zip(sc).enumerate() {
        prefetch_ahead(w0, i);
        prefetch_ahead(w1, i);
        let qy = load_i8x32(&y.qs);
        // as in `dot::<1>`: `set1(FP16_TO_FP32(x.d) * dy)`, no saturation in the pairs
        let d0 = _mm256_set1_ps(tab.get(x0.d) * s.0[0]);
        acc0 = _mm256_fmadd_ps(d0, mul_sum_i8_pairs_float(load_i8x32(&x0.qs), qy), acc0);
        let d1 = _mm256_set1_ps(tab.get(x1.d) * s.0[0]);
        acc1 = _mm256_fmadd_ps(d1, mul_sum_i8_pairs_float(load_i8x32(&x1.qs), qy), acc1);
    }
    [[hsum_float_8(acc0)], [hsum_float_8(acc1)]]
}

avx2_chunk_fn!(scaled pairs dot_pair, mod nt, fn chunk_avx2, dot, BlockQ8_0, BlockQ8_0);

/// x86 `quantize_row_q8_0` (AVX2 branch) of one row; `x.len() == y.len() * 32`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_avx2(x: &[f32], y: &mut [BlockQ8_0]) {
    for (xb, b) in x.as_chunks::<32>().0.iter().zip(y.iter_mut()) {
        let (d, q) = q8_block(xb);
        b.d = f32_to_f16(d);
        store_i8x32(&mut b.qs, q8_pack(q));
    }
}

/// `dequantize_row_q8_0`: `y = q * d`; `y.len() == x.len() * 32`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dequantize_avx2(x: &[BlockQ8_0], y: &mut [f32]) {
    // The scale by a table load and broadcast, each 8 quants sign-extended straight from memory
    // (`vpmovsxbd ymm, m64`): no shuffle-port work beyond the 4 extensions. The 16-byte load
    // with an unpack, and the scalar F16C conversion, ran at 0.92x of ggml's plain loop on
    // session 13's Xeon (in cache, where the shuffle port is the limit).
    let tab = f16_table();
    for (b, out) in x.iter().zip(y.as_chunks_mut::<32>().0) {
        let d = tab.x8(b.d);
        let q: &[[i8; 8]; 4] = bytemuck::cast_ref(&b.qs);
        let out: &mut [[f32; 8]; 4] = bytemuck::cast_mut(out);
        for (q8, o) in q.iter().zip(out.iter_mut()) {
            let v = _mm256_cvtepi8_epi32(load_i8x8(q8));
            store_f32x8(o, _mm256_mul_ps(_mm256_cvtepi32_ps(v), d));
        }
    }
}
