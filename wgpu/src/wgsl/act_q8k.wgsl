// ---- act_q8k.wgsl: q8_K activations in ggml's own blocks (the default device layout) ------
// Per token, ggml's 73-word blocks: d (f32), qs (64 words), bsums (8 words of two i16).
// The accessors of the 8-invocation and thread-pair kernels; act_q8k_split.wgsl has the same
// functions for the split layout.
@group(1) @binding(0) var<storage, read> X: array<u32>;

// The index of word 0 of activation block `ab` of token `t` (of this dispatch).
fn abase(t: u32, ab: u32) -> u32 {
    return (P.tok0 + t) * P.act_words + ab * 73u;
}
// Quant word k (0..64) of block ab of token t, and words k..k+3 (k a multiple of 4).
fn aq(t: u32, ab: u32, k: u32) -> u32 {
    return X[abase(t, ab) + 1u + k];
}
fn aq4(t: u32, ab: u32, k: u32) -> vec4<u32> {
    let i = abase(t, ab) + 1u + k;
    return vec4<u32>(X[i], X[i + 1u], X[i + 2u], X[i + 3u]);
}
// bsums words k..k+3 (k = 0 or 4; word k holds bsums 2k and 2k + 1).
fn ab4(t: u32, ab: u32, k: u32) -> vec4<u32> {
    let i = abase(t, ab) + 65u + k;
    return vec4<u32>(X[i], X[i + 1u], X[i + 2u], X[i + 3u]);
}
// The block's d.
fn ad(t: u32, ab: u32) -> f32 {
    return bitcast<f32>(X[abase(t, ab)]);
}
