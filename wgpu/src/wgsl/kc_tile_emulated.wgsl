// ---- kc_tile_emulated.wgsl: kc_common.wgsl's tile product by plain invocations -----------
// The same C as kc_tile_coop.wgsl (every product and sum an integer below 2^24: exact in f32
// in any order), for adapters without cooperative matrices. Each of the half's 32
// invocations computes 8 of its 256 entries, rows m = l / 16 + 2i (i = 0..7) of column
// n = l % 16, over K in words of two elements. Few loop iterations, for lavapipe, which stops
// an invocation's loops after 65535 iterations in all (llvmpipe's LP_MAX_TGSI_LOOP_ITERATIONS):
// a 64-step loop per tile entry ran out from the 32nd block of a row on. Here 16 iterations per
// tile (the inner loops have constant counts of at most 8 and are unrolled in the source,
// `flatten_loops`), 64 per block: rows of up to about 1000 blocks (256k columns). (Unrolling
// all of it made the lavapipe shader compiles take minutes.)

fn kc_init_tiles(lid: u32) {}

fn kc_tile(half: u32, p: u32, lid: u32) {
    let l = lid & 31u;
    let n = l & 15u;
    let bias = select(0.0, 1024.0, KC_BIAS);
    var s: array<f32, 8>;
    for (var kq = 0u; kq < 16u; kq++) {
        for (var u = 0u; u < 2u; u++) {
            let kw = 2u * kq + u;
            let b0 = unpack2x16float(KB[2u * kw * 8u + (n >> 1u)]);
            let b1 = unpack2x16float(KB[(2u * kw + 1u) * 8u + (n >> 1u)]);
            let bx = select(b0.x, b0.y, (n & 1u) == 1u);
            let by = select(b1.x, b1.y, (n & 1u) == 1u);
            for (var i = 0u; i < 8u; i++) {
                let a = unpack2x16float(KA[half * 512u + ((l >> 4u) + 2u * i) * 32u + kw]);
                s[i] += (a.x - bias) * bx + (a.y - bias) * by;
            }
        }
    }
    for (var i = 0u; i < 8u; i++) {
        KC[half * 1024u + p * 256u + ((l >> 4u) + 2u * i) * 16u + n] = s[i];
    }
}
