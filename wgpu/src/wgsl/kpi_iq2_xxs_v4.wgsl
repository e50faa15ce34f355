// ---- iq2_xxs x q8_K on thread pairs, tiled and split, 16-byte loads (kpi_iq2_xxs.wgsl) ----
// The same decode as kpi_iq2_xxs.wgsl from the weights as 16-byte elements (WV = vec4<u32>):
// a block's 64-byte body (layout.rs `pack_split`: 16-byte aligned, at B + 2) is 4 elements,
// element j the words aux0, aux1 of sub-blocks 2j (.x, .y) and 2j + 1 (.z, .w), so that the 8
// sub-blocks take 4 loads instead of 16 word loads (the loop over ib is unrolled: the two
// sub-blocks of an element share its load).
const BB: u32 = 66u;
fn sub(B: u32, ib: u32, h: u32) -> Sub {
    let v = W[((B + 2u) >> 4u) + (ib >> 1u)];
    let odd = (ib & 1u) == 1u;
    let a0 = select(v.x, v.z, odd);
    let a1 = select(v.y, v.w, odd);
    let g = 2u * h;
    let e0 = signed_entry((a0 >> (8u * g)) & 0xffu, sgn((a1 >> (7u * g)) & 127u));
    let e1 = signed_entry((a0 >> (8u * g + 8u)) & 0xffu, sgn((a1 >> (7u * g + 7u)) & 127u));
    return Sub(vec4<u32>(e0, e1), 2i * i32(a1 >> 28u) + 1i);
}
fn res(x: f32) -> f32 {
    return 0.125 * x;
}
