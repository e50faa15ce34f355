// ---- q5_K x q8_K: ggml_vec_dot_q5_K_q8_K (AVX2), thread pairs ------------------------------
// Block (176 bytes = 11 x 16): element 0 d | dmin << 16, scales[12]; element 1 + h the qh words
// 4h..4h+3; element 3 + 2j + h the qs words 8j + 4h .. 8j + 4h + 3. As q4_K, plus the fifth
// bits: element 32*(2j) + e takes bit 2j of qh[e], element 32*(2j+1) + e bit 2j+1. The mins go
// to a scalar `summs = fmx(dmin, hsum(prod), summs)` (gcc contracts it into vfmadd231ss;
// formats/src/reference/q5_k.rs), run by the token's owner and added after the hsum.
struct St { acc: array<vec4<f32>, NT>, summs: array<f32, NTH> }
fn step(base: u32, b: u32, h: u32, st: ptr<function, St>) {
    let i0 = (base + b * 176u) >> 4u;
    let hd = W[i0];
    let dx = f16f(hd.x & 0xffffu);
    let dmx = f16f(hd.x >> 16u);
    let sc = kq_scales(hd);
    let qh = W[i0 + 1u + h];
    var lo: array<vec4<u32>, 4>;
    var hi: array<vec4<u32>, 4>;
    for (var j = 0u; j < 4u; j++) {
        let qs = W[i0 + 3u + 2u * j + h];
        lo[j] = (qs & vec4<u32>(0x0f0f0f0fu)) | (((qh >> vec4<u32>(2u * j)) & vec4<u32>(0x01010101u)) << vec4<u32>(4u));
        hi[j] = ((qs >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu))
            | (((qh >> vec4<u32>(2u * j + 1u)) & vec4<u32>(0x01010101u)) << vec4<u32>(4u));
    }
    for (var t = 0u; t < NT; t++) {
        let d = ad(t, b) * dx;
        let s = kq_lanes(lo, hi, sc, t, b, h);
        (*st).acc[t] = chain4(d, vec4<f32>(s), (*st).acc[t]);
    }
    for (var i = 0u; i < NTH; i++) {
        let t = slot_token(i, h);
        let dmin = -ad(t, b) * dmx;
        // hsum of prod[0..4] (wrapping, order-free)
        let p = kmins_prod(sc.z, sc.w, t, b);
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
