//! The committed ggml reference vectors (`parity/vectors/*.qkv`): their binary file format
//! (writer and reader), the case plan every file follows, and, behind the `ggml` feature, the
//! generator that computes a file from live ggml 0.26.0 (`src/bin/gen-vectors.rs` is its
//! command line).
//!
//! One file per weight format (`<ggml name>.qkv`, e.g. `q4_K.qkv`). Each case holds a small
//! weight matrix, ggml's dequantization of it, f32 activations for 1..8 tokens, ggml's x86
//! quantization of those activations (`from_float` of the `vec_dot_type`), and ggml's
//! `vec_dot` (`nrc = 1`) of every (weight row, token) pair, all as raw little-endian bits.
//! The expected values come from ggml alone, never from qkern's kernels, so the files test
//! every backend without ggml being built.
//!
//! # File format, version 1
//!
//! All integers little-endian. Offsets are from the start of the file.
//!
//! Header (96 bytes):
//!
//! | offset | bytes | field |
//! | ---: | ---: | --- |
//! | 0 | 8 | magic `QKVECTOR` |
//! | 8 | 4 | version `u32` (= 1) |
//! | 12 | 4 | header bytes `u32` (= 96) |
//! | 16 | 4 | case record bytes `u32` (= 40) |
//! | 20 | 4 | number of cases `u32` (1..=4096) |
//! | 24 | 4 | weight format: ggml `ggml_type` id `u32` |
//! | 28 | 4 | activation format (ggml's `vec_dot_type`) id `u32` |
//! | 32 | 16 | weight format's ggml name, ASCII, NUL-padded |
//! | 48 | 32 | ggml version, UTF-8, NUL-padded: `0.26.0 (llama-cpp-sys-2 0.1.161)` |
//! | 80 | 4 | ISA flags `u32` of the ggml build (`ggml_cpu_has_*`): bit 0 AVX2, bit 1 FMA, bit 2 F16C, bit 3 AVX-512 |
//! | 84 | 4 | reserved (0) |
//! | 88 | 8 | generator seed `u64` (this file's; see [`file_seed`]) |
//!
//! Case table (`number of cases` records of 40 bytes, right after the header):
//!
//! | offset | bytes | field |
//! | ---: | ---: | --- |
//! | 0 | 4 | `rows` `u32`: weight rows |
//! | 4 | 4 | `cols` `u32`: row length (a multiple of both block sizes) |
//! | 8 | 4 | `nt` `u32`: tokens (activation rows) |
//! | 12 | 1 | weight source: 0..=7 an [`inputs::Dist`](crate::inputs::Dist) code (floats quantized by `ggml_quantize_chunk`), 255 raw random blocks |
//! | 13 | 1 | activation distribution: an `inputs::Dist` code |
//! | 14 | 1 | flags: bit 0 = an importance matrix was passed to `ggml_quantize_chunk` |
//! | 15 | 1 | reserved (0) |
//! | 16 | 8 | case seed `u64` (the [`inputs::Rng`](crate::inputs::Rng) seed the inputs came from) |
//! | 24 | 8 | payload offset `u64` |
//! | 32 | 8 | payload bytes `u64` |
//!
//! Payloads follow the table, contiguous and in case order; each is, in this order:
//!
//! 1. weights: `rows * row_bytes(format, cols)` raw ggml blocks, row-major;
//! 2. expected dequantization: `rows * cols` f32 (`to_float`), row-major;
//! 3. activation inputs: `nt * cols` f32, token-major;
//! 4. expected quantized activations: `nt * row_bytes(act, cols)` bytes (ggml-cpu `from_float`);
//! 5. expected dots: `nt * rows` f32, `[token][row]` (`vec_dot` with `nrc = 1`).
//!
//! Trailer: 8 bytes, FNV-1a 64 ([`checksum`]) of every byte before it.
//!
//! The reader validates everything (magic, version, sizes, format ids and name, case shapes,
//! contiguous offsets, exact file length, checksum) before it allocates anything beyond the
//! file's size, and reports a typed [`VectorError`]: a damaged file never panics.

use std::path::{Path, PathBuf};

use qkern_formats::{Format, FormatError};

use crate::inputs::{Dist, Rng};

/// The file magic.
pub const MAGIC: [u8; 8] = *b"QKVECTOR";
/// The file format version this module reads and writes.
pub const VERSION: u32 = 1;
/// Header size in bytes.
pub const HEADER_BYTES: usize = 96;
/// Case record size in bytes.
pub const CASE_BYTES: usize = 40;
/// Trailer (checksum) size in bytes.
pub const TRAILER_BYTES: usize = 8;
/// The most cases a file may hold.
pub const MAX_CASES: usize = 4096;
/// The ggml the vectors come from (`shared/REFERENCE.md`).
pub const GGML_VERSION: &str = "0.26.0 (llama-cpp-sys-2 0.1.161)";
/// File name extension.
pub const EXTENSION: &str = "qkv";
/// The base seed of the committed files.
pub const DEFAULT_SEED: u64 = 0x514b_4552_4e30_0001;
/// Weight-source code for raw random blocks.
pub const RAW_BLOCKS_CODE: u8 = 255;
const FLAG_IMATRIX: u8 = 1;

/// Everything that can be wrong with a vector file.
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("truncated: {what} needs {need} bytes, the file has {got}")]
    Truncated { what: &'static str, need: u64, got: u64 },
    #[error("not a qkern vector file (magic {0:02x?})")]
    Magic([u8; 8]),
    #[error("unsupported vector file version {0} (this reader knows {VERSION})")]
    Version(u32),
    #[error("header field {field}: {got} (expected {expected})")]
    Header { field: &'static str, got: String, expected: String },
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("case {case}: {reason}")]
    Case { case: usize, reason: String },
    #[error("{extra} bytes after the checksum")]
    Trailing { extra: u64 },
    #[error("checksum mismatch: stored {stored:#018x}, computed {computed:#018x} (the file is damaged)")]
    Checksum { stored: u64, computed: u64 },
}

/// The ISA a ggml build was made for (`ggml_cpu_has_avx2/fma/f16c/avx512`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Isa {
    pub avx2: bool,
    pub fma: bool,
    pub f16c: bool,
    pub avx512: bool,
}

impl Isa {
    /// The reference build pinned in `.cargo/config.toml`: AVX2, FMA, F16C, no AVX-512.
    pub const PINNED: Isa = Isa { avx2: true, fma: true, f16c: true, avx512: false };

    pub fn bits(self) -> u32 {
        self.avx2 as u32 | (self.fma as u32) << 1 | (self.f16c as u32) << 2 | (self.avx512 as u32) << 3
    }

    pub fn from_bits(b: u32) -> Option<Isa> {
        (b < 16).then_some(Isa { avx2: b & 1 != 0, fma: b & 2 != 0, f16c: b & 4 != 0, avx512: b & 8 != 0 })
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on: Vec<&str> = [("avx2", self.avx2), ("fma", self.fma), ("f16c", self.f16c), ("avx512", self.avx512)]
            .iter()
            .filter(|x| x.1)
            .map(|x| x.0)
            .collect();
        if on.is_empty() { f.write_str("none") } else { f.write_str(&on.join(" ")) }
    }
}

/// Where a case's weights came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightSource {
    /// Floats of this distribution quantized by `ggml_quantize_chunk`.
    Quantized(Dist),
    /// Raw random blocks ([`inputs::random_blocks`](crate::inputs::random_blocks), sane scales).
    RawBlocks,
}

impl WeightSource {
    pub fn code(self) -> u8 {
        match self {
            WeightSource::Quantized(d) => d.code(),
            WeightSource::RawBlocks => RAW_BLOCKS_CODE,
        }
    }
    pub fn from_code(c: u8) -> Option<WeightSource> {
        if c == RAW_BLOCKS_CODE {
            Some(WeightSource::RawBlocks)
        } else {
            dist_from_code(c).map(WeightSource::Quantized)
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            WeightSource::Quantized(d) => d.name(),
            WeightSource::RawBlocks => "raw-blocks",
        }
    }
}

fn dist_from_code(c: u8) -> Option<Dist> {
    Dist::ALL.get(c as usize).copied().filter(|d| d.code() == c)
}

/// The file header (everything but the case table).
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub format: Format,
    /// ggml's `vec_dot_type` of `format`.
    pub act: Format,
    pub ggml_version: String,
    pub isa: Isa,
    pub seed: u64,
}

/// One case: its shape and provenance, the inputs, and ggml's outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub rows: usize,
    pub cols: usize,
    pub nt: usize,
    pub weight_source: WeightSource,
    pub act_dist: Dist,
    /// Whether `ggml_quantize_chunk` got an importance matrix.
    pub imatrix: bool,
    pub seed: u64,
    /// `rows` rows of raw ggml blocks.
    pub weights: Vec<u8>,
    /// ggml `to_float` of `weights`: `rows * cols`, row-major.
    pub dequant: Vec<f32>,
    /// Activation inputs, `nt * cols`, token-major.
    pub act_f32: Vec<f32>,
    /// ggml-cpu `from_float` of each activation row: `nt` rows of the activation format.
    pub act_q: Vec<u8>,
    /// ggml `vec_dot(row r, token t)` at `t * rows + r`.
    pub dots: Vec<f32>,
}

impl Case {
    /// A one-line description: shape and input distributions.
    pub fn describe(&self) -> String {
        format!(
            "{}x{} nt={} weights={}{} acts={}",
            self.rows,
            self.cols,
            self.nt,
            self.weight_source.name(),
            if self.imatrix { "+imatrix" } else { "" },
            self.act_dist.name()
        )
    }
}

/// A whole vector file.
#[derive(Clone, Debug, PartialEq)]
pub struct VectorFile {
    pub header: Header,
    pub cases: Vec<Case>,
}

/// FNV-1a 64 of `bytes` (the trailer of a vector file).
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Recompute the trailer of a file image in place (for tools and tests that edit bytes).
/// Does nothing to an image shorter than the trailer.
pub fn reseal(bytes: &mut [u8]) {
    if let Some(n) = bytes.len().checked_sub(TRAILER_BYTES) {
        let h = checksum(&bytes[..n]);
        bytes[n..].copy_from_slice(&h.to_le_bytes());
    }
}

/// The byte sizes of a case's five payload sections, checked: an error on overflow or a
/// shape the formats do not allow.
fn section_sizes(format: Format, act: Format, rows: usize, cols: usize, nt: usize) -> Result<[usize; 5], String> {
    if rows == 0 || cols == 0 || nt == 0 {
        return Err(format!("zero dimension (rows {rows}, cols {cols}, nt {nt})"));
    }
    let wrb = format.row_bytes(cols).map_err(|e| e.to_string())?;
    let arb = act.row_bytes(cols).map_err(|e| e.to_string())?;
    let ovf = || "shape overflows".to_string();
    let m = |a: usize, b: usize| a.checked_mul(b).ok_or_else(ovf);
    Ok([m(rows, wrb)?, m(m(rows, cols)?, 4)?, m(m(nt, cols)?, 4)?, m(nt, arb)?, m(m(nt, rows)?, 4)?])
}

fn payload_len(s: &[usize; 5]) -> Option<usize> {
    s.iter().try_fold(0usize, |a, &b| a.checked_add(b))
}

fn put_str(out: &mut Vec<u8>, s: &str, width: usize) {
    let mut b = s.as_bytes().to_vec();
    b.resize(width, 0);
    out.extend_from_slice(&b);
}

fn put_f32s(out: &mut Vec<u8>, v: &[f32]) {
    for x in v {
        out.extend_from_slice(&x.to_bits().to_le_bytes());
    }
}

impl VectorFile {
    /// Serialize, checking that every case's data has the lengths its shape implies.
    pub fn to_bytes(&self) -> Result<Vec<u8>, VectorError> {
        let h = &self.header;
        if !h.format.is_weight() {
            return Err(VectorError::Header {
                field: "format",
                got: h.format.name().into(),
                expected: "a weight format".into(),
            });
        }
        if Some(h.act) != h.format.vec_dot_type() {
            return Err(VectorError::Header {
                field: "activation format",
                got: h.act.name().into(),
                expected: h.format.vec_dot_type().map_or("?", Format::name).into(),
            });
        }
        if h.ggml_version.len() > 32 || h.ggml_version.contains('\0') {
            return Err(VectorError::Header {
                field: "ggml version",
                got: h.ggml_version.clone(),
                expected: "at most 32 bytes, no NUL".into(),
            });
        }
        if self.cases.is_empty() || self.cases.len() > MAX_CASES {
            return Err(VectorError::Header {
                field: "number of cases",
                got: self.cases.len().to_string(),
                expected: format!("1..={MAX_CASES}"),
            });
        }
        let mut sizes = Vec::with_capacity(self.cases.len());
        for (i, c) in self.cases.iter().enumerate() {
            let bad = |reason: String| VectorError::Case { case: i, reason };
            for (what, v) in [("rows", c.rows), ("cols", c.cols), ("nt", c.nt)] {
                if u32::try_from(v).is_err() {
                    return Err(bad(format!("{what} {v} does not fit u32")));
                }
            }
            let s = section_sizes(h.format, h.act, c.rows, c.cols, c.nt).map_err(bad)?;
            let got = [c.weights.len(), c.dequant.len() * 4, c.act_f32.len() * 4, c.act_q.len(), c.dots.len() * 4];
            if got != s {
                return Err(bad(format!("section byte lengths {got:?}, the shape needs {s:?}")));
            }
            sizes.push(payload_len(&s).ok_or_else(|| bad("payload overflows".into()))?);
        }

        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(HEADER_BYTES as u32).to_le_bytes());
        out.extend_from_slice(&(CASE_BYTES as u32).to_le_bytes());
        out.extend_from_slice(&(self.cases.len() as u32).to_le_bytes());
        out.extend_from_slice(&h.format.id().to_le_bytes());
        out.extend_from_slice(&h.act.id().to_le_bytes());
        put_str(&mut out, h.format.name(), 16);
        put_str(&mut out, &h.ggml_version, 32);
        out.extend_from_slice(&h.isa.bits().to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&h.seed.to_le_bytes());
        debug_assert_eq!(out.len(), HEADER_BYTES);

        let mut offset = (HEADER_BYTES + CASE_BYTES * self.cases.len()) as u64;
        for (c, &len) in self.cases.iter().zip(&sizes) {
            out.extend_from_slice(&(c.rows as u32).to_le_bytes());
            out.extend_from_slice(&(c.cols as u32).to_le_bytes());
            out.extend_from_slice(&(c.nt as u32).to_le_bytes());
            out.push(c.weight_source.code());
            out.push(c.act_dist.code());
            out.push(if c.imatrix { FLAG_IMATRIX } else { 0 });
            out.push(0);
            out.extend_from_slice(&c.seed.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            out.extend_from_slice(&(len as u64).to_le_bytes());
            offset += len as u64;
        }
        for c in &self.cases {
            out.extend_from_slice(&c.weights);
            put_f32s(&mut out, &c.dequant);
            put_f32s(&mut out, &c.act_f32);
            out.extend_from_slice(&c.act_q);
            put_f32s(&mut out, &c.dots);
        }
        let h = checksum(&out);
        out.extend_from_slice(&h.to_le_bytes());
        Ok(out)
    }

    /// Parse and validate a file image.
    pub fn parse(bytes: &[u8]) -> Result<VectorFile, VectorError> {
        let len = bytes.len() as u64;
        if bytes.len() < HEADER_BYTES {
            return Err(VectorError::Truncated { what: "header", need: HEADER_BYTES as u64, got: len });
        }
        let u32_at = |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let hdr_err = |field: &'static str, got: String, expected: String| VectorError::Header { field, got, expected };

        let mut magic = [0u8; 8];
        magic.copy_from_slice(&bytes[..8]);
        if magic != MAGIC {
            return Err(VectorError::Magic(magic));
        }
        let version = u32_at(8);
        if version != VERSION {
            return Err(VectorError::Version(version));
        }
        for (field, off, want) in [
            ("header bytes", 12, HEADER_BYTES as u32),
            ("case record bytes", 16, CASE_BYTES as u32),
            ("reserved", 84, 0),
        ] {
            let v = u32_at(off);
            if v != want {
                return Err(hdr_err(field, v.to_string(), want.to_string()));
            }
        }
        let ncases = u32_at(20) as usize;
        if ncases == 0 || ncases > MAX_CASES {
            return Err(hdr_err("number of cases", ncases.to_string(), format!("1..={MAX_CASES}")));
        }
        let format = Format::from_id(u32_at(24))?;
        if !format.is_weight() {
            return Err(hdr_err("format", format.name().into(), "a weight format".into()));
        }
        let act = Format::from_id(u32_at(28))?;
        let want_act = format.vec_dot_type().unwrap_or(Format::Q8_0);
        if act != want_act {
            return Err(hdr_err("activation format", act.name().into(), want_act.name().into()));
        }
        let text = |field: &'static str, b: &[u8]| -> Result<String, VectorError> {
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            if b[end..].iter().any(|&c| c != 0) {
                return Err(hdr_err(field, format!("{b:02x?}"), "NUL-padded text".into()));
            }
            std::str::from_utf8(&b[..end])
                .map(str::to_string)
                .map_err(|_| hdr_err(field, format!("{b:02x?}"), "UTF-8".into()))
        };
        let name = text("format name", &bytes[32..48])?;
        if name != format.name() {
            return Err(hdr_err("format name", format!("{name:?}"), format!("{:?} (from the id)", format.name())));
        }
        let ggml_version = text("ggml version", &bytes[48..80])?;
        let isa = Isa::from_bits(u32_at(80))
            .ok_or_else(|| hdr_err("ISA flags", format!("{:#x}", u32_at(80)), "bits 0..=3 only".into()))?;
        let seed = u64_at(88);

        let table_end = HEADER_BYTES + CASE_BYTES * ncases;
        if bytes.len() < table_end {
            return Err(VectorError::Truncated { what: "case table", need: table_end as u64, got: len });
        }
        struct Rec {
            rows: usize,
            cols: usize,
            nt: usize,
            ws: WeightSource,
            ad: Dist,
            imatrix: bool,
            seed: u64,
            sizes: [usize; 5],
        }
        let mut recs = Vec::with_capacity(ncases);
        let mut expect_off = table_end as u64;
        for i in 0..ncases {
            let o = HEADER_BYTES + CASE_BYTES * i;
            let bad = |reason: String| VectorError::Case { case: i, reason };
            let (rows, cols, nt) = (u32_at(o) as usize, u32_at(o + 4) as usize, u32_at(o + 8) as usize);
            let ws = WeightSource::from_code(bytes[o + 12])
                .ok_or_else(|| bad(format!("unknown weight source code {}", bytes[o + 12])))?;
            let ad = dist_from_code(bytes[o + 13])
                .ok_or_else(|| bad(format!("unknown activation distribution code {}", bytes[o + 13])))?;
            let flags = bytes[o + 14];
            if flags & !FLAG_IMATRIX != 0 || bytes[o + 15] != 0 {
                return Err(bad(format!("unknown flags {flags:#04x} / reserved byte {}", bytes[o + 15])));
            }
            let sizes = section_sizes(format, act, rows, cols, nt).map_err(bad)?;
            let plen = payload_len(&sizes).ok_or_else(|| bad("payload overflows".into()))? as u64;
            let (off, stored) = (u64_at(o + 24), u64_at(o + 32));
            if off != expect_off {
                return Err(bad(format!("payload offset {off}, expected {expect_off} (payloads are contiguous)")));
            }
            if stored != plen {
                return Err(bad(format!("payload bytes {stored}, the shape needs {plen}")));
            }
            expect_off = expect_off.checked_add(plen).filter(|&e| e <= len).ok_or(VectorError::Truncated {
                what: "case payloads",
                need: off.saturating_add(plen),
                got: len,
            })?;
            recs.push(Rec { rows, cols, nt, ws, ad, imatrix: flags & FLAG_IMATRIX != 0, seed: u64_at(o + 16), sizes });
        }
        let total = expect_off + TRAILER_BYTES as u64;
        if len < total {
            return Err(VectorError::Truncated { what: "checksum", need: total, got: len });
        }
        if len > total {
            return Err(VectorError::Trailing { extra: len - total });
        }
        let body = (total - TRAILER_BYTES as u64) as usize;
        let stored = u64_at(body);
        let computed = checksum(&bytes[..body]);
        if stored != computed {
            return Err(VectorError::Checksum { stored, computed });
        }

        let f32s = |b: &[u8]| -> Vec<f32> {
            b.chunks_exact(4).map(|c| f32::from_bits(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect()
        };
        let mut pos = table_end;
        let mut take = |n: usize| {
            let s = &bytes[pos..pos + n];
            pos += n;
            s
        };
        let cases = recs
            .into_iter()
            .map(|r| Case {
                rows: r.rows,
                cols: r.cols,
                nt: r.nt,
                weight_source: r.ws,
                act_dist: r.ad,
                imatrix: r.imatrix,
                seed: r.seed,
                weights: take(r.sizes[0]).to_vec(),
                dequant: f32s(take(r.sizes[1])),
                act_f32: f32s(take(r.sizes[2])),
                act_q: take(r.sizes[3]).to_vec(),
                dots: f32s(take(r.sizes[4])),
            })
            .collect();
        Ok(VectorFile { header: Header { format, act, ggml_version, isa, seed }, cases })
    }

    /// Read and parse a file.
    pub fn load(path: impl AsRef<Path>) -> Result<VectorFile, VectorError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| VectorError::Io { path: path.to_path_buf(), source })?;
        VectorFile::parse(&bytes)
    }

    /// Serialize and write a file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), VectorError> {
        let path = path.as_ref();
        let bytes = self.to_bytes()?;
        std::fs::write(path, bytes).map_err(|source| VectorError::Io { path: path.to_path_buf(), source })
    }
}

/// The directory of the committed vectors (`parity/vectors`).
pub fn committed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors")
}

/// The file name of `format`'s vectors (`q4_K.qkv`).
pub fn file_name(format: Format) -> String {
    format!("{}.{EXTENSION}", format.name())
}

/// Load the committed vectors of `format`.
pub fn load_committed(format: Format) -> Result<VectorFile, VectorError> {
    VectorFile::load(committed_dir().join(file_name(format)))
}

/// One planned case: shape and input distributions (the data comes from the seeds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CasePlan {
    pub rows: usize,
    pub cols: usize,
    pub nt: usize,
    pub weights: WeightSource,
    pub act: Dist,
}

/// The weight sources of the plan: every distribution but `Ties` (a q8 activation concern),
/// then raw random blocks.
pub const WEIGHT_SOURCES: [WeightSource; 8] = [
    WeightSource::Quantized(Dist::Gaussian),
    WeightSource::Quantized(Dist::HeavyTailed),
    WeightSource::Quantized(Dist::ZeroBlocks),
    WeightSource::Quantized(Dist::Constant),
    WeightSource::Quantized(Dist::Tiny),
    WeightSource::Quantized(Dist::Huge),
    WeightSource::Quantized(Dist::Outliers),
    WeightSource::RawBlocks,
];

/// The smallest valid row length of `format`: a multiple of its block and of its activation
/// block (32 for q8_0/q5_1/iq4_nl, 64 for nvfp4, 256 for the q8_K-paired formats).
pub fn unit_cols(format: Format) -> usize {
    let a = format.vec_dot_type().map_or(1, Format::block_elems);
    format.block_elems().max(a)
}

/// The cases every file holds, in order:
///
/// - 16 small cases: each weight source twice, each NT in 1..=8 twice, each activation
///   distribution (`Ties` included) twice, in shifting pairings; 1, 2, 3 or 5 units long
///   (fewer units for more tokens, to keep the files small);
/// - 20 rows of one unit for 2 tokens (so that 2 threads split the rows into two tasks:
///   `qkern-cpu` hands out tasks of at least 16 rows);
/// - a non-power-of-two length (640 for 32/64-block formats, 2816 = 11 * 256 otherwise),
///   2 rows, 3 tokens;
/// - 14336 (the longest), one row and one token.
pub fn plan(format: Format) -> Vec<CasePlan> {
    let u = unit_cols(format);
    let small_rows = if u >= 256 { 2 } else { 4 };
    let mut v = Vec::new();
    // Units per NT (index nt - 1), one table per half of the small cases.
    const UNITS: [[usize; 8]; 2] = [[5, 3, 2, 2, 1, 1, 1, 1], [3, 5, 2, 1, 1, 2, 1, 1]];
    for i in 0..16usize {
        let half = i / 8;
        let nt = 1 + (i * 3 + half) % 8;
        v.push(CasePlan {
            rows: small_rows,
            cols: u * UNITS[half][nt - 1],
            nt,
            weights: WEIGHT_SOURCES[i % 8],
            act: Dist::ALL[(i * 5 + 3 * half) % 8],
        });
    }
    let gauss = WeightSource::Quantized(Dist::Gaussian);
    v.push(CasePlan { rows: 20, cols: u, nt: 2, weights: WeightSource::RawBlocks, act: Dist::Gaussian });
    let odd = if u >= 256 { 11 * 256 } else { 640 };
    v.push(CasePlan { rows: 2, cols: odd, nt: 3, weights: WeightSource::Quantized(Dist::Outliers), act: Dist::Ties });
    v.push(CasePlan { rows: 1, cols: 14336, nt: 1, weights: gauss, act: Dist::Gaussian });
    v
}

/// The seed of `format`'s file, derived from the base seed.
pub fn file_seed(base: u64, format: Format) -> u64 {
    let mut r = Rng::new(base ^ (format.id() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    r.next_u64()
}

/// Generation from live ggml (the `ggml` feature).
#[cfg(feature = "ggml")]
mod generate {
    use super::*;
    use crate::ggml::{self, GgmlError};
    use crate::inputs::{floats, random_blocks};

    /// Compute `format`'s vector file from live ggml: weights quantized by
    /// `ggml_quantize_chunk` (with an importance matrix where ggml requires one), or raw random
    /// blocks; `to_float`; activations quantized by ggml-cpu's `from_float`; `vec_dot`.
    pub fn generate(format: Format, base_seed: u64) -> Result<VectorFile, GgmlError> {
        let act = ggml::vec_dot_type(format).ok_or(GgmlError::Missing { format, what: "vec_dot_type" })?;
        if Some(act) != format.vec_dot_type() {
            return Err(GgmlError::Missing { format, what: "the vec_dot_type qkern expects" });
        }
        let (avx2, fma, f16c, avx512) = ggml::isa();
        let seed = file_seed(base_seed, format);
        let mut seeds = Rng::new(seed);
        let mut cases = Vec::new();
        for p in plan(format) {
            let case_seed = seeds.next_u64();
            let mut rng = Rng::new(case_seed);
            let (weights, imatrix) = match p.weights {
                WeightSource::Quantized(d) => {
                    let x = floats(&mut rng, d, p.rows * p.cols);
                    let im: Option<Vec<f32>> =
                        ggml::requires_imatrix(format).then(|| (0..p.cols).map(|_| 0.1 + rng.uniform()).collect());
                    (ggml::quantize(format, &x, p.cols, im.as_deref())?, im.is_some())
                }
                WeightSource::RawBlocks => {
                    (random_blocks(&mut rng, format, p.rows * p.cols / format.block_elems(), false), false)
                }
            };
            let mut dequant = vec![0f32; p.rows * p.cols];
            ggml::to_float(format, &weights, &mut dequant)?;
            let arb = act.row_bytes(p.cols).map_err(|_| GgmlError::Cols {
                format: act,
                cols: p.cols,
                block: act.block_elems(),
            })?;
            let mut act_f32 = Vec::with_capacity(p.nt * p.cols);
            let mut act_q = vec![0u8; p.nt * arb];
            for t in 0..p.nt {
                let x = floats(&mut rng, p.act, p.cols);
                ggml::from_float(act, &x, &mut act_q[t * arb..(t + 1) * arb])?;
                act_f32.extend_from_slice(&x);
            }
            let wrb = weights.len() / p.rows;
            let mut dots = vec![0f32; p.nt * p.rows];
            for t in 0..p.nt {
                for r in 0..p.rows {
                    dots[t * p.rows + r] = ggml::vec_dot(
                        format,
                        p.cols,
                        &weights[r * wrb..(r + 1) * wrb],
                        &act_q[t * arb..(t + 1) * arb],
                    )?;
                }
            }
            cases.push(Case {
                rows: p.rows,
                cols: p.cols,
                nt: p.nt,
                weight_source: p.weights,
                act_dist: p.act,
                imatrix,
                seed: case_seed,
                weights,
                dequant,
                act_f32,
                act_q,
                dots,
            });
        }
        Ok(VectorFile {
            header: Header {
                format,
                act,
                ggml_version: GGML_VERSION.to_string(),
                isa: Isa { avx2, fma, f16c, avx512 },
                seed,
            },
            cases,
        })
    }
}

#[cfg(feature = "ggml")]
pub use generate::generate;
