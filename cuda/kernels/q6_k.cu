// q6_K weights x q8_K activations (qkern_formats::reference::q6_k).
// - dequantize: ggml-quants.c `dequantize_row_q6_K`: y = (d*sc) * (q - 32)
// - dot: `ggml_vec_dot_q6_K_q8_K` (AVX2): unsigned 6-bit quants (0..63) times q8, scaled by
//   the signed i8 scales (lanes 0-3 of sub-block `is` take scales[2is], lanes 4-7
//   scales[2is+1]); lane -= (bsums[2l]*sc[2l] + bsums[2l+1]*sc[2l+1]) << 5; acc = fma(d, lane,
//   acc).
// Device layout: split (208-byte bodies ql[128] qh[64] scales[16], then the fp16 d array).

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV float mm_q6_k(const MmArgs& A, const MmCtx& c) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, l = c.l;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 208u;
    const u16* wd = (const u16*)J.wd + (u64)c.row * nb;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs + (u64)l * capw;
    const float* ad = (const float*)J.a_d;
    const i16* bsum = (const i16*)J.a_x;
    float acc[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) acc[t] = 0.0f;
QK_UNROLL(QK_UNROLL_K)
    for (u32 b = 0; b < nb; ++b) {
        const u8* body = w + 208u * b;
        const float xd = qk_h2f(qk_ld(wd + b));
        i32 isum[NTM];
#pragma unroll
        for (int t = 0; t < NTM; ++t) isum[t] = 0;
#pragma unroll
        for (int is = 0; is < 8; ++is) {
            if ((u32)is % S != c.s) continue;
            const int j = is >> 2, k = is & 3;
            const u32 qlw = ld32(body + 64 * j + 32 * (k & 1) + 4u * l);
            const u32 qhw = ld32(body + 128 + 32 * j + 4u * l);
            const i32 q = (i32)(((k < 2 ? qlw : qlw >> 4) & 0x0f0f0f0fu) | (((qhw >> (2 * k)) & 0x03030303u) << 4));
            const i32 sc = (i32)(i8)body[192 + 2 * is + (l >= 4 ? 1 : 0)];
u32 av[NTM];
            ld_tok<NTM>(aq + (u64)(64u * b + 8u * is) * capw, av);
#pragma unroll
            for (int t = 0; t < NTM; ++t) isum[t] += sc * qk_dp4a(q, (i32)av[t], 0);
        }
        // q8sclsub lane l: (bsums[2l]*scales[2l] + bsums[2l+1]*scales[2l+1]) << 5
        const u32 scw = ld16(body + 192 + 2u * l);
        const i32 sc0 = (i32)(i8)(scw & 0xffu), sc1 = (i32)(i8)(scw >> 8);
        float da[NTM];
        ld_tok_f<NTM>(ad + (u64)b * capw, da);
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            i32 v = mm_reduce<S>(isum[t]);
            const u32 bw = qk_ld((const u32*)(bsum + ((u64)t * nb + b) * 16u) + l);
            const i32 b0 = (i32)(i16)(bw & 0xffffu), b1 = (i32)(i16)(bw >> 16);
            const u32 sub = ((u32)(b0 * sc0) + (u32)(b1 * sc1)) << 5;
            v = (i32)((u32)v - sub);
            acc[t] = qk_fma(qk_mul(da[t], xd), qk_i2f(v), acc[t]);
        }
    }
    return mm_hsum_pick<NTM>(acc, l);
}
MM_KERNELS_S(q6_k, mm_q6_k, 1)
MM_KERNELS_S(q6_k, mm_q6_k, 4)

QK_DEV float deq_q6_k(const u8* body, u32 d16, u32 e, const u32*) {
    const u32 n = e / 128, r = e % 128, quarter = r / 32, l = r % 32, is = l / 16;
    const u32 qlb = body[64 * n + l + (quarter & 1u ? 32u : 0u)];
    const u32 qhb = body[128 + 32 * n + l];
    const u32 lo = quarter < 2 ? (qlb & 0xfu) : (qlb >> 4);
    const i32 q = (i32)(lo | (((qhb >> (2 * quarter)) & 3u) << 4)) - 32;
    const i32 sc = (i32)(i8)body[192 + 8 * n + is + 2 * quarter];
    return qk_mul(qk_mul(qk_h2f(d16), (float)sc), (float)q);
}
DEQ_KERNEL(q6_k, deq_q6_k, 256, 208, 1)
