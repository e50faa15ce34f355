// ---- iq4_nl x q8_0: ggml_vec_dot_iq4_nl_q8_0 (AVX2), pair layout -----------------------------
// Element j < 16 is kvalues[low nibble of qs[j]], j >= 16 kvalues[high nibble of qs[j-16]].
// Blocks go in pairs: even ones into acc1, odd ones into acc2, then hsum(acc1 + acc2); an odd
// last block is the scalar tail `sumf = fmx(d, f32(sumi1 + sumi2), sumf)` (gcc contracts it;
// reference iq4_nl.rs). Region A: the nibble repack (layout.rs); region B: the fp16 d.
const AW: u32 = 4u;
const ABPB: u32 = 1u;
struct St { acc1: array<vec4<f32>, NT>, acc2: array<vec4<f32>, NT>, tail_i: array<vec4<i32>, NT>, tail_d: array<f32, NT> }
fn step(k: u32, b: u32, h: u32, st: ptr<function, St>) {
    let p = W[k];
    let pp = select(p.zw, p.xy, h == 0u);
    let dx = f16f((ww(BOFF + (k >> 1u)) >> (16u * (k & 1u))) & 0xffffu);
    let q = vec4<u32>(
        lut4t(pp.x & 0x0f0f0f0fu),
        lut4t((pp.x >> 4u) & 0x0f0f0f0fu),
        lut4t(pp.y & 0x0f0f0f0fu),
        lut4t((pp.y >> 4u) & 0x0f0f0f0fu),
    );
    let tail = (P.nb & 1u) == 1u && b + 1u == P.nb;
    for (var t = 0u; t < NT; t++) {
        let d = ad(t, b) * dx;
        let a = aq(t, b, h);
        if (tail) {
            (*st).tail_i[t] = vec4<i32>(dot4I8Packed(q.x, a.x), dot4I8Packed(q.y, a.y), dot4I8Packed(q.z, a.z), dot4I8Packed(q.w, a.w));
            (*st).tail_d[t] = d;
        } else if ((b & 1u) == 0u) {
            (*st).acc1[t] = chain4(d, dot16(q, a), (*st).acc1[t]);
        } else {
            (*st).acc2[t] = chain4(d, dot16(q, a), (*st).acc2[t]);
        }
    }
}
fn finish(st: ptr<function, St>, h: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    let odd = (P.nb & 1u) == 1u;
    for (var t = 0u; t < NT; t++) {
        var s = hsum_pair((*st).acc1[t] + (*st).acc2[t], lid);
        let si = isum_pair((*st).tail_i[t], lid);
        if (odd) {
            s = fmx((*st).tail_d[t], f32(si), s);
        }
        r[t] = s;
    }
    return r;
}
