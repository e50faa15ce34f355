// ---- kc_q5_k.wgsl: q5_K x q8_K on cooperative matrices (kc_common.wgsl) -------------------
// ggml_vec_dot_q5_K_q8_K (AVX2) as kp_q5_k.wgsl: quants with their fifth bit (0..31), the
// summs chain. A words: sc * q (up to 1953, past the 1024 bias's range), converted to f16
// (exact: an integer below 2048).
const KC_BIAS: bool = false;
// Two quants (<= 31) spread into a word, times the scale (<= 63): sc * q up to 1953, past the
// bias's range, so the f16 pair is converted (exact: integers below 2048).
fn kc_word(x: u32, s: u32) -> u32 {
    let u = x * s;
    return pack2x16float(vec2<f32>(f32(u & 0xffffu), f32(u >> 16u)));
}

struct St { acc: array<vec4<f32>, NT>, summs: array<f32, NTH> }
fn step(base: u32, b: u32, lid: u32, st: ptr<function, St>) {
    let h = lid & 1u;
    let i0 = (base + b * 176u) >> 4u;
    let hd = W[i0];
    let dx = f16f(hd.x & 0xffffu);
    let dmx = f16f(hd.x >> 16u);
    var w: Wq;
    w.sc = kq_scales(hd);
    let qh = W[i0 + 1u + h];
    for (var j = 0u; j < 4u; j++) {
        let qs = W[i0 + 3u + 2u * j + h];
        w.lo[j] = (qs & vec4<u32>(0x0f0f0f0fu)) | (((qh >> vec4<u32>(2u * j)) & vec4<u32>(0x01010101u)) << vec4<u32>(4u));
        w.hi[j] = ((qs >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu))
            | (((qh >> vec4<u32>(2u * j + 1u)) & vec4<u32>(0x01010101u)) << vec4<u32>(4u));
    }
    let lanes = kc_lanes(w, b, lid);
    for (var t = 0u; t < NT; t++) {
        let d = ad(t, b) * dx;
        (*st).acc[t] = chain4(d, lanes[t], (*st).acc[t]);
    }
    for (var i = 0u; i < NTH; i++) {
        let t = slot_token(i, h);
        let dmin = -ad(t, b) * dmx;
        // hsum of prod[0..4] (wrapping, order-free)
        let p = kmins_prod(w.sc.z, w.sc.w, t, b);
        (*st).summs[i] = fmx(dmin, f32((p.x + p.y) + (p.z + p.w)), (*st).summs[i]);
    }
}
fn finish(st: ptr<function, St>, h: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = hsum_pair((*st).acc[t], lid) + (*st).summs[t / 2u];
    }
    return r;
}
