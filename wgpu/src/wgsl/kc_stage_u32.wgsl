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
// The -1024 tile of kc_tile_coop.wgsl (f16 0xE400; 16 rows of 8 words).
var<workgroup> KN: array<u32, 128>;
fn kn_init(lid: u32) {
    for (var i = lid; i < 128u; i += WG) {
        KN[i] = 0xe400e400u;
    }
}
