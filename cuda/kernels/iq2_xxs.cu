// iq2_xxs weights x q8_K activations (qkern_formats::reference::iq2_xxs).
// - dequantize: ggml-quants.c `dequantize_row_iq2_xxs`: db = (d*(0.5+ls))*0.25,
//   y = +-(db * grid byte)
// - dot: `ggml_vec_dot_iq2_xxs_q8_K` (AVX2): lane L of sub-block ib covers bytes 4(L&1)..+4
//   of grid entry L>>1, signed by keven_signs (ksigns with parity) and scaled by 2*ls+1;
//   acc = fma(xd*yd, lane, acc); result 0.125 * hsum_float_8(acc). The signs are applied to
//   the grid bytes instead of the q8 bytes: the same products for any activation but -128.
// Device layout: split (64-byte bodies, then the fp16 d array), row-major or tiled (QK_IQ_TILE,
// common.cuh qk_iq_row0). Thread mapping MM_KERNELS_L4 (mm_common.cuh): thread (h, s) owns lanes
// 4h..4h+3 of the sub-blocks ib = s, s + S, ...: grid entries 2h, 2h + 1 of the sub-block (8 bytes
// each: two lanes).

#include "mm_common.cuh"

struct LaneIq2Xxs : LaneIqBase {
    static constexpr u32 BODY = 64u, TAB = TAB_IQ2XXS, GRID_WORDS = 512u;
    using G = GridRep<GRID_WORDS, 2>;
    static constexpr bool IQ2 = true;
    static constexpr u32 TAB_SEL = TAB_IQ2XXS_SEL;  // the grid as selectors (Iq2Sel)
    static constexpr u32 SIGNS = 128;  // sign table entries (SignTab)
    static constexpr int AL = 16;
    static constexpr bool SCALED = true;
    static constexpr float SCALE = 0.125f;
    template <bool WHOLE, class L, class Wf>
    static QK_MEMBER void sub(const Wf& W, const u8*, const Blk&, u32 ib, u32 h, const TabRef& grid, const TabRef& sgt, i32* ls,
                              i32* sg) {
        const u32 a0 = W(2u * ib), a1 = W(2u * ib + 1u);
        *ls = (i32)(2u * (a1 >> 28) + 1u);
#pragma unroll
        for (int i2 = 0; i2 < 2; ++i2) {
            const u32 lp = 2u * h + (u32)i2;
            iq2_pair<G, L>(grid, sgt, qk_perm(a0, 0u, 0x4440u | lp), (a1 >> (7u * lp)) & 127u, sg + 2 * i2);  // byte lp
        }
    }
};
template <int NTM, int S>
QK_DEV void mm_iq2_xxs(const MmArgs& A, const MmCtxW& c) { mm_iq_l4<LaneIq2Xxs, NTM, S>(A, c); }
MM_KERNELS_L4(iq2_xxs, mm_iq2_xxs, 1)
MM_KERNELS_L4(iq2_xxs, mm_iq2_xxs, 4)

// On tensor cores (mm_common.cuh mma_iq, MmaIq2Pairs): entry e of sub-block ib is grid index
// byte e of its first word with ksigns of bits 7e.. of the second; one scale for all 8 lanes.
struct MmaIq2Xxs {
    static constexpr bool LOOKS = true;  // grid copies, sign tables (mm_common.cuh QK_IQ_S_LOOKS)
    static constexpr u32 BODY = 64u, TAB = TAB_IQ2XXS, GRID_WORDS = 512u, SIGNS = 128u;
    using G = GridRep<GRID_WORDS, 2>;
    enum : u32 { TAB_SEL = TAB_IQ2XXS_SEL };  // the grid as selectors (Iq2Sel: QK_IQ_HMMA; an enum: no PTX global)
    static QK_MEMBER void parse(const u8* body, u32 ib, u32* gi, u32* sg, u32* scb) {
        const uint2 e = ld64(body + 8u * ib);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            gi[k] = wbyte(e.x, (u32)k);
            sg[k] = (e.y >> (7 * k)) & 127u;  // a ksigns index
        }
        *scb = (e.y >> 28) * 0x11u;
    }
};
QK_DEV void mma_iq2_xxs(const MmArgs& A) { mma_iq<MmaIq2Pairs<MmaIq2Xxs>, QK_PF_MMA_IQ>(A); }
MMA_KERNEL(iq2_xxs, mma_iq2_xxs, QK_MINB_MMA_IQ)

QK_DEV float deq_iq2_xxs(const u8* body, u32 d16, u32 e, const u32* tab) {
    const u32 ib = e / 32, l = (e % 32) / 8, j = e % 8;
    const u32 a0 = ld32(body + 8 * ib), a1 = ld32(body + 8 * ib + 4);
    const float db = qk_mul(qk_mul(qk_h2f(d16), qk_add(0.5f, (float)(a1 >> 28))), 0.25f);
    const u32 g = tab_byte(tab + TAB_IQ2XXS, 8u * ((a0 >> (8 * l)) & 0xffu) + j);
    const float v = qk_mul(db, (float)g);
    return (ksigns((a1 >> (7 * l)) & 127u) >> j) & 1u ? -v : v;
}
DEQ_KERNEL_T(iq2_xxs, deq_iq2_xxs, 256, 64, 1, QK_IQ_TILE)
