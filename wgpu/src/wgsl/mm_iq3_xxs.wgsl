// ---- iq3_xxs x q8_K: ggml_vec_dot_iq3_xxs_q8_K (AVX2) --------------------------------------
// Block (98 bytes): d +0, qs[96] +2: grid indices qs[0..64] (one u32 grid entry per 4
// elements), then 8 u32 scale-and-sign words. Lane L of sub-block ib: grid[qs[8ib+L]], signs
// ksigns[(aux >> 7(L/2)) & 127] bits 4(L&1)..; scale 2*(aux >> 28)+1; result 0.25 * hsum.
// Invocation l of a row decodes sub-block ib = l (its 8 lanes' weights, from contiguous
// bytes), computes the 8 lanes' partial integer sums of that sub-block, and the row's 8
// invocations transpose-reduce them (`tr8`, exact integer adds): invocation l then holds
// AVX2 lane l's sum over the 8 sub-blocks and runs lane l's float chain, as before.
struct St { acc: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = base + b * 98u;
    let dx = f16f(w16(B));
    let ib = l;
    let qa = w32(B + 2u + 8u * ib);
    let qb = w32(B + 6u + 8u * ib);
    let aux = w32(B + 66u + 4u * ib);
    let s = 2i * i32(aux >> 28u) + 1i;
    var wv: array<u32, 8>;
    var ls: array<i32, 8>;
    for (var L = 0u; L < 8u; L++) {
        let gi = (select(qb, qa, L < 4u) >> (8u * (L & 3u))) & 0xffu;
        let grid = tab(gi);
        let e = sgn((aux >> (7u * (L >> 1u))) & 127u);
        wv[L] = sign_bytes(grid, select(e.y, e.x, (L & 1u) == 0u));
        ls[L] = s;
    }
IQ8_TAIL(0.25 *)
