// ---- act_q8k.wgsl: activation words of the 8-invocation and K-quant pair kernels -----------
// (X as u32 words; ACT_BW words per activation block, from the format's file.)
// The index of word 0 of activation block `ab` of token `t` (of this dispatch).
fn abase(t: u32, ab: u32) -> u32 {
    return (P.tok0 + t) * P.act_words + ab * ACT_BW;
}

// Activation word `w` of activation block `ab` of token `t`.
fn aw(t: u32, ab: u32, w: u32) -> u32 {
    return X[abase(t, ab) + w];
}
fn af(t: u32, ab: u32, w: u32) -> f32 {
    return bitcast<f32>(aw(t, ab, w));
}
