// Shared structure of the matmul and dequantize kernels.
//
// Matmul thread mapping: a row is handled by 2 threads (32-element formats, MmCtxB) or 2 * S
// (256-element formats, MmCtxW); each thread owns 4 of ggml's 8 AVX2 lanes of that row for
// every token. Integer lane sums are exact, so the S threads of a lane split a block's
// sub-blocks and add their partial sums with shuffles (any order); then every thread of the
// lane runs the same float chain `acc[t] = fma(d_b, (float)lane_b, acc[t])` over the blocks b
// in order, which is the AVX2 kernel's per-lane sequence. The weights are read once for all NT
// tokens. At the end the 8 lanes' accumulators are summed with one shuffle per lane pair in
// `hsum_float_8` order (mm_hsum_b).
//
// Jobs: one launch runs up to QK_MAX_JOBS (weights, activations, out) triples of one format
// and width (a layer's experts, or token chunks); CTAs [cta0, next cta0) belong to a job.
// No thread returns early (rows past the end compute a clamped row and skip the store), so
// every shuffle and barrier is reached uniformly.

#pragma once
#include "common.cuh"

// M(args..., NTM) for every NTM the host launches (args::NTMS, 1..8).
#define QK_EACH_NTM(M, ...) \
    M(__VA_ARGS__, 1) M(__VA_ARGS__, 2) M(__VA_ARGS__, 3) M(__VA_ARGS__, 4) \
    M(__VA_ARGS__, 5) M(__VA_ARGS__, 6) M(__VA_ARGS__, 7) M(__VA_ARGS__, 8)

// Small launches (A.pf > 0): the threads of a row first ask L2 for the row's weight bytes,
// so that the block loop's loads wait for L2, not for HBM, one after the other.
QK_DEV void mm_prefetch(const MmArgs& A, u32 j, u32 row, u32 k, u32 tpr) {
    if (A.pf == 0) return;
    const u8* base = (const u8*)A.jobs[j].w + (u64)row * A.pf;
    for (u32 o = 128u * k; o < A.pf; o += 128u * tpr) qk_prefetch_l2(base + o);
}

// The job a CTA belongs to: the last whose first CTA is at or before it.
QK_DEV u32 mm_job_of(const MmArgs& A, u32 bid) {
    u32 j = 0;
    for (u32 k = 1; k < A.njobs; ++k)
        if (bid >= A.jobs[k].cta0) j = k;
    return j;
}

// The block loops' L2 prefetch: the weight bytes of block b + AHEAD of this row where ON (the
// format's QK_PF_* distance and token counts, common.cuh), so that more of the row is in flight
// than the loads of one iteration (at high NT the registers allow few threads and unroll 1).
// Thread k of the row's threads prefetches the 128-byte line k of the block's `bytes`.
template <int AHEAD, bool ON>
QK_DEV void mm_pf(const u8* blk_ahead, u32 b, u32 nb, u32 bytes, u32 k) {
    if (AHEAD == 0 || !ON || b + AHEAD >= nb) return;
    if (128u * k < bytes) qk_prefetch_l2(blk_ahead + 128u * k);
}

// h[l] for a lane index known only at run time, without indexing a register array.
template <int NTM>
QK_DEV float mm_pick(const float* h, u32 l) {
    float r = 0.0f;
#pragma unroll
    for (int t = 0; t < NTM; ++t)
        if ((u32)t == l) r = h[t];
    return r;
}

// The words of NTM consecutive tokens at p (token-interleaved q8_K quant words or per-block
// scales; p is 16-byte aligned for NTM > 2): whole 16-byte loads, the extra lanes unused.
template <int NTM>
QK_DEV void ld_tok(const u32* p, u32* w) {
    if (NTM == 1) {
        w[0] = qk_ld(p);
    } else if (NTM == 2) {
        const uint2 v = qk_ld((const uint2*)p);
        w[0] = v.x;
        w[NTM > 1 ? 1 : 0] = v.y;
    } else {
#pragma unroll
        for (int k = 0; k < (NTM + 3) / 4; ++k) {
            const uint4 v = qk_ld((const uint4*)p + k);
            const u32 a[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
                if (4 * k + i < NTM) w[4 * k + i] = a[i];
        }
    }
}

// Activation word (q8_K) or quad (q8_0 / q8_1) `off` units past `base`, the units `capb` bytes
// apart (capw times the unit's bytes): one IMAD.WIDE a load (off * capb + base) where ptxas
// otherwise rebuilds a 64-bit product of the whole index per load (sm_90 SASS: five
// instructions an activation load in iq4_xs's NT 1 loop).
QK_DEV const u32* act_at(const u8* base, u32 off, u32 capb) { return (const u32*)(base + (u64)off * capb); }

// q8_0 / q8_1 activation quad q (quant words 4q..4q+3, elements 16q..16q+15) of token t: one
// 16-byte load (layout.rs `ActLayout`: quad q of token t at q*capw + t).
QK_DEV uint4 ld_aq(const u32* aq, u64 q, u32 capw, u32 t) { return qk_ld((const uint4*)aq + q * capw + t); }
// Word i of a quad (a select chain: no local memory when i is known at run time only).
QK_DEV u32 q4w(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

template <int NTM>
QK_DEV void ld_tok_f(const float* p, float* f) {
    u32 w[NTM];
    ld_tok<NTM>((const u32*)p, w);
#pragma unroll
    for (int t = 0; t < NTM; ++t) f[t] = qk_u2f(w[t]);
}

// ---- q8_K quant words on the device (layout.rs `Q8kLayout`, which passes QK_Q8K_QUAD to
// NVRTC so that the host's layout and the kernels' always agree):
// - 0 (words): word e4 (elements 4 e4..4 e4 + 3) of token t at e4 * capw + t, so that one
//   16-byte load brings 4 tokens' word e4;
// - 1 (quads): words 4q..4q + 3 of token t at (q * capw + t) * 4 (as the q8_0 / q8_1 quads),
//   so that one 16-byte load brings a token's 4 consecutive words, the 4 lanes a thread of the
//   L4-lane kernels owns (16 loads a block become 4 at NT 1) and a tensor-core thread's words
//   of one token sit at immediate offsets from one address.
// (QK_Q8K_QUAD's default is in common.cuh.)
constexpr u32 Q8K_TS = QK_Q8K_QUAD ? 4u : 1u;  // words from a token's word e4 to the next token's

// Word 4 qd + w (quad qd, w < 4) of token 0 (aq: the job's q8_K words, or those + Q8K_TS * a
// token column). The quad index is the caller's, so that no address splits a word index.
QK_DEV const u32* q8k_at(const u32* aq, u32 qd, u32 w, u32 capw) {
    return QK_Q8K_QUAD ? act_at((const u8*)aq, qd, 16u * capw) + w : act_at((const u8*)aq, 4u * qd + w, 4u * capw);
}
// Quad qd (words 4 qd..4 qd + 3) of NTM consecutive tokens: w[i][t] is word 4 qd + i of token
// t. Quads: one 16-byte load a token; words: one ld_tok a word.
template <int NTM>
QK_DEV void ld_q8k4(const u32* aq, u32 qd, u32 capw, u32 (*w)[NTM]) {
    if (QK_Q8K_QUAD) {
        const uint4* p = (const uint4*)q8k_at(aq, qd, 0u, capw);
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            const uint4 v = qk_ld(p + t);
            w[0][t] = v.x;
            w[1][t] = v.y;
            w[2][t] = v.z;
            w[3][t] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) ld_tok<NTM>(q8k_at(aq, qd, (u32)i, capw), w[i]);
    }
}

// ---- Where a kernel reads its activations from: global memory (ActG: the job's pointers), the
// CTA's shared memory (ActS, below: QK_CACT_SMEM), or
// the module's constant bank (ActC: qk_cact holds a copy of the whole activation buffer that
// starts at J.a_cb, made by the host before the launch, so a region's bank offset is its
// pointer less J.a_cb; args.rs `plan_matmul`, "cact"). In the one-thread-per-row kernels every thread of a warp
// reads the same activation words (same block, same token), so from the constant bank ptxas
// loads them with uniform loads (ULDC.64) straight into the IDP operands, off the L1 path
// that bounds those kernels at high token counts (Nsight Compute, H200 session 13: L1 87-89 %
// busy, HBM 19-33 %). Same words, same bits.
#ifndef QK_CACT_BYTES
#define QK_CACT_BYTES 61440  // args.rs CACT_BYTES; the bank holds 64 KiB per module
#endif
QK_CONST_BANK uint4 qk_cact[QK_CACT_BYTES / 16];

// QK_CACT_SMEM (default 1 on the GPUs with the large shared memory, kernels.rs `cact_smem`;
// -DQK_CACT_SMEM=0 for the bank): each CTA of the qk_mmc_* kernels first copies its job's NTM
// tokens of the activations into its dynamic shared memory (mmc_body, layout ActS; the launch
// gives it A.alen bytes, args.rs `sact_bytes`) and reads them there: warp-wide broadcast LDS,
// off the L1 path of the global loads and without the bank's serialised misses, and with no
// copy into the bank before the launch. On an H100 (benches/results/2026-12-06-session23 run4,
// kernel-only GB/s, every NT on these kernels: bank / shared memory): q5_1 NT 4 1860 / 2563,
// NT 8 1455 / 1828; q8_0 NT 2 1182 / 2510, NT 8 2093 / 2275; nvfp4 NT 2 630 / 2554, NT 8 1137 /
// 1326 (measured with a copy of the whole buffer; this per-CTA copy of its tokens reads the same
// words in the loop). A launch whose copy would not fit (A.alen, QK_SACT_BYTES: the 48 KiB of
// dynamic shared memory a launch gets without opting in) runs the global-memory body. Same
// words, same bits.
#ifndef QK_CACT_SMEM
#define QK_CACT_SMEM 1
#endif
#ifndef QK_SACT_BYTES
#define QK_SACT_BYTES 49152
#endif
#if QK_CACT_SMEM
QK_DYN_SHARED16(uint4, qk_sact, QK_SACT_BYTES);
#endif

struct ActG {
    // quad q of token t (ld_aq)
    static QK_MEMBER uint4 quad(const MmJob& J, u64 q, u32 capw, u32 t) { return ld_aq((const u32*)J.a_qs, q, capw, t); }
    // the NTM tokens' f32 of activation block b in the region at `base` (J.a_d / J.a_x)
    template <int NTM>
    static QK_MEMBER void f32s(const MmJob&, u64 base, u32 b, u32 capw, float* f) {
        ld_tok_f<NTM>((const float*)base + (u64)b * capw, f);
    }
};

// Tokens below QK_CACT_NT come from the bank, the others from global memory (a balance of
// issue slots, two ULDC.64 a quad, against L1 traffic, one LDG.128 a quad).
#ifndef QK_CACT_NT
#define QK_CACT_NT 8
#endif
#ifndef QK_CACT_F
#define QK_CACT_F 1  // the f32 scales (and q5_1's sums) from the bank too
#endif
struct ActC {
    static QK_MEMBER uint4 quad(const MmJob& J, u64 q, u32 capw, u32 t) {
        if (t >= QK_CACT_NT) return ActG::quad(J, q, capw, t);
        // the quad's row pointer, then t: the token becomes the load's immediate offset
        const uint4* p = qk_cact + ((u32)(J.a_qs - J.a_cb) / 16u + (u32)q * capw);
        return p[t];
    }
    template <int NTM>
    static QK_MEMBER void f32s(const MmJob& J, u64 base, u32 b, u32 capw, float* f) {
        if (!QK_CACT_F) return ActG::template f32s<NTM>(J, base, b, capw, f);
        const float* c = (const float*)qk_cact + ((u32)(base - J.a_cb) / 4u + b * capw);
#pragma unroll
        for (int t = 0; t < NTM; ++t) f[t] = c[t];
    }
};

#if QK_CACT_SMEM
// The CTA's job's NT_S tokens in shared memory (mmc_body fills it), activation block b at
// uint4 b * SB: its quads 2b (h = 0) and 2b + 1 (h = 1) of token t at h * NT_S + t, then NT_S
// floats d and (q8_1) NT_S floats s. SB: 40 * NT_S bytes rounded up to 16 (args.rs
// `sact_bytes`; the emulator test shared_copy_sizes_agree_with_the_kernels holds the two
// equal). Every thread of a warp reads the same word: a broadcast.
template <int NT_S>
struct ActS {
    static constexpr u32 SB = (5u * NT_S + 1u) / 2u;
    // The copy's bytes for `cols` columns (mmc_body's check; emu.cpp reports it to the test).
    static QK_MEMBER u32 bytes(u32 cols) { return cols / 32u * SB * 16u; }
    static QK_MEMBER uint4 quad(const MmJob&, u64 q, u32, u32 t) {
        return qk_sact[((u32)q >> 1) * SB + ((u32)q & 1u) * NT_S + t];
    }
    template <int NTM>
    static QK_MEMBER void f32s(const MmJob& J, u64 base, u32 b, u32, float* f) {
        const float* c = (const float*)(qk_sact + b * SB + 2u * NT_S) + (base == J.a_x ? NT_S : 0u);
#pragma unroll
        for (int t = 0; t < NTM; ++t) f[t] = c[t];
    }
};
#endif

// ---- 32-element formats (q8_0, q5_1, iq4_nl, nvfp4): two threads per row, thread h owns
// lanes 4h..4h+3 of every block (the block's quants 16h..16h+16 for q8_0), so that the
// per-(block, token) scale product is shared by 4 lanes and weights come in 16-byte loads.
struct MmCtxB {
    u32 job;
    u32 row;
    u32 h;
    u32 nt;
    bool valid;
};

QK_DEV MmCtxB mm_ctx_b(const MmArgs& A) {
    MmCtxB c;
    const u32 bid = qk_bid();
    const u32 j = mm_job_of(A, bid);
    c.job = j;
    const u32 tid = qk_tid();
    c.h = tid & 1u;
    const u32 rows = A.jobs[j].rows;
    const u32 row = (bid - A.jobs[j].cta0) * (qk_bdim() / 2u) + tid / 2u;
    c.valid = row < rows;
    c.row = c.valid ? row : rows - 1u;
    c.nt = A.jobs[j].nt;
    mm_prefetch(A, j, c.row, c.h, 2u);
    return c;
}

// hsum_float_8 of lanes split over the thread pair (h = 0: lanes 0..3, h = 1: lanes 4..7):
// r_i = l_i + l_{i+4} (one shuffle per lane), then (r0 + r2) + (r1 + r3); both threads get
// the same bits (the adds commute).
QK_DEV float mm_hsum_b(const float* x) {
    float r[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) r[i] = qk_add(x[i], qk_shfl_xor(x[i], 1));
    return qk_add(qk_add(r[0], r[2]), qk_add(r[1], r[3]));
}

template <int NTM>
QK_DEV void mm_store_b(const MmArgs& A, const MmCtxB& c, const float* res) {
    if (!c.valid || c.h != 0) return;
    float* out = (float*)A.jobs[c.job].out;
    const u32 rows = A.jobs[c.job].rows;
#pragma unroll
    for (int t = 0; t < NTM; ++t)
        if ((u32)t < c.nt) out[(u64)t * rows + c.row] = res[t];
}

#define MM_KERNEL_B1(fmt, fn, NTM)                                                     \
    QK_DEV void fn##_n##NTM##_s1(const MmArgs& A) {                                     \
        const MmCtxB c = mm_ctx_b(A);                                                   \
        float res[NTM];                                                                 \
        fn<NTM>(A, c, res);                                                             \
        mm_store_b<NTM>(A, c, res);                                                     \
    }                                                                                   \
    QK_ENTRY_LB(qk_mm_##fmt##_n##NTM##_s1, MmArgs, fn##_n##NTM##_s1, (NTM) >= 5 ? QK_MINB_B : (NTM) == 1 ? QK_MINB_B1 : 1)

#define MM_KERNELS_B(fmt, fn) QK_EACH_NTM(MM_KERNEL_B1, fmt, fn)

QK_DEV uint4 ld128(const u8* p) { return qk_ld((const uint4*)p); }
QK_DEV uint2 ld64(const u8* p) { return qk_ld((const uint2*)p); }

template <int NTM>
QK_DEV void mm_zero(float (*acc)[4]) {
#pragma unroll
    for (int t = 0; t < NTM; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[t][i] = 0.0f;
}

// One block of the lane chains: acc[t][i] = fma(d[t], (float)isum[i][t], acc[t][i]), the lane
// sums biased (dp4a onto QK_BIAS). The 32-element formats' lane sums are below 2^22 in
// magnitude (4 products of at most 128*127), so qk_unbias is exact.
template <int NTM>
QK_DEV void mm_chain_b(float (*acc)[4], i32 (*isum)[NTM], const float* d) {
#pragma unroll
    for (int t = 0; t < NTM; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[t][i] = qk_fma(d[t], qk_unbias(isum[i][t]), acc[t][i]);
}

// ---- Word-pair mapping of the 256-element formats whose lane l and lane l + 4 read the two
// nibbles of one word (iq4_xs): 2 * S threads per row; thread (h, s) = (tid & 1, (tid >> 1) % S)
// owns the words 2h, 2h + 1 of each 16-byte group, i.e. the lanes 2h, 2h + 1 (low nibbles) and
// 2h + 4, 2h + 5 (high nibbles), of the sub-blocks s, s + S, ...: one 8-byte load and two
// two-nibble lookups per sub-block instead of one 4-byte load and lookup per lane.
struct MmCtxW {
    u32 job;
    u32 row;
    u32 h;
    u32 s;
    u32 nt;
    bool valid;
};

template <int S>
QK_DEV MmCtxW mm_ctx_w(const MmArgs& A) {
    MmCtxW c;
    const u32 bid = qk_bid();
    const u32 j = mm_job_of(A, bid);
    c.job = j;
    const u32 tid = qk_tid();
    c.h = tid & 1u;
    c.s = (tid >> 1) % (u32)S;
    const u32 rows = A.jobs[j].rows;
    const u32 row = (bid - A.jobs[j].cta0) * (qk_bdim() / (2u * S)) + tid / (2u * S);
    c.valid = row < rows;
    c.row = c.valid ? row : rows - 1u;
    c.nt = A.jobs[j].nt;
    mm_prefetch(A, j, c.row, tid % (2u * S), 2u * S);
    return c;
}

// Sum of the S partial integer lane sums (threads 2s + h).
template <int S>
QK_DEV i32 mm_reduce_w(i32 v) {
    if (S >= 2) v = (i32)((u32)v + (u32)qk_shfl_xor_i(v, 2));
    if (S >= 4) v = (i32)((u32)v + (u32)qk_shfl_xor_i(v, 4));
    return v;
}

template <int NTM>
QK_DEV void mm_store_w(const MmArgs& A, const MmCtxW& c, const float* res) {
    if (!c.valid || c.h != 0 || c.s != 0) return;
    float* out = (float*)A.jobs[c.job].out;
    const u32 rows = A.jobs[c.job].rows;
#pragma unroll
    for (int t = 0; t < NTM; ++t)
        if ((u32)t < c.nt) out[(u64)t * rows + c.row] = res[t];
}

// QK_MINB_W > 0: a register budget for every token count (without one ptxas gives the NT 8
// kernel 167 registers; `__launch_bounds__(256, 1)` alone lets it take 254).
#if QK_MINB_W > 0
#define MM_ENTRY_W(name, body, NTM) QK_ENTRY_LB(name, MmArgs, body, (NTM) == 1 ? QK_MINB_W1 : QK_MINB_W)
#else
#define MM_ENTRY_W(name, body, NTM) QK_ENTRY(name, MmArgs, body)
#endif

#define MM_KERNEL_W1(fmt, fn, S, NTM)                                                  \
    QK_DEV void fn##_n##NTM##_s##S(const MmArgs& A) {                                   \
        const MmCtxW c = mm_ctx_w<S>(A);                                                \
        float res[NTM];                                                                 \
        fn<NTM, S>(A, c, res);                                                          \
        mm_store_w<NTM>(A, c, res);                                                     \
    }                                                                                   \
    MM_ENTRY_W(qk_mm_##fmt##_n##NTM##_s##S, fn##_n##NTM##_s##S, NTM)

#define MM_KERNELS_W(fmt, fn, S) QK_EACH_NTM(MM_KERNEL_W1, fmt, fn, S)

// ---- The 256-element formats but iq4_xs (q4_K, q5_K, q6_K, iq2_*, iq3_*) on the MmCtxW thread
// pairs, with the lanes of the 32-element formats: thread (h, s) owns lanes 4h..4h+3 (h = 0:
// 0-3, h = 1: 4-7) of its sub-blocks, so that a sub-block's 4 lane words are one 16-byte load
// (two 8-byte grid entries for the IQ formats); partial lane sums reduce over s
// (mm_reduce_w), the lanes' hsum_float_8 is mm_hsum_b. A format with per-token extra chains
// (the mins of q4_K and q5_K) gives token t's chain to thread 2s + h = t mod 2S, which also
// stores token t: `fn` stores its results itself (mm_store_t).
#define MM_KERNEL_L41(fmt, fn, S, NTM)                                                 \
    QK_DEV void fn##_n##NTM##_s##S(const MmArgs& A) { fn<NTM, S>(A, mm_ctx_w<S>(A)); }  \
    QK_ENTRY_LB(qk_mm_##fmt##_n##NTM##_s##S, MmArgs, fn##_n##NTM##_s##S, (NTM) == 1 ? QK_MINB_KQ1 : QK_MINB_KQ)

#define MM_KERNELS_L4(fmt, fn, S) QK_EACH_NTM(MM_KERNEL_L41, fmt, fn, S)

// The IQ2/IQ3 formats' sub-block step on the L4 lanes: isum[i][t] += ls * dp4a(sg[i], word
// 64b + 8ib + 4h + i of token t), sg[i] being lane 4h + i's signed grid bytes.
template <int NTM>
QK_DEV void mm_l4_dot(i32 (*isum)[NTM], const i32* sg, i32 ls, const u32* aq, u32 capw, u32 b, u32 ib, u32 h) {
    u32 av[4][NTM];
    ld_q8k4<NTM>(aq, 16u * b + 2u * ib + h, capw, av);  // words 64b + 8ib + 4h .. + 3
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int t = 0; t < NTM; ++t) isum[i][t] += ls * qk_dp4a(sg[i], (i32)av[i][t], 0);
}

// Their block's float step: the lane sums reduced over the split, then
// acc[t][i] = fma(xd * d_t, (float)lane, acc[t][i]) (ggml: `d = xd * y.d`, one fmadd per block).
template <int NTM, int S>
QK_DEV void mm_l4_chain(float (*acc)[4], i32 (*isum)[NTM], float xd, const float* ad, u32 capw, u32 b) {
    float da[NTM];
    ld_tok_f<NTM>(ad + (u64)b * capw, da);
#pragma unroll
    for (int t = 0; t < NTM; ++t) {
        const float d = qk_mul(xd, da[t]);
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[t][i] = qk_fma(d, qk_i2f(mm_reduce_w<S>(isum[i][t])), acc[t][i]);
    }
}

// Token t's result, stored by the thread that owns its extra chain (t = 2s + h mod 2S).
QK_DEV void mm_store_t(const MmArgs& A, const MmCtxW& c, u32 t, float v) {
    if (c.valid && t < c.nt) ((float*)A.jobs[c.job].out)[(u64)t * A.jobs[c.job].rows + c.row] = v;
}

// The end of a kernel without extra chains: hsum_float_8 of each token's lanes (times `scale`
// where SCALED: ggml's 0.125 or 0.25 of the IQ2/IQ3 dots), stored by thread (0, 0) of the row.
template <int NTM, bool SCALED>
QK_DEV void mm_l4_finish(const MmArgs& A, const MmCtxW& c, float (*acc)[4], float scale) {
    float hs[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) hs[t] = SCALED ? qk_mul(scale, mm_hsum_b(acc[t])) : mm_hsum_b(acc[t]);
    if (c.h == 0 && c.s == 0)
#pragma unroll
        for (int t = 0; t < NTM; ++t) mm_store_t(A, c, (u32)t, hs[t]);
}

// ---- Two-phase kernel for 32-element formats with few blocks per row (small K, e.g. MoE
// down projections; lane sums biased, as mm_chain_b's): phase 1 spreads every (row, unit, half) of MMK_R rows over the CTA's
// threads, which compute the units' integer lanes and chain factors at once (one round of
// loads instead of one per block) into shared memory; phase 2 gives each (row, token, lane)
// chain to one thread, which runs it over the units in order (the same fma sequence as the
// one-phase kernel), then the lanes' hsum_float_8 by shuffles.
#define MMK_R 4
#define MMK_UMAX 32
#ifndef QK_MMK_SA
#define QK_MMK_SA 1
#endif
// QK_MMK_ST4 (on; 0: MMK_R 4-byte stores by four warps): each CTA's MMK_R rows of a token
// leave as one 16-byte store by one thread (`mmk_out`; q4_K's two-phase kernel too). Into
// mapped host memory (the default way back for small matrices) that is a quarter of the PCIe
// writes: on an H100 (session 35) a 2560 x 640 down expert's launch to host out took 14.0-15.0
// us against 20.0-22.5 (q5_1, q8_0, iq4_nl), device out no slower.
#ifndef QK_MMK_ST4
#define QK_MMK_ST4 1
#endif

enum { MmPlain = 0, MmSumms = 1, MmPairs = 2 };

// The two-phase kernels' shared arrays, padded so that phase 1's stores do not collide in the
// banks: a warp's 32 threads are (half, row, unit) = 2 x 4 x 4, each storing its 4 lanes x NTM
// tokens at the same offsets of its own (row, unit) record; unpadded, every record starts at a
// multiple of 32 words and the 32 threads hit the banks of 2 (NT 4: 16-way replays; Nsight
// Compute, H200 session 13: 81 % of the q5_1 expert's shared wavefronts in excess, L1 74 %
// busy). Records of 8 NTM + 1 words and rows of MMK_UMAX records plus 4 (NTM <= 2: 8 NTM)
// words: every store at most 2 wavefronts (NT 4: 1), phase 2's loads at most 2.4 (bank model
// over NT 1..8). The values, hence the bits, are the same.
template <int NTM>
struct MmkPad {
    static constexpr u32 XU = 8u * NTM + 1u, XR = MMK_UMAX * XU + (NTM <= 2 ? 8u * NTM : 4u);
    static constexpr u32 DU = 2u * NTM + 1u, DR = MMK_UMAX * DU + 4u;
    static constexpr u32 MR = MMK_UMAX + 1u;
    static QK_MEMBER u32 x(u32 r, u32 u, u32 lane, u32 t) { return r * XR + u * XU + lane * NTM + t; }
    static QK_MEMBER u32 d(u32 r, u32 u, u32 h, u32 t) { return r * DR + u * DU + h * NTM + t; }
    static QK_MEMBER u32 m(u32 r, u32 u) { return r * MR + u; }
};

// The two-phase kernels' results: thread (r, t, l = 0) holds row row0 + r's result `res` of
// token t. QK_MMK_ST4: token t's MMK_R results through shared memory `O` (MMK_R * NTM floats) to
// thread p = t (warp 0), one 16-byte store where the 4 rows are whole and aligned, else one
// store a row; only the live threads (MMK_R * NTM * 8, whole warps) meet at the barrier.
// Otherwise each (r, t) stores its own 4 bytes.
template <int NTM>
QK_DEV void mmk_out(const MmJob& J, float* O, u32 p, u32 l, u32 t, u32 r, u32 row0, float res) {
    const u32 rows = J.rows;
#if QK_MMK_ST4
    if (l == 0) O[t * MMK_R + r] = res;
    qk_sync_first(MMK_R * NTM * 8u);
    if (p < NTM && p < J.nt) {
        float* o = (float*)J.out + (u64)p * rows + row0;
        if (row0 + MMK_R <= rows && ((u64)o & 15u) == 0) {
            static_assert(MMK_R == 4, "one float4 a token");
            float4 v;
            v.x = O[p * MMK_R];
            v.y = O[p * MMK_R + 1];
            v.z = O[p * MMK_R + 2];
            v.w = O[p * MMK_R + 3];
            *(float4*)o = v;
        } else {
            for (u32 k = 0; k < MMK_R && row0 + k < rows; ++k) o[k] = O[p * MMK_R + k];
        }
    }
#else
    (void)O;
    (void)p;
    if (l == 0 && row0 + r < rows && t < J.nt) ((float*)J.out)[(u64)t * rows + row0 + r] = res;
#endif
}

template <class U, int CH, int NTM>
QK_DEV void mmk_body(const MmArgs& A) {
    using P = MmkPad<NTM>;
    QK_SHARED i32 X[MMK_R * P::XR];
    QK_SHARED float D[MMK_R * P::DR];
    QK_SHARED float M[MMK_R * P::MR];
    QK_SHARED float SA[(CH == MmSumms && QK_MMK_SA) ? MMK_UMAX * NTM : 1];
    QK_SHARED float O[QK_MMK_ST4 ? MMK_R * NTM : 1];
    const u32 bid = qk_bid(), tid = qk_tid();
    const u32 j = mm_job_of(A, bid);
    const MmJob& J = A.jobs[j];
    const u32 units = A.nb * U::UNITS_PER_BLOCK;
    const u32 rows = J.rows;
    const u32 row0 = (bid - J.cta0) * MMK_R;
    // q8_1's s of every (unit, token), the summs chain's factors, staged with the weights' loads
    // (QK_MMK_SA): read in the chain itself they were one dependent global load a unit, each
    // waiting on the last (20 L2 round trips for a 640-column down projection). The same words
    // in the same fma order: the same bits.
    if (CH == MmSumms && QK_MMK_SA)
        for (u32 i = tid; i < units * NTM; i += qk_bdim())
            SA[i] = qk_ld((const float*)J.a_x + (u64)(i / NTM) * J.capw + i % NTM);
    for (u32 it = tid; it < MMK_R * units * 2u; it += qk_bdim()) {
        // (unit, row, half) with the row before the unit: on tiled weights, consecutive
        // threads read one contiguous span of the MMK_R rows' block u.
        const u32 h = it & 1u, r = (it >> 1) % MMK_R, u = it / (2u * MMK_R);
        const u32 row = row0 + r < rows ? row0 + r : rows - 1u;
        i32 isum[4][NTM];
        float d[NTM], m = 0.0f;
        U::template unit<NTM>(A, J, row, u, h, isum, d, &m);
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
#pragma unroll
            for (int i = 0; i < 4; ++i) X[P::x(r, u, 4u * h + i, t)] = isum[i][t];
            D[P::d(r, u, h, t)] = d[t];
        }
        if (h == 0) M[P::m(r, u)] = m;
    }
    qk_sync();
    const u32 p = tid;
    if (p >= MMK_R * NTM * 8u) return;  // whole warps (MMK_R * 8 == 32): no shuffle is split
    const u32 l = p & 7u, t = (p >> 3) % NTM, r = p / (8u * NTM);
    float res;
    if (CH == MmPairs) {
        float a1 = 0.0f, a2 = 0.0f;
        const u32 pairs = units / 2u;
        for (u32 q = 0; q < pairs; ++q) {
            a1 = qk_fma(D[P::d(r, 2 * q, l >> 2, t)], qk_unbias(X[P::x(r, 2 * q, l, t)]), a1);
            a2 = qk_fma(D[P::d(r, 2 * q + 1, l >> 2, t)], qk_unbias(X[P::x(r, 2 * q + 1, l, t)]), a2);
        }
        res = qk_hsum8(qk_add(a1, a2));
        if (units & 1u) {
            i32 tot = qk_unbias_sum((u32)X[P::x(r, units - 1, l, t)], 1);
            tot += qk_shfl_xor_i(tot, 4);
            tot += qk_shfl_xor_i(tot, 2);
            tot += qk_shfl_xor_i(tot, 1);
            res = qk_fma(D[P::d(r, units - 1, 0, t)], qk_i2f(tot), res);
        }
    } else {
        float acc = 0.0f, summs = 0.0f;
        // With the staged s factors both chains run in one loop, each fma waiting on its own
        // chain only (the same two fma sequences as one loop after the other).
        for (u32 u = 0; u < units; ++u) {
            acc = qk_fma(D[P::d(r, u, l >> 2, t)], qk_unbias(X[P::x(r, u, l, t)]), acc);
            if (CH == MmSumms && QK_MMK_SA) summs = qk_fma(M[P::m(r, u)], SA[u * NTM + t], summs);
        }
        res = qk_hsum8(acc);
        if (CH == MmSumms) {
            if (!QK_MMK_SA) {
                const float* as = (const float*)J.a_x + t;
                for (u32 u = 0; u < units; ++u) summs = qk_fma(M[P::m(r, u)], qk_ld(as + (u64)u * J.capw), summs);
            }
            res = qk_add(res, summs);
        }
    }
    mmk_out<NTM>(J, O, p, l, t, r, row0, res);
}

#define MMK_KERNEL_1(fmt, U, CH, NTM)                                                    \
    QK_DEV void mmk_##fmt##_n##NTM(const MmArgs& A) { mmk_body<U, CH, NTM>(A); }          \
    QK_ENTRY(qk_mmk_##fmt##_n##NTM, MmArgs, mmk_##fmt##_n##NTM)

#define MM_KERNELS_K(fmt, U, CH) QK_EACH_NTM(MMK_KERNEL_1, fmt, U, CH)

// ---- One thread per row (32-element formats at higher token counts; args.rs `row_default_mask`):
// the thread runs both halves of every unit (h = 0: lanes 0-3, then h = 1: lanes 4-7) in unit
// order, so that one warp-wide activation load serves 32 rows instead of 16 (the two-thread
// kernels at NT 8 are bound by L1 requests, not by HBM: Nsight Compute, H200 session 13) and
// the weight bytes are loaded once instead of by both threads of a pair. The float chains are
// the two-thread kernels' lane for lane (MmPlain: acc over the units; MmPairs: iq4_nl's even
// and odd accumulators and its scalar tail; MmSumms: q5_1's summs chain), hsum_float_8 in-thread
// in the same order ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
template <class U, int NTM, class AS>
QK_DEV void mm_row_half(const MmArgs& A, const MmJob& J, const typename U::Raw& w, u32 u, u32 h, float (*acc)[8],
                        float* m) {
    i32 isum[4][NTM];
    float d[NTM];
    U::template unit_raw<NTM, AS>(A, J, w, u, h, isum, d, m);
#pragma unroll
    for (int t = 0; t < NTM; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[t][4 * h + i] = qk_fma(d[t], qk_unbias(isum[i][t]), acc[t][4 * h + i]);
}

// hsum_float_8 of 8 lanes held by one thread (the row kernels, a tensor-core cell).
QK_DEV float mm_hsum8(const float* l) {
    return qk_add(qk_add(qk_add(l[0], l[4]), qk_add(l[2], l[6])), qk_add(qk_add(l[1], l[5]), qk_add(l[3], l[7])));
}

// The row kernels' L2 prefetch (U::PF_R blocks ahead, 0: none): one thread in every
// 64 / BODY rows asks for its row's block b + PF_R, which covers the tile's contiguous span of
// those blocks (layout.rs: 16 rows' block b side by side) line by line. Per format (QK_PF_R_Q51,
// QK_PF_R_Q8, QK_PF_R_NL, QK_PF_R_NV; QK_PF_R, where given, sets them all): 4 blocks for q5_1
// and q8_0, none for iq4_nl and nvfp4, from the H200 (benches/results/2026-12-05-h200-session16
// run2 `cact.txt`, kernel-only GB/s of the row kernels, 0 -> 4): q5_1 NT 1-5 +6-14 % (NT 2 3103
// -> 3482), NT 6-8 within 3 %; q8_0 NT 4-6 +9-11 % (3027 -> 3356 at NT 4), NT 7 -5 %, NT 8 +2 %;
// iq4_nl NT 1 +4 %, NT 2 -6 %; nvfp4 NT 1-5 -4 to -8 %.
#ifdef QK_PF_R
#define QK_PF_R_Q51 QK_PF_R
#define QK_PF_R_Q8 QK_PF_R
#define QK_PF_R_NL QK_PF_R
#define QK_PF_R_NV QK_PF_R
#endif
#ifndef QK_PF_R_Q51
#define QK_PF_R_Q51 4
#endif
#ifndef QK_PF_R_Q8
#define QK_PF_R_Q8 4
#endif
#ifndef QK_PF_R_NL
#define QK_PF_R_NL 0
#endif
#ifndef QK_PF_R_NV
#define QK_PF_R_NV 0
#endif
template <class U>
QK_DEV void mmr_pf(const MmJob& J, u32 nb, u32 row, u32 b) {
    constexpr u32 EVERY = U::BODY >= 64u ? 1u : U::BODY >= 32u ? 2u : 4u;
    constexpr u32 PF = U::PF_R;
    if (PF == 0 || row % EVERY != 0u || b + PF >= nb) return;
    qk_prefetch_l2((const u8*)J.w + qk_wblk(J.rows, nb, row, b + PF) * U::BODY);
}

// The row kernels' weights one unit ahead, at the token counts of the format's U::PIPE_R mask
// (bit NT - 1; QK_PIPE_R=n, where given: every NT up to n, 0: none): each iteration loads the
// next unit's weight words (`U::Raw`, `U::load`) into registers before it runs the current one
// (`U::unit_raw`), so a load's latency is hidden behind a whole unit of work instead of
// stalling the unit that needs it (Nsight Compute, H100 session 20: the row kernels at 21-23 %
// occupancy, 63 % of their stalls on the L1TEX scoreboard). Same words, same arithmetic: the
// same bits. It costs 8-17 registers, and where those push ptxas into spills or fewer CTAs it
// loses, so the masks are measured per format and NT (each Unit's PIPE_R). The shared-memory
// kernels (qk_mmc_*) have masks of their own (U::PIPE_C), for both of their bodies (the staged
// one, and the global-memory one they fall back to where the copy does not fit): with the
// activations out of the L1 the weights' latency is the stall left, and their registers differ.
// QK_PIPE_R=n, where given, overrides both masks. Each Unit's PIPE_C is overridable for sweeps
// (QK_PIPE_C_Q51, _Q8, _NL, _NV: a mask, 0xffu every NT; `gpu-run.sh pipec`); each unit's
// default is its PIPE_R plus the token counts measured to gain (H100, sessions 26-27).
#ifdef QK_PIPE_R
#define MMR_PIPE(ntm) ((ntm) <= QK_PIPE_R)
#else
#define MMR_PIPE(ntm) (((PIPE >> ((ntm) - 1)) & 1u) != 0u)
#endif

// TPR 2 (the qk_mmp_* kernels): two threads per row, each with half the accumulators. MmPairs
// (iq4_nl) splits by block parity: the even thread runs the even blocks into what the
// one-thread body calls acc, the odd thread the odd blocks into acc2, and the pair adds them
// with one shuffle in the same order (acc + acc2) (iq4_nl at NT 8: 64 floats a thread, not 128,
// which spilled 792 bytes on 128 registers). The single chains (MmPlain, MmSumms: q5_1's, the
// only one built) split by lane: thread h runs half h of every unit into lanes 4h..4h+3 (the two-thread lane kernels'
// split, mm_hsum_b, on the staged activations), and each adds its partner's lane 4 away before
// hsum_float_8's last two levels. Either way the bits are the one-thread body's.
template <class U, int CH, int NTM, class AS, u32 PIPE, int TPR = 1>
QK_DEV void mmr_body(const MmArgs& A) {
    static_assert(TPR == 1 || TPR == 2, "one or two threads a row");
    const u32 bid = qk_bid(), tid = qk_tid();
    const u32 j = mm_job_of(A, bid);
    const MmJob J = A.jobs[j];  // a copy: its fields in (uniform) registers, not reloaded from the parameter bank every block
    const u32 rows = J.rows;
    const u32 r = ((bid - J.cta0) * qk_bdim() + tid) / (u32)TPR;
    const u32 par = TPR == 2 ? (tid & 1u) : 0u;  // the pair's block parity (qk_bdim() is even)
    const u32 row = r < rows ? r : rows - 1u;
    mm_prefetch(A, j, row, 0u, 1u);
    const u32 units = A.nb * U::UNITS_PER_BLOCK;
    float acc[NTM][8], res[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t)
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[t][i] = 0.0f;
    if (CH == MmPairs && TPR == 2) {
        const u32 pairs = units / 2u;
        typename U::Raw w = {};
        if (MMR_PIPE(NTM) && pairs > 0u) w = U::load(A, J, row, par);
QK_UNROLL(1)
        for (u32 p = 0; p < pairs; ++p) {
            const u32 b = 2u * p + par;
            mmr_pf<U>(J, A.nb, row, b);
            typename U::Raw n;
            const u32 np = p + 1u < pairs ? p + 1u : p;  // the last pair loads itself again (no branch)
            if (MMR_PIPE(NTM))
                n = U::load(A, J, row, 2u * np + par);
            else
                w = U::load(A, J, row, b);
            mm_row_half<U, NTM, AS>(A, J, w, b, 0u, acc, nullptr);
            mm_row_half<U, NTM, AS>(A, J, w, b, 1u, acc, nullptr);
            if (MMR_PIPE(NTM)) w = n;
        }
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            float s[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const float o = qk_shfl_xor(acc[t][i], 1);
                s[i] = par ? qk_add(o, acc[t][i]) : qk_add(acc[t][i], o);  // even + odd on both threads
            }
            res[t] = mm_hsum8(s);
        }
    } else if (TPR == 2) {
        // the lane split: lanes 4 * par + i of the one-thread body's acc in a4[t][i]
        float a4[NTM][4], summs[NTM];
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            summs[t] = 0.0f;
#pragma unroll
            for (int i = 0; i < 4; ++i) a4[t][i] = 0.0f;
        }
        typename U::Raw w = {};
        if (MMR_PIPE(NTM) && units > 0u) w = U::load(A, J, row, 0u);
QK_UNROLL(1)
        for (u32 u = 0; u < units; ++u) {
            float m = 0.0f;
            if (par == 0u && u % U::UNITS_PER_BLOCK == 0u) mmr_pf<U>(J, A.nb, row, u / U::UNITS_PER_BLOCK);
            typename U::Raw n;
            if (MMR_PIPE(NTM))
                n = U::load(A, J, row, u + 1u < units ? u + 1u : u);  // the last unit loads itself again (no branch)
            else
                w = U::load(A, J, row, u);
            {
                i32 isum[4][NTM];
                float d[NTM];
                U::template unit_raw<NTM, AS>(A, J, w, u, par, isum, d, &m);
#pragma unroll
                for (int t = 0; t < NTM; ++t)
#pragma unroll
                    for (int i = 0; i < 4; ++i) a4[t][i] = qk_fma(d[t], qk_unbias(isum[i][t]), a4[t][i]);
            }
            if (MMR_PIPE(NTM)) w = n;
            if (CH == MmSumms) {
                float sa[NTM];
                AS::template f32s<NTM>(J, J.a_x, u, J.capw, sa);
#pragma unroll
                for (int t = 0; t < NTM; ++t) summs[t] = qk_fma(m, sa[t], summs[t]);
            }
        }
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            // hsum_float_8 (mm_hsum8): ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
            float s4[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float o = qk_shfl_xor(a4[t][i], 1);
                s4[i] = par ? qk_add(o, a4[t][i]) : qk_add(a4[t][i], o);  // lane i + lane i + 4 on both threads
            }
            const float hs = qk_add(qk_add(s4[0], s4[2]), qk_add(s4[1], s4[3]));
            res[t] = CH == MmSumms ? qk_add(hs, summs[t]) : hs;
        }
    } else if (CH == MmPairs) {
        float acc2[NTM][8];
#pragma unroll
        for (int t = 0; t < NTM; ++t)
#pragma unroll
            for (int i = 0; i < 8; ++i) acc2[t][i] = 0.0f;
        const u32 pairs = units / 2u;
        typename U::Raw w0 = {}, w1 = {};
        if (MMR_PIPE(NTM) && pairs > 0u) {
            w0 = U::load(A, J, row, 0u);
            w1 = U::load(A, J, row, 1u);
        }
QK_UNROLL(1)
        for (u32 p = 0; p < pairs; ++p) {
            mmr_pf<U>(J, A.nb, row, 2u * p);
            mmr_pf<U>(J, A.nb, row, 2u * p + 1u);
            typename U::Raw n0, n1;
            const u32 np = p + 1u < pairs ? p + 1u : p;  // the last pair loads itself again (no branch)
            if (MMR_PIPE(NTM)) {
                n0 = U::load(A, J, row, 2u * np);
                n1 = U::load(A, J, row, 2u * np + 1u);
            } else {
                w0 = U::load(A, J, row, 2u * p);
                w1 = U::load(A, J, row, 2u * p + 1u);
            }
            mm_row_half<U, NTM, AS>(A, J, w0, 2u * p, 0u, acc, nullptr);
            mm_row_half<U, NTM, AS>(A, J, w0, 2u * p, 1u, acc, nullptr);
            mm_row_half<U, NTM, AS>(A, J, w1, 2u * p + 1u, 0u, acc2, nullptr);
            mm_row_half<U, NTM, AS>(A, J, w1, 2u * p + 1u, 1u, acc2, nullptr);
            if (MMR_PIPE(NTM)) {
                w0 = n0;
                w1 = n1;
            }
        }
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            float s[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) s[i] = qk_add(acc[t][i], acc2[t][i]);
            res[t] = mm_hsum8(s);
        }
    } else {
        float summs[NTM];
#pragma unroll
        for (int t = 0; t < NTM; ++t) summs[t] = 0.0f;
        typename U::Raw w = {};
        if (MMR_PIPE(NTM) && units > 0u) w = U::load(A, J, row, 0u);
QK_UNROLL(1)
        for (u32 u = 0; u < units; ++u) {
            float m = 0.0f;
            if (u % U::UNITS_PER_BLOCK == 0u) mmr_pf<U>(J, A.nb, row, u / U::UNITS_PER_BLOCK);
            typename U::Raw n;
            if (MMR_PIPE(NTM))
                n = U::load(A, J, row, u + 1u < units ? u + 1u : u);  // the last unit loads itself again (no branch)
            else
                w = U::load(A, J, row, u);
            mm_row_half<U, NTM, AS>(A, J, w, u, 0u, acc, &m);
            mm_row_half<U, NTM, AS>(A, J, w, u, 1u, acc, &m);
            if (MMR_PIPE(NTM)) w = n;
            if (CH == MmSumms) {
                float sa[NTM];
                AS::template f32s<NTM>(J, J.a_x, u, J.capw, sa);
#pragma unroll
                for (int t = 0; t < NTM; ++t) summs[t] = qk_fma(m, sa[t], summs[t]);
            }
        }
#pragma unroll
        for (int t = 0; t < NTM; ++t) res[t] = CH == MmSumms ? qk_add(mm_hsum8(acc[t]), summs[t]) : mm_hsum8(acc[t]);
    }
    if (CH == MmPairs && (units & 1u)) {
        // the even/odd chains' scalar tail: sumf = fma(d, sum of the 8 lanes, sumf) (iq4_nl:
        // both halves' d agree; with two threads a row both run it: the same loads, the same bits)
        i32 i0[4][NTM], i1[4][NTM];
        float d[NTM];
        U::template unit<NTM, AS>(A, J, row, units - 1u, 0u, i0, d, nullptr);
        U::template unit<NTM, AS>(A, J, row, units - 1u, 1u, i1, d, nullptr);
#pragma unroll
        for (int t = 0; t < NTM; ++t) {
            const u32 s0 = (u32)i0[0][t] + (u32)i0[1][t] + (u32)i0[2][t] + (u32)i0[3][t];
            const u32 s1 = (u32)i1[0][t] + (u32)i1[1][t] + (u32)i1[2][t] + (u32)i1[3][t];
            res[t] = qk_fma(d[t], qk_i2f(qk_unbias_sum(s0 + s1, 8)), res[t]);
        }
    }
    if (r < rows && par == 0u)
#pragma unroll
        for (int t = 0; t < NTM; ++t)
            if ((u32)t < J.nt) ((float*)J.out)[(u64)t * rows + r] = res[t];
}

// The qk_mmc_* kernels: activations from the constant bank (ActC: the one buffer every job of
// the launch reads, copied by the host), or with QK_CACT_SMEM from shared memory, where each CTA
// first copies its own job's NTM tokens here (ActS).
template <class U, int CH, int NTM, int TPR = 1>
QK_DEV void mmc_body(const MmArgs& A) {
#if QK_CACT_SMEM
    // This CTA's job's NTM tokens (ActS); a launch whose copy does not fit reads global memory.
    typedef ActS<NTM> S;
    const u32 na = A.cols / 32u, need = S::bytes(A.cols);
    if (need > A.alen || need > QK_SACT_BYTES) {  // uniform: launch arguments
        mmr_body<U, CH, NTM, ActG, U::PIPE_C, TPR>(A);
        return;
    }
    const MmJob& J = A.jobs[mm_job_of(A, qk_bid())];
    const u32 capw = J.capw, tid = qk_tid(), bd = qk_bdim();
    for (u32 i = tid; i < na * 2u * NTM; i += bd) {
        const u32 b = i / (2u * NTM), r = i % (2u * NTM), q = 2u * b + r / NTM, t = r % NTM;
        qk_sact[b * S::SB + r] = ld_aq((const u32*)J.a_qs, q, capw, t);
    }
    for (u32 i = tid; i < na * NTM; i += bd) {
        const u32 b = i / NTM, t = i % NTM;
        float* c = (float*)(qk_sact + b * S::SB + 2u * NTM);
        c[t] = qk_ld((const float*)J.a_d + (u64)b * capw + t);
        if (J.a_x != 0) c[NTM + t] = qk_ld((const float*)J.a_x + (u64)b * capw + t);
    }
    qk_sync();
    mmr_body<U, CH, NTM, S, U::PIPE_C, TPR>(A);
#else
    mmr_body<U, CH, NTM, ActC, U::PIPE_C, TPR>(A);
#endif
}

// qk_mmr_*: activations from global memory; qk_mmc_*: from shared memory (ActS) or the
// constant bank (ActC).
#define MMR_MINB(NTM) ((NTM) == 1 ? QK_MINB_R1 : (NTM) == 2 ? QK_MINB_R12 : QK_MINB_R)
// The shared-memory kernels ask ptxas for 3 resident CTAs (80 registers) at the token counts of
// the format's U::MINB_C3 mask (bit NT - 1; QK_MINB_C3_Q51, _Q8, _NL, _NV), else QK_MINB_C12 /
// QK_MINB_C (2: 128 registers). H100 session 26 (benches/results/2026-12-06-session26,
// kernel-only GB/s): run5-ntsweep, QK_MINB_C 2 / 3 (NT 3-8; QK_MINB_C12 keeps NT 1-2): nvfp4
// NT 3 2177 / 2375, NT 4 1964 / 2112, NT 5-8 slower (NT 8 1341 / 832: spills); q5_1 NT 3 2727
// / 2781, NT 4 2620 / 2713, NT 5-8 slower (NT 8 1837 / 741); q8_0 and iq4_nl no faster at any
// NT from 3. QK_MINB_C 1 (one CTA, up to 255 registers) won only iq4_nl's NT 7-8 (which run
// two chunks of 4 by default) and nvfp4's NT 5 (1698 / 1622, one run). run6, the masks on and
// off, each twice, interleaved: nvfp4 NT 3 2366, 2382 / 2177, 2176, NT 4 2096, 2115 / 1961,
// 1963; q5_1 NT 3 2828, 2805 / 2717, 2718, NT 4 2670, 2672 / 2588, 2584 (its NT 4 kernel
// spills 16 bytes on 80 registers, ptxas 13.0, and gains all the same).
#define MMC_MINB(U, NTM) \
    (((U::MINB_C3 >> ((NTM) - 1)) & 1u) ? 3 : (NTM) <= 2 ? QK_MINB_C12 : QK_MINB_C)
#ifndef QK_MINB_C3_Q51
#define QK_MINB_C3_Q51 0x0cu
#endif
#ifndef QK_MINB_C3_Q8
#define QK_MINB_C3_Q8 0u
#endif
#ifndef QK_MINB_C3_NL
#define QK_MINB_C3_NL 0u
#endif
#ifndef QK_MINB_C3_NV
#define QK_MINB_C3_NV 0x0cu
#endif
#define MMR_KERNEL_1(fmt, U, CH, NTM)                                                              \
    QK_DEV void mmr_##fmt##_n##NTM(const MmArgs& A) { mmr_body<U, CH, NTM, ActG, U::PIPE_R>(A); } \
    QK_ENTRY_LB(qk_mmr_##fmt##_n##NTM, MmArgs, mmr_##fmt##_n##NTM, MMR_MINB(NTM))                   \
    QK_DEV void mmc_##fmt##_n##NTM(const MmArgs& A) { mmc_body<U, CH, NTM>(A); }                    \
    QK_ENTRY_LB(qk_mmc_##fmt##_n##NTM, MmArgs, mmc_##fmt##_n##NTM, MMC_MINB(U, NTM))

#define MM_KERNELS_R(fmt, U, CH) QK_EACH_NTM(MMR_KERNEL_1, fmt, U, CH)

// qk_mmp_*: the staged kernels (qk_mmc_*) with two threads per row (mmr_body TPR 2: by block
// parity for iq4_nl's even/odd chains, by lane for q5_1's one chain). Their CTAs an SM: the staged
// kernels' (MMC_MINB), or QK_MINB_P where given (a sweep: their halved accumulators fit 80
// registers at lower NT than the one-thread kernels').
#ifdef QK_MINB_P
#define MMP_MINB(U, NTM) QK_MINB_P
#else
#define MMP_MINB(U, NTM) MMC_MINB(U, NTM)
#endif
#define MMP_KERNEL_1(fmt, U, CH, NTM)                                                    \
    QK_DEV void mmp_##fmt##_n##NTM(const MmArgs& A) { mmc_body<U, CH, NTM, 2>(A); } \
    QK_ENTRY_LB(qk_mmp_##fmt##_n##NTM, MmArgs, mmp_##fmt##_n##NTM, MMP_MINB(U, NTM))
#define MM_KERNELS_P(fmt, U, CH) QK_EACH_NTM(MMP_KERNEL_1, fmt, U, CH)

// A block body of W words into registers with the widest loads its alignment AL (bytes: 16,
// 8 or 4) allows: a few wide loads instead of one narrow load per sub-block and byte. Index
// the result only with compile-time constants (unrolled loops); pick run-time words with sel2.
template <int W, int AL>
QK_DEV void ld_body(const u8* p, u32* w) {
    if (AL == 16) {
#pragma unroll
        for (int k = 0; k < W / 4; ++k) {
            const uint4 v = ld128(p + 16 * k);
            w[4 * k] = v.x, w[4 * k + 1] = v.y, w[4 * k + 2] = v.z, w[4 * k + 3] = v.w;
        }
#pragma unroll
        for (int k = 4 * (W / 4); k < W; ++k) w[k] = ld32(p + 4 * k);
    } else if (AL == 8) {
#pragma unroll
        for (int k = 0; k < W / 2; ++k) {
            const uint2 v = ld64(p + 8 * k);
            w[2 * k] = v.x, w[2 * k + 1] = v.y;
        }
#pragma unroll
        for (int k = 2 * (W / 2); k < W; ++k) w[k] = ld32(p + 4 * k);
    } else {
#pragma unroll
        for (int k = 0; k < W; ++k) w[k] = ld32(p + 4 * k);
    }
}
QK_DEV u32 sel2(u32 a, u32 b, u32 s) { return s ? b : a; }
// Byte k of w: one PRMT (a shift and a mask otherwise, where k is known at run time only).
QK_DEV u32 wbyte(u32 w, u32 k) { return qk_perm(w, 0u, 0x4440u | k); }

// ---- The IQ2/IQ3 grids in shared memory, replicated across the banks. A warp's lookups are
// random entries of a 1-8 KiB table; stored once, many threads of a warp hit the same bank at
// different words and the load replays (Nsight Compute, H200 session 13: iq2_xxs NT 1 had 66 %
// of its shared wavefronts in excess, L1 97 % busy, HBM 23 %). Here entry e is a row of ROW
// words holding REP copies of it (EW words each: 2 for the IQ2 grids' 8-byte entries, 1 for the
// IQ3 grids' 4-byte ones), and thread lane reads copy lane % REP: with REP * EW = 32 (iq2_xxs,
// iq3_xxs) every thread of a wavefront has its own bank(s), with fewer copies (the larger grids,
// held to 32 KiB a CTA) the threads of one copy collide only among themselves. QK_GRID_REP=0
// (NVRTC option -DQK_GRID_REP=0): one copy, the table as stored. The values read, hence the
// bits, are the same either way.
#ifndef QK_GRID_REP
#define QK_GRID_REP 1
#endif
// The IQ2/IQ3 tensor-core kernels on fp16 tensor cores (iq_hmma_lane, the default), or with 0 on
// int8 tensor cores (iq_mma_lane). H100, 1 GiB, kernel-only GB/s, int8 / fp16, the same at every
// NT (benches/results/2026-12-06-session28 run1-hmma): iq2_xxs 868 / 1105, iq2_xs 903 / 1153,
// iq2_s 919 / 978, iq3_xxs 980 / 1514, iq3_s 1256 / 1306; the bits are the same (the GPU's live
// parity and `qkern parity` with each). (args::mma_default_mask takes each its own token
// counts.) Staging B once per CTA (8 KiB of shared memory, a barrier a block step) measured
// slower at every NT (iq2_xxs 916 at NT 2, 753 at NT 8) and is gone, as is the former 2 (B
// from an fp16 copy of the q8_K quants in the activation buffers: slower for every format and
// NT, iq3_xxs 1518 -> 1188, 2026-12-06-session29 run1-hmma). kernels.rs always passes this
// define, from its own reading of QKERN_CUDA_NVRTC_OPTS (`iq_hmma`), so that the host's token
// counts and the kernels agree. With fp16 the IQ2 formats' tensor-core kernels always look up
// selector words (Iq2Sel, whatever QK_IQ2_SEL says).
#ifndef QK_IQ_HMMA
#define QK_IQ_HMMA 1
#endif
#if QK_IQ_HMMA != 0 && QK_IQ_HMMA != 1
#error "QK_IQ_HMMA: 0 (int8 tensor cores) or 1 (fp16)"
#endif
// Words of shared memory a CTA's grid copies may take: 32 KiB; 8 KiB on devices with less than
// 160 KiB of shared memory per SM (kernels.rs `big_shared`), so that they do not cut occupancy.
#ifndef QK_GRID_WORDS
#define QK_GRID_WORDS 8192
#endif
#ifndef QK_SIGN_WORDS
#define QK_SIGN_WORDS 4096  // the sign tables' (SignTab): 16 KiB; 4 KiB on the smaller SMs
#endif
// ON = false: one copy for this table (a format's `LOOKS`, below).
template <u32 WORDS, u32 EW, u32 BUDGET = QK_GRID_WORDS, bool ON = true>
struct GridRep {
    static constexpr u32 CAP = BUDGET / WORDS < 1u ? 1u : BUDGET / WORDS;  // copies within BUDGET words
    static constexpr u32 R0 = (QK_GRID_REP == 0 || !ON) ? 1u : CAP < 32u / EW ? CAP : 32u / EW;
    static constexpr u32 REP = R0 * EW < 4u ? 1u : R0;  // mm_load_grid's 16-byte stores: rows of 4+ words
    static constexpr u32 ROW = REP * EW;
    static constexpr u32 SHARED_WORDS = WORDS * REP;
};

// This thread's copy of a replicated table, as a generic pointer and as a shared-window address
// (qk_sptr). Lookups by address (SA) take one add each instead of ptxas's five (sm_90 SASS, the
// IQ lane kernels at NT 1: iq2_xxs 490 -> 453 instructions a block, with PRMT byte picks 421),
// but at NT 7 and 8 ptxas then spills some 300 bytes where the pointer form spills 0-36: the
// lane kernels take them up to QK_IQ_SA_NTM tokens.
struct TabRef {
    const u32* p;
    qk_sptr s;
};
QK_DEV TabRef tab_ref(const u32* p) {
    TabRef t;
    t.p = p;
    t.s = qk_sptr_of(p);
    return t;
}
#ifndef QK_IQ_SA_NTM
#define QK_IQ_SA_NTM 4
#endif
// Whether iq2_s and iq3_s take the grid copies, sign tables and lookups by address (a format's
// `LOOKS`; the other IQ2/IQ3 formats always do where QK_GRID_REP, QK_SIGN_TAB, QK_IQ_SA_NTM
// allow). Off: on the H200 (benches/results/2026-12-05-h200-session16 run3, kernel-only GB/s)
// they cost iq2_s 1337 -> 1087 at NT 1 and 908 -> 801 on tensor cores, iq3_s 1243 -> 1025 and
// 1182 -> 1136 (their 1024- and 512-entry grids get 4 and 8 copies, not 16 and 32), where
// iq2_xxs gained 1184 -> 1310 and 778 -> 818, iq3_xxs 1496 -> 1631 and 871 -> 929.
#ifndef QK_IQ_S_LOOKS
#define QK_IQ_S_LOOKS 0
#endif

// Fill replicated table G (all threads; no barrier) from `entry(e)`, entry e's words (.y unused
// where an entry is one word), and return this thread's copy: entry e's words at
// `base + G::ROW * e`. Copies in rows of 4 words or more (GridRep) take 16-byte stores.
template <class G, class F>
QK_DEV TabRef mm_fill_rep(u32* dst, const F& entry) {
    constexpr u32 EW = G::ROW / G::REP;
    if (G::REP == 1) {
        for (u32 e = qk_tid(); e < G::SHARED_WORDS / EW; e += qk_bdim()) {
            const uint2 v = entry(e);
            dst[EW * e] = v.x;
            if (EW == 2u) dst[EW * e + 1u] = v.y;
        }
    } else {
        constexpr u32 Q = G::ROW / 4u;  // 16-byte stores a row (REP * EW >= 4, powers of 2)
        for (u32 i = qk_tid(); i < G::SHARED_WORDS / 4u; i += qk_bdim()) {
            const uint2 v = entry(i / Q);
            ((uint4*)dst)[i] = EW == 2u ? make_u4(v.x, v.y, v.x, v.y) : make_u4(v.x, v.x, v.x, v.x);
        }
    }
    return tab_ref(dst + EW * (qk_tid() % G::REP));
}

// Fill the replicated grid G (table words at `off` of the tables buffer; all threads, then a
// barrier) and return this thread's copy (mm_fill_rep).
template <class G>
QK_DEV TabRef mm_load_grid(u32* dst, const MmArgs& A, u32 off) {
    const u32* src = (const u32*)A.tab + off;
    constexpr u32 EW = G::ROW / G::REP;
    const TabRef t = mm_fill_rep<G>(dst, [&](u32 e) {
        uint2 v;
        v.x = qk_ld(src + EW * e);
        v.y = EW == 2u ? qk_ld(src + EW * e + 1u) : v.x;
        return v;
    });
    qk_sync();
    return t;
}
// Entry i of a replicated grid (mm_load_grid's copy): 8 bytes (the IQ2 grids) or 4 (IQ3), by
// shared address (SA) or through the pointer.
template <class G, bool SA>
QK_DEV uint2 grid_e8(const TabRef& t, u32 i) {
    return SA ? qk_lds64(t.s, 4u * G::ROW * i) : *(const uint2*)(t.p + G::ROW * i);
}
template <class G, bool SA>
QK_DEV u32 grid_e4(const TabRef& t, u32 i) {
    return SA ? qk_lds32(t.s, 4u * G::ROW * i) : t.p[G::ROW * i];
}

// Dequantize: one thread per element (grid-stride), `deq(body, d16, e, tab)` gives element
// e of a block; formats stored split read their fp16 `d` from the separate array.
#define DEQ_KERNEL(fmt, deq, BE, BODY, SPLIT) DEQ_KERNEL_T(fmt, deq, BE, BODY, SPLIT, 0)
// TILED: the weights are tiled (layout.rs), block numbers from qk_wblk.
#define DEQ_KERNEL_T(fmt, deq, BE, BODY, SPLIT, TILED)                                 \
    QK_DEV void deq_##fmt##_body(const DeqArgs& A) {                                    \
        const u64 total = (u64)A.rows * A.cols;                                         \
        const u32 nb = A.cols / (BE);                                                   \
        for (u64 i = (u64)qk_bid() * qk_bdim() + qk_tid(); i < total;                   \
             i += (u64)qk_bdim() * qk_gdim()) {                                         \
            const u64 r = i / A.cols;                                                   \
            const u32 c = (u32)(i % A.cols);                                            \
            const u64 blk = (TILED) ? qk_wblk(A.rows, nb, (u32)r, c / (BE))             \
                                    : r * nb + c / (BE);                                \
            const u8* body = (const u8*)A.w + blk * (BODY);                             \
            /* SPLIT 1: an fp16 d array; 2: a u32 array (nvfp4's four UE4M3 scales) */   \
            const u32 dd = (SPLIT) == 2 ? qk_ld((const u32*)A.wd + blk)                 \
                         : (SPLIT) ? (u32)qk_ld((const u16*)A.wd + blk) : 0u;          \
            const float v = deq(body, dd, c % (BE), (const u32*)A.tab);                 \
            if (A.kind == 0) ((float*)A.out)[i] = v;                                    \
            else if (A.kind == 1) ((u16*)A.out)[i] = qk_f2h(v);                         \
            else ((u16*)A.out)[i] = qk_f2bf(v);                                         \
        }                                                                               \
    }                                                                                   \
    QK_ENTRY(qk_deq_##fmt, DeqArgs, deq_##fmt##_body)

// Byte b of a little-endian table word array.
QK_DEV u32 tab_byte(const u32* t, u32 b) { return (qk_ld(t + b / 4) >> (8 * (b % 4))) & 0xffu; }

// ksigns_iq2xs[k]: the 7 sign bits k and their parity in bit 7.
QK_DEV u32 ksigns(u32 k) { return k | (((u32)qk_popc(k) & 1u) << 7); }

// ---- Sign tables of the IQ2/IQ3 lane kernels. Two lanes' signs are one sign byte (ksigns of a
// 7-bit index, or a byte of the block), applied as qk_sign_bytes(grid word, e) with e the 0/1
// bytes of one nibble. Computed, that is some 20 operations a byte (popc and parity, two
// spreads, their masks); looked up, an 8-byte entry (e of the low nibble, e of the high) from a
// shared table of the 128 indices (iq2_xxs, iq2_xs, iq3_xxs) or 256 bytes (iq2_s, iq3_s),
// replicated as the grids are (GridRep, 16 KiB a CTA), in the lane kernels up to QK_IQ_SA_NTM
// tokens and in the tensor-core kernels (mma_iq: the masks e * 0xff). sm_90 SASS of the block
// loops, session 13's kernels -> these tables, lookups by address and PRMT byte picks: NT 1
// lanes iq2_xxs 626 -> 421 instructions, iq2_xs 582 -> 456, iq2_s 608 -> 467, iq3_xxs 678 ->
// 511, iq3_s 670 -> 561; tensor cores (NT 2-8) 954 -> 824, 981 -> 844, 937 -> 849, 1160 ->
// 1037, 901 -> 829. QK_SIGN_TAB=0: computed (with qk_sign_bytes).
// The bytes, hence the bits, are the same either way.
#ifndef QK_SIGN_TAB
#define QK_SIGN_TAB 1
#endif
template <u32 N, bool USE = true>
struct SignTab {
    static constexpr u32 ENTRIES = N;  // 128: ksigns(k); 256: the byte k
    static constexpr bool ON = QK_SIGN_TAB != 0 && USE;
    using G = GridRep<ON ? 2u * N : 8u, 2, ON ? QK_SIGN_WORDS : 8u>;
};
// The 0/1 bytes of sign byte s: .x of its low nibble, .y of its high nibble.
QK_DEV uint2 sign_spread(u32 s) {
    uint2 e;
    e.x = qk_spread4(s & 0xfu);
    e.y = qk_spread4(s >> 4);
    return e;
}
// Fill sign table T (all threads; no barrier: mm_load_grid's follows) and return this thread's
// copy (as mm_load_grid does).
template <class T>
QK_DEV TabRef mm_fill_signs(u32* dst) {
    if (!T::ON) return tab_ref(dst);
    return mm_fill_rep<typename T::G>(dst, [](u32 k) { return sign_spread(T::ENTRIES == 128u ? ksigns(k) : k); });
}
// Entry k of sign table T (its copy `t`, looked up by address), or the same computed.
template <class T>
QK_DEV uint2 sign_e(const TabRef& t, u32 k) {
    if (T::ON) return grid_e8<typename T::G, true>(t, k);
    return sign_spread(T::ENTRIES == 128u ? ksigns(k) : k);
}
// ---- IQ2 grids as byte-permute selectors (QK_IQ2_SEL; the lane kernels of iq2_xxs and iq2_xs,
// with lookups by address). Every byte of an IQ2 grid is 0x08, 0x19 or 0x2b, so an 8-byte
// entry is 8 codes 0-2, a nibble each: a 4-byte selector word (32 copies of iq2_xxs's grid in
// the same 32 KiB, one shared wavefront a warp's lookup where an 8-byte entry takes two). A
// sign byte becomes a word with its bit j in bit 2 of nibble j (a 4-byte sign entry, again one
// wavefront for two), and `sel | sgn` picks each byte from {8, 25, 43, -8, -25, -43}: one `or`
// and two byte permutes give the two signed grid words, where the grid entry and the 0/1 sign
// bytes took 6 operations ((g ^ e * 0xff) + e a word). The same signed bytes, hence the bits.
#ifndef QK_IQ2_SEL
#define QK_IQ2_SEL 1
#endif
constexpr u32 IQ2_POS = 0x002b1908u, IQ2_NEG = 0x00d5e7f8u;  // bytes 8, 25, 43 and -8, -25, -43
// The selector grid of format F (GS: a word an entry, F::TAB_SEL of the tables, layout.rs
// `iq2_sel`) and its sign words (SS: a word a sign index, TAB_SGN128 or TAB_SGN256, `iq2_sgn`).
template <class F>
struct Iq2Sel {
    using GS = GridRep<F::GRID_WORDS / 2u, 1>;
    using SS = GridRep<F::SIGNS, 1, QK_SIGN_WORDS>;
};
// Fill F's selector grid and sign words (all threads, then a barrier); this thread's copies.
template <class F>
QK_DEV void mm_load_iq2_sel(const MmArgs& A, u32* grid_sh, u32* sign_sh, TabRef* grid, TabRef* sgt) {
    const u32* tab = (const u32*)A.tab;
    *sgt = mm_fill_rep<typename Iq2Sel<F>::SS>(sign_sh, [&](u32 k) {
        return make_u2(qk_ld(tab + (F::SIGNS == 128u ? TAB_SGN128 : TAB_SGN256) + k), 0u);
    });
    *grid = mm_fill_rep<typename Iq2Sel<F>::GS>(grid_sh, [&](u32 e) { return make_u2(qk_ld(tab + F::TAB_SEL + e), 0u); });
    qk_sync();
}

// The lookups of an IQ lane kernel: by shared address or not (grid_e8), its sign table, and
// whether the grid and signs are IQ2 selectors (SEL, with their tables GS and SS).
template <bool SA_, class SG, bool SEL_ = false, class Sel = void>
struct IqLook {
    static constexpr bool SA = SA_;
    static constexpr bool SEL = SEL_;
    using Sg = SG;
    using Tabs = Sel;
};

// Two lanes' signed grid words from one 8-byte grid entry (the IQ2 formats) and its sign entry
// e: sg[0] from g.x with the low nibble's signs, sg[1] from g.y with the high nibble's.
QK_DEV void mm_sign_pair_e(uint2 g, uint2 e, i32* sg) {
    sg[0] = (i32)qk_sign_bytes(g.x, e.x);
    sg[1] = (i32)qk_sign_bytes(g.y, e.y);
}

// An IQ2 lane pair's signed grid words sg[0], sg[1]: grid entry idx (table G) with sign entry
// sidx, from the selector tables where L::SEL.
template <class G, class L>
QK_DEV void iq2_pair(const TabRef& grid, const TabRef& sgt, u32 idx, u32 sidx, i32* sg) {
    if (L::SEL) {
        using T = typename L::Tabs;
        const u32 sel = grid_e4<typename T::GS, true>(grid, idx) | grid_e4<typename T::SS, true>(sgt, sidx);
        sg[0] = (i32)qk_prmt(IQ2_POS, IQ2_NEG, sel);  // nibbles at most 6: no sign replication
        sg[1] = (i32)qk_prmt(IQ2_POS, IQ2_NEG, sel >> 16);
    } else {
        mm_sign_pair_e(grid_e8<G, L::SA>(grid, idx), sign_e<typename L::Sg>(sgt, sidx), sg);
    }
}

// The IQ2/IQ3 formats' matmul on the L4 lanes (MM_KERNELS_L4): one skeleton, a format `F`
// giving its block (BODY bytes, grid table TAB of GRID_WORDS words, ld_body alignment AL), its
// final scaling (SCALED, SCALE: ggml's 0.125 / 0.25, none for iq3_s), whether a thread loads
// its whole body up front (`WHOLE<NTM, S>`, else the words where used), a prefetch hook,
// the per-block values hoisted out of the sub-block loop (`Blk`, built from the word reader)
// and `sub`: sub-block ib's scale `ls` and lanes 4h..4h+3's signed grid bytes `sg`.
template <class F, int NTM, int S>
QK_DEV void mm_iq_l4(const MmArgs& A, const MmCtxW& c) {
    // up to QK_IQ_SA_NTM tokens (where the format takes them, F::LOOKS): lookups by address,
    // sign tables; the IQ2 formats' as selectors (QK_IQ2_SEL)
    constexpr bool SA = F::LOOKS && NTM <= QK_IQ_SA_NTM;
    constexpr bool SEL = SA && F::IQ2 && QK_IQ2_SEL != 0;
    using L = IqLook<SA, SignTab<F::SIGNS, SA && !SEL>, SEL, Iq2Sel<F>>;
    QK_SHARED16 u32 grid_sh[SEL ? Iq2Sel<F>::GS::SHARED_WORDS : F::G::SHARED_WORDS];
    QK_SHARED16 u32 sign_sh[SEL ? Iq2Sel<F>::SS::SHARED_WORDS : L::Sg::G::SHARED_WORDS];
    TabRef sgt, grid;
    if (SEL) {
        mm_load_iq2_sel<F>(A, grid_sh, sign_sh, &grid, &sgt);
    } else {
        sgt = mm_fill_signs<typename L::Sg>(sign_sh);
        grid = mm_load_grid<typename F::G>(grid_sh, A, F::TAB);
    }
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, h = c.h;
    // Block b of the row: body at w + b * ws, d at wd[b * ds] (common.cuh qk_iq_row0, tiled
    // where QK_IQ_TILE; a tile's bytes fit in 32 bits, layout.rs `tile_fits`).
    const u64 k0 = qk_iq_row0(nb, c.row);
    const u32 ds = qk_iq_step(J.rows, c.row), ws = ds * F::BODY;
    const u8* w = (const u8*)J.w + k0 * F::BODY;
    const u16* wd = (const u16*)J.wd + k0;
    const u32 capw = J.capw;
    const u32* aq = (const u32*)J.a_qs;
    const float* ad = (const float*)J.a_d;
    float acc[NTM][4];
    mm_zero<NTM>(acc);
QK_UNROLL(QK_UNROLL_P4)
    for (u32 b = 0; b < nb; ++b) {
        const u8* body = w + ws * b;
        F::template prefetch<NTM>(body, ws, b, nb, c);
        constexpr int PF1 = NTM == 1 ? QK_PF1_IQ : 0;  // NT 1, every IQ2/IQ3 format
        mm_pf<PF1, true>(body + ws * PF1, b, nb, F::BODY, 2u * c.s + h);
        const float xd = qk_h2f(qk_ld(wd + ds * b));
        constexpr bool WHOLE = F::template WHOLE<NTM, S>;
        constexpr int NW = WHOLE ? (int)(F::BODY / 4u) : 1;
        u32 bw[NW];
        if (WHOLE) ld_body<NW, F::AL>(body, bw);
        const auto W = [&](u32 k) { return WHOLE ? bw[k] : ld32(body + 4u * k); };
        const typename F::Blk blk(W);
        i32 isum[4][NTM];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int t = 0; t < NTM; ++t) isum[i][t] = 0;
#pragma unroll
        for (int k = 0; k < 8 / S; ++k) {
            const u32 ib = (u32)(k * S) + c.s;
            i32 ls;
            i32 sg[4];
            F::template sub<WHOLE, L>(W, body, blk, ib, h, grid, sgt, &ls, sg);
            mm_l4_dot<NTM>(isum, sg, ls, aq, capw, b, ib, h);
        }
        mm_l4_chain<NTM, S>(acc, isum, xd, ad, capw, b);
    }
    mm_l4_finish<NTM, F::SCALED>(A, c, acc, F::SCALE);
}

// The defaults of an `mm_iq_l4` format: the whole body at S = 1, no prefetch, nothing hoisted.
struct LaneIqBase {
    static constexpr bool LOOKS = true;  // grid copies, sign tables, lookups by address
    static constexpr bool IQ2 = false;   // 8-byte grid entries of the bytes 8, 25, 43 (Iq2Sel)
    static constexpr u32 TAB_SEL = 0;    // their selector grid in the tables (IQ2 only)
    template <int NTM, int S>
    static constexpr bool WHOLE = S == 1;
    template <int NTM>
    static QK_MEMBER void prefetch(const u8*, u32, u32, u32, const MmCtxW&) {}
    struct Blk {
        template <class Wf>
        QK_MEMBER explicit Blk(const Wf&) {}
    };
};

// ---- Tensor-core kernels (qk_mma_u8s8 / qk_mma_s8s8, sm_80+; the 256-element formats from a few
// tokens on, as args::mma_default_mask says; any NT 1..8 gives the same bits).
// The integer lane sums of ggml's AVX2 dots are exact, so any exact way of computing them gives
// the reference's bits as long as every float step stays per lane and in block order. A warp
// owns 16 rows (g, g + 8 for lane 4g + q) and all 8 token slots; for each AVX2 lane L (bytes
// 4L..4L+3 of every 32-element sub-block) and block, one m16n8k32 product sums over
// K = (8 sub-blocks x 4 bytes): A = the rows' quants of lane L times their sub-block scale
// (split into parts that keep each byte below 256, one product per part), B = the tokens' q8
// bytes of lane L. Thread (g, q) then holds lane L of (row g | g + 8) x (token 2q | 2q + 1), the
// 4 "cells" c = 2 * (row half) + (token parity), and runs their float chains itself: no
// shuffles. K is laid out so that thread q's A and B words are sub-blocks 2q (k = 4q..4q+3) and
// 2q + 1 (k = 16+4q..), the low and high nibbles of one q4_K / q5_K quant word.
struct MmaCtx {
    u32 job;
    u32 g;  // lane / 4: rows g and g + 8 of the warp's 16, and token column g of B
    u32 q;  // lane % 4: K words 4q.. and 16+4q.., tokens 2q and 2q + 1 of the cells
    u32 row[2];
    bool valid[2];
    u32 nt;
    // Token slots past the job's tokens read the last token again (in bounds, no predicates;
    // their cells are never stored): acol is B's token column g, tk the cells' tokens 2q, 2q + 1.
    u32 acol;
    u32 tk[2];
};

QK_DEV MmaCtx mma_ctx(const MmArgs& A) {
    MmaCtx c;
    const u32 bid = qk_bid();
    const u32 j = mm_job_of(A, bid);
    c.job = j;
    const u32 tid = qk_tid(), lane = tid & 31u;
    c.g = lane >> 2;
    c.q = lane & 3u;
    const u32 rows = A.jobs[j].rows;
    const u32 row0 = (bid - A.jobs[j].cta0) * (qk_bdim() / 2u) + (tid >> 5) * 16u;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const u32 r = row0 + c.g + 8u * (u32)h;
        c.valid[h] = r < rows;
        c.row[h] = c.valid[h] ? r : rows - 1u;
        mm_prefetch(A, j, c.row[h], c.q, 4u);
    }
    c.nt = A.jobs[j].nt;
    const u32 last = c.nt - 1u;
    c.acol = c.g < last ? c.g : last;
#pragma unroll
    for (int t = 0; t < 2; ++t) c.tk[t] = 2u * c.q + (u32)t < last ? 2u * c.q + (u32)t : last;
    return c;
}

// The 4 cells' 8 lane chains, zeroed.
QK_DEV void mma_zero(float (*acc)[8]) {
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int l = 0; l < 8; ++l) acc[x][l] = 0.0f;
}

// The cells' block factors d[2h + t] = xd[h] * yd[token tk[t]] (ggml: `d = x.d * y.d`; the
// K-quants write `y.d * x.d`, the same bits: IEEE products commute).
QK_DEV void mma_cell_d(const MmaCtx& c, const float* ad, u32 capw, u32 b, const float* xd, float* d) {
#pragma unroll
    for (int t = 0; t < 2; ++t) {
        const float da = qk_ld(ad + (u64)b * capw + c.tk[t]);
#pragma unroll
        for (int h = 0; h < 2; ++h) d[2 * h + t] = qk_mul(xd[h], da);
    }
}


// Cell c's result: row half c >> 1, token 2q + (c & 1).
QK_DEV void mma_store(const MmArgs& A, const MmaCtx& c, int cell, float v) {
    const u32 t = 2u * c.q + (u32)(cell & 1), h = (u32)cell >> 1;
    if (c.valid[h] && t < c.nt) ((float*)A.jobs[c.job].out)[(u64)t * A.jobs[c.job].rows + c.row[h]] = v;
}

// The end of a kernel without extra chains: each cell's hsum_float_8 (times `scale` where
// SCALED: ggml's 0.125 or 0.25 of the IQ2/IQ3 dots), stored.
template <bool SCALED>
QK_DEV void mma_finish(const MmArgs& A, const MmaCtx& c, float (*acc)[8], float scale) {
#pragma unroll
    for (int x = 0; x < 4; ++x) mma_store(A, c, x, SCALED ? qk_mul(scale, mm_hsum8(acc[x])) : mm_hsum8(acc[x]));
}

// Per format: the resident 256-thread CTAs asked of ptxas (QK_MINB_MMA_*) and the L2 prefetch
// distance in blocks (QK_PF_MMA_*, mm_pf). H200, 1 GiB, kernel-only GB/s at NT 2 / 4 / 8
// (benches/results/2026-12-04-h200-session10/run3): q4_K 1597 / 1579 / 1538 with (2, 0),
// 2000 / 1938 / 1852 with (1, 0), 1472 / 1477 / 1445 with (2, 2), 2265 / 2230 / 2163 with (1, 2);
// q5_K 2074 / 1959 / 1880 with (2, 0), 2098 / 2075 / 2029 with (1, 0), 2591 / 2559 / 2485 with
// (2, 2), 2260 / 2204 / 2116 with (1, 2), 2481 / 2434 / 2354 with (2, 4).
#ifndef QK_MINB_MMA_Q4K
#define QK_MINB_MMA_Q4K 1
#endif
#ifndef QK_PF_MMA_Q4K
#define QK_PF_MMA_Q4K 2
#endif
#ifndef QK_MINB_MMA_Q5K
#define QK_MINB_MMA_Q5K 2
#endif
#ifndef QK_PF_MMA_Q5K
#define QK_PF_MMA_Q5K 2
#endif
// q6_K and iq4_xs retuned on their tiled layout (H100, NT 8, benches/results/2026-12-05-session20
// run1 `sweep.md`, run3 `ntsweep.md`): q6_K 1343 with (2, 2), 1376 with (2, 0), 1546 with (1, 2),
// 1847 with (1, 0); iq4_xs 1488 with (2, 2), 1573 with (2, 0), 1543 with (1, 2), 1456 with (1, 0).
#ifndef QK_MINB_MMA_Q6K
#define QK_MINB_MMA_Q6K 1
#endif
#ifndef QK_PF_MMA_Q6K
#define QK_PF_MMA_Q6K 0
#endif
#ifndef QK_MINB_MMA_IQ
#define QK_MINB_MMA_IQ 2  // the IQ2/IQ3 formats (iq2_xxs NT 8: 829 GB/s against 706 with 1, run4)
#endif
#ifndef QK_PF_MMA_IQ
#define QK_PF_MMA_IQ 2
#endif
#ifndef QK_MINB_MMA_IQ4XS
#define QK_MINB_MMA_IQ4XS 2
#endif
#ifndef QK_PF_MMA_IQ4XS
#define QK_PF_MMA_IQ4XS 0
#endif
#ifndef QK_MINB_MMA_Q51
#define QK_MINB_MMA_Q51 2  // q5_1 (off by default, args::mma_default_mask): NT 8 786 GB/s; 720 with 1
#endif
#ifndef QK_PF_MMA_Q51
#define QK_PF_MMA_Q51 4  // 830 with 0 (session 10 run7)
#endif
#define MMA_KERNEL(fmt, fn, minb) QK_ENTRY_LB(qk_mma_##fmt, MmArgs, fn, minb)

// The IQ2/IQ3 formats' lane L on tensor cores: lane = sum over K of s_k * sg_k * v_k * y_k, with v
// the unsigned grid bytes, sg their signs (byte masks m, 0xff: negative) and s = 2 ls + 1 the
// sub-block scale. The scale's base-R digits d_i (v * (R - 1) <= 255) give u8 operands; the signs
// split each into a positive and a negative part: A_i+ = (v d_i) & ~m, A_i- = (v d_i) & m, and
// lane = sum_i R^i (A_i+ . B - A_i- . B), each sum chained through the C operands (times R
// between digits). `v`, `m`: the 4 A slots (row g | g + 8) x (K half 4q.. | 16+4q..); dg[i][slot]:
// digit i of the slot's scale; bv: B. Exact: |lane| < 2^31.
template <int R, int ND>
QK_DEV void iq_mma_lane(const u32* v, const u32* m, const u32 (*dg)[4], const u32* bv, i32* lane) {
    i32 p[4] = {0, 0, 0, 0}, n[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = ND - 1; i >= 0; --i) {
        u32 ap[4], an[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const u32 x = v[k] * dg[i][k];
            ap[k] = x & ~m[k];
            an[k] = x & m[k];
        }
        if (i < ND - 1)
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                p[x] = (i32)((u32)p[x] * (u32)R);
                n[x] = (i32)((u32)n[x] * (u32)R);
            }
        qk_mma_u8s8(ap, bv, p, p);
        qk_mma_u8s8(an, bv, n, n);
    }
#pragma unroll
    for (int x = 0; x < 4; ++x) lane[x] = (i32)((u32)p[x] - (u32)n[x]);
}

// The base-R digits of the 4 slots' scales s[k]: dg[i][k] = (s / R^i) % R.
template <int R, int ND>
QK_DEV void iq_digits(const u32* s, u32 (*dg)[4]) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        u32 v = s[k];
#pragma unroll
        for (int i = 0; i < ND; ++i) {
            dg[i][k] = v % (u32)R;
            v /= (u32)R;
        }
    }
}

// QK_IQ_HMMA (the define is near QK_SIGN_WORDS, on by default): the IQ2/IQ3 lane sums on fp16
// tensor cores (iq_hmma_lane): no scale digits, no sign split, no integer-to-float conversion.
// fp16 pairs used below: (-1024, -1024), (-1152, -1152), and the bytes 0x64 (the high byte of
// 1024 + b for a byte b: f16 has unit spacing in [1024, 2048)).
#define QK_H2_M1024 0xe400e400u
#define QK_H2_M1152 0xe480e480u
#define QK_B64 0x64646464u
// A sub-block scale s (1..31, exact in f16) as the pairs (s, s) and (-1152 s, -1152 s), exact
// too (1152 s = 9 s * 2^7, 9 s < 2^11).
QK_DEV void iq_hscale(u32 s, u32* s2, u32* c2) {
    *s2 = qk_hadd2(0x64006400u | s | (s << 16), QK_H2_M1024);
    *c2 = qk_hmul2(*s2, QK_H2_M1152);
}
// The IQ2/IQ3 formats' lane L on fp16 tensor cores: lane = sum over K of s_k * sg_k * v_k * y_k
// as two chained m16n8k16 products (sub-blocks 0-3, then 4-7) with exact f32 sums.
// K is laid out as mma_iq's int8 products lay it: thread q holds sub-block q (first product)
// and q + 4 (second), a sub-block's 4 lane-L bytes as K pair 2q, 2q + 1 (bytes 0, 1) and
// 2q + 8, 2q + 9 (bytes 2, 3), the same for A and B. A: byte x = 128 + sg v (v: the unsigned
// grid byte, 1..62; e: 0/1 bytes, 1 negative: 128 - v = ((v ^ 0x80) ^ 0xff) + 1, no carries),
// placed as the f16 1024 + x = 1152 + sg v by a byte permute, then fma(1152 + sg v, s, -1152 s)
// = sg v s exactly (|sg v s| <= 62 * 31 < 2^11: the fused result is representable, so it is the
// f16 result). B: the token's q8 bytes y the same way, (1152 + y) - 1152. Products |sg v s y| <=
// 1922 * 127 < 2^18; a lane's 32 of them sum below 2^23: every partial sum is an integer below
// 2^24, exact in f32 (any alignment that keeps 24 bits of the largest addend loses none). The
// lane's f32 is its integer sum, the value ggml converts with cvtepi32_ps.
// v, e: the 4 A slots (row g | g + 8) x (K half: sub-block q | q + 4) as iq_mma_lane's; s2, c2:
// the slots' iq_hscale pairs; bv: the token's lane-L words of sub-blocks q and q + 4.
// The biased bytes 128 + sg v of unsigned grid bytes v (1..62) with 0/1 sign bytes e.
QK_DEV u32 iq_hbias(u32 v, u32 e) { return ((v ^ 0x80808080u) ^ (e * 0xffu)) + e; }
// The same for the IQ2 grids from a selector word (Iq2Sel: codes 0-2 for 8, 25, 43, plus 4 where
// negative), as iq2_pair's signed bytes: one permute of the biased values.
#define QK_IQ2_POS_H 0x00ab9988u  // 128 + 8, 128 + 25, 128 + 43
#define QK_IQ2_NEG_H 0x00556778u  // 128 - 8, 128 - 25, 128 - 43
// A q8 word (4 signed bytes y) as the f16 pairs (y0, y1), (y2, y3): B's registers of one K half.
QK_DEV void iq_hconv_b(u32 w, u32* b) {
    const u32 y = w ^ 0x80808080u;
    b[0] = qk_hadd2(qk_prmt(y, QK_B64, 0x4140u), QK_H2_M1152);
    b[1] = qk_hadd2(qk_prmt(y, QK_B64, 0x4342u), QK_H2_M1152);
}
// x: the 4 A slots' biased bytes (iq_hbias); b: B's registers, [K half][2] (iq_hconv_b of the
// token's lane-L words of sub-blocks q, q + 4).
QK_DEV void iq_hmma_lane(const u32* x, const u32* s2, const u32* c2, const u32 (*b)[2], float* lane) {
    u32 a[2][4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int kh = k >> 1, h = k & 1;
        a[kh][h] = qk_hfma2(qk_prmt(x[k], QK_B64, 0x4140u), s2[k], c2[k]);
        a[kh][2 + h] = qk_hfma2(qk_prmt(x[k], QK_B64, 0x4342u), s2[k], c2[k]);
    }
    const float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    qk_mma_f16(a[0], b[0], z, lane);
    qk_mma_f16(a[1], b[1], lane, lane);
}
// The IQ2/IQ3 formats on tensor cores (iq_mma_lane). Thread q holds sub-blocks q (k = 4q..) and
// q + 4 (k = 16+4q..); `U::Sub` is one sub-block read from the body (`load`), giving lane l's 4
// grid bytes (`grid`: lanes 2e, 2e + 1 of the 8-byte IQ2 entries load one entry, which the
// unrolled loop shares), the sign-table index of its 4 sign bits (`sign_k`: the byte of lanes
// 2 (l >> 1), + 1; SignTab U::SIGNS) and the scale 2 ls + 1 of lanes 0-3 / 4-7
// (`scale(half)`: iq2_xs and iq2_s scale per 16 elements). U::R, U::ND: the scale digits (grid
// bytes <= 43: base 6, 2 digits; iq3_xxs's <= 62: base 5, 3; iq3_s's <= 15: base 16, 2); the
// result is U::SCALE * hsum_float_8 (0.125, 0.25 or 1).
// The shared words of mma_iq's grid and sign tables: U's grid and sign table, or (H: the fp16
// path of the IQ2 formats) their selector tables (Iq2Sel).
template <class U, bool H>
struct MmaIqTabs {
    enum : u32 { GRID = U::G::SHARED_WORDS, SIGN = SignTab<U::SIGNS, U::LOOKS>::G::SHARED_WORDS };  // (enums: no PTX globals)
};
template <class U>
struct MmaIqTabs<U, true> {
    enum : u32 { GRID = U::Sel::GS::SHARED_WORDS, SIGN = U::Sel::SS::SHARED_WORDS };
};
template <class U, int PF>
QK_DEV void mma_iq(const MmArgs& A) {
    constexpr bool HSEL = QK_IQ_HMMA != 0 && U::SEL;  // selectors: the IQ2 grids on fp16 tensor cores
    using SG = SignTab<U::SIGNS, U::LOOKS>;
    QK_SHARED16 u32 grid_sh[MmaIqTabs<U, HSEL>::GRID];
    QK_SHARED16 u32 sign_sh[MmaIqTabs<U, HSEL>::SIGN];
    TabRef sgt, grid;
    if constexpr (HSEL) {
        mm_load_iq2_sel<typename U::P>(A, grid_sh, sign_sh, &grid, &sgt);
    } else {
        sgt = mm_fill_signs<SG>(sign_sh);
        grid = mm_load_grid<typename U::G>(grid_sh, A, U::TAB);
    }
    const MmaCtx c = mma_ctx(A);
    const MmJob& J = A.jobs[c.job];
    const u32 nb = A.nb, q = c.q, capw = J.capw;
    // Block b of row half h: body at w[h] + b * ws, d at wd[h][b * ds] (as mm_iq_l4; the warp's 16
    // rows are one tile, so the two halves share the step).
    const u64 k0[2] = {qk_iq_row0(nb, c.row[0]), qk_iq_row0(nb, c.row[1])};
    const u32 ds = qk_iq_step(J.rows, c.row[0]), ws = ds * U::BODY;
    const u8* w[2] = {(const u8*)J.w + k0[0] * U::BODY, (const u8*)J.w + k0[1] * U::BODY};
    const u16* wd[2] = {(const u16*)J.wd + k0[0], (const u16*)J.wd + k0[1]};
    const u32* aq = (const u32*)J.a_qs + Q8K_TS * c.acol;  // token column g of B
    float acc[4][8];
    mma_zero(acc);
#if QK_IQ_HMMA
    u32 selw[4];  // HSEL: the slots' selector words of lane pair l >> 1
#endif
QK_UNROLL(1)
    for (u32 b = 0; b < nb; ++b) {
        typename U::Sub sub[4];  // slot k = 2 * (K half) + row half: sub-block q + 4 (k >> 1)
        u32 sc[2][4];            // [half][slot]
        float xd[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u8* body = w[h] + ws * b;
            mm_pf<PF, true>(body + ws * PF, b, nb, U::BODY, q);
            xd[h] = qk_h2f(qk_ld(wd[h] + ds * b));
#pragma unroll
            for (int kh = 0; kh < 2; ++kh) {
                const int k = 2 * kh + h;
                sub[k].load(body, q + 4u * (u32)kh);
                sc[0][k] = sub[k].scale(0);
                sc[1][k] = sub[k].scale(1);
            }
        }
#if QK_IQ_HMMA
        u32 s2[2][4], c2[2][4];  // [half][slot]
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
#pragma unroll
            for (int k = 0; k < 4; ++k) iq_hscale(sc[hf][k], &s2[hf][k], &c2[hf][k]);
#else
        u32 dg[2][U::ND][4];
        iq_digits<U::R, U::ND>(sc[0], dg[0]);
        iq_digits<U::R, U::ND>(sc[1], dg[1]);
#endif
        float d[4];
        mma_cell_d(c, (const float*)J.a_d, capw, b, xd, d);
#pragma unroll
        for (int l = 0; l < 8; ++l) {
            const u32 qd = 16u * b + 2u * q + (u32)(l >> 2), wl = (u32)(l & 3);
            const u32 bv[2] = {qk_ld(q8k_at(aq, qd, wl, capw)),
                               qk_ld(q8k_at(aq, qd + 8u, wl, capw))};
#if QK_IQ_HMMA
            u32 bh[2][2];
            iq_hconv_b(bv[0], bh[0]);
            iq_hconv_b(bv[1], bh[1]);
            u32 xb[4];  // the slots' biased bytes
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                if constexpr (HSEL) {
                    if ((l & 1) == 0) selw[k] = sub[k].hsel(grid, sgt, l);
                    xb[k] = qk_prmt(QK_IQ2_POS_H, QK_IQ2_NEG_H, selw[k] >> (16 * (l & 1)));  // nibbles <= 6
                } else {
                    const uint2 e = sign_e<SG>(sgt, sub[k].sign_k(l));  // lanes 2 (l >> 1), +1
                    xb[k] = iq_hbias(sub[k].grid(grid, l), (l & 1) ? e.y : e.x);
                }
            }
            float lane[4];
            iq_hmma_lane(xb, s2[l >> 2], c2[l >> 2], bh, lane);
#pragma unroll
            for (int x = 0; x < 4; ++x) acc[x][l] = qk_fma(d[x], lane[x], acc[x][l]);
#else
            u32 v[4], m[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                v[k] = sub[k].grid(grid, l);
                const uint2 e = sign_e<SG>(sgt, sub[k].sign_k(l));  // lanes 2 (l >> 1), +1
                m[k] = ((l & 1) ? e.y : e.x) * 0xffu;
            }
            i32 lane[4];
            iq_mma_lane<U::R, U::ND>(v, m, dg[l >> 2], bv, lane);
#pragma unroll
            for (int x = 0; x < 4; ++x) acc[x][l] = qk_fma(d[x], qk_i2f(lane[x]), acc[x][l]);
#endif
        }
    }
    mma_finish<U::SCALE != 1.0f>(A, c, acc, U::SCALE);
}

// iq2_xs and iq2_s: sub-blocks of 4 grid entries of 8 bytes (lanes 2e, 2e + 1) with 8 signs each;
// `U::parse` gives the 4 grid indices, 4 sign-table indices (P::SIGNS: ksigns indices or sign
// bytes) and the scale byte (low nibble: lanes 0-3).
template <class P_>
struct MmaIq2Pairs {
    using P = P_;
    static constexpr u32 BODY = P::BODY, TAB = P::TAB, SIGNS = P::SIGNS;
    static constexpr bool LOOKS = P::LOOKS;
    enum { SEL = 1 };  // QK_IQ_HMMA: the grid and signs as selectors (Iq2Sel)
    using Sel = Iq2Sel<P>;
    using G = typename P::G;
    static constexpr int R = 6, ND = 2;
    static constexpr float SCALE = 0.125f;
    struct Sub {
        u32 gi[4], sg[4], scb;
        QK_MEMBER void load(const u8* body, u32 ib) { P::parse(body, ib, gi, sg, &scb); }
        QK_MEMBER u32 scale(int half) const { return 2u * ((scb >> (4 * half)) & 0xfu) + 1u; }
        QK_MEMBER u32 grid(const TabRef& g, int l) const {
            const uint2 e = grid_e8<G, true>(g, gi[l >> 1]);
            return (l & 1) ? e.y : e.x;
        }
        QK_MEMBER u32 sign_k(int l) const { return sg[l >> 1]; }
        // Lane pair l >> 1's selector word: its grid entry's codes | its signs (Iq2Sel).
        QK_MEMBER u32 hsel(const TabRef& gs, const TabRef& ss, int l) const {
            return grid_e4<typename Sel::GS, true>(gs, gi[l >> 1]) | grid_e4<typename Sel::SS, true>(ss, sg[l >> 1]);
        }
    };
};
