// ---- iq2_xxs's words aux0, aux1 of sub-block ib (kpi_iq2_xxs.wgsl), one load each ---------
fn xxs_words(B: u32, ib: u32) -> vec2<u32> {
    return vec2<u32>(w32(B + 2u + 8u * ib), w32(B + 6u + 8u * ib));
}
