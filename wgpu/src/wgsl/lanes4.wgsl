// ---- lanes4.wgsl: the 4-lane float chain and the pair reduction of the thread-pair kernels -
// (pair_head.wgsl and kpair_head.wgsl: invocation h of a row owns AVX2 lanes 4h..4h+3.)

// acc_i = fmx(d, li_i, acc_i) for the four lanes.
fn chain4(d: f32, li: vec4<f32>, acc: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(fmx(d, li.x, acc.x), fmx(d, li.y, acc.y), fmx(d, li.z, acc.z), fmx(d, li.w, acc.w));
}

// hsum_float_8 of the row's 8 lanes (this invocation's 4 and its partner's); both get it.
fn hsum_pair(a: vec4<f32>, lid: u32) -> f32 {
    let r0 = a.x + xorf(a.x, 1u, lid);
    let r1 = a.y + xorf(a.y, 1u, lid);
    let r2 = a.z + xorf(a.z, 1u, lid);
    let r3 = a.w + xorf(a.w, 1u, lid);
    return (r0 + r2) + (r1 + r3);
}
