// q4_K weights x q8_K activations (qkern_formats::reference::q4_k).
// - dequantize: ggml-quants.c `dequantize_row_q4_K`: y = (d*sc)*q - (dmin*m), unfused
// - dot: `ggml_vec_dot_q4_K_q8_K` (AVX2): lane l of a super-block sums, over the 8
//   sub-blocks, scale * (4 products); acc = fma(yd*xd, lane, acc); the mins go into a 4-lane
//   chain acc_m = fma(-yd*xdmin, prod, acc_m) (prod from the q8_K bsums), reduced
//   (m0+m2)+(m1+m3) and added after hsum_float_8.
// Device layout: ggml's 144-byte blocks (d, dmin, scales[12], qs[128]), tiled (layout.rs: block b
// of a row at qk_wrow0 + b * qk_wstep, common.cuh). Thread mapping: MM_KERNELS_L4
// (mm_common.cuh): 2 * S threads per row, thread (h, s) owns lanes 4h..4h+3 of the sub-block
// pairs j = s, s + S, ... (one 16-byte qs load each) and the mins chain of tokens 2s + h mod 2S.

#include "kquants.cuh"

template <int NTM, int S>
QK_DEV void mm_q4_k(const MmArgs& A, const MmCtxW& c) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, h = c.h, q = 2u * c.s + h;
    const u8* w = (const u8*)J.w + qk_wrow0(nb, c.row) * 144u;
    const u32 ws = qk_wstep(J.rows, c.row) * 144u;  // bytes from one of the row's blocks to the next
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs;
    const float* ad = (const float*)J.a_d;
    const i16* bs = (const i16*)J.a_x;
    constexpr int KM = (NTM + 2 * S - 1) / (2 * S);  // mins chains per thread
    float acc[NTM][4], accm[KM][4];
    mm_zero<NTM>(acc);
    mm_zero<KM>(accm);
QK_UNROLL(QK_UNROLL_KQ(NTM))
    for (u32 b = 0; b < nb; ++b) {
        const u8* blk = w + ws * b;
        constexpr int PF = QK_PF_DIST(NTM, QK_PF1_Q4K, QK_PF_Q4K, NTM >= 2);
        mm_pf<PF, true>(blk + ws * PF, b, nb, 144u, q);
        const uint4 hdr = ld128(blk);  // d, dmin | scales[12]
        const float xd = qk_h2f((u16)(hdr.x & 0xffffu)), xdmin = qk_h2f((u16)(hdr.x >> 16));
        u32 u0, u1, u2, u3;
        kq_unpack(hdr.y, hdr.z, hdr.w, &u0, &u1, &u2, &u3);
        kq_lanes<NTM, S, false>(acc, blk + 16u, uint4(), u0, u1, xd, ad, aq, capw, b, h, c.s);  // no qh
#pragma unroll
        for (int k = 0; k < KM; ++k) {
            const u32 t = (u32)(k * 2 * S) + q;
            if (t < c.nt) {
                const float dmin = qk_mul(-qk_ld(ad + (u64)b * capw + t), xdmin);
                i32 prod[4];
                kq_mins_prod(bs + ((u64)t * nb + b) * 16u, u2, u3, prod);
#pragma unroll
                for (int m = 0; m < 4; ++m) accm[k][m] = qk_fma(dmin, qk_i2f(prod[m]), accm[k][m]);
            }
        }
    }
    float hs[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) hs[t] = mm_hsum_b(acc[t]);
#pragma unroll
    for (int k = 0; k < KM; ++k) {
        const u32 t = (u32)(k * 2 * S) + q;
        const float m = qk_add(qk_add(accm[k][0], accm[k][2]), qk_add(accm[k][1], accm[k][3]));
        mm_store_t(A, c, t, qk_add(mm_pick<NTM>(hs, t), m));
    }
}
MM_KERNELS_L4(q4_k, mm_q4_k, 1)
MM_KERNELS_L4(q4_k, mm_q4_k, 4)
QK_DEV void mma_q4_k(const MmArgs& A) { kq_mma<false, QK_PF_MMA_Q4K>(A); }
MMA_KERNEL(q4_k, mma_q4_k, QK_MINB_MMA_Q4K)

// Two-phase kernel for small launches with few super-blocks per row (a MoE expert's gate or up
// projection, e.g. 640 x 2560: 10 blocks): the lane kernels give each row's blocks to one thread
// group in sequence (Nsight Compute, H200 session 13: 160 warps of 3300 dependent instructions,
// 3 % occupancy). Phase 1 spreads every (block, row, half, sub-block pair) of MMK_R rows over the
// CTA's threads at once: the integer lane sums of one pair, summed over the 4 pairs by shuffles
// (adjacent lanes), the chain factors d_t = yd * xd and -yd * xdmin, and the mins products, into
// shared memory; phase 2 gives each (row, token, lane) chain to one thread, which runs
// kq_lanes' chain acc = fma(d_t, lane, acc) over the blocks in order, then hsum_float_8 by
// shuffles; lanes 0-3 of the group also run the 4-lane mins chain (m0 + m2) + (m1 + m3), as
// mm_q4_k. The lane sums are exact integers below 2^22, so their conversion is any exact one.
#define KQK_BMAX 16
// QK_MMK_KSPREAD (on; 0: as before session 35): phase 1's chain factors and mins products spread
// over the threads by token (see the body).
#ifndef QK_MMK_KSPREAD
#define QK_MMK_KSPREAD 1
#endif
// The shared arrays' rows (r) padded by 4 words (1 for D, DM) so that the 8 storing threads of a
// warp (row x half) do not collide in the banks (as MmkPad).
template <int NTM>
struct KqkPad {
    static constexpr u32 XR = KQK_BMAX * 8u * NTM + 4u, PR = KQK_BMAX * NTM * 4u + 4u, DR = KQK_BMAX * NTM + 1u;
    static QK_MEMBER u32 x(u32 r, u32 b, u32 lane, u32 t) { return r * XR + (b * 8u + lane) * NTM + t; }
    static QK_MEMBER u32 p(u32 r, u32 b, u32 t, u32 m) { return r * PR + (b * NTM + t) * 4u + m; }
    static QK_MEMBER u32 d(u32 r, u32 b, u32 t) { return r * DR + b * NTM + t; }
};
template <int NTM>
QK_DEV void mmk_q4_k_body(const MmArgs& A) {
    using K = KqkPad<NTM>;
    QK_SHARED i32 X[MMK_R * K::XR];
    QK_SHARED i32 P[MMK_R * K::PR];
    QK_SHARED float D[MMK_R * K::DR];
    QK_SHARED float DM[MMK_R * K::DR];
    QK_SHARED float O[QK_MMK_ST4 ? MMK_R * NTM : 1];
    const u32 bid = qk_bid(), tid = qk_tid();
    const u32 j = mm_job_of(A, bid);
    const MmJob& J = A.jobs[j];
    const u32 nb = A.nb, rows = J.rows, capw = J.capw, nt = J.nt;
    const u32 row0 = (bid - J.cta0) * MMK_R;
    const u32* aq = (const u32*)J.a_qs;
    const float* ad = (const float*)J.a_d;
    const i16* bs = (const i16*)J.a_x;
    const u32 items = MMK_R * nb * 8u;  // (block, row, half, pair), pair fastest
    // Every thread runs every round (no early exit: the pair sums are shuffles).
    for (u32 base = 0; base < items; base += qk_bdim()) {
        const u32 it = base + tid < items ? base + tid : items - 1u;
        const u32 s = it & 3u, h = (it >> 2) & 1u, r = (it >> 3) % MMK_R, b = it / (8u * MMK_R);
        const u32 row = row0 + r < rows ? row0 + r : rows - 1u;
        const u8* blk = (const u8*)J.w + qk_wblk(rows, nb, row, b) * 144u;
        const uint4 hdr = ld128(blk);  // d, dmin | scales[12]
        const float xd = qk_h2f((u16)(hdr.x & 0xffffu)), xdmin = qk_h2f((u16)(hdr.x >> 16));
        u32 u0, u1, u2, u3;
        kq_unpack(hdr.y, hdr.z, hdr.w, &u0, &u1, &u2, &u3);
        const uint4 qv = ld128(blk + 16u + 32u * s + 16u * h);  // lanes 4h..4h+3 of pair s
        const i32 sl = (i32)kq_byte(u0, u1, 2u * s), sh = (i32)kq_byte(u0, u1, 2u * s + 1u);
        const bool store = base + tid < items;
        // Quads (QK_Q8K_QUAD): the pair's lanes 4h..4h+3 of both sub-blocks, one load a token each.
        u32 qlo[QK_Q8K_QUAD ? 4 : 1][NTM], qhi[QK_Q8K_QUAD ? 4 : 1][NTM];
        if (QK_Q8K_QUAD) {
            ld_q8k4<NTM>(aq, 16u * b + 4u * s + h, capw, qlo);
            ld_q8k4<NTM>(aq, 16u * b + 4u * s + 2u + h, capw, qhi);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const u32 qw = q4w(qv, i);
            const u32* a = aq + (u64)(64u * b + 16u * s + 4u * h + (u32)i) * capw;
            u32 alo[NTM], ahi[NTM];
            if (QK_Q8K_QUAD) {
#pragma unroll
                for (int t = 0; t < NTM; ++t) {
                    alo[t] = qlo[QK_Q8K_QUAD ? i : 0][t];
                    ahi[t] = qhi[QK_Q8K_QUAD ? i : 0][t];
                }
            } else {
                ld_tok<NTM>(a, alo);
                ld_tok<NTM>(a + 8u * (u64)capw, ahi);
            }
#pragma unroll
            for (int t = 0; t < NTM; ++t) {
                i32 v = sl * qk_dp4a((i32)(qw & 0x0f0f0f0fu), (i32)alo[t], 0) +
                        sh * qk_dp4a((i32)((qw >> 4) & 0x0f0f0f0fu), (i32)ahi[t], 0);
                v = (i32)((u32)v + (u32)qk_shfl_xor_i(v, 1));
                v = (i32)((u32)v + (u32)qk_shfl_xor_i(v, 2));
                if (store && s == 0) X[K::x(r, b, 4u * h + (u32)i, t)] = v;
            }
        }
        if (QK_MMK_KSPREAD) {
            // Token t's chain factor d_t by thread (h = 0, s = t % 4) and its mins products by
            // (h = 1, s = t % 4): a warp (one block, 4 rows) runs one or two tokens' worth of
            // each (16 threads a path) instead of all NTM tokens' on 4 threads.
            if (store) {
#pragma unroll
                for (int k = 0; k < (NTM + 3) / 4; ++k) {
                    const u32 t = 4u * (u32)k + s;
                    if (t >= (u32)NTM) break;
                    if (h == 0) {
                        D[K::d(r, b, t)] = qk_mul(qk_ld(ad + (u64)b * capw + t), xd);
                    } else {
                        // Tokens past nt repeat the last one (phase 2 stores no result of theirs).
                        const u32 tt = t < nt ? t : nt - 1u;
                        i32 prod[4];
                        DM[K::d(r, b, t)] = qk_mul(-qk_ld(ad + (u64)b * capw + tt), xdmin);
                        kq_mins_prod(bs + ((u64)tt * nb + b) * 16u, u2, u3, prod);
#pragma unroll
                        for (int m = 0; m < 4; ++m) P[K::p(r, b, t, (u32)m)] = prod[m];
                    }
                }
            }
        } else {
            if (store && s == 0 && h == 0) {
                float da[NTM];
                ld_tok_f<NTM>(ad + (u64)b * capw, da);
#pragma unroll
                for (int t = 0; t < NTM; ++t) D[K::d(r, b, t)] = qk_mul(da[t], xd);
            }
            if (store && s == 1 && h == 0) {
#pragma unroll
                for (int t = 0; t < NTM; ++t) {
                    // Tokens past nt repeat the last one (phase 2 stores no result of theirs): the
                    // loads need no branch, so all NTM tokens' loads issue at once instead of one
                    // round trip each.
                    const u32 tt = (u32)t < nt ? (u32)t : nt - 1u;
                    i32 prod[4];
                    const float dmin = qk_mul(-qk_ld(ad + (u64)b * capw + tt), xdmin);
                    kq_mins_prod(bs + ((u64)tt * nb + b) * 16u, u2, u3, prod);
                    DM[K::d(r, b, t)] = dmin;
#pragma unroll
                    for (int m = 0; m < 4; ++m) P[K::p(r, b, t, m)] = prod[m];
                }
            }
        }
    }
    qk_sync();
    const u32 p = tid;
    if (p >= MMK_R * NTM * 8u) return;  // whole warps (MMK_R * 8 == 32): no shuffle is split
    const u32 l = p & 7u, t = (p >> 3) % NTM, r = p / (8u * NTM);
    float acc = 0.0f, am = 0.0f;
    // Both chains in one loop, each fma waiting on its own chain only (the same fma sequences as
    // one loop after the other). Threads l >= 4 run the mins chain on lane l & 3's products
    // too, so that the loop has no branch; the shuffles below pair lanes 0-3 among themselves
    // only, so their chains never reach the result.
    for (u32 b = 0; b < nb; ++b) {
        acc = qk_fma(D[K::d(r, b, t)], qk_i2f(X[K::x(r, b, l, t)]), acc);
        am = qk_fma(DM[K::d(r, b, t)], qk_i2f(P[K::p(r, b, t, l & 3u)]), am);
    }
    const float hs = qk_hsum8(acc);
    am = qk_add(am, qk_shfl_xor(am, 2));  // l = 0: m0 + m2, l = 1: m1 + m3
    am = qk_add(am, qk_shfl_xor(am, 1));  // l = 0: (m0 + m2) + (m1 + m3)
    mmk_out<NTM>(J, O, p, l, t, r, row0, qk_add(hs, am));
}
// The launch gives phase 1 one round: MMK_R * nb * 8 threads, 256 to KQK_BLOCK_MAX (args.rs
// `mmk_block`); the bound keeps the registers within what 512 threads may use.
#define KQK_BLOCK_MAX (MMK_R * KQK_BMAX * 8)
#define MMK_Q4K_1(fmt, NTM)                                                   \
    QK_DEV void mmk_##fmt##_n##NTM(const MmArgs& A) { mmk_q4_k_body<NTM>(A); } \
    QK_ENTRY_BOUND(qk_mmk_##fmt##_n##NTM, MmArgs, mmk_##fmt##_n##NTM, KQK_BLOCK_MAX)
QK_EACH_NTM(MMK_Q4K_1, q4_k)

QK_DEV float deq_q4_k(const u8* blk, u32, u32 e, const u32*) {
    const u32 dd = ld32(blk);
    const float d = qk_h2f((u16)(dd & 0xffffu)), mn = qk_h2f((u16)(dd >> 16));
    const u32 j = e / 64, half = (e % 64) / 32, l = e % 32;
    u32 sc, m;
    kq_scale_min(blk + 4, 2 * j + half, &sc, &m);
    const float d1 = qk_mul(d, (float)sc), m1 = qk_mul(mn, (float)m);
    const u32 qb = blk[16 + 32 * j + l];
    const u32 q = half ? (qb >> 4) : (qb & 0xfu);
    return qk_sub(qk_mul(d1, (float)q), m1);
}
DEQ_KERNEL_T(q4_k, deq_q4_k, 256, 144, 0, 1)
