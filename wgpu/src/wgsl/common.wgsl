// ---- common.wgsl: byte access into u32 words, exact float conversions -------------------
//
// Every float conversion here is done with integer/bit operations or with operations whose
// result is exact, so that no driver choice (contraction, denormal flushing of an
// intermediate, NaN canonicalisation of a comparison) can change a bit.

// The u32 word at any byte offset of W (little-endian funnel shift of two words). Buffers are
// padded by 16 bytes, so `i + 1` is always in bounds.
fn w32(byte: u32) -> u32 {
    let i = byte >> 2u;
    let sh = (byte & 3u) * 8u;
    let lo = W[i];
    let hi = W[i + 1u];
    // WGSL shifts are modulo 32: `hi << 32` would be `hi`, so the aligned case is selected.
    return select((lo >> sh) | (hi << (32u - sh)), lo, sh == 0u);
}

// The u16 at an even byte offset of W.
fn w16(byte: u32) -> u32 {
    return (W[byte >> 2u] >> ((byte & 2u) * 8u)) & 0xffffu;
}

// The byte at any offset of W.
fn w8(byte: u32) -> u32 {
    return (W[byte >> 2u] >> ((byte & 3u) * 8u)) & 0xffu;
}

// fp16 bits -> f32, exact (the CPU's `_cvtsh_ss` / `half::f16::to_f32` value). Subnormals are
// `m * 2^-24` (an exact product with a normal result); NaNs keep their payload unquietened
// (so that the conversion is injective and the host can invert it exactly).
fn f16f(h: u32) -> f32 {
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    let s = (h & 0x8000u) << 16u;
    let norm = ((e + 112u) << 23u) | (m << 13u);
    let sub = bitcast<u32>(f32(m) * 5.9604644775390625e-8);
    let inf = 0x7f800000u | (m << 13u);
    let mag = select(select(norm, inf, e == 31u), sub, e == 0u);
    return bitcast<f32>(s | mag);
}

// f32 -> fp16 bits exactly as ggml's software converter `ggml_compute_fp32_to_fp16`
// (formats/src/fp.rs): round to nearest even, overflow to infinity, every NaN to
// `sign | 0x7E00`. Integer operations only.
fn f32_to_f16_bits(f: f32) -> u32 {
    let w = bitcast<u32>(f);
    let sign = (w >> 16u) & 0x8000u;
    let a = w & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7e00u;
    }
    if (a >= 0x477ff000u) { // 65520 and up round to infinity
        return sign | 0x7c00u;
    }
    if (a >= 0x38800000u) { // 2^-14 and up: a normal fp16
        let m = a & 0x7fffffu;
        let h = ((((a >> 23u) - 112u) << 10u) | (m >> 13u));
        let rem = m & 0x1fffu;
        let up = rem > 0x1000u || (rem == 0x1000u && (h & 1u) == 1u);
        return sign | (h + select(0u, 1u, up));
    }
    if (a <= 0x33000000u) { // at most 2^-25 (the tie goes to the even zero)
        return sign;
    }
    // A subnormal fp16: the value in units of 2^-24 is m * 2^(e - 126), e in 102..=112.
    let e = a >> 23u;
    let m = (a & 0x7fffffu) | 0x800000u;
    let s = 126u - e;
    let h = m >> s;
    let rem = m & ((1u << s) - 1u);
    let half = 1u << (s - 1u);
    let up = rem > half || (rem == half && (h & 1u) == 1u);
    return sign | (h + select(0u, 1u, up));
}

// UE4M3 -> f32 with ggml's x0.5 folded in (`ggml_ue4m3_to_fp32`, formats/src/fp.rs).
fn ue4m3(x: u32) -> f32 {
    let exp = (x >> 3u) & 0xfu;
    let man = x & 7u;
    let sub = f32(man) * 0.0009765625; // man * 2^-10, exact
    let norm = bitcast<f32>(((exp + 119u) << 23u) | (man << 20u));
    let v = select(norm, sub, exp == 0u);
    return select(v, 0.0, x == 0u || x == 0x7fu);
}

// Sign-extend the low byte.
fn sext8(x: u32) -> i32 {
    return (bitcast<i32>(x << 24u)) >> 24u;
}

// Four bits b0..b3 -> bit 0 of bytes 0..3: one multiply (its four shifted copies of the 4 bits
// do not overlap) and a mask, instead of four masks, three shifts and three ors.
fn spread4(b: u32) -> u32 {
    return ((b & 0xfu) * 0x00204081u) & 0x01010101u;
}

// Four bits b0..b3 -> bit 4 of bytes 0..3 (q5_1's fifth bits).
fn high4(b: u32) -> u32 {
    return ((b & 0xfu) * 0x02040810u) & 0x10101010u;
}

// Negate the bytes of `w` (each in 1..=127) where bit k of the 4-bit `bits` is set:
// `(w ^ 0xff) + 1` per byte. No carry crosses a byte because no grid byte is 0
// (the iq2 grids hold 8, 25, 43; the iq3 grids 4..62).
fn neg_bytes(w: u32, bits: u32) -> u32 {
    return sign_bytes(w, spread4(bits));
}

// The same from the 0/1 bytes `e` (`spread4` of the 4 sign bits, or a sign-table entry half).
fn sign_bytes(w: u32, e: u32) -> u32 {
    return (w ^ (e * 0xffu)) + e;
}

// `ksigns_iq2xs[k]`: the 7 sign bits of k and their parity in bit 7.
fn ksigns(k: u32) -> u32 {
    return k | ((countOneBits(k) & 1u) << 7u);
}

// Map the four nibbles in the low bits of the bytes of `n` through a 16-byte table at word
// offset `off` of T.
fn lut4(off: u32, n: u32) -> u32 {
    var r = 0u;
    for (var k = 0u; k < 4u; k++) {
        let i = (n >> (8u * k)) & 0xfu;
        let v = (T[off + (i >> 2u)] >> (8u * (i & 3u))) & 0xffu;
        r |= v << (8u * k);
    }
    return r;
}
