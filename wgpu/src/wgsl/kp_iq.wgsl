// ---- kp_iq.wgsl: step and finish of the IQ2/IQ3 thread-pair kernels (after kp_iq_sub.wgsl) -
struct St { acc: array<vec4<f32>, NT> }
fn step(base: u32, b: u32, h: u32, st: ptr<function, St>) {
    let B = base + b * BB;
    let dx = f16f(w16(B));
    var q: array<vec4<u32>, 8>;
    var ls: array<i32, 8>;
    for (var ib = 0u; ib < 8u; ib++) {
        let s = sub(B, ib, h);
        q[ib] = s.q;
        ls[ib] = s.ls;
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
        r[t] = res(hsum_pair((*st).acc[t], lid));
    }
    return r;
}
