// ---- kc_stage_u32.wgsl: kc_q4_k.wgsl's tiles staged as u32 words (two f16 each) -----------
// (the emulated tile products, and the cooperative ones by default: the tile loads read the
// u32 arrays as f16 elements, offsets and strides counted in words)
const KW: u32 = 1u;
var<workgroup> KA: array<u32, 1024>;
var<workgroup> KB: array<u32, 512>;
fn ka_put(i: u32, w: u32) {
    KA[i] = w;
}
fn kb_put(i: u32, w: u32) {
    KB[i] = w;
}
