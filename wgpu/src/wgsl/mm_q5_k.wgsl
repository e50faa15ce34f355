// ---- q5_K x q8_K: ggml_vec_dot_q5_K_q8_K (AVX2) --------------------------------------------
// Block (176 bytes, word aligned): d | dmin << 16, scales[12], qh[32], qs[128]. As q4_K, plus
// the fifth bits: element 32*(2j) + e takes bit 2j of qh[e], element 32*(2j+1) + e bit 2j+1.
// The mins go to a scalar `summs = fmx(dmin, hsum(prod), summs)` (gcc contracts it into
// vfmadd231ss; formats/src/reference/q5_k.rs), added after the hsum.
const ACT_BW: u32 = 73u;
const KM1: u32 = 0x3f3f3f3fu;
const KM2: u32 = 0x0f0f0f0fu;
const KM3: u32 = 0x03030303u;
struct St { acc: array<f32, NT>, summs: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let i0 = (base + b * 176u) >> 2u;
    let w0 = W[i0];
    let dx = f16f(w0 & 0xffffu);
    let dmx = f16f(w0 >> 16u);
    let u0 = W[i0 + 1u];
    let u1 = W[i0 + 2u];
    let u2 = W[i0 + 3u];
    let s03 = u0 & KM1;
    let s47 = (u2 & KM2) | (((u0 >> 6u) & KM3) << 4u);
    let m03 = u1 & KM1;
    let m47 = ((u2 >> 4u) & KM2) | (((u1 >> 6u) & KM3) << 4u);
    let qhw = W[i0 + 4u + l];
    var lo: array<u32, 4>;
    var hi: array<u32, 4>;
    for (var j = 0u; j < 4u; j++) {
        let qsw = W[i0 + 12u + 8u * j + l];
        lo[j] = (qsw & 0x0f0f0f0fu) | (((qhw >> (2u * j)) & 0x01010101u) << 4u);
        hi[j] = ((qsw >> 4u) & 0x0f0f0f0fu) | (((qhw >> (2u * j + 1u)) & 0x01010101u) << 4u);
    }
    for (var t = 0u; t < NT; t++) {
        let yd = af(t, b, 0u);
        let d = yd * dx;
        let dmin = -yd * dmx;
        // hsum of prod[0..4] (wrapping, order-free)
        var hs = 0i;
        for (var k = 0u; k < 4u; k++) {
            let mw = select(m47, m03, k < 2u);
            let mn0 = i32((mw >> (16u * (k & 1u))) & 0xffu);
            let mn1 = i32((mw >> (16u * (k & 1u) + 8u)) & 0xffu);
            let bs0 = aw(t, b, 65u + 2u * k);
            let bs1 = aw(t, b, 66u + 2u * k);
            let q8s0 = sext16(bitcast<u32>(sext16(bs0) + (bitcast<i32>(bs0) >> 16u)));
            let q8s1 = sext16(bitcast<u32>(sext16(bs1) + (bitcast<i32>(bs1) >> 16u)));
            hs += mn0 * q8s0 + mn1 * q8s1;
        }
        (*st).summs[t] = fmx(dmin, f32(hs), (*st).summs[t]);
        var sumi = 0i;
        for (var j = 0u; j < 4u; j++) {
            let sw = select(s47, s03, j < 2u);
            let sc0 = i32((sw >> (16u * (j & 1u))) & 0xffu);
            let sc1 = i32((sw >> (16u * (j & 1u) + 8u)) & 0xffu);
            sumi += sc0 * dot4I8Packed(lo[j], aw(t, b, 1u + 16u * j + l));
            sumi += sc1 * dot4I8Packed(hi[j], aw(t, b, 9u + 16u * j + l));
        }
        (*st).acc[t] = fmx(d, f32(sumi), (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, l: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = hsum8((*st).acc[t], lid) + (*st).summs[t];
    }
    return r;
}
