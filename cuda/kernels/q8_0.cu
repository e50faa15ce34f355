// q8_0 weights x q8_0 activations (qkern_formats::reference::q8_0).
// - dequantize: ggml-quants.c `dequantize_row_q8_0`: y = q * d
// - dot: ggml-cpu/arch/x86/quants.c `ggml_vec_dot_q8_0_q8_0` (AVX2): lane l of block b is
//   the sum of 4 products (elements 4l..4l+4; the sign trick equals the plain product for
//   activation bytes other than -128, which qkern never holds), acc = fma(dx*dy, lane, acc).
// Device layout: tiled (layout.rs) and split (bodies of 32 quants, then the fp16 d array). Two threads per row
// (mm_common.cuh, "32-element formats"); small-K launches use the two-phase kernel.

#include "mm_common.cuh"

// Block b, half h: the integer lanes 4h..4h+4 and the chain factor dx*dy of NTM tokens.
struct UnitQ8_0 {
    static const u32 UNITS_PER_BLOCK = 1;
    static const u32 BODY = 32;  // bytes of a block in the body region (the row kernels' prefetch)
    static const u32 PF_R = QK_PF_R_Q8;  // the row kernels' L2 prefetch distance (mm_common.cuh mmr_pf)
    // The row kernels' one-ahead loads (mm_common.cuh MMR_PIPE) at NT 7 (the row kernels run
    // from NT 4): H100 session 20 run3, kernel-only GB/s without / with, NT 4..8: 2703 / 2633,
    // 2641 / 2545, 2496 / 2012, 1790 / 1853, 1851 / 1573.
    static const u32 PIPE_R = 0x40u;
    // The shared-memory kernels (qk_mmc_*, the default from NT 4) at NT 4-8 (QK_PIPE_C_Q8
    // overrides it): H100 session 27 run2 (benches/results/2026-12-06-session27), kernel-only
    // GB/s with PIPE_R / with one-ahead loads at every NT (QK_PIPE_C_Q8=0xffu), twice, NT 4..8:
    // 2838, 2838 / 2912, 2910; 2738, 2737 / 2861, 2858; 2519, 2514 / 2789, 2788; NT 7 (the same
    // kernels both ways) 2695, 2680 / 2701, 2691; 2279, 2258 / 2604, 2594. ptxas spills 12
    // bytes at NT 8 with them, and NT 8 is still the largest gain.
#ifdef QK_PIPE_C_Q8
    static const u32 PIPE_C = QK_PIPE_C_Q8;
#else
    static const u32 PIPE_C = PIPE_R | 0xb8u;  // NT 4-8
#endif
    static const u32 MINB_C3 = QK_MINB_C3_Q8;  // the shared-memory kernels' 3-CTA token counts (mm_common.cuh MMC_MINB)
    // The whole block's weight words (both halves), for the row kernels' one-ahead loads.
    struct Raw {
        uint4 q[2];
        u32 d16;
    };
    static QK_MEMBER Raw load(const MmArgs& A, const MmJob& J, u32 row, u32 b) {
        const u64 k = qk_wblk(J.rows, A.nb, row, b);
        Raw r;
        r.q[0] = ld128((const u8*)J.w + k * 32u);
        r.q[1] = ld128((const u8*)J.w + k * 32u + 16u);
        r.d16 = qk_ld((const u16*)J.wd + k);
        return r;
    }
    // Half h of block b from its 16 quant bytes `wq` and its fp16 d.
    template <int NTM, class AS>
    static QK_MEMBER void core(const MmJob& J, uint4 wq, u32 d16, u32 b, u32 h, i32 (*isum)[NTM], float* d) {
        const u32 capw = J.capw;
        const i32 wv[4] = {(i32)wq.x, (i32)wq.y, (i32)wq.z, (i32)wq.w};
        const float dw = qk_h2f((u16)d16);
        float da[NTM];
        AS::template f32s<NTM>(J, J.a_d, b, capw, da);
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            const uint4 av = AS::quad(J, 2u * b + h, capw, (u32)t);  // lanes 4h..4h+3
#pragma unroll
            for (int i = 0; i < 4; ++i) isum[i][t] = qk_dp4a(wv[i], (i32)q4w(av, i), QK_BIAS);
        }
#pragma unroll
        for (int t = 0; t < NTM; ++t) d[t] = qk_mul(dw, da[t]);
    }
    template <int NTM, class AS = ActG>
    static QK_MEMBER void unit_raw(const MmArgs&, const MmJob& J, const Raw& r, u32 b, u32 h, i32 (*isum)[NTM],
                                   float* d, float*) {
        core<NTM, AS>(J, h ? r.q[1] : r.q[0], r.d16, b, h, isum, d);
    }
    template <int NTM, class AS = ActG>
    static QK_MEMBER void unit(const MmArgs& A, const MmJob& J, u32 row, u32 b, u32 h, i32 (*isum)[NTM], float* d,
                            float*) {
        const u64 k = qk_wblk(J.rows, A.nb, row, b);
        core<NTM, AS>(J, ld128((const u8*)J.w + k * 32u + 16u * h), qk_ld((const u16*)J.wd + k), b, h, isum, d);
    }
};

template <int NTM>
QK_DEV void mm_q8_0(const MmArgs& A, const MmCtxB& c, float* res) {
    const MmJob& J = A.jobs[c.job];
    float acc[NTM][4];
    mm_zero<NTM>(acc);
QK_UNROLL(QK_UNROLL_Q8)
    for (u32 b = 0; b < A.nb; ++b) {
        mm_pf<QK_PF_Q8, (NTM >= 2)>((const u8*)J.w + qk_wblk(J.rows, A.nb, c.row, b + QK_PF_Q8) * 32u, b, A.nb, 32u, c.h);
        i32 isum[4][NTM];
        float d[NTM];
        UnitQ8_0::unit<NTM>(A, J, c.row, b, c.h, isum, d, nullptr);
        mm_chain_b<NTM>(acc, isum, d);
    }
#pragma unroll
    for (int t = 0; t < NTM; ++t) res[t] = mm_hsum_b(acc[t]);
}
MM_KERNELS_B(q8_0, mm_q8_0)
MM_KERNELS_K(q8_0, UnitQ8_0, MmPlain)
MM_KERNELS_R(q8_0, UnitQ8_0, MmPlain)

QK_DEV float deq_q8_0(const u8* body, u32 d16, u32 e, const u32*) {
    return qk_mul((float)(i8)body[e], qk_h2f(d16));
}
DEQ_KERNEL_T(q8_0, deq_q8_0, 32, 32, 1, 1)
