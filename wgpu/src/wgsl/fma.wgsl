// ---- fma.wgsl: a fused multiply-add that is one on every adapter ------------------------
//
// `fmx(a, b, c)` is `fma(a, b, c)` where the adapter's `fma()` was measured fused (the probe at
// device creation), else `fma_emul`. Measured: lavapipe (llvmpipe, LLVM 15) lowers `fma()` to
// an unfused multiply and add; NVIDIA's Vulkan driver fuses it (see the crate docs).

// A value the compiler cannot see through (XOR with a runtime zero): no contraction, no
// reassociation or algebraic simplification across it.
fn lnd(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) ^ zero_u());
}

// round(a*b + c) with one rounding, from unfused operations only (Boldo & Melquiond,
// "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd",
// IEEE TC 2008): Dekker's exact product uh + ul = a*b (Veltkamp splitting), TwoSum
// th + tl = c + uh, v = round-to-odd(tl + ul), result = round(th + v). Every intermediate
// is laundered so that no driver can contract or simplify it. Exact for operands and
// products within about 2^-100..2^100 in magnitude (no overflow of 4097*x, no underflow of
// the error terms), which every kernel's values are.
fn fma_emul(a: f32, b: f32, c: f32) -> f32 {
    let uh = lnd(a * b);
    let ca = lnd(4097.0 * a);
    let ah = lnd(ca - lnd(ca - a));
    let al = lnd(a - ah);
    let cb = lnd(4097.0 * b);
    let bh = lnd(cb - lnd(cb - b));
    let bl = lnd(b - bh);
    let ul = lnd(lnd(lnd(lnd(ah * bh) - uh) + lnd(ah * bl)) + lnd(al * bh)) + lnd(al * bl);
    let th = lnd(c + uh);
    let tb = lnd(th - c);
    let tl = lnd(lnd(c - lnd(th - tb)) + lnd(uh - tb));
    let v0 = lnd(tl + ul);
    let vb = lnd(v0 - tl);
    let ve = lnd(lnd(tl - lnd(v0 - vb)) + lnd(ul - vb));
    let vbits = bitcast<u32>(v0);
    var v = v0;
    if (ve != 0.0 && (vbits & 1u) == 0u) {
        // v0 is the even neighbour of the exact sum: take the odd one, on ve's side.
        let up = (ve > 0.0) == (v0 > 0.0);
        v = bitcast<f32>(select(vbits - 1u, vbits + 1u, up));
    }
    return lnd(th + v);
}
