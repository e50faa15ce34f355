// ---- kc_kquant.wgsl: q4_K's and q5_K's A tiles (kc_common.wgsl) ---------------------------
// After kc_q4_k.wgsl / kc_q5_k.wgsl, which give `kc_word(x, s)`: two elements (bytes 0, 1 of x
// spread into the halves of a word) times scale s as an f16 pair of A.
// The block's quants of lanes 4h..4h+3 (lo[j]: sub-block 2j, hi[j]: 2j + 1; a byte each) and
// its scales.
struct Wq { lo: array<vec4<u32>, 4>, hi: array<vec4<u32>, 4>, sc: vec4<u32> }
fn kc_fill_a(w: Wq, p: u32, a0: u32) {
    for (var j = 0u; j < 4u; j++) {
        let lo = w.lo[j][p];
        let hi = w.hi[j][p];
        let s0 = kc_scale(w.sc, 2u * j);
        let s1 = kc_scale(w.sc, 2u * j + 1u);
        ka_put(a0 + 4u * j, kc_word(kc_spread(lo, false), s0));
        ka_put(a0 + 4u * j + 1u, kc_word(kc_spread(lo, true), s0));
        ka_put(a0 + 4u * j + 2u, kc_word(kc_spread(hi, false), s1));
        ka_put(a0 + 4u * j + 3u, kc_word(kc_spread(hi, true), s1));
    }
}
