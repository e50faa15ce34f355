//! A small safe wrapper over ggml's type traits (ggml 0.26.0 as vendored by
//! `llama-cpp-sys-2 =0.1.161`, built with the ISA pinned in `.cargo/config.toml`).
//!
//! Everything here calls exactly the functions `shared/REFERENCE.md` names as the
//! reference: `ggml_get_type_traits(t)->to_float`, `ggml_get_type_traits_cpu(t)->from_float`
//! and `ggml_get_type_traits_cpu(t)->vec_dot` with `nrc = 1`, plus `ggml_quantize_chunk`.

use std::ffi::{CStr, c_char, c_void};
use std::sync::Once;

use qkern_formats::Format;

// Rust does not link a crate that nothing `use`s: this pulls in ggml-base/ggml-cpu.
use llama_cpp_sys_2 as _;

/// `ggml_to_float_t`.
pub type ToFloat = unsafe extern "C" fn(x: *const c_void, y: *mut f32, k: i64);
/// `ggml_from_float_t`.
pub type FromFloat = unsafe extern "C" fn(x: *const f32, y: *mut c_void, k: i64);
/// `ggml_vec_dot_t`.
pub type VecDot = unsafe extern "C" fn(
    n: i32,
    s: *mut f32,
    bs: usize,
    x: *const c_void,
    bx: usize,
    y: *const c_void,
    by: usize,
    nrc: i32,
);

#[repr(C)]
struct TypeTraits {
    type_name: *const c_char,
    blck_size: i64,
    blck_size_interleave: i64,
    type_size: usize,
    is_quantized: bool,
    to_float: Option<ToFloat>,
    from_float_ref: Option<FromFloat>,
}

#[repr(C)]
struct TypeTraitsCpu {
    from_float: Option<FromFloat>,
    vec_dot: Option<VecDot>,
    vec_dot_type: i32,
    nrows: i64,
}

unsafe extern "C" {
    fn ggml_get_type_traits(t: i32) -> *const TypeTraits;
    fn ggml_get_type_traits_cpu(t: i32) -> *const TypeTraitsCpu;
    fn ggml_cpu_init();
    fn ggml_quantize_init(t: i32);
    fn ggml_quantize_requires_imatrix(t: i32) -> bool;
    fn ggml_quantize_chunk(
        t: i32,
        src: *const f32,
        dst: *mut c_void,
        start: i64,
        nrows: i64,
        n_per_row: i64,
        imatrix: *const f32,
    ) -> usize;
    fn ggml_blck_size(t: i32) -> i64;
    fn ggml_type_size(t: i32) -> usize;
    fn ggml_cpu_has_avx2() -> i32;
    fn ggml_cpu_has_fma() -> i32;
    fn ggml_cpu_has_f16c() -> i32;
    fn ggml_cpu_has_avx512() -> i32;
}

/// Errors of the live-ggml wrapper: every one is a misuse that would otherwise be UB in C.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GgmlError {
    #[error("ggml has no {what} for {format}")]
    Missing { format: Format, what: &'static str },
    #[error("{what}: expected {expected} bytes/elements, got {got}")]
    Length { what: &'static str, expected: usize, got: usize },
    #[error("{format}: {cols} columns is not a multiple of the block size {block}")]
    Cols { format: Format, cols: usize, block: usize },
    #[error("ggml's block size for {format} ({ggml}) disagrees with qkern's ({ours})")]
    Layout { format: Format, ggml: usize, ours: usize },
}

static INIT: Once = Once::new();

fn init() {
    // SAFETY: ggml_cpu_init only fills ggml's internal fp16 tables; guarded by Once.
    INIT.call_once(|| unsafe { ggml_cpu_init() });
}

fn traits(f: Format) -> &'static TypeTraits {
    init();
    // SAFETY: every `Format` id is a valid ggml_type below GGML_TYPE_COUNT, for which
    // ggml returns a pointer into its static traits table.
    unsafe { &*ggml_get_type_traits(f.id() as i32) }
}

fn traits_cpu(f: Format) -> &'static TypeTraitsCpu {
    init();
    // SAFETY: as above, a pointer into ggml-cpu's static table.
    unsafe { &*ggml_get_type_traits_cpu(f.id() as i32) }
}

/// ggml's own kernels of a format, for callers that run ggml's loops around them (the
/// benchmark's ggml contender); calling one is `unsafe`, with the lengths ggml's header gives.
#[derive(Clone, Copy)]
pub struct RawKernels {
    /// `ggml_get_type_traits(f)->to_float`.
    pub to_float: Option<ToFloat>,
    /// `ggml_get_type_traits_cpu(f)->from_float`.
    pub from_float: Option<FromFloat>,
    /// `ggml_get_type_traits_cpu(f)->vec_dot`.
    pub vec_dot: Option<VecDot>,
}

/// The kernels of `f` (after `ggml_cpu_init`).
pub fn raw_kernels(f: Format) -> RawKernels {
    let (t, c) = (traits(f), traits_cpu(f));
    RawKernels { to_float: t.to_float, from_float: c.from_float, vec_dot: c.vec_dot }
}

/// ggml's type name (`"q4_K"`, ...).
pub fn type_name(f: Format) -> String {
    let p = traits(f).type_name;
    // SAFETY: ggml's type names are static NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// ggml's `(block elements, block bytes)`, for cross-checking qkern's layouts.
pub fn block_layout(f: Format) -> (usize, usize) {
    init();
    // SAFETY: plain lookups in ggml's static table.
    unsafe { (ggml_blck_size(f.id() as i32) as usize, ggml_type_size(f.id() as i32)) }
}

/// ggml's `vec_dot_type` for a weight format.
pub fn vec_dot_type(f: Format) -> Option<Format> {
    Format::from_id(traits_cpu(f).vec_dot_type as u32).ok()
}

/// The ISA ggml-cpu was built for: `(avx2, fma, f16c, avx512)`.
pub fn isa() -> (bool, bool, bool, bool) {
    init();
    // SAFETY: feature queries without arguments.
    unsafe { (ggml_cpu_has_avx2() != 0, ggml_cpu_has_fma() != 0, ggml_cpu_has_f16c() != 0, ggml_cpu_has_avx512() != 0) }
}

fn check_layout(f: Format, cols: usize) -> Result<usize, GgmlError> {
    let (be, bb) = block_layout(f);
    if be != f.block_elems() || bb != f.block_bytes() {
        return Err(GgmlError::Layout { format: f, ggml: bb, ours: f.block_bytes() });
    }
    if !cols.is_multiple_of(be) {
        return Err(GgmlError::Cols { format: f, cols, block: be });
    }
    Ok(cols / be * bb)
}

fn check_len(what: &'static str, expected: usize, got: usize) -> Result<(), GgmlError> {
    if expected != got {
        return Err(GgmlError::Length { what, expected, got });
    }
    Ok(())
}

/// `ggml_get_type_traits(f)->to_float` over one or more rows (`out.len()` elements).
pub fn to_float(f: Format, src: &[u8], out: &mut [f32]) -> Result<(), GgmlError> {
    let rb = check_layout(f, out.len())?;
    check_len("to_float input", rb, src.len())?;
    let tf = traits(f).to_float.ok_or(GgmlError::Missing { format: f, what: "to_float" })?;
    // SAFETY: src holds exactly the blocks for out.len() elements (checked above).
    unsafe { tf(src.as_ptr().cast(), out.as_mut_ptr(), out.len() as i64) };
    Ok(())
}

/// `ggml_get_type_traits_cpu(f)->from_float`, the x86 quantizer (not `_ref`).
pub fn from_float(f: Format, src: &[f32], out: &mut [u8]) -> Result<(), GgmlError> {
    let rb = check_layout(f, src.len())?;
    check_len("from_float output", rb, out.len())?;
    let ff = traits_cpu(f).from_float.ok_or(GgmlError::Missing { format: f, what: "from_float" })?;
    // SAFETY: out holds exactly the blocks for src.len() elements (checked above).
    unsafe { ff(src.as_ptr(), out.as_mut_ptr().cast(), src.len() as i64) };
    Ok(())
}

/// `ggml_get_type_traits_cpu(f)->vec_dot` with `nrc = 1`: one weight row with one
/// activation row already quantized to `vec_dot_type(f)`.
pub fn vec_dot(f: Format, cols: usize, w: &[u8], a: &[u8]) -> Result<f32, GgmlError> {
    let rb = check_layout(f, cols)?;
    check_len("vec_dot weight row", rb, w.len())?;
    let at = vec_dot_type(f).ok_or(GgmlError::Missing { format: f, what: "vec_dot_type" })?;
    let ab = check_layout(at, cols)?;
    check_len("vec_dot activation row", ab, a.len())?;
    let vd = traits_cpu(f).vec_dot.ok_or(GgmlError::Missing { format: f, what: "vec_dot" })?;
    let mut s = 0f32;
    // SAFETY: both rows have exactly the sizes ggml reads for n = cols (checked above);
    // nrc = 1 reads one row of each and writes one float.
    unsafe { vd(cols as i32, &mut s, 0, w.as_ptr().cast(), 0, a.as_ptr().cast(), 0, 1) };
    Ok(s)
}

/// Whether ggml refuses to quantize `f` without an importance matrix.
pub fn requires_imatrix(f: Format) -> bool {
    init();
    // SAFETY: a lookup on a valid type id.
    unsafe { ggml_quantize_requires_imatrix(f.id() as i32) }
}

/// `ggml_quantize_chunk` (after `ggml_quantize_init`): quantize `rows` rows of `cols`
/// floats. `imatrix` (one weight per column) is required where ggml requires one.
pub fn quantize(f: Format, src: &[f32], cols: usize, imatrix: Option<&[f32]>) -> Result<Vec<u8>, GgmlError> {
    let rb = check_layout(f, cols)?;
    if cols == 0 || !src.len().is_multiple_of(cols) {
        return Err(GgmlError::Length { what: "quantize input", expected: cols, got: src.len() });
    }
    let rows = src.len() / cols;
    if let Some(im) = imatrix {
        check_len("imatrix", cols, im.len())?;
    } else if requires_imatrix(f) {
        return Err(GgmlError::Missing { format: f, what: "quantization without an importance matrix" });
    }
    let mut out = vec![0u8; rb * rows];
    init();
    // SAFETY: src has rows*cols floats, out has rows*row_bytes bytes, imatrix is null or
    // has cols floats (checked above). ggml_quantize_init builds the IQ grids once.
    unsafe {
        ggml_quantize_init(f.id() as i32);
        let n = ggml_quantize_chunk(
            f.id() as i32,
            src.as_ptr(),
            out.as_mut_ptr().cast(),
            0,
            rows as i64,
            cols as i64,
            imatrix.map_or(std::ptr::null(), |m| m.as_ptr()),
        );
        check_len("quantize output", out.len(), n)?;
    }
    Ok(out)
}

/// Whether ggml-cpu has a `from_float` for `f` (q8_K's is the `_ref` quantizer).
pub fn from_float_available(f: Format) -> bool {
    traits_cpu(f).from_float.is_some()
}
