//! Device layouts of the "pair" formats (q8_0, q5_1, iq4_nl, nvfp4), iq4_xs and q6_K (and, with
//! [`crate::Tuning::ktile`], q4_K, q5_K and the IQ2/IQ3 formats), and of the pair formats' q8_0 /
//! q8_1 activations, and the exact conversions from and to ggml's bytes.
//! Pure host code.
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
//!   - iq4_xs (128 bytes, [`iq4xs_pack`]): each sub-block's 16 `qs` bytes with their nibbles in
//!     element order (`nibble_seq`: byte m holds elements 2m, 2m + 1), as 8 16-byte elements,
//!     element `2j + h` holding bytes `8h..8h+8` of sub-block `2j`, then of sub-block `2j + 1`.
//!     Its thread-pair kernel (`kp_iq4_xs.wgsl`: invocation h owns AVX2 lanes 4h..4h+3 of every
//!     sub-block) reads its share with 4 16-byte loads, the pair 32 contiguous bytes per load,
//!     and a lane's 4 kvalues with 2 byte lookups. In ggml's blocks (136 bytes, so only 8-byte
//!     aligned) it took 8 8-byte loads.
//!   - q6_K (208 bytes, [`q6k_src`]): `ql` and `qh` as 12 16-byte elements, element `2m + h`
//!     the 16 bytes invocation h of its thread-pair kernel (`kp_q6_k.wgsl`) reads as its m-th
//!     run, then the 16 `scales`: 7 16-byte loads per invocation where ggml's 2-byte aligned
//!     blocks took 20 word loads.
//! - region B, `b_bytes` per block, after region A: q8_0, iq4_nl and q6_K the fp16 `d` (2
//!   bytes), q5_1 the words `d | m << 16` and `qh` (8 bytes), nvfp4 the four UE4M3 scales (4
//!   bytes), iq4_xs its 8 header bytes (`d`, `scales_h`, `scales_l`).
//!
//! No byte is added (region B is padded to 16 bytes at its end).
//!
//! With [`crate::Tuning::ktile`] q4_K and q5_K are tiled too, their blocks whole (144 and 176
//! bytes, both multiples of 16) in the same tiled order ([`pack_whole`]), as the CUDA backend
//! stores them; and the IQ2/IQ3 formats tiled and split ([`pack_split`]: each block's body, a
//! multiple of 4 bytes, in the tiled order, then the part's fp16 `d`), as the CUDA backend
//! splits them. Without it these keep ggml's blocks, row-major.
//!
//! **Activations (q8_0, q8_1).** Per token a row of `stride` words (a multiple of 4): the
//! int8 quants of every block (8 words per block, block b at word 8b), then the scales `d` of
//! every block as exact f32 (`nb` words), then (q8_1) the sums `s` as f32. Invocation h of a
//! weight row reads its 16 quant bytes of a block with one 16-byte load. q8_K keeps ggml's
//! 292-byte blocks.

use qkern_formats::Format;
use qkern_formats::repack::{nibble_pack, nibble_seq, nvfp4_reorder};
#[cfg(test)]
use qkern_formats::repack::{nibble_unpack, nibble_unseq, nvfp4_unreorder};

/// Rows per tile.
pub(crate) const TILE: usize = 16;

/// Device block number of block `b` of row `row` in a part of `rows` rows of `nb` blocks.
pub(crate) fn tiled_index(rows: usize, nb: usize, row: usize, b: usize) -> usize {
    let g0 = row - row % TILE;
    let g = TILE.min(rows - g0);
    g0 * nb + b * g + (row - g0)
}

/// Region sizes of a format stored tiled in two regions (the pair formats, iq4_xs and q6_K):
/// (region A bytes, region B bytes) per block.
pub(crate) fn tiled_regions(f: Format) -> Option<(usize, usize)> {
    Some(match f {
        Format::Q8_0 => (32, 2),
        Format::Q5_1 => (16, 8),
        Format::IQ4_NL => (16, 2),
        Format::NVFP4 => (32, 4),
        Format::IQ4_XS => (128, 8),
        Format::Q6_K => (208, 2),
        _ => return None,
    })
}

/// Whether `f` is a pair format (stored tiled, and run by the pair kernels).
pub(crate) fn is_pair(f: Format) -> bool {
    tiled_regions(f).is_some() && !matches!(f, Format::IQ4_XS | Format::Q6_K)
}

/// Whether `f` is stored tiled in two regions ([`pack`]).
pub(crate) fn is_tiled(f: Format) -> bool {
    tiled_regions(f).is_some()
}

/// The K-quants that [`crate::Tuning::ktile`] stores tiled, whole blocks ([`pack_whole`]):
/// their block bytes (q4_K 144, q5_K 176).
pub(crate) fn ktile_bytes(f: Format) -> Option<usize> {
    matches!(f, Format::Q4_K | Format::Q5_K).then(|| f.block_bytes())
}

/// The IQ2/IQ3 formats, which [`crate::Tuning::ktile`] stores tiled and split
/// ([`pack_split`]): the bytes of a block without its leading fp16 `d` (iq2_xxs 64, iq2_xs 72,
/// iq2_s 80, iq3_xxs 96, iq3_s 108; all multiples of 4).
pub(crate) fn iq_body_bytes(f: Format) -> Option<usize> {
    f.is_iq_grid().then(|| f.block_bytes() - 2)
}

/// Whether [`crate::Tuning::ktile`] changes the device layout of `f` (q4_K, q5_K: [`pack_whole`];
/// the IQ2/IQ3 formats: [`pack_split`]).
pub(crate) fn ktiles(f: Format) -> bool {
    ktile_bytes(f).is_some() || iq_body_bytes(f).is_some()
}

/// `rows` rows of ggml blocks of `f` (a [`ktiles`] format, validated length) in its
/// [`crate::Tuning::ktile`] layout.
pub(crate) fn pack_ktile(f: Format, ggml: &[u8], rows: usize) -> Vec<u8> {
    if iq_body_bytes(f).is_some() { pack_split(f, ggml, rows) } else { pack_whole(f, ggml, rows) }
}

/// `rows` rows of ggml blocks of IQ2/IQ3 format `f` (a validated length), split and tiled, as
/// the CUDA backend splits them: block number k ([`tiled_index`]) has its body (ggml's block
/// after `d`, [`iq_body_bytes`]) at byte `body * k`, and its `d` at byte `2 k` of the `d`
/// region after the part's bodies (4-byte aligned). Every body word is 4-byte aligned, where
/// ggml's blocks (66, 74, 82, 98, 110 bytes) are only 2-byte aligned. No byte is added.
pub(crate) fn pack_split(f: Format, ggml: &[u8], rows: usize) -> Vec<u8> {
    let gb = f.block_bytes();
    let body = iq_body_bytes(f).expect("an IQ2/IQ3 format");
    let mut out = vec![0u8; ggml.len()];
    if rows == 0 {
        return out;
    }
    let n = ggml.len() / gb;
    let nb = n / rows;
    let (ra, rd) = out.split_at_mut(body * n);
    for (i, blk) in ggml.chunks_exact(gb).enumerate() {
        let k = tiled_index(rows, nb, i / nb, i % nb);
        rd[2 * k..2 * k + 2].copy_from_slice(&blk[..2]);
        ra[body * k..body * (k + 1)].copy_from_slice(&blk[2..]);
    }
    out
}

/// `rows` rows of ggml blocks (a validated length) with each block unchanged, in tiled block
/// order ([`tiled_index`]): q4_K and q5_K with [`crate::Tuning::ktile`].
pub(crate) fn pack_whole(f: Format, ggml: &[u8], rows: usize) -> Vec<u8> {
    let gb = f.block_bytes();
    let mut out = vec![0u8; ggml.len()];
    if rows == 0 {
        return out;
    }
    let nb = ggml.len() / gb / rows;
    for (i, blk) in ggml.chunks_exact(gb).enumerate() {
        let k = tiled_index(rows, nb, i / nb, i % nb);
        out[gb * k..gb * (k + 1)].copy_from_slice(blk);
    }
    out
}

/// Device bytes of `nblocks` blocks of tiled format `f` (region B padded to 16 bytes).
pub(crate) fn tiled_bytes(f: Format, nblocks: usize) -> usize {
    let (a, b) = tiled_regions(f).expect("a tiled format");
    a * nblocks + (b * nblocks).next_multiple_of(16)
}

/// Where bytes `8h..8h+8` (h = 0, 1) of iq4_xs sub-block `ib`'s element-order nibbles go in
/// region A's block: element `2 (ib / 2) + h`, its half `ib % 2`.
pub(crate) fn iq4xs_span(ib: usize, h: usize) -> usize {
    16 * (2 * (ib / 2) + h) + 8 * (ib % 2)
}

/// iq4_xs's 128 `qs` bytes (ggml's order) -> region A's block (`out`, 128 bytes).
fn iq4xs_pack(qs: &[u8], out: &mut [u8]) {
    for ib in 0..8 {
        let mut seq = [0u8; 16];
        nibble_seq(&qs[16 * ib..16 * ib + 16], &mut seq);
        for h in 0..2 {
            let d = iq4xs_span(ib, h);
            out[d..d + 8].copy_from_slice(&seq[8 * h..8 * h + 8]);
        }
    }
}

/// The inverse of [`iq4xs_pack`] (tests).
#[cfg(test)]
fn iq4xs_unpack(dev: &[u8], qs: &mut [u8]) {
    for ib in 0..8 {
        let mut seq = [0u8; 16];
        for h in 0..2 {
            let d = iq4xs_span(ib, h);
            seq[8 * h..8 * h + 8].copy_from_slice(&dev[d..d + 8]);
        }
        nibble_unseq(&seq, &mut qs[16 * ib..16 * ib + 16]);
    }
}

/// The ggml byte offset (in `ql`/`qh`, 0..192) of q6_K element `e` (0..12, 16 bytes) of
/// region A's block: element `2m + h`, m = 3j + c, holds bytes 16h..16h+16 of run c of half
/// j: `ql[64j..]` (c = 0), `ql[64j + 32..]` (c = 1), `qh[32j..]` (c = 2).
pub(crate) fn q6k_src(e: usize) -> usize {
    let (m, h) = (e / 2, e % 2);
    let (j, c) = (m / 3, m % 3);
    let run = if c == 2 { 128 + 32 * j } else { 64 * j + 32 * c };
    run + 16 * h
}

/// Where q6_K's region A comes from: (offset in ggml's block, offset in region A, bytes) of
/// each run it is moved in (empty for the other formats), and the offset of the bytes that
/// make region B in ggml's block.
fn region_runs(f: Format) -> (Vec<(usize, usize, usize)>, usize) {
    match f {
        Format::Q6_K => ((0..12).map(|e| (q6k_src(e), 16 * e, 16)).chain([(192, 192, 16)]).collect(), 208),
        _ => (Vec::new(), 0),
    }
}

/// `rows` rows of ggml blocks of tiled format `f` (a validated length) in the device layout.
pub(crate) fn pack(f: Format, ggml: &[u8], rows: usize) -> Vec<u8> {
    let (ab, bb) = tiled_regions(f).expect("a tiled format");
    let gb = f.block_bytes();
    let n = ggml.len() / gb;
    let mut out = vec![0u8; tiled_bytes(f, n)];
    if rows == 0 {
        return out;
    }
    let nb = n / rows;
    let (runs, hdr) = region_runs(f);
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
            Format::IQ4_XS => {
                b.copy_from_slice(&blk[..8]);
                iq4xs_pack(&blk[8..], a);
            }
            Format::Q6_K => {
                b.copy_from_slice(&blk[hdr..hdr + bb]);
                for &(s, d, len) in &runs {
                    a[d..d + len].copy_from_slice(&blk[s..s + len]);
                }
            }
            _ => unreachable!(),
        }
    }
    out
}

/// The inverse of [`pack`] (tests).
#[cfg(test)]
pub(crate) fn unpack(f: Format, dev: &[u8], rows: usize, nblocks: usize) -> Vec<u8> {
    let (ab, bb) = tiled_regions(f).expect("a tiled format");
    let gb = f.block_bytes();
    let mut out = vec![0u8; nblocks * gb];
    if rows == 0 {
        return out;
    }
    let nb = nblocks / rows;
    let (runs, hdr) = region_runs(f);
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
            Format::IQ4_XS => {
                blk[..8].copy_from_slice(b);
                iq4xs_unpack(a, &mut blk[8..]);
            }
            Format::Q6_K => {
                blk[hdr..hdr + bb].copy_from_slice(b);
                for &(s, d, len) in &runs {
                    blk[s..s + len].copy_from_slice(&a[d..d + len]);
                }
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

    /// Every tiled format's layout inverts exactly, for part shapes with and without a short
    /// last tile, and is a permutation of the bytes (sizes add up).
    #[test]
    fn pack_roundtrips() {
        let mut rng = qkern_parity::inputs::Rng::new(0x9e37_79b9_7f4a_7c15);
        for f in [Format::Q8_0, Format::Q5_1, Format::IQ4_NL, Format::NVFP4, Format::IQ4_XS, Format::Q6_K] {
            for (rows, nb) in [(1, 1), (3, 2), (16, 1), (17, 3), (40, 5), (33, 1)] {
                let n = rows * nb;
                let ggml: Vec<u8> = (0..n * f.block_bytes()).map(|_| rng.next_u64() as u8).collect();
                let dev = pack(f, &ggml, rows);
                assert_eq!(dev.len(), tiled_bytes(f, n));
                assert!(tiled_bytes(f, n) - n * f.block_bytes() < 16, "{f}: no byte added");
                assert_eq!(unpack(f, &dev, rows, n), ggml, "{f} rows={rows} nb={nb}");
            }
        }
    }

    /// The whole-block tiling of q4_K and q5_K moves each block to its tiled number, unchanged,
    /// and no other format has it.
    #[test]
    fn pack_whole_moves_blocks_to_their_tiled_numbers() {
        let mut rng = qkern_parity::inputs::Rng::new(0x5151);
        for f in Format::WEIGHTS {
            let Some(gb) = ktile_bytes(f) else { continue };
            assert!(matches!(f, Format::Q4_K | Format::Q5_K) && gb % 16 == 0 && !is_tiled(f), "{f}");
            for (rows, nb) in [(1, 1), (3, 2), (16, 1), (17, 3), (40, 5), (33, 1)] {
                let ggml: Vec<u8> = (0..rows * nb * gb).map(|_| rng.next_u64() as u8).collect();
                let dev = pack_whole(f, &ggml, rows);
                assert_eq!(dev.len(), ggml.len());
                for r in 0..rows {
                    for b in 0..nb {
                        let (i, k) = (r * nb + b, tiled_index(rows, nb, r, b));
                        assert_eq!(dev[gb * k..gb * (k + 1)], ggml[gb * i..gb * (i + 1)], "{f} {rows}x{nb} ({r}, {b})");
                    }
                }
            }
        }
        assert_eq!(
            Format::WEIGHTS.into_iter().filter(|&f| ktile_bytes(f).is_some()).collect::<Vec<_>>(),
            [Format::Q4_K, Format::Q5_K]
        );
    }

    /// The IQ2/IQ3 formats' split tiling moves block (row, b)'s body to its tiled number's
    /// body and its `d` to the `d` region, for part shapes with and without a short last tile;
    /// no other format has it.
    #[test]
    fn pack_split_moves_bodies_and_scales() {
        let mut rng = qkern_parity::inputs::Rng::new(0x1a2b);
        for f in Format::WEIGHTS {
            let Some(body) = iq_body_bytes(f) else { continue };
            assert!(body % 4 == 0 && ktiles(f) && ktile_bytes(f).is_none() && !is_tiled(f), "{f}");
            let gb = f.block_bytes();
            for (rows, nb) in [(1, 1), (3, 2), (16, 1), (17, 3), (40, 5), (33, 1)] {
                let n = rows * nb;
                let ggml: Vec<u8> = (0..n * gb).map(|_| rng.next_u64() as u8).collect();
                let dev = pack_ktile(f, &ggml, rows);
                assert_eq!(dev.len(), ggml.len());
                for r in 0..rows {
                    for b in 0..nb {
                        let (i, k) = (r * nb + b, tiled_index(rows, nb, r, b));
                        let blk = &ggml[gb * i..gb * (i + 1)];
                        assert_eq!(dev[body * k..body * (k + 1)], blk[2..], "{f} {rows}x{nb} ({r}, {b}) body");
                        assert_eq!(
                            dev[body * n + 2 * k..body * n + 2 * k + 2],
                            blk[..2],
                            "{f} {rows}x{nb} ({r}, {b}) d"
                        );
                    }
                }
            }
        }
        assert_eq!(
            Format::WEIGHTS.into_iter().filter(|&f| ktiles(f)).collect::<Vec<_>>(),
            [
                Format::Q4_K,
                Format::Q5_K,
                Format::IQ2_XXS,
                Format::IQ2_XS,
                Format::IQ3_XXS,
                Format::IQ3_S,
                Format::IQ2_S
            ]
        );
    }

    /// iq4_xs's element `2j + h` holds bytes `8h..8h+8` of sub-blocks `2j` and `2j + 1`
    /// (kp_iq4_xs.wgsl's loads), and the spans tile the block's 128 bytes.
    #[test]
    fn iq4xs_spans() {
        for j in 0..4 {
            for h in 0..2 {
                let e = 2 * j + h;
                assert_eq!([iq4xs_span(2 * j, h), iq4xs_span(2 * j + 1, h)], [16 * e, 16 * e + 8]);
            }
        }
        let mut seen = [false; 16];
        (0..8).for_each(|ib| (0..2).for_each(|h| seen[iq4xs_span(ib, h) / 8] = true));
        assert!(seen.iter().all(|&x| x));
    }

    /// Element e of sub-block ib (ggml: the low nibbles of its 16 `qs` bytes are elements
    /// 0..16, the high ones 16..32) is nibble e % 2 of byte `iq4xs_span(ib, e / 16) + (e % 16)
    /// / 2` (dequant.wgsl's `deqp_iq4_xs`): lane L = 4h + i, elements 4L..4L+4, is bytes 2i,
    /// 2i + 1 of span h (kp_iq4_xs.wgsl's `lute`).
    #[test]
    fn iq4xs_lanes_in_element_order() {
        let qs: Vec<u8> = (0..128u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        let mut dev = [0u8; 128];
        iq4xs_pack(&qs, &mut dev);
        for ib in 0..8 {
            let elem = |e: usize| if e < 16 { qs[16 * ib + e] & 15 } else { qs[16 * ib + e - 16] >> 4 };
            for e in 0..32 {
                let (h, m) = (e / 16, (e % 16) / 2);
                let byte = dev[iq4xs_span(ib, h) + m];
                assert_eq!((byte >> (4 * (e % 2))) & 15, elem(e), "ib {ib} element {e}");
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
