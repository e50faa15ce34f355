// nvfp4 weights x q8_0 activations (qkern_formats::reference::nvfp4).
// - dequantize: ggml-quants.c `dequantize_row_nvfp4`: y = kvalues_fp4[q] * ue4m3(d[s])
//   (doubled E2M1 values, halved scale); element j of sub-block s is the low nibble of
//   qs[8s + j], element j+8 the high nibble.
// - dot: `ggml_vec_dot_nvfp4_q8_0` (AVX2): two 8-lane steps per block, one per q8_0 block k;
//   lanes 0-3 use ue4m3(d[2k]) * dy, lanes 4-7 ue4m3(d[2k+1]) * dy: acc = fma(s, lane, acc).
// Device layout: tiled (layout.rs) ggml 36-byte blocks. Two threads per row: in step k thread h owns lanes
// 4h..4h+3, i.e. sub-block 2k+h, whose scale its 4 lanes share. A "unit" is one step
// (32 elements, one q8_0 activation block), two per nvfp4 block.

#include "mm_common.cuh"

struct UnitNvfp4 {
    static const u32 UNITS_PER_BLOCK = 2;
    template <int NTM>
    static QK_MEMBER void unit(const MmArgs& A, const MmJob& J, u32 row, u32 u, u32 h, i32 (*isum)[NTM], float* d,
                            float*) {
        const u32 nb = A.nb, capw = J.capw;
        u32 kv[4];
        for (int i = 0; i < 4; ++i) kv[i] = qk_ld((const u32*)A.tab + TAB_FP4 + i);
        const u32 b = u / 2, k = u % 2;
        const u8* blk = (const u8*)J.w + qk_wblk(J.rows, nb, row, b) * 36u;
        const u32 sb = 2u * k + h;
        const u32 w0 = ld32(blk + 4 + 8u * sb), w1 = ld32(blk + 8 + 8u * sb);
        // lane 4h+i: word 2sb + (i & 1), high nibbles for i >= 2
        u32 v4[4];
        qk_lut16x2(w0, kv, &v4[0], &v4[2]);
        qk_lut16x2(w1, kv, &v4[1], &v4[3]);
        const float ue = qk_ue4m3(ld32(blk) >> (8u * sb));
        const u32* aq = (const u32*)J.a_qs + (u64)(8u * u + 4u * h) * capw;
        float da[NTM];
        ld_tok_f<NTM>((const float*)J.a_d + (u64)u * capw, da);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const i32 v = (i32)v4[i];
            u32 av[NTM];
            ld_tok<NTM>(aq + (u64)i * capw, av);
#pragma unroll
            for (int t = 0; t < NTM; ++t) isum[i][t] = qk_dp4a(v, (i32)av[t], 0);
        }
#pragma unroll
        for (int t = 0; t < NTM; ++t) d[t] = qk_mul(ue, da[t]);
    }
};

template <int NTM>
QK_DEV void mm_nvfp4(const MmArgs& A, const MmCtxB& c, float* res) {
    const MmJob& J = A.jobs[c.job];
    float acc[NTM][4];
    mm_zero<NTM>(acc);
QK_UNROLL(QK_UNROLL_B)
    for (u32 u = 0; u < 2u * A.nb; ++u) {
        i32 isum[4][NTM];
        float d[NTM];
        UnitNvfp4::unit<NTM>(A, J, c.row, u, c.h, isum, d, nullptr);
        mm_chain_b<NTM>(acc, isum, d);
    }
#pragma unroll
    for (int t = 0; t < NTM; ++t) res[t] = mm_hsum_b(acc[t]);
}
MM_KERNELS_B(nvfp4, mm_nvfp4)
MM_KERNELS_K(nvfp4, UnitNvfp4, MmPlain)

QK_DEV float deq_nvfp4(const u8* blk, u16, u32 e, const u32* tab) {
    const u32 s = e / 16, j = e % 16;
    const u32 byte = blk[4 + 8 * s + (j & 7)];
    const u32 n = j < 8 ? (byte & 0xfu) : (byte >> 4);
    return qk_mul((float)(i8)tab_byte(tab + TAB_FP4, n), qk_ue4m3(blk[s]));
}
DEQ_KERNEL_T(nvfp4, deq_nvfp4, 64, 36, 0, 1)
