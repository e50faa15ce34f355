// ---- kc_tile_coop.wgsl: kc_q4_k.wgsl's tile product on the device's cooperative matrices --
// (needs `enable f16; enable wgpu_cooperative_matrix;`, subgroups of exactly 32 invocations:
// each tile half is one subgroup's).

// Constant tiles: A of -1024 everywhere (KN, staged as KA is: kc_stage_*.wgsl) and a zero C
// (16 x 16 f32).
var<workgroup> KZ: array<f32, 256>;
fn kc_init_tiles(lid: u32) {
    kn_init(lid);
    for (var i = lid; i < 256u; i += WG) {
        KZ[i] = 0.0;
    }
}

// C_p of tile half `half` into KC: the four K chunks of 16, each as A_p chunk x B_p chunk plus,
// where A is biased (KC_BIAS), (-1024) x B_p chunk (the bias taken back out).
fn kc_tile(half: u32, p: u32, lid: u32) {
    let neg = coopLoadT<coop_mat16x16<f16, A>>(&KN[0], KW * 8u);
    var c = coopLoadT<coop_mat16x16<f32, C>>(&KZ[0], 16u);
    for (var kc = 0u; kc < 4u; kc++) {
        let a = coopLoadT<coop_mat16x16<f16, A>>(&KA[KW * (half * 512u + 8u * kc)], KW * 32u);
        let bm = coopLoadT<coop_mat16x16<f16, B>>(&KB[KW * 128u * kc], KW * 8u);
        c = coopMultiplyAdd(a, bm, c);
        if (KC_BIAS) {
            c = coopMultiplyAdd(neg, bm, c);
        }
    }
    coopStoreT(c, &KC[half * 1024u + p * 256u], 16u);
}
