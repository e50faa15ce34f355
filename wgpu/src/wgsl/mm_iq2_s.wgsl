// ---- iq2_s x q8_K: ggml_vec_dot_iq2_s_q8_K (AVX2) ------------------------------------------
// Block (82 bytes): d +0, qs[64] +2 (grid low bytes, then sign bytes), qh[8] +66, scales[8] +74.
// Grid index of group g (= L/2) of sub-block ib: qs[4ib+g] | ((qh[ib] << (8-2g)) & 0x300);
// signs qs[32+4ib+g]; lanes 0..3 scale 2*(scales[ib] & 15)+1, lanes 4..7 2*(scales[ib] >> 4)+1.
const ACT_BW: u32 = 73u;
struct St { acc: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = base + b * 82u;
    let dx = f16f(w16(B));
    let g = l >> 1u;
    let h = l & 1u;
    var wv: array<u32, 8>;
    var ls: array<i32, 8>;
    for (var ib = 0u; ib < 8u; ib++) {
        let idx = w8(B + 2u + 4u * ib + g) | ((w8(B + 66u + ib) << (8u - 2u * g)) & 0x300u);
        let grid = T[OFF_IQ2S + 2u * idx + h];
        let sb = w8(B + 34u + 4u * ib + g);
        wv[ib] = neg_bytes(grid, (sb >> (4u * h)) & 0xfu);
        let sc = w8(B + 74u + ib);
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
