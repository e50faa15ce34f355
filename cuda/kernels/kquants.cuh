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
