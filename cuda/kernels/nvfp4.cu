// nvfp4 weights x q8_0 activations (qkern_formats::reference::nvfp4).
// - dequantize: ggml-quants.c `dequantize_row_nvfp4`: y = kvalues_fp4[q] * ue4m3(d[s])
//   (doubled E2M1 values, halved scale); element j of sub-block s is the low nibble of
//   qs[8s + j], element j+8 the high nibble.
// - dot: `ggml_vec_dot_nvfp4_q8_0` (AVX2): two 8-lane steps per block, one per q8_0 block k;
//   lanes 0-3 use ue4m3(d[2k]) * dy, lanes 4-7 ue4m3(d[2k+1]) * dy: acc = fma(s, lane, acc).
// Device layout: tiled (layout.rs) and split: 32-byte bodies (sub-blocks reordered, each with its
// nibbles in element order: qk_lut16x2n), then the u32 scales. Two threads per row: in step k thread h owns lanes
// 4h..4h+3, i.e. sub-block 2k+h, whose scale its 4 lanes share. A "unit" (of the two-phase
// kernel) is one step (32 elements, one q8_0 activation block), two per nvfp4 block.

#include "mm_common.cuh"

// Step u (sub-blocks 2kk, 2kk + 1 of block b = u / 2, kk = u % 2), half h: the integer lanes
// 4h..4h+3 from the sub-block's 8 bytes (words qx, qy), and the chain factors ue4m3 * dy.
template <int NTM, class AS = ActG>
QK_DEV void nvfp4_step(const MmJob& J, u32 u, u32 h, u32 qx, u32 qy, u32 scales, const u32* kv, i32 (*isum)[NTM],
                       float* d) {
    const u32 capw = J.capw, sb = 2u * (u & 1u) + h;
    // lane 4h+i: nibbles 4 (i & 1).. of word i >> 1 of the sub-block (element order, layout.rs
    // nibble_seq)
    u32 v4[4];
    qk_lut16x2n(qx, kv, &v4[0], &v4[1]);
    qk_lut16x2n(qy, kv, &v4[2], &v4[3]);
    const float ue = qk_ue4m3(scales >> (8u * sb));
    float da[NTM];
    AS::template f32s<NTM>(J, J.a_d, u, capw, da);
#pragma unroll
    for (int t = 0; t < NTM; ++t) {
        const uint4 av = AS::quad(J, 2u * u + h, capw, (u32)t);  // lanes 4h..4h+3
#pragma unroll
        for (int i = 0; i < 4; ++i) isum[i][t] = qk_dp4a((i32)v4[i], (i32)q4w(av, i), QK_BIAS);
    }
#pragma unroll
    for (int t = 0; t < NTM; ++t) d[t] = qk_mul(ue, da[t]);
}

QK_DEV void nvfp4_table(const MmArgs& A, u32* kv) {
#pragma unroll
    for (int i = 0; i < 4; ++i) kv[i] = qk_ld((const u32*)A.tab + TAB_FP4 + i);
}

// Split layout (layout.rs): the 32 qs bytes with the sub-blocks in the order 0, 2, 1, 3, so
// that thread h's sub-blocks of steps 0 and 1 (2kk + h) are the 16 bytes at 16h; the four
// UE4M3 scales as one u32 of the scale array.
struct UnitNvfp4 {
    static const u32 UNITS_PER_BLOCK = 2;
    static const u32 BODY = 32;  // bytes of a block in the body region (the row kernels' prefetch)
    static const u32 PF_R = QK_PF_R_NV;  // the row kernels' L2 prefetch distance (mm_common.cuh mmr_pf)
    // The row kernels' one-ahead loads (mm_common.cuh MMR_PIPE) at NT 1-5: H100 session 20 run3,
    // kernel-only GB/s without / with, NT 1..8: 2544 / 2581, 2222 / 2243, 1758 / 1878, 1667 /
    // 1693, 1463 / 1562, 1171 / 1052, 1126 / 1117, 908 / 872.
    static const u32 PIPE_R = 0x1fu;
    // The shared-memory kernels (qk_mmc_*, the default at every NT) at every NT (QK_PIPE_C_NV
    // overrides it): H100 session 27 run2 (benches/results/2026-12-06-session27), kernel-only
    // GB/s with PIPE_R / with one-ahead loads at every NT (QK_PIPE_C_NV=0xffu), twice, NT 6..8:
    // 1486, 1477 / 1530, 1520; 1420, 1412 / 1495, 1484; 1351, 1342 / 1437, 1427. NT 1-5 (the
    // same kernels both ways) are within 2 %.
#ifdef QK_PIPE_C_NV
    static const u32 PIPE_C = QK_PIPE_C_NV;
#else
    static const u32 PIPE_C = PIPE_R | 0xe0u;  // every NT
#endif
    static const u32 MINB_C3 = QK_MINB_C3_NV;  // the shared-memory kernels' 3-CTA token counts (mm_common.cuh MMC_MINB)
    // Step u's two sub-blocks (thread h's at 16h + 8 (u & 1)) and the block's scale word, for
    // the row kernels' one-ahead loads.
    struct Raw {
        uint2 q[2];
        u32 sc;
    };
    static QK_MEMBER Raw load(const MmArgs& A, const MmJob& J, u32 row, u32 u) {
        const u64 k = qk_wblk(J.rows, A.nb, row, u / 2);
        const u8* body = (const u8*)J.w + k * 32u + 8u * (u & 1u);
        Raw r;
        r.q[0] = ld64(body);
        r.q[1] = ld64(body + 16u);
        r.sc = qk_ld((const u32*)J.wd + k);
        return r;
    }
    template <int NTM, class AS = ActG>
    static QK_MEMBER void unit_raw(const MmArgs& A, const MmJob& J, const Raw& r, u32 u, u32 h, i32 (*isum)[NTM],
                                   float* d, float*) {
        u32 kv[4];
        nvfp4_table(A, kv);
        const uint2 q = h ? r.q[1] : r.q[0];
        nvfp4_step<NTM, AS>(J, u, h, q.x, q.y, r.sc, kv, isum, d);
    }
    template <int NTM, class AS = ActG>
    static QK_MEMBER void unit(const MmArgs& A, const MmJob& J, u32 row, u32 u, u32 h, i32 (*isum)[NTM], float* d,
                            float*) {
        u32 kv[4];
        nvfp4_table(A, kv);
        const u64 k = qk_wblk(J.rows, A.nb, row, u / 2);
        const uint2 q = ld64((const u8*)J.w + k * 32u + 16u * h + 8u * (u & 1u));
        nvfp4_step<NTM, AS>(J, u, h, q.x, q.y, qk_ld((const u32*)J.wd + k), kv, isum, d);
    }
};

// One block (both steps) per iteration: one 16-byte load of the thread's two sub-blocks and
// one scale word; the steps chain in order (u = 2b, then 2b + 1), as the AVX2 loop.
template <int NTM>
QK_DEV void mm_nvfp4(const MmArgs& A, const MmCtxB& c, float* res) {
    const MmJob& J = A.jobs[c.job];
    u32 kv[4];
    nvfp4_table(A, kv);
    float acc[NTM][4];
    mm_zero<NTM>(acc);
QK_UNROLL(QK_UNROLL_NV)
    for (u32 b = 0; b < A.nb; ++b) {
        constexpr int PF = QK_PF_DIST(NTM, QK_PF1_NV, QK_PF_NV, NTM >= 2);
        mm_pf<PF, true>((const u8*)J.w + qk_wblk(J.rows, A.nb, c.row, b + PF) * 32u, b, A.nb, 32u, c.h);
        const u64 k = qk_wblk(J.rows, A.nb, c.row, b);
        const uint4 q = ld128((const u8*)J.w + k * 32u + 16u * c.h);
        const u32 sc = qk_ld((const u32*)J.wd + k);
        i32 isum[4][NTM];
        float d[NTM];
        nvfp4_step<NTM>(J, 2u * b, c.h, q.x, q.y, sc, kv, isum, d);
        mm_chain_b<NTM>(acc, isum, d);
        nvfp4_step<NTM>(J, 2u * b + 1u, c.h, q.z, q.w, sc, kv, isum, d);
        mm_chain_b<NTM>(acc, isum, d);
    }
#pragma unroll
    for (int t = 0; t < NTM; ++t) res[t] = mm_hsum_b(acc[t]);
}
MM_KERNELS_B(nvfp4, mm_nvfp4)
MM_KERNELS_K(nvfp4, UnitNvfp4, MmPlain)
MM_KERNELS_R(nvfp4, UnitNvfp4, MmPlain)

// Sub-block s sits at position 2 (s & 1) + (s >> 1) of the body, element j at nibble j & 1 of
// its byte j / 2; its scale is byte s of `dw`.
QK_DEV float deq_nvfp4(const u8* body, u32 dw, u32 e, const u32* tab) {
    const u32 s = e / 16, j = e % 16;
    const u32 byte = body[8 * (2 * (s & 1) + (s >> 1)) + j / 2];  // element order (nibble_seq)
    const u32 n = (byte >> (4 * (j & 1))) & 0xfu;
    return qk_mul((float)(i8)tab_byte(tab + TAB_FP4, n), qk_ue4m3((dw >> (8 * s)) & 0xffu));
}
DEQ_KERNEL_T(nvfp4, deq_nvfp4, 64, 32, 2, 1)
