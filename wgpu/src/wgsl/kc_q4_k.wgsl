// ---- kc_q4_k.wgsl: q4_K x q8_K with the integer lane sums on cooperative matrices --------
// ggml_vec_dot_q4_K_q8_K (AVX2) as kp_q4_k.wgsl runs it: the same invocations (2 per row, h
// owning AVX2 lanes 4h..4h+3), the same float chains in the same order. Only the exact
// integer lane sums come another way: from 16 x 16 x 16 matrix products (f16 A and B, f32
// C), the route the CUDA backend takes with mma.sync (cuda/kernels/kquants.cuh `kq_mma`).
//
// Lane L of a block: sum over sub-blocks s (0..7) and bytes b (0..3) of sc[s] * q * a, q the
// nibble of qs word 8(s/2) + L, byte b (low nibble for even s, high for odd), a byte b of q8
// word 16(s/2) + 8(s%2) + L. As a matrix product over K = 32 elements k = 4s + b: A[row][k]
// = sc[s] * q (0..945, an integer f16 holds exactly), B[k][token] = a (-128..127). Two lanes
// share a product (lane pair p = lanes p and p + 4): A_p is 16 rows x 64 (lane p's 32
// elements, then lane p + 4's), B_p is 64 x 16, block-diagonal (columns 0..7: lane p's
// activations of tokens 0..7 in rows 0..31; columns 8..15: lane p + 4's in rows 32..63; zero
// elsewhere), so C_p[row][t] is lane p's sum of token t and C_p[row][8 + t] lane p + 4's.
// A holds 1024 + sc[s] * q (f16 bits 0x6400 + v: two elements per word from one integer
// multiply-add); one more product per K chunk with an A of -1024 everywhere takes the bias
// back out. Every operand and every partial sum is an integer below 2^24 in magnitude (at
// most 32 * 1969 * 128 before the correction of a chunk pair), so every f32 sum is exact
// whatever order the hardware adds in: C is exactly ggml's int32 lane sum.
//
// A workgroup is 64 invocations, 32 rows: rows 0..15 (invocations 0..31) and rows 16..31
// (32..63) are the two tile halves, one subgroup each where the tiles are the device's
// cooperative matrices (the backend uses those only on adapters whose subgroups are exactly
// 32 invocations). `kc_tile` is either the cooperative-matrix product or its emulation by
// plain invocations (the same sums; for adapters without cooperative matrices: the tests).

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

// Two elements (the low nibbles of bytes 0, 1 or 2, 3 of x) as (1024 + sc * q) f16 pairs.
fn kc_pair(x: u32, hi_bytes: bool, s: u32) -> u32 {
    let y = select(x, x >> 16u, hi_bytes);
    return ((y & 0xffu) | ((y << 8u) & 0xff0000u)) * s + 0x64006400u;
}

struct St { acc: array<vec4<f32>, NT>, accm: array<vec4<f32>, NTH> }
fn step(base: u32, b: u32, lid: u32, st: ptr<function, St>) {
    let h = lid & 1u;
    let half = lid >> 5u;
    let r = (lid >> 1u) & 15u;
    let i0 = (base + b * 144u) >> 4u;
    let hd = W[i0];
    let dx = f16f(hd.x & 0xffffu);
    let dmx = f16f(hd.x >> 16u);
    let sc = kq_scales(hd);
    var q: array<vec4<u32>, 4>;
    for (var j = 0u; j < 4u; j++) {
        q[j] = W[i0 + 1u + 2u * j + h];
    }
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
        let a0 = half * 512u + r * 32u + 16u * h;
        for (var j = 0u; j < 4u; j++) {
            let x = q[j][p];
            let lo = x & 0x0f0f0f0fu;
            let hi = (x >> 4u) & 0x0f0f0f0fu;
            let s0 = kc_scale(sc, 2u * j);
            let s1 = kc_scale(sc, 2u * j + 1u);
            ka_put(a0 + 4u * j, kc_pair(lo, false, s0));
            ka_put(a0 + 4u * j + 1u, kc_pair(lo, true, s0));
            ka_put(a0 + 4u * j + 2u, kc_pair(hi, false, s1));
            ka_put(a0 + 4u * j + 3u, kc_pair(hi, true, s1));
        }
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
    for (var t = 0u; t < NT; t++) {
        let c = half * 1024u + r * 16u + 8u * h + t;
        let lanes = vec4<f32>(KC[c], KC[c + 256u], KC[c + 512u], KC[c + 768u]);
        let d = ad(t, b) * dx;
        (*st).acc[t] = chain4(d, lanes, (*st).acc[t]);
    }
    for (var i = 0u; i < NTH; i++) {
        let t = slot_token(i, h);
        let dmin = -ad(t, b) * dmx;
        (*st).accm[i] = chain4(dmin, vec4<f32>(kmins_prod(sc.z, sc.w, t, b)), (*st).accm[i]);
    }
}
fn finish(st: ptr<function, St>, h: u32, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        let m = (*st).accm[t / 2u];
        r[t] = hsum_pair((*st).acc[t], lid) + ((m.x + m.z) + (m.y + m.w));
    }
    return r;
}
