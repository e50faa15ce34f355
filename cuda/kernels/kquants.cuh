// Shared pieces of q4_K and q5_K (their AVX2 dots differ only in q5_K's fifth bit and mins sum).
#pragma once
#include "mm_common.cuh"

// The AVX2 kmask unpacking of the 12 scale bytes (s0, s1, s2 little-endian words):
// sc[0..8] in the bytes of (*u0, *u1), mins[0..8] in (*u2, *u3); equals get_scale_min_k4.
QK_DEV void kq_unpack(u32 s0, u32 s1, u32 s2, u32* u0, u32* u1, u32* u2, u32* u3) {
    const u32 kmask1 = 0x3f3f3f3fu, kmask2 = 0x0f0f0f0fu, kmask3 = 0x03030303u;
    *u3 = ((s2 >> 4) & kmask2) | (((s1 >> 6) & kmask3) << 4);
    *u2 = s1 & kmask1;
    *u1 = (s2 & kmask2) | (((s0 >> 6) & kmask3) << 4);
    *u0 = s0 & kmask1;
}

QK_DEV u32 kq_byte(u32 lo, u32 hi, u32 k) { return ((k < 4 ? lo : hi) >> (8 * (k & 3))) & 0xffu; }

// `prod = _mm_madd_epi16(mins, _mm_hadd_epi16(bsums[0..8], bsums[8..16]))` for one token:
// q8s[k] = (i16)(bsums[2k] + bsums[2k+1]); prod[m] = mins[2m]*q8s[2m] + mins[2m+1]*q8s[2m+1].
// The 16 bsums of the token and block (32 bytes, 16-byte aligned) in two loads; w * 0x10001
// puts bsums[2k] + bsums[2k+1] (mod 2^16, as _mm_hadd_epi16) in the top half of word k; two top
// halves per word (prmt); prod[m] = dp2a(q8s pair, mins bytes).
// (kq_mins_q: the token's q8s pairs, shared by every row; kq_mins_dot: one row's products.)
QK_DEV void kq_mins_q(const i16* bs, u32* q) {
    const uint4 v0 = qk_ld((const uint4*)bs), v1 = qk_ld((const uint4*)bs + 1);
    const u32 w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
    for (int m = 0; m < 4; ++m) q[m] = qk_perm(w[2 * m] * 0x10001u, w[2 * m + 1] * 0x10001u, 0x7632u);
}
QK_DEV void kq_mins_dot(const u32* q, u32 u2, u32 u3, i32* prod) {
    prod[0] = qk_dp2a_lo((i32)q[0], (i32)u2, 0);
    prod[1] = qk_dp2a_hi((i32)q[1], (i32)u2, 0);
    prod[2] = qk_dp2a_lo((i32)q[2], (i32)u3, 0);
    prod[3] = qk_dp2a_hi((i32)q[3], (i32)u3, 0);
}
QK_DEV void kq_mins_prod(const i16* bs, u32 u2, u32 u3, i32* prod) {
    u32 q[4];
    kq_mins_q(bs, q);
    kq_mins_dot(q, u2, u3, prod);
}

// One super-block's lane step of q4_K (Q5 false) or q5_K (Q5 true) on the MM_KERNELS_L4
// lanes: thread (h, s) sums, one lane at a time (fewer live registers than all four at once),
// sl * dot(low nibbles, q8) + sh * dot(high nibbles, q8) over its sub-block pairs
// j = s, s + S, ... (`qs`: the block's 128 quant bytes; q5_K adds bit 2j / 2j + 1 of the lane's
// qh word from `qhv`), then acc[t][i] = fma(d_t * xd, lane, acc[t][i]) after the split
// reduction (d_t: token t's q8_K scale of block b, from `ad`).
// q4_K's lane sums stay below 2^22 in magnitude (8 x 63 x (4 x 15 x 128) = 3870720), so they are
// biased onto QK_BIAS (by the s = 0 thread) and unbiased by one add; q5_K's (31 for 15) need
// the conversion.
template <int NTM, int S, bool Q5>
QK_DEV void kq_lanes(float (*acc)[4], const u8* qs, uint4 qhv, u32 u0, u32 u1, float xd, const float* ad, const u32* aq,
                     u32 capw, u32 b, u32 h, u32 s) {
    uint4 qv[4 / S];
    i32 sl[4 / S], sh[4 / S];
#pragma unroll
    for (int k = 0; k < 4 / S; ++k) {
        const u32 j = (u32)(k * S) + s;
        qv[k] = ld128(qs + 32u * j + 16u * h);  // lanes 4h..4h+3 of pair j
        sl[k] = (i32)kq_byte(u0, u1, 2u * j);
        sh[k] = (i32)kq_byte(u0, u1, 2u * j + 1u);
    }
    float da[NTM], d[NTM];
    ld_tok_f<NTM>(ad + (u64)b * capw, da);
#pragma unroll
    for (int t = 0; t < NTM; ++t) d[t] = qk_mul(da[t], xd);
    const i32 bias0 = !Q5 && s == 0 ? QK_BIAS : 0;
    if (QK_Q8K_QUAD) {
        // Pair at a time: its 4 lanes' q8 words of each sub-block in one load a token
        // (ld_q8k4), the lane sums kept for all 4 lanes; the same integers, the same chains.
        i32 isum[4][NTM];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int t = 0; t < NTM; ++t) isum[i][t] = bias0;
#pragma unroll
        for (int k = 0; k < 4 / S; ++k) {
            const u32 j = (u32)(k * S) + s;
            // the low sub-block (low nibbles, 2j), then the high one (2j + 1): fewer live words
#pragma unroll
            for (int n = 0; n < 2; ++n) {
                u32 av[4][NTM];
                ld_q8k4<NTM>(aq, 16u * b + 4u * j + 2u * (u32)n + h, capw, av);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const u32 qw = q4w(qv[k], i), qhw = q4w(qhv, i);
                    const i32 x = Q5 ? (i32)(((qw >> (4 * n)) & 0x0f0f0f0fu) | (((qhw >> (2u * j + (u32)n)) & 0x01010101u) << 4))
                                     : (i32)((qw >> (4 * n)) & 0x0f0f0f0fu);
                    const i32 sc = n ? sh[k] : sl[k];
#pragma unroll
                    for (int t = 0; t < NTM; ++t) isum[i][t] += sc * qk_dp4a(x, (i32)av[i][t], 0);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int t = 0; t < NTM; ++t) {
                const i32 v = mm_reduce_w<S>(isum[i][t]);
                acc[t][i] = qk_fma(d[t], Q5 ? qk_i2f(v) : qk_unbias(v), acc[t][i]);
            }
        return;
    }
    const u8* ab = (const u8*)act_at((const u8*)aq, 64u * b + 16u * s + 4u * h, 4u * capw);  // word 4h of pair s
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const u32 qhw = q4w(qhv, i);
        i32 isum[NTM];
#pragma unroll
        for (int t = 0; t < NTM; ++t) isum[t] = bias0;
#pragma unroll
        for (int k = 0; k < 4 / S; ++k) {
            const u32 j = (u32)(k * S) + s;
            const u32 qw = q4w(qv[k], i);
            const i32 lo = Q5 ? (i32)((qw & 0x0f0f0f0fu) | (((qhw >> (2u * j)) & 0x01010101u) << 4))
                              : (i32)(qw & 0x0f0f0f0fu);
            const i32 hi = Q5 ? (i32)(((qw >> 4) & 0x0f0f0f0fu) | (((qhw >> (2u * j + 1u)) & 0x01010101u) << 4))
                              : (i32)((qw >> 4) & 0x0f0f0f0fu);
            u32 alo[NTM], ahi[NTM];
            if (QK_ACT_AT) {
                ld_tok<NTM>(act_at(ab, 16u * (u32)(k * S) + (u32)i, 4u * capw), alo);
                ld_tok<NTM>(act_at(ab, 16u * (u32)(k * S) + 8u + (u32)i, 4u * capw), ahi);
            } else {
                const u32* a = aq + (u64)(64u * b + 16u * j + 4u * h + (u32)i) * capw;
                ld_tok<NTM>(a, alo);
                ld_tok<NTM>(a + 8u * (u64)capw, ahi);
            }
#pragma unroll
            for (int t = 0; t < NTM; ++t)
                isum[t] += sl[k] * qk_dp4a(lo, (i32)alo[t], 0) + sh[k] * qk_dp4a(hi, (i32)ahi[t], 0);
        }
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            const i32 v = mm_reduce_w<S>(isum[t]);
            acc[t][i] = qk_fma(d[t], Q5 ? qk_i2f(v) : qk_unbias(v), acc[t][i]);
        }
    }
}

// q4_K (Q5 false) and q5_K (Q5 true) on tensor cores (mm_common.cuh "Tensor-core kernels"; used
// from args::mma_default_mask tokens). The 6-bit scales split as sc = 8 * hi + lo (hi, lo <= 7; quants <= 31, so every A
// byte is at most 217): lane = 8 * (A_hi . B) + (A_lo . B). q4_K's lanes stay below 2^22
// (kq_lanes), so the lo product starts from QK_BIAS in its C operand and one add converts;
// q5_K's do not, so both products (each below 2^22 in magnitude) start from QK_BIAS and are
// joined by fma(8, hi, lo), exact (an integer below 2^24). Per cell then the AVX2 chains as in
// kq_lanes and q4_k.cu / q5_k.cu: acc[L] = fma(yd * xd, lane L, acc[L]); q4_K's 4-lane mins
// chain, q5_K's summs chain (dmin = -yd * xdmin).
template <bool Q5, int PF>
QK_DEV void kq_mma(const MmArgs& A) {
    const MmaCtx c = mma_ctx(A);
    const MmJob& J = A.jobs[c.job];
    constexpr u32 BB = Q5 ? 176u : 144u, QS = Q5 ? 48u : 16u;
    constexpr int NM = Q5 ? 1 : 4;  // mins chains per cell
    const u32 nb = A.nb, q = c.q;
    // Tiled (layout.rs): the rows g and g + 8 of the warp's 16 (or the last row, for either past
    // it) are in one tile, so block b of row h is at w + b * ws + o[h], o = {0, o1}: one base
    // pointer, not one per row.
    const u64 w0 = qk_wrow0(nb, c.row[0]);
    const u8* w = (const u8*)J.w + w0 * BB;
    const u32 ws = qk_wstep(J.rows, c.row[0]) * BB, o1 = (u32)(qk_wrow0(nb, c.row[1]) - w0) * BB;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs + Q8K_TS * c.acol;  // token column g of B
    const float* ad = (const float*)J.a_d;
    const i16* bs = (const i16*)J.a_x;
    const u32* tk = c.tk;
    const i32 cz[4] = {0, 0, 0, 0}, cb[4] = {QK_BIAS, QK_BIAS, QK_BIAS, QK_BIAS};
    float acc[4][8], accm[4][NM];
    mma_zero(acc);
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int m = 0; m < NM; ++m) accm[x][m] = 0.0f;
QK_UNROLL(1)
    for (u32 b = 0; b < nb; ++b) {
        u32 qw[2][8], qh[2][8], slo[2][2], shi[2][2], u2[2], u3[2];
        float xd[2], xdm[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u8* blk = w + (ws * b + (h ? o1 : 0u));
            mm_pf<PF, true>(blk + ws * PF, b, nb, BB, q);
            const uint4 hdr = ld128(blk);  // d, dmin | scales[12]
            xd[h] = qk_h2f((u16)(hdr.x & 0xffffu));
            xdm[h] = qk_h2f((u16)(hdr.x >> 16));
            u32 u0, u1;
            kq_unpack(hdr.y, hdr.z, hdr.w, &u0, &u1, &u2[h], &u3[h]);
#pragma unroll
            for (int n = 0; n < 2; ++n) {
                const u32 sc = kq_byte(u0, u1, 2u * q + (u32)n);
                slo[h][n] = sc & 7u;
                shi[h][n] = sc >> 3;
            }
            ld_body<8, 16>(blk + QS + 32u * q, qw[h]);  // sub-block pair q: lanes 0..7
            if (Q5) ld_body<8, 16>(blk + 16u, qh[h]);
        }
        float d[4], dm[4];
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const float da = qk_ld(ad + (u64)b * capw + tk[k]);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                d[2 * h + k] = qk_mul(da, xd[h]);
                dm[2 * h + k] = qk_mul(-da, xdm[h]);
            }
        }
#pragma unroll
        for (int l = 0; l < 8; ++l) {
            const u32 qd = 16u * b + 4u * q + (u32)(l >> 2), wl = (u32)(l & 3);
            const u32 bv[2] = {qk_ld(q8k_at(aq, qd, wl, capw)),
                               qk_ld(q8k_at(aq, qd + 2u, wl, capw))};
            u32 alo[4], ahi[4];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                u32 n0 = qw[h][l] & 0x0f0f0f0fu, n1 = (qw[h][l] >> 4) & 0x0f0f0f0fu;
                if (Q5) {
                    n0 |= ((qh[h][l] >> (2u * q)) & 0x01010101u) << 4;
                    n1 |= ((qh[h][l] >> (2u * q + 1u)) & 0x01010101u) << 4;
                }
                alo[h] = n0 * slo[h][0];
                ahi[h] = n0 * shi[h][0];
                alo[2 + h] = n1 * slo[h][1];
                ahi[2 + h] = n1 * shi[h][1];
            }
            i32 chi[4], clo[4];
            qk_mma_u8s8(ahi, bv, Q5 ? cb : cz, chi);
            qk_mma_u8s8(alo, bv, cb, clo);
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const float lane = Q5 ? qk_fma(8.0f, qk_unbias(chi[x]), qk_unbias(clo[x]))
                                      : qk_unbias((i32)((u32)chi[x] * 8u + (u32)clo[x]));
                acc[x][l] = qk_fma(d[x], lane, acc[x][l]);
            }
        }
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            u32 q8s[4];
            kq_mins_q(bs + ((u64)tk[k] * nb + b) * 16u, q8s);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                i32 prod[4];
                kq_mins_dot(q8s, u2[h], u3[h], prod);
                const int x = 2 * h + k;
                if (Q5) {
                    const i32 hsm = (i32)((u32)prod[0] + (u32)prod[1] + (u32)prod[2] + (u32)prod[3]);
                    accm[x][0] = qk_fma(dm[x], qk_i2f(hsm), accm[x][0]);
                } else {
#pragma unroll
                    for (int m = 0; m < NM; ++m) accm[x][m] = qk_fma(dm[x], qk_i2f_small(prod[m]), accm[x][m]);
                }
            }
        }
    }
#pragma unroll
    for (int x = 0; x < 4; ++x) {
        const float m = Q5 ? accm[x][0] : qk_add(qk_add(accm[x][0], accm[x][NM > 2 ? 2 : 0]),
                                                 qk_add(accm[x][NM > 1 ? 1 : 0], accm[x][NM > 3 ? 3 : 0]));
        mma_store(A, c, x, qk_add(mm_hsum8(acc[x]), m));
    }
}

// get_scale_min_k4(j, q) on the raw scale bytes (the dequantizers' form).
QK_DEV void kq_scale_min(const u8* q, u32 j, u32* sc, u32* m) {
    if (j < 4) {
        *sc = q[j] & 63u;
        *m = q[j + 4] & 63u;
    } else {
        *sc = (q[j + 4] & 0xfu) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}
