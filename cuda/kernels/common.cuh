// qkern CUDA kernels: the portability layer.
//
// Every kernel source is compiled twice: by NVRTC for the GPU (`--fmad=false`, so `a*b+c`
// is never contracted; every fused step is an explicit qk_fma = __fmaf_rn), and by a host
// C++ compiler for the emulator in cuda/emu/ (`-ffp-contract=off`), which runs the very same
// kernel code on the CPU, one fiber per CUDA thread, to check its bits against the Rust
// reference without a GPU. Kernels therefore use only the helpers below for thread indices,
// barriers, shuffles and the few intrinsics whose semantics decide the bits.
//
// Float rules (shared/REFERENCE.md, "On GPUs"): qk_mul / qk_add / qk_div are single IEEE
// round-to-nearest operations; qk_fma is one fused multiply-add. No other float operation
// may appear in a bit-deciding path.

#pragma once

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef short i16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#if defined(__CUDACC__)
// ------------------------------------------------------------------------------ GPU (NVRTC)
#define QK_DEV __device__ __forceinline__
#define QK_MEMBER __device__ __forceinline__
#define QK_SHARED __shared__
#define QK_SHARED16 __shared__ __align__(16)
// A kernel's dynamic shared memory (sized by its launch) as an array `name` of `type`.
#define QK_DYN_SHARED16(type, name, max_bytes) extern __shared__ __align__(16) type name[]
// A module-wide array in the constant bank (read by uniform loads, ULDC, where every thread of
// a warp reads the same address), filled by the host between launches.
#define QK_CONST_BANK __constant__
// __grid_constant__: the argument struct stays in parameter space even though kernels index
// its job array dynamically (no per-thread copy to local memory).
#define QK_ENTRY(name, ArgT, body) \
    extern "C" __global__ void name(const __grid_constant__ ArgT args) { body(args); }

// The same with a register budget: at least `minb` resident CTAs of 256 threads.
#define QK_ENTRY_LB(name, ArgT, body, minb)                                              \
    extern "C" __global__ void __launch_bounds__(256, minb) name(const __grid_constant__ ArgT args) { \
        body(args);                                                                      \
    }

// The same for launches of up to `maxt` threads a CTA (more than 256).
#define QK_ENTRY_BOUND(name, ArgT, body, maxt)                                            \
    extern "C" __global__ void __launch_bounds__(maxt) name(const __grid_constant__ ArgT args) { \
        body(args);                                                                      \
    }

QK_DEV u32 qk_tid() { return threadIdx.x; }
QK_DEV u32 qk_bid() { return blockIdx.x; }
QK_DEV u32 qk_bdim() { return blockDim.x; }
QK_DEV u32 qk_gdim() { return gridDim.x; }
QK_DEV void qk_sync() { __syncthreads(); }
// A barrier of the first `n` threads of the CTA only (n a multiple of 32; named barrier 1): the
// others may have returned.
QK_DEV void qk_sync_first(u32 n) { asm volatile("bar.sync 1, %0;" ::"r"(n) : "memory"); }

QK_DEV float qk_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
QK_DEV float qk_mul(float a, float b) { return __fmul_rn(a, b); }
QK_DEV float qk_add(float a, float b) { return __fadd_rn(a, b); }
QK_DEV float qk_div(float a, float b) { return __fdiv_rn(a, b); }
QK_DEV float qk_sub(float a, float b) { return __fsub_rn(a, b); }
QK_DEV float qk_i2f(i32 v) { return __int2float_rn(v); }
QK_DEV float qk_rint(float v) { return rintf(v); }
QK_DEV u32 qk_f2u(float f) { return __float_as_uint(f); }
QK_DEV float qk_u2f(u32 u) { return __uint_as_float(u); }
QK_DEV i32 qk_dp4a(i32 a, i32 b, i32 c) { return __dp4a(a, b, c); }
QK_DEV u32 qk_perm(u32 a, u32 b, u32 s) { return __byte_perm(a, b, s); }
// prmt.b32 itself: bit 3 of a selector nibble replicates the sign of the selected byte, where
// __byte_perm masks the selector first (one more instruction). For selectors whose nibbles are
// at most 7 by construction.
QK_DEV u32 qk_prmt(u32 a, u32 b, u32 s) {
    u32 r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
    return r;
}
// Two signed 16-bit halves of a times signed bytes 0, 1 (lo) or 2, 3 (hi) of b, plus c.
QK_DEV i32 qk_dp2a_lo(i32 a, i32 b, i32 c) { return __dp2a_lo(a, b, c); }
QK_DEV i32 qk_dp2a_hi(i32 a, i32 b, i32 c) { return __dp2a_hi(a, b, c); }
QK_DEV i32 qk_popc(u32 v) { return __popc(v); }
QK_DEV float qk_shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
QK_DEV i32 qk_shfl_xor_i(i32 v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
QK_DEV bool qk_isnan(float f) { return (qk_f2u(f) & 0x7fffffffu) > 0x7f800000u; }
// fp16 -> f32, exact (cvt.f32.f16). NaN payloads are not part of the contract.
QK_DEV float qk_h2f(u16 h) {
    float f;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}
template <typename T> QK_DEV T qk_ld(const T* p) { return __ldg(p); }
// Shared memory by 32-bit shared-window address (qk_sptr): a table's base address once, then
// each lookup one add (LEA) and the load, where indexing a generic pointer into a __shared__
// array made ptxas rebuild the whole address per lookup (shift, masks, OR, LEA: sm_90 SASS of
// the IQ lane kernels).
typedef u32 qk_sptr;
QK_DEV qk_sptr qk_sptr_of(const void* p) { return (u32)__cvta_generic_to_shared(p); }
QK_DEV u32 qk_lds32(qk_sptr base, u32 off) {
    return *(const u32*)__cvta_shared_to_generic(base + off);
}
QK_DEV uint2 qk_lds64(qk_sptr base, u32 off) {
    return *(const uint2*)__cvta_shared_to_generic(base + off);
}
QK_DEV void qk_prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
// One warp-wide integer tensor-core product (sm_80+): D = A (16 x 32, u8, row-major) x B (32 x 8,
// s8, column-major) + C (16 x 8, s32), exact (integer sums, no saturation at these sizes).
// Fragments (PTX ISA "Matrix Fragments for mma.m16n8k32", .u8/.s8), g = lane / 4, q = lane % 4:
// a[0] = A[g][4q..4q+3], a[1] = A[g+8][4q..], a[2] = A[g][16+4q..], a[3] = A[g+8][16+4q..];
// b[0] = B[4q..4q+3][g], b[1] = B[16+4q..][g]; c/d[0, 1] = C[g][2q, 2q+1], c/d[2, 3] = C[g+8][2q, 2q+1].
// The host selects the kernels that use it only on devices of compute capability 8.0 or more.
#if __CUDA_ARCH__ >= 800
#define QK_MMA_M16N8K32(atype)                                                                          \
    asm("mma.sync.aligned.m16n8k32.row.col.s32." atype ".s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "  \
        "{%8, %9}, {%10, %11, %12, %13};"                                                               \
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                                \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]),       \
          "r"(c[2]), "r"(c[3]))
#else
#define QK_MMA_M16N8K32(atype) __trap()
#endif
QK_DEV void qk_mma_u8s8(const u32* a, const u32* b, const i32* c, i32* d) { QK_MMA_M16N8K32("u8"); }
// The same with signed A bytes (.s8.s8).
QK_DEV void qk_mma_s8s8(const u32* a, const u32* b, const i32* c, i32* d) { QK_MMA_M16N8K32("s8"); }
// One warp-wide fp16 tensor-core product with f32 accumulation (sm_80+): D = A (16 x 16, f16,
// row-major) x B (16 x 8, f16, column-major) + C (16 x 8, f32). Registers hold f16 pairs, the
// lower column / K index in the low half (PTX ISA "Matrix Fragments for mma.m16n8k16"):
// a[0] = A[g][2q, 2q+1], a[1] = A[g+8][2q, 2q+1], a[2] = A[g][2q+8, 2q+9], a[3] = A[g+8][2q+8, 2q+9];
// b[0] = B[2q, 2q+1][g], b[1] = B[2q+8, 2q+9][g]; c/d as qk_mma_u8s8's. The IQ kernels feed it
// integers only (mma_iq, QK_IQ_HMMA): products below 2^18, every partial sum below 2^24, where
// any accumulation that keeps 24 bits of the largest addend is exact.
#if __CUDA_ARCH__ >= 800
QK_DEV void qk_mma_f16(const u32* a, const u32* b, const float* c, float* d) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
}
#else
QK_DEV void qk_mma_f16(const u32*, const u32*, const float*, float*) { __trap(); }
#endif
// f16 pairs (the halves of a 32-bit word), round to nearest even: a * b + c fused, a + b, a * b.
QK_DEV u32 qk_hfma2(u32 a, u32 b, u32 c) {
    u32 d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
QK_DEV u32 qk_hadd2(u32 a, u32 b) {
    u32 d;
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
QK_DEV u32 qk_hmul2(u32 a, u32 b) {
    u32 d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

#else
// ------------------------------------------------------------------------- host emulator
#include "emu.h"
#endif

// Tuning knobs (NVRTC -D options, QKERN_CUDA_NVRTC_OPTS in kernels.rs): unroll factors of the
// block loops. They change the schedule only, never the float order.
#define QK_PRAGMA(x) _Pragma(#x)
#define QK_UNROLL(n) QK_PRAGMA(unroll n)
#ifndef QK_UNROLL_Q8
#define QK_UNROLL_Q8 2  // q8_0 (H200: 4227 GB/s at NT=1 against 3627 with 4)
#endif
#ifndef QK_UNROLL_B
#define QK_UNROLL_B 4  // q5_1 (blocks per iteration)
#endif
#ifndef QK_UNROLL_BN
#define QK_UNROLL_BN 1  // q5_1 at NTM >= 3 (session 7 run2: NT4 1858 GB/s against 1513 with 4, NT8 1004 against 1010)
#endif
#define QK_UNROLL_B5(ntm) ((ntm) <= 2 ? QK_UNROLL_B : QK_UNROLL_BN)
#ifndef QK_UNROLL_NV
#define QK_UNROLL_NV 1  // nvfp4 (blocks per iteration, two steps each; H200 session 7 run1: NT1 2451 GB/s, NT8 963, against 1622 / 833 with 2)
#endif
#ifndef QK_MINB_B
#define QK_MINB_B 2  // 32-element formats, NTM >= 5: resident 256-thread CTAs asked of ptxas
#endif
#ifndef QK_MINB_R
#define QK_MINB_R 2  // one-thread-per-row kernels (mm_common.cuh mmr_body): resident 256-thread CTAs asked of ptxas
#endif
#ifndef QK_MINB_R1
#define QK_MINB_R1 4  // the same at NT 1: the row kernels fit 64 registers without spilling (iq4_nl's took 96 with 2
                      // CTAs, 21 % occupancy); H100 session 20 run3, kernel-only GB/s with 2 / 4: q5_1 2685 / 2847,
                      // iq4_nl 2595 / 2717, nvfp4 2581 / 2572
#endif
#ifndef QK_MINB_R12
#define QK_MINB_R12 QK_MINB_R  // the same at NT 2 (with 4: iq4_nl 2375 -> 1729, nvfp4 2243 -> 1971, q5_1 2256 -> 2538
                               // GB/s, H100 session 20 run3)
#endif
#ifndef QK_MINB_C
#define QK_MINB_C QK_MINB_R  // the row kernels with staged activations (qk_mmc_*, NT 3-8; mm_common.cuh MMC_MINB)
#endif
#ifndef QK_MINB_C12
#define QK_MINB_C12 QK_MINB_R12  // the same at NT 1 and 2
#endif
#ifndef QK_MINB_B1
#define QK_MINB_B1 1  // 32-element formats, NTM = 1: resident 256-thread CTAs asked of ptxas
#endif
#ifndef QK_UNROLL_P
#define QK_UNROLL_P 1  // iq4_nl (block pairs; session 7 run1: NT1 2448, NT4 1551, NT8 875, against 2348 / 1142 / 766 with 2)
#endif
#ifndef QK_UNROLL_K
#define QK_UNROLL_K 1  // q4_K, q5_K, q6_K at NTM = 1 (session 7 run1, with QK_MINB_KQ1 4: q4_K 2881 GB/s against 2196 with 2)
#endif
#ifndef QK_UNROLL_KQN
#define QK_UNROLL_KQN 1  // K-quants, NTM >= 2 (their registers are the limit)
#endif
#define QK_UNROLL_KQ(ntm) ((ntm) == 1 ? QK_UNROLL_K : QK_UNROLL_KQN)
#ifndef QK_MINB_KQ1
#define QK_MINB_KQ1 4  // MM_KERNELS_L4 formats at NTM = 1: resident 256-thread CTAs asked of ptxas
                       // (64 registers; with 2 (128): q4_K 2774 GB/s against 3034, q5_K 3068, q6_K 3143; 3: 2773, 2952, 3155)
#endif
#ifndef QK_MINB_KQ
#define QK_MINB_KQ 2  // MM_KERNELS_L4 formats, NTM >= 2 (IQ2/IQ3 with 3: NT8 348-487 against 377-531 GB/s)
#endif
#ifndef QK_UNROLL_P4
#define QK_UNROLL_P4 1  // iq2_*, iq3_* (session 7 run3: 2 within 1 % at NT1, NT8 up to 7 % slower)
#endif
#ifndef QK_IQ3S_BODY_NTM
#define QK_IQ3S_BODY_NTM 8  // iq3_s: from this NTM on, the whole body is loaded up front (iq3_s.cu)
#endif
#ifndef QK_MINB_W
#define QK_MINB_W 2  // word-pair kernels (iq4_xs): resident 256-thread CTAs asked of ptxas (0: no budget).
                     // H200 session 9 run5, S = 1, NT 1/2/4/8: 2172/2089/1623/903 GB/s against
                     // 1679/1764/1261/837 without (ptxas had given NT 8 167 registers, 1 CTA per SM)
#endif
#ifndef QK_MINB_W1
#define QK_MINB_W1 QK_MINB_W  // the same at NT 1 (Nsight Compute, H200 session 13: iq4_xs NT 1 took
                              // all 128 registers, 25 % occupancy, HBM 41 %; 3 or 4 not measured yet)
#endif
#ifndef QK_UNROLL_IQ
#define QK_UNROLL_IQ 2  // iq4_xs
#endif
// L2 prefetch distance of the block loops (blocks ahead; 0: none; mm_pf), per format, from the
// token counts where it was measured to help (H200, session 9 run3 `cudasweep`, kernel-only GB/s
// at NT 2 / 4 / 8 against none): q5_1 4 blocks, NT 8 1011 -> 1061 (NT 4 -2 %: from 5 tokens);
// q6_K 2, 2744 / 1850 / 1093 -> 2864 / 1970 / 1115; iq4_xs 2, NT 8 774 -> 834 but NT 2 and 4
// -20-25 % (so NT 8 only). q4_K lost 8 % at NT 8 with 2, iq3_s was unchanged: 0.
#ifndef QK_PF_Q51
#define QK_PF_Q51 4
#endif
// The same at NT 1 (QK_PF1_*), where the kernels wait on HBM latency (Nsight Compute, H200
// session 13: q4_K NT 1 had 75 % of its stall cycles on L1TEX scoreboards at 44 % occupancy,
// HBM 55 % busy, issue 38 %); not measured yet, so 0 (none) until a `cudasweep` says otherwise.
#ifndef QK_PF1_Q4K
#define QK_PF1_Q4K 0
#endif
#ifndef QK_ACT_AT
#define QK_ACT_AT 0  // 1: kq_lanes (q4_K, q5_K) address their activation loads from a per-block base
                     // (act_at: sm_90 q5_K NT 1 loop 389 -> 354 instructions), measured slower on
                     // the H200 (session 17, NT 1 GB/s: q5_K 3180 -> 2769, q4_K 3029 -> 2959;
                     // NT 2: 2590 -> 2334, 2407 -> 2293), so each load's address is rebuilt
                     // from its whole index (0)
#endif
#ifndef QK_ACT_AT_Q6K
#define QK_ACT_AT_Q6K 1  // the same for q6_K's lane kernels (1: act_at; H200, session 17, 1 / 0:
                         // NT 1 3080 / 3045 GB/s, NT 2 2825 / 2833, NT 4 1894 / 1963)
#endif
#ifndef QK_ACT_AT_IQ4XS
#define QK_ACT_AT_IQ4XS 1  // the same for iq4_xs's lane kernels (1: act_at; H200, session 17, 1 / 0:
                           // NT 1 2471 / 2174 GB/s, NT 2 2201 / 2089)
#endif
#ifndef QK_PF1_Q5K
#define QK_PF1_Q5K 0
#endif
#ifndef QK_PF1_Q6K
#define QK_PF1_Q6K 0
#endif
#ifndef QK_PF1_IQ4XS
#define QK_PF1_IQ4XS 0
#endif
#ifndef QK_PF1_IQ
#define QK_PF1_IQ 0  // iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s
#endif
#ifndef QK_PF1_NV
#define QK_PF1_NV 0
#endif
// A block loop's prefetch distance: `pf1` at NT 1, `pfn` at the token counts where `on`.
#define QK_PF_DIST(ntm, pf1, pfn, on) ((ntm) == 1 ? (pf1) : (on) ? (pfn) : 0)
#ifndef QK_PF_Q6K
#define QK_PF_Q6K 2
#endif
#ifndef QK_PF_IQ4XS
#define QK_PF_IQ4XS 2
#endif
#ifndef QK_PF_Q8
#define QK_PF_Q8 0
#endif
#ifndef QK_PF_NV
#define QK_PF_NV 0
#endif
#ifndef QK_PF_Q4K
#define QK_PF_Q4K 0
#endif
#ifndef QK_PF_Q5K
#define QK_PF_Q5K 0
#endif
#ifndef QK_PF_IQ3S
#define QK_PF_IQ3S 0
#endif

// ------------------------------------------------------------------------- shared helpers

QK_DEV uint4 make_u4(u32 a, u32 b, u32 c, u32 d) {
    uint4 v;
    v.x = a, v.y = b, v.z = c, v.w = d;
    return v;
}
QK_DEV uint2 make_u2(u32 a, u32 b) {
    uint2 v;
    v.x = a, v.y = b;
    return v;
}

// fp16 -> f32 in software (exact, for the quantizers' read-back; same bits as qk_h2f on
// every non-NaN input).
QK_DEV float qk_h2f_soft(u16 h) {
    u32 sign = (u32)(h & 0x8000u) << 16;
    u32 exp = (h >> 10) & 0x1fu;
    u32 man = h & 0x3ffu;
    if (exp == 0x1fu) return qk_u2f(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return qk_u2f(sign);
        // subnormal: man * 2^-24, exact
        float v = qk_mul((float)man, qk_u2f(0x33800000u));
        return sign ? -v : v;
    }
    return qk_u2f(sign | ((exp + 112u) << 23) | (man << 13));
}

// ggml's software fp32 -> fp16 (`ggml_compute_fp32_to_fp16`, ggml-impl.h), which the x86
// quantizers use: round to nearest even; every NaN becomes sign | 0x7E00.
QK_DEV u16 qk_f2h(float f) {
    const float scale_to_inf = qk_u2f(0x77800000u);
    const float scale_to_zero = qk_u2f(0x08800000u);
    float base = qk_mul(qk_mul(qk_u2f(qk_f2u(f) & 0x7fffffffu), scale_to_inf), scale_to_zero);
    const u32 w = qk_f2u(f);
    const u32 shl1_w = w + w;
    const u32 sign = w & 0x80000000u;
    u32 bias = shl1_w & 0xff000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = qk_add(qk_u2f((bias >> 1) + 0x07800000u), base);
    const u32 bits = qk_f2u(base);
    const u32 exp_bits = (bits >> 13) & 0x00007c00u;
    const u32 mantissa_bits = bits & 0x00000fffu;
    const u32 nonsign = exp_bits + mantissa_bits;
    return (u16)((sign >> 16) | (shl1_w > 0xff000000u ? 0x7e00u : nonsign));
}

// ggml `ggml_compute_fp32_to_bf16`: round to nearest even, NaN forced quiet.
QK_DEV u16 qk_f2bf(float f) {
    const u32 u = qk_f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 64u);
    return (u16)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

// `ggml_ue4m3_to_fp32` with ggml's x0.5 folded in (qkern_formats::fp::ue4m3_to_f32).
QK_DEV float qk_ue4m3(u32 x) {
    x &= 0xffu;
    // Branchless: bits 0-6 placed at bits 20-26 of an f32 read as its exponent field (e) and top
    // mantissa bits (man): 2^(e-127) (1 + man/8) for e > 0, the denormal man/8 * 2^-126 for
    // e == 0 (kept: ftz is off); times 2^119, exactly, that is ggml's 2^(e-8) (1 + man/8) and
    // man * 2^-10. 0x7f (and 0, by itself) is 0.
    const float v = qk_mul(qk_u2f((x & 0x7fu) << 20), qk_u2f(246u << 23));
    return x == 0x7fu ? 0.0f : v;
}

// `_mm256_cvtps_epi32` of an already rounded value: NaN and out of range give INT_MIN.
QK_DEV i32 qk_cvtps_epi32(float x) {
    if (qk_isnan(x) || x >= 2147483648.0f || x < -2147483648.0f) return (i32)0x80000000u;
    return (i32)x;
}

// `_mm_max_ps(a, b)` lane semantics: the second operand wins on NaN and ties.
QK_DEV float qk_max_ps(float a, float b) { return a > b ? a : b; }

// |x| as `_mm256_andnot_ps(sign_bit, x)`.
QK_DEV float qk_abs(float x) { return qk_u2f(qk_f2u(x) & 0x7fffffffu); }

// An integer known to lie in [-2^22, 2^22) to f32, exactly, with two full-rate operations
// instead of the quarter-rate I2F (1.5 * 2^23 magic). Equal to qk_i2f on that range.
QK_DEV float qk_i2f_small(i32 v) { return qk_add(qk_u2f((u32)(v + 0x4b400000)), -12582912.0f); }
// The same with the magic added up front: dp4a accumulating onto QK_BIAS (the bits of
// 1.5 * 2^23) leaves 1.5 * 2^23 + sum as an f32 bit pattern, so the conversion is one add
// (qk_unbias(qk_dp4a(a, b, QK_BIAS)) == qk_i2f_small(qk_dp4a(a, b, 0)) for |sum| < 2^22):
// one integer add fewer per lane, token and block in the 32-element formats' inner loops.
#define QK_BIAS 0x4b400000
QK_DEV float qk_unbias(i32 v) { return qk_add(qk_u2f((u32)v), -12582912.0f); }
// A sum of n biased lane sums, unbiased as an integer (wrapping u32 arithmetic: exact).
QK_DEV i32 qk_unbias_sum(u32 sum, u32 n) { return (i32)(sum - n * (u32)QK_BIAS); }

// 1 in byte i of the result where bit i (0..3) of `bits4` is set (the four shifted copies of
// the multiplier do not overlap).
QK_DEV u32 qk_spread4(u32 bits4) { return (bits4 * 0x00204081u) & 0x01010101u; }
// 0xFF in byte i of the result where bit i (0..3) of `bits4` is set.
QK_DEV u32 qk_mask4(u32 bits4) { return qk_spread4(bits4) * 0xffu; }
// 0x10 in byte i where bit i (0..3) of `bits4` is set (q5_1's fifth bits): one multiply, one
// mask.
QK_DEV u32 qk_high4(u32 bits4) { return (bits4 * 0x02040810u) & 0x10101010u; }

// Bytes of `g` negated where `m` has 0xFF (bytewise two's complement negation; valid because
// every grid byte it is used on is nonzero, so no borrow crosses a byte).
QK_DEV u32 qk_negate_bytes(u32 g, u32 m) { return (g ^ m) + (m & 0x01010101u); }
// The same from the 0/1 bytes `e` (qk_spread4) instead of the mask: one operation fewer.
QK_DEV u32 qk_sign_bytes(u32 g, u32 e) { return (g ^ (e * 0xffu)) + e; }

// The 8 nibbles of `w` looked up in the 16-entry byte table t[0..4] (little-endian words):
// `*a` gets the values of nibbles 0-3 (bits 0..16), `*b` those of nibbles 4-7. With the nibbles
// in element order (layout.rs `nibble_seq`) those are two whole lanes. After ggml-cuda/vecdotq.cuh
// `get_int_from_table_16`: per 16-bit half, two __byte_perm on the low 3 bits of each nibble
// (table bytes 0-7 and 8-15) and one picking by bit 3, 6 for 8 values; ggml's two more, which
// separate low from high nibbles of ggml's byte order, are not needed in element order. The
// selector nibbles are at most 7 by construction (idx masked, pick 0-3 plus 4), so the raw
// prmt (qk_prmt) needs no mask of its own: __byte_perm added one before each permute (sm_90
// SASS: iq4_xs NT 1 898 -> 834 instructions a loop, iq4_nl's row kernel 232 -> 216).
QK_DEV void qk_lut16x2n(u32 w, const u32* t, u32* a, u32* b) {
    const u32 idx = w & 0x77777777u;
    const u32 pick = 0x32103210u | ((w & 0x88888888u) >> 1);
    u32 v[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const u32 sh = 16u * (u32)i;
        v[i] = qk_prmt(qk_prmt(t[0], t[1], idx >> sh), qk_prmt(t[2], t[3], idx >> sh), pick >> sh);
    }
    *a = v[0];
    *b = v[1];
}

// Horizontal sum of the 8 lanes of a lane group (lanes l, l^4, l^2, l^1), in ggml's
// `hsum_float_8` order ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); every lane gets the result
// (the adds are commutative, so each lane computes the same bits).
QK_DEV float qk_hsum8(float x) {
    x = qk_add(x, qk_shfl_xor(x, 4));
    x = qk_add(x, qk_shfl_xor(x, 2));
    x = qk_add(x, qk_shfl_xor(x, 1));
    return x;
}

// Device block number of block b of `row` in a tiled weight matrix (layout.rs `tiled_index`):
// rows in groups of QK_TILE, block b of a group's G rows stored side by side.
#define QK_TILE 16u
// Block 0 of `row`, and the step from one of its blocks to the next (its group's row count G):
// block b is qk_wrow0 + b * qk_wstep. A row loop keeps the two (a base and a stride). A tile's
// bytes fit in 32 bits (backend.rs `upload_weights` refuses wider rows), so the offsets of a
// row's blocks from its first, b * qk_wstep * block bytes, are u32 products.
QK_DEV u64 qk_wrow0(u32 nb, u32 row) {
    const u32 g0 = row - row % QK_TILE;
    return (u64)g0 * nb + (row - g0);
}
QK_DEV u32 qk_wstep(u32 rows, u32 row) {
    const u32 g0 = row - row % QK_TILE;
    return rows - g0 < QK_TILE ? rows - g0 : QK_TILE;
}
QK_DEV u64 qk_wblk(u32 rows, u32 nb, u32 row, u32 b) {
    return qk_wrow0(nb, row) + (u64)b * qk_wstep(rows, row);
}
// The IQ2/IQ3 formats: tiled as above where QK_IQ_TILE (layout.rs `iq_tile`, which passes it;
// the default since session 31), else row-major (block b of `row` is row * nb + b;
// QKERN_CUDA_IQ_TILE=0).
#ifndef QK_IQ_TILE
#define QK_IQ_TILE 1
#endif
#if QK_IQ_TILE != 0 && QK_IQ_TILE != 1
#error "QK_IQ_TILE: 0 (row-major) or 1 (tiled)"
#endif
QK_DEV u64 qk_iq_row0(u32 nb, u32 row) { return QK_IQ_TILE ? qk_wrow0(nb, row) : (u64)row * nb; }
QK_DEV u32 qk_iq_step(u32 rows, u32 row) { return QK_IQ_TILE ? qk_wstep(rows, row) : 1u; }

// Loads (aligned).
QK_DEV u32 ld32(const u8* p) { return qk_ld((const u32*)p); }
QK_DEV u16 ld16(const u8* p) { return qk_ld((const u16*)p); }
QK_DEV u8 ld8(const u8* p) { return qk_ld(p); }

// ------------------------------------------------------------------ launch arguments
// Mirrored by #[repr(C)] structs in cuda/src/args.rs (sizes checked there).

#define QK_MAX_JOBS 16

// The q8_K quant words' device layout (mm_common.cuh q8k_at): 0 words, 1 quads. The host passes
// it to NVRTC (layout.rs `Q8kLayout::define`), so that its ActLayout and the kernels agree.
#ifndef QK_Q8K_QUAD
#define QK_Q8K_QUAD 1  // the host always passes it (layout.rs Q8kLayout::DEFAULT: quads)
#endif

// One matmul job: rows of one weight matrix against `nt` (<= the kernel's NTM) tokens.
struct MmJob {
    u64 w;     // weight bodies, row 0 (device layout, see layout.rs)
    u64 wd;    // the fp16 `d` array for formats stored split (0 otherwise)
    u64 a_qs;  // activation int8 quants of token 0: q8_0/q8_1 quads [cols/16][capw], q8_K words [cols/4][capw] or quads (QK_Q8K_QUAD)
    u64 a_d;   // activation f32 scales of token 0: [token][blocks]
    u64 a_x;   // q8_1: f32 `s` [token][blocks]; q8_K: i16 bsums [token][blocks][16]
    u64 out;   // f32 out[t * rows + r]
    u32 rows;
    u32 nt;
    u32 cta0;  // first CTA of this job
    u32 capw;  // token stride of the activation regions (capacity rounded up to 4)
    u64 a_cb;  // the activation buffer address that qk_cact mirrors (the qk_mmc_* kernels; else 0)
};

struct MmArgs {
    u32 njobs;
    u32 cols;
    u32 nb;    // weight blocks per row
    u32 pf;    // bytes per weight row to prefetch into L2 at the start (0: none)
    u32 alen;  // the shared-memory row kernels: dynamic shared bytes of the launch (mm_common.cuh mmc_body; else 0)
    u32 pad0;
    u64 tab;   // the lookup tables (layout.rs `tables()`)
    MmJob jobs[QK_MAX_JOBS];
};

// Activation regions are token-interleaved (layout.rs `ActLayout`): q8_0 / q8_1 quant quad q
// (16 bytes, elements 16q..16q+16) of token t at quad q*capw + t, q8_K quant word e4 (elements
// 4*e4..4*e4+4) at word e4*capw + t; per-block scales at block*capw + t; q8_K bsums per token
// [t][blocks][16].
struct QuantArgs {
    u64 x;     // f32 [tokens][cols]
    u64 qs;    // q8_0 / q8_1: 16-byte quads [cols/16][capw]; q8_K: u32 words [cols/4][capw]
    u64 d16;   // u16 [blocks][capw]
    u64 d32;   // f32 [blocks][capw]
    u64 x16;   // q8_1: s as u16 [blocks][capw]; q8_K: bsums i16 [tokens][blocks][16]
    u64 x32;   // q8_1: s as f32 [blocks][capw]
    u32 cols;
    u32 tokens;
    u32 capw;
    u32 pad;
};

// Up to QK_QGROUP quantizes of one activation format in one launch (quant.cu `quant_group`):
// job j's units (blocks of tokens x blocks a row) end at end[j] of the concatenation.
#define QK_QGROUP 16
struct QuantGroupArgs {
    QuantArgs job[QK_QGROUP];
    u32 end[QK_QGROUP];
    u32 n;
    u32 pad[3];
};

struct DeqArgs {
    u64 w;
    u64 wd;
    u64 out;   // f32, f16 or bf16 [rows][cols]
    u64 tab;
    u32 rows;
    u32 cols;
    u32 kind;  // 0 f32, 1 f16, 2 bf16
    u32 pad;
};

// Table offsets in 32-bit words (layout.rs `tables()` writes them in this order).
#define TAB_IQ2XXS 0      // 256 x u64
#define TAB_IQ2XS 512     // 512 x u64
#define TAB_IQ2S 1536     // 1024 x u64
#define TAB_IQ3XXS 3584   // 256 x u32
#define TAB_IQ3S 3840     // 512 x u32
#define TAB_IQ4NL 4352    // 16 x i8
#define TAB_FP4 4356      // 16 x i8
#define TAB_IQ2XXS_SEL 4360  // 256 x u32: the grids as byte-permute selectors (mm_common.cuh Iq2Sel)
#define TAB_IQ2XS_SEL 4616   // 512 x u32
#define TAB_IQ2S_SEL 5128    // 1024 x u32
#define TAB_SGN128 6152      // 128 x u32: ksigns(k)'s bits in bit 2 of each nibble
#define TAB_SGN256 6280      // 256 x u32: the byte k's bits in bit 2 of each nibble
#define TAB_WORDS 6536
