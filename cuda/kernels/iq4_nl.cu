// iq4_nl weights x q8_0 activations (qkern_formats::reference::iq4_nl).
// - dequantize: ggml-quants.c `dequantize_row_iq4_nl`: y = d * kvalues_iq4nl[q]
// - dot: `ggml_vec_dot_iq4_nl_q8_0` (AVX2): blocks in pairs, the even block into accum1 and
//   the odd one into accum2 (acc = fma(dy*dx, lane, acc)), sumf = hsum_float_8(accum1 +
//   accum2); an odd last block goes through the scalar tail `sumf += d * (sumi1 + sumi2)`,
//   which gcc contracts into one fma.
// Device layout: tiled (layout.rs) and split (bodies of 16 nibble bytes in element order,
// `nibble_seq`, then the fp16 d array). Two threads per row: thread h takes lanes 4h..4h+3, the 8
// bytes 8h..8h+8 (qk_lut16x2n: 6 byte permutes for 8 values).

#include "mm_common.cuh"

struct UnitIq4Nl {
    static const u32 UNITS_PER_BLOCK = 1;
    static const u32 BODY = 16;  // bytes of a block in the body region (the row kernels' prefetch)
    static const u32 PF_R = QK_PF_R_NL;  // the row kernels' L2 prefetch distance (mm_common.cuh mmr_pf)
    // The row kernels' one-ahead loads (mm_common.cuh MMR_PIPE) at NT 1, 2, 4 (the row kernels
    // run at NT 1-4): H100 session 20 run3, kernel-only GB/s without / with: 2493 / 2595 (2717
    // with 4 CTAs, QK_MINB_R1), 2308 / 2375, 1826 / 1721, 1686 / 1744.
    static const u32 PIPE_R = 0x0bu;
    // The shared-memory kernels (qk_mmc_*, then the default at NT 2-6) at NT 1-6 (QK_PIPE_C_NL
    // overrides it): H100 session 27 run2 (benches/results/2026-12-06-session27), kernel-only
    // GB/s with PIPE_R / with one-ahead loads at every NT (QK_PIPE_C_NL=0xffu), twice, NT 3..7:
    // 2221, 2212 / 2503, 2497; NT 4 (the same kernels both ways) 2358, 2348 / 2360, 2347; 1827,
    // 1815 / 1869, 1857; 1308, 1302 / 1549, 1539; 1076, 1071 / 1026, 1023 (not taken). Since
    // run5 NT 6-8 run the two-threads-a-row staged kernels (qk_mmp_*, args.rs
    // pair_default_mask), which take this mask too; their figures were timed with it.
#ifdef QK_PIPE_C_NL
    static const u32 PIPE_C = QK_PIPE_C_NL;
#else
    static const u32 PIPE_C = PIPE_R | 0x34u;  // NT 1-6
#endif
    static const u32 MINB_C3 = QK_MINB_C3_NL;  // the shared-memory kernels' 3-CTA token counts (mm_common.cuh MMC_MINB)
    // The block's 16 nibble bytes in element order (both halves) and its fp16 d, for the row kernels'
    // one-ahead loads.
    struct Raw {
        uint4 q;
        u32 d16;
    };
    static QK_MEMBER Raw load(const MmArgs& A, const MmJob& J, u32 row, u32 b) {
        const u64 k = qk_wblk(J.rows, A.nb, row, b);
        Raw r;
        r.q = ld128((const u8*)J.w + k * 16u);
        r.d16 = qk_ld((const u16*)J.wd + k);
        return r;
    }
    // Half h of block b from its 8 nibble bytes `qq` (layout.rs `nibble_seq`) and its fp16 d.
    template <int NTM, class AS>
    static QK_MEMBER void core(const MmArgs& A, const MmJob& J, uint2 qq, u32 d16, u32 b, u32 h, i32 (*isum)[NTM],
                               float* d) {
        const u32 capw = J.capw;
        u32 kv[4];
        for (int i = 0; i < 4; ++i) kv[i] = qk_ld((const u32*)A.tab + TAB_IQ4NL + i);
        u32 v4[4];  // lanes 4h..4h+3 (element order: word 2h + p is lanes 4h + 2p, + 1)
        qk_lut16x2n(qq.x, kv, &v4[0], &v4[1]);
        qk_lut16x2n(qq.y, kv, &v4[2], &v4[3]);
        const float dx = qk_h2f((u16)d16);
        float da[NTM];
        AS::template f32s<NTM>(J, J.a_d, b, capw, da);
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            const uint4 av = AS::quad(J, 2u * b + h, capw, (u32)t);  // lanes 4h..4h+3
#pragma unroll
            for (int i = 0; i < 4; ++i) isum[i][t] = qk_dp4a((i32)v4[i], (i32)q4w(av, i), QK_BIAS);
        }
#pragma unroll
        for (int t = 0; t < NTM; ++t) d[t] = qk_mul(da[t], dx);
    }
    template <int NTM, class AS = ActG>
    static QK_MEMBER void unit_raw(const MmArgs& A, const MmJob& J, const Raw& r, u32 b, u32 h, i32 (*isum)[NTM],
                                   float* d, float*) {
        uint2 qq;
        qq.x = h ? r.q.z : r.q.x;
        qq.y = h ? r.q.w : r.q.y;
        core<NTM, AS>(A, J, qq, r.d16, b, h, isum, d);
    }
    template <int NTM, class AS = ActG>
    static QK_MEMBER void unit(const MmArgs& A, const MmJob& J, u32 row, u32 b, u32 h, i32 (*isum)[NTM], float* d,
                            float*) {
        const u64 k = qk_wblk(J.rows, A.nb, row, b);
        // Element order (layout.rs `nibble_seq`): this thread's 16 nibbles, 8 bytes.
        core<NTM, AS>(A, J, ld64((const u8*)J.w + k * 16u + 8u * h), qk_ld((const u16*)J.wd + k), b, h, isum, d);
    }
};

template <int NTM>
QK_DEV void mm_iq4_nl(const MmArgs& A, const MmCtxB& c, float* res) {
    const MmJob& J = A.jobs[c.job];
    float acc1[NTM][4], acc2[NTM][4];
    mm_zero<NTM>(acc1);
    mm_zero<NTM>(acc2);
    const u32 pairs = A.nb / 2;
QK_UNROLL(QK_UNROLL_P)
    for (u32 p = 0; p < pairs; ++p) {
        i32 isum[4][NTM];
        float d[NTM];
        UnitIq4Nl::unit<NTM>(A, J, c.row, 2u * p, c.h, isum, d, nullptr);
        mm_chain_b<NTM>(acc1, isum, d);
        UnitIq4Nl::unit<NTM>(A, J, c.row, 2u * p + 1u, c.h, isum, d, nullptr);
        mm_chain_b<NTM>(acc2, isum, d);
    }
#pragma unroll
    for (int t = 0; t < NTM; ++t) {
        float sum[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) sum[i] = qk_add(acc1[t][i], acc2[t][i]);
        res[t] = mm_hsum_b(sum);
    }
    if (A.nb & 1u) {
        // scalar tail: the block's plain integer dot (all 8 lanes), sumf = fma(d, sumi, sumf)
        i32 isum[4][NTM];
        float d[NTM];
        UnitIq4Nl::unit<NTM>(A, J, c.row, A.nb - 1u, c.h, isum, d, nullptr);
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            i32 p = qk_unbias_sum((u32)isum[0][t] + (u32)isum[1][t] + (u32)isum[2][t] + (u32)isum[3][t], 4);
            p += qk_shfl_xor_i(p, 1);
            res[t] = qk_fma(d[t], qk_i2f(p), res[t]);
        }
    }
}
MM_KERNELS_B(iq4_nl, mm_iq4_nl)
MM_KERNELS_K(iq4_nl, UnitIq4Nl, MmPairs)
MM_KERNELS_R(iq4_nl, UnitIq4Nl, MmPairs)
MM_KERNELS_P(iq4_nl, UnitIq4Nl, MmPairs)

QK_DEV float deq_iq4_nl(const u8* body, u32 d16, u32 e, const u32* tab) {
    // Element order (layout.rs `nibble_seq`): element e is nibble e & 1 of byte e / 2.
    const u32 n = (body[e / 2u] >> (4u * (e & 1u))) & 0xfu;
    return qk_mul(qk_h2f(d16), (float)(i8)tab_byte(tab + TAB_IQ4NL, n));
}
DEQ_KERNEL_T(iq4_nl, deq_iq4_nl, 32, 16, 1, 1)
