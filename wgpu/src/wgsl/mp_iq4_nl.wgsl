// ---- iq4_nl x q8_0: ggml_vec_dot_iq4_nl_q8_0 (AVX2), pair layout -----------------------------
// Element j < 16 is kvalues[low nibble of qs[j]], j >= 16 kvalues[high nibble of qs[j-16]].
// Blocks go in pairs (one step each): the even one into acc1, the odd one into acc2, then
// hsum(acc1 + acc2); an odd last block is the scalar tail `sumf = fmx(d, f32(sumi1 + sumi2),
// sumf)` (gcc contracts it; reference iq4_nl.rs), run in `finish`. Region A: the nibble repack
// (layout.rs); region B: the fp16 d.
struct St { acc1: array<vec4<f32>, NT>, acc2: array<vec4<f32>, NT> }
// Block k's (row's) four lane weight words of invocation h, and its d.
fn weights(k: u32, h: u32) -> vec4<u32> {
    let pp = W[2u * k + h];
    let a = lut8(pp.x);
    let c = lut8(pp.y);
    return vec4<u32>(a.x, a.y, c.x, c.y);
}
fn dscale(k: u32) -> f32 {
    return f16f((ww(BOFF + (k >> 1u)) >> (16u * (k & 1u))) & 0xffffu);
}
fn nsteps() -> u32 {
    return P.nb >> 1u;
}
fn step(k0: u32, G: u32, p: u32, h: u32, st: ptr<function, St>) {
    let b = 2u * p;
    let ka = k0 + b * G;
    let kb = ka + G;
    let qa = weights(ka, h);
    let qb = weights(kb, h);
    let da = dscale(ka);
    let db = dscale(kb);
    for (var t = 0u; t < NT; t++) {
        (*st).acc1[t] = chain4(ad(t, b) * da, dot16(qa, aq(t, b, h)), (*st).acc1[t]);
        (*st).acc2[t] = chain4(ad(t, b + 1u) * db, dot16(qb, aq(t, b + 1u, h)), (*st).acc2[t]);
    }
}
fn finish(st: ptr<function, St>, k0: u32, G: u32, h: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    let odd = (P.nb & 1u) == 1u;
    // The tail block (every invocation loads it: uniform control flow for the exchanges).
    let b = P.nb - 1u;
    let k = k0 + b * G;
    let q = weights(k, h);
    let dx = dscale(k);
    for (var t = 0u; t < NT; t++) {
        var s = hsum_pair((*st).acc1[t] + (*st).acc2[t], lid);
        let a = aq(t, b, h);
        let li = vec4<i32>(dot4I8Packed(q.x, a.x), dot4I8Packed(q.y, a.y), dot4I8Packed(q.z, a.z), dot4I8Packed(q.w, a.w));
        let si = isum_pair(li, lid);
        if (odd) {
            s = fmx(ad(t, b) * dx, f32(si), s);
        }
        r[t] = s;
    }
    return r;
}
