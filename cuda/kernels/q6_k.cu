// q6_K weights x q8_K activations (qkern_formats::reference::q6_k).
// - dequantize: ggml-quants.c `dequantize_row_q6_K`: y = (d*sc) * (q - 32)
// - dot: `ggml_vec_dot_q6_K_q8_K` (AVX2): unsigned 6-bit quants (0..63) times q8, scaled by
//   the signed i8 scales (lanes 0-3 of sub-block `is` take scales[2is], lanes 4-7
//   scales[2is+1]); lane -= (bsums[2l]*sc[2l] + bsums[2l+1]*sc[2l+1]) << 5; acc = fma(d, lane,
//   acc).
// Device layout: split (208-byte bodies ql[128] qh[64] scales[16], then the fp16 d array).
// Thread mapping (mm_common.cuh MmCtxW, lanes as MM_KERNELS_L4): thread (h, s) owns lanes
// 4h..4h+3 of the sub-blocks is = s, s + S, ... (scale scales[2is + h]), 16-byte loads.

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV void mm_q6_k(const MmArgs& A, const MmCtxW& c) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, h = c.h;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 208u;
    const u16* wd = (const u16*)J.wd + (u64)c.row * nb;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs;
    const float* ad = (const float*)J.a_d;
    const i16* bsum = (const i16*)J.a_x;
    float acc[NTM][4];
    mm_zero<NTM>(acc);
QK_UNROLL(QK_UNROLL_KQ(NTM))
    for (u32 b = 0; b < nb; ++b) {
        const u8* body = w + 208u * b;
        mm_pf<QK_PF_Q6K, (NTM >= 2)>(body + 208u * QK_PF_Q6K, b, nb, 208u, 2u * c.s + c.h);
        const float xd = qk_h2f(qk_ld(wd + b));
        // This thread's sub-blocks is = s, s + S, ...: ql words (16 bytes: the low nibbles for k < 2,
        // the high ones for k >= 2), qh words, and the scale scales[2is + h] (byte 2 (is & 1) + h
        // of scale word is >> 1).
        const uint4 sc16 = ld128(body + 192u);
        const u32 scv0 = h ? sc16.z : sc16.x, scv1 = h ? sc16.w : sc16.y;  // scales[8h..8h+8]
        uint4 qlv[8 / S], qhv[8 / S];
        i32 sc[8 / S];
#pragma unroll
        for (int k8 = 0; k8 < 8 / S; ++k8) {
            const u32 is = (u32)(k8 * S) + c.s;
            const u32 j = is >> 2, k = is & 3u;
            qlv[k8] = ld128(body + 64u * j + 32u * (k & 1u) + 16u * h);
            qhv[k8] = ld128(body + 128u + 32u * j + 16u * h);
            const u32 wi = is >> 1;
            const u32 sw = wi < 2 ? (wi == 0 ? sc16.x : sc16.y) : (wi == 2 ? sc16.z : sc16.w);
            sc[k8] = (i32)(i8)(u8)(sw >> (16u * (is & 1u) + 8u * h));
        }
        float da[NTM], d[NTM];
        ld_tok_f<NTM>(ad + (u64)b * capw, da);
#pragma unroll
        for (int t = 0; t < NTM; ++t) d[t] = qk_mul(da[t], xd);
        // One lane at a time (fewer live registers): its sum over the sub-blocks, minus its
        // q8sclsub (bsums[2l] * scales[2l] + bsums[2l + 1] * scales[2l + 1]) << 5, then its
        // float chain step.
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            i32 isum[NTM];
#pragma unroll
            for (int t = 0; t < NTM; ++t) isum[t] = 0;
#pragma unroll
            for (int k8 = 0; k8 < 8 / S; ++k8) {
                const u32 is = (u32)(k8 * S) + c.s;
                const u32 k = is & 3u;
                const u32 qlw = q4w(qlv[k8], i);
                const u32 qhw = q4w(qhv[k8], i);
                const i32 qq = (i32)(((k < 2 ? qlw : qlw >> 4) & 0x0f0f0f0fu) | (((qhw >> (2u * k)) & 0x03030303u) << 4));
                u32 av[NTM];
                ld_tok<NTM>(aq + (u64)(64u * b + 8u * is + 4u * h + (u32)i) * capw, av);
#pragma unroll
                for (int t = 0; t < NTM; ++t) isum[t] += sc[k8] * qk_dp4a(qq, (i32)av[t], 0);
            }
            const u32 scp = i < 2 ? scv0 : scv1;  // scales[2l], scales[2l + 1] in bytes 2 (i & 1), +1
#pragma unroll
            for (int t = 0; t < NTM; ++t) {
                const u32 bw = qk_ld((const u32*)(bsum + ((u64)t * nb + b) * 16u) + 4u * h + (u32)i);
                const i32 sub = (i & 1) ? qk_dp2a_hi((i32)bw, (i32)scp, 0) : qk_dp2a_lo((i32)bw, (i32)scp, 0);
                const i32 v = (i32)((u32)mm_reduce_w<S>(isum[t]) - ((u32)sub << 5));
                acc[t][i] = qk_fma(d[t], qk_i2f(v), acc[t][i]);
            }
        }
    }
    float hs[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) hs[t] = mm_hsum_b(acc[t]);
    if (h == 0 && c.s == 0)
#pragma unroll
        for (int t = 0; t < NTM; ++t) mm_store_t(A, c, (u32)t, hs[t]);
}
MM_KERNELS_L4(q6_k, mm_q6_k, 1)
MM_KERNELS_L4(q6_k, mm_q6_k, 4)

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
