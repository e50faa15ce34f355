// q8_0 weights x q8_0 activations (qkern_formats::reference::q8_0).
// - dequantize: ggml-quants.c `dequantize_row_q8_0`: y = q * d
// - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_q8_0_q8_0` (AVX2): lane l of block b is
//   the sum of 4 products (elements 4l..4l+4; the sign trick equals the plain product for
//   activation bytes other than -128, which qkern never holds), acc = fma(dx*dy, lane, acc).
// Device layout: split (bodies of 32 quants, then the fp16 d array). Two threads per row
// (mm_common.cuh, "32-element formats").

#include "mm_common.cuh"

template <int NTM>
QK_DEV void mm_q8_0(const MmArgs& A, const MmCtxB& c, float* res) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, capw = J.capw, h = c.h;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 32u + 16u * h;
    const u16* wd = (const u16*)J.wd + (u64)c.row * nb;
    const u32* aq = (const u32*)J.a_qs + (u64)(4u * h) * capw;
    const float* ad = (const float*)J.a_d;
    float acc[NTM][4];
#pragma unroll
    for (int t = 0; t < NTM; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[t][i] = 0.0f;
#pragma unroll 4
    for (u32 b = 0; b < nb; ++b) {
        const uint4 wq = ld128(w + 32u * b);
        const i32 wv[4] = {(i32)wq.x, (i32)wq.y, (i32)wq.z, (i32)wq.w};
        const float dw = qk_h2f(qk_ld(wd + b));
        float da[NTM];
        ld_tok_f<NTM>(ad + (u64)b * capw, da);
        u32 av[4][NTM];
#pragma unroll
        for (int i = 0; i < 4; ++i) ld_tok<NTM>(aq + (u64)(8u * b + i) * capw, av[i]);
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            const float d = qk_mul(dw, da[t]);
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[t][i] = qk_fma(d, qk_i2f_small(qk_dp4a(wv[i], (i32)av[i][t], 0)), acc[t][i]);
        }
    }
#pragma unroll
    for (int t = 0; t < NTM; ++t) res[t] = mm_hsum_b(acc[t]);
}
MM_KERNELS_B(q8_0, mm_q8_0)

QK_DEV float deq_q8_0(const u8* body, u16 d16, u32 e, const u32*) {
    return qk_mul((float)(i8)body[e], qk_h2f(d16));
}
DEQ_KERNEL(q8_0, deq_q8_0, 32, 32, 1)
