// ---- pair_stage.wgsl: the pair formats' activations staged in workgroup memory -------------
//
// (`Tuning::stage`; the CUDA backend's `QK_CACT_SMEM` for these formats, mm_common.cuh
// `mmc_body`.) Every row of a workgroup reads the same activation words of a block step, one
// load per token and invocation from the storage buffer. Staged, the workgroup copies a chunk
// of CHA activation blocks of its NT tokens (their quant halves, d and q8_1's s) into workgroup
// memory once, between two barriers, and its steps read them there (`saq`, `sad`, `sas1`, the
// staged `aq`, `ad`, `as1`: shaders.rs `staged_steps` renames the calls in `step`). The words
// are the same, so the chains and the bits are the pair kernels' own. Written by shaders.rs
// with the consts CHA (activation blocks a chunk), ABPS (activation blocks a step), SQN, SDN,
// SSN (the arrays' lengths) and HAS_S (the activations are q8_1, whose s the body reads).
var<workgroup> SQ: array<vec4<u32>, SQN>;
var<workgroup> SD: array<f32, SDN>;
var<workgroup> SS: array<f32, SSN>;
// The chunk's first activation block.
var<private> SB: u32;

// Copies activation blocks a0 .. a0 + CHA (those that exist) of the NT tokens. Called by
// every invocation, in uniform control flow (the chunk loop runs on uniform bounds).
fn stage_acts(a0: u32, lid: u32) {
    workgroupBarrier();
    SB = a0;
    let na = min(CHA, P.nb * ABPB - a0);
    for (var i = lid; i < NT * 2u * CHA; i += WG) {
        let t = i / (2u * CHA);
        let r = i - t * 2u * CHA;
        if (r < 2u * na) {
            SQ[i] = X[(((P.tok0 + t) * P.act_words) >> 2u) + 2u * a0 + r];
        }
    }
    for (var i = lid; i < NT * CHA; i += WG) {
        let t = i / CHA;
        let a = i - t * CHA;
        if (a < na) {
            SD[i] = ad(t, a0 + a);
            if (HAS_S) {
                SS[i] = as1(t, a0 + a);
            }
        }
    }
    workgroupBarrier();
}
fn saq(t: u32, ab: u32, h: u32) -> vec4<u32> {
    return SQ[2u * (t * CHA + ab - SB) + h];
}
fn sad(t: u32, ab: u32) -> f32 {
    return SD[t * CHA + ab - SB];
}
fn sas1(t: u32, ab: u32) -> f32 {
    return SS[t * CHA + ab - SB];
}
