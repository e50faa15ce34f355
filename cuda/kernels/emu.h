// Host emulation of the CUDA subset the qkern kernels use (see common.cuh). Only compiled
// by the host C++ compiler for the emulator (cuda/emu/emu.cpp); NVRTC never sees it.
//
// Model: one CTA at a time; each CUDA thread is a fiber (ucontext); a barrier or a shuffle
// yields to the scheduler, which resumes the fibers in thread order once all live fibers
// have arrived. Kernels must reach barriers and shuffles uniformly (the qkern kernels never
// return early), which the scheduler checks.

#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace emu {
extern unsigned g_tid, g_bid, g_bdim, g_gdim;
extern uint32_t g_xchg[1024];
extern uint32_t g_mma[1024][6];
void barrier();
typedef void (*KernelFn)(const void*);
struct Reg {
    Reg(const char* name, KernelFn f);
};
}  // namespace emu

#define QK_DEV static inline
#define QK_MEMBER inline
#define QK_SHARED static
#define QK_SHARED16 alignas(16) static
#define QK_DYN_SHARED16(type, name, max_bytes) alignas(16) static type name[(max_bytes) / sizeof(type)]
#define QK_CONST_BANK alignas(16) static
#define QK_ENTRY(name, ArgT, body)                                  \
    static void name##_emu(const void* p) { body(*(const ArgT*)p); } \
    static emu::Reg name##_reg(#name, name##_emu);

#define QK_ENTRY_LB(name, ArgT, body, minb) QK_ENTRY(name, ArgT, body)
#define QK_ENTRY_BOUND(name, ArgT, body, maxt) QK_ENTRY(name, ArgT, body)
#define __launch_bounds__(...)

QK_DEV unsigned qk_tid() { return emu::g_tid; }
QK_DEV unsigned qk_bid() { return emu::g_bid; }
QK_DEV unsigned qk_bdim() { return emu::g_bdim; }
QK_DEV unsigned qk_gdim() { return emu::g_gdim; }
QK_DEV void qk_sync() { emu::barrier(); }
// (the threads past n have returned: the fibers left wait at the one barrier)
QK_DEV void qk_sync_first(unsigned) { emu::barrier(); }

QK_DEV float qk_fma(float a, float b, float c) { return std::fma(a, b, c); }
// Built with -ffp-contract=off: these are single IEEE operations, never fused.
QK_DEV float qk_mul(float a, float b) { return a * b; }
QK_DEV float qk_add(float a, float b) { return a + b; }
QK_DEV float qk_div(float a, float b) { return a / b; }
QK_DEV float qk_sub(float a, float b) { return a - b; }
QK_DEV float qk_i2f(int v) { return (float)v; }
QK_DEV float qk_rint(float v) { return std::nearbyint(v); }
QK_DEV unsigned qk_f2u(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}
QK_DEV float qk_u2f(unsigned u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
QK_DEV int qk_dp4a(int a, int b, int c) {
    int s = c;
    for (int i = 0; i < 4; ++i) s += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
    return s;
}
// __dp2a_lo / __dp2a_hi: a's signed 16-bit halves h0, h1 times b's signed bytes (0, 1) or (2, 3).
QK_DEV int qk_dp2a_lo(int a, int b, int c) {
    return c + (int)(short)(a & 0xffff) * (int)(signed char)(b & 0xff) +
           (int)(short)((unsigned)a >> 16) * (int)(signed char)((b >> 8) & 0xff);
}
QK_DEV int qk_dp2a_hi(int a, int b, int c) {
    return c + (int)(short)(a & 0xffff) * (int)(signed char)((b >> 16) & 0xff) +
           (int)(short)((unsigned)a >> 16) * (int)(signed char)((b >> 24) & 0xff);
}
// __byte_perm (prmt, default mode): byte k of the result is byte (s >> 4k) & 7 of {b:a},
// sign-replicated when bit 3 of that selector nibble is set.
QK_DEV unsigned qk_perm(unsigned a, unsigned b, unsigned s) {
    uint64_t v = ((uint64_t)b << 32) | a;
    unsigned r = 0;
    for (int k = 0; k < 4; ++k) {
        unsigned n = (s >> (4 * k)) & 0xf;
        unsigned byte = (unsigned)(v >> (8 * (n & 7))) & 0xff;
        if (n & 8) byte = (byte & 0x80) ? 0xff : 0;
        r |= byte << (8 * k);
    }
    return r;
}
QK_DEV unsigned qk_prmt(unsigned a, unsigned b, unsigned s) { return qk_perm(a, b, s); }
QK_DEV int qk_popc(unsigned v) { return __builtin_popcount(v); }
QK_DEV unsigned emu_shfl(unsigned v, int m) {
    emu::g_xchg[emu::g_tid] = v;
    emu::barrier();
    unsigned src = (emu::g_tid & ~31u) | ((emu::g_tid & 31u) ^ (unsigned)m);
    unsigned r = emu::g_xchg[src];
    emu::barrier();
    return r;
}
// A warp's tensor-core product: every lane publishes its 6 operand words (a[0..4], b[0..2]) for
// the others to read from emu::g_mma, after a barrier; returns its warp's first thread.
QK_DEV unsigned emu_mma_publish(const unsigned* a, const unsigned* b) {
    const unsigned me = emu::g_tid;
    for (int i = 0; i < 4; ++i) emu::g_mma[me][i] = a[i];
    emu::g_mma[me][4] = b[0];
    emu::g_mma[me][5] = b[1];
    emu::barrier();
    return me & ~31u;
}
// The warp's tensor-core product (common.cuh qk_mma_u8s8, same fragment layout): every lane
// publishes its 6 operand words, then computes its own 4 results from the warp's.
QK_DEV void emu_mma(const unsigned* a, const unsigned* b, const int* c, int* d, bool sa) {
    const unsigned w0 = emu_mma_publish(a, b), lane = emu::g_tid & 31u;
    for (int ci = 0; ci < 4; ++ci) {
        const unsigned row = (lane >> 2) + 8u * (unsigned)(ci >> 1), col = 2u * (lane & 3u) + (unsigned)(ci & 1);
        int s = c[ci];
        for (unsigned k = 0; k < 32; ++k) {
            const unsigned q = (k & 15u) >> 2, hi = k >> 4, byte = k & 3u;
            const unsigned av = emu::g_mma[w0 + 4u * (row & 7u) + q][(row >> 3) + 2u * hi];
            const unsigned bv = emu::g_mma[w0 + 4u * col + q][4u + hi];
            const int ab = sa ? (int)(signed char)((av >> (8u * byte)) & 0xffu) : (int)((av >> (8u * byte)) & 0xffu);
            s += ab * (int)(signed char)((bv >> (8u * byte)) & 0xffu);
        }
        d[ci] = s;
    }
    emu::barrier();
}
QK_DEV void qk_mma_u8s8(const unsigned* a, const unsigned* b, const int* c, int* d) { emu_mma(a, b, c, d, false); }
QK_DEV void qk_mma_s8s8(const unsigned* a, const unsigned* b, const int* c, int* d) { emu_mma(a, b, c, d, true); }
// fp16 <-> double for the f16 emulation: exact one way; round to nearest even the other
// (normal, subnormal, overflow to infinity; NaN in, NaN out). The f16 operations' exact results
// are doubles, rounded once here: common.cuh's qk_f2h takes a float, which would round twice.
QK_DEV float qk_h2f_soft(unsigned short h);
QK_DEV double emu_h2d(unsigned h) { return (double)qk_h2f_soft((unsigned short)(h & 0xffffu)); }
QK_DEV unsigned emu_d2h(double x) {
    if (std::isnan(x)) return 0x7e00u;
    const unsigned sign = std::signbit(x) ? 0x8000u : 0u;
    double a = std::fabs(x);
    if (a >= 65520.0) return sign | 0x7c00u;  // rounds to infinity
    if (a < std::ldexp(1.0, -14)) {           // subnormal: multiples of 2^-24
        return sign | (unsigned)std::nearbyint(std::ldexp(a, 24));  // 0x400 at the top: the smallest normal, correctly
    }
    int e;
    std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
    double m = std::nearbyint(std::ldexp(a, 11 - e));  // 11 significant bits, ties to even
    if (m >= 2048.0) {
        m /= 2.0;
        ++e;
    }
    if (e + 14 > 30) return sign | 0x7c00u;
    return sign | ((unsigned)(e + 14) << 10) | ((unsigned)m & 0x3ffu);
}
QK_DEV unsigned emu_h2(double lo, double hi) { return emu_d2h(lo) | (emu_d2h(hi) << 16); }
QK_DEV unsigned qk_hfma2(unsigned a, unsigned b, unsigned c) {
    // f16 products are exact in double, and so are their sums with an f16 (at most 2 * 11 +
    // 40 + 2 bits apart): one rounding, as fma.rn.f16x2's.
    return emu_h2(emu_h2d(a) * emu_h2d(b) + emu_h2d(c), emu_h2d(a >> 16) * emu_h2d(b >> 16) + emu_h2d(c >> 16));
}
QK_DEV unsigned qk_hadd2(unsigned a, unsigned b) {
    return emu_h2(emu_h2d(a) + emu_h2d(b), emu_h2d(a >> 16) + emu_h2d(b >> 16));
}
QK_DEV unsigned qk_hmul2(unsigned a, unsigned b) {
    return emu_h2(emu_h2d(a) * emu_h2d(b), emu_h2d(a >> 16) * emu_h2d(b >> 16));
}
// The warp's fp16 tensor-core product (common.cuh qk_mma_f16, same fragment layout), summed
// exactly (double: the kernels' integer operands) and rounded once to f32.
QK_DEV void qk_mma_f16(const unsigned* a, const unsigned* b, const float* c, float* d) {
    const unsigned w0 = emu_mma_publish(a, b), lane = emu::g_tid & 31u;
    for (int ci = 0; ci < 4; ++ci) {
        const unsigned row = (lane >> 2) + 8u * (unsigned)(ci >> 1), col = 2u * (lane & 3u) + (unsigned)(ci & 1);
        double s = (double)c[ci];
        for (unsigned k = 0; k < 16; ++k) {
            const unsigned q = (k & 7u) >> 1, hi = k >> 3, half = 16u * (k & 1u);
            const unsigned av = emu::g_mma[w0 + 4u * (row & 7u) + q][(row >> 3) + 2u * hi];
            const unsigned bv = emu::g_mma[w0 + 4u * col + q][4u + hi];
            s += emu_h2d(av >> half) * emu_h2d(bv >> half);
        }
        d[ci] = (float)s;
    }
    emu::barrier();
}
QK_DEV float qk_shfl_xor(float v, int m) { return qk_u2f(emu_shfl(qk_f2u(v), m)); }
QK_DEV int qk_shfl_xor_i(int v, int m) { return (int)emu_shfl((unsigned)v, m); }
QK_DEV bool qk_isnan(float f) { return (qk_f2u(f) & 0x7fffffffu) > 0x7f800000u; }
QK_DEV float qk_h2f_soft(unsigned short h);
QK_DEV float qk_h2f(unsigned short h) { return qk_h2f_soft(h); }
template <typename T> QK_DEV T qk_ld(const T* p) { return *p; }
QK_DEV void qk_prefetch_l2(const void*) {}
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
// Shared memory by address (common.cuh qk_sptr): here a plain pointer.
typedef const unsigned char* qk_sptr;
QK_DEV qk_sptr qk_sptr_of(const void* p) { return (qk_sptr)p; }
QK_DEV unsigned qk_lds32(qk_sptr base, unsigned off) { return *(const unsigned*)(base + off); }
QK_DEV uint2 qk_lds64(qk_sptr base, unsigned off) { return *(const uint2*)(base + off); }
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
