// ---- tiled_base.wgsl: the `base` of row r of the thread-pair formats in the tiled layout ----
// (iq4_xs, q6_K, and q4_K, q5_K and the IQ2/IQ3 formats with Tuning::ktile: layout.rs;
// shaders.rs `row_bases` puts it in kpair_main*.wgsl, matmul_main.wgsl and kc_main.wgsl for
// them, the others keep `r * P.row_bytes`): its first block's tiled number k0 (`tiled_index`;
// below 2^26, as a part is under 4 GiB and a block (the IQ formats: its body) at least 64
// bytes) times 32, plus G, the rows of its tile (1..16). Block b of the row is number k0 + b * G.
fn tiled_base(r: u32) -> u32 {
    let g0 = r - r % 16u;
    let g = min(16u, P.rows - g0);
    return ((g0 * P.nb + (r - g0)) << 5u) | g;
}
// The tiled number of block b of the row whose `base` is `base`.
fn tiled_block(base: u32, b: u32) -> u32 {
    return (base >> 5u) + b * (base & 31u);
}
