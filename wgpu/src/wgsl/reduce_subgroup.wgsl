// ---- reduce_subgroup.wgsl: lane exchange within a row's 8 invocations (subgroup shuffles) --
// Used only where the adapter's subgroups hold whole, linearly numbered groups of 8
// invocations (checked once per device, see `probe_subgroups`).
fn xorf(x: f32, m: u32, lid: u32) -> f32 {
    return subgroupShuffleXor(x, m);
}
fn xori(x: i32, m: u32, lid: u32) -> i32 {
    return subgroupShuffleXor(x, m);
}
