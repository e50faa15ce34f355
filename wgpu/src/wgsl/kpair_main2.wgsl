// ---- kpair_main2.wgsl: the thread-pair kernels on R = 2 or 4 rows per pair ------------------
// (`Tuning::pair_rows`.) Pair p of a workgroup of 2 * ROWS / R invocations runs rows
// p + k * ROWS / R, k = 0..R-1. Its state, block loop and results come from shaders.rs
// `kpair_source`: q4_K and q5_K at R = 2 with their own two-row bodies (kpair2_head.wgsl:
// `St2`, `step2`, `finish2`, each activation word loaded once), every other case generically,
// the format's `step` for each row, block by block: the steps load the same activation words
// and the loop stores nothing to memory between them, so a compiler may load them once for all
// rows. Each row's chains, and so its bits, are the one-row kernel's. Rows past the end compute
// on the last row (every invocation must reach the exchanges); row k's result r_k[t] is valid
// in invocation t % 2 (the owner of token t's scalar chain), which stores it.
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    load_tab(lid);
    let h = lid & 1u;
    let prow = part_row(wg, lid, 1u);
    ROW_SETUP
    UNROLL_LOOP
    RESULTS
}
