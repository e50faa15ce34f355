// ---- kpair_head.wgsl: bindings and the row skeleton of the thread-pair kernels of the ----
// ---- K-quants and iq4_xs --------------------------------------------------------------------
//
// q4_K and q5_K in ggml's own blocks (tiled whole with Tuning::ktile), q6_K and iq4_xs in their
// tiled layout (layout.rs). One
// workgroup of 2 * ROWS invocations computes ROWS
// weight rows; invocation `lid` works on row `lid / 2` and owns AVX2 lanes 4h..4h+3, h = lid % 2,
// of every block (the CUDA backend's thread pairs): for each of the NT tokens it keeps the four
// lanes' f32 accumulators and runs ggml's per-lane chain `acc = fmx(d, f32(lane_int), acc)`
// over the row's blocks in order; integer lane sums are exact. The block's header and scales
// are decoded by 2 invocations instead of 8. A format's per-token scalar chain (q4_K's mins
// lanes, q5_K's `summs`) of token t is run by invocation t % 2 alone (`NTH` token slots, slot i
// holding token 2i + h), so that the pair shares that work. The 8 lanes are reduced in
// `hsum_float_8`'s order: r_i = l_i + l_{i+4} by one exchange with the partner invocation (IEEE
// addition commutes exactly, so both get the same bits), then (r0 + r2) + (r1 + r3).

// The weights as 16-byte elements (WV = vec4<u32>: q4_K's and q5_K's blocks are multiples of
// 16 bytes; q6_K and iq4_xs tiled; iq2_xxs's and iq2_s's split bodies, shaders.rs `iq_elem`),
// 8-byte elements (vec2<u32>: iq2_xs's split bodies) or words (WV = u32: the other IQ2/IQ3
// formats, and ggml's row-major IQ blocks, only 2-byte aligned).
@group(0) @binding(0) var<storage, read> W: array<WV>;
@group(0) @binding(1) var<storage, read> T: array<u32>;
@group(2) @binding(0) var<storage, read_write> O: array<f32>;
@group(2) @binding(1) var<uniform> P: Params;

// Token slots of a format's per-token scalar chain per invocation.
const NTH: u32 = (NT + 1u) / 2u;

// The token of slot i of invocation h (the last token where 2i + h is past the end: computed,
// never stored).
fn slot_token(i: u32, h: u32) -> u32 {
    return min(2u * i + h, NT - 1u);
}

// The four lanes' packed 4x8 dot products.
fn dot4x4(q: vec4<u32>, a: vec4<u32>) -> vec4<i32> {
    return vec4<i32>(dot4I8Packed(q.x, a.x), dot4I8Packed(q.y, a.y), dot4I8Packed(q.z, a.z), dot4I8Packed(q.w, a.w));
}

// q4_K / q5_K mins: prod[k] = mins[2k] * q8s[2k] + mins[2k+1] * q8s[2k+1] for k = 0..3, with
// q8s[k] = bsums[2k] + bsums[2k+1] wrapped to i16 (ggml's _mm_hadd_epi16, then
// _mm_madd_epi16), for token t, activation block ab; m03, m47: mins 0..3 and 4..7 as bytes.
// Whole vectors, no component indexed by a loop variable.
fn kmins_prod(m03: u32, m47: u32, t: u32, ab: u32) -> vec4<i32> {
    return kmins_prod_b(m03, m47, ab4(t, ab, 0u), ab4(t, ab, 4u));
}
// The same from the bsums words b0 = ab4(t, ab, 0), b1 = ab4(t, ab, 4) (loaded once for both
// rows of the two-row kernels).
fn kmins_prod_b(m03: u32, m47: u32, b0: vec4<u32>, b1: vec4<u32>) -> vec4<i32> {
    let we = bitcast<vec4<i32>>(vec4<u32>(b0.x, b0.z, b1.x, b1.z));
    let wo = bitcast<vec4<i32>>(vec4<u32>(b0.y, b0.w, b1.y, b1.w));
    let s16 = vec4<u32>(16u);
    let qe = ((((we << s16) >> s16) + (we >> s16)) << s16) >> s16;
    let qo = ((((wo << s16) >> s16) + (wo >> s16)) << s16) >> s16;
    let me = bitcast<vec4<i32>>(vec4<u32>(m03, m03 >> 16u, m47, m47 >> 16u) & vec4<u32>(0xffu));
    let mo = bitcast<vec4<i32>>(vec4<u32>(m03 >> 8u, m03 >> 24u, m47 >> 8u, m47 >> 24u) & vec4<u32>(0xffu));
    return me * qe + mo * qo;
}

// q4_K / q5_K: the kmask unpacking (ggml's utmp) of the header words after d | dmin << 16
// (scales[12]): (scales 0..3, scales 4..7, mins 0..3, mins 4..7) as bytes.
fn kq_scales(hd: vec4<u32>) -> vec4<u32> {
    let s03 = hd.y & 0x3f3f3f3fu;
    let s47 = (hd.w & 0x0f0f0f0fu) | (((hd.y >> 6u) & 0x03030303u) << 4u);
    let m03 = hd.z & 0x3f3f3f3fu;
    let m47 = ((hd.w >> 4u) & 0x0f0f0f0fu) | (((hd.z >> 6u) & 0x03030303u) << 4u);
    return vec4<u32>(s03, s47, m03, m47);
}

// q4_K / q5_K: the scales (sc[2j], sc[2j + 1]) of 64-element group j.
fn kq_sc(sc: vec4<u32>, j: u32) -> vec2<i32> {
    let sw = select(sc.y, sc.x, j < 2u);
    return vec2<i32>(i32((sw >> (16u * (j & 1u))) & 0xffu), i32((sw >> (16u * (j & 1u) + 8u)) & 0xffu));
}

// q4_K / q5_K: the 4 lanes' integer sums of token t, block ab: over the 64-element groups j,
// sc[2j] * dot(lo[j], q8 words 16j + 4h..) + sc[2j+1] * dot(hi[j], q8 words 16j + 8 + 4h..).
fn kq_lanes(lo: array<vec4<u32>, 4>, hi: array<vec4<u32>, 4>, sc: vec4<u32>, t: u32, ab: u32, h: u32) -> vec4<i32> {
    var s = vec4<i32>(0);
    for (var j = 0u; j < 4u; j++) {
        let c = kq_sc(sc, j);
        s += c.x * dot4x4(lo[j], aq4(t, ab, 16u * j + 4u * h));
        s += c.y * dot4x4(hi[j], aq4(t, ab, 8u + 16u * j + 4u * h));
    }
    return s;
}
