// ---- iq8_tail.wgsl: the end of the IQ2/IQ3 8-invocation kernels (mm_iq*.wgsl) ----------
// Spliced in textually where a kernel's `step` writes `IQ8_TAIL(scale)` (after decoding its
// sub-block ib into the 8 lanes' signed grid words wv[L] and scales ls[L]): every token's 8
// partial lane sums, their transpose-reduction `tr8` (invocation l gets lane l's sum over
// the sub-blocks) and lane l's chain; then `finish`, hsum_float_8 of the row's lanes times
// ggml's final scale (`SCALE`: 0.125, 0.25 or none).
    for (var t = 0u; t < NT; t++) {
        var p: array<i32, 8>;
        for (var L = 0u; L < 8u; L++) {
            p[L] = ls[L] * dot4I8Packed(wv[L], aq(t, b, 8u * ib + L));
        }
        let sumi = tr8(p);
        let d = dx * ad(t, b);
        (*st).acc[t] = fmx(d, f32(sumi), (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, l: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = SCALEhsum8((*st).acc[t], lid);
    }
    return r;
}
