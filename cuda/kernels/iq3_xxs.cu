// iq3_xxs weights x q8_K activations (qkern_formats::reference::iq3_xxs).
// - dequantize: ggml-quants.c `dequantize_row_iq3_xxs`: db = (d*(0.5+ls))*0.5,
//   y = (db * grid byte) * (+-1)
// - dot: `ggml_vec_dot_iq3_xxs_q8_K` (AVX2): lane L of sub-block ib is grid entry
//   qs[8ib+L] (4 bytes), signed by keven_signs[(aux >> 7(L>>1)) & 127], scaled 2*ls+1;
//   acc = fma(xd*yd, lane, acc); 0.25 * hsum_float_8(acc).
// Device layout: split (96-byte bodies qs[64] aux[32], then the fp16 d array), row-major or tiled
// (QK_IQ_TILE, common.cuh qk_iq_row0). Thread mapping MM_KERNELS_L4 (mm_common.cuh): thread (h, s)
// owns lanes 4h..4h+3 of the sub-blocks ib = s, s + S, ...: the grid bytes of qs word 2ib + h.

#include "mm_common.cuh"

struct LaneIq3Xxs : LaneIqBase {
    static constexpr u32 BODY = 96u, TAB = TAB_IQ3XXS, GRID_WORDS = 256u;
    using G = GridRep<GRID_WORDS, 1>;
    static constexpr u32 SIGNS = 128;  // sign table entries (SignTab)
    static constexpr int AL = 16;
    static constexpr bool SCALED = true;
    static constexpr float SCALE = 0.25f;
    template <bool WHOLE, class L, class Wf>
    static QK_MEMBER void sub(const Wf& W, const u8* body, const Blk&, u32 ib, u32 h, const TabRef& grid, const TabRef& sgt,
                              i32* ls, i32* sg) {
        const u32 qsw = WHOLE ? sel2(W(2u * ib), W(2u * ib + 1u), h) : ld32(body + 8u * ib + 4u * h);
        const u32 aux = W(16u + ib);
        *ls = (i32)(2u * (aux >> 28) + 1u);
#pragma unroll
        for (int p = 0; p < 2; ++p) {
            // lanes 2p, 2p + 1: the two nibbles of one ksigns byte
            const uint2 e = sign_e<typename L::Sg>(sgt, (aux >> (7u * (2u * h + (u32)p))) & 127u);
            sg[2 * p] = (i32)qk_sign_bytes(grid_e4<G, L::SA>(grid, wbyte(qsw, 2u * p)), e.x);
            sg[2 * p + 1] = (i32)qk_sign_bytes(grid_e4<G, L::SA>(grid, wbyte(qsw, 2u * p + 1u)), e.y);
        }
    }
};
template <int NTM, int S>
QK_DEV void mm_iq3_xxs(const MmArgs& A, const MmCtxW& c) { mm_iq_l4<LaneIq3Xxs, NTM, S>(A, c); }
MM_KERNELS_L4(iq3_xxs, mm_iq3_xxs, 1)
MM_KERNELS_L4(iq3_xxs, mm_iq3_xxs, 4)

// On tensor cores (mm_common.cuh mma_iq): lane l of sub-block ib is grid entry qs[8 ib + l], signed
// by bits 4 (l & 1).. of ksigns of sign group l >> 1 of aux[ib]; grid bytes <= 62: base-5 digits.
struct MmaIq3Xxs {
    static constexpr bool LOOKS = true;  // grid copies, sign tables (mm_common.cuh QK_IQ_S_LOOKS)
    static constexpr u32 BODY = 96u, TAB = TAB_IQ3XXS, GRID_WORDS = 256u, SIGNS = 128u;
    using G = GridRep<GRID_WORDS, 1>;
    static constexpr int R = 5, ND = 3;
    static constexpr float SCALE = 0.25f;
    enum { SEL = 0 };  // no selector grid (mm_common.cuh mma_iq)
    struct Sub {
        u32 qs[2], aux;
        QK_MEMBER void load(const u8* body, u32 ib) {
            const uint2 e = ld64(body + 8u * ib);
            qs[0] = e.x;
            qs[1] = e.y;
            aux = ld32(body + 64u + 4u * ib);
        }
        QK_MEMBER u32 scale(int) const { return 2u * (aux >> 28) + 1u; }
        QK_MEMBER u32 grid(const TabRef& g, int l) const { return grid_e4<G, true>(g, wbyte(qs[l >> 2], (u32)(l & 3))); }
        QK_MEMBER u32 sign_k(int l) const { return (aux >> (7 * (l >> 1))) & 127u; }
    };
};
QK_DEV void mma_iq3_xxs(const MmArgs& A) { mma_iq<MmaIq3Xxs, QK_PF_MMA_IQ>(A); }
MMA_KERNEL(iq3_xxs, mma_iq3_xxs, QK_MINB_MMA_IQ)

QK_DEV float deq_iq3_xxs(const u8* body, u32 d16, u32 e, const u32* tab) {
    const u32 ib = e / 32, l = (e % 32) / 8, j = e % 8;
    const u32 aux = ld32(body + 64 + 4 * ib);
    const float db = qk_mul(qk_mul(qk_h2f(d16), qk_add(0.5f, (float)(aux >> 28))), 0.5f);
    const u32 gi = body[8 * ib + 2 * l + (j < 4 ? 0 : 1)];
    const u32 g = tab_byte(tab + TAB_IQ3XXS, 4u * gi + (j & 3u));
    const float v = qk_mul(db, (float)g);
    return (ksigns((aux >> (7 * l)) & 127u) >> j) & 1u ? -v : v;
}
DEQ_KERNEL_T(iq3_xxs, deq_iq3_xxs, 256, 96, 1, QK_IQ_TILE)
