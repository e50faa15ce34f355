// iq4_nl weights x q8_0 activations (qkern_formats::reference::iq4_nl).
// - dequantize: ggml-quants.c `dequantize_row_iq4_nl`: y = d * kvalues_iq4nl[q]
// - dot: `ggml_vec_dot_iq4_nl_q8_0` (AVX2): blocks in pairs, the even block into accum1 and
//   the odd one into accum2 (acc = fma(dy*dx, lane, acc)), sumf = hsum_float_8(accum1 +
//   accum2); an odd last block goes through the scalar tail `sumf += d * (sumi1 + sumi2)`,
//   which gcc contracts into one fma.
// Device layout: split (bodies of 16 nibble bytes, then the fp16 d array).

#include "mm_common.cuh"

template <int NTM, int S>
QK_DEV float mm_iq4_nl(const MmArgs& A, const MmCtx& c) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, cols = A.cols, l = c.l;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 16u + 4u * (l & 3u);
    const u16* wd = (const u16*)J.wd + (u64)c.row * nb;
    const u8* aq = (const u8*)J.a_qs + 4u * l;
    const float* ad = (const float*)J.a_d;
    u32 kv[4];
    for (int i = 0; i < 4; ++i) kv[i] = qk_ld((const u32*)A.tab + TAB_IQ4NL + i);
    float acc1[NTM], acc2[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) acc1[t] = acc2[t] = 0.0f;
    const u32 pairs = nb / 2;
    for (u32 p = 0; p < pairs; ++p) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const u32 b = 2u * p + (u32)k;
            const u32 qw = ld32(w + 16u * b);
            const i32 v = (i32)qk_lut16((l < 4 ? qw : qw >> 4) & 0x0f0f0f0fu, kv);
            const float dx = qk_h2f(qk_ld(wd + b));
#pragma unroll
            for (int t = 0; t < NTM; ++t) {
                if ((u32)t < c.nt) {
                    const i32 av = (i32)ld32(aq + (u64)t * cols + 32u * b);
                    const float d = qk_mul(qk_ld(ad + (u64)t * nb + b), dx);
                    const float f = qk_i2f_small(qk_dp4a(v, av, 0));
                    if (k == 0) acc1[t] = qk_fma(d, f, acc1[t]);
                    else acc2[t] = qk_fma(d, f, acc2[t]);
                }
            }
        }
    }
    float sum[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) sum[t] = qk_add(acc1[t], acc2[t]);
    float sumf = mm_hsum_pick<NTM>(sum, l);
    if (nb & 1u) {
        const u32 b = nb - 1u;
        const u32 qw = ld32(w + 16u * b);
        const i32 v = (i32)qk_lut16((l < 4 ? qw : qw >> 4) & 0x0f0f0f0fu, kv);
        const float dx = qk_h2f(qk_ld(wd + b));
        i32 tot[NTM];
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            i32 p = 0;
            if ((u32)t < c.nt) p = qk_dp4a(v, (i32)ld32(aq + (u64)t * cols + 32u * b), 0);
            p += qk_shfl_xor_i(p, 4);
            p += qk_shfl_xor_i(p, 2);
            p += qk_shfl_xor_i(p, 1);
            tot[t] = p;
        }
        if (l < c.nt) {
            const float d = qk_mul(qk_ld(ad + (u64)l * nb + b), dx);
            sumf = qk_fma(d, qk_i2f(mm_pick_i<NTM>(tot, l)), sumf);
        }
    }
    return sumf;
}
MM_KERNELS_S(iq4_nl, mm_iq4_nl, 1)

QK_DEV float deq_iq4_nl(const u8* body, u16 d16, u32 e, const u32* tab) {
    const u32 n = e < 16 ? (body[e] & 0xfu) : (body[e - 16] >> 4);
    return qk_mul(qk_h2f(d16), (float)(i8)tab_byte(tab + TAB_IQ4NL, n));
}
DEQ_KERNEL(iq4_nl, deq_iq4_nl, 32, 16, 1)
