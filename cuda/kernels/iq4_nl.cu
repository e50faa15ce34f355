// iq4_nl weights x q8_0 activations (qkern_formats::reference::iq4_nl).
// - dequantize: ggml-quants.c `dequantize_row_iq4_nl`: y = d * kvalues_iq4nl[q]
// - dot: `ggml_vec_dot_iq4_nl_q8_0` (AVX2): blocks in pairs, the even block into accum1 and
//   the odd one into accum2 (acc = fma(dy*dx, lane, acc)), sumf = hsum_float_8(accum1 +
//   accum2); an odd last block goes through the scalar tail `sumf += d * (sumi1 + sumi2)`,
//   which gcc contracts into one fma.
// Device layout: split (bodies of 16 nibble bytes, then the fp16 d array). Two threads per
// row: thread h takes the low (lanes 0-3) or high (lanes 4-7) nibbles.

#include "mm_common.cuh"

template <int NTM>
QK_DEV void iq4nl_block(const u8* w, const u16* wd, const u32* aq, const float* ad, u32 capw, u32 h, const u32* kv,
                        u32 b, float (*acc)[4]) {
    const uint4 qq = ld128(w + 16u * b);
    const u32 qw[4] = {qq.x, qq.y, qq.z, qq.w};
    i32 v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = (i32)qk_lut16((h ? qw[i] >> 4 : qw[i]) & 0x0f0f0f0fu, kv);
    const float dx = qk_h2f(qk_ld(wd + b));
    float da[NTM];
    ld_tok_f<NTM>(ad + (u64)b * capw, da);
    u32 av[4][NTM];
#pragma unroll
    for (int i = 0; i < 4; ++i) ld_tok<NTM>(aq + (u64)(8u * b + i) * capw, av[i]);
#pragma unroll
    for (int t = 0; t < NTM; ++t) {
        const float d = qk_mul(da[t], dx);
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[t][i] = qk_fma(d, qk_i2f_small(qk_dp4a(v[i], (i32)av[i][t], 0)), acc[t][i]);
    }
}

template <int NTM>
QK_DEV void mm_iq4_nl(const MmArgs& A, const MmCtxB& c, float* res) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, capw = J.capw, h = c.h;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 16u;
    const u16* wd = (const u16*)J.wd + (u64)c.row * nb;
    const u32* aq = (const u32*)J.a_qs + (u64)(4u * h) * capw;
    const float* ad = (const float*)J.a_d;
    u32 kv[4];
    for (int i = 0; i < 4; ++i) kv[i] = qk_ld((const u32*)A.tab + TAB_IQ4NL + i);
    float acc1[NTM][4], acc2[NTM][4];
#pragma unroll
    for (int t = 0; t < NTM; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc1[t][i] = acc2[t][i] = 0.0f;
    const u32 pairs = nb / 2;
#pragma unroll 2
    for (u32 p = 0; p < pairs; ++p) {
        iq4nl_block<NTM>(w, wd, aq, ad, capw, h, kv, 2u * p, acc1);
        iq4nl_block<NTM>(w, wd, aq, ad, capw, h, kv, 2u * p + 1u, acc2);
    }
#pragma unroll
    for (int t = 0; t < NTM; ++t) {
        float sum[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) sum[i] = qk_add(acc1[t][i], acc2[t][i]);
        res[t] = mm_hsum_b(sum);
    }
    if (nb & 1u) {
        // scalar tail: the block's plain integer dot (all 8 lanes), sumf = fma(d, sumi, sumf)
        const u32 b = nb - 1u;
        const uint4 qq = ld128(w + 16u * b);
        const u32 qw[4] = {qq.x, qq.y, qq.z, qq.w};
        const float dx = qk_h2f(qk_ld(wd + b));
        float da[NTM];
        ld_tok_f<NTM>(ad + (u64)b * capw, da);
        u32 av[4][NTM];
#pragma unroll
        for (int i = 0; i < 4; ++i) ld_tok<NTM>(aq + (u64)(8u * b + i) * capw, av[i]);
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            i32 p = 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) p = qk_dp4a((i32)qk_lut16((h ? qw[i] >> 4 : qw[i]) & 0x0f0f0f0fu, kv), (i32)av[i][t], p);
            p += qk_shfl_xor_i(p, 1);
            res[t] = qk_fma(qk_mul(da[t], dx), qk_i2f(p), res[t]);
        }
    }
}
MM_KERNELS_B(iq4_nl, mm_iq4_nl)

QK_DEV float deq_iq4_nl(const u8* body, u16 d16, u32 e, const u32* tab) {
    const u32 n = e < 16 ? (body[e] & 0xfu) : (body[e - 16] >> 4);
    return qk_mul(qk_h2f(d16), (float)(i8)tab_byte(tab + TAB_IQ4NL, n));
}
DEQ_KERNEL(iq4_nl, deq_iq4_nl, 32, 16, 1)
