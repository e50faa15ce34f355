// iq2_xxs weights x q8_K activations (qkern_formats::reference::iq2_xxs).
// - dequantize: ggml-quants.c `dequantize_row_iq2_xxs`: db = (d*(0.5+ls))*0.25,
//   y = +-(db * grid byte)
// - dot: `ggml_vec_dot_iq2_xxs_q8_K` (AVX2): lane L of sub-block ib covers bytes 4(L&1)..+4
//   of grid entry L>>1, signed by keven_signs (ksigns with parity) and scaled by 2*ls+1;
//   acc = fma(xd*yd, lane, acc); result 0.125 * hsum_float_8(acc). The signs are applied to
//   the grid bytes instead of the q8 bytes: the same products for any activation but -128.
// Device layout: split (64-byte bodies, then the fp16 d array).

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV float mm_iq2_xxs(const MmArgs& A, const MmCtx& c) {
    QK_SHARED u32 grid[512];
    mm_load_table(grid, A, TAB_IQ2XXS, 512);
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, l = c.l, lp = l >> 1, h = l & 1u;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 64u;
    const u16* wd = (const u16*)J.wd + (u64)c.row * nb;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs + (u64)l * capw;
    const float* ad = (const float*)J.a_d;
    float acc[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) acc[t] = 0.0f;
QK_UNROLL(QK_UNROLL_IQ)
    for (u32 b = 0; b < nb; ++b) {
        const u8* body = w + 64u * b;
        const float xd = qk_h2f(qk_ld(wd + b));
        u32 bw[16];
        ld_body<16, 16>(body, bw);
        i32 isum[NTM];
#pragma unroll
        for (int t = 0; t < NTM; ++t) isum[t] = 0;
#pragma unroll
        for (int ib = 0; ib < 8; ++ib) {
            if ((u32)ib % S != c.s) continue;
            const u32 a0 = bw[2 * ib], a1 = bw[2 * ib + 1];
            const u32 g = grid[2u * ((a0 >> (8u * lp)) & 0xffu) + h];
            const u32 bits = (ksigns((a1 >> (7u * lp)) & 127u) >> (4u * h)) & 0xfu;
            const i32 sg = (i32)qk_negate_bytes(g, qk_mask4(bits));
            const i32 ls = (i32)(2u * (a1 >> 28) + 1u);
u32 av[NTM];
            ld_tok<NTM>(aq + (u64)(64u * b + 8u * ib) * capw, av);
#pragma unroll
            for (int t = 0; t < NTM; ++t) isum[t] += ls * qk_dp4a(sg, (i32)av[t], 0);
        }
float da[NTM];
        ld_tok_f<NTM>(ad + (u64)b * capw, da);
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            const i32 v = mm_reduce<S>(isum[t]);
            acc[t] = qk_fma(qk_mul(xd, da[t]), qk_i2f(v), acc[t]);
        }
    }
    return qk_mul(0.125f, mm_hsum_pick<NTM>(acc, l));
}
MM_KERNELS_S(iq2_xxs, mm_iq2_xxs, 1)
MM_KERNELS_S(iq2_xxs, mm_iq2_xxs, 4)

QK_DEV float deq_iq2_xxs(const u8* body, u32 d16, u32 e, const u32* tab) {
    const u32 ib = e / 32, l = (e % 32) / 8, j = e % 8;
    const u32 a0 = ld32(body + 8 * ib), a1 = ld32(body + 8 * ib + 4);
    const float db = qk_mul(qk_mul(qk_h2f(d16), qk_add(0.5f, (float)(a1 >> 28))), 0.25f);
    const u32 g = tab_byte(tab + TAB_IQ2XXS, 8u * ((a0 >> (8 * l)) & 0xffu) + j);
    const float v = qk_mul(db, (float)g);
    return (ksigns((a1 >> (7 * l)) & 127u) >> j) & 1u ? -v : v;
}
DEQ_KERNEL(iq2_xxs, deq_iq2_xxs, 256, 64, 1)
