// ---- kc_common.wgsl: matmul with the integer lane sums on cooperative matrices ------------
// For q4_K, q5_K (ggml_vec_dot_q{4,5}_K_q8_K, AVX2) and the IQ2/IQ3 formats as their thread-pair
// kernels run them (kp_q4_k.wgsl, kp_q5_k.wgsl, kp_iq.wgsl): the same invocations (2 per row, h
// owning AVX2 lanes 4h..4h+3), the same float chains in the same order. Only the exact integer
// lane sums come another way: from 16 x 16 x 16 matrix products (f16 A and B, f32 C), the
// route the CUDA backend takes with mma.sync (cuda/kernels/kquants.cuh `kq_mma`).
//
// Lane L of a block: sum over sub-blocks s (0..7) and bytes b (0..3) of sc[s] * q * a, q the
// weight of byte b of lane L in sub-block s (q4_K: a nibble of qs word 8(s/2) + L, low for even
// s, high for odd; q5_K adds its fifth bit; the IQ formats: a signed grid byte), a byte b of
// q8 word 8s + L. As a matrix product over K = 32 elements k = 4s + b: A[row][k] = sc[s] * q
// (at most 31 * 63 = 1953 in magnitude: an integer f16 holds exactly), B[k][token] = a
// (-128..127). Two lanes share a product (lane pair p = lanes p and p + 4): A_p is 16 rows x 64
// (lane p's 32 elements, then lane p + 4's), B_p is 64 x 16, block-diagonal (columns 0..7: lane
// p's activations of tokens 0..7 in rows 0..31; columns 8..15: lane p + 4's in rows 32..63;
// zero elsewhere), so C_p[row][t] is lane p's sum of token t and C_p[row][8 + t] lane p + 4's.
// q4_K's A holds 1024 + sc[s] * q (`KC_BIAS`: f16 bits 0x6400 + v, two elements per word from
// one integer multiply-add), and one more product per K chunk with an A of -1024 everywhere
// takes the bias back out; the others' A is converted. Every operand and every partial sum is
// an integer below 2^24 in magnitude (at most 32 * 1969 * 128), so every f32 sum is exact
// whatever order the hardware adds in: C is exactly ggml's int32 lane sum. (q6_K and iq4_xs,
// whose |sc * q| reaches 4096, would need two tiles of scale digits, as the CUDA kernels split
// them; their staging would cost about what their lane kernels spend at NT 8, so they have none.)
//
// A workgroup is 64 invocations, 32 rows: rows 0..15 (invocations 0..31) and rows 16..31
// (32..63) are the two tile halves, one subgroup each where the tiles are the device's
// cooperative matrices (the backend uses those only on adapters whose subgroups are exactly
// 32 invocations, numbered linearly). `kc_tile` is either the cooperative-matrix product or
// its emulation by plain invocations (the same sums; for adapters without cooperative
// matrices: the tests). A format file (kc_q4_k.wgsl, kc_q5_k.wgsl, kc_iq.wgsl) gives `KC_BIAS`,
// the block's words `Wq` and `kc_fill_a` (this invocation's 16 words of A_p; the K-quants'
// from kc_kquant.wgsl with their `kc_word`), `step` and `finish`.

// The tiles A_p (of the two halves: 16 rows x 32 words, 64 f16, each) and B_p (64 rows x 8
// words, 16 f16 columns) are staged by words, two f16 each, through `ka_put` / `kb_put`
// (kc_stage_u32.wgsl: u32 arrays; kc_stage_f16.wgsl: f16 arrays, for a driver that would not
// read f16 tiles out of u32 words).
// C_0..C_3 of each half: 16 x 16 f32 each, row-major.
var<workgroup> KC: array<f32, 2048>;

// The off-diagonal quarters of B_p stay zero: written once.
fn kc_init(lid: u32) {
    for (var i = lid; i < 512u; i += WG) {
        kb_put(i, 0u);
    }
    kc_init_tiles(lid);
    workgroupBarrier();
}

// Scale byte s (0..7) of (scales 0..3, scales 4..7).
fn kc_scale(sc: vec4<u32>, s: u32) -> u32 {
    return (select(sc.y, sc.x, s < 4u) >> (8u * (s & 3u))) & 0xffu;
}

// Bytes 0, 1 (or 2, 3 with `hi_bytes`) of x in the two 16-bit halves of a word.
fn kc_spread(x: u32, hi_bytes: bool) -> u32 {
    let y = select(x, x >> 16u, hi_bytes);
    return (y & 0xffu) | ((y << 8u) & 0xff0000u);
}

// Every token's 4 lane sums of this invocation (lanes 4h..4h+3 of its row) for block b: the 4
// lane pairs' tiles, A from `kc_fill_a(w, p, ..)`, B from the q8_K activations.
fn kc_lanes(w: Wq, b: u32, lid: u32) -> array<vec4<f32>, NT> {
    let h = lid & 1u;
    let half = lid >> 5u;
    let r = (lid >> 1u) & 15u;
    // B: this invocation's 4 words, the bytes of one q8 word of two tokens (rows k..k+3 of
    // the lane's half, columns 2tp, 2tp + 1 of it).
    let bh = lid >> 5u;
    let bs = (lid >> 2u) & 7u;
    let tp = lid & 3u;
    let bk = 16u * (bs >> 1u) + 8u * (bs & 1u);
    let bw = (32u * bh + 4u * bs) * 8u + 4u * bh + tp;
    let t0 = min(2u * tp, NT - 1u);
    let t1 = min(2u * tp + 1u, NT - 1u);
    for (var p = 0u; p < 4u; p++) {
        // The previous pair's tiles are read.
        workgroupBarrier();
        // A: lane p + 4h of row r, words 16h + 4j .. (sub-blocks 2j, 2j + 1).
        kc_fill_a(w, p, half * 512u + r * 32u + 16u * h);
        let v0 = vec4<f32>(unpack4xI8(aq(t0, b, bk + p + 4u * bh)));
        let v1 = vec4<f32>(unpack4xI8(aq(t1, b, bk + p + 4u * bh)));
        kb_put(bw, pack2x16float(vec2<f32>(v0.x, v1.x)));
        kb_put(bw + 8u, pack2x16float(vec2<f32>(v0.y, v1.y)));
        kb_put(bw + 16u, pack2x16float(vec2<f32>(v0.z, v1.z)));
        kb_put(bw + 24u, pack2x16float(vec2<f32>(v0.w, v1.w)));
        workgroupBarrier();
        kc_tile(half, p, lid);
    }
    workgroupBarrier();
    var lanes: array<vec4<f32>, NT>;
    for (var t = 0u; t < NT; t++) {
        let c = half * 1024u + r * 16u + 8u * h + t;
        lanes[t] = vec4<f32>(KC[c], KC[c + 256u], KC[c + 512u], KC[c + 768u]);
    }
    return lanes;
}
