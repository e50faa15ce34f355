// q8_0 weights x q8_0 activations (qkern_formats::reference::q8_0).
// - dequantize: ggml-quants.c `dequantize_row_q8_0`: y = q * d
// - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_q8_0_q8_0` (AVX2): lane l of block b is
//   the sum of 4 products (elements 4l..4l+4; the sign trick equals the plain product for
//   activation bytes other than -128, which qkern never holds), acc = fma(dx*dy, lane, acc).
// Device layout: split (bodies of 32 quants, then the fp16 d array).

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV float mm_q8_0(const MmArgs& A, const MmCtx& c) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, cols = A.cols;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 32u + 4u * c.l;
    const u16* wd = (const u16*)J.wd + (u64)c.row * nb;
    const u8* aq = (const u8*)J.a_qs + 4u * c.l;
    const float* ad = (const float*)J.a_d;
    float acc[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) acc[t] = 0.0f;
    for (u32 b = 0; b < nb; ++b) {
        const i32 wv = (i32)ld32(w + 32u * b);
        const float dw = qk_h2f(qk_ld(wd + b));
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            if ((u32)t < c.nt) {
                const i32 av = (i32)ld32(aq + (u64)t * cols + 32u * b);
                const float d = qk_mul(dw, qk_ld(ad + (u64)t * nb + b));
                acc[t] = qk_fma(d, qk_i2f_small(qk_dp4a(wv, av, 0)), acc[t]);
            }
        }
    }
    return mm_hsum_pick<NTM>(acc, c.l);
}
MM_KERNELS_S(q8_0, mm_q8_0, 1)

QK_DEV float deq_q8_0(const u8* body, u16 d16, u32 e, const u32*) {
    return qk_mul((float)(i8)body[e], qk_h2f(d16));
}
DEQ_KERNEL(q8_0, deq_q8_0, 32, 32, 1)
