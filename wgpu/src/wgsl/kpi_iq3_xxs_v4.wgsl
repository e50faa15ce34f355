// ---- iq3_xxs x q8_K on thread pairs, tiled and split, 16-byte loads (kpi_iq3_xxs.wgsl) ----
// The same decode as kpi_iq3_xxs.wgsl from the weights as 16-byte elements (WV = vec4<u32>):
// a block's 96-byte body (layout.rs `pack_split`: 16-byte aligned, at B + 2) is 6 elements,
// 0..3 the grid indices (element j: sub-blocks 2j and 2j + 1, two words each), 4..5 the 8
// scale-and-sign words, so that the 8 sub-blocks take 6 loads instead of 16 word loads (the
// loop over ib is unrolled: the sub-blocks of an element share its load).
const BB: u32 = 98u;
fn sub(B: u32, ib: u32, h: u32) -> Sub {
    let e = (B + 2u) >> 4u;
    let v = W[e + (ib >> 1u)];
    let gw = v[2u * (ib & 1u) + h];
    let aux = W[e + 4u + (ib >> 2u)][ib & 3u];
    let s0 = sgn((aux >> (14u * h)) & 127u);
    let s1 = sgn((aux >> (14u * h + 7u)) & 127u);
    let q = vec4<u32>(
        sign_bytes(tab(gw & 0xffu), s0.x),
        sign_bytes(tab((gw >> 8u) & 0xffu), s0.y),
        sign_bytes(tab((gw >> 16u) & 0xffu), s1.x),
        sign_bytes(tab(gw >> 24u), s1.y),
    );
    return Sub(q, 2i * i32(aux >> 28u) + 1i);
}
fn res(x: f32) -> f32 {
    return 0.25 * x;
}
