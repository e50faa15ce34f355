//! A streaming GGUF v3 writer whose output is byte-identical to ggml 0.26.0's
//! `gguf_write_to_file` (`gguf_write_out` in `ggml/src/gguf.cpp`): header, KV pairs in
//! insertion order (setting a key again moves it to the back, as `gguf_set_val_*` does),
//! tensor infos with offsets `offset[i] = offset[i-1] + PAD(nbytes[i-1], alignment)`, zero
//! padding to the alignment after the infos and after each tensor's data.
//!
//! Tensor data is streamed (a callback writes each tensor in turn), so files of any size
//! are written in bounded memory. One difference from ggml: setting `general.alignment`
//! here also changes the padding (ggml's writer keeps padding to 32, which makes files that
//! its own reader rejects or misreads when the key says otherwise).

use std::io::{self, Write};

use super::{Array, DEFAULT_ALIGNMENT, GString, GgmlType, KEY_ALIGNMENT, Value};

/// A tensor declared to the writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    pub name: String,
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset in the data section.
    pub offset: u64,
    pub bytes: u64,
}

/// A tensor declaration or a write that ggml's writer would refuse.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("tensor {0:?}: {1}")]
    Tensor(String, String),
    #[error("key {0:?}: {1}")]
    Key(String, String),
    #[error("tensor {name:?}: the data callback wrote {wrote} bytes, expected {expected}")]
    DataLength { name: String, wrote: u64, expected: u64 },
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Collects metadata and tensor declarations, then writes the file.
#[derive(Clone, Debug)]
pub struct GgufWriter {
    version: u32,
    kv: Vec<(String, Value)>,
    tensors: Vec<TensorSpec>,
    alignment: u64,
}

impl Default for GgufWriter {
    fn default() -> Self {
        GgufWriter::new()
    }
}

impl GgufWriter {
    pub fn new() -> GgufWriter {
        GgufWriter { version: 3, kv: Vec::new(), tensors: Vec::new(), alignment: DEFAULT_ALIGNMENT }
    }

    /// The version written in the header (2 and 3 share the layout).
    pub fn set_version(&mut self, v: u32) {
        self.version = v;
    }

    /// Set `key` (moving it to the back if present). `general.alignment` must be a u32 power
    /// of two, and may only be set before any tensor is added.
    pub fn set(&mut self, key: &str, v: Value) -> Result<(), WriteError> {
        if key.is_empty() {
            return Err(WriteError::Key(key.into(), "empty key".into()));
        }
        if key == KEY_ALIGNMENT {
            match v {
                Value::U32(a) if a.is_power_of_two() => {
                    if !self.tensors.is_empty() {
                        return Err(WriteError::Key(key.into(), "set the alignment before adding tensors".into()));
                    }
                    self.alignment = a as u64;
                }
                _ => return Err(WriteError::Key(key.into(), "must be a u32 power of two".into())),
            }
        }
        self.kv.retain(|(k, _)| k != key);
        self.kv.push((key.to_string(), v));
        Ok(())
    }

    /// Declare a tensor of `dims` (ggml order) and `ty`; returns its spec.
    pub fn add_tensor(&mut self, name: &str, dims: &[u64], ty: GgmlType) -> Result<&TensorSpec, WriteError> {
        let bad = |m: &str| WriteError::Tensor(name.to_string(), m.to_string());
        if name.len() >= 64 {
            return Err(bad("name of 64 bytes or more (GGML_MAX_NAME)"));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(bad("duplicate name"));
        }
        if dims.is_empty() || dims.len() > 4 {
            return Err(bad("1 to 4 dimensions"));
        }
        if !dims[0].is_multiple_of(ty.block_elems()) {
            return Err(bad("row length not a multiple of the block"));
        }
        let elems = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(|| bad("shape overflows"))?;
        let bytes = (elems / ty.block_elems()).checked_mul(ty.block_bytes()).ok_or_else(|| bad("size overflows"))?;
        let offset = match self.tensors.last() {
            None => 0,
            Some(t) => t.offset + pad(t.bytes, self.alignment),
        };
        // ggml_n_dims: trailing 1s are not written.
        let mut n = dims.len();
        while n > 1 && dims[n - 1] == 1 {
            n -= 1;
        }
        self.tensors.push(TensorSpec {
            name: name.to_string(),
            dims: dims[..n].to_vec(),
            ggml_type: ty,
            offset,
            bytes,
        });
        Ok(self.tensors.last().expect("just pushed"))
    }

    pub fn tensors(&self) -> &[TensorSpec] {
        &self.tensors
    }

    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// The header, KV pairs, tensor infos and padding (`gguf_get_meta_data`).
    pub fn meta(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"GGUF");
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        b.extend_from_slice(&(self.kv.len() as u64).to_le_bytes());
        for (k, v) in &self.kv {
            put_str(&mut b, k.as_bytes());
            put_value(&mut b, v, true);
        }
        for t in &self.tensors {
            put_str(&mut b, t.name.as_bytes());
            b.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                b.extend_from_slice(&d.to_le_bytes());
            }
            b.extend_from_slice(&t.ggml_type.id().to_le_bytes());
            b.extend_from_slice(&t.offset.to_le_bytes());
        }
        b.resize(pad(b.len() as u64, self.alignment) as usize, 0);
        b
    }

    /// Total bytes of the file.
    pub fn file_len(&self) -> u64 {
        self.meta().len() as u64 + self.tensors.last().map_or(0, |t| t.offset + pad(t.bytes, self.alignment))
    }

    /// Write the file: metadata, then for each tensor in order `data(index, spec, out)` must
    /// write exactly `spec.bytes` bytes; padding is added here.
    pub fn write<W: Write>(
        &self,
        out: &mut W,
        mut data: impl FnMut(usize, &TensorSpec, &mut dyn Write) -> io::Result<()>,
    ) -> Result<(), WriteError> {
        out.write_all(&self.meta())?;
        let zeros = vec![0u8; self.alignment.min(1 << 20) as usize];
        for (i, t) in self.tensors.iter().enumerate() {
            let mut c = Counting { inner: &mut *out, n: 0 };
            data(i, t, &mut c)?;
            if c.n != t.bytes {
                return Err(WriteError::DataLength { name: t.name.clone(), wrote: c.n, expected: t.bytes });
            }
            let mut p = pad(t.bytes, self.alignment) - t.bytes;
            while p > 0 {
                let k = p.min(zeros.len() as u64) as usize;
                out.write_all(&zeros[..k])?;
                p -= k as u64;
            }
        }
        Ok(())
    }

    /// Write to a new file at `path` with the tensors' bytes from `data`.
    pub fn write_file(
        &self,
        path: &std::path::Path,
        data: impl FnMut(usize, &TensorSpec, &mut dyn Write) -> io::Result<()>,
    ) -> Result<(), WriteError> {
        let f = std::fs::File::create(path)?;
        let mut w = io::BufWriter::with_capacity(4 << 20, f);
        self.write(&mut w, data)?;
        w.flush()?;
        Ok(())
    }
}

struct Counting<'a, W: Write> {
    inner: &'a mut W,
    n: u64,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let k = self.inner.write(buf)?;
        self.n += k as u64;
        Ok(k)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn pad(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

fn put_str(b: &mut Vec<u8>, s: &[u8]) {
    b.extend_from_slice(&(s.len() as u64).to_le_bytes());
    b.extend_from_slice(s);
}

fn put_gstr(b: &mut Vec<u8>, s: &GString) {
    put_str(b, s.as_bytes());
}

/// A value with its type tag (`with_type`) or without (array elements).
fn put_value(b: &mut Vec<u8>, v: &Value, with_type: bool) {
    if with_type {
        b.extend_from_slice(&v.value_type().id().to_le_bytes());
    }
    match v {
        Value::U8(x) => b.push(*x),
        Value::I8(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => b.push(*x as u8),
        Value::Str(s) => put_gstr(b, s),
        Value::U64(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::Array(a) => put_array(b, a),
    }
}

/// Element type, u64 count, elements.
fn put_array(b: &mut Vec<u8>, a: &Array) {
    b.extend_from_slice(&a.elem_type().id().to_le_bytes());
    b.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! each {
        ($v:expr) => {
            for x in $v {
                b.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        Array::U8(v) => b.extend_from_slice(v),
        Array::I8(v) => each!(v),
        Array::U16(v) => each!(v),
        Array::I16(v) => each!(v),
        Array::U32(v) => each!(v),
        Array::I32(v) => each!(v),
        Array::F32(v) => each!(v),
        Array::Bool(v) => b.extend(v.iter().map(|&x| x as u8)),
        Array::Str(v) => v.iter().for_each(|s| put_gstr(b, s)),
        Array::U64(v) => each!(v),
        Array::I64(v) => each!(v),
        Array::F64(v) => each!(v),
        Array::Array(v) => v.iter().for_each(|x| put_array(b, x)),
    }
}
