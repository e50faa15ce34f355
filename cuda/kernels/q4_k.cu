// q4_K weights x q8_K activations (qkern_formats::reference::q4_k).
// - dequantize: ggml-quants.c `dequantize_row_q4_K`: y = (d*sc)*q - (dmin*m), unfused
// - dot: `ggml_vec_dot_q4_K_q8_K` (AVX2): lane l of a super-block sums, over the 8
//   sub-blocks, scale * (4 products); acc = fma(yd*xd, lane, acc); the mins go into a 4-lane
//   chain acc_m = fma(-yd*xdmin, prod, acc_m) (prod from the q8_K bsums), reduced
//   (m0+m2)+(m1+m3) and added after hsum_float_8.
// Device layout: ggml's 144-byte blocks (d, dmin, scales[12], qs[128]). Thread mapping: MM_KERNELS_L4
// (mm_common.cuh): 2 * S threads per row, thread (h, s) owns lanes 4h..4h+3 of the sub-block
// pairs j = s, s + S, ... (one 16-byte qs load each) and the mins chain of tokens 2s + h mod 2S.

#include "kquants.cuh"

template <int NTM, int S>
QK_DEV void mm_q4_k(const MmArgs& A, const MmCtxW& c) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, h = c.h, q = 2u * c.s + h;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 144u;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs;
    const float* ad = (const float*)J.a_d;
    const i16* bs = (const i16*)J.a_x;
    constexpr int KM = (NTM + 2 * S - 1) / (2 * S);  // mins chains per thread
    float acc[NTM][4], accm[KM][4];
    mm_zero<NTM>(acc);
    mm_zero<KM>(accm);
QK_UNROLL(QK_UNROLL_KQ(NTM))
    for (u32 b = 0; b < nb; ++b) {
        const u8* blk = w + 144u * b;
        mm_pf<QK_PF_Q4K, (NTM >= 2)>(blk + 144u * QK_PF_Q4K, b, nb, 144u, q);
        const uint4 hdr = ld128(blk);  // d, dmin | scales[12]
        const float xd = qk_h2f((u16)(hdr.x & 0xffffu)), xdmin = qk_h2f((u16)(hdr.x >> 16));
        u32 u0, u1, u2, u3;
        kq_unpack(hdr.y, hdr.z, hdr.w, &u0, &u1, &u2, &u3);
        kq_lanes<NTM, S, false>(acc, blk + 16u, uint4(), u0, u1, xd, ad, aq, capw, b, h, c.s);  // no qh
#pragma unroll
        for (int k = 0; k < KM; ++k) {
            const u32 t = (u32)(k * 2 * S) + q;
            if (t < c.nt) {
                const float dmin = qk_mul(-qk_ld(ad + (u64)b * capw + t), xdmin);
                i32 prod[4];
                kq_mins_prod(bs + ((u64)t * nb + b) * 16u, u2, u3, prod);
#pragma unroll
                for (int m = 0; m < 4; ++m) accm[k][m] = qk_fma(dmin, qk_i2f(prod[m]), accm[k][m]);
            }
        }
    }
    float hs[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) hs[t] = mm_hsum_b(acc[t]);
#pragma unroll
    for (int k = 0; k < KM; ++k) {
        const u32 t = (u32)(k * 2 * S) + q;
        const float m = qk_add(qk_add(accm[k][0], accm[k][2]), qk_add(accm[k][1], accm[k][3]));
        mm_store_t(A, c, t, qk_add(mm_pick<NTM>(hs, t), m));
    }
}
MM_KERNELS_L4(q4_k, mm_q4_k, 1)
MM_KERNELS_L4(q4_k, mm_q4_k, 4)
QK_DEV void mma_q4_k(const MmArgs& A) { kq_mma<false, QK_PF_MMA_Q4K>(A); }
MMA_KERNEL(q4_k, mma_q4_k, QK_MINB_MMA_Q4K)

QK_DEV float deq_q4_k(const u8* blk, u32, u32 e, const u32*) {
    const u32 dd = ld32(blk);
    const float d = qk_h2f((u16)(dd & 0xffffu)), mn = qk_h2f((u16)(dd >> 16));
    const u32 j = e / 64, half = (e % 64) / 32, l = e % 32;
    u32 sc, m;
    kq_scale_min(blk + 4, 2 * j + half, &sc, &m);
    const float d1 = qk_mul(d, (float)sc), m1 = qk_mul(mn, (float)m);
    const u32 qb = blk[16 + 32 * j + l];
    const u32 q = half ? (qb >> 4) : (qb & 0xfu);
    return qk_sub(qk_mul(d1, (float)q), m1);
}
DEQ_KERNEL(q4_k, deq_q4_k, 256, 144, 0)
