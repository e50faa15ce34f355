// ---- nvfp4 x q8_0: ggml_vec_dot_nvfp4_q8_0 (AVX2) ------------------------------------------
// Block (36 bytes, word aligned): d[4] (UE4M3) +0, qs[32] +4. Sub-block s (16 elements):
// element j is the low nibble of qs[8s + j] (j < 8) or the high nibble of qs[8s + j - 8],
// through the doubled E2M1 table. Two 8-lane steps per block, one per q8_0 activation block k:
// lane L covers elements 32k + 4L..4L+3 with scale UE4M3(d[2k + L/4]) * dy_k.
const ACT_BW: u32 = 9u;
struct St { acc: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let i0 = (base + b * 36u) >> 2u;
    let dw = W[i0];
    for (var k = 0u; k < 2u; k++) {
        let s = 2u * k + (l >> 2u);
        let qsw = W[i0 + 1u + 2u * s + (l & 1u)];
        let nib = select((qsw >> 4u) & 0x0f0f0f0fu, qsw & 0x0f0f0f0fu, (l & 2u) == 0u);
        let wv = lut4t(nib);
        let ue = ue4m3((dw >> (8u * s)) & 0xffu);
        let ab = 2u * b + k;
        for (var t = 0u; t < NT; t++) {
            let sc = ue * af(t, ab, 0u);
            let li = dot4I8Packed(wv, aw(t, ab, 1u + l));
            (*st).acc[t] = fmx(sc, f32(li), (*st).acc[t]);
        }
    }
}
fn finish(st: ptr<function, St>, l: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = hsum8((*st).acc[t], lid);
    }
    return r;
}
