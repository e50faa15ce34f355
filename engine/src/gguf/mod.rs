//! GGUF v2 and v3 files, as ggml 0.26.0's `ggml/src/gguf.cpp` reads and writes them: the
//! header, every metadata value type (arrays, nested arrays and strings included), tensor
//! infos, `general.alignment` and the data section's offset.
//!
//! The reader ([`Gguf::open`], [`Gguf::parse`]) reads through positional reads (never a
//! memory map), validates everything it reads and never allocates from an untrusted count:
//! every count and length is bounded by the bytes left in the file before anything is
//! reserved. Malformed input gives a [`GgufError`] naming the field and its file offset.
//! The writer ([`write::GgufWriter`]) streams files byte-identical to `gguf_write_to_file`.

mod read;
mod types;
pub mod write;

use std::ops::Range;

pub use read::{ErrorKind, GgufError, ReadAt};
pub use types::{GGML_TYPE_COUNT, GgmlType, ValueType};

/// The default data alignment (`GGUF_DEFAULT_ALIGNMENT`).
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The alignment key (`GGUF_KEY_GENERAL_ALIGNMENT`).
pub const KEY_ALIGNMENT: &str = "general.alignment";

/// A GGUF string: bytes that the format says are UTF-8 (ggml does not check, so neither do we
/// for values; keys and tensor names are checked).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct GString(pub Vec<u8>);

impl GString {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
    /// The string, if it is valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }
}

impl From<&str> for GString {
    fn from(s: &str) -> GString {
        GString(s.as_bytes().to_vec())
    }
}

impl std::fmt::Debug for GString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.to_string_lossy())
    }
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(GString),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A metadata array: elements of one type (arrays of arrays nest).
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    Str(Vec<GString>),
    Array(Vec<Array>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::Str(_) => ValueType::Str,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// A non-negative integer of any integer type.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// A float (f32 or f64; f64 rounded to nearest).
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => s.as_str(),
            _ => None,
        }
    }
}

impl Array {
    pub fn elem_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::F32(_) => ValueType::F32,
            Array::Bool(_) => ValueType::Bool,
            Array::Str(_) => ValueType::Str,
            Array::Array(_) => ValueType::Array,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F64(_) => ValueType::F64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::Str(v) => v.len(),
            Array::Array(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn fmt_elems(&self, f: &mut std::fmt::Formatter<'_>, max: usize) -> std::fmt::Result {
        fn list<T: std::fmt::Debug>(f: &mut std::fmt::Formatter<'_>, v: &[T], max: usize) -> std::fmt::Result {
            f.write_str("[")?;
            for (i, x) in v.iter().take(max).enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{x:?}")?;
            }
            if v.len() > max {
                write!(f, ", ... ({} more)", v.len() - max)?;
            }
            f.write_str("]")
        }
        match self {
            Array::U8(v) => list(f, v, max),
            Array::I8(v) => list(f, v, max),
            Array::U16(v) => list(f, v, max),
            Array::I16(v) => list(f, v, max),
            Array::U32(v) => list(f, v, max),
            Array::I32(v) => list(f, v, max),
            Array::F32(v) => list(f, v, max),
            Array::Bool(v) => list(f, v, max),
            Array::Str(v) => list(f, v, max),
            Array::U64(v) => list(f, v, max),
            Array::I64(v) => list(f, v, max),
            Array::F64(v) => list(f, v, max),
            Array::Array(v) => {
                f.write_str("[")?;
                for (i, a) in v.iter().take(max).enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    a.fmt_elems(f, max)?;
                }
                if v.len() > max {
                    write!(f, ", ... ({} more)", v.len() - max)?;
                }
                f.write_str("]")
            }
        }
    }
}

/// Short rendering: scalars as they are, strings quoted, arrays as `arr[type; n] [first 8...]`.
impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::U8(v) => write!(f, "{v}"),
            Value::I8(v) => write!(f, "{v}"),
            Value::U16(v) => write!(f, "{v}"),
            Value::I16(v) => write!(f, "{v}"),
            Value::U32(v) => write!(f, "{v}"),
            Value::I32(v) => write!(f, "{v}"),
            Value::F32(v) => write!(f, "{v:?}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v:?}"),
            Value::Array(a) => {
                write!(f, "arr[{}; {}] ", a.elem_type(), a.len())?;
                a.fmt_elems(f, 8)
            }
        }
    }
}

/// One tensor's info record, validated: its bytes lie inside the file, aligned, and overlap
/// no other tensor's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// `ne[0..n_dims]`: `dims[0]` is the row length (ggml order, fastest first).
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset in the data section, as stored.
    pub offset: u64,
    /// Absolute file offset of the first byte (`data_offset + offset`).
    pub file_offset: u64,
    /// Bytes of data (`ggml_nbytes`).
    pub bytes: u64,
    /// File offset of this tensor's info record (for messages).
    pub info_offset: u64,
}

impl TensorInfo {
    /// `ne[i]` (1 beyond the stored dimensions, as in ggml).
    pub fn ne(&self, i: usize) -> u64 {
        self.dims.get(i).copied().unwrap_or(1)
    }
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
    /// The qkern format of the tensor's type, where qkern has one.
    pub fn format(&self) -> Option<qkern::Format> {
        self.ggml_type.format()
    }
    /// The file bytes of the tensor.
    pub fn file_range(&self) -> Range<u64> {
        self.file_offset..self.file_offset + self.bytes
    }
    /// `ne0 x ne1 x ...` for messages.
    pub fn shape(&self) -> String {
        self.dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" x ")
    }
}

/// A metadata value of the wrong type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("metadata key {key:?} holds a {found}, expected {expected}")]
pub struct MetaTypeError {
    pub key: String,
    pub expected: &'static str,
    pub found: ValueType,
}

/// A parsed GGUF file: everything but the tensor data.
#[derive(Clone, Debug, PartialEq)]
pub struct Gguf {
    pub version: u32,
    /// Metadata in file order.
    pub kv: Vec<(String, Value)>,
    /// Tensor infos in file order.
    pub tensors: Vec<TensorInfo>,
    /// `general.alignment`, or 32.
    pub alignment: u64,
    /// File offset of the data section (`gguf_get_data_offset`).
    pub data_offset: u64,
    /// Length of the file parsed.
    pub file_len: u64,
}

impl Gguf {
    /// Parse the file at `path` with positional reads (no memory map).
    pub fn open(path: &std::path::Path) -> Result<Gguf, GgufError> {
        let f = std::fs::File::open(path).map_err(|e| GgufError::io("file", 0, e))?;
        let len = f.metadata().map_err(|e| GgufError::io("file", 0, e))?.len();
        Gguf::parse_from(&f, len)
    }

    /// Parse a file held in memory.
    pub fn parse(bytes: &[u8]) -> Result<Gguf, GgufError> {
        Gguf::parse_from(&bytes, bytes.len() as u64)
    }

    /// Parse `len` bytes of `src`.
    pub fn parse_from(src: &dyn ReadAt, len: u64) -> Result<Gguf, GgufError> {
        read::parse(src, len)
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.kv.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn typed<T>(
        &self,
        key: &str,
        expected: &'static str,
        f: impl Fn(&Value) -> Option<T>,
    ) -> Result<Option<T>, MetaTypeError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => f(v).map(Some).ok_or(MetaTypeError { key: key.to_string(), expected, found: v.value_type() }),
        }
    }

    /// A non-negative integer of any integer type.
    pub fn get_u64(&self, key: &str) -> Result<Option<u64>, MetaTypeError> {
        self.typed(key, "a non-negative integer", Value::as_u64)
    }
    pub fn get_f32(&self, key: &str) -> Result<Option<f32>, MetaTypeError> {
        self.typed(key, "a float", Value::as_f32)
    }
    pub fn get_bool(&self, key: &str) -> Result<Option<bool>, MetaTypeError> {
        self.typed(key, "a bool", Value::as_bool)
    }
    pub fn get_str(&self, key: &str) -> Result<Option<&str>, MetaTypeError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or(MetaTypeError {
                key: key.to_string(),
                expected: "a UTF-8 string",
                found: v.value_type(),
            }),
        }
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture").and_then(Value::as_str)
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Bytes of all tensor data.
    pub fn data_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.bytes).sum()
    }
}
