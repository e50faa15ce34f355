// ---- kc_iq.wgsl: the IQ2/IQ3 formats on cooperative matrices (kc_common.wgsl) -------------
// After the format's kpi_*.wgsl (BB, `sub`, `res`) and kp_iq_sub.wgsl: the thread pairs of
// kp_iq.wgsl (invocation h decodes lanes 4h..4h+3 of every sub-block once per block; the same
// lane chains `fmx(dx * d, f32(lane), acc)`, the same `res(hsum_pair)`), the lane sums
// sum_ib ls[ib] * dot(lane bytes, q8 word 8ib + L) from tile products. A: the signed grid
// bytes times the sub-block scale (|v| <= 62 * 31 = 1922, an integer f16 holds exactly),
// converted; no bias.
const KC_BIAS: bool = false;
struct Wq { q: array<vec4<u32>, 8>, ls: array<i32, 8> }
fn kc_fill_a(w: Wq, p: u32, a0: u32) {
    for (var ib = 0u; ib < 8u; ib++) {
        let v = vec4<f32>(unpack4xI8(w.q[ib][p])) * f32(w.ls[ib]);
        ka_put(a0 + 2u * ib, pack2x16float(v.xy));
        ka_put(a0 + 2u * ib + 1u, pack2x16float(v.zw));
    }
}

struct St { acc: array<vec4<f32>, NT> }
fn step(base: u32, b: u32, lid: u32, st: ptr<function, St>) {
    let h = lid & 1u;
    let B = base + b * BB;
    let dx = f16f(w16(B));
    var w: Wq;
    for (var ib = 0u; ib < 8u; ib++) {
        let s = sub(B, ib, h);
        w.q[ib] = s.q;
        w.ls[ib] = s.ls;
    }
    let lanes = kc_lanes(w, b, lid);
    for (var t = 0u; t < NT; t++) {
        (*st).acc[t] = chain4(dx * ad(t, b), lanes[t], (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, h: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = res(hsum_pair((*st).acc[t], lid));
    }
    return r;
}
