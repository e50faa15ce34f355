// q5_K weights x q8_K activations (qkern_formats::reference::q5_k).
// - dequantize: ggml-quants.c `dequantize_row_q5_K`: y = (d*sc)*(q + 16h) - (dmin*m), unfused
// - dot: `ggml_vec_dot_q5_K_q8_K` (AVX2): as q4_K with the fifth bit from qh; the mins go
//   into a scalar `summs += dmin * hsum(prod)`, which gcc contracts into an fma, added after
//   hsum_float_8.
// Device layout: ggml's 176-byte blocks (d, dmin, scales[12], qh[32], qs[128]), tiled as q4_K's.
// Thread mapping as
// q4_K (MM_KERNELS_L4): lanes 4h..4h+3 of the sub-block pairs j = s, s + S, ...; the summs
// chain of tokens 2s + h mod 2S.

#include "kquants.cuh"

template <int NTM, int S>
QK_DEV void mm_q5_k(const MmArgs& A, const MmCtxW& c) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, h = c.h, q = 2u * c.s + h;
    const u8* w = (const u8*)J.w + qk_wrow0(nb, c.row) * 176u;
    const u32 ws = qk_wstep(J.rows, c.row) * 176u;  // bytes from one of the row's blocks to the next
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs;
    const float* ad = (const float*)J.a_d;
    const i16* bs = (const i16*)J.a_x;
    constexpr int KM = (NTM + 2 * S - 1) / (2 * S);  // summs chains per thread
    float acc[NTM][4], summs[KM];
    mm_zero<NTM>(acc);
#pragma unroll
    for (int k = 0; k < KM; ++k) summs[k] = 0.0f;
QK_UNROLL(QK_UNROLL_KQ(NTM))
    for (u32 b = 0; b < nb; ++b) {
        const u8* blk = w + ws * b;
        constexpr int PF = QK_PF_DIST(NTM, QK_PF1_Q5K, QK_PF_Q5K, NTM >= 2);
        mm_pf<PF, true>(blk + ws * PF, b, nb, 176u, q);
        const uint4 hdr = ld128(blk);  // d, dmin | scales[12]
        const float xd = qk_h2f((u16)(hdr.x & 0xffffu)), xdmin = qk_h2f((u16)(hdr.x >> 16));
        u32 u0, u1, u2, u3;
        kq_unpack(hdr.y, hdr.z, hdr.w, &u0, &u1, &u2, &u3);
        const uint4 qhv = ld128(blk + 16u + 16u * h);  // qh words of lanes 4h..4h+3
        kq_lanes<NTM, S, true>(acc, blk + 48u, qhv, u0, u1, xd, ad, aq, capw, b, h, c.s);
#pragma unroll
        for (int k = 0; k < KM; ++k) {
            const u32 t = (u32)(k * 2 * S) + q;
            if (t < c.nt) {
                const float dmin = qk_mul(-qk_ld(ad + (u64)b * capw + t), xdmin);
                i32 prod[4];
                kq_mins_prod(bs + ((u64)t * nb + b) * 16u, u2, u3, prod);
                const i32 hsm = (i32)((u32)prod[0] + (u32)prod[1] + (u32)prod[2] + (u32)prod[3]);
                summs[k] = qk_fma(dmin, qk_i2f(hsm), summs[k]);
            }
        }
    }
    float hs[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) hs[t] = mm_hsum_b(acc[t]);
#pragma unroll
    for (int k = 0; k < KM; ++k) {
        const u32 t = (u32)(k * 2 * S) + q;
        mm_store_t(A, c, t, qk_add(mm_pick<NTM>(hs, t), summs[k]));
    }
}
MM_KERNELS_L4(q5_k, mm_q5_k, 1)
MM_KERNELS_L4(q5_k, mm_q5_k, 4)
QK_DEV void mma_q5_k(const MmArgs& A) { kq_mma<true, QK_PF_MMA_Q5K>(A); }
MMA_KERNEL(q5_k, mma_q5_k, QK_MINB_MMA_Q5K)

QK_DEV float deq_q5_k(const u8* blk, u32, u32 e, const u32*) {
    const u32 dd = ld32(blk);
    const float d = qk_h2f((u16)(dd & 0xffffu)), mn = qk_h2f((u16)(dd >> 16));
    const u32 j = e / 64, half = (e % 64) / 32, l = e % 32;
    u32 sc, m;
    kq_scale_min(blk + 4, 2 * j + half, &sc, &m);
    const float d1 = qk_mul(d, (float)sc), m1 = qk_mul(mn, (float)m);
    const u32 qb = blk[48 + 32 * j + l];
    const u32 h = (blk[16 + l] >> (2 * j + half)) & 1u;
    const u32 q = (half ? (qb >> 4) : (qb & 0xfu)) + 16u * h;
    return qk_sub(qk_mul(d1, (float)q), m1);
}
DEQ_KERNEL_T(q5_k, deq_q5_k, 256, 176, 0, 1)
