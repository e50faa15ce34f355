// ---- iq2_xs x q8_K: ggml_vec_dot_iq2_xs_q8_K (AVX2) ----------------------------------------
// Block (74 bytes): d +0, qs u16[32] +2, scales[8] +66. Entry qs[4ib + g] (g = L/2) gives the
// grid index (q & 511) and the sign index (q >> 9) of elements 8g..8g+8 of sub-block ib; lanes
// 0..3 take scale 2*(scales[ib] & 15)+1, lanes 4..7 2*(scales[ib] >> 4)+1; 0.125 * hsum.
// Invocation l of a row decodes sub-block ib = l (its 8 lanes' weights, from contiguous
// bytes), computes the 8 lanes' partial integer sums of that sub-block, and the row's 8
// invocations transpose-reduce them (`tr8`, exact integer adds): invocation l then holds
// AVX2 lane l's sum over the 8 sub-blocks and runs lane l's float chain, as before.
struct St { acc: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = base + b * 74u;
    let dx = f16f(w16(B));
    let ib = l;
    let qa = w32(B + 2u + 8u * ib);
    let qb = w32(B + 6u + 8u * ib);
    let sc = w8(B + 66u + ib);
    let slo = 2i * i32(sc & 15u) + 1i;
    let shi = 2i * i32(sc >> 4u) + 1i;
    var wv: array<u32, 8>;
    var ls: array<i32, 8>;
    for (var L = 0u; L < 8u; L++) {
        let g = L >> 1u;
        let q = (select(qb, qa, g < 2u) >> (16u * (g & 1u))) & 0xffffu;
        let grid = tabh(q & 511u, L & 1u);
        let e = sgn(q >> 9u);
        wv[L] = sign_bytes(grid, select(e.y, e.x, (L & 1u) == 0u));
        ls[L] = select(shi, slo, L < 4u);
    }
IQ8_TAIL(0.125 *)
