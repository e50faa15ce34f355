// ---- act_q8k_split.wgsl: q8_K activations in the split device layout -----------------------
// Per token (P.act_words words, a multiple of 4): the qs of every block (64 words each), then
// the bsums of every block (8 words each), then the d of every block (f32), so that a kernel
// reads 4 quant or bsums words with one 16-byte load (`Q8kLayout::Split`, and the second half
// of each row with `Q8kLayout::Both`).
@group(1) @binding(0) var<storage, read> X: array<vec4<u32>>;

// P.nb is the weight blocks per row, one q8_K block each (256 elements). `soff()` (shaders.rs
// `act_q8k`): the split copy's word offset in the row (0, or half the row when the row holds
// ggml's blocks first, `Q8kLayout::Both`; a multiple of 4 either way).
fn arow4(t: u32) -> u32 {
    return ((P.tok0 + t) * P.act_words + soff()) >> 2u;
}
fn aq(t: u32, ab: u32, k: u32) -> u32 {
    return X[arow4(t) + 16u * ab + (k >> 2u)][k & 3u];
}
fn aq4(t: u32, ab: u32, k: u32) -> vec4<u32> {
    return X[arow4(t) + 16u * ab + (k >> 2u)];
}
fn ab4(t: u32, ab: u32, k: u32) -> vec4<u32> {
    return X[arow4(t) + 16u * P.nb + 2u * ab + (k >> 2u)];
}
fn ad(t: u32, ab: u32) -> f32 {
    let i = 72u * P.nb + ab;
    return bitcast<f32>(X[arow4(t) + (i >> 2u)][i & 3u]);
}
