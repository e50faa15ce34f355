// ---- dequant.wgsl: ggml's `dequantize_row_*` (ggml/src/ggml-quants.c), one element per
// invocation. Every product here is exact or a single correctly rounded multiplication (no
// multiply feeds an add unless the product is exact), so contraction cannot change a bit;
// each function's comment says why.

struct DParams {
    n: u32,          // elements of this dispatch
    cols: u32,       // elements per row
    row_bytes: u32,
    row_first: u32,  // first row (within the weight part) of this dispatch
    groups_x: u32,
    part_rows: u32,  // rows of the weight part (pair layout)
    nb: u32,         // blocks per row
}

@group(0) @binding(0) var<storage, read> W: array<u32>;
@group(0) @binding(1) var<storage, read> T: array<u32>;
@group(1) @binding(0) var<storage, read_write> O: array<f32>;
@group(1) @binding(1) var<uniform> DP: DParams;

fn neg_if(v: f32, neg: bool) -> f32 {
    return select(v, -v, neg);
}

// y = q * d (exact: 8-bit times 11-bit significands)
fn deq_q8_0(B: u32, e: u32) -> f32 {
    return f32(sext8(w8(B + 2u + e))) * f16f(w16(B));
}

// y = q * d + m; q * d is exact (5-bit times 11-bit), so fused or not gives the same bits.
fn deq_q5_1(B: u32, e: u32) -> f32 {
    let d = f16f(w16(B));
    let m = f16f(w16(B + 2u));
    let qh = w32(B + 4u);
    let byte = w8(B + 8u + (e & 15u));
    let nib = select(byte >> 4u, byte & 15u, e < 16u);
    let q = nib | (((qh >> e) & 1u) << 4u);
    return f32(q) * d + m;
}

// get_scale_min_k4(j, scales at S)
fn scale_min_k4(S: u32, j: u32) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(w8(S + j) & 63u, w8(S + j + 4u) & 63u);
    }
    let a = w8(S + j + 4u);
    return vec2<u32>((a & 15u) | ((w8(S + j - 4u) >> 6u) << 4u), (a >> 4u) | ((w8(S + j) >> 6u) << 4u));
}

// y = (d*sc) * q - (dmin*m): d*sc (11 x 6 bits) and (d*sc)*q (17 x 4 bits) and dmin*m are exact.
fn deq_q4_k(B: u32, e: u32) -> f32 {
    let d = f16f(w16(B));
    let dmin = f16f(w16(B + 2u));
    let j = e >> 6u;
    let hi = ((e >> 5u) & 1u) == 1u;
    let sm = scale_min_k4(B + 4u, 2u * j + select(0u, 1u, hi));
    let byte = w8(B + 16u + 32u * j + (e & 31u));
    let q = select(byte & 15u, byte >> 4u, hi);
    let d1 = d * f32(sm.x);
    let m1 = dmin * f32(sm.y);
    return d1 * f32(q) - m1;
}

// As q4_K with 5-bit q: (d*sc)*q is 17 x 5 bits, exact.
fn deq_q5_k(B: u32, e: u32) -> f32 {
    let d = f16f(w16(B));
    let dmin = f16f(w16(B + 2u));
    let j = e >> 6u;
    let hi = ((e >> 5u) & 1u) == 1u;
    let is = 2u * j + select(0u, 1u, hi);
    let sm = scale_min_k4(B + 4u, is);
    let l = e & 31u;
    let byte = w8(B + 48u + 32u * j + l);
    let q = select(byte & 15u, byte >> 4u, hi) + select(0u, 16u, ((w8(B + 16u + l) >> is) & 1u) == 1u);
    let d1 = d * f32(sm.x);
    let m1 = dmin * f32(sm.y);
    return d1 * f32(q) - m1;
}

// db = d * (0.5 + ls) * 0.25 (11 x 5 bits, then a power of two: exact); y = db * grid (16 x 6
// bits, exact), negated by the sign bit.
fn deq_iq2_xxs(B: u32, e: u32) -> f32 {
    let d = f16f(w16(B));
    let ib = e >> 5u;
    let l = (e >> 3u) & 3u;
    let j = e & 7u;
    let a0 = w32(B + 2u + 8u * ib);
    let a1 = w32(B + 6u + 8u * ib);
    let db = d * (0.5 + f32(a1 >> 28u)) * 0.25;
    let gi = (a0 >> (8u * l)) & 0xffu;
    let g = (T[OFF_IQ2XXS + 2u * gi + (j >> 2u)] >> (8u * (j & 3u))) & 0xffu;
    let signs = ksigns((a1 >> (7u * l)) & 127u);
    return neg_if(db * f32(g), ((signs >> j) & 1u) == 1u);
}

fn deq_iq2_xs(B: u32, e: u32) -> f32 {
    let d = f16f(w16(B));
    let ib = e >> 5u;
    let l = (e >> 3u) & 3u;
    let j = e & 7u;
    let sc = w8(B + 66u + ib);
    let s = select(sc >> 4u, sc & 15u, l < 2u);
    let db = d * (0.5 + f32(s)) * 0.25;
    let q = w16(B + 2u + 8u * ib + 2u * l);
    let g = (T[OFF_IQ2XS + 2u * (q & 511u) + (j >> 2u)] >> (8u * (j & 3u))) & 0xffu;
    let signs = ksigns(q >> 9u);
    return neg_if(db * f32(g), ((signs >> j) & 1u) == 1u);
}

fn deq_iq2_s(B: u32, e: u32) -> f32 {
    let d = f16f(w16(B));
    let ib = e >> 5u;
    let l = (e >> 3u) & 3u;
    let j = e & 7u;
    let sc = w8(B + 74u + ib);
    let s = select(sc >> 4u, sc & 15u, l < 2u);
    let db = d * (0.5 + f32(s)) * 0.25;
    let idx = w8(B + 2u + 4u * ib + l) | ((w8(B + 66u + ib) << (8u - 2u * l)) & 0x300u);
    let g = (T[OFF_IQ2S + 2u * idx + (j >> 2u)] >> (8u * (j & 3u))) & 0xffu;
    let signs = w8(B + 34u + 4u * ib + l);
    return neg_if(db * f32(g), ((signs >> j) & 1u) == 1u);
}

// db = d * (0.5 + ls) * 0.5; y = db * grid * (+-1): exact (16 x 6 bits).
fn deq_iq3_xxs(B: u32, e: u32) -> f32 {
    let d = f16f(w16(B));
    let ib = e >> 5u;
    let l = (e >> 3u) & 3u;
    let j = e & 7u;
    let aux = w32(B + 66u + 4u * ib);
    let db = d * (0.5 + f32(aux >> 28u)) * 0.5;
    let gi = w8(B + 2u + 8u * ib + 2u * l + (j >> 2u));
    let g = (T[OFF_IQ3XXS + gi] >> (8u * (j & 3u))) & 0xffu;
    let signs = ksigns((aux >> (7u * l)) & 127u);
    return neg_if(db * f32(g), ((signs >> j) & 1u) == 1u);
}

// db = d * (1 + 2ls) (11 x 5 bits); y = db * grid * (+-1): exact.
fn deq_iq3_s(B: u32, e: u32) -> f32 {
    let d = f16f(w16(B));
    let ib = e >> 5u;
    let l = (e >> 3u) & 3u;
    let j = e & 7u;
    let sc = w8(B + 106u + (ib >> 1u));
    let ls = select(sc >> 4u, sc & 15u, (ib & 1u) == 0u);
    let db = d * f32(1u + 2u * ls);
    let qh = w8(B + 66u + ib);
    let k = 2u * l + (j >> 2u);
    let idx = w8(B + 2u + 8u * ib + k) | ((qh << (8u - k)) & 256u);
    let g = (T[OFF_IQ3S + idx] >> (8u * (j & 3u))) & 0xffu;
    let signs = w8(B + 74u + 4u * ib + l);
    return neg_if(db * f32(g), ((signs >> j) & 1u) == 1u);
}

fn kv(off: u32, n: u32) -> i32 {
    return sext8(T[off + (n >> 2u)] >> (8u * (n & 3u)));
}

// y = d * kvalue (11 x 8 bits, exact)
fn deq_iq4_nl(B: u32, e: u32) -> f32 {
    let byte = w8(B + 2u + (e & 15u));
    let n = select(byte >> 4u, byte & 15u, e < 16u);
    return f16f(w16(B)) * f32(kv(OFF_KVNL, n));
}

// dl = d * (ls - 32) (exact), y = dl * kvalue: one correctly rounded multiplication.
// y = kvalue * UE4M3(d[s]) (exact: 4 x 4 bits)
fn deq_nvfp4(B: u32, e: u32) -> f32 {
    let s = e >> 4u;
    let j = e & 15u;
    let byte = w8(B + 4u + 8u * s + (j & 7u));
    let n = select(byte >> 4u, byte & 15u, j < 8u);
    return f32(kv(OFF_FP4, n)) * ue4m3(w8(B + s));
}

// ---- The pair layout (src/layout.rs): `k` is the block's tiled number, region A holds PAW
// words per block, region B follows it.
fn ptiled(r: u32, b: u32) -> u32 {
    let g0 = r - r % 16u;
    return g0 * DP.nb + b * min(16u, DP.part_rows - g0) + (r - g0);
}
fn pboff() -> u32 {
    return DP.part_rows * DP.nb * PAW;
}
// Nibble `i` (0..16) of half `hh` (0: low nibbles, elements 0..16; 1: high) of the q5_1 /
// iq4_nl repack at word `a`: P(2hh + p) holds qs words 2p (low nibbles) and 2p + 1 (high).
fn pnib(a: u32, hh: u32, i: u32) -> u32 {
    let j = i >> 2u;
    let v = W[a + 2u * hh + (j >> 1u)];
    return (v >> (8u * (i & 3u) + 4u * (j & 1u))) & 15u;
}
fn deqp_q8_0(k: u32, e: u32) -> f32 {
    return f32(sext8(w8(32u * k + e))) * f16f(w16(4u * pboff() + 2u * k));
}
fn deqp_iq4_nl(k: u32, e: u32) -> f32 {
    let n = pnib(4u * k, e >> 4u, e & 15u);
    return f16f(w16(4u * pboff() + 2u * k)) * f32(kv(OFF_KVNL, n));
}
// As deq_q5_1.
fn deqp_q5_1(k: u32, e: u32) -> f32 {
    let hw = pboff() + 2u * k;
    let d = f16f(W[hw] & 0xffffu);
    let m = f16f(W[hw] >> 16u);
    let q = pnib(4u * k, e >> 4u, e & 15u) | (((W[hw + 1u] >> e) & 1u) << 4u);
    return f32(q) * d + m;
}
// As deq_nvfp4; sub-block s sits at position 2 (s & 1) + (s >> 1) of region A's block.
fn deqp_nvfp4(k: u32, e: u32) -> f32 {
    let s = e >> 4u;
    let j = e & 15u;
    let pos = 2u * (s & 1u) + (s >> 1u);
    let byte = w8(32u * k + 8u * pos + (j & 7u));
    let n = select(byte >> 4u, byte & 15u, j < 8u);
    return f32(kv(OFF_FP4, n)) * ue4m3((W[pboff() + k] >> (8u * s)) & 0xffu);
}

// q4_K and q5_K with their blocks tiled whole (`Tuning::ktile`, layout.rs `pack_whole`): block
// number k at byte BB * k, unchanged.
fn deqp_q4_k(k: u32, e: u32) -> f32 {
    return deq_q4_k(144u * k, e);
}
fn deqp_q5_k(k: u32, e: u32) -> f32 {
    return deq_q5_k(176u * k, e);
}

// As deq_iq4_xs of ggml's block, in the tiled layout (layout.rs): the header at byte 8k of
// region B; element e32 of sub-block ib (nibbles in element order) at byte
// `iq4xs_span(ib, e32 / 16) + (e32 % 16) / 2` of region A's block, nibble e32 % 2.
// dl = d * (ls - 32) (exact), y = dl * kvalue: one correctly rounded multiplication.
fn deqp_iq4_xs(k: u32, e: u32) -> f32 {
    let hb = 4u * pboff() + 8u * k;
    let d = f16f(w16(hb));
    let sh = w16(hb + 2u);
    let ib = e >> 5u;
    let lo = (w8(hb + 4u + (ib >> 1u)) >> (4u * (ib & 1u))) & 15u;
    let ls = i32(lo | (((sh >> (2u * ib)) & 3u) << 4u)) - 32i;
    let dl = d * f32(ls);
    let e32 = e & 31u;
    let span = 16u * (2u * (ib >> 1u) + (e32 >> 4u)) + 8u * (ib & 1u);
    let byte = w8(128u * k + span + ((e32 & 15u) >> 1u));
    let n = (byte >> (4u * (e32 & 1u))) & 15u;
    return dl * f32(kv(OFF_KVNL, n));
}
// As deq_q6_k, in the tiled layout (layout.rs `q6k_src`): ggml's ql byte 64n + 32c + l and qh
// byte 32n + l at byte l % 16 of element 2 (3n + c) + l / 16 (qh: c = 2) of region A's block,
// the scales at its byte 192, d at byte 2k of region B.
// y = (d * sc) * q: d*sc is exact, the second product one correctly rounded multiplication.
fn deqp_q6_k(k: u32, e: u32) -> f32 {
    let d = f16f(w16(4u * pboff() + 2u * k));
    let n = e >> 7u;
    let r = e & 127u;
    let which = r >> 5u;
    let l = r & 31u;
    let B = 208u * k;
    let qlb = w8(B + 16u * (2u * (3u * n + (which & 1u)) + (l >> 4u)) + (l & 15u));
    let low = select(qlb & 15u, qlb >> 4u, which >= 2u);
    let hb = (w8(B + 16u * (2u * (3u * n + 2u) + (l >> 4u)) + (l & 15u)) >> (2u * which)) & 3u;
    let q = i32(low | (hb << 4u)) - 32i;
    let sc = sext8(w8(B + 192u + 8u * n + (l >> 4u) + 2u * which));
    return d * f32(sc) * f32(q);
}
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let i = (wg.y * DP.groups_x + wg.x) * 256u + lid;
    if (i >= DP.n) {
        return;
    }
    let rr = i / DP.cols;
    let c = i % DP.cols;
    O[i] = DEQ(BLOCK_ADDR, c % BE);
}
