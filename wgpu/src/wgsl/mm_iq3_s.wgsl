// ---- iq3_s x q8_K: ggml_vec_dot_iq3_s_q8_K (AVX2) ------------------------------------------
// Block (110 bytes): d +0, qs[64] +2, qh[8] +66, signs[32] +74, scales[4] +106.
// Lane L of sub-block ib: grid[((qh[ib] << (8-L)) & 256) | qs[8ib+L]], signs[4ib + L/2] bits
// 4(L&1)..; scale 2*ls+1 with ls the nibble (ib & 1) of scales[ib/2]; hsum unscaled.
const ACT_BW: u32 = 73u;
struct St { acc: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = base + b * 110u;
    let dx = f16f(w16(B));
    var wv: array<u32, 8>;
    var ls: array<i32, 8>;
    for (var ib = 0u; ib < 8u; ib++) {
        let idx = ((w8(B + 66u + ib) << (8u - l)) & 256u) | w8(B + 2u + 8u * ib + l);
        let grid = T[OFF_IQ3S + idx];
        let sb = w8(B + 74u + 4u * ib + (l >> 1u));
        wv[ib] = neg_bytes(grid, (sb >> (4u * (l & 1u))) & 0xfu);
        let sc = w8(B + 106u + (ib >> 1u));
        ls[ib] = 2i * i32(select(sc >> 4u, sc & 15u, (ib & 1u) == 0u)) + 1i;
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
        r[t] = hsum8((*st).acc[t], lid);
    }
    return r;
}
