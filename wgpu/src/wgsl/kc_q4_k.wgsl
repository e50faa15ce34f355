// ---- kc_q4_k.wgsl: q4_K x q8_K on cooperative matrices (kc_common.wgsl) -------------------
// ggml_vec_dot_q4_K_q8_K (AVX2) as kp_q4_k.wgsl. A words: 1024 + sc * q, biased (KC_BIAS).
const KC_BIAS: bool = true;
// Two quants (<= 15) spread into a word, times the scale (<= 63), as the f16 pair
// (1024 + sc * q0, 1024 + sc * q1): bits 0x6400 + v, v < 1024.
fn kc_word(x: u32, s: u32) -> u32 {
    return x * s + 0x64006400u;
}

struct St { acc: array<vec4<f32>, NT>, accm: array<vec4<f32>, NTH> }
fn step(base: u32, b: u32, lid: u32, st: ptr<function, St>) {
    let h = lid & 1u;
    let i0 = (base + b * 144u) >> 4u;
    let hd = W[i0];
    let dx = f16f(hd.x & 0xffffu);
    let dmx = f16f(hd.x >> 16u);
    var w: Wq;
    w.sc = kq_scales(hd);
    for (var j = 0u; j < 4u; j++) {
        let q = W[i0 + 1u + 2u * j + h];
        w.lo[j] = q & vec4<u32>(0x0f0f0f0fu);
        w.hi[j] = (q >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu);
    }
    let lanes = kc_lanes(w, b, lid);
    for (var t = 0u; t < NT; t++) {
        let d = ad(t, b) * dx;
        (*st).acc[t] = chain4(d, lanes[t], (*st).acc[t]);
    }
    for (var i = 0u; i < NTH; i++) {
        let t = slot_token(i, h);
        let dmin = -ad(t, b) * dmx;
        (*st).accm[i] = chain4(dmin, vec4<f32>(kmins_prod(w.sc.z, w.sc.w, t, b)), (*st).accm[i]);
    }
}
fn finish(st: ptr<function, St>, h: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        let m = (*st).accm[t / 2u];
        r[t] = hsum_pair((*st).acc[t], lid) + ((m.x + m.z) + (m.y + m.w));
    }
    return r;
}
