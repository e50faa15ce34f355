// ---- kpair_main2.wgsl: the thread-pair kernels on two rows per pair, generically -----------
// (`Tuning::pair_rows` 2 for a format without its own two-row body, or with
// `Tuning::pair_generic`.) Pair p of a workgroup of ROWS invocations runs rows p and p + ROWS / 2:
// the format's `step` for each row, block by block. The two steps load the same activation
// words and the loop stores nothing to memory between them, so a compiler may load them once
// for both rows (whether the driver's does is what the benchmark measures). Each row's chains,
// and so its bits, are the one-row kernel's.
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    load_tab(lid);
    let h = lid & 1u;
    let row0 = part_row(wg, lid, 1u);
    let row1 = row0 + ROWS / 2u;
    // Rows past the end compute on the last row (every invocation must reach the exchanges).
    let base0 = min(row0, P.rows - 1u) * P.row_bytes;
    let base1 = min(row1, P.rows - 1u) * P.row_bytes;
    var st0: St;
    var st1: St;
    UNROLL_LOOP
    // r_k[t] is valid in invocation t % 2 (the owner of token t's scalar chain), which stores it.
    let r0 = finish(&st0, h, lid);
    let r1 = finish(&st1, h, lid);
    for (var t = 0u; t < NT; t++) {
        if ((t & 1u) == h) {
            if (row0 < P.rend) {
                store_out(t, row0, r0[t]);
            }
            if (row1 < P.rend) {
                store_out(t, row1, r1[t]);
            }
        }
    }
}
