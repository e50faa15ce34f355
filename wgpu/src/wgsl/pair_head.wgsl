// ---- pair_head.wgsl: bindings and the row skeleton of the 32-element formats' kernels -----
//
// q8_0, q5_1, iq4_nl, nvfp4 (the pair layout: src/layout.rs). One workgroup of 2 * ROWS
// invocations computes ROWS weight rows; invocation `lid` works on row `lid / 2` and owns AVX2
// lanes 4h..4h+3, h = lid % 2, of every block: for each of the NT tokens it keeps the four
// lanes' f32 accumulators and runs ggml's per-lane chain `acc = fmx(d, f32(lane_int), acc)` over
// the row's blocks in order (the (block, token) scale product `d` is shared by its 4 lanes).
// Integer lane sums are exact (packed 4x8 dot products). The 8 lanes are then reduced in
// `hsum_float_8`'s order: r_i = l_i + l_{i+4} by one exchange with the partner invocation
// (IEEE addition commutes exactly, so both get the same bits), then (r0 + r2) + (r1 + r3).

// The weights as 16-byte (WV = vec4<u32>, WSH = 2) or 8-byte (vec2<u32>, 1) elements, the size
// of an invocation's share of a block; AW: region A's words per block (both from layout.rs,
// written by shaders.rs `pair_source`).
@group(0) @binding(0) var<storage, read> W: array<WV>;
@group(0) @binding(1) var<storage, read> T: array<u32>;
@group(1) @binding(0) var<storage, read> X: array<vec4<u32>>;
@group(2) @binding(0) var<storage, read_write> O: array<f32>;
@group(2) @binding(1) var<uniform> P: Params;

// Word `i` of the weights / the activations.
fn ww(i: u32) -> u32 {
    return W[i >> WSH][i & ((1u << WSH) - 1u)];
}
fn xw(i: u32) -> u32 {
    return X[i >> 2u][i & 3u];
}

// Word offset of the weights' region B (after region A: P.rows * P.nb blocks of AW words).
var<private> BOFF: u32;

// The 16 activation quant bytes of half h of activation block ab of token t (of this dispatch),
// and the block's d and (q8_1) s (ABPB: activation blocks per weight block, from shaders.rs).
fn aq(t: u32, ab: u32, h: u32) -> vec4<u32> {
    return X[(((P.tok0 + t) * P.act_words) >> 2u) + 2u * ab + h];
}
fn ad(t: u32, ab: u32) -> f32 {
    return bitcast<f32>(xw((P.tok0 + t) * P.act_words + 8u * P.nb * ABPB + ab));
}
fn as1(t: u32, ab: u32) -> f32 {
    return bitcast<f32>(xw((P.tok0 + t) * P.act_words + 9u * P.nb * ABPB + ab));
}

// f32(x) for |x| < 2^22, exactly, without an integer-to-float conversion instruction (a
// quarter-rate unit on NVIDIA GPUs, 8 per block and token here): 1.5 * 2^23 + x is exact in
// f32's bits (unit spacing in [2^23, 2^24)), and subtracting 1.5 * 2^23 is exact. The pair
// formats' lane sums are 4 products of int8 magnitudes (at most 4 * 128 * 128 = 2^16).
fn i2fs(x: i32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x + 0x4b400000i)) - 12582912.0;
}

// The four lanes' integer sums of 16 weight bytes `q` with 16 activation bytes `a`.
fn dot16(q: vec4<u32>, a: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(
        i2fs(dot4I8Packed(q.x, a.x)),
        i2fs(dot4I8Packed(q.y, a.y)),
        i2fs(dot4I8Packed(q.z, a.z)),
        i2fs(dot4I8Packed(q.w, a.w)),
    );
}

// hsum_pair of each token's accumulators.
fn hsum_tokens(acc: array<vec4<f32>, NT>, lid: u32) -> array<f32, NT> {
    var r: array<f32, NT>;
    for (var t = 0u; t < NT; t++) {
        r[t] = hsum_pair(acc[t], lid);
    }
    return r;
}

// The wrapping integer sum of the row's 8 lanes.
fn isum_pair(a: vec4<i32>, lid: u32) -> i32 {
    let s = (a.x + a.y) + (a.z + a.w);
    return s + xori(s, 1u, lid);
}
