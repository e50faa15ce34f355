//! Device layouts of weights and activations, and the conversions to and from ggml's bytes.
//! Pure host code (no driver needed): the backend and the emulator tests both use it.
//!
//! **Weights.** Formats whose ggml block is only 2-byte aligned (a leading fp16 `d` before
//! 4-byte data, or q6_K's trailing `d`) are stored *split*: every block's other bytes
//! ("body", a multiple of 4 bytes) in ggml order, then the `d` of every block as one fp16
//! array (same block order). That keeps every 32-bit load aligned and adds no bytes. nvfp4
//! is split too: 32-byte bodies (the sub-blocks in the order 0, 2, 1, 3: a row's thread h reads
//! its two sub-blocks with one 16-byte load), then its four UE4M3 scales per block as a u32
//! array. iq4_nl's bodies and iq4_xs's and nvfp4's sub-blocks have their nibbles in element order
//! (`qkern_formats::repack::nibble_seq`). The other formats keep
//! ggml's blocks unchanged.
//!
//! The 32-element formats (q8_0, q5_1, iq4_nl, nvfp4), the K-quants (q4_K, q5_K, q6_K) and
//! iq4_xs are also *tiled*: rows in groups of [`TILE`] (the last group may be shorter, `G`
//! rows), block `b` of the group's rows stored next to each other: block (row, b) is block
//! number `16*g*nb + b*G + row%16` of group `g = row/16` (`tiled_index`). Their matmul kernels
//! give a warp 16 consecutive rows (or fewer, all in one group), so a warp's load of block `b`
//! reads one contiguous span instead of 16 rows' pieces. The IQ2/IQ3 formats are tiled too
//! (since session 31), or row-major (block `row*nb + b`) with `QKERN_CUDA_IQ_TILE=0`
//! ([`iq_tile`]).
//!
//! **Activations.** Regions, each `[capacity][...]` and 256-byte aligned: int8 quants
//! `[t][cols]`; `d` as fp16 (the bits ggml stores) and as f32 (what the matmul reads)
//! `[t][blocks]`; q8_1 adds `s` as fp16 and f32; q8_K stores `d` as f32 and `bsums` as
//! i16 `[t][blocks][16]`.

use qkern_formats::repack::{nibble_seq, nibble_unseq, nvfp4_reorder, nvfp4_unreorder};
use qkern_formats::{Format, ShapeError};

/// How a weight format is laid out on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeightLayout {
    pub format: Format,
    /// `d` moved to a separate fp16 array.
    pub split: bool,
    /// Offset of the fp16 `d` inside ggml's block (split formats).
    pub d_offset: usize,
    /// Bytes per block of the `d` array (split formats): 2 (an fp16 `d`), 4 (nvfp4's four
    /// UE4M3 scales, whose 32 quant bytes are stored with the sub-blocks in the order 0, 2, 1,
    /// 3, so that thread h of a row reads its sub-blocks h and h + 2 at bytes 16h..16h+16).
    pub d_bytes: usize,
    /// Bytes per block in the body region.
    pub body: usize,
    /// Rows per tile (1: row-major).
    pub tile: usize,
    /// iq4_nl, iq4_xs and nvfp4: each (sub-)block's `qs` bytes with their nibbles in element
    /// order (`qkern_formats::repack::nibble_seq`): a qs word is two whole lanes, looked up
    /// without separating low and high nibbles, and a row's thread h reads its 4 lanes as 8
    /// contiguous bytes.
    pub seq: bool,
}

/// Offset of `qs` in an iq4_xs block (after d, scales_h, scales_l[4]).
const IQ4XS_QS: usize = 8;

/// Rows per tile of the tiled formats (`QK_TILE` in kernels/common.cuh).
pub const TILE: usize = 16;

/// Device block number of block `b` of row `row` (`qk_wblk` in kernels/common.cuh).
pub fn tiled_index(rows: usize, nb: usize, row: usize, b: usize, tile: usize) -> usize {
    let g0 = row - row % tile;
    let g = tile.min(rows - g0);
    g0 * nb + b * g + (row - g0)
}

impl WeightLayout {
    pub fn of(format: Format) -> Result<WeightLayout, ShapeError> {
        if !format.is_weight() {
            return Err(ShapeError::Role { format, role: "quantized weight" });
        }
        let bb = format.block_bytes();
        let (split, d_offset) = match format {
            Format::Q8_0
            | Format::IQ2_XXS
            | Format::IQ2_XS
            | Format::IQ2_S
            | Format::IQ3_XXS
            | Format::IQ3_S
            | Format::IQ4_NL => (true, 0),
            Format::Q6_K => (true, 208),
            Format::NVFP4 => (true, 0),
            _ => (false, 0),
        };
        let d_bytes = if format == Format::NVFP4 { 4 } else { 2 };
        let tile = if matches!(
            format,
            Format::Q8_0
                | Format::Q5_1
                | Format::IQ4_NL
                | Format::NVFP4
                | Format::Q4_K
                | Format::Q5_K
                | Format::Q6_K
                | Format::IQ4_XS
        ) || (format.is_iq_grid() && iq_tile())
        {
            TILE
        } else {
            1
        };
        let seq = matches!(format, Format::IQ4_NL | Format::IQ4_XS | Format::NVFP4);
        let body = if split { bb - d_bytes } else { bb };
        Ok(WeightLayout { format, split, d_offset, d_bytes, body, tile, seq })
    }

    /// Device bytes of `nblocks` blocks: bodies, then (split) the `d` array.
    pub fn device_bytes(&self, nblocks: usize) -> usize {
        self.body * nblocks + if self.split { self.d_bytes * nblocks } else { 0 }
    }

    /// Offset of the `d` array in a buffer of `nblocks` blocks.
    pub fn d_region(&self, nblocks: usize) -> usize {
        self.body * nblocks
    }

    /// Whether a tile of rows of `row_bytes` ggml bytes each fits in 4 GiB: the kernels step
    /// through a row's blocks with 32-bit offsets inside its tile (common.cuh `qk_wstep`).
    pub fn tile_fits(&self, row_bytes: usize) -> bool {
        (self.tile as u64).saturating_mul(row_bytes as u64) <= u32::MAX as u64
    }

    /// Offset of the nibble bytes (`seq`) in a device body: iq4_nl's split body is its 16 qs
    /// bytes; iq4_xs's block has d, scales_h and scales_l[4] first.
    fn qs_offset(&self) -> usize {
        if self.format == Format::IQ4_XS { IQ4XS_QS } else { 0 }
    }

    /// Bytes of one `nibble_seq` span: an nvfp4 sub-block (8), else a 32-element (sub-)block.
    fn seq_bytes(&self) -> usize {
        if self.format == Format::NVFP4 { 8 } else { 16 }
    }

    /// Whether the device bytes differ from ggml's (split or tiled).
    pub fn repacked(&self) -> bool {
        self.split || self.tile > 1
    }

    /// ggml blocks (validated length, `rows` rows) to the device layout.
    pub fn pack(&self, ggml: &[u8], rows: usize) -> Vec<u8> {
        let bb = self.format.block_bytes();
        let n = ggml.len() / bb;
        if !self.repacked() || rows == 0 {
            return ggml[..n * bb].to_vec();
        }
        let nb = n / rows;
        let mut out = vec![0u8; self.device_bytes(n)];
        let (bodies, ds) = out.split_at_mut(self.body * n);
        for (i, blk) in ggml.chunks_exact(bb).enumerate() {
            let k = tiled_index(rows, nb, i / nb, i % nb, self.tile);
            let body = &mut bodies[k * self.body..(k + 1) * self.body];
            if self.split {
                let (o, db) = (self.d_offset, self.d_bytes);
                body[..o].copy_from_slice(&blk[..o]);
                body[o..].copy_from_slice(&blk[o + db..]);
                ds[db * k..db * (k + 1)].copy_from_slice(&blk[o..o + db]);
                if self.format == Format::NVFP4 {
                    nvfp4_reorder(&blk[4..], body);
                }
            } else {
                body.copy_from_slice(blk);
            }
            if self.seq {
                for sb in body[self.qs_offset()..].chunks_exact_mut(self.seq_bytes()) {
                    let qs = sb.to_vec();
                    nibble_seq(&qs, sb);
                }
            }
        }
        out
    }

    /// The device layout back to ggml blocks (tests).
    pub fn unpack(&self, dev: &[u8], rows: usize, nblocks: usize) -> Vec<u8> {
        let bb = self.format.block_bytes();
        if !self.repacked() || rows == 0 {
            return dev[..nblocks * bb].to_vec();
        }
        let nb = nblocks / rows;
        let mut out = vec![0u8; nblocks * bb];
        let (bodies, ds) = dev.split_at(self.body * nblocks);
        for (i, blk) in out.chunks_exact_mut(bb).enumerate() {
            let k = tiled_index(rows, nb, i / nb, i % nb, self.tile);
            let body = &bodies[k * self.body..(k + 1) * self.body];
            if self.split {
                let (o, db) = (self.d_offset, self.d_bytes);
                blk[..o].copy_from_slice(&body[..o]);
                blk[o + db..].copy_from_slice(&body[o..]);
                if self.format == Format::NVFP4 {
                    nvfp4_unreorder(body, &mut blk[4..]);
                }
                blk[o..o + db].copy_from_slice(&ds[db * k..db * (k + 1)]);
            } else {
                blk.copy_from_slice(body);
            }
            if self.seq {
                // in place: the qs bytes sit after d in ggml's block either way (iq4_nl: d,
                // qs[16]; iq4_xs: d, scales, qs[128]; nvfp4: d[4], qs[32], its sub-blocks back in
                // ggml's order, each still in element order)
                let qg = self.qs_offset() + if self.split { self.d_bytes } else { 0 };
                for q in blk[qg..].chunks_exact_mut(self.seq_bytes()) {
                    let d = q.to_vec();
                    nibble_unseq(&d, q);
                }
            }
        }
        out
    }
}

/// `QKERN_CUDA_IQ_TILE` (`0` or `1`, default 1): whether the IQ2/IQ3 formats' split bodies and
/// `d` arrays are tiled as the other formats' blocks are (kernels/common.cuh `QK_IQ_TILE`).
/// Tiled, a warp's load of block `b` reads one contiguous span of its 16 rows, as in the other
/// formats. On the H100 (benches/results/2026-12-06-session31 run1-ciqtile, kernel-only GB/s,
/// row-major / tiled, two interleaved rounds alike) the one-token lane kernels read iq2_xxs 1561
/// / 1934, iq2_xs 1140 / 1855, iq2_s 1335 / 1740, iq3_xxs 1647 / 2272, iq3_s 1265 / 1955, and
/// the fp16 tensor cores 1114 / 1167, 1175 / 1234, 989 / 1288, 1506 / 1520, 1312 / 1436 (NT 2).
/// `0` keeps them row-major.
pub fn iq_tile_from_env() -> Result<bool, qkern_formats::env::EnvError> {
    Ok(qkern_formats::env::knob("QKERN_CUDA_IQ_TILE", "0 or 1", qkern_formats::env::switch)?.unwrap_or(IQ_TILE_DEFAULT))
}

/// [`iq_tile_from_env`]'s value where `QKERN_CUDA_IQ_TILE` is unset: tiled.
pub const IQ_TILE_DEFAULT: bool = true;

/// The process's [`iq_tile_from_env`], read once: the weight layouts and the NVRTC (and
/// emulator) options ([`iq_tile_define`]) take the same value. An unknown value reads as the
/// default here; the backend refuses it when it starts, so no kernel runs with it.
pub fn iq_tile() -> bool {
    static T: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *T.get_or_init(|| iq_tile_from_env().unwrap_or(IQ_TILE_DEFAULT))
}

/// The option that builds the kernels for this process's IQ2/IQ3 layout ([`iq_tile`]).
pub fn iq_tile_define() -> String {
    format!("-DQK_IQ_TILE={}", iq_tile() as u32)
}

const ALIGN: usize = 256;

fn align(x: usize) -> usize {
    x.div_ceil(ALIGN) * ALIGN
}

/// How the q8_K quant words of an activation buffer are interleaved by token (kernels/common.cuh
/// `QK_Q8K_QUAD`): the host builds every [`ActLayout`] and the NVRTC options of the process from
/// the same value ([`Q8kLayout::current`], [`Q8kLayout::define`]), so the two always agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Q8kLayout {
    /// Word `e4` of token `t` at word `e4 * capw + t`: one 16-byte load brings 4 tokens' word.
    Words,
    /// Words `4q..4q + 3` of token `t` at quad `q * capw + t`, as the q8_0 / q8_1 quads: one
    /// 16-byte load brings the 4 consecutive words (lanes) a thread of the 256-element formats'
    /// lane kernels owns.
    Quads,
}

impl Q8kLayout {
    /// Quads: faster at one token for every q8_K format and on the tensor cores for the IQ
    /// formats, q6_K and iq4_xs (H100, session 21 run2, words against quads in one machine
    /// session: q4_K NT 1 2747 -> 2897 GB/s, iq4_xs 2658 -> 2753, iq3_s's tensor cores 1178 ->
    /// 1257); 2-5 % slower at NT 2 on q4_K's, q5_K's and q6_K's lanes. `QKERN_CUDA_Q8K` overrides it.
    pub const DEFAULT: Q8kLayout = Q8kLayout::Quads;

    /// `words` or `quads`.
    pub fn parse(s: &str) -> Option<Q8kLayout> {
        match s {
            "words" => Some(Q8kLayout::Words),
            "quads" => Some(Q8kLayout::Quads),
            _ => None,
        }
    }

    /// `QKERN_CUDA_Q8K` (`words` or `quads`), or [`Q8kLayout::DEFAULT`] where unset; an unknown
    /// value is an error.
    pub fn from_env() -> Result<Q8kLayout, qkern_formats::env::EnvError> {
        Ok(qkern_formats::env::knob("QKERN_CUDA_Q8K", "words or quads", Q8kLayout::parse)?
            .unwrap_or(Q8kLayout::DEFAULT))
    }

    /// The process's layout: [`Q8kLayout::from_env`], read once (kernels are compiled once per
    /// process). An unknown value reads as the default here; the backend refuses it when it
    /// starts, so no kernel runs with it.
    pub fn current() -> Q8kLayout {
        static L: std::sync::OnceLock<Q8kLayout> = std::sync::OnceLock::new();
        *L.get_or_init(|| Q8kLayout::from_env().unwrap_or(Q8kLayout::DEFAULT))
    }

    /// The NVRTC (and emulator) option that builds the kernels for this layout.
    pub fn define(self) -> String {
        format!("-DQK_Q8K_QUAD={}", (self == Q8kLayout::Quads) as u32)
    }
}

/// Region offsets of an activation buffer. Token-interleaved, in units of [`ActLayout::quant_unit`]
/// bytes: q8_0 / q8_1 quant quad `q` (16 bytes, elements `16*q..16*q+16`) of token t is quad
/// `q * capw + t` of the `qs` region, so that a matmul thread of their weight formats, which
/// owns 4 consecutive lanes (words) of a block, reads them with one 16-byte load per token;
/// q8_K quant word `e4` (elements `4*e4..4*e4+4`) is word `e4 * capw + t`, so that one 16-byte
/// load brings 4 tokens' words (its kernels, iq4_xs's word pairs and the K-quants' lane-at-a-
/// time loops, measured faster so: benches/results/2026-12-04-h200-session7/NOTES.md), or in
/// quads as q8_0's ([`Q8kLayout`]: since session 10 those kernels' threads own 4 consecutive
/// lanes too). Token
/// t's scale of block `b` is element `b * capw + t` of the `d` regions; q8_K `bsums` stay per
/// token (`[t][blocks][16]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActLayout {
    pub format: Format,
    /// The q8_K words' interleave (q8_0 and q8_1 are always in quads).
    pub q8k: Q8kLayout,
    pub cols: usize,
    pub capacity: usize,
    /// Token stride: capacity rounded up to a multiple of 4.
    pub capw: usize,
    /// Activation blocks per token.
    pub blocks: usize,
    pub qs: usize,
    pub d16: usize,
    pub d32: usize,
    /// q8_1: `s` fp16; q8_K: `bsums` (i16 x 16 per block, per token). 0 when unused.
    pub x16: usize,
    /// q8_1: `s` f32. 0 when unused.
    pub x32: usize,
    /// Bytes in all (with slack after the last region for the kernels' whole-vector reads).
    pub total: usize,
}

impl ActLayout {
    /// The layout of this process's kernels ([`Q8kLayout::current`]).
    pub fn new(format: Format, cols: usize, capacity: usize) -> Result<ActLayout, ShapeError> {
        Self::with_q8k(format, cols, capacity, Q8kLayout::current())
    }

    /// With the q8_K words as `q8k` says.
    pub fn with_q8k(format: Format, cols: usize, capacity: usize, q8k: Q8kLayout) -> Result<ActLayout, ShapeError> {
        if !format.is_activation() {
            return Err(ShapeError::Role { format, role: "activation" });
        }
        if capacity == 0 {
            return Err(ShapeError::ZeroTokens);
        }
        format.row_bytes(cols)?;
        let blocks = cols / format.block_elems();
        let capw = capacity.checked_next_multiple_of(4).ok_or(ShapeError::Overflow)?;
        let ov = |a: Option<usize>| a.ok_or(ShapeError::Overflow);
        let n = ov(blocks.checked_mul(capw))?;
        let qs = 0;
        // + 64: a kernel reading 8 tokens' words at the last position may run past capw
        let mut at = align(ov(cols.checked_mul(capw))? + 64);
        let (d16, d32, x16, x32);
        match format {
            Format::Q8_K => {
                d16 = 0;
                d32 = at;
                at = align(at + 4 * n + 64);
                x16 = at;
                // + 8 tokens: kernels read the bsums of all NTM tokens of a chunk
                at = align(at + 32 * blocks * (capw + 8));
                x32 = 0;
            }
            _ => {
                d16 = at;
                at = align(at + 2 * n);
                d32 = at;
                at = align(at + 4 * n + 64);
                if format == Format::Q8_1 {
                    x16 = at;
                    at = align(at + 2 * n);
                    x32 = at;
                    at = align(at + 4 * n + 64);
                } else {
                    x16 = 0;
                    x32 = 0;
                }
            }
        }
        Ok(ActLayout { format, q8k, cols, capacity, capw, blocks, qs, d16, d32, x16, x32, total: at })
    }

    /// Bytes of one token's quants that stay together in the `qs` region: 16 (quads) for q8_0
    /// and q8_1, 4 (words) or 16 for q8_K, as `q8k` says.
    pub fn unit_of(format: Format, q8k: Q8kLayout) -> usize {
        if format == Format::Q8_K && q8k == Q8kLayout::Words { 4 } else { 16 }
    }

    /// [`ActLayout::unit_of`] with this process's q8_K layout ([`Q8kLayout::current`]).
    pub fn quant_unit(format: Format) -> usize {
        Self::unit_of(format, Q8kLayout::current())
    }

    /// Byte offset of quant word `e4` (elements 4 e4..4 e4 + 4) of token `t`.
    fn qword(&self, t: usize, e4: usize) -> usize {
        let u = Self::unit_of(self.format, self.q8k);
        let per = u / 4; // words per unit
        self.qs + u * ((e4 / per) * self.capw + t) + 4 * (e4 % per)
    }

    /// ggml activation rows (`tokens` rows, validated) to the region image of a whole
    /// buffer (`total` bytes).
    pub fn from_ggml(&self, ggml: &[u8], tokens: usize) -> Vec<u8> {
        let mut img = vec![0u8; self.total];
        let bb = self.format.block_bytes();
        let be = self.format.block_elems();
        for (i, blk) in ggml.chunks_exact(bb).take(tokens * self.blocks).enumerate() {
            let (t, b) = (i / self.blocks, i % self.blocks);
            let s = b * self.capw + t;
            let (qo, nq) = match self.format {
                Format::Q8_K => (4, 256),
                Format::Q8_1 => (4, 32),
                _ => (2, 32),
            };
            for w in 0..nq / 4 {
                let o = self.qword(t, b * be / 4 + w);
                img[o..o + 4].copy_from_slice(&blk[qo + 4 * w..qo + 4 * w + 4]);
            }
            match self.format {
                Format::Q8_K => {
                    img[self.d32 + 4 * s..self.d32 + 4 * s + 4].copy_from_slice(&blk[0..4]);
                    img[self.x16 + 32 * i..self.x16 + 32 * i + 32].copy_from_slice(&blk[260..292]);
                }
                _ => {
                    img[self.d16 + 2 * s..self.d16 + 2 * s + 2].copy_from_slice(&blk[0..2]);
                    let d = half::f16::from_le_bytes([blk[0], blk[1]]).to_f32();
                    img[self.d32 + 4 * s..self.d32 + 4 * s + 4].copy_from_slice(&d.to_le_bytes());
                    if self.format == Format::Q8_1 {
                        img[self.x16 + 2 * s..self.x16 + 2 * s + 2].copy_from_slice(&blk[2..4]);
                        let sv = half::f16::from_le_bytes([blk[2], blk[3]]).to_f32();
                        img[self.x32 + 4 * s..self.x32 + 4 * s + 4].copy_from_slice(&sv.to_le_bytes());
                    }
                }
            }
        }
        img
    }

    /// The region image of a buffer back to `tokens` ggml rows (`out` validated).
    pub fn to_ggml(&self, img: &[u8], tokens: usize, out: &mut [u8]) {
        let bb = self.format.block_bytes();
        let be = self.format.block_elems();
        for (i, blk) in out.chunks_exact_mut(bb).take(tokens * self.blocks).enumerate() {
            let (t, b) = (i / self.blocks, i % self.blocks);
            let s = b * self.capw + t;
            let (qo, nq) = match self.format {
                Format::Q8_K => (4, 256),
                Format::Q8_1 => (4, 32),
                _ => (2, 32),
            };
            for w in 0..nq / 4 {
                let o = self.qword(t, b * be / 4 + w);
                blk[qo + 4 * w..qo + 4 * w + 4].copy_from_slice(&img[o..o + 4]);
            }
            match self.format {
                Format::Q8_K => {
                    blk[0..4].copy_from_slice(&img[self.d32 + 4 * s..self.d32 + 4 * s + 4]);
                    blk[260..292].copy_from_slice(&img[self.x16 + 32 * i..self.x16 + 32 * i + 32]);
                }
                _ => {
                    blk[0..2].copy_from_slice(&img[self.d16 + 2 * s..self.d16 + 2 * s + 2]);
                    if self.format == Format::Q8_1 {
                        blk[2..4].copy_from_slice(&img[self.x16 + 2 * s..self.x16 + 2 * s + 2]);
                    }
                }
            }
        }
    }

    /// Whether a quant byte of the first `tokens` tokens is -128 (0x80).
    pub fn has_minus_128(&self, img: &[u8], tokens: usize) -> bool {
        (0..self.cols / 4).any(|e4| (0..tokens).any(|t| img[self.qword(t, e4)..self.qword(t, e4) + 4].contains(&0x80)))
    }
}

/// Table word offsets (must match `TAB_*` in kernels/common.cuh).
pub mod tab {
    pub const IQ2XXS: usize = 0;
    pub const IQ2XS: usize = 512;
    pub const IQ2S: usize = 1536;
    pub const IQ3XXS: usize = 3584;
    pub const IQ3S: usize = 3840;
    pub const IQ4NL: usize = 4352;
    pub const FP4: usize = 4356;
    pub const IQ2XXS_SEL: usize = 4360;
    pub const IQ2XS_SEL: usize = 4616;
    pub const IQ2S_SEL: usize = 5128;
    pub const SGN128: usize = 6152;
    pub const SGN256: usize = 6280;
    pub const WORDS: usize = 6536;
}

/// An 8-byte IQ2 grid entry as a byte-permute selector word (kernels/mm_common.cuh `Iq2Sel`):
/// nibble j is the code of byte j, 0 for 0x08, 1 for 0x19, 2 for 0x2b, the only bytes the IQ2
/// grids hold (`iq2_grid_bytes_are_three_values`).
pub fn iq2_sel(entry: u64) -> u32 {
    (0..8).fold(0, |r, j| {
        let code = match (entry >> (8 * j)) as u8 {
            0x08 => 0,
            0x19 => 1,
            _ => 2,
        };
        r | code << (4 * j)
    })
}

/// Bit j of an IQ2 sign byte in bit 2 of nibble j: or-ed with [`iq2_sel`], the selector of
/// the signed bytes (`prmt` of {8, 25, 43} and {-8, -25, -43}).
pub fn iq2_sgn(s: u8) -> u32 {
    (0..8).fold(0, |r, j| r | (((s >> j) & 1) as u32) << (4 * j + 2))
}

/// The lookup tables every kernel module reads, as little-endian u32 words.
pub fn tables() -> Vec<u32> {
    use qkern_formats::tables as t;
    let mut v = Vec::with_capacity(tab::WORDS);
    let push64 = |v: &mut Vec<u32>, g: &[u64]| {
        for &x in g {
            v.push(x as u32);
            v.push((x >> 32) as u32);
        }
    };
    push64(&mut v, &t::IQ2XXS_GRID);
    debug_assert_eq!(v.len(), tab::IQ2XS);
    push64(&mut v, &t::IQ2XS_GRID);
    debug_assert_eq!(v.len(), tab::IQ2S);
    push64(&mut v, &t::IQ2S_GRID);
    debug_assert_eq!(v.len(), tab::IQ3XXS);
    v.extend_from_slice(&t::IQ3XXS_GRID);
    v.extend_from_slice(&t::IQ3S_GRID);
    debug_assert_eq!(v.len(), tab::IQ4NL);
    let push16 = |v: &mut Vec<u32>, k: &[i8; 16]| {
        for c in k.chunks_exact(4) {
            v.push(u32::from_le_bytes([c[0] as u8, c[1] as u8, c[2] as u8, c[3] as u8]));
        }
    };
    push16(&mut v, &t::KVALUES_IQ4NL);
    push16(&mut v, &t::KVALUES_FP4);
    debug_assert_eq!(v.len(), tab::IQ2XXS_SEL);
    for g in [&t::IQ2XXS_GRID[..], &t::IQ2XS_GRID[..], &t::IQ2S_GRID[..]] {
        v.extend(g.iter().map(|&e| iq2_sel(e)));
    }
    debug_assert_eq!(v.len(), tab::SGN128);
    v.extend(t::KSIGNS_IQ2XS.iter().map(|&k| iq2_sgn(k)));
    v.extend((0..=255u8).map(iq2_sgn));
    debug_assert_eq!(v.len(), tab::WORDS);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_the_kernel_offsets() {
        let t = tables();
        assert_eq!(t.len(), tab::WORDS);
        let src = include_str!("../kernels/common.cuh");
        for (name, off) in [
            ("TAB_IQ2XXS", tab::IQ2XXS),
            ("TAB_IQ2XS", tab::IQ2XS),
            ("TAB_IQ2S", tab::IQ2S),
            ("TAB_IQ3XXS", tab::IQ3XXS),
            ("TAB_IQ3S", tab::IQ3S),
            ("TAB_IQ4NL", tab::IQ4NL),
            ("TAB_FP4", tab::FP4),
            ("TAB_IQ2XXS_SEL", tab::IQ2XXS_SEL),
            ("TAB_IQ2XS_SEL", tab::IQ2XS_SEL),
            ("TAB_IQ2S_SEL", tab::IQ2S_SEL),
            ("TAB_SGN128", tab::SGN128),
            ("TAB_SGN256", tab::SGN256),
            ("TAB_WORDS", tab::WORDS),
        ] {
            let line = format!("#define {name} {off}");
            assert!(src.lines().any(|l| l.starts_with(&(line.clone() + " ")) || l == line), "{line}");
        }
    }

    /// The kernels negate grid bytes with `(g ^ m) + (m & 0x01010101)`, valid only for nonzero bytes.
    #[test]
    fn grid_bytes_are_nonzero() {
        use qkern_formats::tables as t;
        let all64 = t::IQ2XXS_GRID.iter().chain(&t::IQ2XS_GRID).chain(&t::IQ2S_GRID);
        for &g in all64 {
            assert!(g.to_le_bytes().iter().all(|&b| b != 0));
        }
        for &g in t::IQ3XXS_GRID.iter().chain(&t::IQ3S_GRID) {
            assert!(g.to_le_bytes().iter().all(|&b| b != 0));
        }
    }

    /// The IQ2 grids hold only the bytes 8, 25 and 43, so that a selector of codes 0-2 (and
    /// a sign in bit 2) picks every signed grid byte from {8, 25, 43, -8, -25, -43}.
    #[test]
    fn iq2_grid_bytes_are_three_values() {
        use qkern_formats::tables as t;
        let prmt = |a: u32, b: u32, s: u32| {
            let v = (b as u64) << 32 | a as u64;
            (0..4).fold(0u32, |r, k| r | (((v >> (8 * ((s >> (4 * k)) & 7))) & 0xff) as u32) << (8 * k))
        };
        let (pos, neg) = (0x002b_1908u32, 0x00d5_e7f8u32);
        for &g in t::IQ2XXS_GRID.iter().chain(&t::IQ2XS_GRID).chain(&t::IQ2S_GRID) {
            assert!(g.to_le_bytes().iter().all(|b| [0x08, 0x19, 0x2b].contains(b)), "{g:#x}");
            for s in [0u8, 0x5a, 0xff, 0x81] {
                let sel = iq2_sel(g) | iq2_sgn(s);
                let want: Vec<u8> = g
                    .to_le_bytes()
                    .iter()
                    .enumerate()
                    .map(|(j, &b)| if (s >> j) & 1 == 1 { b.wrapping_neg() } else { b })
                    .collect();
                let got = [prmt(pos, neg, sel).to_le_bytes(), prmt(pos, neg, sel >> 16).to_le_bytes()].concat();
                assert_eq!(got, want, "{g:#x} signs {s:#x}");
            }
        }
        let t = tables();
        assert_eq!(t[tab::IQ2XS_SEL + 3], iq2_sel(t::IQ2XS_GRID[3]));
        assert_eq!(t[tab::SGN128 + 5], iq2_sgn(t::KSIGNS_IQ2XS[5]));
        assert_eq!(t[tab::SGN256 + 0x80], iq2_sgn(0x80));
    }

    #[test]
    fn tiled_index_is_a_permutation() {
        for (rows, nb) in [(1, 1), (15, 3), (16, 4), (17, 2), (300, 5)] {
            let mut seen = vec![false; rows * nb];
            for r in 0..rows {
                for b in 0..nb {
                    let k = tiled_index(rows, nb, r, b, TILE);
                    assert!(!seen[k]);
                    seen[k] = true;
                }
            }
        }
    }

    #[test]
    fn tile_fits_4gib() {
        let l = WeightLayout::of(Format::Q6_K).unwrap();
        let row = |cols: usize| Format::Q6_K.row_bytes(cols).unwrap();
        assert!(l.tile_fits(row(1 << 20)));
        // 16 rows of 2^28 columns: 16 * 2^20 blocks * 210 bytes = 3.3 GiB; of 2^29: 6.6 GiB
        assert!(l.tile_fits(row(1 << 28)));
        assert!(!l.tile_fits(row(1 << 29)));
        assert!(l.tile_fits(u32::MAX as usize / TILE));
        assert!(!l.tile_fits(u32::MAX as usize / TILE + 1));
    }

    #[test]
    fn weight_pack_roundtrip() {
        for f in Format::WEIGHTS {
            let l = WeightLayout::of(f).unwrap();
            assert_eq!(l.body % 4, 0, "{f}");
            for (rows, nb) in [(1, 5), (5, 1), (37, 3), (16, 2)] {
                let n = rows * nb;
                let bytes: Vec<u8> = (0..n * f.block_bytes()).map(|i| (i * 7 + 3) as u8).collect();
                let dev = l.pack(&bytes, rows);
                assert_eq!(dev.len(), l.device_bytes(n));
                assert_eq!(l.unpack(&dev, rows, n), bytes, "{f}");
            }
        }
    }

    /// The IQ2/IQ3 formats tiled (`QKERN_CUDA_IQ_TILE=1`): bodies and `d` of block (row, b) at
    /// `tiled_index`, and back.
    #[test]
    fn iq_tiled_pack_roundtrip() {
        for f in Format::WEIGHTS.into_iter().filter(|f| f.is_iq_grid()) {
            let l = WeightLayout { tile: TILE, ..WeightLayout::of(f).unwrap() };
            let bb = f.block_bytes();
            for (rows, nb) in [(1, 5), (17, 2), (37, 3), (16, 1)] {
                let n = rows * nb;
                let bytes: Vec<u8> = (0..n * bb).map(|i| (i * 7 + 3) as u8).collect();
                let dev = l.pack(&bytes, rows);
                assert_eq!(dev.len(), l.device_bytes(n));
                for (r, b) in [(0, 0), (rows - 1, nb - 1), (rows / 2, nb / 2)] {
                    let k = tiled_index(rows, nb, r, b, TILE);
                    let blk = &bytes[(r * nb + b) * bb..][..bb];
                    assert_eq!(&dev[k * l.body..][..l.body], &blk[2..], "{f} body ({r}, {b})");
                    assert_eq!(&dev[l.d_region(n) + 2 * k..][..2], &blk[..2], "{f} d ({r}, {b})");
                }
                assert_eq!(l.unpack(&dev, rows, n), bytes, "{f}");
            }
        }
    }

    #[test]
    fn q8k_quads_sit_as_q8_0s() {
        let (cols, cap) = (512, 5);
        let w = ActLayout::with_q8k(Format::Q8_K, cols, cap, Q8kLayout::Words).unwrap();
        let q = ActLayout::with_q8k(Format::Q8_K, cols, cap, Q8kLayout::Quads).unwrap();
        assert_eq!((w.capw, w.total), (q.capw, q.total));
        for (t, e4) in [(0, 0), (1, 0), (0, 1), (3, 6), (4, 127)] {
            assert_eq!(w.qword(t, e4), 4 * (e4 * w.capw + t));
            assert_eq!(q.qword(t, e4), 16 * ((e4 / 4) * q.capw + t) + 4 * (e4 % 4));
        }
        assert_eq!(Q8kLayout::Words.define(), "-DQK_Q8K_QUAD=0");
        assert_eq!(Q8kLayout::Quads.define(), "-DQK_Q8K_QUAD=1");
        assert_eq!(Q8kLayout::parse("quads"), Some(Q8kLayout::Quads));
        assert_eq!(Q8kLayout::parse("quad"), None);
    }

    #[test]
    fn act_roundtrip() {
        for (f, q8k) in Format::ACTIVATIONS.into_iter().flat_map(|f| [(f, Q8kLayout::Words), (f, Q8kLayout::Quads)]) {
            let cols = 512;
            let l = ActLayout::with_q8k(f, cols, 3, q8k).unwrap();
            let rb = f.row_bytes(cols).unwrap();
            let mut bytes: Vec<u8> = (0..2 * rb).map(|i| (i * 13 + 1) as u8).collect();
            // keep fp16 scales finite-ish is not needed: bits are copied
            let img = l.from_ggml(&bytes, 2);
            let mut back = vec![0u8; 2 * rb];
            l.to_ggml(&img, 2, &mut back);
            assert_eq!(back, bytes, "{f}");
            bytes.truncate(rb);
        }
    }
}
