// iq3_s weights x q8_K activations (qkern_formats::reference::iq3_s).
// - dequantize: ggml-quants.c `dequantize_row_iq3_s`: db = d * (1 + 2ls),
//   y = (db * grid byte) * (+-1)
// - dot: `ggml_vec_dot_iq3_s_q8_K` (AVX2): lane L of sub-block ib is grid entry
//   qs[8ib+L] | ((qh[ib] << (8-L)) & 256), signed by bits 4(L&1).. of signs[4ib + L/2]
//   ((s ^ q8) - s, a negation), scaled 2*ls+1; acc = fma(xd*yd, lane, acc); hsum unscaled.
// Device layout: split (108-byte bodies qs[64] qh[8] signs[32] scales[4], then the d array),
// row-major or tiled (QK_IQ_TILE, common.cuh qk_iq_row0). Thread mapping MM_KERNELS_L4
// (mm_common.cuh): thread (h, s) owns lanes 4h..4h+3 of the sub-blocks ib = s, s + S, ...: the qs
// word 2ib + h, signs half h of word ib.

#include "mm_common.cuh"

// The 108-byte bodies are only 4-byte aligned: a thread loads the 19 words it uses (its qs word
// and signs word of each sub-block, qh, scales) where it uses them, not all 27 up front (H200
// session 7 run7: NT 1 1243 against 1055 GB/s, NT 4 786 against 709), except at NTM >=
// QK_IQ3S_BODY_NTM (NT 8: 490 against 469, with fewer spills).
struct LaneIq3S : LaneIqBase {
    static constexpr u32 BODY = 108u, TAB = TAB_IQ3S, GRID_WORDS = 512u;
    static constexpr bool LOOKS = QK_IQ_S_LOOKS != 0;
    using G = GridRep<GRID_WORDS, 1, QK_GRID_WORDS, LOOKS>;
    static constexpr u32 SIGNS = 256;  // sign table entries (SignTab)
    static constexpr int AL = 4;
    static constexpr bool SCALED = false;
    static constexpr float SCALE = 1.0f;
    template <int NTM, int S>
    static constexpr bool WHOLE = S == 1 && NTM >= QK_IQ3S_BODY_NTM;
    template <int NTM>
    static QK_MEMBER void prefetch(const u8* body, u32 ws, u32 b, u32 nb, const MmCtxW& c) {
        // (NT 1: mm_iq_l4's QK_PF1_IQ; ws: bytes from one of the row's blocks to the next)
        constexpr int PF = NTM >= 2 ? QK_PF_IQ3S : 0;
        mm_pf<PF, true>(body + ws * PF, b, nb, 108u, 2u * c.s + c.h);
    }
    // The scales and the qh bytes of the block.
    struct Blk {
        u32 sc, qh0, qh1;
        template <class Wf>
        QK_MEMBER explicit Blk(const Wf& W) : sc(W(26)), qh0(W(16)), qh1(W(17)) {}
    };
    template <bool WHOLE, class L, class Wf>
    static QK_MEMBER void sub(const Wf& W, const u8* body, const Blk& k, u32 ib, u32 h, const TabRef& grid, const TabRef& sgt,
                              i32* ls, i32* sg) {
        const u32 qsw = WHOLE ? sel2(W(2u * ib), W(2u * ib + 1u), h) : ld32(body + 8u * ib + 4u * h);
        const u32 qh = wbyte(ib < 4u ? k.qh0 : k.qh1, ib % 4u);
        const u32 sg16 = W(18u + ib) >> (16u * h);
        const u32 scb = wbyte(k.sc, ib / 2u);
        *ls = (i32)(2u * ((ib & 1u) ? (scb >> 4) : (scb & 0xfu)) + 1u);
#pragma unroll
        for (int p = 0; p < 2; ++p) {
            // lanes 2p, 2p + 1: the two nibbles of sign byte p of the half
            const uint2 e = sign_e<typename L::Sg>(sgt, (sg16 >> (8u * (u32)p)) & 0xffu);
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const u32 i = 2u * (u32)p + (u32)j, lane = 4u * h + i;
                const u32 g = grid_e4<G, L::SA>(grid, ((qh << (8u - lane)) & 256u) | wbyte(qsw, i));
                sg[i] = (i32)qk_sign_bytes(g, j ? e.y : e.x);
            }
        }
    }
};
template <int NTM, int S>
QK_DEV void mm_iq3_s(const MmArgs& A, const MmCtxW& c) { mm_iq_l4<LaneIq3S, NTM, S>(A, c); }
MM_KERNELS_L4(iq3_s, mm_iq3_s, 1)
MM_KERNELS_L4(iq3_s, mm_iq3_s, 4)

// On tensor cores (mm_common.cuh mma_iq): lane l of sub-block ib is grid entry qs[8 ib + l] | qh bit l
// << 8, signed by bits 4l.. of the sub-block's sign word; grid bytes <= 15: base-16 digits.
struct MmaIq3S {
    static constexpr u32 BODY = 108u, TAB = TAB_IQ3S, GRID_WORDS = 512u, SIGNS = 256u;
    static constexpr bool LOOKS = QK_IQ_S_LOOKS != 0;
    using G = GridRep<GRID_WORDS, 1, QK_GRID_WORDS, LOOKS>;
    static constexpr int R = 16, ND = 2;
    static constexpr float SCALE = 1.0f;
    enum { SEL = 0 };  // no selector grid (mm_common.cuh mma_iq)
    struct Sub {
        u32 qs[2], qh, sgw, sc;
        // (108-byte bodies: only 4-byte aligned)
        QK_MEMBER void load(const u8* body, u32 ib) {
            qs[0] = ld32(body + 8u * ib);
            qs[1] = ld32(body + 8u * ib + 4u);
            qh = ld8(body + 64u + ib);
            sgw = ld32(body + 72u + 4u * ib);
            const u32 scb = ld8(body + 104u + ib / 2u);
            sc = 2u * ((ib & 1u) ? (scb >> 4) : (scb & 0xfu)) + 1u;
        }
        QK_MEMBER u32 scale(int) const { return sc; }
        QK_MEMBER u32 grid(const TabRef& g, int l) const { return grid_e4<G, true>(g, ((qh << (8 - l)) & 256u) | wbyte(qs[l >> 2], (u32)(l & 3))); }
        QK_MEMBER u32 sign_k(int l) const { return wbyte(sgw, (u32)(l >> 1)); }
    };
};
QK_DEV void mma_iq3_s(const MmArgs& A) { mma_iq<MmaIq3S, QK_PF_MMA_IQ>(A); }
MMA_KERNEL(iq3_s, mma_iq3_s, QK_MINB_MMA_IQ)

QK_DEV float deq_iq3_s(const u8* body, u32 d16, u32 e, const u32* tab) {
    const u32 ib = e / 32, l = (e % 32) / 8, j = e % 8;
    const u32 sc = body[104 + ib / 2];
    const u32 ls = (ib & 1u) ? (sc >> 4) : (sc & 0xfu);
    const float db = qk_mul(qk_h2f(d16), (float)(1 + 2 * (i32)ls));
    const u32 qh = body[64 + ib];
    const u32 k = 2 * l + (j < 4 ? 0 : 1);
    const u32 idx = (u32)body[8 * ib + k] | ((qh << (8 - k)) & 256u);
    const u32 g = tab_byte(tab + TAB_IQ3S, 4u * idx + (j & 3u));
    const float v = qk_mul(db, (float)g);
    return ((u32)body[72 + 4 * ib + l] >> j) & 1u ? -v : v;
}
DEQ_KERNEL_T(iq3_s, deq_iq3_s, 256, 108, 1, QK_IQ_TILE)
