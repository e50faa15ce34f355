// iq3_xxs weights x q8_K activations (qkern_formats::reference::iq3_xxs).
// - dequantize: ggml-quants.c `dequantize_row_iq3_xxs`: db = (d*(0.5+ls))*0.5,
//   y = (db * grid byte) * (+-1)
// - dot: `ggml_vec_dot_iq3_xxs_q8_K` (AVX2): lane L of sub-block ib is grid entry
//   qs[8ib+L] (4 bytes), signed by keven_signs[(aux >> 7(L>>1)) & 127], scaled 2*ls+1;
//   acc = fma(xd*yd, lane, acc); 0.25 * hsum_float_8(acc).
// Device layout: split (96-byte bodies qs[64] scales_and_signs[32], then the fp16 d array).

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV float mm_iq3_xxs(const MmArgs& A, const MmCtx& c) {
    QK_SHARED u32 grid[256];
    mm_load_table(grid, A, TAB_IQ3XXS, 256);
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, l = c.l;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 96u;
    const u16* wd = (const u16*)J.wd + (u64)c.row * nb;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs + (u64)l * capw;
    const float* ad = (const float*)J.a_d;
    float acc[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) acc[t] = 0.0f;
QK_UNROLL(QK_UNROLL_IQ)
    for (u32 b = 0; b < nb; ++b) {
        const u8* body = w + 96u * b;
        const float xd = qk_h2f(qk_ld(wd + b));
        u32 bw[24];
        ld_body<24, 16>(body, bw);
        i32 isum[NTM];
#pragma unroll
        for (int t = 0; t < NTM; ++t) isum[t] = 0;
#pragma unroll
        for (int ib = 0; ib < 8; ++ib) {
            if ((u32)ib % S != c.s) continue;
            const u32 aux = bw[16 + ib];
            const u32 g = grid[wbyte(sel2(bw[2 * ib], bw[2 * ib + 1], l >> 2), l & 3u)];
            const u32 bits = (ksigns((aux >> (7u * (l >> 1))) & 127u) >> (4u * (l & 1u))) & 0xfu;
            const i32 sg = (i32)qk_negate_bytes(g, qk_mask4(bits));
            const i32 ls = (i32)(2u * (aux >> 28) + 1u);
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
    return qk_mul(0.25f, mm_hsum_pick<NTM>(acc, l));
}
MM_KERNELS_S(iq3_xxs, mm_iq3_xxs, 1)
MM_KERNELS_S(iq3_xxs, mm_iq3_xxs, 4)

QK_DEV float deq_iq3_xxs(const u8* body, u32 d16, u32 e, const u32* tab) {
    const u32 ib = e / 32, l = (e % 32) / 8, j = e % 8;
    const u32 aux = ld32(body + 64 + 4 * ib);
    const float db = qk_mul(qk_mul(qk_h2f(d16), qk_add(0.5f, (float)(aux >> 28))), 0.5f);
    const u32 gi = body[8 * ib + 2 * l + (j < 4 ? 0 : 1)];
    const u32 g = tab_byte(tab + TAB_IQ3XXS, 4u * gi + (j & 3u));
    const float v = qk_mul(db, (float)g);
    return (ksigns((aux >> (7 * l)) & 127u) >> j) & 1u ? -v : v;
}
DEQ_KERNEL(iq3_xxs, deq_iq3_xxs, 256, 96, 1)
