// iq2_xs weights x q8_K activations (qkern_formats::reference::iq2_xs).
// - dequantize: ggml-quants.c `dequantize_row_iq2_xs`: db = (d*(0.5+s))*0.25 per 16,
//   y = +-(db * iq2xs_grid[q & 511] byte), signs ksigns_iq2xs[q >> 9]
// - dot: `ggml_vec_dot_iq2_xs_q8_K` (AVX2): lanes 0-3 of sub-block ib take 2*(scales[ib]&15)+1,
//   lanes 4-7 2*(scales[ib]>>4)+1; acc = fma(xd*yd, lane, acc); 0.125 * hsum_float_8(acc).
// Device layout: split (72-byte bodies qs[64] scales[8], then the fp16 d array).

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV float mm_iq2_xs(const MmArgs& A, const MmCtx& c) {
    QK_SHARED u32 grid[1024];
    mm_load_table(grid, A, TAB_IQ2XS, 1024);
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, l = c.l, lp = l >> 1, h = l & 1u;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 72u;
    const u16* wd = (const u16*)J.wd + (u64)c.row * nb;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs + (u64)l * capw;
    const float* ad = (const float*)J.a_d;
    float acc[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) acc[t] = 0.0f;
QK_UNROLL(QK_UNROLL_IQ)
    for (u32 b = 0; b < nb; ++b) {
        const u8* body = w + 72u * b;
        const float xd = qk_h2f(qk_ld(wd + b));
        u32 bw[18];
        ld_body<18, 8>(body, bw);
        i32 isum[NTM];
#pragma unroll
        for (int t = 0; t < NTM; ++t) isum[t] = 0;
#pragma unroll
        for (int ib = 0; ib < 8; ++ib) {
            if ((u32)ib % S != c.s) continue;
            const u32 qw = sel2(bw[2 * ib], bw[2 * ib + 1], lp >> 1);
            const u32 q = (lp & 1u) ? (qw >> 16) : (qw & 0xffffu);
            const u32 g = grid[2u * (q & 511u) + h];
            const u32 bits = (ksigns(q >> 9) >> (4u * h)) & 0xfu;
            const i32 sg = (i32)qk_negate_bytes(g, qk_mask4(bits));
            const u32 scb = wbyte(bw[16 + ib / 4], ib % 4);
            const i32 ls = (i32)(2u * (l < 4 ? (scb & 0xfu) : (scb >> 4)) + 1u);
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
MM_KERNELS_S(iq2_xs, mm_iq2_xs, 1)
MM_KERNELS_S(iq2_xs, mm_iq2_xs, 4)

QK_DEV float deq_iq2_xs(const u8* body, u32 d16, u32 e, const u32* tab) {
    const u32 ib = e / 32, l = (e % 32) / 8, j = e % 8;
    const u32 sc = body[64 + ib];
    const u32 s = l < 2 ? (sc & 0xfu) : (sc >> 4);
    const float db = qk_mul(qk_mul(qk_h2f(d16), qk_add(0.5f, (float)s)), 0.25f);
    const u32 q = ld16(body + 2 * (4 * ib + l));
    const u32 g = tab_byte(tab + TAB_IQ2XS, 8u * (q & 511u) + j);
    const float v = qk_mul(db, (float)g);
    return (ksigns(q >> 9) >> j) & 1u ? -v : v;
}
DEQ_KERNEL(iq2_xs, deq_iq2_xs, 256, 72, 1)
