// ---- q8_0 x q8_0: ggml_vec_dot_q8_0_q8_0 (AVX2) --------------------------------------------
// Block: d (fp16) at +0, 32 int8 at +2 (34 bytes). Lane l = elements 4l..4l+3.
// Chunk mode (shaders.rs `chunk_of`): the row's 8 invocations copy 8 blocks (272 bytes) at a
// time into workgroup memory, consecutive invocations reading consecutive words (9 words
// each, one contiguous span per row); each invocation then reads its lane's words from there.
// Activation device layout (ACT_BW = 9 words): d as exact f32, then the 32 int8.
const ACT_BW: u32 = 9u;
struct St { acc: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = (b & (CB - 1u)) * 34u;
    let dx = f16f(cw32(B) & 0xffffu);
    let q = cw32(B + 2u + 4u * l);
    for (var t = 0u; t < NT; t++) {
        // d = fp16(x.d) * fp16(y.d): exact (two 11-bit significands)
        let d = dx * af(t, b, 0u);
        let li = dot4I8Packed(q, aw(t, b, 1u + l));
        (*st).acc[t] = fmx(d, f32(li), (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, l: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = hsum8((*st).acc[t], lid);
    }
    return r;
}
