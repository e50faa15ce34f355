// ---- q5_K x q8_K: ggml_vec_dot_q5_K_q8_K (AVX2), two rows per thread pair --------------------
// kp_q5_k.wgsl's block, lanes and chains for rows k = 0, 1 (kpair2_head.wgsl).
struct St2 {
    acc0: array<vec4<f32>, NT>,
    acc1: array<vec4<f32>, NT>,
    summs0: array<f32, NTH>,
    summs1: array<f32, NTH>,
}
fn kblock(base: u32, b: u32, h: u32) -> KB {
    var k: KB;
    let i0 = (base + b * 176u) >> 4u;
    let hd = W[i0];
    k.dx = f16f(hd.x & 0xffffu);
    k.dmx = f16f(hd.x >> 16u);
    k.sc = kq_scales(hd);
    let qh = W[i0 + 1u + h];
    for (var j = 0u; j < 4u; j++) {
        let qs = W[i0 + 3u + 2u * j + h];
        k.lo[j] = (qs & vec4<u32>(0x0f0f0f0fu)) | (((qh >> vec4<u32>(2u * j)) & vec4<u32>(0x01010101u)) << vec4<u32>(4u));
        k.hi[j] = ((qs >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu))
            | (((qh >> vec4<u32>(2u * j + 1u)) & vec4<u32>(0x01010101u)) << vec4<u32>(4u));
    }
    return k;
}
// Block b of both rows, as kp2_q4_k.wgsl's step2, with the `summs` chains.
fn step2(base0: u32, base1: u32, b: u32, h: u32, st: ptr<function, St2>) {
    let k0 = kblock(base0, b, h);
    let k1 = kblock(base1, b, h);
    kq_chains2(k0, k1, b, h, st);
    for (var i = 0u; i < NTH; i++) {
        let t = slot_token(i, h);
        let na = -ad(t, b);
        let b0 = ab4(t, b, 0u);
        let b1 = ab4(t, b, 4u);
        // hsum of prod[0..4] (wrapping, order-free)
        let p0 = kmins_prod_b(k0.sc.z, k0.sc.w, b0, b1);
        let p1 = kmins_prod_b(k1.sc.z, k1.sc.w, b0, b1);
        (*st).summs0[i] = fmx(na * k0.dmx, f32((p0.x + p0.y) + (p0.z + p0.w)), (*st).summs0[i]);
        (*st).summs1[i] = fmx(na * k1.dmx, f32((p1.x + p1.y) + (p1.z + p1.w)), (*st).summs1[i]);
    }
}
fn fin(acc: array<vec4<f32>, NT>, summs: array<f32, NTH>, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = hsum_pair(acc[t], lid) + summs[t / 2u];
    }
    return r;
}
// Both rows' results (row k's in element k).
fn finish2(st: ptr<function, St2>, lid: u32) -> array<array<f32, NT>, 2> {
    return array<array<f32, NT>, 2>(fin((*st).acc0, (*st).summs0, lid), fin((*st).acc1, (*st).summs1, lid));
}
