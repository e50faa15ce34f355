// ---- iq2_s x q8_K on thread pairs, tiled and split, 16-byte loads (kpi_iq2_s.wgsl) --------
// The same decode as kpi_iq2_s.wgsl from the weights as 16-byte elements (WV = vec4<u32>): a
// block's 80-byte body (layout.rs `pack_split`: 16-byte aligned, at B + 2) is 5 elements: 0..1
// the grid low bytes (sub-block ib: word ib & 3 of element ib >> 2), 2..3 the sign bytes (the
// same words of elements 2 + (ib >> 2)), 4 qh[8] (.x, .y) and scales[8] (.z, .w); invocation h
// takes half-word h of its sub-block's words. The 8 sub-blocks take 5 loads instead of 32 word
// loads (the loop over ib is unrolled: the sub-blocks of an element share its load).
const BB: u32 = 82u;
fn sub(B: u32, ib: u32, h: u32) -> Sub {
    let e = (B + 2u) >> 4u;
    let vq = W[e + (ib >> 2u)];
    let vs = W[e + 2u + (ib >> 2u)];
    let vt = W[e + 4u];
    let hi = ib >= 4u;
    let sh = 8u * (ib & 3u);
    let qs = (vq[ib & 3u] >> (16u * h)) & 0xffffu;
    let sg = (vs[ib & 3u] >> (16u * h)) & 0xffffu;
    let qh = (select(vt.x, vt.y, hi) >> sh) & 0xffu;
    let sc = (select(vt.z, vt.w, hi) >> sh) & 0xffu;
    let g = 2u * h;
    let e0 = signed_entry((qs & 0xffu) | ((qh << (8u - 2u * g)) & 0x300u), sgn(sg & 0xffu));
    let e1 = signed_entry((qs >> 8u) | ((qh << (6u - 2u * g)) & 0x300u), sgn(sg >> 8u));
    return Sub(vec4<u32>(e0, e1), 2i * i32((sc >> (4u * h)) & 15u) + 1i);
}
fn res(x: f32) -> f32 {
    return 0.125 * x;
}
