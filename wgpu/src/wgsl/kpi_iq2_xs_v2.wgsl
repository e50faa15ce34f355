// ---- iq2_xs's qs word and scale byte (kpi_iq2_xs.wgsl) from 8-byte elements ---------------
// The weights as 8-byte elements (WV = vec2<u32>; tiled and split): a block's 72-byte body
// (layout.rs `pack_split`: 8-byte aligned, at B + 2) is 9 elements, 0..7 the qs entries of
// sub-blocks 0..7 (invocation h: word h, read alone), 8 the scales[8] (.x, .y), read whole
// once for the 8 sub-blocks (the loop over ib is unrolled): 9 loads a block instead of 16
// word loads, no more bytes.
fn xs_words(B: u32, ib: u32, h: u32) -> vec2<u32> {
    let e = (B + 2u) >> 3u;
    let sv = W[e + 8u];
    return vec2<u32>(W[e + ib][h], (select(sv.x, sv.y, ib >= 4u) >> (8u * (ib & 3u))) & 0xffu);
}
