// ---- iq2_xxs's words aux0, aux1 of sub-block ib (kpi_iq2_xxs.wgsl) from 16-byte elements ----
// The weights as 16-byte elements (WV = vec4<u32>; tiled and split): a block's 64-byte body
// (layout.rs `pack_split`: 16-byte aligned, at B + 2) is 4 elements, element j the words aux0,
// aux1 of sub-blocks 2j (.x, .y) and 2j + 1 (.z, .w), so that the 8 sub-blocks take 4 loads
// instead of 16 word loads (the loop over ib is unrolled: the two sub-blocks of an element
// share its load).
fn xxs_words(B: u32, ib: u32) -> vec2<u32> {
    let v = W[((B + 2u) >> 4u) + (ib >> 1u)];
    let odd = (ib & 1u) == 1u;
    return vec2<u32>(select(v.x, v.z, odd), select(v.y, v.w, odd));
}
