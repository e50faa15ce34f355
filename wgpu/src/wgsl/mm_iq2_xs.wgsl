// ---- iq2_xs x q8_K: ggml_vec_dot_iq2_xs_q8_K (AVX2) ----------------------------------------
// Block (74 bytes): d +0, qs u16[32] +2, scales[8] +66. Entry qs[4ib + g] (g = L/2) gives the
// grid index (q & 511) and the sign index (q >> 9) of elements 8g..8g+8 of sub-block ib; lanes
// 0..3 take scale 2*(scales[ib] & 15)+1, lanes 4..7 2*(scales[ib] >> 4)+1; 0.125 * hsum.
const ACT_BW: u32 = 73u;
struct St { acc: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = base + b * 74u;
    let dx = f16f(w16(B));
    let g = l >> 1u;
    let h = l & 1u;
    var wv: array<u32, 8>;
    var ls: array<i32, 8>;
    for (var ib = 0u; ib < 8u; ib++) {
        let q = w16(B + 2u + 8u * ib + 2u * g);
        let grid = T[OFF_IQ2XS + 2u * (q & 511u) + h];
        let sb = ksigns(q >> 9u);
        wv[ib] = neg_bytes(grid, (sb >> (4u * h)) & 0xfu);
        let sc = w8(B + 66u + ib);
        ls[ib] = 2i * i32(select(sc >> 4u, sc & 15u, l < 4u)) + 1i;
    }
    for (var t = 0u; t < NT; t++) {
        var sumi = 0i;
        for (var ib = 0u; ib < 8u; ib++) {
            sumi += ls[ib] * dot4I8Packed(wv[ib], aw(t, b, 1u + 8u * ib + l));
        }
        let d = dx * af(t, b, 0u);
        (*st).acc[t] = fmx(d, f32(sumi), (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, l: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = 0.125 * hsum8((*st).acc[t], lid);
    }
    return r;
}
