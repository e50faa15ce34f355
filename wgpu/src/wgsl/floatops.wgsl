// ---- floatops.wgsl: correctly rounded division and x86 max/convert semantics ---------

// `a / b` correctly rounded: the native quotient, then moved to whichever neighbour leaves the
// smallest exact residual `fmx(-q, b, a)` (a quotient of two floats is never a midpoint, so
// there are no ties). Zero, infinite, NaN and subnormal quotients are returned as computed.
fn div_rn(a: f32, b: f32) -> f32 {
    var q = a / b;
    let m = bitcast<u32>(q) & 0x7fffffffu;
    if (m < 0x00800000u || m >= 0x7f800000u) {
        return q;
    }
    for (var i = 0; i < 3; i++) {
        let r = abs(fmx(-q, b, a));
        let qu = bitcast<f32>(bitcast<u32>(q) + 1u);
        let qd = bitcast<f32>(bitcast<u32>(q) - 1u);
        let ru = abs(fmx(-qu, b, a));
        let rd = abs(fmx(-qd, b, a));
        if (ru < r && ru <= rd) {
            q = qu;
        } else if (rd < r) {
            q = qd;
        }
    }
    return q;
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

