// ---- iq4_xs x q8_K: ggml_vec_dot_iq4_xs_q8_K (AVX2), two rows per thread pair ----------------
// kp_iq4_xs.wgsl's block, lanes, chains and hsum for rows k = 0, 1 (kpair2_head.wgsl), each
// activation word pair loaded once for both.
struct St2 { acc0: array<vec4<f32>, NT>, acc1: array<vec4<f32>, NT> }
// A block's d, the kvalues of this invocation's lanes and the sub-block scales.
struct KB4 { dx: f32, q: array<vec4<u32>, 8>, ls: array<i32, 8> }
fn kblock4(base: u32, b: u32, h: u32) -> KB4 {
    var k: KB4;
    let i0 = (base + b * 136u) >> 3u;
    let hd = W[i0];
    k.dx = f16f(hd.x & 0xffffu);
    let sh = hd.x >> 16u;
    for (var ib = 0u; ib < 8u; ib++) {
        let w = W[i0 + 1u + 2u * ib + h];
        let a = lut8(w.x);
        let c = lut8(w.y);
        k.q[ib] = vec4<u32>(a.x, c.x, a.y, c.y);
        let lo = (hd.y >> (8u * (ib >> 1u) + 4u * (ib & 1u))) & 15u;
        k.ls[ib] = i32(lo | (((sh >> (2u * ib)) & 3u) << 4u)) - 32i;
    }
    return k;
}
fn step2(base0: u32, base1: u32, b: u32, h: u32, st: ptr<function, St2>) {
    let k0 = kblock4(base0, b, h);
    let k1 = kblock4(base1, b, h);
    for (var t = 0u; t < NT; t++) {
        var s0 = vec4<i32>(0);
        var s1 = vec4<i32>(0);
        for (var ib = 0u; ib < 8u; ib++) {
            let a = aq_wp(t, b, 8u * ib, h);
            s0 += k0.ls[ib] * dot4x4(k0.q[ib], a);
            s1 += k1.ls[ib] * dot4x4(k1.q[ib], a);
        }
        let a = ad(t, b);
        (*st).acc0[t] = chain4(k0.dx * a, vec4<f32>(s0), (*st).acc0[t]);
        (*st).acc1[t] = chain4(k1.dx * a, vec4<f32>(s1), (*st).acc1[t]);
    }
}
// hsum_float_8 of lanes (2h, 2h+1, 2h+4, 2h+5) of both invocations, as kp_iq4_xs.wgsl `finish`.
fn hsum_wp(x: vec4<f32>, lid: u32) -> f32 {
    let a = x.x + x.z;
    let c = x.y + x.w;
    return (a + xorf(a, 1u, lid)) + (c + xorf(c, 1u, lid));
}
// Both rows' results (row k's in element k).
fn finish2(st: ptr<function, St2>, lid: u32) -> array<array<f32, NT>, 2> {
    var r: array<array<f32, NT>, 2>;
    for (var t = 0u; t < NT; t++) {
        r[0][t] = hsum_wp((*st).acc0[t], lid);
        r[1][t] = hsum_wp((*st).acc1[t], lid);
    }
    return r;
}
