// ---- kc_stage_f16.wgsl: kc_q4_k.wgsl's tiles staged as f16 elements ------------------------
// (needs `enable f16`): the same values as kc_stage_u32.wgsl, each word stored as its two
// halves (widened and narrowed back: exact, the values being integers below 2048); the tile loads count offsets and strides in f16 elements (KW per word).
const KW: u32 = 2u;
var<workgroup> KA: array<f16, 2048>;
var<workgroup> KB: array<f16, 1024>;
fn ka_put(i: u32, w: u32) {
    let v = vec2<f16>(unpack2x16float(w));
    KA[2u * i] = v.x;
    KA[2u * i + 1u] = v.y;
}
fn kb_put(i: u32, w: u32) {
    let v = vec2<f16>(unpack2x16float(w));
    KB[2u * i] = v.x;
    KB[2u * i + 1u] = v.y;
}
// The -1024 tile of kc_tile_coop.wgsl (16 rows of 16 f16).
var<workgroup> KN: array<f16, 256>;
fn kn_init(lid: u32) {
    for (var i = lid; i < 256u; i += WG) {
        KN[i] = f16(-1024.0);
    }
}
