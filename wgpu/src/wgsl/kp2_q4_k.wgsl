// ---- q4_K x q8_K: ggml_vec_dot_q4_K_q8_K (AVX2), two rows per thread pair --------------------
// kb_q4_k.wgsl's block, kp_q4_k.wgsl's lanes and chains for rows k = 0, 1 (kpair2_head.wgsl).
struct St2 {
    acc0: array<vec4<f32>, NT>,
    acc1: array<vec4<f32>, NT>,
    accm0: array<vec4<f32>, NTH>,
    accm1: array<vec4<f32>, NTH>,
}
// The mins chains of token slot i (kp_q4_k.wgsl), `na` = -ad(t, b), bsums words b0, b1.
fn kmins2(k0: Kblk, k1: Kblk, na: f32, b0: vec4<u32>, b1: vec4<u32>, i: u32, st: ptr<function, St2>) {
    (*st).accm0[i] = chain4(na * k0.dmx, vec4<f32>(kmins_prod_b(k0.sc.z, k0.sc.w, b0, b1)), (*st).accm0[i]);
    (*st).accm1[i] = chain4(na * k1.dmx, vec4<f32>(kmins_prod_b(k1.sc.z, k1.sc.w, b0, b1)), (*st).accm1[i]);
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
