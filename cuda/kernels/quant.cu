// Activation quantizers, bit-identical to ggml-cpu's x86 `from_float`
// (qkern_formats::reference::{q8_0, q8_1, q8_k}):
// - q8_0 / q8_1: ggml-cpu/arch/x86/quants.c `quantize_row_q8_0` / `quantize_row_q8_1` (AVX2):
//   amax folded with `_mm256_max_ps` in ggml's lane order, `d = amax/127`,
//   `id = amax != 0 ? 127/amax : 0`, `cvtps_epi32(round_ps(v*id, nearest))`, saturating packs;
//   q8_1 adds `s = fp16(d * (float)sum(unsaturated i32 quants))`.
// - q8_K: ggml-quants.c `quantize_row_q8_K_ref` (the x86 `quantize_row_q8_K`): signed max (the
//   first element of largest |x|), `iscale = -127/max`, `nearest_int` (+12582912 magic, not
//   fused), `MIN(127, v)` stored into int8_t (wrapping), `bsums` per 16, `d = 1/iscale`.
//
// Output layout (layout.rs `ActLayout`, token-interleaved): q8_0 / q8_1 quant quads
// [cols/16][capw] (16 bytes), d as fp16 and f32 [blocks][capw], q8_1 also s (fp16 and f32);
// q8_K quant words [cols/4][capw] (QK_Q8K_QUAD: quads [cols/16][capw], as q8_0's), d f32 [blocks][capw] and bsums i16 [t][blocks][16].

#include "common.cuh"

// Unit i (token i / blocks, block i % blocks) of a q8_0 / q8_1 quantize: one block of 32, on
// one thread.
template <bool Q81>
QK_DEV void quant_q8_unit(const QuantArgs& A, u32 i) {
    {
        const u32 nb = A.cols / 32;
        const u32 t = i / nb, b = i % nb;
        const float* x = (const float*)A.x + (u64)t * A.cols + 32u * b;
        float v[32];
        for (int j = 0; j < 32; ++j) v[j] = x[j];
        // amax: 4 vectors of 8 lanes folded with max_ps(acc, |v|), then hi/lo, movehl, movehdup
        float m[8];
        for (int l = 0; l < 8; ++l) m[l] = qk_abs(v[l]);
        for (int k = 1; k < 4; ++k)
            for (int l = 0; l < 8; ++l) m[l] = qk_max_ps(m[l], qk_abs(v[8 * k + l]));
        float m4[4];
        for (int l = 0; l < 4; ++l) m4[l] = qk_max_ps(m[4 + l], m[l]);
        const float a0 = qk_max_ps(m4[0], m4[2]);
        const float a1 = qk_max_ps(m4[1], m4[3]);
        const float amax = qk_max_ps(a0, a1);
        const float d = qk_div(amax, 127.0f);
        const float id = amax != 0.0f ? qk_div(127.0f, amax) : 0.0f;
        const u16 dh = qk_f2h(d);
        i32 sum = 0;
        u32 words[8];
        for (int w = 0; w < 8; ++w) {
            u32 word = 0;
            for (int k = 0; k < 4; ++k) {
                const i32 q = qk_cvtps_epi32(qk_rint(qk_mul(v[4 * w + k], id)));
                sum = (i32)((u32)sum + (u32)q);
                const i32 s = q < -128 ? -128 : (q > 127 ? 127 : q);
                word |= ((u32)s & 0xffu) << (8 * k);
            }
            words[w] = word;
        }
        uint4* qs = (uint4*)A.qs + (u64)(2u * b) * A.capw + t;  // quads 2b, 2b + 1
        qs[0] = make_u4(words[0], words[1], words[2], words[3]);
        qs[A.capw] = make_u4(words[4], words[5], words[6], words[7]);
        const u64 si = (u64)b * A.capw + t;
        ((u16*)A.d16)[si] = dh;
        ((float*)A.d32)[si] = qk_h2f_soft(dh);
        if (Q81) {
            const float p = qk_mul(d, qk_i2f(sum));
            // x86 `d * sum`: a NaN made here (Inf * 0) is the default NaN 0xFFC00000, whose
            // sign survives the fp16 conversion; a NaN `d` (sign clear) propagates.
            const u16 sh = (qk_isnan(p) && !qk_isnan(d)) ? (u16)0xfe00u : qk_f2h(p);
            ((u16*)A.x16)[si] = sh;
            ((float*)A.x32)[si] = qk_h2f_soft(sh);
        }
    }
}

// One q8_0 / q8_1 block of 32 per thread.
template <bool Q81>
QK_DEV void quant_q8(const QuantArgs& A) {
    const u32 total = A.cols / 32 * A.tokens;
    for (u32 i = qk_bid() * qk_bdim() + qk_tid(); i < total; i += qk_bdim() * qk_gdim()) quant_q8_unit<Q81>(A, i);
}

// ggml-quants.c `nearest_int` of `iscale * v` with x86 NaN semantics: a NaN `v` propagates
// its payload (quieted) through the multiply and the magic add; an `Inf * 0` NaN is the
// default NaN (0xFFC00000), which gives 0.
// QK_Q8K_FMA selects `fma(iscale, v, 12582912)` over the unfused `iscale*v + 12582912`
// (which one ggml's build does is decided by the reference, formats/src/reference/q8_k.rs).
#ifndef QK_Q8K_FMA
#define QK_Q8K_FMA 0
#endif
QK_DEV i32 q8k_quant(float iscale, float v) {
    if (qk_isnan(v)) return (i32)(qk_f2u(v) & 0x3fffffu);
#if QK_Q8K_FMA
    const float val = qk_fma(iscale, v, 12582912.0f);
    if (qk_isnan(val)) return 0;  // 0 * Inf: the default NaN 0xFFC00000
#else
    const float p = qk_mul(iscale, v);
    if (qk_isnan(p)) return 0;  // 0 * Inf: the default NaN 0xFFC00000
    const float val = qk_add(p, 12582912.0f);
#endif
    return (i32)(qk_f2u(val) & 0x007fffffu) - 0x00400000;
}

// Unit i (token i / blocks, block i % blocks) of a q8_K quantize: one block of 256, on one warp
// (every lane with the same i); lane k holds elements 8k..8k+8.
QK_DEV void quant_q8_k_unit(const QuantArgs& A, u32 i) {
    const u32 lane = qk_tid() & 31u;
    {
        const u32 nb = A.cols / 256;
        const u32 t = i / nb, b = i % nb;
        const float* x = (const float*)A.x + (u64)t * A.cols + 256u * b + 8u * lane;
        float v[8];
        for (int j = 0; j < 8; ++j) v[j] = x[j];
        // for (j) { ax = fabsf(x[j]); if (ax > amax) { amax = ax; max = x[j]; } }
        float amax = 0.0f, mx = 0.0f;
        i32 idx = 256;
        for (int j = 0; j < 8; ++j) {
            const float ax = qk_abs(v[j]);
            if (ax > amax) {
                amax = ax;
                mx = v[j];
                idx = (i32)(8u * lane) + j;
            }
        }
        // The sequential scan keeps the first index of the largest |x|: reduce (amax, idx).
        for (int m = 16; m >= 1; m >>= 1) {
            const float oa = qk_shfl_xor(amax, m);
            const float om = qk_shfl_xor(mx, m);
            const i32 oi = qk_shfl_xor_i(idx, m);
            if (oa > amax || (oa == amax && oi < idx)) {
                amax = oa;
                mx = om;
                idx = oi;
            }
        }
        // words 2 lane, 2 lane + 1 of the block (mm_common.cuh QK_Q8K_QUAD: qs[0], qs[wn])
        u32* qs = QK_Q8K_QUAD ? (u32*)A.qs + ((u64)(16u * b + lane / 2u) * A.capw + t) * 4u + 2u * (lane & 1u)
                              : (u32*)A.qs + (u64)(64u * b + 2u * lane) * A.capw + t;
        const u64 wn = QK_Q8K_QUAD ? 1u : A.capw;
        i16* bs = (i16*)A.x16 + (u64)i * 16u;
        const u64 si = (u64)b * A.capw + t;
        if (amax == 0.0f) {
            qs[0] = 0;
            qs[wn] = 0;
            if ((lane & 1u) == 0) bs[lane / 2] = 0;
            if (lane == 0) ((float*)A.d32)[si] = 0.0f;
            return;
        }
        const float iscale = qk_div(-127.0f, mx);
        i32 s = 0;
        u32 w0 = 0, w1 = 0;
        for (int j = 0; j < 8; ++j) {
            i32 q = q8k_quant(iscale, v[j]);
            q = q < 127 ? q : 127;
            const i32 q8 = (i32)(i8)(u8)(u32)q;  // int -> int8_t wraps (gcc)
            s += q8;
            if (j < 4) w0 |= ((u32)q8 & 0xffu) << (8 * j);
            else w1 |= ((u32)q8 & 0xffu) << (8 * (j - 4));
        }
        qs[0] = w0;
        qs[wn] = w1;
        s += qk_shfl_xor_i(s, 1);
        if ((lane & 1u) == 0) bs[lane / 2] = (i16)s;
        if (lane == 0) ((float*)A.d32)[si] = qk_div(1.0f, iscale);
    }
}

// One q8_K block of 256 per warp.
QK_DEV void quant_q8_k(const QuantArgs& A) {
    const u32 total = A.cols / 256 * A.tokens;
    const u32 nwarps = qk_bdim() * qk_gdim() / 32u;
    for (u32 i = (qk_bid() * qk_bdim() + qk_tid()) / 32u; i < total; i += nwarps) quant_q8_k_unit(A, i);
}

// Grouped quantizes (QuantGroupArgs, common.cuh): the units of jobs 0..n concatenated, job j's
// ending at end[j]; a thread (a warp for q8_K) walks them in grid-stride order, so its job index
// only moves forward.
template <int KIND>
QK_DEV void quant_group(const QuantGroupArgs& G) {
    const u32 total = G.end[G.n - 1];
    const u32 per = KIND == 2 ? 32u : 1u;  // threads a unit
    const u32 stride = qk_bdim() * qk_gdim() / per;
    u32 j = 0;
    for (u32 i = (qk_bid() * qk_bdim() + qk_tid()) / per; i < total; i += stride) {
        while (i >= G.end[j]) ++j;
        const u32 u = i - (j == 0 ? 0u : G.end[j - 1]);
        if (KIND == 0) quant_q8_unit<false>(G.job[j], u);
        else if (KIND == 1) quant_q8_unit<true>(G.job[j], u);
        else quant_q8_k_unit(G.job[j], u);
    }
}

QK_DEV void quant_q8_0_body(const QuantArgs& A) { quant_q8<false>(A); }
QK_DEV void quant_q8_1_body(const QuantArgs& A) { quant_q8<true>(A); }
QK_DEV void quant_group_q8_0(const QuantGroupArgs& G) { quant_group<0>(G); }
QK_DEV void quant_group_q8_1(const QuantGroupArgs& G) { quant_group<1>(G); }
QK_DEV void quant_group_q8_k(const QuantGroupArgs& G) { quant_group<2>(G); }

QK_ENTRY(qk_quant_q8_0, QuantArgs, quant_q8_0_body)
QK_ENTRY(qk_quant_q8_1, QuantArgs, quant_q8_1_body)
QK_ENTRY(qk_quant_q8_k, QuantArgs, quant_q8_k)
QK_ENTRY(qk_quant_group_q8_0, QuantGroupArgs, quant_group_q8_0)
QK_ENTRY(qk_quant_group_q8_1, QuantGroupArgs, quant_group_q8_1)
QK_ENTRY(qk_quant_group_q8_k, QuantGroupArgs, quant_group_q8_k)
