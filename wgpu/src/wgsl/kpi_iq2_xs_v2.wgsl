// ---- iq2_xs x q8_K on thread pairs, tiled and split, 8-byte loads (kpi_iq2_xs.wgsl) -------
// The same decode as kpi_iq2_xs.wgsl from the weights as 8-byte elements (WV = vec2<u32>): a
// block's 72-byte body (layout.rs `pack_split`: 8-byte aligned, at B + 2) is 9 elements, 0..7
// the qs entries of sub-blocks 0..7 (invocation h: word h, read alone), 8 the scales[8] (.x,
// .y), read whole once for the 8 sub-blocks (the loop over ib is unrolled): 9 loads a block
// instead of 16 word loads, no more bytes.
const BB: u32 = 74u;
fn sub(B: u32, ib: u32, h: u32) -> Sub {
    let e = (B + 2u) >> 3u;
    let qw = W[e + ib][h];
    let q0 = qw & 0xffffu;
    let q1 = qw >> 16u;
    let e0 = signed_entry(q0 & 511u, sgn(q0 >> 9u));
    let e1 = signed_entry(q1 & 511u, sgn(q1 >> 9u));
    let sv = W[e + 8u];
    let sc = (select(sv.x, sv.y, ib >= 4u) >> (8u * (ib & 3u))) & 0xffu;
    return Sub(vec4<u32>(e0, e1), 2i * i32((sc >> (4u * h)) & 15u) + 1i);
}
fn res(x: f32) -> f32 {
    return 0.125 * x;
}
