// ---- iq2_xxs x q8_K: ggml_vec_dot_iq2_xxs_q8_K (AVX2) --------------------------------------
// Block (66 bytes): d +0, qs u16[32] +2. Sub-block ib: aux0 = u32 at +2+8ib (four grid
// indices), aux1 = u32 at +6+8ib (four 7-bit sign indices, scale in bits 28..32).
// Lane L: elements 4L..4L+3 of each sub-block = half (L & 1) of grid entry aux0 byte L/2,
// signs from ksigns[(aux1 >> 7(L/2)) & 127]; sub-block scale 2*ls+1; result 0.125 * hsum.
// The sign is applied to the grid byte rather than to the activation (ggml: sign_epi8(q8, s)):
// the same product for every activation byte but -128, which the API rejects.
// Invocation l of a row decodes sub-block ib = l (its 8 lanes' weights, from contiguous
// bytes), computes the 8 lanes' partial integer sums of that sub-block, and the row's 8
// invocations transpose-reduce them (`tr8`, exact integer adds): invocation l then holds
// AVX2 lane l's sum over the 8 sub-blocks and runs lane l's float chain, as before.
struct St { acc: array<f32, NT> }
fn step(base: u32, b: u32, l: u32, st: ptr<function, St>) {
    let B = base + b * 66u;
    let dx = f16f(w16(B));
    let ib = l;
    let a0 = w32(B + 2u + 8u * ib);
    let a1 = w32(B + 6u + 8u * ib);
    let s = 2i * i32(a1 >> 28u) + 1i;
    var wv: array<u32, 8>;
    var ls: array<i32, 8>;
    for (var L = 0u; L < 8u; L++) {
        let g = L >> 1u;
        let grid = tabh((a0 >> (8u * g)) & 0xffu, L & 1u);
        let e = sgn((a1 >> (7u * g)) & 127u);
        wv[L] = sign_bytes(grid, select(e.y, e.x, (L & 1u) == 0u));
        ls[L] = s;
    }
IQ8_TAIL(0.125 *)
