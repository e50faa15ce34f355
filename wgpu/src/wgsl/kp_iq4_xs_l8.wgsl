// ---- iq4_xs's step with 8-byte loads (W: vec2<u32>): kp_iq4_xs.wgsl -----------------------
// Sub-block ib's words 2h, 2h + 1 are 8-byte element 2 (2j + h) + (ib & 1), j = ib / 2, of
// region A's block (16 elements); header k is element k of region B.
// `base`: tiled_base's (tiled_base.wgsl) of the row.
fn step(base: u32, b: u32, h: u32, st: ptr<function, St>) {
    let k = (base >> 5u) + b * (base & 31u);
    let hd = W[16u * P.rows * P.nb + k];
    let dx = f16f(hd.x & 0xffffu);
    let sh = hd.x >> 16u;
    // The kvalues of this invocation's lanes and the scales, once per block, not per token.
    var q: array<vec4<u32>, 8>;
    var ls: array<i32, 8>;
    for (var ib = 0u; ib < 8u; ib++) {
        let w = W[16u * k + 4u * (ib >> 1u) + 2u * h + (ib & 1u)];
        let a = lut8(w.x);
        let c = lut8(w.y);
        q[ib] = vec4<u32>(a.x, c.x, a.y, c.y);
        let lo = (hd.y >> (8u * (ib >> 1u) + 4u * (ib & 1u))) & 15u;
        ls[ib] = i32(lo | (((sh >> (2u * ib)) & 3u) << 4u)) - 32i;
    }
    for (var t = 0u; t < NT; t++) {
        var s = vec4<i32>(0);
        for (var ib = 0u; ib < 8u; ib++) {
            s += ls[ib] * dot4x4(q[ib], aq_wp(t, b, 8u * ib, h));
        }
        (*st).acc[t] = chain4(dx * ad(t, b), vec4<f32>(s), (*st).acc[t]);
    }
}
