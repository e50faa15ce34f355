// q5_1 weights x q8_1 activations (qkern_formats::reference::q5_1).
// - dequantize: ggml-quants.c `dequantize_row_q5_1`: y = q*d + m (exact either way)
// - dot: `ggml_vec_dot_q5_1_q8_1` (AVX2): unsigned 5-bit quants times q8_1 bytes,
//   acc = fma(dx*dy, lane, acc); `summs += m*s` (m*s is exact, so fma(m, s, summs) is the
//   same bits) in a separate scalar chain per token, result hsum_float_8(acc) + summs.
// Device layout: ggml's 24-byte blocks (d, m, qh, qs).

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV float mm_q5_1(const MmArgs& A, const MmCtx& c) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, cols = A.cols, l = c.l;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 24u;
    const u8* aq = (const u8*)J.a_qs + 4u * l;
    const float* ad = (const float*)J.a_d;
    const float* as = (const float*)J.a_x + (u64)l * nb;  // s of token l
    const bool own = l < c.nt;
    float acc[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) acc[t] = 0.0f;
    float summs = 0.0f;
    for (u32 b = 0; b < nb; ++b) {
        const u8* blk = w + 24u * b;
        const u32 dm = ld32(blk);
        const float dx = qk_h2f((u16)(dm & 0xffffu));
        const float mx = qk_h2f((u16)(dm >> 16));
        const u32 qh = ld32(blk + 4);
        const u32 qw = ld32(blk + 8 + 4u * (l & 3u));
        const u32 nib = (l < 4 ? qw : qw >> 4) & 0x0f0f0f0fu;
        const i32 q = (i32)(nib | (qk_mask4((qh >> (4u * l)) & 0xfu) & 0x10101010u));
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            if ((u32)t < c.nt) {
                const i32 av = (i32)ld32(aq + (u64)t * cols + 32u * b);
                const float d = qk_mul(dx, qk_ld(ad + (u64)t * nb + b));
                acc[t] = qk_fma(d, qk_i2f_small(qk_dp4a(q, av, 0)), acc[t]);
            }
        }
        if (own) summs = qk_fma(mx, qk_ld(as + b), summs);
    }
    return qk_add(mm_hsum_pick<NTM>(acc, l), summs);
}
MM_KERNELS_S(q5_1, mm_q5_1, 1)

QK_DEV float deq_q5_1(const u8* blk, u16, u32 e, const u32*) {
    const u32 dm = ld32(blk);
    const u32 qh = ld32(blk + 4);
    const u32 nib = e < 16 ? (blk[8 + e] & 0xfu) : (blk[8 + e - 16] >> 4);
    const u32 q = nib | (((qh >> e) & 1u) << 4);
    return qk_add(qk_mul((float)q, qk_h2f((u16)(dm & 0xffffu))), qk_h2f((u16)(dm >> 16)));
}
DEQ_KERNEL(q5_1, deq_q5_1, 32, 24, 0)
