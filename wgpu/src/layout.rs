//! Device layouts of the "pair" formats (q8_0, q5_1, iq4_nl, nvfp4) and of their q8_0 / q8_1
//! activations, and the exact conversions from and to ggml's bytes. Pure host code.
//!
//! **Weights.** The matmul kernels of the 32-element formats give each weight row two
//! invocations, invocation `h` owning AVX2 lanes `4h..4h+3` of every block (as the CUDA
//! backend's "32-element formats"), and read a block's share with one 16-byte (or 8-byte)
//! load. So the blocks of a weight part are stored in two regions, both in *tiled* block
//! order: rows in groups of [`TILE`], block `b` of the group's rows next to each other (block
//! `(row, b)` is number [`tiled_index`]), so that the 16 rows of a 32-wide subgroup read one
//! contiguous span per block:
//!
//! - region A, `a_bytes` per block (a multiple of 16): the quants, arranged so that invocation
//!   `h`'s share is contiguous:
//!   - q8_0: ggml's 32 int8 unchanged (invocation h: bytes 16h..16h+16).
//!   - q5_1, iq4_nl: ggml's 16 `qs` bytes as 4 words `P0..P3`, `P(2h + p) = nib_h(qs word
//!     2p) | nib_h(qs word 2p+1) << 4` with `nib_0(w) = w & 0x0f0f0f0f` (elements 0..16)
//!     and `nib_1(w) = (w >> 4) & 0x0f0f0f0f` (elements 16..32): invocation h reads 8 bytes.
//!   - nvfp4: ggml's 32 `qs` bytes with the 8-byte sub-blocks in the order 0, 2, 1, 3
//!     (invocation h: sub-blocks h and h + 2, the two it owns in the block's two steps).
//! - region B, `b_bytes` per block, after region A: q8_0 and iq4_nl the fp16 `d` (2 bytes),
//!   q5_1 the words `d | m << 16` and `qh` (8 bytes), nvfp4 the four UE4M3 scales (4 bytes).
//!
//! No byte is added (region B is padded to 16 bytes at its end). The other formats keep
//! ggml's blocks, row-major.
//!
//! **Activations (q8_0, q8_1).** Per token a row of `stride` words (a multiple of 4): the
//! int8 quants of every block (8 words per block, block b at word 8b), then the scales `d` of
//! every block as exact f32 (`nb` words), then (q8_1) the sums `s` as f32. Invocation h of a
//! weight row reads its 16 quant bytes of a block with one 16-byte load. q8_K keeps ggml's
//! 292-byte blocks.

use qkern_formats::Format;
use qkern_formats::repack::{nibble_pack, nvfp4_reorder};
#[cfg(test)]
use qkern_formats::repack::{nibble_unpack, nvfp4_unreorder};

/// Rows per tile.
pub(crate) const TILE: usize = 16;

/// Device block number of block `b` of row `row` in a part of `rows` rows of `nb` blocks.
pub(crate) fn tiled_index(rows: usize, nb: usize, row: usize, b: usize) -> usize {
    let g0 = row - row % TILE;
    let g = TILE.min(rows - g0);
    g0 * nb + b * g + (row - g0)
}

/// Region sizes of a pair format: (region A bytes, region B bytes) per block.
pub(crate) fn pair_regions(f: Format) -> Option<(usize, usize)> {
    Some(match f {
        Format::Q8_0 => (32, 2),
        Format::Q5_1 => (16, 8),
        Format::IQ4_NL => (16, 2),
        Format::NVFP4 => (32, 4),
        _ => return None,
    })
}

/// Whether `f` is stored in the pair layout (and run by the pair kernels).
pub(crate) fn is_pair(f: Format) -> bool {
    pair_regions(f).is_some()
}

/// Device bytes of `nblocks` blocks of pair format `f` (region B padded to 16 bytes).
pub(crate) fn pair_bytes(f: Format, nblocks: usize) -> usize {
    let (a, b) = pair_regions(f).expect("a pair format");
    a * nblocks + (b * nblocks).next_multiple_of(16)
}

/// `rows` rows of ggml blocks of pair format `f` (a validated length) in the device layout.
pub(crate) fn pack(f: Format, ggml: &[u8], rows: usize) -> Vec<u8> {
    let (ab, bb) = pair_regions(f).expect("a pair format");
    let gb = f.block_bytes();
    let n = ggml.len() / gb;
    let mut out = vec![0u8; pair_bytes(f, n)];
    if rows == 0 {
        return out;
    }
    let nb = n / rows;
    let (ra, rb) = out.split_at_mut(ab * n);
    for (i, blk) in ggml.chunks_exact(gb).enumerate() {
        let k = tiled_index(rows, nb, i / nb, i % nb);
        let a = &mut ra[ab * k..ab * (k + 1)];
        let b = &mut rb[bb * k..bb * (k + 1)];
        match f {
            Format::Q8_0 => {
                b.copy_from_slice(&blk[..2]);
                a.copy_from_slice(&blk[2..]);
            }
            Format::IQ4_NL => {
                b.copy_from_slice(&blk[..2]);
                nibble_pack(&blk[2..], a);
            }
            Format::Q5_1 => {
                b.copy_from_slice(&blk[..8]);
                nibble_pack(&blk[8..], a);
            }
            Format::NVFP4 => {
                b.copy_from_slice(&blk[..4]);
                nvfp4_reorder(&blk[4..], a);
            }
            _ => unreachable!(),
        }
    }
    out
}

/// The inverse of [`pack`] (tests).
#[cfg(test)]
pub(crate) fn unpack(f: Format, dev: &[u8], rows: usize, nblocks: usize) -> Vec<u8> {
    let (ab, bb) = pair_regions(f).expect("a pair format");
    let gb = f.block_bytes();
    let mut out = vec![0u8; nblocks * gb];
    if rows == 0 {
        return out;
    }
    let nb = nblocks / rows;
    let (ra, rb) = dev.split_at(ab * nblocks);
    for (i, blk) in out.chunks_exact_mut(gb).enumerate() {
        let k = tiled_index(rows, nb, i / nb, i % nb);
        let a = &ra[ab * k..ab * (k + 1)];
        let b = &rb[bb * k..bb * (k + 1)];
        match f {
            Format::Q8_0 => {
                blk[..2].copy_from_slice(b);
                blk[2..].copy_from_slice(a);
            }
            Format::IQ4_NL => {
                blk[..2].copy_from_slice(b);
                nibble_unpack(a, &mut blk[2..]);
            }
            Format::Q5_1 => {
                blk[..8].copy_from_slice(b);
                nibble_unpack(a, &mut blk[8..]);
            }
            Format::NVFP4 => {
                blk[..4].copy_from_slice(b);
                nvfp4_unreorder(a, &mut blk[4..]);
            }
            _ => unreachable!(),
        }
    }
    out
}

/// u32 words per token of a q8_0 / q8_1 activation row of `nb` blocks (a multiple of 4).
pub(crate) fn act_stride(act: Format, nb: usize) -> usize {
    let scales = if act == Format::Q8_1 { 2 } else { 1 };
    (nb * (8 + scales)).next_multiple_of(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair format's layout inverts exactly, for part shapes with and without a short
    /// last tile, and is a permutation of the bytes (sizes add up).
    #[test]
    fn pack_roundtrips() {
        let mut rng = qkern_parity::inputs::Rng::new(0x9e37_79b9_7f4a_7c15);
        for f in [Format::Q8_0, Format::Q5_1, Format::IQ4_NL, Format::NVFP4] {
            for (rows, nb) in [(1, 1), (3, 2), (16, 1), (17, 3), (40, 5), (33, 1)] {
                let n = rows * nb;
                let ggml: Vec<u8> = (0..n * f.block_bytes()).map(|_| rng.next_u64() as u8).collect();
                let dev = pack(f, &ggml, rows);
                assert_eq!(dev.len(), pair_bytes(f, n));
                assert!(pair_bytes(f, n) - n * f.block_bytes() < 16, "{f}: no byte added");
                assert_eq!(unpack(f, &dev, rows, n), ggml, "{f} rows={rows} nb={nb}");
            }
        }
    }

    /// `tiled_index` is a bijection onto 0..rows*nb, and a tile's rows are adjacent per block.
    #[test]
    fn tiled_index_is_a_bijection() {
        for (rows, nb) in [(1, 4), (16, 3), (17, 2), (50, 7)] {
            let mut seen = vec![false; rows * nb];
            for r in 0..rows {
                for b in 0..nb {
                    let k = tiled_index(rows, nb, r, b);
                    assert!(!seen[k]);
                    seen[k] = true;
                }
            }
            assert!(seen.iter().all(|&x| x));
            assert_eq!(tiled_index(rows, nb, 0, 1), rows.min(TILE));
        }
    }
}
