// ---- iq2_s x q8_K on thread pairs: ggml_vec_dot_iq2_s_q8_K (AVX2) --------------------------
// Block (82 bytes): d +0, qs[64] +2 (grid low bytes, then sign bytes), qh[8] +66, scales[8] +74.
// Grid index of group g (lanes 2g, 2g+1) of sub-block ib: qs[4ib+g] | ((qh[ib] << (8-2g)) &
// 0x300); signs qs[32+4ib+g]; invocation h: g = 2h, 2h+1. Lanes 0..3 scale
// 2*(scales[ib] & 15)+1, lanes 4..7 2*(scales[ib] >> 4)+1; result 0.125 * hsum. The bytes
// come from `s_bytes` (kpi_iq2_s_words.wgsl, or kpi_iq2_s_v4.wgsl from 16-byte elements).
const BB: u32 = 82u;
fn sub(B: u32, ib: u32, h: u32) -> Sub {
    let q = s_bytes(B, ib, h);
    let qs = q.x;
    let sg = q.y;
    let qh = q.z;
    let sc = q.w;
    let g = 2u * h;
    let e0 = signed_entry((qs & 0xffu) | ((qh << (8u - 2u * g)) & 0x300u), sgn(sg & 0xffu));
    let e1 = signed_entry((qs >> 8u) | ((qh << (6u - 2u * g)) & 0x300u), sgn(sg >> 8u));
    return Sub(vec4<u32>(e0, e1), 2i * i32((sc >> (4u * h)) & 15u) + 1i);
}
fn res(x: f32) -> f32 {
    return 0.125 * x;
}
