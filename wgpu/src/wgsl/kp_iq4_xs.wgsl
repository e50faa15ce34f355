// ---- iq4_xs x q8_K: ggml_vec_dot_iq4_xs_q8_K (AVX2), thread pairs ---------------------------
// The tiled layout (layout.rs): block k's qs in region A as 8 16-byte elements, element 2j + h
// holding the 8 bytes 8h..8h+8 of sub-block 2j's nibbles in element order (`nibble_seq`: byte m
// holds elements 2m, 2m + 1), then the same of sub-block 2j + 1; its 8 header bytes
// (d | scales_h << 16, scales_l[4]) at byte 8k of region B. So invocation h owns AVX2 lanes
// 4h..4h+3 (elements 16h..16h+16 of every sub-block), as the IQ2/IQ3 pairs do, reads them with
// 4 16-byte loads (the pair: 32 contiguous bytes per load), looks a lane's 4 kvalues up with 2
// lookups (`lute`) and reads a token's 4 q8 words of a sub-block with one `aq4`.
// Lane L of sub-block ib: ls(ib) * dot(kvalues of its nibbles, q8 word 8ib + L), with
// ls = ((scales_l[ib/2] >> 4(ib&1)) & 15 | ((scales_h >> 2ib) & 3) << 4) - 32; the lane sums
// over the 8 sub-blocks are exact, then one `fmx(d, f32(lane), acc)` per block and lane.
struct St { acc: array<vec4<f32>, NT> }
// `base`: tiled_base's (tiled_base.wgsl) of the row.
fn step(base: u32, b: u32, h: u32, st: ptr<function, St>) {
    let k = tiled_block(base, b);
    // Region B: P.rows * P.nb blocks of 8 elements into the weights, 2 headers an element.
    let hw = W[8u * P.rows * P.nb + (k >> 1u)];
    let hd = select(hw.xy, hw.zw, (k & 1u) == 1u);
    let dx = f16f(hd.x & 0xffffu);
    let sh = hd.x >> 16u;
    // The kvalues of this invocation's lanes and the scales, once per block, not per token.
    var q: array<vec4<u32>, 8>;
    var ls: array<i32, 8>;
    for (var j = 0u; j < 4u; j++) {
        let w = W[8u * k + 2u * j + h];
        let a = lute(w.x);
        let c = lute(w.y);
        q[2u * j] = vec4<u32>(a.x, a.y, c.x, c.y);
        let e = lute(w.z);
        let f = lute(w.w);
        q[2u * j + 1u] = vec4<u32>(e.x, e.y, f.x, f.y);
    }
    // The 8 scales at once: byte j of `se` holds sub-block 2j's 6 bits (the low nibble of
    // scales_l[j], bits 4j, 4j + 1 of scales_h), of `so` sub-block 2j + 1's (the high nibble, bits
    // 4j + 2, 4j + 3), each xor 32, so that a byte's 6 bits read as a signed field are ls (the
    // scale minus 32).
    let x0 = (sh & 0xffu) | ((sh & 0xff00u) << 8u);
    let x = (x0 & 0x000f000fu) | ((x0 & 0x00f000f0u) << 4u);
    let se = ((hd.y & 0x0f0f0f0fu) | ((x & 0x03030303u) << 4u)) ^ 0x20202020u;
    let so = (((hd.y >> 4u) & 0x0f0f0f0fu) | ((x & 0x0c0c0c0cu) << 2u)) ^ 0x20202020u;
    for (var j = 0u; j < 4u; j++) {
        ls[2u * j] = bitcast<i32>(se << (26u - 8u * j)) >> 26u;
        ls[2u * j + 1u] = bitcast<i32>(so << (26u - 8u * j)) >> 26u;
    }
    for (var t = 0u; t < NT; t++) {
        var s = vec4<i32>(0);
        for (var ib = 0u; ib < 8u; ib++) {
            s += ls[ib] * dot4x4(q[ib], aq4(t, b, 8u * ib + 4u * h));
        }
        (*st).acc[t] = chain4(dx * ad(t, b), vec4<f32>(s), (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, h: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = hsum_pair((*st).acc[t], lid);
    }
    return r;
}
