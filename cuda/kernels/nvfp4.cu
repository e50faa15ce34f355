// nvfp4 weights x q8_0 activations (qkern_formats::reference::nvfp4).
// - dequantize: ggml-quants.c `dequantize_row_nvfp4`: y = kvalues_fp4[q] * ue4m3(d[s])
//   (doubled E2M1 values, halved scale); element j of sub-block s is the low nibble of
//   qs[8s + j], element j+8 the high nibble.
// - dot: `ggml_vec_dot_nvfp4_q8_0` (AVX2): two 8-lane steps per block, one per q8_0 block k;
//   lanes 0-3 use ue4m3(d[2k]) * dy, lanes 4-7 ue4m3(d[2k+1]) * dy: acc = fma(s, lane, acc).
// Device layout: ggml's 36-byte blocks.

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV float mm_nvfp4(const MmArgs& A, const MmCtx& c) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, cols = A.cols, l = c.l, nba = 2u * nb;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 36u;
    const u8* aq = (const u8*)J.a_qs + 4u * l;
    const float* ad = (const float*)J.a_d;
    u32 kv[4];
    for (int i = 0; i < 4; ++i) kv[i] = qk_ld((const u32*)A.tab + TAB_FP4 + i);
    const u32 ll = l & 3u;
    float acc[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) acc[t] = 0.0f;
    for (u32 b = 0; b < nb; ++b) {
        const u8* blk = w + 36u * b;
        const u32 dw = ld32(blk);
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const u32 sb = 2u * (u32)k + (l >> 2);
            const u32 word = ld32(blk + 4 + 4u * (2u * sb + (ll & 1u)));
            const i32 v = (i32)qk_lut16((ll >= 2 ? word >> 4 : word) & 0x0f0f0f0fu, kv);
            const float ue = qk_ue4m3(dw >> (8u * sb));
            const u32 ab = 2u * b + (u32)k;
#pragma unroll
            for (int t = 0; t < NTM; ++t) {
                if ((u32)t < c.nt) {
                    const i32 av = (i32)ld32(aq + (u64)t * cols + 32u * ab);
                    const float s = qk_mul(ue, qk_ld(ad + (u64)t * nba + ab));
                    acc[t] = qk_fma(s, qk_i2f_small(qk_dp4a(v, av, 0)), acc[t]);
                }
            }
        }
    }
    return mm_hsum_pick<NTM>(acc, l);
}
MM_KERNELS_S(nvfp4, mm_nvfp4, 1)

QK_DEV float deq_nvfp4(const u8* blk, u16, u32 e, const u32* tab) {
    const u32 s = e / 16, j = e % 16;
    const u32 byte = blk[4 + 8 * s + (j & 7)];
    const u32 n = j < 8 ? (byte & 0xfu) : (byte >> 4);
    return qk_mul((float)(i8)tab_byte(tab + TAB_FP4, n), qk_ue4m3(blk[s]));
}
DEQ_KERNEL(nvfp4, deq_nvfp4, 64, 36, 0)
