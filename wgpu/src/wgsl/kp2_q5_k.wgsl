// ---- q5_K x q8_K: ggml_vec_dot_q5_K_q8_K (AVX2), two rows per thread pair --------------------
// kb_q5_k.wgsl's block, kp_q5_k.wgsl's lanes and chains for rows k = 0, 1 (kpair2_head.wgsl).
struct St2 {
    acc0: array<vec4<f32>, NT>,
    acc1: array<vec4<f32>, NT>,
    summs0: array<f32, NTH>,
    summs1: array<f32, NTH>,
}
// Block b of both rows, as kp2_q4_k.wgsl's step2, with the `summs` chains: the hsum of
// prod[0..4] (wrapping, order-free).
fn step2(base0: u32, base1: u32, b: u32, h: u32, st: ptr<function, St2>) {
    let k0 = kblock(base0, b, h);
    let k1 = kblock(base1, b, h);
    kq_chains2(k0, k1, b, h, st);
    for (var i = 0u; i < NTH; i++) {
        let t = slot_token(i, h);
        let na = -ad(t, b);
        let b0 = ab4(t, b, 0u);
        let b1 = ab4(t, b, 4u);
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
