// iq4_xs weights x q8_K activations (qkern_formats::reference::iq4_xs).
// - dequantize: ggml-quants.c `dequantize_row_iq4_xs`: dl = d * (ls - 32),
//   y = dl * kvalues_iq4nl[nibble]
// - dot: `ggml_vec_dot_iq4_xs_q8_K` (AVX2): lane L of sub-block ib is the kvalues of the
//   low (L < 4) or high nibbles of qs[16ib + 4(L&3)..+4] times q8, scaled by ls - 32;
//   acc = fma(xd*yd, lane, acc); hsum unscaled.
// Device layout: ggml's 136-byte blocks (d, scales_h, scales_l[4], qs[128]), tiled (layout.rs:
// block b of a row at qk_wrow0 + b * qk_wstep, common.cuh), each sub-block's 16 qs bytes with
// their nibbles in element order (layout.rs `nibble_seq`): qs word k is lanes 2k, 2k + 1, looked
// up without separating low and high nibbles (qk_lut16x2n). Thread mapping (mm_common.cuh
// `MmCtxW`): thread h owns lanes 4h..4h+3 of its sub-blocks, 8 contiguous qs bytes and 4
// consecutive q8 words (one 16-byte load a token with the q8_K quads); hsum as mm_hsum_b.

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV void mm_iq4_xs(const MmArgs& A, const MmCtxW& c, float* res) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, h = c.h;
    const u8* w = (const u8*)J.w + qk_wrow0(nb, c.row) * 136u;
    const u32 ws = qk_wstep(J.rows, c.row) * 136u;  // bytes from one of the row's blocks to the next
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
        const u8* blk = w + ws * b;
        constexpr int PF = QK_PF_DIST(NTM, QK_PF1_IQ4XS, QK_PF_IQ4XS, NTM == 8);
        mm_pf<PF, true>(blk + ws * PF, b, nb, 136u, 2u * c.s + h);
        const u32 hw = ld32(blk);
        const float xd = qk_h2f((u16)(hw & 0xffffu));
        const u32 sh = hw >> 16;
        const u32 sl = ld32(blk + 4);
        i32 isum[4][NTM];
#pragma unroll
        for (int k = 0; k < 4; ++k)
#pragma unroll
            for (int t = 0; t < NTM; ++t) isum[k][t] = 0;
        const u8* ab = (const u8*)act_at((const u8*)aq, 64u * b + 8u * c.s + 4u * h, 4u * capw);  // word 4h of sub-block s
#pragma unroll
        for (int i = 0; i < 8 / S; ++i) {
            const u32 ib = (u32)(i * S) + c.s;
            const i32 ls = (i32)(((sl >> (4u * ib)) & 0xfu) | (((sh >> (2u * ib)) & 3u) << 4)) - 32;
            // blocks are 136 bytes, so every qs word pair is 8-byte aligned; in element order
            // (layout.rs nibble_seq) bytes 8h..8h+8 of the sub-block are lanes 4h..4h+3
            const uint2 q = ld64(blk + 8u + 16u * ib + 8u * h);
            u32 v[4];  // lanes 4h..4h+3
            qk_lut16x2n(q.x, kv, &v[0], &v[1]);
            qk_lut16x2n(q.y, kv, &v[2], &v[3]);
            u32 av[4][NTM];
            if (QK_Q8K_QUAD) {
                ld_q8k4<NTM>(aq, 16u * b + 2u * ib + h, capw, av);
            } else {
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    if (QK_ACT_AT_IQ4XS)
                        ld_tok<NTM>(act_at(ab, 8u * (u32)(i * S) + (u32)k, 4u * capw), av[k]);
                    else
                        ld_tok<NTM>(aq + (u64)(64u * b + 8u * ib + 4u * h + (u32)k) * capw, av[k]);
                }
            }
#pragma unroll
            for (int k = 0; k < 4; ++k)
#pragma unroll
                for (int t = 0; t < NTM; ++t) isum[k][t] += ls * qk_dp4a((i32)v[k], (i32)av[k][t], 0);
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
        res[t] = mm_hsum_b(x);
    }
}
MM_KERNELS_W(iq4_xs, mm_iq4_xs, 1)
MM_KERNELS_W(iq4_xs, mm_iq4_xs, 4)

// iq4_xs on tensor cores (mm_common.cuh "Tensor-core kernels"), two products a lane: A holds
// the bytes of p = v * (ls - 32) (v the signed kvalue, ls the 6-bit scale), split as
// p = 128 hi + lo with lo = p & 127 (0..127) and hi = p >> 7 (-32..31), both signed bytes:
// lane = (hi . B) << 7 + lo . B, exact (|p| <= 4064, so |lane| <= 32 * 4064 * 127 < 2^31;
// above 2^24, so converted with I2F, round to nearest, as _mm256_cvtepi32_ps). The 16 products
// of each scale come from two tables in shared memory (64 scales x 16 bytes each, built once
// per CTA), so a slot's A words are the kvalue lookup (qk_lut16x2n) of its nibbles in its
// scale's lo and hi tables. K layout: thread q holds sub-blocks q (k = 4q..) and q + 4
// (k = 16+4q..); lanes 2j and 2j + 1 are nibbles 0-3 and 4-7 of qs word 4 ib + j (element order).
// (Session 13's kernel took the scale bit by bit, seven products a lane: 1158 against 1554
// GB/s on the H100, benches/results/2026-12-05-h100-session15 run1.)
template <int PF>
QK_DEV void mma_iq4_xs_body(const MmArgs& A) {
    QK_SHARED16 u32 tlo[64 * 4];
    QK_SHARED16 u32 thi[64 * 4];
    for (u32 e = qk_tid(); e < 64u * 4u; e += qk_bdim()) {  // word e: products 4 (e % 4) .. + 3 of scale e / 4
        u32 wl = 0, wh = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const u32 n = 4u * (e & 3u) + (u32)k;
            const i32 v = (i32)(i8)((qk_ld((const u32*)A.tab + TAB_IQ4NL + n / 4u) >> (8u * (n % 4u))) & 0xffu);
            const i32 p = v * ((i32)(e >> 2) - 32);
            wl |= ((u32)p & 127u) << (8 * k);
            wh |= ((u32)(p >> 7) & 0xffu) << (8 * k);
        }
        tlo[e] = wl;
        thi[e] = wh;
    }
    qk_sync();
    const MmaCtx c = mma_ctx(A);
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, q = c.q;
    // Tiled (layout.rs): the rows g and g + 8 of the warp's 16 (or the last row, for either past
    // it) are in one tile, so block b of row h is at w + b * ws + o[h], o = {0, o1}: one base
    // pointer, not one per row.
    const u64 w0 = qk_wrow0(nb, c.row[0]);
    const u8* w = (const u8*)J.w + w0 * 136u;
    const u32 ws = qk_wstep(J.rows, c.row[0]) * 136u, o1 = (u32)(qk_wrow0(nb, c.row[1]) - w0) * 136u;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs + Q8K_TS * c.acol;  // token column g of B
    const i32 cz[4] = {0, 0, 0, 0};
    float acc[4][8];
    mma_zero(acc);
QK_UNROLL(1)
    for (u32 b = 0; b < nb; ++b) {
        u32 qw[4][4], tl[4][4], th[4][4];  // slot k = 2 * (K half) + row half: sub-block q + 4 (k >> 1)
        float xd[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u8* blk = w + (ws * b + (h ? o1 : 0u));
            mm_pf<PF, true>(blk + ws * PF, b, nb, 136u, q);
            const u32 hw = ld32(blk), sl = ld32(blk + 4u);
            xd[h] = qk_h2f((u16)(hw & 0xffffu));
#pragma unroll
            for (int kh = 0; kh < 2; ++kh) {
                const u32 ib = q + 4u * (u32)kh, k = 2 * kh + h;
                const u32 su = ((sl >> (4u * ib)) & 0xfu) | (((hw >> (16u + 2u * ib)) & 3u) << 4);
                const uint4 lo = *(const uint4*)(tlo + 4u * su), hi = *(const uint4*)(thi + 4u * su);
                tl[k][0] = lo.x, tl[k][1] = lo.y, tl[k][2] = lo.z, tl[k][3] = lo.w;
                th[k][0] = hi.x, th[k][1] = hi.y, th[k][2] = hi.z, th[k][3] = hi.w;
                const uint2 q0 = ld64(blk + 8u + 16u * ib), q1 = ld64(blk + 16u + 16u * ib);
                qw[k][0] = q0.x, qw[k][1] = q0.y, qw[k][2] = q1.x, qw[k][3] = q1.y;
            }
        }
        float d[4];
        mma_cell_d(c, (const float*)J.a_d, capw, b, xd, d);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            u32 al[2][4], ah[2][4];  // [lane 2j / 2j + 1][slot]
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                qk_lut16x2n(qw[k][j], tl[k], &al[0][k], &al[1][k]);
                qk_lut16x2n(qw[k][j], th[k], &ah[0][k], &ah[1][k]);
            }
#pragma unroll
            for (int o = 0; o < 2; ++o) {
                const int l = 2 * j + o;
                const u32 qd = 16u * b + 2u * q + (u32)(l >> 2), wl = (u32)(l & 3);
                const u32 bv[2] = {qk_ld(q8k_at(aq, qd, wl, capw)),
                                   qk_ld(q8k_at(aq, qd + 8u, wl, capw))};
                i32 t[4];
                qk_mma_s8s8(ah[o], bv, cz, t);
#pragma unroll
                for (int x = 0; x < 4; ++x) t[x] = (i32)((u32)t[x] << 7);
                qk_mma_s8s8(al[o], bv, t, t);
#pragma unroll
                for (int x = 0; x < 4; ++x) acc[x][l] = qk_fma(d[x], qk_i2f(t[x]), acc[x][l]);
            }
        }
    }
    mma_finish<false>(A, c, acc, 1.0f);
}

QK_DEV void mma_iq4_xs(const MmArgs& A) { mma_iq4_xs_body<QK_PF_MMA_IQ4XS>(A); }
MMA_KERNEL(iq4_xs, mma_iq4_xs, QK_MINB_MMA_IQ4XS)

QK_DEV float deq_iq4_xs(const u8* blk, u32, u32 e, const u32* tab) {
    const u32 ib = e / 32, j = e % 32;
    const u32 hw = ld32(blk);
    const u32 ls = ((blk[4 + ib / 2] >> (4 * (ib % 2))) & 0xfu) | ((((hw >> 16) >> (2 * ib)) & 3u) << 4);
    const float dl = qk_mul(qk_h2f((u16)(hw & 0xffffu)), (float)((i32)ls - 32));
    const u32 n = (blk[8 + 16 * ib + j / 2] >> (4 * (j % 2))) & 0xfu;  // element order (nibble_seq)
    return qk_mul(dl, (float)(i8)tab_byte(tab + TAB_IQ4NL, n));
}
DEQ_KERNEL_T(iq4_xs, deq_iq4_xs, 256, 136, 0, 1)
