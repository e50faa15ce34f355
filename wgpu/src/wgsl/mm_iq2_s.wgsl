// ---- iq2_s x q8_K: ggml_vec_dot_iq2_s_q8_K (AVX2) ------------------------------------------
// Block (82 bytes): d +0, qs[64] +2 (grid low bytes, then sign bytes), qh[8] +66, scales[8] +74.
// Grid index of group g (= L/2) of sub-block ib: qs[4ib+g] | ((qh[ib] << (8-2g)) & 0x300);
// signs qs[32+4ib+g]; lanes 0..3 scale 2*(scales[ib] & 15)+1, lanes 4..7 2*(scales[ib] >> 4)+1.
// Invocation l of a row decodes sub-block ib = l (its 8 lanes' weights, from contiguous
// bytes), computes the 8 lanes' partial integer sums of that sub-block, and the row's 8
// invocations transpose-reduce them (`tr8`, exact integer adds): invocation l then holds
// AVX2 lane l's sum over the 8 sub-blocks and runs lane l's float chain, as before.
struct St { acc: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = base + b * 82u;
    let dx = f16f(w16(B));
    let ib = l;
    let qs = w32(B + 2u + 4u * ib);
    let sg = w32(B + 34u + 4u * ib);
    let qh = w8(B + 66u + ib);
    let sc = w8(B + 74u + ib);
    let slo = 2i * i32(sc & 15u) + 1i;
    let shi = 2i * i32(sc >> 4u) + 1i;
    var wv: array<u32, 8>;
    var ls: array<i32, 8>;
    for (var L = 0u; L < 8u; L++) {
        let g = L >> 1u;
        let idx = ((qs >> (8u * g)) & 0xffu) | ((qh << (8u - 2u * g)) & 0x300u);
        let grid = tabh(idx, L & 1u);
        let e = sgn((sg >> (8u * g)) & 0xffu);
        wv[L] = sign_bytes(grid, select(e.y, e.x, (L & 1u) == 0u));
        ls[L] = select(shi, slo, L < 4u);
    }
IQ8_TAIL(0.125 *)
