// ---- iq_split.wgsl: the IQ2/IQ3 formats tiled and split (layout.rs `pack_split`, ----------
// ---- Tuning::ktile) ------------------------------------------------------------------------
// Block number k (`tiled_block`, tiled_base.wgsl; `ptiled`, dequant.wgsl) has its body
// (ggml's block after d) at byte IQBODY * k and its d at byte 2k of the d region after the
// part's bodies. The kernels' block byte B = IQBODY * k - 2 (wrapping for k = 0) keeps ggml's
// offsets: B + 2 + i is body byte i, and every body word is 4-byte aligned.
const IQBODY: u32 = BODY_BYTESu;
// The word at a 4-byte aligned byte offset (every word a kernel reads from a body): one load,
// where `w32` takes two and a funnel shift.
fn wa32(byte: u32) -> u32 {
    return W[byte >> 2u];
}
// The byte offset of the d of the block at byte B.
fn iq_d(B: u32) -> u32 {
    return PART_ROWS * PART_NB * IQBODY + 2u * ((B + 2u) / IQBODY);
}
