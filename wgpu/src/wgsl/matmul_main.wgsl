// ---- matmul_main.wgsl ---------------------------------------------------------------------
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    // The format's lookup table into workgroup memory (a no-op for formats without one).
    load_tab(lid);
    LID = lid;
    let l = lid & 7u;
    let row = part_row(wg, lid, 3u);
    // Rows past the end compute on the last row (every invocation must reach the exchanges).
    let base = min(row, P.rows - 1u) * P.row_bytes;
    var st: St;
    // The blocks in order, one per iteration or (unrolled) two; the same chain.
    UNROLL_LOOP
    let r = finish(&st, l, lid);
    if (l == 0u && row < P.rend) {
        for (var t = 0u; t < NT; t++) {
            store_out(t, row, r[t]);
        }
    }
}
