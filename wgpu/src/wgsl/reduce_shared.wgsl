// ---- reduce_shared.wgsl: lane exchange within a row's 8 invocations (workgroup memory) -----
// The fallback where subgroup operations are absent: a value moves through workgroup
// memory unchanged (a store and a load, no arithmetic).
var<workgroup> RF: array<f32, WG>;
var<workgroup> RI: array<i32, WG>;
fn xorf(x: f32, m: u32, lid: u32) -> f32 {
    workgroupBarrier();
    RF[lid] = x;
    workgroupBarrier();
    return RF[lid ^ m];
}
fn xori(x: i32, m: u32, lid: u32) -> i32 {
    workgroupBarrier();
    RI[lid] = x;
    workgroupBarrier();
    return RI[lid ^ m];
}
