// ---- q6_K x q8_K: ggml_vec_dot_q6_K_q8_K (AVX2), two rows per thread pair --------------------
// kp_q6_k.wgsl's block, lanes and chains (its `sc6` and `w128` too) for rows k = 0, 1
// (kpair2_head.wgsl), each activation word loaded once for both.
struct St2 { acc0: array<vec4<f32>, NT>, acc1: array<vec4<f32>, NT> }
// A block's d, 6-bit quants of this invocation's lanes, their chunk scales and the lanes'
// scale pairs (2L, 2L + 1) for the -32 offset.
struct KB6 { dx: f32, q: array<vec4<u32>, 8>, sc: array<i32, 8>, sl0: vec4<i32>, sl1: vec4<i32> }
fn kblock6(base: u32, b: u32, h: u32) -> KB6 {
    var k: KB6;
    let B = base + b * 210u;
    k.dx = f16f(w16(B + 208u));
    var sw: array<u32, 4>;
    for (var i = 0u; i < 4u; i++) {
        sw[i] = w32(B + 192u + 4u * i);
    }
    for (var j = 0u; j < 2u; j++) {
        let w1 = w128(B + 64u * j + 16u * h);
        let w2 = w128(B + 64u * j + 32u + 16u * h);
        let hb = w128(B + 128u + 32u * j + 16u * h);
        k.q[4u * j + 0u] = (w1 & vec4<u32>(0x0f0f0f0fu)) | ((hb & vec4<u32>(0x03030303u)) << vec4<u32>(4u));
        k.q[4u * j + 1u] = (w2 & vec4<u32>(0x0f0f0f0fu)) | ((hb & vec4<u32>(0x0c0c0c0cu)) << vec4<u32>(2u));
        k.q[4u * j + 2u] = ((w1 >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu)) | (hb & vec4<u32>(0x30303030u));
        k.q[4u * j + 3u] = ((w2 >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu)) | ((hb & vec4<u32>(0xc0c0c0c0u)) >> vec4<u32>(2u));
        for (var c = 0u; c < 4u; c++) {
            k.sc[4u * j + c] = sc6(sw, 8u * j + 2u * c + h);
        }
    }
    for (var i = 0u; i < 4u; i++) {
        k.sl0[i] = sc6(sw, 8u * h + 2u * i);
        k.sl1[i] = sc6(sw, 8u * h + 2u * i + 1u);
    }
    return k;
}
// The -32 offset of a row's lanes from the bsums words of this invocation's lanes.
fn q6_off(k: KB6, bs: vec4<i32>) -> vec4<i32> {
    let lo = (bs << vec4<u32>(16u)) >> vec4<u32>(16u);
    return (lo * k.sl0 + (bs >> vec4<u32>(16u)) * k.sl1) << vec4<u32>(5u);
}
fn step2(base0: u32, base1: u32, b: u32, h: u32, st: ptr<function, St2>) {
    let k0 = kblock6(base0, b, h);
    let k1 = kblock6(base1, b, h);
    for (var t = 0u; t < NT; t++) {
        var s0 = vec4<i32>(0);
        var s1 = vec4<i32>(0);
        for (var i = 0u; i < 8u; i++) {
            let a = aq4(t, b, 8u * i + 4u * h);
            s0 += k0.sc[i] * dot4x4(k0.q[i], a);
            s1 += k1.sc[i] * dot4x4(k1.q[i], a);
        }
        let bs = bitcast<vec4<i32>>(ab4(t, b, 4u * h));
        s0 -= q6_off(k0, bs);
        s1 -= q6_off(k1, bs);
        let a = ad(t, b);
        (*st).acc0[t] = chain4(a * k0.dx, vec4<f32>(s0), (*st).acc0[t]);
        (*st).acc1[t] = chain4(a * k1.dx, vec4<f32>(s1), (*st).acc1[t]);
    }
}
// Both rows' results (row k's in element k).
fn finish2(st: ptr<function, St2>, lid: u32) -> array<array<f32, NT>, 2> {
    var r: array<array<f32, NT>, 2>;
    for (var t = 0u; t < NT; t++) {
        r[0][t] = hsum_pair((*st).acc0[t], lid);
        r[1][t] = hsum_pair((*st).acc1[t], lid);
    }
    return r;
}
