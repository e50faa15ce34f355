//! The GGUF parser: `gguf_init_from_reader` in ggml 0.26.0's `ggml/src/gguf.cpp`, with the
//! checks ggml makes (magic, version 2..=3, non-empty unique keys, a u32 power-of-two
//! `general.alignment`, at most 4 dimensions of non-negative sizes whose product fits, a
//! known type whose block divides `ne[0]`, names shorter than `GGML_MAX_NAME`, 1 Gi elements
//! or bytes at most per array or string) and those ggml leaves to the loader: every
//! tensor's bytes inside the file, aligned, and overlapping no other tensor's.
//!
//! Allocation is bounded by the file: before anything is reserved for a count or a length
//! it is checked against the bytes left (each element needs at least its minimum encoded
//! size), so a count of 2^60 in a 1 KiB file is an error, not an allocation.

use std::collections::HashSet;
use std::io;

use super::{Array, DEFAULT_ALIGNMENT, GString, GgmlType, Gguf, KEY_ALIGNMENT, TensorInfo, Value, ValueType};

/// `GGUF_MAX_STRING_LENGTH` and `GGUF_MAX_ARRAY_ELEMENTS`.
const MAX_STRING: u64 = 1 << 30;
const MAX_ARRAY: u64 = 1 << 30;
/// `GGML_MAX_NAME`: names are shorter than this.
const MAX_NAME: u64 = 64;
/// `GGML_MAX_DIMS`.
const MAX_DIMS: u32 = 4;
/// Arrays of arrays nest at most this deep (ggml reads none; the format allows them).
const MAX_DEPTH: u32 = 8;
/// Minimum encoded bytes of a tensor info (empty name, 0 dims, type, offset) and of a KV
/// pair (a one-byte key and a one-byte value).
const MIN_TENSOR_INFO: u64 = 8 + 4 + 4 + 8;
const MIN_KV: u64 = 8 + 1 + 4 + 1;
/// The read-ahead window of the parser.
const WINDOW: usize = 64 << 10;

/// A source of positional reads: a file (`pread`) or bytes in memory.
pub trait ReadAt {
    /// Fill `buf` from `offset`; an error if the source ends first.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

impl ReadAt for &[u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| self.get(start..end))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

impl ReadAt for std::fs::File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }
}

/// What went wrong, at [`GgufError::field`] / [`GgufError::offset`].
#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    #[error("read failed: {0}")]
    Io(#[source] io::Error),
    #[error("truncated: needs {need} bytes, {have} left in the file")]
    Truncated { need: u64, have: u64 },
    #[error("bad magic {0:02x?} (expected \"GGUF\")")]
    Magic([u8; 4]),
    #[error("unsupported version {version}: {reason}")]
    Version { version: u32, reason: &'static str },
    #[error("{what} {value} exceeds the limit of {limit}")]
    TooLarge { what: &'static str, value: u64, limit: u64 },
    #[error("not valid UTF-8")]
    Utf8,
    #[error("empty key")]
    EmptyKey,
    #[error("duplicate key {0:?}")]
    DuplicateKey(String),
    #[error("duplicate tensor name {0:?}")]
    DuplicateTensor(String),
    #[error("unknown metadata value type {0}")]
    ValueType(u32),
    #[error("arrays nested deeper than {MAX_DEPTH}")]
    Nesting,
    #[error("general.alignment must be a u32, found a {0}")]
    AlignmentType(ValueType),
    #[error("alignment {0} is not a power of two")]
    Alignment(u64),
    #[error("{0} dimensions (at most {MAX_DIMS})")]
    Dims(u32),
    #[error("negative dimension {0}")]
    NegativeDim(i64),
    #[error("shape {0:?} overflows (elements or bytes)")]
    Overflow(Vec<u64>),
    #[error("unknown ggml type {0} (ggml 0.26.0 has ids below 43, without 4, 5, 31-33, 36-38)")]
    UnknownType(u32),
    #[error("row of {ne0} elements is not a multiple of {ty}'s block of {block}")]
    RowNotBlockMultiple { ne0: u64, ty: GgmlType, block: u64 },
    #[error("data offset {offset} is not a multiple of the alignment {alignment}")]
    Misaligned { offset: u64, alignment: u64 },
    #[error("data [{start}, {end}) lies outside the file of {file_len} bytes")]
    OutOfFile { start: u64, end: u64, file_len: u64 },
    #[error("data [{start}, {end}) overlaps tensor {other:?} at [{other_start}, {other_end})")]
    Overlap { start: u64, end: u64, other: String, other_start: u64, other_end: u64 },
}

/// A malformed or unreadable GGUF file: what, which field, and the field's file offset.
#[derive(Debug, thiserror::Error)]
#[error("GGUF {field} at byte {offset}: {kind}")]
pub struct GgufError {
    /// The field, e.g. `header.tensor_count`, `kv[3] "general.name" string length`,
    /// `tensor[2] "blk.0.ffn_up.weight" offset`.
    pub field: String,
    pub offset: u64,
    pub kind: ErrorKind,
}

impl GgufError {
    pub(crate) fn io(field: &str, offset: u64, e: io::Error) -> GgufError {
        GgufError { field: field.to_string(), offset, kind: ErrorKind::Io(e) }
    }
}

/// Where the parser is, for error fields.
enum Ctx {
    Header,
    Kv { index: u64, key: Option<String> },
    Tensor { index: u64, name: Option<String> },
}

struct Cursor<'a> {
    src: &'a dyn ReadAt,
    len: u64,
    pos: u64,
    window: Vec<u8>,
    /// File offset of `window[0]`; the window holds `window.len()` valid bytes.
    window_at: u64,
    ctx: Ctx,
    /// Array element indices, outermost first (for error fields).
    elems: Vec<u64>,
}

type R<T> = Result<T, GgufError>;

impl<'a> Cursor<'a> {
    fn field(&self, part: &str) -> String {
        let mut s = match &self.ctx {
            Ctx::Header => "header".to_string(),
            Ctx::Kv { index, key: None } => format!("kv[{index}]"),
            Ctx::Kv { index, key: Some(k) } => format!("kv[{index}] {k:?}"),
            Ctx::Tensor { index, name: None } => format!("tensor[{index}]"),
            Ctx::Tensor { index, name: Some(n) } => format!("tensor[{index}] {n:?}"),
        };
        for e in &self.elems {
            s.push_str(&format!("[{e}]"));
        }
        if matches!(self.ctx, Ctx::Header) {
            s.push('.');
        } else {
            s.push(' ');
        }
        s.push_str(part);
        s
    }

    fn err(&self, part: &str, offset: u64, kind: ErrorKind) -> GgufError {
        GgufError { field: self.field(part), offset, kind }
    }

    fn remaining(&self) -> u64 {
        self.len - self.pos
    }

    /// `n` (at most `WINDOW`) bytes at the cursor, advancing it.
    fn take(&mut self, n: usize, part: &str) -> R<&[u8]> {
        debug_assert!(n <= WINDOW);
        if n as u64 > self.remaining() {
            return Err(self.err(part, self.pos, ErrorKind::Truncated { need: n as u64, have: self.remaining() }));
        }
        let end = self.pos + n as u64;
        if self.pos < self.window_at || end > self.window_at + self.window.len() as u64 {
            // Refill the window from the cursor: as much as is left, up to WINDOW bytes.
            let w = (self.remaining().min(WINDOW as u64)) as usize;
            self.window.resize(w, 0);
            let at = self.pos;
            if let Err(e) = self.src.read_exact_at(&mut self.window, at) {
                self.window.clear();
                return Err(self.err(part, at, ErrorKind::Io(e)));
            }
            self.window_at = at;
        }
        let s = (self.pos - self.window_at) as usize;
        self.pos = end;
        Ok(&self.window[s..s + n])
    }

    fn array<const N: usize>(&mut self, part: &str) -> R<[u8; N]> {
        let b = self.take(N, part)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    fn u32(&mut self, part: &str) -> R<u32> {
        Ok(u32::from_le_bytes(self.array(part)?))
    }

    fn u64(&mut self, part: &str) -> R<u64> {
        Ok(u64::from_le_bytes(self.array(part)?))
    }

    /// `n` bytes (checked against what is left first), read through the window.
    fn bytes(&mut self, n: u64, part: &str) -> R<Vec<u8>> {
        if n > self.remaining() {
            return Err(self.err(part, self.pos, ErrorKind::Truncated { need: n, have: self.remaining() }));
        }
        // n is at most the file's remaining length: the reservation is bounded by the file.
        let mut v = Vec::with_capacity(n as usize);
        let mut left = n;
        while left > 0 {
            let k = left.min(WINDOW as u64) as usize;
            v.extend_from_slice(self.take(k, part)?);
            left -= k as u64;
        }
        Ok(v)
    }

    /// A string: u64 length, then the bytes.
    fn string(&mut self, part: &str) -> R<GString> {
        let at = self.pos;
        let n = self.u64(&format!("{part} length"))?;
        let limit = self.remaining().min(MAX_STRING);
        if n > limit {
            let what = if n > MAX_STRING { "string length (ggml's maximum)" } else { "string length (bytes left)" };
            return Err(self.err(&format!("{part} length"), at, ErrorKind::TooLarge { what, value: n, limit }));
        }
        Ok(GString(self.bytes(n, part)?))
    }

    fn utf8(&self, s: GString, part: &str, at: u64) -> R<String> {
        String::from_utf8(s.0).map_err(|_| self.err(part, at, ErrorKind::Utf8))
    }

    fn value_type(&mut self, part: &str) -> R<ValueType> {
        let at = self.pos;
        let id = self.u32(part)?;
        ValueType::from_id(id).ok_or_else(|| self.err(part, at, ErrorKind::ValueType(id)))
    }

    fn value(&mut self, t: ValueType, depth: u32) -> R<Value> {
        Ok(match t {
            ValueType::U8 => Value::U8(u8::from_le_bytes(self.array("value")?)),
            ValueType::I8 => Value::I8(i8::from_le_bytes(self.array("value")?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array("value")?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array("value")?)),
            ValueType::U32 => Value::U32(u32::from_le_bytes(self.array("value")?)),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array("value")?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array("value")?)),
            // ggml reads an int8 and takes any non-zero byte as true.
            ValueType::Bool => Value::Bool(self.array::<1>("value")?[0] != 0),
            ValueType::Str => Value::Str(self.string("string")?),
            ValueType::U64 => Value::U64(u64::from_le_bytes(self.array("value")?)),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array("value")?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array("value")?)),
            ValueType::Array => Value::Array(self.array_value(depth + 1)?),
        })
    }

    /// An array: element type, u64 count, the elements.
    fn array_value(&mut self, depth: u32) -> R<Array> {
        let at = self.pos;
        if depth > MAX_DEPTH {
            return Err(self.err("array type", at, ErrorKind::Nesting));
        }
        let t = self.value_type("array type")?;
        let n_at = self.pos;
        let n = self.u64("array length")?;
        // Every element takes at least min_bytes: bound the count by what is left.
        let limit = (self.remaining() / t.min_bytes()).min(MAX_ARRAY);
        if n > limit {
            let what = if n > MAX_ARRAY { "array length (ggml's maximum)" } else { "array length (bytes left)" };
            return Err(self.err("array length", n_at, ErrorKind::TooLarge { what, value: n, limit }));
        }
        let n = n as usize;
        macro_rules! fixed {
            ($variant:ident, $ty:ty) => {{
                const S: usize = std::mem::size_of::<$ty>();
                let mut v: Vec<$ty> = Vec::with_capacity(n);
                let mut left = n;
                while left > 0 {
                    let k = left.min(WINDOW / S);
                    let b = self.take(k * S, "array data")?;
                    v.extend(b.chunks_exact(S).map(|c| <$ty>::from_le_bytes(c.try_into().unwrap_or([0; S]))));
                    left -= k;
                }
                Array::$variant(v)
            }};
        }
        Ok(match t {
            ValueType::U8 => fixed!(U8, u8),
            ValueType::I8 => fixed!(I8, i8),
            ValueType::U16 => fixed!(U16, u16),
            ValueType::I16 => fixed!(I16, i16),
            ValueType::U32 => fixed!(U32, u32),
            ValueType::I32 => fixed!(I32, i32),
            ValueType::F32 => fixed!(F32, f32),
            ValueType::U64 => fixed!(U64, u64),
            ValueType::I64 => fixed!(I64, i64),
            ValueType::F64 => fixed!(F64, f64),
            ValueType::Bool => {
                // Stored as int8 (ggml: any non-zero byte is true).
                let mut v: Vec<bool> = Vec::with_capacity(n);
                let mut left = n;
                while left > 0 {
                    let k = left.min(WINDOW);
                    v.extend(self.take(k, "array data")?.iter().map(|&x| x != 0));
                    left -= k;
                }
                Array::Bool(v)
            }
            ValueType::Str => {
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    self.elems.push(i as u64);
                    let s = self.string("string");
                    self.elems.pop();
                    v.push(s?);
                }
                Array::Str(v)
            }
            ValueType::Array => {
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    self.elems.push(i as u64);
                    let a = self.array_value(depth + 1);
                    self.elems.pop();
                    v.push(a?);
                }
                Array::Array(v)
            }
        })
    }
}

fn align_up(x: u64, a: u64) -> Option<u64> {
    x.checked_add(a - 1).map(|v| v & !(a - 1))
}

pub(super) fn parse(src: &dyn ReadAt, len: u64) -> Result<Gguf, GgufError> {
    let mut c = Cursor { src, len, pos: 0, window: Vec::new(), window_at: 0, ctx: Ctx::Header, elems: Vec::new() };

    // Header: magic, version, tensor count, KV count.
    let magic: [u8; 4] = c.array("magic")?;
    if &magic != b"GGUF" {
        return Err(c.err("magic", 0, ErrorKind::Magic(magic)));
    }
    let version = c.u32("version")?;
    let bad_version = match version {
        0 => Some("version 0"),
        v if v & 0xFFFF == 0 => Some("byte-swapped (a big-endian file?)"),
        1 => Some("GGUF v1 is not supported (ggml reads v2 and v3)"),
        v if v > 3 => Some("newer than v3"),
        _ => None,
    };
    if let Some(reason) = bad_version {
        return Err(c.err("version", 4, ErrorKind::Version { version, reason }));
    }
    let n_tensors = c.u64("tensor_count")?;
    let limit = c.remaining().saturating_sub(8) / MIN_TENSOR_INFO;
    if n_tensors > limit {
        return Err(c.err("tensor_count", 8, ErrorKind::TooLarge { what: "tensor count", value: n_tensors, limit }));
    }
    let n_kv = c.u64("kv_count")?;
    let limit = c.remaining().saturating_sub(n_tensors * MIN_TENSOR_INFO) / MIN_KV;
    if n_kv > limit {
        return Err(c.err("kv_count", 16, ErrorKind::TooLarge { what: "KV count", value: n_kv, limit }));
    }

    // KV pairs.
    let mut kv: Vec<(String, Value)> = Vec::with_capacity(n_kv as usize);
    let mut kv_at: Vec<u64> = Vec::with_capacity(n_kv as usize);
    let mut keys: HashSet<String> = HashSet::with_capacity(n_kv as usize);
    for index in 0..n_kv {
        c.ctx = Ctx::Kv { index, key: None };
        let at = c.pos;
        let key = c.string("key")?;
        if key.0.is_empty() {
            return Err(c.err("key", at, ErrorKind::EmptyKey));
        }
        let key = c.utf8(key, "key", at)?;
        if keys.contains(&key) {
            return Err(c.err("key", at, ErrorKind::DuplicateKey(key)));
        }
        keys.insert(key.clone());
        c.ctx = Ctx::Kv { index, key: Some(key.clone()) };
        let t = c.value_type("value type")?;
        let v = c.value(t, 0)?;
        kv.push((key, v));
        kv_at.push(at);
    }
    drop(keys);

    // general.alignment: a u32 power of two.
    let mut alignment = DEFAULT_ALIGNMENT;
    if let Some(i) = kv.iter().position(|(k, _)| k == KEY_ALIGNMENT) {
        c.ctx = Ctx::Kv { index: i as u64, key: Some(KEY_ALIGNMENT.to_string()) };
        match kv[i].1 {
            Value::U32(a) if a != 0 && a.is_power_of_two() => alignment = a as u64,
            Value::U32(a) => return Err(c.err("value", kv_at[i], ErrorKind::Alignment(a as u64))),
            ref v => return Err(c.err("value type", kv_at[i], ErrorKind::AlignmentType(v.value_type()))),
        }
    }

    // Tensor infos.
    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(n_tensors as usize);
    let mut offset_at: Vec<u64> = Vec::with_capacity(n_tensors as usize);
    let mut names: HashSet<String> = HashSet::with_capacity(n_tensors as usize);
    for index in 0..n_tensors {
        c.ctx = Ctx::Tensor { index, name: None };
        let info_offset = c.pos;
        let n = c.u64("name length")?;
        if n >= MAX_NAME {
            let kind = ErrorKind::TooLarge { what: "tensor name length", value: n, limit: MAX_NAME - 1 };
            return Err(c.err("name length", info_offset, kind));
        }
        let name = c.bytes(n, "name")?;
        let name = c.utf8(GString(name), "name", info_offset + 8)?;
        if names.contains(&name) {
            return Err(c.err("name", info_offset, ErrorKind::DuplicateTensor(name)));
        }
        names.insert(name.clone());
        c.ctx = Ctx::Tensor { index, name: Some(name.clone()) };

        let at = c.pos;
        let n_dims = c.u32("n_dims")?;
        if n_dims > MAX_DIMS {
            return Err(c.err("n_dims", at, ErrorKind::Dims(n_dims)));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for j in 0..n_dims {
            let at = c.pos;
            let d = c.u64(&format!("ne[{j}]"))? as i64;
            if d < 0 {
                return Err(c.err(&format!("ne[{j}]"), at, ErrorKind::NegativeDim(d)));
            }
            dims.push(d as u64);
        }
        // ggml: the element count must fit an int64.
        let elems = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).filter(|&e| e <= i64::MAX as u64);
        let Some(elems) = elems else {
            return Err(c.err("ne", at, ErrorKind::Overflow(dims)));
        };
        let at = c.pos;
        let id = c.u32("type")?;
        let Some(ty) = GgmlType::from_id(id) else {
            return Err(c.err("type", at, ErrorKind::UnknownType(id)));
        };
        let ne0 = dims.first().copied().unwrap_or(1);
        if !ne0.is_multiple_of(ty.block_elems()) {
            return Err(c.err("type", at, ErrorKind::RowNotBlockMultiple { ne0, ty, block: ty.block_elems() }));
        }
        let Some(bytes) = (elems / ty.block_elems()).checked_mul(ty.block_bytes()) else {
            return Err(c.err("ne", at, ErrorKind::Overflow(dims)));
        };
        let at = c.pos;
        let offset = c.u64("offset")?;
        tensors.push(TensorInfo { name, dims, ggml_type: ty, offset, file_offset: 0, bytes, info_offset });
        offset_at.push(at);
    }
    drop(names);

    // The data section starts at the next multiple of the alignment (only when there are
    // tensors, as in ggml).
    let mut data_offset = c.pos;
    if n_tensors > 0 {
        c.ctx = Ctx::Header;
        match align_up(c.pos, alignment) {
            Some(d) if d <= len => data_offset = d,
            d => {
                let need = d.map_or(u64::MAX, |d| d - c.pos);
                return Err(c.err("data section padding", c.pos, ErrorKind::Truncated { need, have: c.remaining() }));
            }
        }
    }

    // Every tensor: aligned, inside the file, no overlaps.
    for (index, t) in tensors.iter_mut().enumerate() {
        c.ctx = Ctx::Tensor { index: index as u64, name: Some(t.name.clone()) };
        let at = offset_at[index];
        if !t.offset.is_multiple_of(alignment) {
            return Err(c.err("offset", at, ErrorKind::Misaligned { offset: t.offset, alignment }));
        }
        let start = data_offset.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(t.bytes));
        match (start, end) {
            (Some(s), Some(e)) if e <= len => t.file_offset = s,
            _ => {
                let start = data_offset.saturating_add(t.offset);
                let kind = ErrorKind::OutOfFile { start, end: start.saturating_add(t.bytes), file_len: len };
                return Err(c.err("offset", at, kind));
            }
        }
    }
    let mut order: Vec<usize> = (0..tensors.len()).filter(|&i| tensors[i].bytes > 0).collect();
    order.sort_by_key(|&i| (tensors[i].file_offset, i));
    for w in order.windows(2) {
        let (a, b) = (&tensors[w[0]], &tensors[w[1]]);
        if b.file_offset < a.file_offset + a.bytes {
            c.ctx = Ctx::Tensor { index: w[1] as u64, name: Some(b.name.clone()) };
            let kind = ErrorKind::Overlap {
                start: b.file_offset,
                end: b.file_offset + b.bytes,
                other: a.name.clone(),
                other_start: a.file_offset,
                other_end: a.file_offset + a.bytes,
            };
            return Err(c.err("offset", offset_at[w[1]], kind));
        }
    }

    Ok(Gguf { version, kv, tensors, alignment, data_offset, file_len: len })
}
