// ---- pair_main2.wgsl: the pair-layout kernels on two rows per pair (`Tuning::pair_rows`) ---
// Pair p of a workgroup of ROWS invocations runs rows p and p + ROWS / 2: the format's `step`
// for each row, step by step. The two steps load the same activation words and the loop stores
// nothing to memory between them, so a compiler may load them once for both rows (whether the
// driver's does is what the benchmark measures). Each row's chains, and so its bits, are the
// one-row kernel's (pair_main.wgsl).
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    load_tab(lid);
    let h = lid & 1u;
    let row0 = part_row(wg, lid, 1u);
    let row1 = row0 + ROWS / 2u;
    // Rows past the end compute on the last row (every invocation must reach the exchanges).
    let ra = min(row0, P.rows - 1u);
    let rb = min(row1, P.rows - 1u);
    BOFF = P.rows * P.nb * AW;
    // Tiled block order (layout.rs `tiled_index`), per row as in pair_main.wgsl.
    let ga = ra - ra % 16u;
    let Ga = min(16u, P.rows - ga);
    let ka = ga * P.nb + (ra - ga);
    let gb = rb - rb % 16u;
    let Gb = min(16u, P.rows - gb);
    let kb = gb * P.nb + (rb - gb);
    var st0: St;
    var st1: St;
    UNROLL_LOOP
    let res0 = finish(&st0, ka, Ga, h, lid);
    let res1 = finish(&st1, kb, Gb, h, lid);
    if (h == 0u) {
        for (var t = 0u; t < NT; t++) {
            if (row0 < P.rend) {
                store_out(t, row0, res0[t]);
            }
            if (row1 < P.rend) {
                store_out(t, row1, res1[t]);
            }
        }
    }
}
