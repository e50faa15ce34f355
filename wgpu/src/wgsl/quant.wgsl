// ---- quant.wgsl: ggml-cpu's x86 `quantize_row_q8_0` / `q8_1` (AVX2 branch) and
// `quantize_row_q8_K` (= `quantize_row_q8_K_ref`), one invocation per activation block.
//
// Divisions go through `div_rn` (WGSL's `/` is only accurate to 2.5 ulp in Vulkan); the
// rounding `x * id` then round-to-nearest-even has no add to contract; q8_K's magic-number
// rounding `iscale * x + 12582912` has its product laundered through an integer XOR with a
// runtime zero, so that no driver can fuse it into an fma; fp16 results use the integer
// software converter (`f32_to_f16_bits`). Inputs are read as u32 bits.

struct QParams {
    nblocks: u32,  // activation blocks to quantize (all tokens)
    groups_x: u32,
    zero: u32,     // always 0
    nbr: u32,      // activation blocks per token
    stride: u32,   // u32 words per token (device layout: src/layout.rs, lib.rs act_row_words)
    xoff: u32,     // the job's first element in the shared input XF
}

@group(0) @binding(0) var<storage, read> XF: array<u32>;
@group(0) @binding(1) var<storage, read_write> XA: array<u32>;
@group(0) @binding(2) var<uniform> QP: QParams;

fn zero_u() -> u32 {
    return QP.zero;
}

// The fp16 bits `h`, as the exact f32 the device layout keeps (see `f16f`).
fn q8_d_word(h: u32) -> u32 {
    return bitcast<u32>(f16f(h));
}

fn quant_q8_01(g: u32, with_s: bool) {
    let x0 = QP.xoff + g * 32u;
    // amax: 4 x 8 lanes folded with max_ps in ggml's order, then hi/lo, movehl, movehdup.
    var m: array<u32, 8>;
    for (var l = 0u; l < 8u; l++) {
        m[l] = XF[x0 + l] & 0x7fffffffu;
    }
    for (var v = 1u; v < 4u; v++) {
        for (var l = 0u; l < 8u; l++) {
            m[l] = maxps(m[l], XF[x0 + 8u * v + l] & 0x7fffffffu);
        }
    }
    let a0 = maxps(maxps(m[4], m[0]), maxps(m[6], m[2]));
    let a1 = maxps(maxps(m[5], m[1]), maxps(m[7], m[3]));
    let amax = bitcast<f32>(maxps(a0, a1));
    let d = div_rn(amax, 127.0);
    let id = select(0.0, div_rn(127.0, amax), bitcast<u32>(amax) != 0u);
    // Device layout (src/layout.rs): per token the quants (8 words per block), then the d
    // words, then (q8_1) the s words.
    let tok = g / QP.nbr;
    let b = g % QP.nbr;
    let row = tok * QP.stride;
    let qo = row + 8u * b;
    let ow = row + 8u * QP.nbr + b;
    var sum = 0i;
    for (var w = 0u; w < 8u; w++) {
        var packed = 0u;
        for (var k = 0u; k < 4u; k++) {
            let v = bitcast<f32>(XF[x0 + 4u * w + k]);
            let qi = cvtps(round(v * id));
            sum += qi;
            packed |= (bitcast<u32>(clamp(qi, -128i, 127i)) & 0xffu) << (8u * k);
        }
        XA[qo + w] = packed;
    }
    XA[ow] = q8_d_word(f32_to_f16_bits(d));
    if (with_s) {
        XA[ow + QP.nbr] = q8_d_word(f32_to_f16_bits(d * f32(sum)));
    }
}

// Word offsets of block g's quants, bsums and d: ggml's 73-word blocks, or with Q8K_SPLIT
// (`Q8kLayout::Split`) per token the quants of every block, then the bsums, then the d. With
// Q8K_BOTH (`Q8kLayout::Both`) ggml's blocks start the row and the split copy (written by
// `q8k_copy_split`) starts at its second half.
fn q8k_offsets(g: u32) -> vec3<u32> {
    let row = (g / QP.nbr) * QP.stride;
    let b = g % QP.nbr;
    if (Q8K_SPLIT) {
        return q8k_split_offsets(row, b);
    }
    return vec3<u32>(row + b * 73u + 1u, row + b * 73u + 65u, row + b * 73u);
}
fn q8k_split_offsets(row: u32, b: u32) -> vec3<u32> {
    return vec3<u32>(row + 64u * b, row + 64u * QP.nbr + 8u * b, row + 72u * QP.nbr + b);
}

// Q8K_BOTH: block g's words (at `o`, ggml's block), copied to the split copy.
fn q8k_copy_split(g: u32, o: vec3<u32>) {
    let s = q8k_split_offsets((g / QP.nbr) * QP.stride + (QP.stride >> 1u), g % QP.nbr);
    for (var w = 0u; w < 64u; w++) {
        XA[s.x + w] = XA[o.x + w];
    }
    for (var w = 0u; w < 8u; w++) {
        XA[s.y + w] = XA[o.y + w];
    }
    XA[s.z] = XA[o.z];
}

fn quant_q8_k(g: u32) {
    let o = q8k_offsets(g);
    quant_q8_k_at(g, o);
    if (Q8K_BOTH) {
        q8k_copy_split(g, o);
    }
}

// Block g into the words at `o` (q8k_offsets).
fn quant_q8_k_at(g: u32, o: vec3<u32>) {
    let x0 = QP.xoff + g * 256u;
    let qo = o.x;
    // max = the first element of largest |x| (strict >, so NaN never wins)
    var amax = 0u;
    var mx = 0u;
    for (var j = 0u; j < 256u; j++) {
        let v = XF[x0 + j];
        let a = v & 0x7fffffffu;
        if (a <= 0x7f800000u && a > amax) {
            amax = a;
            mx = v;
        }
    }
    if (amax == 0u) {
        for (var w = 0u; w < 64u; w++) {
            XA[qo + w] = 0u;
        }
        for (var w = 0u; w < 8u; w++) {
            XA[o.y + w] = 0u;
        }
        XA[o.z] = 0u;
        return;
    }
    let iscale = div_rn(-127.0, bitcast<f32>(mx));
    for (var w = 0u; w < 64u; w++) {
        var packed = 0u;
        for (var k = 0u; k < 4u; k++) {
            let p = iscale * bitcast<f32>(XF[x0 + 4u * w + k]);
            // nearest_int: (bits(p + 12582912) & 0x7fffff) - 0x400000, with p laundered
            let val = bitcast<f32>(bitcast<u32>(p) ^ QP.zero) + 12582912.0;
            let ni = bitcast<i32>(bitcast<u32>(val) & 0x7fffffu) - 0x400000i;
            // MIN(127, v) stored into int8_t: the low byte
            packed |= (bitcast<u32>(min(ni, 127i)) & 0xffu) << (8u * k);
        }
        XA[qo + w] = packed;
    }
    for (var s = 0u; s < 8u; s++) {
        var sums: array<i32, 2>;
        for (var h = 0u; h < 2u; h++) {
            var acc = 0i;
            for (var w = 0u; w < 4u; w++) {
                let q = XA[qo + 8u * s + 4u * h + w];
                acc += sext8(q) + sext8(q >> 8u) + sext8(q >> 16u) + sext8(q >> 24u);
            }
            sums[h] = acc;
        }
        XA[o.y + s] = (bitcast<u32>(sums[0]) & 0xffffu) | (bitcast<u32>(sums[1]) << 16u);
    }
    XA[o.z] = bitcast<u32>(div_rn(1.0, iscale));
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let g = (wg.y * QP.groups_x + wg.x) * 64u + lid;
    if (g >= QP.nblocks) {
        return;
    }
    QUANT;
}
