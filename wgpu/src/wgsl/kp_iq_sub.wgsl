// ---- kp_iq.wgsl: the IQ2/IQ3 formats on thread pairs (kpair_head.wgsl) ---------------------
// After the format's file (kpi_*.wgsl), which gives BB (block bytes), `sub(B, ib, h)` (the
// signed grid bytes of lanes 4h..4h+3 of sub-block ib of the block at byte B, and the lanes'
// sub-block scale) and `res(x)` (ggml's factor on the hsum: 0.125, 0.25 or none). Invocation h
// of a row owns lanes 4h..4h+3 (the CUDA backend's `MM_KERNELS_L4` mapping): it decodes its
// half of every sub-block once per block, sums ls * dot(lane bytes, q8 word 8ib + L) over the 8
// sub-blocks (exact), then runs the 4 lanes' chains `fmx(d, f32(lane), acc)`; the pair's
// `hsum_float_8` is `hsum_pair`. No per-token exchanges (the 8-invocation kernels transpose-
// reduce every token's lane sums).
struct Sub { q: vec4<u32>, ls: i32 }
// The signed grid bytes of one 8-byte grid entry `idx` (the IQ2 formats) with sign-table entry
// `e` (`sgn`): `.x` with the low nibble's signs, `.y` with the high nibble's.
fn signed_entry(idx: u32, e: vec2<u32>) -> vec2<u32> {
    let g = tab2(idx);
    return vec2<u32>(sign_bytes(g.x, e.x), sign_bytes(g.y, e.y));
}
