// ---- iq4_xs x q8_K: ggml_vec_dot_iq4_xs_q8_K (AVX2), thread pairs ---------------------------
// The tiled layout (layout.rs): block k's qs in region A as 8 16-byte elements, element 2j + h
// holding words 2h, 2h + 1 of sub-block 2j, then of sub-block 2j + 1; its 8 header bytes
// (d | scales_h << 16, scales_l[4]) at byte 8k of region B. Word k's low nibbles are lane k's
// weights (elements 4k..4k+3), its high nibbles lane k + 4's, so invocation h owns the lanes
// (2h, 2h + 1, 2h + 4, 2h + 5) (the CUDA backend's word pairs, mm_common.cuh `MmCtxW`), and
// reads them with 4 16-byte loads (the pair: 32 contiguous bytes per load).
// Lane L of sub-block ib: ls(ib) * dot(kvalues of its nibbles, q8 word 8ib + L), with
// ls = ((scales_l[ib/2] >> 4(ib&1)) & 15 | ((scales_h >> 2ib) & 3) << 4) - 32; the lane sums
// over the 8 sub-blocks are exact, then one `fmx(d, f32(lane), acc)` per block and lane.
struct St { acc: array<vec4<f32>, NT> }
// `base`: tiled_base's (tiled_base.wgsl) of the row.
fn step(base: u32, b: u32, h: u32, st: ptr<function, St>) {
    let k = tiled_block(base, b);
    // Region B: P.rows * P.nb blocks of 8 elements into the weights, 2 headers an element.
    let hw = W[8u * P.rows * P.nb + (k >> 1u)];
    let hd = select(hw.xy, hw.zw, (k & 1u) == 1u);
    let dx = f16f(hd.x & 0xffffu);
    let sh = hd.x >> 16u;
    // The kvalues of this invocation's lanes and the scales, once per block, not per token.
    var q: array<vec4<u32>, 8>;
    var ls: array<i32, 8>;
    for (var j = 0u; j < 4u; j++) {
        let w = W[8u * k + 2u * j + h];
        let a = lut8(w.x);
        let c = lut8(w.y);
        q[2u * j] = vec4<u32>(a.x, c.x, a.y, c.y);
        let e = lut8(w.z);
        let f = lut8(w.w);
        q[2u * j + 1u] = vec4<u32>(e.x, f.x, e.y, f.y);
    }
    for (var ib = 0u; ib < 8u; ib++) {
        let lo = (hd.y >> (8u * (ib >> 1u) + 4u * (ib & 1u))) & 15u;
        ls[ib] = i32(lo | (((sh >> (2u * ib)) & 3u) << 4u)) - 32i;
    }
    for (var t = 0u; t < NT; t++) {
        var s = vec4<i32>(0);
        for (var ib = 0u; ib < 8u; ib++) {
            s += ls[ib] * dot4x4(q[ib], aq_wp(t, b, 8u * ib, h));
        }
        (*st).acc[t] = chain4(dx * ad(t, b), vec4<f32>(s), (*st).acc[t]);
    }
}
fn finish(st: ptr<function, St>, h: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        // hsum_float_8 of lanes (2h, 2h+1, 2h+4, 2h+5) of both invocations:
        // ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), the same bits in both.
        let x = (*st).acc[t];
        let a = x.x + x.z;
        let c = x.y + x.w;
        r[t] = (a + xorf(a, 1u, lid)) + (c + xorf(c, 1u, lid));
    }
    return r;
}
