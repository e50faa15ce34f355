// ---- iq3_xxs x q8_K: ggml_vec_dot_iq3_xxs_q8_K (AVX2) --------------------------------------
// Block (98 bytes): d +0, qs[96] +2: grid indices qs[0..64] (one u32 grid entry per 4
// elements), then 8 u32 scale-and-sign words. Lane L of sub-block ib: grid[qs[8ib+L]], signs
// ksigns[(aux >> 7(L/2)) & 127] bits 4(L&1)..; scale 2*(aux >> 28)+1; result 0.25 * hsum.
const ACT_BW: u32 = 73u;
struct St { acc: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = base + b * 98u;
    let dx = f16f(w16(B));
    var wv: array<u32, 8>;
    var ls: array<i32, 8>;
    for (var ib = 0u; ib < 8u; ib++) {
        let aux = w32(B + 66u + 4u * ib);
        let grid = T[OFF_IQ3XXS + w8(B + 2u + 8u * ib + l)];
        let sb = ksigns((aux >> (7u * (l >> 1u))) & 127u);
        wv[ib] = neg_bytes(grid, (sb >> (4u * (l & 1u))) & 0xfu);
        ls[ib] = 2i * i32(aux >> 28u) + 1i;
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
        r[t] = 0.25 * hsum8((*st).acc[t], lid);
    }
    return r;
}
