// ---- pair_main2.wgsl: the pair-layout kernels on R = 2 or 4 rows per pair ------------------
// (`Tuning::pair_rows`.) Pair p of a workgroup of 2 * ROWS / R invocations runs rows
// p + k * ROWS / R, k = 0..R-1: the format's `step` for each row, step by step (shaders.rs
// `multi_rows` writes the rows' setup, loop and stores). The R steps load the
// same activation words and the loop stores nothing to memory between them, so a compiler may
// load them once for all rows (whether the driver's does is what the benchmark measures). Each
// row's chains, and so its bits, are the one-row kernel's (pair_main.wgsl). Rows past the end
// compute on the last row (every invocation must reach the exchanges); tiled block order
// (layout.rs `tiled_index`) per row as in pair_main.wgsl.
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    load_tab(lid);
    let h = lid & 1u;
    let prow = part_row(wg, lid, 1u);
    BOFF = P.rows * P.nb * AW;
    ROW_SETUP
    let ns = nsteps();
    UNROLL_LOOP
    RESULTS
}
