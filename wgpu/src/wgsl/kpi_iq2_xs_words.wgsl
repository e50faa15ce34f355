// ---- iq2_xs's qs word of sub-block ib for invocation h and scales[ib] (kpi_iq2_xs.wgsl) ----
fn xs_words(B: u32, ib: u32, h: u32) -> vec2<u32> {
    return vec2<u32>(w32(B + 2u + 8u * ib + 4u * h), w8(B + 66u + ib));
}
