// ---- iq2_xxs x q8_K on thread pairs: ggml_vec_dot_iq2_xxs_q8_K (AVX2) ----------------------
// Block (66 bytes): d +0, qs u16[32] +2. Sub-block ib: aux0 = u32 at +2+8ib (four grid
// indices), aux1 = u32 at +6+8ib (four 7-bit sign indices, scale in bits 28..32). Lanes 2g,
// 2g+1 = grid entry aux0 byte g, signs ksigns[(aux1 >> 7g) & 127]; invocation h: g = 2h, 2h+1.
// Scale 2*ls+1; result 0.125 * hsum. (Signs on the grid bytes: mm_iq2_xxs.wgsl.) The words
// (aux0, aux1) come from `xxs_words` (kpi_iq2_xxs_words.wgsl, or kpi_iq2_xxs_v4.wgsl from
// 16-byte elements).
const BB: u32 = 66u;
fn sub(B: u32, ib: u32, h: u32) -> Sub {
    let a = xxs_words(B, ib);
    let a0 = a.x;
    let a1 = a.y;
    let g = 2u * h;
    let e0 = signed_entry((a0 >> (8u * g)) & 0xffu, sgn((a1 >> (7u * g)) & 127u));
    let e1 = signed_entry((a0 >> (8u * g + 8u)) & 0xffu, sgn((a1 >> (7u * g + 7u)) & 127u));
    return Sub(vec4<u32>(e0, e1), 2i * i32(a1 >> 28u) + 1i);
}
fn res(x: f32) -> f32 {
    return 0.125 * x;
}
