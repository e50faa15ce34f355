// ---- matmul_head.wgsl: bindings and the row/lane skeleton of the 8-invocation kernels ----
//
// The IQ2/IQ3 formats (the K-quants and iq4_xs run on thread pairs, kpair_head.wgsl; the
// 32-element formats on pair_head.wgsl). One workgroup of 8 * ROWS invocations computes ROWS weight rows; invocation `lid` works on
// row `lid / 8` and AVX2 lane `l = lid % 8`. Lane l keeps, for each of the NT tokens, its own f32
// accumulator and runs ggml's per-lane chain `acc = fmx(d, f32(lane_int), acc)` (a true
// fused multiply-add, fma.wgsl) over the row's blocks in order; integer lane sums are exact (packed 4x8 dot products), so only the float
// chain's order matters, and it is the reference's. The 8 lanes are then reduced in
// `hsum_float_8`'s order ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)) by three xor exchanges.

@group(0) @binding(0) var<storage, read> W: array<u32>;
@group(0) @binding(1) var<storage, read> T: array<u32>;
@group(2) @binding(0) var<storage, read_write> O: array<f32>;
@group(2) @binding(1) var<uniform> P: Params;

// hsum_float_8 over the row's 8 lanes; the full sum is valid in every lane.
fn hsum8(x: f32, lid: u32) -> f32 {
    let a = x + xorf(x, 4u, lid); // lane 0: l0 + l4 (IEEE addition commutes exactly)
    let b = a + xorf(a, 2u, lid); // lane 0: (l0+l4) + (l2+l6)
    return b + xorf(b, 1u, lid);  // lane 0: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))
}

// The invocation's local index (set first thing in `main`).
var<private> LID: u32;

// Transpose-reduce over a row's 8 invocations: invocation j holds v_j[0..8] (its partial
// integer sums for lanes 0..7); invocation l gets sum_j v_j[l & 7] (wrapping, order-free).
// Three xor exchanges of halving width (4 + 2 + 1 values).
fn tr8(v: array<i32, 8>) -> i32 {
    let lid = LID;
    let c4 = (lid & 4u) != 0u;
    let a0 = select(v[0], v[4], c4) + xori(select(v[4], v[0], c4), 4u, lid);
    let a1 = select(v[1], v[5], c4) + xori(select(v[5], v[1], c4), 4u, lid);
    let a2 = select(v[2], v[6], c4) + xori(select(v[6], v[2], c4), 4u, lid);
    let a3 = select(v[3], v[7], c4) + xori(select(v[7], v[3], c4), 4u, lid);
    let c2 = (lid & 2u) != 0u;
    let b0 = select(a0, a2, c2) + xori(select(a2, a0, c2), 2u, lid);
    let b1 = select(a1, a3, c2) + xori(select(a3, a1, c2), 2u, lid);
    let c1 = (lid & 1u) != 0u;
    return select(b0, b1, c1) + xori(select(b1, b0, c1), 1u, lid);
}
