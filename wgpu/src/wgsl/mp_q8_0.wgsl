// ---- q8_0 x q8_0: ggml_vec_dot_q8_0_q8_0 (AVX2), pair layout ---------------------------------
// Lane l of a block is the sum of elements 4l..4l+3's products; acc_l = fmx(dx * dy, lane, acc_l)
// (dx * dy: two fp16 values, an exact product). Region A: the 32 int8 (invocation h: bytes
// 16h..16h+15 = lanes 4h..4h+3); region B: the fp16 d.
struct St { acc: array<vec4<f32>, NT> }
fn nsteps() -> u32 {
    return P.nb;
}
fn step(k0: u32, G: u32, b: u32, h: u32, st: ptr<function, St>) {
    let k = k0 + b * G;
    let q = W[2u * k + h];
    let dx = f16f((ww(BOFF + (k >> 1u)) >> (16u * (k & 1u))) & 0xffffu);
    for (var t = 0u; t < NT; t++) {
        let d = dx * ad(t, b);
        (*st).acc[t] = chain4(d, dot16(q, aq(t, b, h)), (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, k0: u32, G: u32, h: u32, lid: u32) -> array<f32, NT> {
    return hsum_tokens((*st).acc, lid);
}
