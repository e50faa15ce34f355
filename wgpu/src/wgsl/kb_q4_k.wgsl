// ---- kb_q4_k.wgsl: a q4_K block as a thread pair's invocation h decodes it ------------------
// Block (144 bytes = 9 x 16): element 0 d | dmin << 16, scales[12]; element 1 + 2j + h the qs
// words 8j + 4h .. 8j + 4h + 3 (lanes 4h..4h+3 of 64-element group j). One decode for the
// one-row (kp_q4_k.wgsl), two-row (kp2_q4_k.wgsl) and cooperative-matrix (kc_q4_k.wgsl) kernels.

// A block's decoded weights: d, dmin, the kmask-unpacked scales and mins (kq_scales), the
// lanes' low and high nibbles of each 64-element group j.
struct Kblk { dx: f32, dmx: f32, sc: vec4<u32>, lo: array<vec4<u32>, 4>, hi: array<vec4<u32>, 4> }
fn kblock(base: u32, b: u32, h: u32) -> Kblk {
    var k: Kblk;
    let i0 = (base + b * 144u) >> 4u;
    let hd = W[i0];
    k.dx = f16f(hd.x & 0xffffu);
    k.dmx = f16f(hd.x >> 16u);
    k.sc = kq_scales(hd);
    for (var j = 0u; j < 4u; j++) {
        let q = W[i0 + 1u + 2u * j + h];
        k.lo[j] = q & vec4<u32>(0x0f0f0f0fu);
        k.hi[j] = (q >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu);
    }
    return k;
}
