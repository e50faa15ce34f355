// ---- iq4_xs's step with 16-byte loads (W: vec4<u32>): kp_iq4_xs.wgsl ----------------------
// `base`: tiled_base's (tiled_base.wgsl) of the row.
fn step(base: u32, b: u32, h: u32, st: ptr<function, St>) {
    let k = (base >> 5u) + b * (base & 31u);
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
        let a = lut8(w.x);
        let c = lut8(w.y);
        q[2u * j] = vec4<u32>(a.x, c.x, a.y, c.y);
        let e = lut8(w.z);
        let f = lut8(w.w);
        q[2u * j + 1u] = vec4<u32>(e.x, f.x, e.y, f.y);
    }
    for (var ib = 0u; ib < 8u; ib++) {
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
