// Shared structure of the matmul and dequantize kernels.
//
// Matmul thread mapping: a row is handled by a group of 8*S consecutive threads; thread
// (lane l = 0..8, split s = 0..S) owns ggml's AVX2 lane l of that row for every token.
// Integer lane sums are exact, so the S threads of a lane split a block's sub-blocks and add
// their partial sums with shuffles (any order); then every thread of the lane runs the same
// float chain `acc[t] = fma(d_b, (float)lane_b, acc[t])` over the blocks b in order, which
// is the AVX2 kernel's per-lane sequence. The weights are read once for all NT tokens. At the
// end the 8 lanes' accumulators are summed with shuffles in `hsum_float_8` order, and lane l
// writes token l (lane l also owns the per-token extra chains of q5_1, q4_K and q5_K).
//
// Jobs: one launch runs up to QK_MAX_JOBS (weights, activations, out) triples of one format
// and width (a layer's experts, or token chunks); CTAs [cta0, next cta0) belong to a job.
// No thread returns early (rows past the end compute a clamped row and skip the store), so
// every shuffle and barrier is reached uniformly.

#pragma once
#include "common.cuh"

struct MmCtx {
    u32 job;
    u32 row;
    u32 l;
    u32 s;
    u32 nt;
    bool valid;
};

template <int S>
QK_DEV MmCtx mm_ctx(const MmArgs& A) {
    MmCtx c;
    const u32 bid = qk_bid();
    u32 j = 0;
    for (u32 k = 1; k < A.njobs; ++k)
        if (bid >= A.jobs[k].cta0) j = k;
    c.job = j;
    const u32 tid = qk_tid();
    c.l = tid & 7u;
    c.s = (tid >> 3) % (u32)S;
    const u32 rpc = qk_bdim() / (8u * S);
    const u32 rows = A.jobs[j].rows;
    u32 row = (bid - A.jobs[j].cta0) * rpc + tid / (8u * S);
    c.valid = row < rows;
    c.row = c.valid ? row : rows - 1u;
    c.nt = A.jobs[j].nt;
    return c;
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

template <int NTM>
QK_DEV float mm_hsum_pick(const float* acc, u32 l) {
    float h[NTM];
#pragma unroll
    for (int t = 0; t < NTM; ++t) h[t] = qk_hsum8(acc[t]);
    return mm_pick<NTM>(h, l);
}

template <int NTM>
QK_DEV i32 mm_pick_i(const i32* h, u32 l) {
    i32 r = 0;
#pragma unroll
    for (int t = 0; t < NTM; ++t)
        if ((u32)t == l) r = h[t];
    return r;
}

// Sum of the S partial integer lane sums of a lane (threads l + 8k).
template <int S>
QK_DEV i32 mm_reduce(i32 v) {
    if (S >= 2) v = (i32)((u32)v + (u32)qk_shfl_xor_i(v, 8));
    if (S >= 4) v = (i32)((u32)v + (u32)qk_shfl_xor_i(v, 16));
    return v;
}

QK_DEV void mm_store(const MmArgs& A, const MmCtx& c, float v) {
    if (c.valid && c.s == 0 && c.l < c.nt)
        ((float*)A.jobs[c.job].out)[(u64)c.l * A.jobs[c.job].rows + c.row] = v;
}

// Copy `n` table words to shared memory (all threads, then a barrier).
QK_DEV void mm_load_table(u32* dst, const MmArgs& A, u32 off, u32 n) {
    const u32* src = (const u32*)A.tab + off;
    for (u32 i = qk_tid(); i < n; i += qk_bdim()) dst[i] = qk_ld(src + i);
    qk_sync();
}

// Matmul entry points: NTM (max tokens per job) in {1, 2, 4, 8}, and S lane splits.
#define MM_KERNEL_1(fmt, fn, NTM, S)                                                   \
    QK_DEV void fn##_n##NTM##_s##S(const MmArgs& A) {                                   \
        const MmCtx c = mm_ctx<S>(A);                                                   \
        mm_store(A, c, fn<NTM, S>(A, c));                                               \
    }                                                                                   \
    QK_ENTRY(qk_mm_##fmt##_n##NTM##_s##S, MmArgs, fn##_n##NTM##_s##S)

#define MM_KERNELS_S(fmt, fn, S)      \
    MM_KERNEL_1(fmt, fn, 1, S)        \
    MM_KERNEL_1(fmt, fn, 2, S)        \
    MM_KERNEL_1(fmt, fn, 4, S)        \
    MM_KERNEL_1(fmt, fn, 8, S)

// Dequantize: one thread per element (grid-stride), `deq(body, d16, e, tab)` gives element
// e of a block; formats stored split read their fp16 `d` from the separate array.
#define DEQ_KERNEL(fmt, deq, BE, BODY, SPLIT)                                          \
    QK_DEV void deq_##fmt##_body(const DeqArgs& A) {                                    \
        const u64 total = (u64)A.rows * A.cols;                                         \
        const u32 nb = A.cols / (BE);                                                   \
        for (u64 i = (u64)qk_bid() * qk_bdim() + qk_tid(); i < total;                   \
             i += (u64)qk_bdim() * qk_gdim()) {                                         \
            const u64 r = i / A.cols;                                                   \
            const u32 c = (u32)(i % A.cols);                                            \
            const u64 blk = r * nb + c / (BE);                                          \
            const u8* body = (const u8*)A.w + blk * (BODY);                             \
            const u16 d16 = (SPLIT) ? qk_ld((const u16*)A.wd + blk) : (u16)0;           \
            const float v = deq(body, d16, c % (BE), (const u32*)A.tab);                \
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
