// ---- kpair2_head.wgsl: q4_K and q5_K thread pairs running two rows each ---------------------
// (`Tuning::pair_rows` = 2; kpair_main2.wgsl.) The invocations, lanes, chains and reductions of
// kpair_head.wgsl, for two rows at once: pair p of a workgroup of ROWS invocations runs rows p
// and p + ROWS / 2, and every activation word it loads (4 lanes' q8 words, bsums, d) serves
// both rows' products, halving the activation loads per row, which at 8 tokens outnumber the
// weight loads 30 to 1. Each row's float chains, and so its bits, are the one-row kernel's.

// A block's decoded weights: d, dmin, the kmask-unpacked scales and mins (kq_scales), the
// lanes' low and high quants of each 64-element group j (q5_K's with their fifth bits).
struct KB { dx: f32, dmx: f32, sc: vec4<u32>, lo: array<vec4<u32>, 4>, hi: array<vec4<u32>, 4> }

// kq_lanes of token t, block ab for two rows' blocks k0 and k1, each activation word loaded
// once for both.
fn kq_lanes2(k0: KB, k1: KB, t: u32, ab: u32, h: u32) -> array<vec4<i32>, 2> {
    var s0 = vec4<i32>(0);
    var s1 = vec4<i32>(0);
    for (var j = 0u; j < 4u; j++) {
        let al = aq4(t, ab, 16u * j + 4u * h);
        let ah = aq4(t, ab, 8u + 16u * j + 4u * h);
        let c0 = kq_sc(k0.sc, j);
        let c1 = kq_sc(k1.sc, j);
        s0 += c0.x * dot4x4(k0.lo[j], al);
        s0 += c0.y * dot4x4(k0.hi[j], ah);
        s1 += c1.x * dot4x4(k1.lo[j], al);
        s1 += c1.y * dot4x4(k1.hi[j], ah);
    }
    return array<vec4<i32>, 2>(s0, s1);
}

// Both rows' lane chains of block b (the format's `St2` fields acc0, acc1): acc_r[t] =
// chain4(ad(t, b) * dx_r, lanes, acc_r[t]), as the one-row kernels' `d = ad(t, b) * dx`.
fn kq_chains2(k0: KB, k1: KB, b: u32, h: u32, st: ptr<function, St2>) {
    for (var t = 0u; t < NT; t++) {
        let a = ad(t, b);
        let s = kq_lanes2(k0, k1, t, b, h);
        (*st).acc0[t] = chain4(a * k0.dx, vec4<f32>(s[0]), (*st).acc0[t]);
        (*st).acc1[t] = chain4(a * k1.dx, vec4<f32>(s[1]), (*st).acc1[t]);
    }
}
