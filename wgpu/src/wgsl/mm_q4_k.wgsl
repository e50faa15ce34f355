// ---- q4_K x q8_K: ggml_vec_dot_q4_K_q8_K (AVX2) --------------------------------------------
// Block (144 bytes, word aligned): d | dmin << 16, scales[12], qs[128].
// Lane k: sum over j = 0..4 of sc[2j] * dot(low nibbles of qs[32j+4k..], q8[64j+4k..])
//                              + sc[2j+1] * dot(high nibbles, q8[64j+32+4k..]).
// Mins: lane k & 3 of the 4-lane acc_m, `fma(dmin, prod, acc_m)`, reduced (m0+m2)+(m1+m3).
// q8_K device layout = ggml's (73 words): d (f32), qs[256], bsums[16] (i16).
const ACT_BW: u32 = 73u;
const KM1: u32 = 0x3f3f3f3fu;
const KM2: u32 = 0x0f0f0f0fu;
const KM3: u32 = 0x03030303u;
struct St { acc: array<f32, NT>, accm: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let i0 = (base + b * 144u) >> 2u;
    let w0 = W[i0];
    let dx = f16f(w0 & 0xffffu);
    let dmx = f16f(w0 >> 16u);
    let u0 = W[i0 + 1u];
    let u1 = W[i0 + 2u];
    let u2 = W[i0 + 3u];
    // The kmask unpacking (utmp): scales 0..3, 4..7 and mins 0..3, 4..7 as bytes.
    let s03 = u0 & KM1;
    let s47 = (u2 & KM2) | (((u0 >> 6u) & KM3) << 4u);
    let m03 = u1 & KM1;
    let m47 = ((u2 >> 4u) & KM2) | (((u1 >> 6u) & KM3) << 4u);
    // This lane's min pair: mins[2ml], mins[2ml+1], ml = l & 3.
    let ml = l & 3u;
    let mw = select(m47, m03, ml < 2u);
    let mn0 = i32((mw >> (16u * (ml & 1u))) & 0xffu);
    let mn1 = i32((mw >> (16u * (ml & 1u) + 8u)) & 0xffu);
    var qw: array<u32, 4>;
    for (var j = 0u; j < 4u; j++) {
        qw[j] = W[i0 + 4u + 8u * j + l];
    }
    for (var t = 0u; t < NT; t++) {
        let yd = af(t, b, 0u);
        let d = yd * dx;
        let dmin = -yd * dmx;
        // prod[ml] = mins[2ml]*q8s[2ml] + mins[2ml+1]*q8s[2ml+1], q8s[k] = bsums[2k]+bsums[2k+1] (i16)
        let bs0 = aw(t, b, 65u + 2u * ml);
        let bs1 = aw(t, b, 66u + 2u * ml);
        let q8s0 = sext16(bitcast<u32>(sext16(bs0) + (bitcast<i32>(bs0) >> 16u)));
        let q8s1 = sext16(bitcast<u32>(sext16(bs1) + (bitcast<i32>(bs1) >> 16u)));
        let prod = mn0 * q8s0 + mn1 * q8s1;
        (*st).accm[t] = fmx(dmin, f32(prod), (*st).accm[t]);
        var sumi = 0i;
        for (var j = 0u; j < 4u; j++) {
            let sw = select(s47, s03, j < 2u);
            let sc0 = i32((sw >> (16u * (j & 1u))) & 0xffu);
            let sc1 = i32((sw >> (16u * (j & 1u) + 8u)) & 0xffu);
            let lo = qw[j] & 0x0f0f0f0fu;
            let hi = (qw[j] >> 4u) & 0x0f0f0f0fu;
            sumi += sc0 * dot4I8Packed(lo, aw(t, b, 1u + 16u * j + l));
            sumi += sc1 * dot4I8Packed(hi, aw(t, b, 9u + 16u * j + l));
        }
        (*st).acc[t] = fmx(d, f32(sumi), (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, l: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        let h = hsum8((*st).acc[t], lid);
        let m = hsum4((*st).accm[t], lid);
        r[t] = h + m;
    }
    return r;
}
