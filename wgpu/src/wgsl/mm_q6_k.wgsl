// ---- q6_K x q8_K: ggml_vec_dot_q6_K_q8_K (AVX2) --------------------------------------------
// Block (210 bytes, 2-byte aligned): ql[128] +0, qh[64] +128, scales[16] (i8) +192, d +208.
// For j = 0..2 and chunk k = 0..4, element 128j + 32k + e is the 6-bit value
//   k=0: ql[64j+e] & 15 | (qh[32j+e] & 3) << 4      k=1: ql[64j+32+e] & 15 | (qh & 12) << 2
//   k=2: ql[64j+e] >> 4 | (qh & 48)                  k=3: ql[64j+32+e] >> 4 | (qh & 192) >> 2
// with scale scales[8j + 2k + (e >= 16)]; lane L covers e = 4L..4L+3 of every chunk. The -32
// offset is subtracted per lane as (bsums[2L]*sc[2L] + bsums[2L+1]*sc[2L+1]) << 5.
const ACT_BW: u32 = 73u;
struct St { acc: array<f32, NT> }
fn sc6(sw: array<u32, 4>, i: u32) -> i32 {
    return sext8(sw[i >> 2u] >> (8u * (i & 3u)));
}
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = base + b * 210u;
    let dx = f16f(w16(B + 208u));
    var sw: array<u32, 4>;
    for (var k = 0u; k < 4u; k++) {
        sw[k] = w32(B + 192u + 4u * k);
    }
    var q: array<u32, 8>;
    var sc: array<i32, 8>;
    for (var j = 0u; j < 2u; j++) {
        let w1 = w32(B + 64u * j + 4u * l);
        let w2 = w32(B + 64u * j + 32u + 4u * l);
        let h = w32(B + 128u + 32u * j + 4u * l);
        q[4u * j + 0u] = (w1 & 0x0f0f0f0fu) | ((h & 0x03030303u) << 4u);
        q[4u * j + 1u] = (w2 & 0x0f0f0f0fu) | ((h & 0x0c0c0c0cu) << 2u);
        q[4u * j + 2u] = ((w1 >> 4u) & 0x0f0f0f0fu) | (h & 0x30303030u);
        q[4u * j + 3u] = ((w2 >> 4u) & 0x0f0f0f0fu) | ((h & 0xc0c0c0c0u) >> 2u);
        for (var k = 0u; k < 4u; k++) {
            sc[4u * j + k] = sc6(sw, 8u * j + 2u * k + (l >> 2u));
        }
    }
    let sl0 = sc6(sw, 2u * l);
    let sl1 = sc6(sw, 2u * l + 1u);
    for (var t = 0u; t < NT; t++) {
        var sumi = 0i;
        for (var i = 0u; i < 8u; i++) {
            // chunk k = i & 3 of j = i >> 2: act bytes 128j + 32k + 4l -> word 1 + 8i + l
            sumi += sc[i] * dot4I8Packed(q[i], aw(t, b, 1u + 8u * i + l));
        }
        let bs = aw(t, b, 65u + l);
        let sub = (sext16(bs) * sl0 + (bitcast<i32>(bs) >> 16u) * sl1) << 5u;
        sumi -= sub;
        let d = af(t, b, 0u) * dx;
        (*st).acc[t] = fmx(d, f32(sumi), (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, l: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = hsum8((*st).acc[t], lid);
    }
    return r;
}
