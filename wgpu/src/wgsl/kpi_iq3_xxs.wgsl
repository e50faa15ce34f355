// ---- iq3_xxs x q8_K on thread pairs: ggml_vec_dot_iq3_xxs_q8_K (AVX2) ----------------------
// Block (98 bytes): d +0, qs[96] +2: grid indices qs[0..64] (one u32 grid entry per lane), then
// 8 u32 scale-and-sign words. Lane L of sub-block ib: grid[qs[8ib+L]] (invocation h: the word
// at +2+8ib+4h), signs ksigns[(aux >> 7(L/2)) & 127] bits 4(L&1)..; scale 2*(aux >> 28)+1;
// result 0.25 * hsum.
const BB: u32 = 98u;
fn sub(B: u32, ib: u32, h: u32) -> Sub {
    let gw = w32(B + 2u + 8u * ib + 4u * h);
    let aux = w32(B + 66u + 4u * ib);
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
