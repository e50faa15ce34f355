// iq3_xxs weights x q8_K activations (qkern_formats::reference::iq3_xxs).
// - dequantize: ggml-quants.c `dequantize_row_iq3_xxs`: db = (d*(0.5+ls))*0.5,
//   y = (db * grid byte) * (+-1)
// - dot: `ggml_vec_dot_iq3_xxs_q8_K` (AVX2): lane L of sub-block ib is grid entry
//   qs[8ib+L] (4 bytes), signed by keven_signs[(aux >> 7(L>>1)) & 127], scaled 2*ls+1;
//   acc = fma(xd*yd, lane, acc); 0.25 * hsum_float_8(acc).
// Device layout: split (96-byte bodies qs[64] aux[32], then the fp16 d array). Thread mapping
// MM_KERNELS_L4 (mm_common.cuh): thread (h, s) owns lanes 4h..4h+3 of the sub-blocks
// ib = s, s + S, ...: the grid bytes of qs word 2ib + h.

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV void mm_iq3_xxs(const MmArgs& A, const MmCtxW& c) {
    QK_SHARED u32 grid[256];
    mm_load_table(grid, A, TAB_IQ3XXS, 256);
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, h = c.h;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 96u;
    const u16* wd = (const u16*)J.wd + (u64)c.row * nb;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs;
    const float* ad = (const float*)J.a_d;
    float acc[NTM][4];
    mm_zero<NTM>(acc);
QK_UNROLL(QK_UNROLL_P4)
    for (u32 b = 0; b < nb; ++b) {
        const u8* body = w + 96u * b;
        const float xd = qk_h2f(qk_ld(wd + b));
        // S = 1: the whole body in registers; S = 4: the words loaded where needed.
        u32 bw[S == 1 ? 24 : 1];
        if (S == 1) ld_body<S == 1 ? 24 : 1, 16>(body, bw);
        const auto W = [&](u32 k) { return S == 1 ? bw[k] : ld32(body + 4u * k); };
        i32 isum[4][NTM];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int t = 0; t < NTM; ++t) isum[i][t] = 0;
#pragma unroll
        for (int k = 0; k < 8 / S; ++k) {
            const u32 ib = (u32)(k * S) + c.s;
            const u32 qsw = S == 1 ? sel2(W(2u * ib), W(2u * ib + 1u), h) : ld32(body + 8u * ib + 4u * h);
            const u32 aux = W(16u + ib);
            const i32 ls = (i32)(2u * (aux >> 28) + 1u);
            i32 sg[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const u32 g = grid[wbyte(qsw, (u32)i)];
                const u32 bits = (ksigns((aux >> (7u * (2u * h + (u32)(i >> 1)))) & 127u) >> (4 * (i & 1))) & 0xfu;
                sg[i] = (i32)qk_negate_bytes(g, qk_mask4(bits));
            }
            mm_l4_dot<NTM>(isum, sg, ls, aq, capw, b, ib, h);
        }
        mm_l4_chain<NTM, S>(acc, isum, xd, ad, capw, b);
    }
    mm_l4_finish<NTM, true>(A, c, acc, 0.25f);
}
MM_KERNELS_L4(iq3_xxs, mm_iq3_xxs, 1)
MM_KERNELS_L4(iq3_xxs, mm_iq3_xxs, 4)

// iq3_xxs on tensor cores (mm_common.cuh "Tensor-core kernels", iq_mma_lane): grid bytes <= 62, so
// base-5 digits (3 of them cover 2 ls + 1 <= 31). Thread q holds sub-blocks q (k = 4q..) and
// q + 4 (k = 16+4q..); lane L is grid entry qs[8 ib + L] with bits 4 (L & 1).. of sign group L >> 1.
template <int PF>
QK_DEV void mma_iq3_xxs_body(const MmArgs& A) {
    QK_SHARED u32 grid[256];
    mm_load_table(grid, A, TAB_IQ3XXS, 256);
    const MmaCtx c = mma_ctx(A);
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, q = c.q;
    const u8* w[2] = {(const u8*)J.w + (u64)c.row[0] * nb * 96u, (const u8*)J.w + (u64)c.row[1] * nb * 96u};
    const u16* wd[2] = {(const u16*)J.wd + (u64)c.row[0] * nb, (const u16*)J.wd + (u64)c.row[1] * nb};
    const u32 capw = J.capw, last = c.nt - 1u;
    const u32* aq = (const u32*)J.a_qs + (c.g < last ? c.g : last);  // token column g of B
    const float* ad = (const float*)J.a_d;
    const u32 tk[2] = {2u * q < last ? 2u * q : last, 2u * q + 1u < last ? 2u * q + 1u : last};
    float acc[4][8];
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int l = 0; l < 8; ++l) acc[x][l] = 0.0f;
QK_UNROLL(1)
    for (u32 b = 0; b < nb; ++b) {
        u32 qs[4][2], aux[4], sc[4];  // slot k = 2 * (K half) + row half: sub-block q + 4 (k >> 1)
        float xd[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u8* body = w[h] + 96u * b;
            mm_pf<PF, true>(body + 96u * PF, b, nb, 96u, q);
            xd[h] = qk_h2f(qk_ld(wd[h] + b));
#pragma unroll
            for (int kh = 0; kh < 2; ++kh) {
                const u32 ib = q + 4u * (u32)kh, k = 2 * kh + h;
                const uint2 e = ld64(body + 8u * ib);
                qs[k][0] = e.x;
                qs[k][1] = e.y;
                aux[k] = ld32(body + 64u + 4u * ib);
                sc[k] = 2u * (aux[k] >> 28) + 1u;
            }
        }
        u32 dg[3][4];
        iq_digits<5, 3>(sc, dg);
        float d[4];
#pragma unroll
        for (int t = 0; t < 2; ++t) {
            const float da = qk_ld(ad + (u64)b * capw + tk[t]);
#pragma unroll
            for (int h = 0; h < 2; ++h) d[2 * h + t] = qk_mul(xd[h], da);
        }
        const u32* ab = aq + (u64)(64u * b + 8u * q) * capw;  // q8 words of sub-block q (+32 words: q + 4)
#pragma unroll
        for (int l = 0; l < 8; ++l) {
            const u32 bv[2] = {qk_ld(ab + (u64)l * capw), qk_ld(ab + (u64)(32 + l) * capw)};
            u32 v[4], m[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                v[k] = grid[wbyte(qs[k][l >> 2], (u32)(l & 3))];
                m[k] = qk_mask4((ksigns((aux[k] >> (7 * (l >> 1))) & 127u) >> (4 * (l & 1))) & 0xfu);
            }
            i32 lane[4];
            iq_mma_lane<5, 3>(v, m, dg, bv, lane);
#pragma unroll
            for (int x = 0; x < 4; ++x) acc[x][l] = qk_fma(d[x], qk_i2f(lane[x]), acc[x][l]);
        }
    }
#pragma unroll
    for (int x = 0; x < 4; ++x) mma_store(A, c, x, qk_mul(0.25f, mma_hsum8(acc[x])));
}
QK_DEV void mma_iq3_xxs(const MmArgs& A) { mma_iq3_xxs_body<QK_PF_MMA_IQ>(A); }
MMA_KERNEL(iq3_xxs, mma_iq3_xxs, QK_MINB_MMA_IQ)

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
