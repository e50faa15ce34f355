// ---- iq3_s x q8_K: ggml_vec_dot_iq3_s_q8_K (AVX2) ------------------------------------------
// Block (110 bytes): d +0, qs[64] +2, qh[8] +66, signs[32] +74, scales[4] +106.
// Lane L of sub-block ib: grid[((qh[ib] << (8-L)) & 256) | qs[8ib+L]], signs[4ib + L/2] bits
// 4(L&1)..; scale 2*ls+1 with ls the nibble (ib & 1) of scales[ib/2]; hsum unscaled.
// Invocation l of a row decodes sub-block ib = l (its 8 lanes' weights, from contiguous
// bytes), computes the 8 lanes' partial integer sums of that sub-block, and the row's 8
// invocations transpose-reduce them (`tr8`, exact integer adds): invocation l then holds
// AVX2 lane l's sum over the 8 sub-blocks and runs lane l's float chain, as before.
struct St { acc: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = base + b * 110u;
    let dx = f16f(w16(B));
    let ib = l;
    let qa = w32(B + 2u + 8u * ib);
    let qb = w32(B + 6u + 8u * ib);
    let qh = w8(B + 66u + ib);
    let sg = w32(B + 74u + 4u * ib);
    let sc = w8(B + 106u + (ib >> 1u));
    let s = 2i * i32(select(sc >> 4u, sc & 15u, (ib & 1u) == 0u)) + 1i;
    var wv: array<u32, 8>;
    var ls: array<i32, 8>;
    for (var L = 0u; L < 8u; L++) {
        let idx = ((qh << (8u - L)) & 256u) | ((select(qb, qa, L < 4u) >> (8u * (L & 3u))) & 0xffu);
        let grid = tab(idx);
        let e = sgn((sg >> (8u * (L >> 1u))) & 0xffu);
        wv[L] = sign_bytes(grid, select(e.y, e.x, (L & 1u) == 0u));
        ls[L] = s;
    }
IQ8_TAIL()
