// ---- q5_1 x q8_1: ggml_vec_dot_q5_1_q8_1 (AVX2), pair layout ---------------------------------
// Element j: nibble (j < 16: low of qs[j], else high of qs[j-16]) | bit j of qh << 4; lane l =
// elements 4l..4l+3. Region A: the nibble repack (layout.rs; invocation h: words 2h, 2h+1, its
// lanes' nibbles in bytes: one 8-byte load); region B: the words d | m << 16 and qh. summs += m * s (a product of
// two fp16 values: exact, so contracted or not is the same) is kept by both invocations.
struct St { acc: array<vec4<f32>, NT>, summs: array<f32, NT> }
fn nsteps() -> u32 {
    return P.nb;
}
fn step(k0: u32, G: u32, b: u32, h: u32, st: ptr<function, St>) {
    let k = k0 + b * G;
    let pp = W[2u * k + h];
    let hd = W[(BOFF >> 1u) + k];
    let dx = f16f(hd.x & 0xffffu);
    let m = f16f(hd.x >> 16u);
    let qh = hd.y >> (16u * h);
    let q = vec4<u32>(
        (pp.x & 0x0f0f0f0fu) | (high4(qh & 0xfu)),
        ((pp.x >> 4u) & 0x0f0f0f0fu) | (high4((qh >> 4u) & 0xfu)),
        (pp.y & 0x0f0f0f0fu) | (high4((qh >> 8u) & 0xfu)),
        ((pp.y >> 4u) & 0x0f0f0f0fu) | (high4((qh >> 12u) & 0xfu)),
    );
    for (var t = 0u; t < NT; t++) {
        (*st).summs[t] = (*st).summs[t] + m * as1(t, b);
        let d = dx * ad(t, b);
        (*st).acc[t] = chain4(d, dot16(q, aq(t, b, h)), (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, k0: u32, G: u32, h: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = hsum_pair((*st).acc[t], lid) + (*st).summs[t];
    }
    return r;
}
