// ---- params.wgsl: the matmul kernels' per-dispatch parameters (a uniform ring slot) ------
struct Params {
    rows: u32,       // rows of this weight part
    nb: u32,         // weight blocks per row
    row_bytes: u32,  // bytes per weight row (unused by the tiled layouts: layout.rs)
    act_words: u32,  // u32 words per activation row (device layout; q8_0/q8_1: a multiple of 4)
    tok0: u32,       // first token of this dispatch
    out_stride: u32, // rows of the whole matrix (the output's row stride)
    row0: u32,       // first row of this part in the whole matrix
    zero: u32,       // always 0; the compiler cannot know it
    groups_x: u32,   // workgroups along x (2D dispatch linearisation)
    rbase: u32,      // first row of this dispatch in the part (a call's row chunk)
    rend: u32,       // end of this dispatch's rows in the part: rows from it on are not stored
}

// A runtime 0 that the compiler cannot fold.
fn zero_u() -> u32 {
    return P.zero;
}

// The row (in the weight part) of invocation `lid` of workgroup `wg`, with `1 << shift`
// invocations per row.
fn part_row(wg: vec3<u32>, lid: u32, shift: u32) -> u32 {
    return P.rbase + (wg.y * P.groups_x + wg.x) * ROWS + (lid >> shift);
}

// Token t's result of `row` (in the part) into the bound output buffer, at the dispatch's
// token offset, row stride and first row.
fn store_out(t: u32, row: u32, v: f32) {
    O[(P.tok0 + t) * P.out_stride + P.row0 + row] = v;
}
