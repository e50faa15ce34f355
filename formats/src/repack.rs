//! Byte rearrangements of ggml blocks that the GPU backends' device layouts share (pure host
//! code; each backend's `layout.rs` says where it uses them).

/// The nibble repack of 16 `qs` bytes of a 32-element block whose element j is the low nibble
/// of `qs[j]` (j < 16) or the high nibble of `qs[j - 16]` (q5_1, iq4_nl): with w0..w3 the
/// little-endian words of `qs`, output word `2h + p` is `nib_h(w[2p]) | nib_h(w[2p+1]) << 4`,
/// `nib_0(w) = w & 0x0f0f0f0f` (elements 0..16), `nib_1(w) = (w >> 4) & 0x0f0f0f0f` (elements
/// 16..32). A GPU row's invocation (thread) h, which owns AVX2 lanes 4h..4h+3 (elements
/// 16h..16h+16), then reads its 16 nibbles as the 8 contiguous bytes `8h..8h+8`, the two
/// nibbles of each byte being lanes 2p and 2p + 1 of it.
///
/// `qs` and `out` are 16 bytes.
pub fn nibble_pack(qs: &[u8], out: &mut [u8]) {
    let w = |i: usize| u32::from_le_bytes([qs[4 * i], qs[4 * i + 1], qs[4 * i + 2], qs[4 * i + 3]]);
    let w = [w(0), w(1), w(2), w(3)];
    for h in 0..2 {
        let nib = |x: u32| if h == 0 { x & 0x0f0f_0f0f } else { (x >> 4) & 0x0f0f_0f0f };
        for p in 0..2 {
            let v = nib(w[2 * p]) | (nib(w[2 * p + 1]) << 4);
            out[4 * (2 * h + p)..4 * (2 * h + p) + 4].copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// The inverse of [`nibble_pack`].
pub fn nibble_unpack(dev: &[u8], qs: &mut [u8]) {
    let mut w = [0u32; 4];
    for h in 0..2 {
        for p in 0..2 {
            let i = 4 * (2 * h + p);
            let v = u32::from_le_bytes([dev[i], dev[i + 1], dev[i + 2], dev[i + 3]]);
            w[2 * p] |= (v & 0x0f0f_0f0f) << (4 * h);
            w[2 * p + 1] |= ((v >> 4) & 0x0f0f_0f0f) << (4 * h);
        }
    }
    for (i, x) in w.iter().enumerate() {
        qs[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes());
    }
}

/// nvfp4's sub-block order in the GPU layouts (device position -> ggml sub-block): 0, 2, 1, 3,
/// so that a row's invocation (thread) h, whose lanes use sub-block 2k + h in the block's step
/// k, finds its two sub-blocks h and h + 2 in the 16 contiguous bytes `16h..16h+16`.
pub const NVFP4_ORDER: [usize; 4] = [0, 2, 1, 3];

/// nvfp4's 32 `qs` bytes (four 8-byte sub-blocks) in [`NVFP4_ORDER`].
pub fn nvfp4_reorder(qs: &[u8], out: &mut [u8]) {
    for (pos, s) in NVFP4_ORDER.into_iter().enumerate() {
        out[8 * pos..8 * pos + 8].copy_from_slice(&qs[8 * s..8 * s + 8]);
    }
}

/// The inverse of [`nvfp4_reorder`].
pub fn nvfp4_unreorder(dev: &[u8], qs: &mut [u8]) {
    for (pos, s) in NVFP4_ORDER.into_iter().enumerate() {
        qs[8 * s..8 * s + 8].copy_from_slice(&dev[8 * pos..8 * pos + 8]);
    }
}

/// The `n = qs.len()` bytes of a (sub-)block of 2n elements whose element j is the low nibble
/// of `qs[j]` (j < n) or the high nibble of `qs[j - n]` (iq4_nl and iq4_xs: n = 16; an nvfp4
/// sub-block: n = 8) with the nibbles in element order: output byte m holds element 2m in its
/// low nibble and element 2m + 1 in its high one. Word k then holds AVX2 lanes 2k (nibbles 0-3)
/// and 2k + 1 (nibbles 4-7), so that a byte-permute lookup of its 8 nibbles yields the two
/// lanes' values without the two permutes that separate low from high nibbles (CUDA's
/// `qk_lut16x2n`), and a thread owning 4 consecutive lanes reads them as 8 contiguous bytes.
///
/// `out` is as long as `qs`.
pub fn nibble_seq(qs: &[u8], out: &mut [u8]) {
    let n = qs.len();
    let nib = |e: usize| if e < n { qs[e] & 15 } else { qs[e - n] >> 4 };
    for (m, o) in out[..n].iter_mut().enumerate() {
        *o = nib(2 * m) | (nib(2 * m + 1) << 4);
    }
}

/// The inverse of [`nibble_seq`] (`qs` as long as `dev`).
pub fn nibble_unseq(dev: &[u8], qs: &mut [u8]) {
    let n = dev.len();
    qs[..n].fill(0);
    for e in 0..2 * n {
        let v = (dev[e / 2] >> (4 * (e % 2))) & 15;
        if e < n {
            qs[e] |= v;
        } else {
            qs[e - n] |= v << 4;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` bytes of a xorshift64 stream.
    fn xorshift_bytes(s: &mut u64, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                *s ^= *s << 13;
                *s ^= *s >> 7;
                *s ^= *s << 17;
                *s as u8
            })
            .collect()
    }

    /// The element-order repack inverts exactly, and word k holds lanes 2k and 2k + 1.
    #[test]
    fn nibble_seq_roundtrips_in_element_order() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..1000 {
            let n = if i % 2 == 0 { 16 } else { 8 };
            let qs = xorshift_bytes(&mut s, n);
            let mut dev = vec![0u8; n];
            nibble_seq(&qs, &mut dev);
            let mut back = vec![0u8; n];
            nibble_unseq(&dev, &mut back);
            assert_eq!(back, qs);
            for e in 0..2 * n {
                let want = if e < n { qs[e] & 15 } else { qs[e - n] >> 4 };
                let word = u32::from_le_bytes(dev[4 * (e / 8)..4 * (e / 8) + 4].try_into().unwrap());
                assert_eq!((word >> (4 * (e % 8))) & 15, want as u32, "element {e} (lane {})", e / 4);
            }
        }
    }

    /// The repack inverts exactly, and invocation h's 8 bytes hold exactly the nibbles of
    /// elements 16h..16h+16.
    #[test]
    fn nibble_pack_roundtrips_and_splits_halves() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..1000 {
            let qs = xorshift_bytes(&mut s, 16);
            let mut dev = [0u8; 16];
            nibble_pack(&qs, &mut dev);
            let mut back = [0u8; 16];
            nibble_unpack(&dev, &mut back);
            assert_eq!(&back[..], &qs[..]);
            for e in 0..32 {
                let want = if e < 16 { qs[e] & 15 } else { qs[e - 16] >> 4 };
                let (h, i) = (e / 16, e % 16);
                let (j, c) = (i / 4, i % 4);
                let byte = dev[8 * h + 4 * (j / 2) + c];
                assert_eq!((byte >> (4 * (j % 2))) & 15, want, "element {e}");
            }
        }
    }
}
