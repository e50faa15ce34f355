// ---- iq2_xs x q8_K on thread pairs: ggml_vec_dot_iq2_xs_q8_K (AVX2) ------------------------
// Block (74 bytes): d +0, qs u16[32] +2, scales[8] +66. Entry qs[4ib + g] gives the grid index
// (q & 511) and the sign index (q >> 9) of lanes 2g, 2g+1; invocation h's entries g = 2h, 2h+1
// are the word at +2+8ib+4h. Lanes 0..3 take scale 2*(scales[ib] & 15)+1, lanes 4..7
// 2*(scales[ib] >> 4)+1; result 0.125 * hsum. The word and scale byte come from `xs_words`
// (kpi_iq2_xs_words.wgsl, or kpi_iq2_xs_v2.wgsl from 8-byte elements).
const BB: u32 = 74u;
fn sub(B: u32, ib: u32, h: u32) -> Sub {
    let w = xs_words(B, ib, h);
    let qw = w.x;
    let sc = w.y;
    let q0 = qw & 0xffffu;
    let q1 = qw >> 16u;
    let e0 = signed_entry(q0 & 511u, sgn(q0 >> 9u));
    let e1 = signed_entry(q1 & 511u, sgn(q1 >> 9u));
    return Sub(vec4<u32>(e0, e1), 2i * i32((sc >> (4u * h)) & 15u) + 1i);
}
fn res(x: f32) -> f32 {
    return 0.125 * x;
}
