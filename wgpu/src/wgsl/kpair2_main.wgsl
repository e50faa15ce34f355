// ---- kpair2_main.wgsl: two rows per thread pair (kpair2_head.wgsl) -------------------------
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    load_tab(lid);
    let h = lid & 1u;
    let row0 = part_row(wg, lid, 1u);
    let row1 = row0 + ROWS / 2u;
    // Rows past the end compute on the last row (every invocation must reach the exchanges).
    let base0 = min(row0, P.rows - 1u) * P.row_bytes;
    let base1 = min(row1, P.rows - 1u) * P.row_bytes;
    var st: St2;
    UNROLL_LOOP
    // r[k][t] is valid in invocation t % 2 (the owner of token t's scalar chain), which stores it.
    let r = finish2(&st, lid);
    for (var t = 0u; t < NT; t++) {
        if ((t & 1u) == h) {
            if (row0 < P.rend) {
                store_out(t, row0, r[0][t]);
            }
            if (row1 < P.rend) {
                store_out(t, row1, r[1][t]);
            }
        }
    }
}
