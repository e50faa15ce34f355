// ---- iq4_xs x q8_K: ggml_vec_dot_iq4_xs_q8_K (AVX2) ----------------------------------------
// Block (136 bytes, word aligned): d | scales_h << 16, scales_l[4], qs[128]. Sub-block ib:
// ls = ((scales_l[ib/2] >> 4(ib&1)) & 15 | ((scales_h >> 2ib) & 3) << 4) - 32; element
// e < 16 kvalues[low nibble of qs[16ib+e]], e >= 16 kvalues[high nibble of qs[16ib+e-16]].
// Invocation l of a row decodes sub-block ib = l (its 8 lanes' weights, from contiguous
// bytes), computes the 8 lanes' partial integer sums of that sub-block, and the row's 8
// invocations transpose-reduce them (`tr8`, exact integer adds): invocation l then holds
// AVX2 lane l's sum over the 8 sub-blocks and runs lane l's float chain, as before.
const ACT_BW: u32 = 73u;
struct St { acc: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let i0 = (base + b * 136u) >> 2u;
    let w0 = W[i0];
    let dx = f16f(w0 & 0xffffu);
    let sh = w0 >> 16u;
    let sl = W[i0 + 1u];
    let ib = l;
    let lo = (sl >> (8u * (ib >> 1u) + 4u * (ib & 1u))) & 15u;
    let hi = (sh >> (2u * ib)) & 3u;
    let s = i32(lo | (hi << 4u)) - 32i;
    var qw: array<u32, 4>;
    for (var k = 0u; k < 4u; k++) {
        qw[k] = W[i0 + 2u + 4u * ib + k];
    }
    var wv: array<u32, 8>;
    var ls: array<i32, 8>;
    for (var L = 0u; L < 8u; L++) {
        let qsw = qw[L & 3u];
        wv[L] = lut4t(select((qsw >> 4u) & 0x0f0f0f0fu, qsw & 0x0f0f0f0fu, L < 4u));
        ls[L] = s;
    }
    for (var t = 0u; t < NT; t++) {
        var p: array<i32, 8>;
        for (var L = 0u; L < 8u; L++) {
            p[L] = ls[L] * dot4I8Packed(wv[L], aw(t, b, 1u + 8u * ib + L));
        }
        let sumi = tr8(p);
        let d = dx * af(t, b, 0u);
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
