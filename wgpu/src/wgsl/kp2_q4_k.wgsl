// ---- q4_K x q8_K: ggml_vec_dot_q4_K_q8_K (AVX2), two rows per thread pair --------------------
// kp_q4_k.wgsl's block, lanes and chains for rows k = 0, 1 (kpair2_head.wgsl).
struct St2 {
    acc0: array<vec4<f32>, NT>,
    acc1: array<vec4<f32>, NT>,
    accm0: array<vec4<f32>, NTH>,
    accm1: array<vec4<f32>, NTH>,
}
fn kblock(base: u32, b: u32, h: u32) -> KB {
    var k: KB;
    let i0 = (base + b * 144u) >> 4u;
    let hd = W[i0];
    k.dx = f16f(hd.x & 0xffffu);
    k.dmx = f16f(hd.x >> 16u);
    k.sc = kq_scales(hd);
    for (var j = 0u; j < 4u; j++) {
        let q = W[i0 + 1u + 2u * j + h];
        k.lo[j] = q & vec4<u32>(0x0f0f0f0fu);
        k.hi[j] = (q >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu);
    }
    return k;
}
// Block b of both rows: the lane chains, then each token slot's mins chains with -ad(t, b) and
// the bsums words loaded once for both rows. Written out per format (q5_K's alike), not as one
// step2 calling a per-format function with the slot index: with that form (session 16's
// review) the H200 ran q4_K NT 8 at 592 GB/s, and with this one at 809 (session 17 runs 2, 3).
fn step2(base0: u32, base1: u32, b: u32, h: u32, st: ptr<function, St2>) {
    let k0 = kblock(base0, b, h);
    let k1 = kblock(base1, b, h);
    kq_chains2(k0, k1, b, h, st);
    for (var i = 0u; i < NTH; i++) {
        let t = slot_token(i, h);
        let na = -ad(t, b);
        let b0 = ab4(t, b, 0u);
        let b1 = ab4(t, b, 4u);
        (*st).accm0[i] = chain4(na * k0.dmx, vec4<f32>(kmins_prod_b(k0.sc.z, k0.sc.w, b0, b1)), (*st).accm0[i]);
        (*st).accm1[i] = chain4(na * k1.dmx, vec4<f32>(kmins_prod_b(k1.sc.z, k1.sc.w, b0, b1)), (*st).accm1[i]);
    }
}
fn fin(acc: array<vec4<f32>, NT>, accm: array<vec4<f32>, NTH>, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        let m = accm[t / 2u];
        r[t] = hsum_pair(acc[t], lid) + ((m.x + m.z) + (m.y + m.w));
    }
    return r;
}
// Both rows' results (row k's in element k).
fn finish2(st: ptr<function, St2>, lid: u32) -> array<array<f32, NT>, 2> {
    return array<array<f32, NT>, 2>(fin((*st).acc0, (*st).accm0, lid), fin((*st).acc1, (*st).accm1, lid));
}
