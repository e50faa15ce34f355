// ---- act_q8k_stage.wgsl: q8_K activations staged in workgroup memory (thread pairs) --------
//
// (`Tuning::stage` for the thread-pair kernels of the K-quants, iq4_xs and the IQ2/IQ3
// formats; pair_stage.wgsl is the pair formats' form.) The workgroup copies a chunk of KCB
// blocks of its NT tokens (quants, the K-quants' bsums, d) from the buffer, through the
// buffer layout's accessors renamed `g_aq4`, `g_ab4`, `g_ad` (shaders.rs `staged_act_q8k`),
// between two barriers; the kernels' `aq`, `aq4`, `ab4`, `ad` below read the copy. The words
// are the same, so are the bits. Consts from shaders.rs: KCB, SQN, SBN, SDN, HAS_BS.
var<workgroup> SQ: array<vec4<u32>, SQN>;
var<workgroup> SBS: array<vec4<u32>, SBN>;
var<workgroup> SDK: array<f32, SDN>;
// The chunk's first block.
var<private> SB: u32;

// Copies blocks b0 .. b0 + KCB (those that exist) of the NT tokens. Called by every
// invocation, in uniform control flow (the chunk loop runs on uniform bounds).
fn stage_acts(b0: u32, lid: u32) {
    workgroupBarrier();
    SB = b0;
    let na = min(KCB, P.nb - b0);
    for (var i = lid; i < NT * KCB * 16u; i += WG) {
        let t = i / (KCB * 16u);
        let r = i - t * KCB * 16u;
        if ((r >> 4u) < na) {
            SQ[i] = g_aq4(t, b0 + (r >> 4u), 4u * (r & 15u));
        }
    }
    if (HAS_BS) {
        for (var i = lid; i < NT * KCB * 2u; i += WG) {
            let t = i / (KCB * 2u);
            let r = i - t * KCB * 2u;
            if ((r >> 1u) < na) {
                SBS[i] = g_ab4(t, b0 + (r >> 1u), 4u * (r & 1u));
            }
        }
    }
    for (var i = lid; i < NT * KCB; i += WG) {
        let t = i / KCB;
        let a = i - t * KCB;
        if (a < na) {
            SDK[i] = g_ad(t, b0 + a);
        }
    }
    workgroupBarrier();
}
fn aq(t: u32, ab: u32, k: u32) -> u32 {
    return SQ[16u * (t * KCB + ab - SB) + (k >> 2u)][k & 3u];
}
fn aq4(t: u32, ab: u32, k: u32) -> vec4<u32> {
    return SQ[16u * (t * KCB + ab - SB) + (k >> 2u)];
}
fn ab4(t: u32, ab: u32, k: u32) -> vec4<u32> {
    return SBS[2u * (t * KCB + ab - SB) + (k >> 2u)];
}
fn ad(t: u32, ab: u32) -> f32 {
    return SDK[t * KCB + ab - SB];
}
