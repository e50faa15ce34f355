// ---- iq4_xs x q8_K: ggml_vec_dot_iq4_xs_q8_K (AVX2), thread pairs ---------------------------
// The tiled layout (layout.rs): block k's qs in region A as 8 16-byte elements, element 2j + h
// holding words 2h, 2h + 1 of sub-block 2j, then of sub-block 2j + 1; its 8 header bytes
// (d | scales_h << 16, scales_l[4]) at byte 8k of region B. Word k's low nibbles are lane k's
// weights (elements 4k..4k+3), its high nibbles lane k + 4's, so invocation h owns the lanes
// (2h, 2h + 1, 2h + 4, 2h + 5) (the CUDA backend's word pairs, mm_common.cuh `MmCtxW`), and
// reads them with 4 16-byte loads (the pair: 32 contiguous bytes per load; `step` in
// kp_iq4_xs_l16.wgsl) or 8 8-byte loads (kp_iq4_xs_l8.wgsl), as shaders.rs `xs_l8` says.
// Lane L of sub-block ib: ls(ib) * dot(kvalues of its nibbles, q8 word 8ib + L), with
// ls = ((scales_l[ib/2] >> 4(ib&1)) & 15 | ((scales_h >> 2ib) & 3) << 4) - 32; the lane sums
// over the 8 sub-blocks are exact, then one `fmx(d, f32(lane), acc)` per block and lane.
struct St { acc: array<vec4<f32>, NT> }
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
