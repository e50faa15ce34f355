//! A small safe wrapper over ggml 0.26.0's own GGUF writer (`ggml/include/gguf.h`:
//! `gguf_init_empty`, `gguf_set_val_*`, `gguf_set_arr_data`, `gguf_set_arr_str`,
//! `gguf_add_tensor` with tensors made in a no-alloc `ggml_context`, `gguf_set_tensor_data`,
//! `gguf_write_to_file`, `gguf_free`), so that tests can check a GGUF reader against files
//! ggml itself wrote.
//!
//! Everything that ggml would `GGML_ABORT` on (duplicate tensor names, a misplaced or
//! non-power-of-two `general.alignment`, a row length that is not a multiple of the block,
//! more than 4 dimensions, names of 64 bytes or more, interior NULs) is checked here first
//! and returned as an error. Note ggml's writer pads to 32 bytes whatever
//! `general.alignment` says, so only 32 is accepted for that key.

use std::ffi::{CString, c_char, c_void};

// Rust does not link a crate that nothing `use`s: this pulls in ggml-base.
use llama_cpp_sys_2 as _;

#[repr(C)]
struct GgmlInitParams {
    mem_size: usize,
    mem_buffer: *mut c_void,
    no_alloc: bool,
}

#[repr(C)]
struct GgufContext {
    _opaque: [u8; 0],
}
#[repr(C)]
struct GgmlContext {
    _opaque: [u8; 0],
}
#[repr(C)]
struct GgmlTensor {
    _opaque: [u8; 0],
}

unsafe extern "C" {
    fn gguf_init_empty() -> *mut GgufContext;
    fn gguf_free(ctx: *mut GgufContext);
    fn gguf_set_val_u8(ctx: *mut GgufContext, key: *const c_char, val: u8);
    fn gguf_set_val_i8(ctx: *mut GgufContext, key: *const c_char, val: i8);
    fn gguf_set_val_u16(ctx: *mut GgufContext, key: *const c_char, val: u16);
    fn gguf_set_val_i16(ctx: *mut GgufContext, key: *const c_char, val: i16);
    fn gguf_set_val_u32(ctx: *mut GgufContext, key: *const c_char, val: u32);
    fn gguf_set_val_i32(ctx: *mut GgufContext, key: *const c_char, val: i32);
    fn gguf_set_val_f32(ctx: *mut GgufContext, key: *const c_char, val: f32);
    fn gguf_set_val_u64(ctx: *mut GgufContext, key: *const c_char, val: u64);
    fn gguf_set_val_i64(ctx: *mut GgufContext, key: *const c_char, val: i64);
    fn gguf_set_val_f64(ctx: *mut GgufContext, key: *const c_char, val: f64);
    fn gguf_set_val_bool(ctx: *mut GgufContext, key: *const c_char, val: bool);
    fn gguf_set_val_str(ctx: *mut GgufContext, key: *const c_char, val: *const c_char);
    fn gguf_set_arr_data(ctx: *mut GgufContext, key: *const c_char, ty: i32, data: *const c_void, n: usize);
    fn gguf_set_arr_str(ctx: *mut GgufContext, key: *const c_char, data: *const *const c_char, n: usize);
    fn gguf_add_tensor(ctx: *mut GgufContext, tensor: *const GgmlTensor);
    fn gguf_set_tensor_data(ctx: *mut GgufContext, name: *const c_char, data: *const c_void);
    fn gguf_write_to_file(ctx: *const GgufContext, fname: *const c_char, only_meta: bool) -> bool;
    fn gguf_get_meta_size(ctx: *const GgufContext) -> usize;

    fn ggml_init(params: GgmlInitParams) -> *mut GgmlContext;
    fn ggml_free(ctx: *mut GgmlContext);
    fn ggml_tensor_overhead() -> usize;
    fn ggml_new_tensor(ctx: *mut GgmlContext, ty: i32, n_dims: i32, ne: *const i64) -> *mut GgmlTensor;
    fn ggml_set_name(tensor: *mut GgmlTensor, name: *const c_char) -> *mut GgmlTensor;
    fn ggml_blck_size(ty: i32) -> i64;
    fn ggml_type_size(ty: i32) -> usize;
    fn ggml_type_name(ty: i32) -> *const c_char;
}

/// `enum gguf_type` ids of array element types.
pub mod gguf_type {
    pub const U8: i32 = 0;
    pub const I8: i32 = 1;
    pub const U16: i32 = 2;
    pub const I16: i32 = 3;
    pub const U32: i32 = 4;
    pub const I32: i32 = 5;
    pub const F32: i32 = 6;
    pub const BOOL: i32 = 7;
    pub const U64: i32 = 10;
    pub const I64: i32 = 11;
    pub const F64: i32 = 12;
}

/// A value for [`GgmlGgufWriter::set`].
#[derive(Clone, Debug, PartialEq)]
pub enum KvValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    U64(u64),
    I64(i64),
    F64(f64),
    /// A numeric or bool array: `gguf_type` id of the elements and their little-endian bytes.
    Arr(i32, Vec<u8>),
    StrArr(Vec<String>),
}

/// What ggml would abort on, or a failed write.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GgufWriteError {
    #[error("{0}")]
    Invalid(String),
    #[error("gguf_write_to_file failed for {0}")]
    Write(String),
}

fn cstr(s: &str) -> Result<CString, GgufWriteError> {
    CString::new(s).map_err(|_| GgufWriteError::Invalid(format!("{s:?} contains a NUL byte")))
}

/// `(block elements, block bytes, name)` of a ggml type id as ggml reports them (block 0 for
/// removed ids); `None` at or beyond `GGML_TYPE_COUNT` (43 in ggml 0.26.0).
pub fn type_layout(id: u32) -> Option<(u64, u64, String)> {
    if id >= 43 {
        return None;
    }
    // SAFETY: lookups in ggml's static type table for an id below GGML_TYPE_COUNT.
    unsafe {
        let name = ggml_type_name(id as i32);
        let name =
            if name.is_null() { String::new() } else { std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned() };
        Some((ggml_blck_size(id as i32) as u64, ggml_type_size(id as i32) as u64, name))
    }
}

struct Tensor {
    name: CString,
    ty: u32,
    ne: Vec<i64>,
    data: Vec<u8>,
}

/// Collects metadata and tensors, then writes them with `gguf_write_to_file`.
#[derive(Default)]
pub struct GgmlGgufWriter {
    kv: Vec<(CString, KvValue)>,
    tensors: Vec<Tensor>,
}

impl GgmlGgufWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Set a key (ggml's `gguf_set_val_*` / `gguf_set_arr_*`: a key set again moves to the back).
    pub fn set(&mut self, key: &str, v: KvValue) -> Result<(), GgufWriteError> {
        if key.is_empty() {
            return Err(GgufWriteError::Invalid("empty key".into()));
        }
        if key == "general.alignment" && v != KvValue::U32(32) {
            return Err(GgufWriteError::Invalid("ggml's writer pads to 32: general.alignment must be u32 32".into()));
        }
        if let KvValue::Arr(t, b) = &v {
            let size = match *t {
                gguf_type::U8 | gguf_type::I8 | gguf_type::BOOL => 1,
                gguf_type::U16 | gguf_type::I16 => 2,
                gguf_type::U32 | gguf_type::I32 | gguf_type::F32 => 4,
                gguf_type::U64 | gguf_type::I64 | gguf_type::F64 => 8,
                _ => return Err(GgufWriteError::Invalid(format!("array element type {t}"))),
            };
            if !b.len().is_multiple_of(size) {
                return Err(GgufWriteError::Invalid(format!("array of {} bytes for elements of {size}", b.len())));
            }
        }
        if let KvValue::Str(s) = &v {
            cstr(s)?;
        }
        if let KvValue::StrArr(v) = &v {
            for s in v {
                cstr(s)?;
            }
        }
        let k = cstr(key)?;
        self.kv.retain(|(x, _)| *x != k);
        self.kv.push((k, v));
        Ok(())
    }

    /// Add a tensor of ggml type `ty` and shape `ne` (ggml order) with its raw bytes.
    pub fn add_tensor(&mut self, name: &str, ty: u32, ne: &[u64], data: Vec<u8>) -> Result<(), GgufWriteError> {
        let bad = |m: String| Err(GgufWriteError::Invalid(format!("tensor {name:?}: {m}")));
        if name.len() >= 64 {
            return bad("name of 64 bytes or more".into());
        }
        let cname = cstr(name)?;
        if self.tensors.iter().any(|t| t.name == cname) {
            return bad("duplicate name".into());
        }
        let Some((blck, size, _)) = type_layout(ty) else { return bad(format!("type {ty}")) };
        if blck == 0 {
            return bad(format!("removed type {ty}"));
        }
        if ne.is_empty() || ne.len() > 4 || ne.iter().any(|&d| d > i64::MAX as u64) {
            return bad(format!("shape {ne:?}"));
        }
        if !ne[0].is_multiple_of(blck) {
            return bad(format!("ne[0] = {} is not a multiple of the block {blck}", ne[0]));
        }
        let elems: u64 = ne.iter().product();
        if data.len() as u64 != elems / blck * size {
            return bad(format!("{} bytes of data, expected {}", data.len(), elems / blck * size));
        }
        self.tensors.push(Tensor { name: cname, ty, ne: ne.iter().map(|&d| d as i64).collect(), data });
        Ok(())
    }

    /// Build ggml's context and run `f` on it (freed afterwards).
    fn with_ctx<T>(&self, f: impl FnOnce(*mut GgufContext) -> T) -> T {
        // SAFETY: every pointer passed to ggml below is valid for the call: C strings and
        // tensor data owned by `self` (which outlives the gguf context, freed at the end),
        // tensor shapes checked in `add_tensor` (so ggml_new_tensor and gguf_add_tensor do
        // not abort), and a ggml context sized for the tensor headers with no_alloc.
        unsafe {
            let ctx = gguf_init_empty();
            for (k, v) in &self.kv {
                let k = k.as_ptr();
                match v {
                    KvValue::U8(x) => gguf_set_val_u8(ctx, k, *x),
                    KvValue::I8(x) => gguf_set_val_i8(ctx, k, *x),
                    KvValue::U16(x) => gguf_set_val_u16(ctx, k, *x),
                    KvValue::I16(x) => gguf_set_val_i16(ctx, k, *x),
                    KvValue::U32(x) => gguf_set_val_u32(ctx, k, *x),
                    KvValue::I32(x) => gguf_set_val_i32(ctx, k, *x),
                    KvValue::F32(x) => gguf_set_val_f32(ctx, k, *x),
                    KvValue::Bool(x) => gguf_set_val_bool(ctx, k, *x),
                    KvValue::U64(x) => gguf_set_val_u64(ctx, k, *x),
                    KvValue::I64(x) => gguf_set_val_i64(ctx, k, *x),
                    KvValue::F64(x) => gguf_set_val_f64(ctx, k, *x),
                    KvValue::Str(s) => {
                        let s = CString::new(s.as_str()).unwrap_or_default();
                        gguf_set_val_str(ctx, k, s.as_ptr());
                    }
                    KvValue::Arr(t, b) => {
                        let size = match *t {
                            gguf_type::U8 | gguf_type::I8 | gguf_type::BOOL => 1,
                            gguf_type::U16 | gguf_type::I16 => 2,
                            gguf_type::U32 | gguf_type::I32 | gguf_type::F32 => 4,
                            _ => 8,
                        };
                        gguf_set_arr_data(ctx, k, *t, b.as_ptr().cast(), b.len() / size);
                    }
                    KvValue::StrArr(v) => {
                        let cs: Vec<CString> = v.iter().map(|s| CString::new(s.as_str()).unwrap_or_default()).collect();
                        let ptrs: Vec<*const c_char> = cs.iter().map(|c| c.as_ptr()).collect();
                        gguf_set_arr_str(ctx, k, ptrs.as_ptr(), ptrs.len());
                    }
                }
            }
            let gctx = ggml_init(GgmlInitParams {
                mem_size: ggml_tensor_overhead() * (self.tensors.len() + 1),
                mem_buffer: std::ptr::null_mut(),
                no_alloc: true,
            });
            for t in &self.tensors {
                let tp = ggml_new_tensor(gctx, t.ty as i32, t.ne.len() as i32, t.ne.as_ptr());
                ggml_set_name(tp, t.name.as_ptr());
                gguf_add_tensor(ctx, tp);
                gguf_set_tensor_data(ctx, t.name.as_ptr(), t.data.as_ptr().cast());
            }
            let r = f(ctx);
            gguf_free(ctx);
            ggml_free(gctx);
            r
        }
    }

    /// `gguf_write_to_file(ctx, path, only_meta = false)`.
    pub fn write(&self, path: &std::path::Path) -> Result<(), GgufWriteError> {
        let p = path.to_str().ok_or_else(|| GgufWriteError::Invalid("non-UTF-8 path".into()))?;
        let cp = cstr(p)?;
        // SAFETY: a valid context and a NUL-terminated path.
        let ok = self.with_ctx(|ctx| unsafe { gguf_write_to_file(ctx, cp.as_ptr(), false) });
        if ok { Ok(()) } else { Err(GgufWriteError::Write(p.to_string())) }
    }

    /// `gguf_get_meta_size`: bytes before the data section.
    pub fn meta_size(&self) -> usize {
        // SAFETY: a valid context.
        self.with_ctx(|ctx| unsafe { gguf_get_meta_size(ctx) })
    }
}
