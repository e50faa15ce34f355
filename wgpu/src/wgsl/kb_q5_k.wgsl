// ---- kb_q5_k.wgsl: a q5_K block as a thread pair's invocation h decodes it ------------------
// Block (176 bytes = 11 x 16): element 0 d | dmin << 16, scales[12]; element 1 + h the qh words
// 4h..4h+3; element 3 + 2j + h the qs words 8j + 4h .. 8j + 4h + 3. As q4_K, plus the fifth
// bits: element 32*(2j) + e takes bit 2j of qh[e], element 32*(2j+1) + e bit 2j+1. One decode
// for the one-row (kp_q5_k.wgsl), two-row (kp2_q5_k.wgsl) and cooperative-matrix (kc_q5_k.wgsl)
// kernels.

// A block's decoded weights: d, dmin, the kmask-unpacked scales and mins (kq_scales), the
// lanes' low and high quants of each 64-element group j with their fifth bits.
struct Kblk { dx: f32, dmx: f32, sc: vec4<u32>, lo: array<vec4<u32>, 4>, hi: array<vec4<u32>, 4> }
fn kblock(base: u32, b: u32, h: u32) -> Kblk {
    var k: Kblk;
    let i0 = (base + b * 176u) >> 4u;
    let hd = W[i0];
    k.dx = f16f(hd.x & 0xffffu);
    k.dmx = f16f(hd.x >> 16u);
    k.sc = kq_scales(hd);
    let qh = W[i0 + 1u + h];
    for (var j = 0u; j < 4u; j++) {
        let qs = W[i0 + 3u + 2u * j + h];
        k.lo[j] = (qs & vec4<u32>(0x0f0f0f0fu)) | (((qh >> vec4<u32>(2u * j)) & vec4<u32>(0x01010101u)) << vec4<u32>(4u));
        k.hi[j] = ((qs >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu))
            | (((qh >> vec4<u32>(2u * j + 1u)) & vec4<u32>(0x01010101u)) << vec4<u32>(4u));
    }
    return k;
}
