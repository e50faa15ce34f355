// ---- nvfp4 x q8_0: ggml_vec_dot_nvfp4_q8_0 (AVX2), pair layout -------------------------------
// Sub-block s (16 elements): element j is the low nibble of qs[8s + j] (j < 8) or the high
// nibble of qs[8s + j - 8], through the doubled E2M1 table. Two 8-lane steps per block, one per
// q8_0 activation block kk: lane L covers elements 32kk + 4L..4L+3 with scale
// UE4M3(d[2kk + L/4]) * dy_kk, so invocation h's lanes use sub-block 2kk + h. Region A: the 32
// qs bytes with the sub-blocks in the order 0, 2, 1, 3 (invocation h: 16 bytes, sub-blocks h
// then h + 2); region B: the four UE4M3 scales.
struct St { acc: array<vec4<f32>, NT> }
fn nsteps() -> u32 {
    return P.nb;
}
fn step(k0: u32, G: u32, b: u32, h: u32, st: ptr<function, St>) {
    let k = k0 + b * G;
    let q = W[2u * k + h];
    let dw = ww(BOFF + k);
    for (var kk = 0u; kk < 2u; kk++) {
        let w0 = select(q.z, q.x, kk == 0u);
        let w1 = select(q.w, q.y, kk == 0u);
        let a = lut8(w0);
        let c = lut8(w1);
        let wv = vec4<u32>(a.x, c.x, a.y, c.y);
        let ue = ue4m3((dw >> (8u * (2u * kk + h))) & 0xffu);
        let ab = 2u * b + kk;
        for (var t = 0u; t < NT; t++) {
            let sc = ue * ad(t, ab);
            (*st).acc[t] = chain4(sc, dot16(wv, aq(t, ab, h)), (*st).acc[t]);
        }
    }
}
fn finish(st: ptr<function, St>, k0: u32, G: u32, h: u32, lid: u32) -> array<f32, NT> {
    return hsum_tokens((*st).acc, lid);
}
