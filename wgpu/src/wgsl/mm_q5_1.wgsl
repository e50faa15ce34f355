// ---- q5_1 x q8_1: ggml_vec_dot_q5_1_q8_1 (AVX2) --------------------------------------------
// Block (24 bytes, word aligned): d | m << 16, qh, qs[16]. Element j: nibble (j < 16: low of
// qs[j], else high of qs[j-16]) | bit j of qh << 4. Lane l = elements 4l..4l+3.
// Chunk mode (shaders.rs `chunk_of`): 8 blocks (192 bytes) per workgroup-memory copy,
// consecutive invocations reading consecutive words (7 words each).
// Activation device layout (ACT_BW = 10): d, s as exact f32, then the 32 int8.
const ACT_BW: u32 = 10u;
struct St { acc: array<f32, NT>, summs: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = (b & (CB - 1u)) * 24u;
    let w0 = cw32(B);
    let dx = f16f(w0 & 0xffffu);
    let m = f16f(w0 >> 16u);
    let qh = cw32(B + 4u);
    let qsw = cw32(B + 8u + 4u * (l & 3u));
    let nib = select((qsw >> 4u) & 0x0f0f0f0fu, qsw & 0x0f0f0f0fu, l < 4u);
    let q = nib | (spread4((qh >> (4u * l)) & 0xfu) << 4u);
    for (var t = 0u; t < NT; t++) {
        // summs += m * s: the product of two fp16 values is exact, so contracted or not is the same.
        (*st).summs[t] = (*st).summs[t] + m * af(t, b, 1u);
        let d = dx * af(t, b, 0u);
        let li = dot4I8Packed(q, aw(t, b, 2u + l));
        (*st).acc[t] = fmx(d, f32(li), (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, l: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = hsum8((*st).acc[t], lid) + (*st).summs[t];
    }
    return r;
}
