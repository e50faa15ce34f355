// ---- iq3_s x q8_K on thread pairs: ggml_vec_dot_iq3_s_q8_K (AVX2) --------------------------
// Block (110 bytes): d +0, qs[64] +2, qh[8] +66, signs[32] +74, scales[4] +106.
// Lane L of sub-block ib: grid[((qh[ib] << (8-L)) & 256) | qs[8ib+L]] (invocation h: the qs word
// at +2+8ib+4h, L = 4h+i), signs[4ib + L/2] bits 4(L&1)..; scale 2*ls+1 with ls the nibble
// (ib & 1) of scales[ib/2]; hsum unscaled.
const BB: u32 = 110u;
fn sub(B: u32, ib: u32, h: u32) -> Sub {
    let qw = w32(B + 2u + 8u * ib + 4u * h);
    let qh = w8(B + 66u + ib) >> (4u * h);
    let sg = w16(B + 74u + 4u * ib + 2u * h);
    var q: vec4<u32>;
    for (var i = 0u; i < 4u; i++) {
        let idx = ((qh << (8u - i)) & 256u) | ((qw >> (8u * i)) & 0xffu);
        let e = sgn((sg >> (8u * (i >> 1u))) & 0xffu);
        q[i] = sign_bytes(tab(idx), select(e.y, e.x, (i & 1u) == 0u));
    }
    let sc = w8(B + 106u + (ib >> 1u));
    return Sub(q, 2i * i32((sc >> (4u * (ib & 1u))) & 15u) + 1i);
}
fn res(x: f32) -> f32 {
    return x;
}
