// ---- q6_K x q8_K: ggml_vec_dot_q6_K_q8_K (AVX2), thread pairs ------------------------------
// ggml's block (210 bytes): ql[128] +0, qh[64] +128, scales[16] (i8) +192, d +208.
// For j = 0..2 and chunk k = 0..4, element 128j + 32k + e is the 6-bit value
//   k=0: ql[64j+e] & 15 | (qh[32j+e] & 3) << 4      k=1: ql[64j+32+e] & 15 | (qh & 12) << 2
//   k=2: ql[64j+e] >> 4 | (qh & 48)                  k=3: ql[64j+32+e] >> 4 | (qh & 192) >> 2
// with scale scales[8j + 2k + (e >= 16)]; lane L covers e = 4L..4L+3 of every chunk, so
// invocation h (lanes 4h..4h+3) reads bytes 16h..16h+15 of each 32-byte run and uses scales
// 8j + 2k + h. The -32 offset is subtracted per lane as (bsums[2L]*sc[2L] +
// bsums[2L+1]*sc[2L+1]) << 5.
// The tiled layout (layout.rs `q6k_src`): block k's region A is 13 16-byte elements, element
// 2m + h (m = 3j + c) invocation h's bytes of run c of half j (c = 0: ql[64j..], 1:
// ql[64j + 32..], 2: qh[32j..]), the pair's 32 contiguous bytes per load, element 12 the
// scales; region B the fp16 d, 8 blocks' in a 16-byte element.
struct St { acc: array<vec4<f32>, NT> }
fn sc6(sw: array<u32, 4>, i: u32) -> i32 {
    return sext8(sw[i >> 2u] >> (8u * (i & 3u)));
}
// `base`: tiled_base's (tiled_base.wgsl) of the row.
fn step(base: u32, b: u32, h: u32, st: ptr<function, St>) {
    let kb = tiled_block(base, b);
    let i0 = 13u * kb;
    let dw = W[13u * P.rows * P.nb + (kb >> 3u)];
    let dx = f16f((dw[(kb >> 1u) & 3u] >> (16u * (kb & 1u))) & 0xffffu);
    let swv = W[i0 + 12u];
    let sw = array<u32, 4>(swv.x, swv.y, swv.z, swv.w);
    var q: array<vec4<u32>, 8>;
    var sc: array<i32, 8>;
    for (var j = 0u; j < 2u; j++) {
        let w1 = W[i0 + 6u * j + h];
        let w2 = W[i0 + 6u * j + 2u + h];
        let hb = W[i0 + 6u * j + 4u + h];
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
