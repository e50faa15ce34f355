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
    static const u32 BODY = 24;  // bytes of a block in the body region (the row kernels' prefetch)
    static const u32 PF_R = QK_PF_R_Q51;  // the row kernels' L2 prefetch distance (mm_common.cuh mmr_pf)
    // The row kernels' one-ahead loads (mm_common.cuh MMR_PIPE) at NT 1, 6, 7: H100 session 20
    // run3, kernel-only GB/s without / with, NT 1..8: 2717 / 2685 (2847 with 4 CTAs, QK_MINB_R1),
    // 2646 / 2256, 2205 / 2175, 2150 / 2132, 2044 / 1291, 1319 / 1367, 1317 / 1434, 1108 / 1016.
    static const u32 PIPE_R = 0x61u;
    // The shared-memory kernels (qk_mmc_*, the default from NT 3) at NT 1 and 5-8
    // (QK_PIPE_C_Q51 overrides it): H100 session 26 run8 (benches/results/2026-12-06-session26),
    // kernel-only GB/s with PIPE_R / with one-ahead loads at every NT (QK_PIPE_R=8), twice,
    // NT 3..8: 2816, 2784 / 2811, 2794; 2676, 2716 / 2777, 2776; 2339, 2351 / 2515, 2517; NT 6-7
    // (the same kernels both ways) 2125, 2126 / 2224, 2186 and 1932, 1931 / 2023, 1923; NT 8
    // 1771, 1772 / 1922, 1848. NT 4's gain is within what NT 6-7 show between identical kernels,
    // so it is not taken.
#ifdef QK_PIPE_C_Q51
    static const u32 PIPE_C = QK_PIPE_C_Q51;
#else
    static const u32 PIPE_C = PIPE_R | 0x90u;  // NT 1, 5-8
#endif
    static const u32 MINB_C3 = QK_MINB_C3_Q51;  // the shared-memory kernels' 3-CTA token counts (mm_common.cuh MMC_MINB)
    // The block's 24 bytes (d, m | qh, then the 16 qs bytes), for the row kernels' one-ahead loads.
    struct Raw {
        uint2 hd, q0, q1;
    };
    static QK_MEMBER Raw load(const MmArgs& A, const MmJob& J, u32 row, u32 b) {
        const u8* blk = (const u8*)J.w + qk_wblk(J.rows, A.nb, row, b) * 24u;
        Raw r;
        r.hd = ld64(blk);
        r.q0 = ld64(blk + 8);
        r.q1 = ld64(blk + 16);
        return r;
    }
    // `*m`: the block's fp16 m as f32 (for summs).
    template <int NTM, class AS = ActG>
    static QK_MEMBER void unit_raw(const MmArgs&, const MmJob& J, const Raw& r, u32 b, u32 h, i32 (*isum)[NTM],
                                   float* d, float* m) {
        const u32 capw = J.capw;
        const uint2 hd = r.hd;  // d, m | qh
        const float dx = qk_h2f((u16)(hd.x & 0xffffu));
        *m = qk_h2f((u16)(hd.x >> 16));
        const u32 qw[4] = {r.q0.x, r.q0.y, r.q1.x, r.q1.y};
        float da[NTM];
        AS::template f32s<NTM>(J, J.a_d, b, capw, da);
        i32 q[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const u32 nib = (h ? qw[i] >> 4 : qw[i]) & 0x0f0f0f0fu;
            q[i] = (i32)(nib | qk_high4((hd.y >> (16u * h + 4u * i)) & 0xfu));
        }
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            const uint4 av = AS::quad(J, 2u * b + h, capw, (u32)t);  // lanes 4h..4h+3
#pragma unroll
            for (int i = 0; i < 4; ++i) isum[i][t] = qk_dp4a(q[i], (i32)q4w(av, i), QK_BIAS);
        }
#pragma unroll
        for (int t = 0; t < NTM; ++t) d[t] = qk_mul(dx, da[t]);
    }
    template <int NTM, class AS = ActG>
    static QK_MEMBER void unit(const MmArgs& A, const MmJob& J, u32 row, u32 b, u32 h, i32 (*isum)[NTM], float* d,
                            float* m) {
        unit_raw<NTM, AS>(A, J, load(A, J, row, b), b, h, isum, d, m);
    }
};

template <int NTM>
QK_DEV void mm_q5_1(const MmArgs& A, const MmCtxB& c, float* res) {
    const MmJob J = A.jobs[c.job];  // a copy (fewer instructions a block in sm_90 SASS: fields kept, not reloaded)
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
MM_KERNELS_R(q5_1, UnitQ5_1, MmSumms)
MM_KERNELS_P(q5_1, UnitQ5_1, MmSumms)

// q5_1 on tensor cores (mm_common.cuh "Tensor-core kernels"). A block has one scale, so K is
// the block's 32 quants and the lanes go to N instead: per token one m16n8k32 product with
// B[k][n] = q8[k] where lane(k) = k / 4 == n, else 0 (thread (g, q) puts the token's word g in
// b[0] when g == q, in b[1] when g == q + 4). C[row][lane], started from QK_BIAS (the lanes are
// below 2^22 in magnitude), holds lanes 2q, 2q + 1 of rows g, g + 8: the thread runs those
// chains for every token; hsum_float_8 takes 2 shuffles per lane parity at the end. summs:
// thread q owns tokens 2q, 2q + 1 (and stores them). The weights are tiled (layout.rs), so a
// warp's 16 rows read one contiguous 384-byte span per block.
template <int PF>
QK_DEV void mma_q5_1_body(const MmArgs& A) {
    const MmaCtx c = mma_ctx(A);
    const MmJob J = A.jobs[c.job];  // a copy (fewer instructions a block in sm_90 SASS: fields kept, not reloaded)
    const u32 nb = A.nb, q = c.q, g = c.g, capw = J.capw, last = c.nt - 1u;
    const float* ad = (const float*)J.a_d;
    const float* as = (const float*)J.a_x;
    const i32 cb[4] = {QK_BIAS, QK_BIAS, QK_BIAS, QK_BIAS};
    const u32* tk = c.tk;
    // word g of a token's block b: quad 2b + (g >> 2), word g & 3 (layout.rs ActLayout)
    const u32* ay = (const u32*)J.a_qs + (u64)(g >> 2) * capw * 4u + (g & 3u);
    float acc[8][4], summs[2][2];
#pragma unroll
    for (int t = 0; t < 8; ++t)
#pragma unroll
        for (int x = 0; x < 4; ++x) acc[t][x] = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) summs[h][0] = summs[h][1] = 0.0f;
QK_UNROLL(1)
    for (u32 b = 0; b < nb; ++b) {
        u32 a[4];
        float dx[2], m[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u8* blk = (const u8*)J.w + qk_wblk(J.rows, nb, c.row[h], b) * 24u;
            if (PF > 0 && q == 0 && b + PF < nb) qk_prefetch_l2((const u8*)J.w + qk_wblk(J.rows, nb, c.row[h], b + PF) * 24u);
            const uint2 hd = ld64(blk);  // d, m | qh
            const u32 qw = ld32(blk + 8u + 4u * q);
            dx[h] = qk_h2f((u16)(hd.x & 0xffffu));
            m[h] = qk_h2f((u16)(hd.x >> 16));
            a[h] = (qw & 0x0f0f0f0fu) | qk_high4((hd.y >> (4u * q)) & 0xfu);
            a[2 + h] = ((qw >> 4) & 0x0f0f0f0fu) | qk_high4((hd.y >> (16u + 4u * q)) & 0xfu);
        }
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            const u32 tt = (u32)t < last ? (u32)t : last;
            const u32 y = qk_ld(ay + ((u64)2u * b * capw + tt) * 4u);
            const u32 bv[2] = {g == q ? y : 0u, g == q + 4u ? y : 0u};
            i32 cl[4];
            qk_mma_u8s8(a, bv, cb, cl);
            const float da = qk_ld(ad + (u64)b * capw + tt);
            const float d0 = qk_mul(dx[0], da), d1 = qk_mul(dx[1], da);
#pragma unroll
            for (int x = 0; x < 4; ++x) acc[t][x] = qk_fma(x < 2 ? d0 : d1, qk_unbias(cl[x]), acc[t][x]);
        }
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const float sa = qk_ld(as + (u64)b * capw + tk[k]);
#pragma unroll
            for (int h = 0; h < 2; ++h) summs[h][k] = qk_fma(m[h], sa, summs[h][k]);
        }
    }
    // hsum_float_8 per (token, row) over the 4 threads q of the row pair (lanes 2q, 2q + 1 each):
    // even lanes (l0 + l4) + (l2 + l6), odd ones (l1 + l5) + (l3 + l7), then their sum.
    float hs[2][8];
#pragma unroll
    for (int t = 0; t < 8; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float e = acc[t][2 * h], o = acc[t][2 * h + 1];
            e = qk_add(e, qk_shfl_xor(e, 2));
            o = qk_add(o, qk_shfl_xor(o, 2));
            e = qk_add(e, qk_shfl_xor(e, 1));
            o = qk_add(o, qk_shfl_xor(o, 1));
            hs[h][t] = qk_add(e, o);
        }
#pragma unroll
    for (int k = 0; k < 2; ++k)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u32 t = 2u * q + (u32)k;
            if (c.valid[h] && t < c.nt)
                ((float*)J.out)[(u64)t * J.rows + c.row[h]] = qk_add(mm_pick<8>(hs[h], t), summs[h][k]);
        }
}
QK_DEV void mma_q5_1(const MmArgs& A) { mma_q5_1_body<QK_PF_MMA_Q51>(A); }
MMA_KERNEL(q5_1, mma_q5_1, QK_MINB_MMA_Q51)

QK_DEV float deq_q5_1(const u8* blk, u32, u32 e, const u32*) {
    const u32 dm = ld32(blk);
    const u32 qh = ld32(blk + 4);
    const u32 nib = e < 16 ? (blk[8 + e] & 0xfu) : (blk[8 + e - 16] >> 4);
    const u32 q = nib | (((qh >> e) & 1u) << 4);
    return qk_add(qk_mul((float)q, qk_h2f((u16)(dm & 0xffffu))), qk_h2f((u16)(dm >> 16)));
}
DEQ_KERNEL_T(q5_1, deq_q5_1, 32, 24, 0, 1)
