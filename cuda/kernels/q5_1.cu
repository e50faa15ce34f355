// q5_1 weights x q8_1 activations (qkern_formats::reference::q5_1).
// - dequantize: ggml-quants.c `dequantize_row_q5_1`: y = q*d + m (exact either way)
// - dot: `ggml_vec_dot_q5_1_q8_1` (AVX2): unsigned 5-bit quants times q8_1 bytes,
//   acc = fma(dx*dy, lane, acc); `summs += m*s` (m*s is exact, so fma(m, s, summs) is the
//   same bits) in a separate scalar chain per token, result hsum_float_8(acc) + summs.
// Device layout: tiled (layout.rs) ggml 24-byte blocks (d, m, qh, qs). Two threads per row: thread h takes
// the low (h = 0: lanes 0-3) or high (h = 1: lanes 4-7) nibbles of the 16 qs bytes.

#include "mm_common.cuh"

struct UnitQ5_1 {
    static const u32 UNITS_PER_BLOCK = 1;
    // `*m`: the block's fp16 m as f32 (for summs).
    template <int NTM>
    static QK_MEMBER void unit(const MmArgs& A, const MmJob& J, u32 row, u32 b, u32 h, i32 (*isum)[NTM], float* d,
                            float* m) {
        const u32 nb = A.nb, capw = J.capw;
        const u8* blk = (const u8*)J.w + qk_wblk(J.rows, nb, row, b) * 24u;
        const uint2 hd = ld64(blk);  // d, m | qh
        const float dx = qk_h2f((u16)(hd.x & 0xffffu));
        *m = qk_h2f((u16)(hd.x >> 16));
        const uint2 q0 = ld64(blk + 8), q1 = ld64(blk + 16);
        const u32 qw[4] = {q0.x, q0.y, q1.x, q1.y};
        float da[NTM];
        ld_tok_f<NTM>((const float*)J.a_d + (u64)b * capw, da);
        i32 q[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const u32 nib = (h ? qw[i] >> 4 : qw[i]) & 0x0f0f0f0fu;
            q[i] = (i32)(nib | (qk_mask4((hd.y >> (16u * h + 4u * i)) & 0xfu) & 0x10101010u));
        }
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            const uint4 av = ld_aq((const u32*)J.a_qs, 2u * b + h, capw, (u32)t);  // lanes 4h..4h+3
#pragma unroll
            for (int i = 0; i < 4; ++i) isum[i][t] = qk_dp4a(q[i], (i32)q4w(av, i), QK_BIAS);
        }
#pragma unroll
        for (int t = 0; t < NTM; ++t) d[t] = qk_mul(dx, da[t]);
    }
};

template <int NTM>
QK_DEV void mm_q5_1(const MmArgs& A, const MmCtxB& c, float* res) {
    const MmJob& J = A.jobs[c.job];
    const float* as = (const float*)J.a_x;
    float acc[NTM][4], summs[NTM];
    mm_zero<NTM>(acc);
#pragma unroll
    for (int t = 0; t < NTM; ++t) summs[t] = 0.0f;
QK_UNROLL(QK_UNROLL_B5(NTM))
    for (u32 b = 0; b < A.nb; ++b) {
        mm_pf<QK_PF_Q51, (NTM >= 5)>((const u8*)J.w + qk_wblk(J.rows, A.nb, c.row, b + QK_PF_Q51) * 24u, b, A.nb, 24u, c.h);
        i32 isum[4][NTM];
        float d[NTM], m;
        UnitQ5_1::unit<NTM>(A, J, c.row, b, c.h, isum, d, &m);
        mm_chain_b<NTM>(acc, isum, d);
        float sa[NTM];
        ld_tok_f<NTM>(as + (u64)b * J.capw, sa);
#pragma unroll
        for (int t = 0; t < NTM; ++t) summs[t] = qk_fma(m, sa[t], summs[t]);
    }
#pragma unroll
    for (int t = 0; t < NTM; ++t) res[t] = qk_add(mm_hsum_b(acc[t]), summs[t]);
}
MM_KERNELS_B(q5_1, mm_q5_1)
MM_KERNELS_K(q5_1, UnitQ5_1, MmSumms)

QK_DEV float deq_q5_1(const u8* blk, u32, u32 e, const u32*) {
    const u32 dm = ld32(blk);
    const u32 qh = ld32(blk + 4);
    const u32 nib = e < 16 ? (blk[8 + e] & 0xfu) : (blk[8 + e - 16] >> 4);
    const u32 q = nib | (((qh >> e) & 1u) << 4);
    return qk_add(qk_mul((float)q, qk_h2f((u16)(dm & 0xffffu))), qk_h2f((u16)(dm >> 16)));
}
DEQ_KERNEL_T(q5_1, deq_q5_1, 32, 24, 0, 1)
