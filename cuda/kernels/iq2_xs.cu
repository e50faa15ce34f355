// iq2_xs weights x q8_K activations (qkern_formats::reference::iq2_xs).
// - dequantize: ggml-quants.c `dequantize_row_iq2_xs`: db = (d*(0.5+s))*0.25 per 16,
//   y = +-(db * iq2xs_grid[q & 511] byte), signs ksigns_iq2xs[q >> 9]
// - dot: `ggml_vec_dot_iq2_xs_q8_K` (AVX2): lanes 0-3 of sub-block ib take 2*(scales[ib]&15)+1,
//   lanes 4-7 2*(scales[ib]>>4)+1; acc = fma(xd*yd, lane, acc); 0.125 * hsum_float_8(acc).
// Device layout: split (72-byte bodies qs[64] scales[8], then the fp16 d array), row-major or tiled
// (QK_IQ_TILE, common.cuh qk_iq_row0). Thread mapping MM_KERNELS_L4 (mm_common.cuh): thread (h, s)
// owns lanes 4h..4h+3 of the sub-blocks ib = s, s + S, ...: the two grid indices of qs word 2ib +
// h, one 8-byte grid entry each.

#include "mm_common.cuh"

struct LaneIq2Xs : LaneIqBase {
    static constexpr u32 BODY = 72u, TAB = TAB_IQ2XS, GRID_WORDS = 1024u;
    using G = GridRep<GRID_WORDS, 2>;
    static constexpr bool IQ2 = true;
    static constexpr u32 TAB_SEL = TAB_IQ2XS_SEL;  // the grid as selectors (Iq2Sel)
    static constexpr u32 SIGNS = 128;  // sign table entries (SignTab)
    static constexpr int AL = 8;
    static constexpr bool SCALED = true;
    static constexpr float SCALE = 0.125f;
    template <bool WHOLE, class L, class Wf>
    static QK_MEMBER void sub(const Wf& W, const u8* body, const Blk&, u32 ib, u32 h, const TabRef& grid, const TabRef& sgt,
                              i32* ls, i32* sg) {
        const u32 qsw = WHOLE ? sel2(W(2u * ib), W(2u * ib + 1u), h) : ld32(body + 8u * ib + 4u * h);
        const u32 scb = wbyte(W(16u + ib / 4u), ib % 4u);
        *ls = (i32)(2u * (h ? (scb >> 4) : (scb & 0xfu)) + 1u);
#pragma unroll
        for (int i2 = 0; i2 < 2; ++i2) {
            const u32 q = (qsw >> (16 * i2)) & 0xffffu;
            iq2_pair<G, L>(grid, sgt, q & 511u, q >> 9, sg + 2 * i2);
        }
    }
};
template <int NTM, int S>
QK_DEV void mm_iq2_xs(const MmArgs& A, const MmCtxW& c) { mm_iq_l4<LaneIq2Xs, NTM, S>(A, c); }
MM_KERNELS_L4(iq2_xs, mm_iq2_xs, 1)
MM_KERNELS_L4(iq2_xs, mm_iq2_xs, 4)

// On tensor cores (mm_common.cuh mma_iq, MmaIq2Pairs): entry e of sub-block ib is qs[4 ib + e], a 9-bit
// grid index and ksigns of its 7 sign bits; the scale byte is scales[ib].
struct MmaIq2Xs {
    static constexpr bool LOOKS = true;  // grid copies, sign tables (mm_common.cuh QK_IQ_S_LOOKS)
    static constexpr u32 BODY = 72u, TAB = TAB_IQ2XS, GRID_WORDS = 1024u, SIGNS = 128u;
    using G = GridRep<GRID_WORDS, 2>;
    enum : u32 { TAB_SEL = TAB_IQ2XS_SEL };  // the grid as selectors (Iq2Sel: QK_IQ_HMMA; an enum: no PTX global)
    static QK_MEMBER void parse(const u8* body, u32 ib, u32* gi, u32* sg, u32* scb) {
        const uint2 qv = ld64(body + 8u * ib);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const u32 u = ((e < 2 ? qv.x : qv.y) >> (16 * (e & 1))) & 0xffffu;
            gi[e] = u & 511u;
            sg[e] = u >> 9;  // a ksigns index
        }
        *scb = ld8(body + 64u + ib);
    }
};
QK_DEV void mma_iq2_xs(const MmArgs& A) { mma_iq<MmaIq2Pairs<MmaIq2Xs>, QK_PF_MMA_IQ>(A); }
MMA_KERNEL(iq2_xs, mma_iq2_xs, QK_MINB_MMA_IQ)

QK_DEV float deq_iq2_xs(const u8* body, u32 d16, u32 e, const u32* tab) {
    const u32 ib = e / 32, l = (e % 32) / 8, j = e % 8;
    const u32 sc = body[64 + ib];
    const u32 s = l < 2 ? (sc & 0xfu) : (sc >> 4);
    const float db = qk_mul(qk_mul(qk_h2f(d16), qk_add(0.5f, (float)s)), 0.25f);
    const u32 q = ld16(body + 2 * (4 * ib + l));
    const u32 g = tab_byte(tab + TAB_IQ2XS, 8u * (q & 511u) + j);
    const float v = qk_mul(db, (float)g);
    return (ksigns(q >> 9) >> j) & 1u ? -v : v;
}
DEQ_KERNEL_T(iq2_xs, deq_iq2_xs, 256, 72, 1, QK_IQ_TILE)
