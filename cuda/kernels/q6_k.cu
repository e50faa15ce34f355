// q6_K weights x q8_K activations (qkern_formats::reference::q6_k).
// - dequantize: ggml-quants.c `dequantize_row_q6_K`: y = (d*sc) * (q - 32)
// - dot: `ggml_vec_dot_q6_K_q8_K` (AVX2): unsigned 6-bit quants (0..63) times q8, scaled by
//   the signed i8 scales (lanes 0-3 of sub-block `is` take scales[2is], lanes 4-7
//   scales[2is+1]); lane -= (bsums[2l]*sc[2l] + bsums[2l+1]*sc[2l+1]) << 5; acc = fma(d, lane,
//   acc).
// Device layout: split (208-byte bodies ql[128] qh[64] scales[16], then the fp16 d array), both
// tiled (layout.rs: block b of a row is block qk_wrow0 + b * qk_wstep, common.cuh).
// Thread mapping (mm_common.cuh MmCtxW, lanes as MM_KERNELS_L4): thread (h, s) owns lanes
// 4h..4h+3 of the sub-blocks is = s, s + S, ... (scale scales[2is + h]), 16-byte loads.

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV void mm_q6_k(const MmArgs& A, const MmCtxW& c) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, h = c.h;
    const u64 w0 = qk_wrow0(nb, c.row);
    const u32 wg = qk_wstep(J.rows, c.row);  // blocks from one of the row's blocks to the next
    const u8* w = (const u8*)J.w + w0 * 208u;
    const u16* wd = (const u16*)J.wd + w0;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs;
    const float* ad = (const float*)J.a_d;
    const i16* bsum = (const i16*)J.a_x;
    float acc[NTM][4];
    mm_zero<NTM>(acc);
QK_UNROLL(QK_UNROLL_KQ(NTM))
    for (u32 b = 0; b < nb; ++b) {
        const u32 k = wg * b;  // blocks from the row's first (one index for body and d)
        const u8* body = w + k * 208u;
        constexpr int PF = QK_PF_DIST(NTM, QK_PF1_Q6K, QK_PF_Q6K, NTM >= 2);
        mm_pf<PF, true>(body + 208u * wg * PF, b, nb, 208u, 2u * c.s + c.h);
        const float xd = qk_h2f(qk_ld(wd + k));
        // This thread's sub-blocks is = s, s + S, ...: ql words (16 bytes: the low nibbles for k < 2,
        // the high ones for k >= 2), qh words, and the scale scales[2is + h] (byte 2 (is & 1) + h
        // of scale word is >> 1).
        const uint4 sc16 = ld128(body + 192u);
        const u32 scv0 = h ? sc16.z : sc16.x, scv1 = h ? sc16.w : sc16.y;  // scales[8h..8h+8]
        uint4 qlv[8 / S], qhv[8 / S];
        i32 sc[8 / S];
#pragma unroll
        for (int k8 = 0; k8 < 8 / S; ++k8) {
            const u32 is = (u32)(k8 * S) + c.s;
            const u32 j = is >> 2, k = is & 3u;
            qlv[k8] = ld128(body + 64u * j + 32u * (k & 1u) + 16u * h);
            qhv[k8] = ld128(body + 128u + 32u * j + 16u * h);
            const u32 wi = is >> 1;
            const u32 sw = wi < 2 ? (wi == 0 ? sc16.x : sc16.y) : (wi == 2 ? sc16.z : sc16.w);
            sc[k8] = (i32)(i8)(u8)(sw >> (16u * (is & 1u) + 8u * h));
        }
        const u8* ab = (const u8*)act_at((const u8*)aq, 64u * b + 4u * h + 8u * c.s, 4u * capw);  // word 4h of sub-block s
        float da[NTM], d[NTM];
        ld_tok_f<NTM>(ad + (u64)b * capw, da);
#pragma unroll
        for (int t = 0; t < NTM; ++t) d[t] = qk_mul(da[t], xd);
        // Lane i's quant word of sub-block slot k8.
        const auto quant = [&](int k8, int i) {
            const u32 k = ((u32)(k8 * S) + c.s) & 3u;
            const u32 qlw = q4w(qlv[k8], i);
            const u32 qhw = q4w(qhv[k8], i);
            return (i32)(((k < 2 ? qlw : qlw >> 4) & 0x0f0f0f0fu) | (((qhw >> (2u * k)) & 0x03030303u) << 4));
        };
        // Quads (QK_Q8K_QUAD): a sub-block at a time, its 4 lanes' q8 words in one load a token,
        // the sums of all 4 lanes kept; the same integers.
        i32 isq[QK_Q8K_QUAD ? 4 : 1][NTM];
        if (QK_Q8K_QUAD) {
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int t = 0; t < NTM; ++t) isq[i][t] = 0;
#pragma unroll
            for (int k8 = 0; k8 < 8 / S; ++k8) {
                const u32 is = (u32)(k8 * S) + c.s;
                u32 av[4][NTM];
                ld_q8k4<NTM>(aq, 16u * b + 2u * is + h, capw, av);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const i32 qq = quant(k8, i);
#pragma unroll
                    for (int t = 0; t < NTM; ++t) isq[i][t] += sc[k8] * qk_dp4a(qq, (i32)av[i][t], 0);
                }
            }
        }
        // One lane at a time (fewer live registers): its sum over the sub-blocks (words; with
        // quads, isq's), minus its q8sclsub (bsums[2l] * scales[2l] + bsums[2l + 1] *
        // scales[2l + 1]) << 5, then its float chain step.
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            i32 isum[NTM];
#pragma unroll
            for (int t = 0; t < NTM; ++t) isum[t] = QK_Q8K_QUAD ? isq[QK_Q8K_QUAD ? i : 0][t] : 0;
#pragma unroll
            for (int k8 = 0; k8 < (QK_Q8K_QUAD ? 0 : 8 / S); ++k8) {
                const u32 is = (u32)(k8 * S) + c.s;
                const i32 qq = quant(k8, i);
                u32 av[NTM];
                if (QK_ACT_AT_Q6K)
                    ld_tok<NTM>(act_at(ab, 8u * (u32)(k8 * S) + (u32)i, 4u * capw), av);
                else
                    ld_tok<NTM>(aq + (u64)(64u * b + 8u * is + 4u * h + (u32)i) * capw, av);
#pragma unroll
                for (int t = 0; t < NTM; ++t) isum[t] += sc[k8] * qk_dp4a(qq, (i32)av[t], 0);
            }
            const u32 scp = i < 2 ? scv0 : scv1;  // scales[2l], scales[2l + 1] in bytes 2 (i & 1), +1
#pragma unroll
            for (int t = 0; t < NTM; ++t) {
                const u32 bw = qk_ld((const u32*)(bsum + ((u64)t * nb + b) * 16u) + 4u * h + (u32)i);
                const i32 sub = (i & 1) ? qk_dp2a_hi((i32)bw, (i32)scp, 0) : qk_dp2a_lo((i32)bw, (i32)scp, 0);
                const i32 v = (i32)((u32)mm_reduce_w<S>(isum[t]) - ((u32)sub << 5));
                acc[t][i] = qk_fma(d[t], qk_i2f(v), acc[t][i]);
            }
        }
    }
    float hs[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) hs[t] = mm_hsum_b(acc[t]);
    if (h == 0 && c.s == 0)
#pragma unroll
        for (int t = 0; t < NTM; ++t) mm_store_t(A, c, (u32)t, hs[t]);
}
MM_KERNELS_L4(q6_k, mm_q6_k, 1)
MM_KERNELS_L4(q6_k, mm_q6_k, 4)

// q6_K on tensor cores (mm_common.cuh "Tensor-core kernels"). Lane L of the AVX2 dot
// is sum_is sc[2 is + (L >= 4)] * dot4(q[is] bytes 4L.., q8) - 32 * corr_L, with q the unsigned
// 6-bit quants and corr_L = bsums[2L] sc[2L] + bsums[2L+1] sc[2L+1] (mm_q6_k). The signed scales
// go through their offset form su = sc + 128 = sum_i 4^i d_i (d_i <= 3, so q * d_i <= 189 fits a
// u8): lane = sum_i 4^i (A_i . B) - 32 * (4 (q . B) + corr_L), the last product started from
// corr_L in its C operand. K layout: thread q holds sub-blocks is_a = 4 (q >> 1) + (q & 1)
// (k = 4q..) and is_b = is_a + 2 (k = 16+4q..), the low and high nibbles of the same ql bytes
// and bits 2k / 2k + 4 of the same qh bytes (k = q & 1). The lane sums can exceed 2^24: converted
// with I2F (round to nearest, as _mm256_cvtepi32_ps).
// LAZY (a budget of 2 CTAs, QK_MINB_MMA_Q6K = 2: 128 registers): the quant words of lanes 4-7
// and the bsums loaded where used, not with the block's other loads, so that ptxas spills 32
// bytes instead of 184 (sm_90 ptxas; session 10 measured (2, 2) at 1869 GB/s NT 8 against
// 1949 for (1, 2) with 184 bytes spilled). With LAZY, 2 CTAs measured 1712 GB/s at NT 8
// against 1524 for 1 CTA (H200, benches/results/2026-12-05-h200-session16 run3), on the
// row-major layout. On the tiled layout 1 CTA without LAZY and without the L2 prefetch
// measured fastest (H100, NT 8: 1847 against 1376 for 2 CTAs, benches/results/
// 2026-12-05-session20 run3), so LAZY is off by default (mm_common.cuh QK_MINB_MMA_Q6K).
template <int PF, bool LAZY>
QK_DEV void mma_q6_k_body(const MmArgs& A) {
    const MmaCtx c = mma_ctx(A);
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, q = c.q, j = q >> 1, k = q & 1u;
    // Tiled (layout.rs): block b of row h is block w0[h] + b * wg[h]. (Kept per row: one base
    // pointer and a row offset, as kq_mma and iq4_xs's kernel take them, measured 5 % slower
    // here, H100, benches/results/2026-12-05-h200-session19 runs 3 and 4: 1343 against 1278 GB/s.)
    const u64 w0[2] = {qk_wrow0(nb, c.row[0]), qk_wrow0(nb, c.row[1])};
    const u32 wg[2] = {qk_wstep(J.rows, c.row[0]), qk_wstep(J.rows, c.row[1])};
    const u8* w[2] = {(const u8*)J.w + w0[0] * 208u, (const u8*)J.w + w0[1] * 208u};
    const u16* wd[2] = {(const u16*)J.wd + w0[0], (const u16*)J.wd + w0[1]};
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs + Q8K_TS * c.acol;  // token column g of B
    const i16* bs = (const i16*)J.a_x;
    const u32* tk = c.tk;
    const i32 cz[4] = {0, 0, 0, 0};
    float acc[4][8];
    mma_zero(acc);
QK_UNROLL(1)
    for (u32 b = 0; b < nb; ++b) {
        u32 ql[2][8], qh[2][8], sw[2][4], su[2][2];  // su[h][a/b]: the offset scales su, byte = half
        const u8* body[2] = {w[0] + (u64)(208u * wg[0]) * b, w[1] + (u64)(208u * wg[1]) * b};
        float xd[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            mm_pf<PF, true>(body[h] + (u64)(208u * wg[h]) * PF, b, nb, 208u, q);
            ld_body<LAZY ? 4 : 8, 16>(body[h] + 64u * j + 32u * k, ql[h]);
            ld_body<LAZY ? 4 : 8, 16>(body[h] + 128u + 32u * j, qh[h]);
            ld_body<4, 16>(body[h] + 192u, sw[h]);
            xd[h] = qk_h2f(qk_ld(wd[h] + (u64)wg[h] * b));
            // scales[2 is + half] of is_a / is_b: byte 2k + half of scale word 2j / 2j + 1; digit
            // i of su at bits 2i of its byte
            su[h][0] = ((j ? sw[h][2] : sw[h][0]) ^ 0x80808080u) >> (16u * k);
            su[h][1] = ((j ? sw[h][3] : sw[h][1]) ^ 0x80808080u) >> (16u * k);
        }
        float d[4];
        mma_cell_d(c, (const float*)J.a_d, capw, b, xd, d);
        // the 16 bsums of tokens 2q, 2q + 1 (bsums[2L], bsums[2L + 1] in word L)
        const u32* bsp[2] = {(const u32*)(bs + ((u64)tk[0] * nb + b) * 16u), (const u32*)(bs + ((u64)tk[1] * nb + b) * 16u)};
        u32 bsw[2][8];
        if (!LAZY)
#pragma unroll
            for (int t = 0; t < 2; ++t) ld_body<8, 16>((const u8*)bsp[t], bsw[t]);
#pragma unroll
        for (int l = 0; l < 8; ++l) {
            if (LAZY && l == 4)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    ld_body<4, 16>(body[h] + 64u * j + 32u * k + 16u, ql[h] + 4);
                    ld_body<4, 16>(body[h] + 128u + 32u * j + 16u, qh[h] + 4);
                }
            const u32 qd = 16u * b + 2u * (4u * j + k) + (u32)(l >> 2), wl = (u32)(l & 3);
            const u32 bv[2] = {qk_ld(q8k_at(aq, qd, wl, capw)),
                               qk_ld(q8k_at(aq, qd + 4u, wl, capw))};
            const int half = l >> 2;
            u32 qa[2], qb[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                qa[h] = (ql[h][l] & 0x0f0f0f0fu) | (((qh[h][l] >> (2u * k)) & 0x03030303u) << 4);
                qb[h] = ((ql[h][l] >> 4) & 0x0f0f0f0fu) | (((qh[h][l] >> (2u * k + 4u)) & 0x03030303u) << 4);
            }
            // corr_L of the 4 cells: C operand of the (4 q) . B product
            i32 corr[4];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const u32 scp = sw[h][l >> 1];
#pragma unroll
                for (int t = 0; t < 2; ++t) {
                    const i32 bw = (i32)(LAZY ? qk_ld(bsp[t] + l) : bsw[t][l]);
                    corr[2 * h + t] = (l & 1) ? qk_dp2a_hi(bw, (i32)scp, 0) : qk_dp2a_lo(bw, (i32)scp, 0);
                }
            }
            i32 tsum[4], y[4];
            {
                const u32 a4[4] = {qa[0] * 4u, qa[1] * 4u, qb[0] * 4u, qb[1] * 4u};
                qk_mma_u8s8(a4, bv, corr, y);
            }
#pragma unroll
            for (int i = 3; i >= 0; --i) {
                u32 ai[4];
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    ai[h] = qa[h] * ((su[h][0] >> (8 * half + 2 * i)) & 3u);
                    ai[2 + h] = qb[h] * ((su[h][1] >> (8 * half + 2 * i)) & 3u);
                }
                i32 ci[4];
                qk_mma_u8s8(ai, bv, i == 3 ? cz : tsum, ci);
#pragma unroll
                for (int x = 0; x < 4; ++x) tsum[x] = i > 0 ? (i32)((u32)ci[x] << 2) : ci[x];
            }
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const i32 v = (i32)((u32)tsum[x] - ((u32)y[x] << 5));
                acc[x][l] = qk_fma(d[x], qk_i2f(v), acc[x][l]);
            }
        }
    }
    mma_finish<false>(A, c, acc, 1.0f);
}
QK_DEV void mma_q6_k(const MmArgs& A) { mma_q6_k_body<QK_PF_MMA_Q6K, (QK_MINB_MMA_Q6K >= 2)>(A); }
MMA_KERNEL(q6_k, mma_q6_k, QK_MINB_MMA_Q6K)

QK_DEV float deq_q6_k(const u8* body, u32 d16, u32 e, const u32*) {
    const u32 n = e / 128, r = e % 128, quarter = r / 32, l = r % 32, is = l / 16;
    const u32 qlb = body[64 * n + l + (quarter & 1u ? 32u : 0u)];
    const u32 qhb = body[128 + 32 * n + l];
    const u32 lo = quarter < 2 ? (qlb & 0xfu) : (qlb >> 4);
    const i32 q = (i32)(lo | (((qhb >> (2 * quarter)) & 3u) << 4)) - 32;
    const i32 sc = (i32)(i8)body[192 + 8 * n + is + 2 * quarter];
    return qk_mul(qk_mul(qk_h2f(d16), (float)sc), (float)q);
}
DEQ_KERNEL_T(q6_k, deq_q6_k, 256, 208, 1, 1)
