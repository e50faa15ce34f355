// ---- iq2_s's bytes of sub-block ib for invocation h (kpi_iq2_s.wgsl), 16-byte elements ----
// The weights as 16-byte elements (WV = vec4<u32>; tiled and split): a block's 80-byte body
// (layout.rs `pack_split`: 16-byte aligned, at B + 2) is 5 elements: 0..1 the grid low bytes
// (sub-block ib: word ib & 3 of element ib >> 2), 2..3 the sign bytes (the same words of
// elements 2 + (ib >> 2)), 4 qh[8] (.x, .y) and scales[8] (.z, .w); invocation h takes
// half-word h of its sub-block's words. The 8 sub-blocks take 5 loads instead of 32 word
// loads (the loop over ib is unrolled: the sub-blocks of an element share its load).
fn s_bytes(B: u32, ib: u32, h: u32) -> vec4<u32> {
    let e = (B + 2u) >> 4u;
    let vq = W[e + (ib >> 2u)];
    let vs = W[e + 2u + (ib >> 2u)];
    let vt = W[e + 4u];
    let hi = ib >= 4u;
    let sh = 8u * (ib & 3u);
    return vec4<u32>(
        (vq[ib & 3u] >> (16u * h)) & 0xffffu,
        (vs[ib & 3u] >> (16u * h)) & 0xffffu,
        (select(vt.x, vt.y, hi) >> sh) & 0xffu,
        (select(vt.z, vt.w, hi) >> sh) & 0xffu,
    );
}
