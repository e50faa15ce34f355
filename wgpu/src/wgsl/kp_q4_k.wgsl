// ---- q4_K x q8_K: ggml_vec_dot_q4_K_q8_K (AVX2), thread pairs ------------------------------
// Block (144 bytes = 9 x 16): element 0 d | dmin << 16, scales[12]; element 1 + 2j + h the qs
// words 8j + 4h .. 8j + 4h + 3 (lanes 4h..4h+3 of 64-element group j). Lane k: sum over j of
// sc[2j] * dot(low nibbles of qs word 8j+k, q8 word 16j+k) + sc[2j+1] * dot(high nibbles, q8
// word 16j+8+k).
// Mins: per token the 4-lane acc_m, `fmx(dmin, f32(prod), acc_m)`, reduced (m0+m2)+(m1+m3),
// run by the token's owner. q8_K device layout = ggml's (73 words): d, qs[256], bsums[16] (i16).
struct St { acc: array<vec4<f32>, NT>, accm: array<vec4<f32>, NTH> }
fn step(base: u32, b: u32, h: u32, st: ptr<function, St>) {
    let i0 = (base + b * 144u) >> 4u;
    let hd = W[i0];
    let dx = f16f(hd.x & 0xffffu);
    let dmx = f16f(hd.x >> 16u);
    let sc = kq_scales(hd);
    // The nibbles once per block, not per token.
    var lo: array<vec4<u32>, 4>;
    var hi: array<vec4<u32>, 4>;
    for (var j = 0u; j < 4u; j++) {
        let q = W[i0 + 1u + 2u * j + h];
        lo[j] = q & vec4<u32>(0x0f0f0f0fu);
        hi[j] = (q >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu);
    }
    for (var t = 0u; t < NT; t++) {
        let d = ad(t, b) * dx;
        let s = kq_lanes(lo, hi, sc, t, b, h);
        (*st).acc[t] = chain4(d, vec4<f32>(s), (*st).acc[t]);
    }
    for (var i = 0u; i < NTH; i++) {
        let t = slot_token(i, h);
        let dmin = -ad(t, b) * dmx;
        (*st).accm[i] = chain4(dmin, vec4<f32>(kmins_prod(sc.z, sc.w, t, b)), (*st).accm[i]);
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
