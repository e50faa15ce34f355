// ---- kpair_main2.wgsl: the thread-pair kernels on two rows per pair ------------------------
// (`Tuning::pair_rows` 2.) Pair p of a workgroup of ROWS invocations runs rows p and
// p + ROWS / 2. Its state, block loop and results come from shaders.rs `kpair_source`: q4_K and
// q5_K with their own two-row bodies (kpair2_head.wgsl: `St2`, `step2`, `finish2`, each
// activation word loaded once), every other format generically, its `step` for each row, block
// by block: the two steps load the same activation words and the loop stores nothing to memory
// between them, so a compiler may load them once for both rows. Each row's chains, and so its
// bits, are the one-row kernel's.
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    load_tab(lid);
    let h = lid & 1u;
    let row0 = part_row(wg, lid, 1u);
    let row1 = row0 + ROWS / 2u;
    // Rows past the end compute on the last row (every invocation must reach the exchanges).
    let base0 = min(row0, P.rows - 1u) * P.row_bytes;
    let base1 = min(row1, P.rows - 1u) * P.row_bytes;
    STATE
    UNROLL_LOOP
    // r[k][t] (row k) is valid in invocation t % 2 (the owner of token t's scalar chain), which
    // stores it.
    let r: array<array<f32, NT>, 2> = FINISH;
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
