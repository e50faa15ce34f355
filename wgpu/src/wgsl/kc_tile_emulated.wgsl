// ---- kc_tile_emulated.wgsl: kc_q4_k.wgsl's tile product by plain invocations -------------
// The same C as kc_tile_coop.wgsl (every product and sum an integer below 2^24: exact in f32
// in any order), for adapters without cooperative matrices. Each of the half's 32
// invocations computes 8 of its 256 entries.

fn kc_init_tiles(lid: u32) {}

fn kc_tile(half: u32, p: u32, lid: u32) {
    let l = lid & 31u;
    for (var i = 0u; i < 8u; i++) {
        let e = l + 32u * i;
        let m = e >> 4u;
        let n = e & 15u;
        var s = 0.0;
        for (var k = 0u; k < 64u; k++) {
            let a = unpack2x16float(KA[half * 512u + m * 32u + (k >> 1u)]);
            let bv = unpack2x16float(KB[k * 8u + (n >> 1u)]);
            s += (select(a.x, a.y, (k & 1u) == 1u) - select(0.0, 1024.0, KC_BIAS)) * select(bv.x, bv.y, (n & 1u) == 1u);
        }
        KC[half * 1024u + p * 256u + m * 16u + n] = s;
    }
}
