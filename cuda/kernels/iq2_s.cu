// iq2_s weights x q8_K activations (qkern_formats::reference::iq2_s).
// - dequantize: ggml-quants.c `dequantize_row_iq2_s`: db = (d*(0.5+s))*0.25 per 16,
//   y = +-(db * iq2s_grid[qs | qh bits << 8] byte), signs in qs[32..64]
// - dot: `ggml_vec_dot_iq2_s_q8_K` (AVX2): signs applied as (s ^ q8) - s (a negation),
//   lanes 0-3 of sub-block ib scale 2*(scales[ib]&15)+1, lanes 4-7 2*(scales[ib]>>4)+1;
//   acc = fma(xd*yd, lane, acc); 0.125 * hsum_float_8(acc).
// Device layout: split (80-byte bodies qs[64] qh[8] scales[8], then the fp16 d array), row-major or
// tiled (QK_IQ_TILE, common.cuh qk_iq_row0). Thread mapping MM_KERNELS_L4 (mm_common.cuh): thread
// (h, s) owns lanes 4h..4h+3 of the sub-blocks ib = s, s + S, ...: grid entries 2h, 2h + 1 of the
// sub-block (8 bytes each: two lanes).

#include "mm_common.cuh"

struct LaneIq2S : LaneIqBase {
    static constexpr u32 BODY = 80u, TAB = TAB_IQ2S, GRID_WORDS = 2048u;
    static constexpr bool LOOKS = QK_IQ_S_LOOKS != 0;
    using G = GridRep<GRID_WORDS, 2, QK_GRID_WORDS, LOOKS>;
    static constexpr bool IQ2 = true;
    static constexpr u32 TAB_SEL = TAB_IQ2S_SEL;  // the grid as selectors (Iq2Sel)
    static constexpr u32 SIGNS = 256;  // sign table entries (SignTab)
    static constexpr int AL = 16;
    static constexpr bool SCALED = true;
    static constexpr float SCALE = 0.125f;
    template <bool WHOLE, class L, class Wf>
    static QK_MEMBER void sub(const Wf& W, const u8*, const Blk&, u32 ib, u32 h, const TabRef& grid, const TabRef& sgt, i32* ls,
                              i32* sg) {
        const u32 qsw = W(ib), sgw = W(8u + ib);
        const u32 qhb = wbyte(W(16u + ib / 4u), ib % 4u);
        const u32 scb = wbyte(W(18u + ib / 4u), ib % 4u);
        *ls = (i32)(2u * (h ? (scb >> 4) : (scb & 0xfu)) + 1u);
#pragma unroll
        for (int i2 = 0; i2 < 2; ++i2) {
            const u32 lp = 2u * h + (u32)i2;
            const u32 idx = wbyte(qsw, lp) | ((qhb << (8u - 2u * lp)) & 0x300u);
            iq2_pair<G, L>(grid, sgt, idx, wbyte(sgw, lp), sg + 2 * i2);
        }
    }
};
template <int NTM, int S>
QK_DEV void mm_iq2_s(const MmArgs& A, const MmCtxW& c) { mm_iq_l4<LaneIq2S, NTM, S>(A, c); }
MM_KERNELS_L4(iq2_s, mm_iq2_s, 1)
MM_KERNELS_L4(iq2_s, mm_iq2_s, 4)

// On tensor cores (mm_common.cuh mma_iq, MmaIq2Pairs): entry e of sub-block ib is grid index
// qs[4 ib + e] | ((qh[ib] >> 2e) & 3) << 8 with sign byte qs[32 + 4 ib + e]; the scale byte is
// scales[ib].
struct MmaIq2S {
    static constexpr u32 BODY = 80u, TAB = TAB_IQ2S, GRID_WORDS = 2048u, SIGNS = 256u;
    static constexpr bool LOOKS = QK_IQ_S_LOOKS != 0;
    using G = GridRep<GRID_WORDS, 2, QK_GRID_WORDS, LOOKS>;
    enum : u32 { TAB_SEL = TAB_IQ2S_SEL };  // the grid as selectors (Iq2Sel: QK_IQ_HMMA; an enum: no PTX global)
    static QK_MEMBER void parse(const u8* body, u32 ib, u32* gi, u32* sg, u32* scb) {
        const u32 qsw = ld32(body + 4u * ib), sgw = ld32(body + 32u + 4u * ib), qhb = ld8(body + 64u + ib);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            gi[e] = wbyte(qsw, (u32)e) | ((qhb << (8 - 2 * e)) & 0x300u);
            sg[e] = wbyte(sgw, (u32)e);
        }
        *scb = ld8(body + 72u + ib);
    }
};
QK_DEV void mma_iq2_s(const MmArgs& A) { mma_iq<MmaIq2Pairs<MmaIq2S>, QK_PF_MMA_IQ>(A); }
MMA_KERNEL(iq2_s, mma_iq2_s, QK_MINB_MMA_IQ)

QK_DEV float deq_iq2_s(const u8* body, u32 d16, u32 e, const u32* tab) {
    const u32 ib = e / 32, l = (e % 32) / 8, j = e % 8;
    const u32 sc = body[72 + ib];
    const u32 s = l < 2 ? (sc & 0xfu) : (sc >> 4);
    const float db = qk_mul(qk_mul(qk_h2f(d16), qk_add(0.5f, (float)s)), 0.25f);
    const u32 idx = (u32)body[4 * ib + l] | (((u32)body[64 + ib] << (8 - 2 * l)) & 0x300u);
    const u32 g = tab_byte(tab + TAB_IQ2S, 8u * idx + j);
    const float v = qk_mul(db, (float)g);
    return ((u32)body[32 + 4 * ib + l] >> j) & 1u ? -v : v;
}
DEQ_KERNEL_T(iq2_s, deq_iq2_s, 256, 80, 1, QK_IQ_TILE)
