// ---- iq4_nl x q8_0: ggml_vec_dot_iq4_nl_q8_0 (AVX2) ----------------------------------------
// Block (18 bytes): d +0, qs[16] +2; element j < 16 is kvalues[low nibble of qs[j]], j >= 16
// kvalues[high nibble of qs[j-16]]. Blocks go in pairs: even ones into acc1, odd ones into
// acc2, then hsum(acc1 + acc2); an odd last block is the scalar tail
// `sumf = fmx(d, f32(sumi1 + sumi2), sumf)` (gcc contracts it; reference iq4_nl.rs).
const ACT_BW: u32 = 9u;
struct St { acc1: array<f32, NT>, acc2: array<f32, NT>, tail_i: array<i32, NT>, tail_d: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = base + b * 18u;
    let dx = f16f(w16(B));
    let qsw = w32(B + 2u + 4u * (l & 3u));
    let nib = select((qsw >> 4u) & 0x0f0f0f0fu, qsw & 0x0f0f0f0fu, l < 4u);
    let wv = lut4t(nib);
    let tail = (P.nb & 1u) == 1u && b + 1u == P.nb;
    for (var t = 0u; t < NT; t++) {
        let d = af(t, b, 0u) * dx;
        let li = dot4I8Packed(wv, aw(t, b, 1u + l));
        if (tail) {
            (*st).tail_i[t] = li;
            (*st).tail_d[t] = d;
        } else if ((b & 1u) == 0u) {
            (*st).acc1[t] = fmx(d, f32(li), (*st).acc1[t]);
        } else {
            (*st).acc2[t] = fmx(d, f32(li), (*st).acc2[t]);
        }
    }
}
fn finish(st: ptr<function, St>, l: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    let odd = (P.nb & 1u) == 1u;
    for (var t = 0u; t < NT; t++) {
        var s = hsum8((*st).acc1[t] + (*st).acc2[t], lid);
        let si = isum8((*st).tail_i[t], lid);
        if (odd) {
            s = fmx((*st).tail_d[t], f32(si), s);
        }
        r[t] = s;
    }
    return r;
}
