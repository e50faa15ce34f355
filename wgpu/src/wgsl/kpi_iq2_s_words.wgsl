// ---- iq2_s's bytes of sub-block ib for invocation h (kpi_iq2_s.wgsl), from words ---------
// (qs[4ib+2h..+2], signs qs[32+4ib+2h..+2], qh[ib], scales[ib]).
fn s_bytes(B: u32, ib: u32, h: u32) -> vec4<u32> {
    return vec4<u32>(w16(B + 2u + 4u * ib + 2u * h), w16(B + 34u + 4u * ib + 2u * h), w8(B + 66u + ib), w8(B + 74u + ib));
}
