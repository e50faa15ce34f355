// nvfp4 weights x q8_0 activations (qkern_formats::reference::nvfp4).
// - dequantize: ggml-quants.c `dequantize_row_nvfp4`: y = kvalues_fp4[q] * ue4m3(d[s])
//   (doubled E2M1 values, halved scale); element j of sub-block s is the low nibble of
//   qs[8s + j], element j+8 the high nibble.
// - dot: `ggml_vec_dot_nvfp4_q8_0` (AVX2): two 8-lane steps per block, one per q8_0 block k;
//   lanes 0-3 use ue4m3(d[2k]) * dy, lanes 4-7 ue4m3(d[2k+1]) * dy: acc = fma(s, lane, acc).
// Device layout: ggml's 36-byte blocks. Two threads per row: in step k thread h owns lanes
// 4h..4h+3, i.e. sub-block 2k+h, whose scale its 4 lanes share.

#include "mm_common.cuh"

template <int NTM>
QK_DEV void mm_nvfp4(const MmArgs& A, const MmCtxB& c, float* res) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, capw = J.capw, h = c.h;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 36u;
    const u32* aq = (const u32*)J.a_qs + (u64)(4u * h) * capw;
    const float* ad = (const float*)J.a_d;
    u32 kv[4];
    for (int i = 0; i < 4; ++i) kv[i] = qk_ld((const u32*)A.tab + TAB_FP4 + i);
    float acc[NTM][4];
#pragma unroll
    for (int t = 0; t < NTM; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[t][i] = 0.0f;
#pragma unroll 2
    for (u32 b = 0; b < nb; ++b) {
        const u8* blk = w + 36u * b;
        const u32 dw = ld32(blk);
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const u32 sb = 2u * (u32)k + h;
            const u32 w0 = ld32(blk + 4 + 8u * sb), w1 = ld32(blk + 8 + 8u * sb);
            // lane 4h+i: word 2sb + (i & 1), high nibbles for i >= 2
            i32 v[4];
            v[0] = (i32)qk_lut16(w0 & 0x0f0f0f0fu, kv);
            v[1] = (i32)qk_lut16(w1 & 0x0f0f0f0fu, kv);
            v[2] = (i32)qk_lut16((w0 >> 4) & 0x0f0f0f0fu, kv);
            v[3] = (i32)qk_lut16((w1 >> 4) & 0x0f0f0f0fu, kv);
            const float ue = qk_ue4m3(dw >> (8u * sb));
            const u32 ab = 2u * b + (u32)k;
            float da[NTM];
            ld_tok_f<NTM>(ad + (u64)ab * capw, da);
            u32 av[4][NTM];
#pragma unroll
            for (int i = 0; i < 4; ++i) ld_tok<NTM>(aq + (u64)(8u * ab + i) * capw, av[i]);
#pragma unroll
            for (int t = 0; t < NTM; ++t) {
                const float s = qk_mul(ue, da[t]);
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[t][i] = qk_fma(s, qk_i2f_small(qk_dp4a(v[i], (i32)av[i][t], 0)), acc[t][i]);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NTM; ++t) res[t] = mm_hsum_b(acc[t]);
}
MM_KERNELS_B(nvfp4, mm_nvfp4)

QK_DEV float deq_nvfp4(const u8* blk, u16, u32 e, const u32* tab) {
    const u32 s = e / 16, j = e % 16;
    const u32 byte = blk[4 + 8 * s + (j & 7)];
    const u32 n = j < 8 ? (byte & 0xfu) : (byte >> 4);
    return qk_mul((float)(i8)tab_byte(tab + TAB_FP4, n), qk_ue4m3(blk[s]));
}
DEQ_KERNEL(nvfp4, deq_nvfp4, 64, 36, 0)
