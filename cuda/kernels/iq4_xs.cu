// iq4_xs weights x q8_K activations (qkern_formats::reference::iq4_xs).
// - dequantize: ggml-quants.c `dequantize_row_iq4_xs`: dl = d * (ls - 32),
//   y = dl * kvalues_iq4nl[nibble]
// - dot: `ggml_vec_dot_iq4_xs_q8_K` (AVX2): lane L of sub-block ib is the kvalues of the
//   low (L < 4) or high nibbles of qs[16ib + 4(L&3)..+4] times q8, scaled by ls - 32;
//   acc = fma(xd*yd, lane, acc); hsum unscaled.
// Device layout: ggml's 136-byte blocks (d, scales_h, scales_l[4], qs[128]). Word-pair thread
// mapping (mm_common.cuh `MmCtxW`): lanes l and l + 4 read the two nibbles of one qs word.

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV void mm_iq4_xs(const MmArgs& A, const MmCtxW& c, float* res) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, h = c.h;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 136u;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs;
    const float* ad = (const float*)J.a_d;
    u32 kv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) kv[i] = qk_ld((const u32*)A.tab + TAB_IQ4NL + i);
    float acc[4][NTM];
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
        for (int t = 0; t < NTM; ++t) acc[k][t] = 0.0f;
QK_UNROLL(QK_UNROLL_IQ)
    for (u32 b = 0; b < nb; ++b) {
        const u8* blk = w + 136u * b;
        mm_pf<QK_PF_IQ4XS, (NTM == 8)>(blk + 136u * QK_PF_IQ4XS, b, nb, 136u, 2u * c.s + h);
        const u32 hw = ld32(blk);
        const float xd = qk_h2f((u16)(hw & 0xffffu));
        const u32 sh = hw >> 16;
        const u32 sl = ld32(blk + 4);
        i32 isum[4][NTM];
#pragma unroll
        for (int k = 0; k < 4; ++k)
#pragma unroll
            for (int t = 0; t < NTM; ++t) isum[k][t] = 0;
#pragma unroll
        for (int i = 0; i < 8 / S; ++i) {
            const u32 ib = (u32)(i * S) + c.s;
            const i32 ls = (i32)(((sl >> (4u * ib)) & 0xfu) | (((sh >> (2u * ib)) & 3u) << 4)) - 32;
            // blocks are 136 bytes, so every qs word pair is 8-byte aligned
            const uint2 q = ld64(blk + 8u + 16u * ib + 8u * h);
            u32 v[4];  // lanes 2h, 2h + 1 (low nibbles), 2h + 4, 2h + 5 (high nibbles)
            qk_lut16x2(q.x, kv, &v[0], &v[2]);
            qk_lut16x2(q.y, kv, &v[1], &v[3]);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                u32 av[NTM];
                ld_tok<NTM>(aq + (u64)(64u * b + 8u * ib + mm_lane_w(h, k)) * capw, av);
#pragma unroll
                for (int t = 0; t < NTM; ++t) isum[k][t] += ls * qk_dp4a((i32)v[k], (i32)av[t], 0);
            }
        }
        float da[NTM];
        ld_tok_f<NTM>(ad + (u64)b * capw, da);
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            const float dd = qk_mul(xd, da[t]);
#pragma unroll
            for (int k = 0; k < 4; ++k) acc[k][t] = qk_fma(dd, qk_i2f(mm_reduce_w<S>(isum[k][t])), acc[k][t]);
        }
    }
#pragma unroll
    for (int t = 0; t < NTM; ++t) {
        const float x[4] = {acc[0][t], acc[1][t], acc[2][t], acc[3][t]};
        res[t] = mm_hsum_w(x);
    }
}
MM_KERNELS_W(iq4_xs, mm_iq4_xs, 1)
MM_KERNELS_W(iq4_xs, mm_iq4_xs, 4)

QK_DEV float deq_iq4_xs(const u8* blk, u32, u32 e, const u32* tab) {
    const u32 ib = e / 32, j = e % 32;
    const u32 hw = ld32(blk);
    const u32 ls = ((blk[4 + ib / 2] >> (4 * (ib % 2))) & 0xfu) | ((((hw >> 16) >> (2 * ib)) & 3u) << 4);
    const float dl = qk_mul(qk_h2f((u16)(hw & 0xffffu)), (float)((i32)ls - 32));
    const u32 qb = blk[8 + 16 * ib + (j % 16)];
    const u32 n = j < 16 ? (qb & 0xfu) : (qb >> 4);
    return qk_mul(dl, (float)(i8)tab_byte(tab + TAB_IQ4NL, n));
}
DEQ_KERNEL(iq4_xs, deq_iq4_xs, 256, 136, 0)
