// ---- pair_main.wgsl -----------------------------------------------------------------------
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    // The format's lookup table into workgroup memory (a no-op for formats without one).
    load_tab(lid);
    let h = lid & 1u;
    let row = part_row(wg, lid, 1u);
    // Rows past the end compute on the last row (every invocation must reach the exchanges).
    let r = min(row, P.rows - 1u);
    BOFF = P.rows * P.nb * AW;
    // Tiled block order (layout.rs `tiled_index`): block b of row r is k0 + b * G. The loop runs
    // the format's NSTEPS steps (one block each; iq4_nl: a pair of blocks) in order.
    let g0 = r - r % 16u;
    let G = min(16u, P.rows - g0);
    let k0 = g0 * P.nb + (r - g0);
    var st: St;
    UNROLL_LOOP
    let res = finish(&st, k0, G, h, lid);
    if (h == 0u && row < P.rend) {
        for (var t = 0u; t < NT; t++) {
            store_out(t, row, res[t]);
        }
    }
}
