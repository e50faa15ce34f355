// ---- q6_K x q8_K: ggml_vec_dot_q6_K_q8_K (AVX2), thread pairs ------------------------------
// Block (210 bytes, 2-byte aligned): ql[128] +0, qh[64] +128, scales[16] (i8) +192, d +208.
// For j = 0..2 and chunk k = 0..4, element 128j + 32k + e is the 6-bit value
//   k=0: ql[64j+e] & 15 | (qh[32j+e] & 3) << 4      k=1: ql[64j+32+e] & 15 | (qh & 12) << 2
//   k=2: ql[64j+e] >> 4 | (qh & 48)                  k=3: ql[64j+32+e] >> 4 | (qh & 192) >> 2
// with scale scales[8j + 2k + (e >= 16)]; lane L covers e = 4L..4L+3 of every chunk, so
// invocation h (lanes 4h..4h+3) reads bytes 16h..16h+15 of each 32-byte run and uses scales
// 8j + 2k + h. The -32 offset is subtracted per lane as (bsums[2L]*sc[2L] +
// bsums[2L+1]*sc[2L+1]) << 5.
struct St { acc: array<vec4<f32>, NT> }
fn sc6(sw: array<u32, 4>, i: u32) -> i32 {
    return sext8(sw[i >> 2u] >> (8u * (i & 3u)));
}
// The 16 bytes at an even byte offset of W (5 words, funnel-shifted by 0 or 16 bits).
fn w128(byte: u32) -> vec4<u32> {
    let i = byte >> 2u;
    let a = W[i];
    let b = W[i + 1u];
    let c = W[i + 2u];
    let d = W[i + 3u];
    let e = W[i + 4u];
    if ((byte & 2u) == 0u) {
        return vec4<u32>(a, b, c, d);
    }
    return vec4<u32>((a >> 16u) | (b << 16u), (b >> 16u) | (c << 16u), (c >> 16u) | (d << 16u), (d >> 16u) | (e << 16u));
}
fn step(base: u32, b: u32, h: u32, st: ptr<function, St>) {
    let B = base + b * 210u;
    let dx = f16f(w16(B + 208u));
    var sw: array<u32, 4>;
    for (var k = 0u; k < 4u; k++) {
        sw[k] = w32(B + 192u + 4u * k);
    }
    var q: array<vec4<u32>, 8>;
    var sc: array<i32, 8>;
    for (var j = 0u; j < 2u; j++) {
        let w1 = w128(B + 64u * j + 16u * h);
        let w2 = w128(B + 64u * j + 32u + 16u * h);
        let hb = w128(B + 128u + 32u * j + 16u * h);
        q[4u * j + 0u] = (w1 & vec4<u32>(0x0f0f0f0fu)) | ((hb & vec4<u32>(0x03030303u)) << vec4<u32>(4u));
        q[4u * j + 1u] = (w2 & vec4<u32>(0x0f0f0f0fu)) | ((hb & vec4<u32>(0x0c0c0c0cu)) << vec4<u32>(2u));
        q[4u * j + 2u] = ((w1 >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu)) | (hb & vec4<u32>(0x30303030u));
        q[4u * j + 3u] = ((w2 >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu)) | ((hb & vec4<u32>(0xc0c0c0c0u)) >> vec4<u32>(2u));
        for (var k = 0u; k < 4u; k++) {
            sc[4u * j + k] = sc6(sw, 8u * j + 2u * k + h);
        }
    }
    // The lanes' scale pairs (2L, 2L + 1), L = 4h + i: scales 8h .. 8h + 7.
    var sl0: vec4<i32>;
    var sl1: vec4<i32>;
    for (var i = 0u; i < 4u; i++) {
        sl0[i] = sc6(sw, 8u * h + 2u * i);
        sl1[i] = sc6(sw, 8u * h + 2u * i + 1u);
    }
    for (var t = 0u; t < NT; t++) {
        var s = vec4<i32>(0);
        for (var i = 0u; i < 8u; i++) {
            // chunk k = i & 3 of j = i >> 2: act bytes 128j + 32k + 4L -> word 1 + 8i + L
            s += sc[i] * dot4x4(q[i], aq4(t, b, 8u * i + 4u * h));
        }
        let bs = bitcast<vec4<i32>>(ab4(t, b, 4u * h));
        let lo = (bs << vec4<u32>(16u)) >> vec4<u32>(16u);
        let sub = (lo * sl0 + (bs >> vec4<u32>(16u)) * sl1) << vec4<u32>(5u);
        s -= sub;
        let d = ad(t, b) * dx;
        (*st).acc[t] = chain4(d, vec4<f32>(s), (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, h: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = hsum_pair((*st).acc[t], lid);
    }
    return r;
}
