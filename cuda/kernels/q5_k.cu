// q5_K weights x q8_K activations (qkern_formats::reference::q5_k).
// - dequantize: ggml-quants.c `dequantize_row_q5_K`: y = (d*sc)*(q + 16h) - (dmin*m), unfused
// - dot: `ggml_vec_dot_q5_K_q8_K` (AVX2): as q4_K with the fifth bit from qh; the mins go
//   into a scalar `summs += dmin * hsum(prod)`, which gcc contracts into an fma, added after
//   hsum_float_8.
// Device layout: ggml's 176-byte blocks (d, dmin, scales[12], qh[32], qs[128]).

#include "kquants.cuh"

template <int NTM, int S>
QK_DEV float mm_q5_k(const MmArgs& A, const MmCtx& c) {
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, l = c.l;
    const u8* w = (const u8*)J.w + (u64)c.row * nb * 176u;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs + (u64)l * capw;
    const float* ad = (const float*)J.a_d;
    const bool own = l < c.nt;
    const i16* bs = (const i16*)J.a_x + (u64)l * nb * 16u;
    float acc[NTM], summs = 0.0f;
#pragma unroll
    for (int t = 0; t < NTM; ++t) acc[t] = 0.0f;
QK_UNROLL(QK_UNROLL_K)
    for (u32 b = 0; b < nb; ++b) {
        const u8* blk = w + 176u * b;
        const uint4 hdr = ld128(blk);  // d, dmin | scales[12]
        const float xd = qk_h2f((u16)(hdr.x & 0xffffu)), xdmin = qk_h2f((u16)(hdr.x >> 16));
        u32 u0, u1, u2, u3;
        kq_unpack(hdr.y, hdr.z, hdr.w, &u0, &u1, &u2, &u3);
        const u32 qhw = ld32(blk + 16 + 4u * l);
        i32 isum[NTM];
#pragma unroll
        for (int t = 0; t < NTM; ++t) isum[t] = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if ((u32)j % S != c.s) continue;
            const u32 qw = ld32(blk + 48 + 32 * j + 4u * l);
            const i32 lo = (i32)((qw & 0x0f0f0f0fu) | (((qhw >> (2 * j)) & 0x01010101u) << 4));
            const i32 hi = (i32)(((qw >> 4) & 0x0f0f0f0fu) | (((qhw >> (2 * j + 1)) & 0x01010101u) << 4));
            const i32 sl = (i32)kq_byte(u0, u1, 2 * j), sh = (i32)kq_byte(u0, u1, 2 * j + 1);
u32 alo[NTM], ahi[NTM];
            ld_tok<NTM>(aq + (u64)(64u * b + 16u * j) * capw, alo);
            ld_tok<NTM>(aq + (u64)(64u * b + 16u * j + 8u) * capw, ahi);
#pragma unroll
            for (int t = 0; t < NTM; ++t) isum[t] += sl * qk_dp4a(lo, (i32)alo[t], 0) + sh * qk_dp4a(hi, (i32)ahi[t], 0);
        }
float da[NTM];
        ld_tok_f<NTM>(ad + (u64)b * capw, da);
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            const i32 v = mm_reduce<S>(isum[t]);
            acc[t] = qk_fma(qk_mul(da[t], xd), qk_i2f(v), acc[t]);
        }
        if (own) {
            const float dmin = qk_mul(-qk_ld(ad + (u64)b * capw + l), xdmin);
            i32 prod[4];
            kq_mins_prod(bs + 16u * b, u2, u3, prod);
            const i32 hs = (i32)((u32)prod[0] + (u32)prod[1] + (u32)prod[2] + (u32)prod[3]);
            summs = qk_fma(dmin, qk_i2f(hs), summs);
        }
    }
    return qk_add(mm_hsum_pick<NTM>(acc, l), summs);
}
MM_KERNELS_S(q5_k, mm_q5_k, 1)
MM_KERNELS_S(q5_k, mm_q5_k, 4)

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
DEQ_KERNEL(q5_k, deq_q5_k, 256, 176, 0)
