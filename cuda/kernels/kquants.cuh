// Shared pieces of q4_K and q5_K.
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
QK_DEV void kq_mins_prod(const i16* bs, u32 u2, u32 u3, i32* prod) {
    for (int m = 0; m < 4; ++m) {
        const u32 w0 = qk_ld((const u32*)bs + 2 * m);      // bsums 4m, 4m+1
        const u32 w1 = qk_ld((const u32*)bs + 2 * m + 1);  // bsums 4m+2, 4m+3
        const i32 q0 = (i32)(i16)(u16)(((w0 & 0xffffu) + (w0 >> 16)) & 0xffffu);
        const i32 q1 = (i32)(i16)(u16)(((w1 & 0xffffu) + (w1 >> 16)) & 0xffffu);
        const i32 m0 = (i32)kq_byte(u2, u3, 2 * m), m1 = (i32)kq_byte(u2, u3, 2 * m + 1);
        prod[m] = (i32)((u32)(m0 * q0) + (u32)(m1 * q1));
    }
}

// kq_mins_prod with dp2a: the 16 bsums of one token and block (32 bytes, 16-byte aligned) in
// two loads; w * 0x10001 puts bsums[2k] + bsums[2k+1] (mod 2^16, as _mm_hadd_epi16) in the top
// half of word k; two top halves per word (prmt); prod[m] = dp2a(q8s pair, mins bytes).
QK_DEV void kq_mins_prod_dp2a(const i16* bs, u32 u2, u32 u3, i32* prod) {
    const uint4 v0 = qk_ld((const uint4*)bs), v1 = qk_ld((const uint4*)bs + 1);
    const u32 w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
    u32 q[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) q[m] = qk_perm(w[2 * m] * 0x10001u, w[2 * m + 1] * 0x10001u, 0x7632u);
    prod[0] = qk_dp2a_lo((i32)q[0], (i32)u2, 0);
    prod[1] = qk_dp2a_hi((i32)q[1], (i32)u2, 0);
    prod[2] = qk_dp2a_lo((i32)q[2], (i32)u3, 0);
    prod[3] = qk_dp2a_hi((i32)q[3], (i32)u3, 0);
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
