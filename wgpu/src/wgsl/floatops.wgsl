// ---- floatops.wgsl: correctly rounded division and x86 max/convert semantics ---------

// `a / b` correctly rounded (Vulkan allows 2.5 ulp for `/`). The operands' significands are
// divided in [1, 2) (so that the residual `fmx(-q, b, a)` is exact, the fma emulation
// included), the quotient moved to whichever neighbour leaves the smallest residual (a
// quotient of two floats is never a midpoint: no ties), then the exponent difference is put
// back exactly. Zero, infinite, NaN or subnormal operands, or a quotient outside the normal
// range: the native quotient.
fn div_rn(a: f32, b: f32) -> f32 {
    let q = a / b;
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let ea = (ua >> 23u) & 0xffu;
    let eb = (ub >> 23u) & 0xffu;
    // Only the operands decide: the native quotient's own exponent is no guide, since a
    // driver may compute `a / b` as `a * (1 / b)` and, flushing a subnormal `1 / b` to zero
    // (b > 2^126 on NVIDIA, FTZ), return 0 or Inf where the true quotient is normal.
    if (ea == 0u || ea == 255u || eb == 0u || eb == 255u) {
        return q;
    }
    let am = bitcast<f32>((ua & 0x807fffffu) | 0x3f800000u);
    let bm = bitcast<f32>((ub & 0x807fffffu) | 0x3f800000u);
    var qm = am / bm;
    for (var i = 0; i < 3; i++) {
        let r = abs(fmx(-qm, bm, am));
        let qu = bitcast<f32>(bitcast<u32>(qm) + 1u);
        let qd = bitcast<f32>(bitcast<u32>(qm) - 1u);
        let ru = abs(fmx(-qu, bm, am));
        let rd = abs(fmx(-qd, bm, am));
        if (ru < r && ru <= rd) {
            qm = qu;
        } else if (rd < r) {
            qm = qd;
        }
    }
    let e = i32((bitcast<u32>(qm) >> 23u) & 0xffu) + i32(ea) - i32(eb);
    if (e < 1i || e > 254i) {
        return q;
    }
    return bitcast<f32>((bitcast<u32>(qm) & 0x807fffffu) | (u32(e) << 23u));
}

// `_mm_max_ps(a, b)` on |x| bit patterns: `a > b ? a : b` (the second operand on NaN).
fn maxps(a: u32, b: u32) -> u32 {
    return select(b, a, a > b && a <= 0x7f800000u && b <= 0x7f800000u);
}

// `_mm256_cvtps_epi32` of a rounded value: NaN and out-of-range give i32::MIN.
fn cvtps(r: f32) -> i32 {
    let m = bitcast<u32>(r) & 0x7fffffffu;
    if (m >= 0x4f000000u) { // |r| >= 2^31, Inf, NaN
        return -2147483647i - 1i;
    }
    return i32(r);
}

