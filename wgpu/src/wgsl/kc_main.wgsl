// ---- kc_main.wgsl: the cooperative-matrix kernels' entry (kc_common.wgsl) -----------------
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    load_tab(lid);
    kc_init(lid);
    let h = lid & 1u;
    let row = part_row(wg, lid, 1u);
    // Rows past the end compute on the last row (every invocation must reach the barriers
    // and the tile products).
    let base = min(row, P.rows - 1u) * P.row_bytes;
    var st: St;
    for (var b = 0u; b < P.nb; b++) {
        step(base, b, lid, &st);
    }
    // r[t] is valid in invocation t % 2 (the owner of token t's mins chain), which stores it.
    let r = finish(&st, h, lid);
    if (row < P.rend) {
        for (var t = 0u; t < NT; t++) {
            if ((t & 1u) == h) {
                store_out(t, row, r[t]);
            }
        }
    }
}
