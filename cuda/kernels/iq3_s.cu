// iq3_s weights x q8_K activations (qkern_formats::reference::iq3_s).
// - dequantize: ggml-quants.c `dequantize_row_iq3_s`: db = d * (1 + 2ls),
//   y = (db * grid byte) * (+-1)
// - dot: `ggml_vec_dot_iq3_s_q8_K` (AVX2): lane L of sub-block ib is grid entry
//   qs[8ib+L] | ((qh[ib] << (8-L)) & 256), signed by bits 4(L&1).. of signs[4ib + L/2]
//   ((s ^ q8) - s, a negation), scaled 2*ls+1; acc = fma(xd*yd, lane, acc); hsum unscaled.
// Device layout: split (108-byte bodies qs[64] qh[8] signs[32] scales[4], then the d array).

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV float mm_iq3_s(const MmArgs& A, const MmCtx& c) {
    QK_SHARED u32 grid[512];
    mm_load_table(grid, A, TAB_IQ3S, 512);
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, l = c.l;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 108u;
    const u16* wd = (const u16*)J.wd + (u64)c.row * nb;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs + (u64)l * capw;
    const float* ad = (const float*)J.a_d;
    float acc[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) acc[t] = 0.0f;
QK_UNROLL(QK_UNROLL_IQ)
    for (u32 b = 0; b < nb; ++b) {
        const u8* body = w + 108u * b;
        const float xd = qk_h2f(qk_ld(wd + b));
        u32 bw[27];
        ld_body<27, 4>(body, bw);
        i32 isum[NTM];
#pragma unroll
        for (int t = 0; t < NTM; ++t) isum[t] = 0;
#pragma unroll
        for (int ib = 0; ib < 8; ++ib) {
            if ((u32)ib % S != c.s) continue;
            const u32 idx = ((wbyte(bw[16 + ib / 4], ib % 4) << (8u - l)) & 256u) |
                            wbyte(sel2(bw[2 * ib], bw[2 * ib + 1], l >> 2), l & 3u);
            const u32 g = grid[idx];
            const u32 bits = (wbyte(bw[18 + ib], l >> 1) >> (4u * (l & 1u))) & 0xfu;
            const i32 sg = (i32)qk_negate_bytes(g, qk_mask4(bits));
            const u32 scb = wbyte(bw[26], ib / 2);
            const i32 ls = (i32)(2u * ((ib & 1) ? (scb >> 4) : (scb & 0xfu)) + 1u);
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
    return mm_hsum_pick<NTM>(acc, l);
}
MM_KERNELS_S(iq3_s, mm_iq3_s, 1)
MM_KERNELS_S(iq3_s, mm_iq3_s, 4)

QK_DEV float deq_iq3_s(const u8* body, u32 d16, u32 e, const u32* tab) {
    const u32 ib = e / 32, l = (e % 32) / 8, j = e % 8;
    const u32 sc = body[104 + ib / 2];
    const u32 ls = (ib & 1u) ? (sc >> 4) : (sc & 0xfu);
    const float db = qk_mul(qk_h2f(d16), (float)(1 + 2 * (i32)ls));
    const u32 qh = body[64 + ib];
    const u32 k = 2 * l + (j < 4 ? 0 : 1);
    const u32 idx = (u32)body[8 * ib + k] | ((qh << (8 - k)) & 256u);
    const u32 g = tab_byte(tab + TAB_IQ3S, 4u * idx + (j & 3u));
    const float v = qk_mul(db, (float)g);
    return ((u32)body[72 + 4 * ib + l] >> j) & 1u ? -v : v;
}
DEQ_KERNEL(iq3_s, deq_iq3_s, 256, 108, 1)
