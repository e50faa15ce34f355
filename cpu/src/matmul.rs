//! Row-parallel matmul, dequantize and activation quantize on one CPU path.

use std::cell::RefCell;
use std::ops::Range;

use qkern_formats::reference::{ActBlock, WeightBlock, blocks_of};
use qkern_formats::{Format, ShapeError, reference, with_act_block, with_weight_block};

use crate::{CpuError, CpuPath, require};

thread_local! {
    /// Per-thread scratch of prepared activation scales (see `matmul_typed`).
    static PREPS: RefCell<Vec<Vec<Lane32>>> = const { RefCell::new(Vec::new()) };
}

/// A CPU backend: one kernel path and a thread pool (none when `threads == 1`).
pub struct CpuBackend {
    path: CpuPath,
    threads: usize,
    pool: Option<rayon::ThreadPool>,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend").field("path", &self.path).field("threads", &self.threads).finish()
    }
}

/// A raw output pointer shared by the row tasks of one matmul.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: the pointer is only written through `OutPtr::write`, at indices `t * rows + r`
// where each task owns a disjoint range of `r` (see `CpuBackend::matmul`), and the slice it
// points into outlives the scoped parallel section.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

impl CpuBackend {
    /// A backend on `path` with `threads` worker threads (`None`: the machine's cores).
    pub fn new(path: CpuPath, threads: Option<usize>) -> Result<CpuBackend, CpuError> {
        Self::build(require(path)?, threads)
    }

    /// As [`CpuBackend::new`], but accepts a path that the CPU can run and that is not
    /// complete yet (formats without a SIMD kernel run the scalar reference). For the
    /// crate's tests while SIMD kernels land; not for production use.
    #[doc(hidden)]
    pub fn new_unfinished(path: CpuPath, threads: Option<usize>) -> Result<CpuBackend, CpuError> {
        if !path.cpu_has_features() {
            return Err(CpuError::Unsupported(path, crate::features().to_string()));
        }
        Self::build(path, threads)
    }

    /// `path` must have passed a feature check: every kernel call relies on it.
    fn build(path: CpuPath, threads: Option<usize>) -> Result<CpuBackend, CpuError> {
        let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
        let pool = if threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("qkern-cpu-{i}"))
                    .build()
                    .map_err(|e| CpuError::Pool(e.to_string()))?,
            )
        } else {
            None
        };
        Ok(CpuBackend { path, threads, pool })
    }

    pub fn path(&self) -> CpuPath {
        self.path
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// `out[t * rows + r] = vec_dot(weight row r, activation row t)` for a `rows` x `cols`
    /// weight matrix of `format` (raw ggml blocks) and `nt = out.len() / rows` activation rows
    /// of `format.vec_dot_type()`. Lengths are validated; the bits do not depend on the path,
    /// the thread count or the row split.
    pub fn matmul(
        &self,
        format: Format,
        rows: usize,
        cols: usize,
        weights: &[u8],
        acts: &[u8],
        out: &mut [f32],
    ) -> Result<(), CpuError> {
        let act = format.vec_dot_type().ok_or(ShapeError::Role { format, role: "weight" })?;
        let wb = format.matrix_bytes(rows, cols)?;
        if weights.len() != wb {
            return Err(ShapeError::ByteLength { what: "weights", expected: wb, got: weights.len() }.into());
        }
        if out.is_empty() || !out.len().is_multiple_of(rows) {
            return Err(ShapeError::Length { what: "output ([tokens][rows])", expected: rows, got: out.len() }.into());
        }
        let nt = out.len() / rows;
        let ab = act.row_bytes(cols)?;
        let total = ab.checked_mul(nt).ok_or(ShapeError::Overflow)?;
        if acts.len() != total {
            return Err(ShapeError::ByteLength { what: "activations", expected: total, got: acts.len() }.into());
        }
        let optr = OutPtr(out.as_mut_ptr());
        with_weight_block!(format, B => self.matmul_typed::<B>(rows, cols, weights, acts, nt, optr))
            .ok_or(ShapeError::Role { format, role: "weight" })?;
        Ok(())
    }

    fn matmul_typed<B: Kernels>(&self, rows: usize, cols: usize, w: &[u8], a: &[u8], nt: usize, out: OutPtr)
    where
        B::Act: ActKernels,
    {
        let w = blocks_of::<B>(w);
        let a = blocks_of::<B::Act>(a);
        let bpr = cols / B::ELEMS;
        let apr = cols / <B::Act as ActBlock>::ELEMS;
        let path = self.path;
        // Each token chunk's prepared activation scales (`PrepFn`), once for all rows, in a
        // per-thread scratch that keeps its capacity: after the first call of a shape, matmul
        // allocates nothing (an MoE engine calls it thousands of times a second).
        PREPS.with(|cell| {
            let mut owned = Vec::new();
            let mut guard = cell.try_borrow_mut();
            // Re-entered on this thread (not expected): fall back to a fresh buffer.
            let preps: &mut Vec<Vec<Lane32>> = match guard.as_deref_mut() {
                Ok(p) => p,
                Err(_) => &mut owned,
            };
            let chunks = token_chunks(nt).count();
            if preps.len() < chunks {
                preps.resize_with(chunks, Vec::new);
            }
            for (c, v) in token_chunks(nt).zip(preps.iter_mut()) {
                v.clear();
                if let (Some(_), Some(prep)) = (B::dot_kernel(path), <B::Act as ActKernels>::AVX2_PREP) {
                    // SAFETY: `CpuBackend::build` only holds a path whose features this CPU has;
                    // the slice is the chunk's `c.len()` rows of `apr` blocks.
                    unsafe { prep(&a[c.start * apr..c.end * apr], apr, c.len(), v) };
                }
            }
            let preps: &[Vec<Lane32>] = &preps[..chunks];
            let run = |r: Range<usize>| rows_kernel::<B>(path, &w, bpr, &a, apr, nt, preps, rows, r, out);
            match &self.pool {
                None => run(0..rows),
                Some(pool) => {
                    // Tasks of at least 16 rows, about 4 per thread for balance.
                    let chunk = rows.div_ceil(self.threads * 4).max(16);
                    let tasks = rows.div_ceil(chunk);
                    pool.scope(|s| {
                        for i in 0..tasks {
                            let r = i * chunk..((i + 1) * chunk).min(rows);
                            let run = &run;
                            s.spawn(move |_| run(r));
                        }
                    });
                }
            }
        })
    }

    /// Dequantize `out.len()` elements (whole rows) of `format` to f32.
    pub fn dequantize(&self, format: Format, bytes: &[u8], out: &mut [f32]) -> Result<(), CpuError> {
        if self.path != CpuPath::Scalar {
            // Validated as `reference::dequantize_row` does: whole blocks, exact byte count.
            let rb = format.row_bytes(out.len())?;
            if bytes.len() != rb {
                return Err(ShapeError::ByteLength { what: "dequantize input", expected: rb, got: bytes.len() }.into());
            }
            let done = with_weight_block!(format, B => match B::dequantize_kernel(self.path) {
                Some(f) => {
                    // SAFETY: `CpuBackend::build` only holds a path whose features this CPU has
                    // (`cpu_has_features`, via `require` or `new_unfinished`); the lengths match
                    // (`out.len() == blocks * ELEMS`, checked above).
                    unsafe { f(&blocks_of::<B>(bytes), out) };
                    true
                }
                // No SIMD dequantizer for this format: the scalar reference below.
                None => false,
            });
            if done == Some(true) {
                return Ok(());
            }
        }
        Ok(reference::dequantize_row(format, bytes, out)?)
    }

    /// Quantize `nt = x.len() / cols` activation rows to `act` (q8_0, q8_1, q8_K).
    pub fn quantize(&self, act: Format, cols: usize, x: &[f32], out: &mut [u8]) -> Result<(), CpuError> {
        if !act.is_activation() {
            return Err(ShapeError::Role { format: act, role: "activation" }.into());
        }
        let rb = act.row_bytes(cols)?;
        if x.is_empty() || !x.len().is_multiple_of(cols) {
            return Err(
                ShapeError::Length { what: "activations ([tokens][cols])", expected: cols, got: x.len() }.into()
            );
        }
        let nt = x.len() / cols;
        let total = rb.checked_mul(nt).ok_or(ShapeError::Overflow)?;
        if out.len() != total {
            return Err(
                ShapeError::ByteLength { what: "quantized activations", expected: total, got: out.len() }.into()
            );
        }
        let path = self.path;
        with_act_block!(act, B => {
            let per = rb / act.block_bytes();
            // The path's quantizer for one row (`xr.len() == br.len() * ELEMS`).
            let quantize_row = |xr: &[f32], br: &mut [B]| match B::quantize_kernel(path) {
                Some(f) => {
                    // SAFETY: `CpuBackend::build` only holds a path whose features this CPU has
                    // (`cpu_has_features`); `xr.len() == br.len() * ELEMS` (chunked below).
                    unsafe { f(xr, br) }
                }
                // The Scalar path, and the explicit fallback where no SIMD quantizer exists.
                None => B::quantize(xr, br),
            };
            // Quantize straight into `out` when it is aligned for the block type.
            match bytemuck::try_cast_slice_mut::<u8, B>(out) {
                Ok(blocks) => {
                    for (xr, br) in x.chunks_exact(cols).zip(blocks.chunks_exact_mut(per)) {
                        quantize_row(xr, br);
                    }
                }
                Err(_) => {
                    let mut tmp = vec![<B as bytemuck::Zeroable>::zeroed(); per];
                    for (xr, or) in x.chunks_exact(cols).zip(out.chunks_exact_mut(rb)) {
                        quantize_row(xr, &mut tmp);
                        or.copy_from_slice(bytemuck::cast_slice(&tmp));
                    }
                }
            }
            Ok::<(), CpuError>(())
        })
        .ok_or(ShapeError::Role { format: act, role: "activation" })?
    }
}

/// Check imported activation bytes for -128 quants (see `qkern_formats::reference`).
pub fn check_activations(act: Format, cols: usize, bytes: &[u8]) -> Result<(), CpuError> {
    let rb = act.row_bytes(cols)?;
    if bytes.is_empty() || !bytes.len().is_multiple_of(rb) {
        return Err(ShapeError::ByteLength { what: "activations", expected: rb, got: bytes.len() }.into());
    }
    with_act_block!(act, B => {
        let blocks = blocks_of::<B>(bytes);
        let per = rb / act.block_bytes();
        match blocks.iter().position(|b| b.has_minus_128()) {
            Some(i) => Err(CpuError::Minus128(act, i / per, i % per)),
            None => Ok(()),
        }
    })
    .ok_or(CpuError::Shape(ShapeError::Role { format: act, role: "activation" }))?
}

/// The per-format kernels of the SIMD paths, with the scalar fallback made explicit: a
/// format whose entry is `None` runs the scalar reference on that path.
pub(crate) trait Kernels: WeightBlock {
    /// The AVX2 dot kernel (one row, 1..=`MAX_NT` tokens), or `None`: scalar fallback.
    const AVX2_DOT: Option<ChunkFn<Self>>;
    /// The AVX2 `dequantize_row_*`, or `None`: scalar fallback.
    const AVX2_DEQUANTIZE: Option<DequantizeFn<Self>>;
    /// The AVX-512 path's dot kernel (`x86::avx512`, or an AVX2 one where that is faster:
    /// see the table below), or `None`: scalar fallback.
    const AVX512_DOT: Option<ChunkFn<Self>>;
    /// The AVX-512 path's `dequantize_row_*`, or `None`: scalar fallback.
    const AVX512_DEQUANTIZE: Option<DequantizeFn<Self>>;

    /// The dot kernel of a SIMD `path` (`None`: scalar reference).
    fn dot_kernel(path: CpuPath) -> Option<ChunkFn<Self>> {
        match path {
            CpuPath::Scalar => None,
            CpuPath::Avx2 => Self::AVX2_DOT,
            CpuPath::Avx512 => Self::AVX512_DOT,
        }
    }

    /// The dequantizer of a SIMD `path` (`None`: scalar reference).
    fn dequantize_kernel(path: CpuPath) -> Option<DequantizeFn<Self>> {
        match path {
            CpuPath::Scalar => None,
            CpuPath::Avx2 => Self::AVX2_DEQUANTIZE,
            CpuPath::Avx512 => Self::AVX512_DEQUANTIZE,
        }
    }
}

/// The activation quantizers of the SIMD paths (`None`: the scalar reference).
pub(crate) trait ActKernels: ActBlock {
    /// The AVX2 x86 `quantize_row_*`, or `None`: scalar fallback.
    const AVX2_QUANTIZE: Option<QuantizeFn<Self>>;
    /// The per-chunk scale preparation the AVX2 dot kernels read (`PrepFn`), or `None`.
    /// The AVX-512 path's kernels read the same (they are the same source).
    const AVX2_PREP: Option<PrepFn<Self>>;
    /// The AVX-512 path's quantizer, or `None`: scalar fallback.
    const AVX512_QUANTIZE: Option<QuantizeFn<Self>>;

    /// The quantizer of a SIMD `path` (`None`: scalar reference).
    fn quantize_kernel(path: CpuPath) -> Option<QuantizeFn<Self>> {
        match path {
            CpuPath::Scalar => None,
            CpuPath::Avx2 => Self::AVX2_QUANTIZE,
            CpuPath::Avx512 => Self::AVX512_QUANTIZE,
        }
    }
}

/// Prepare a chunk of `nt <= MAX_NT` activation rows (`apr` blocks each) for the dot
/// kernels, once per matmul: the f16 scales of q8_0 / q8_1 as f32, block-major
/// (`x86::prep_q8_0`, `x86::prep_q8_1`), or q8_K blocks re-laid with aligned quants and
/// precomputed `bsums` pair sums (`x86::prep_q8_k`). Exact conversions and copies: the
/// bits do not change.
///
/// # Safety
/// The CPU must support the function's path.
pub(crate) type PrepFn<A> = unsafe fn(a: &[A], apr: usize, nt: usize, out: &mut Vec<Lane32>);

/// The unit of the prepared activations: 32 bytes, 32-byte aligned (so that a kernel's
/// view of them, e.g. `x86::Q8KPrep`, has its quant vectors aligned).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C, align(32))]
pub(crate) struct Lane32(pub(crate) [f32; 8]);
// SAFETY: `repr(C)`, 32 bytes of f32 and no padding (size 32 = align 32); every bit
// pattern is a valid `[f32; 8]`.
unsafe impl bytemuck::Zeroable for Lane32 {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Lane32 {}

/// `dequantize_row_*` of one or more rows: `out.len() == blocks.len() * ELEMS`.
///
/// # Safety
/// The CPU must support the function's path.
pub(crate) type DequantizeFn<B> = unsafe fn(blocks: &[B], out: &mut [f32]);

/// x86 `quantize_row_*` of one row: `x.len() == out.len() * ELEMS`.
///
/// # Safety
/// The CPU must support the function's path.
pub(crate) type QuantizeFn<B> = unsafe fn(x: &[f32], out: &mut [B]);

/// Weight rows against a chunk of 1..=`MAX_NT` tokens: `w` holds `w.len() / bpr` rows of
/// `bpr` blocks, and `out[j * nt + t] = vec_dot(row j, token t)`, token t's activation row
/// being `a[t * apr..][..apr]`; `out.len() == w.len() / bpr * nt`; `scales` is the chunk's
/// `PrepFn` output (empty where the activation type has none).
///
/// # Safety
/// The CPU must support the kernel's path (`CpuPath::supported`).
pub(crate) type ChunkFn<B> = unsafe fn(
    w: &[B],
    bpr: usize,
    a: &[<B as WeightBlock>::Act],
    apr: usize,
    nt: usize,
    scales: &[Lane32],
    out: &mut [f32],
);

/// Rows per kernel call: the kernels loop over them without a dispatch per row, and with
/// more than `MAX_NT` tokens every token chunk re-reads only this tile of rows (from L2).
pub(crate) const ROW_TILE: usize = 16;

/// The largest chunk of tokens one kernel call takes.
pub(crate) const MAX_NT: usize = 8;

macro_rules! kernels {
    ($($B:ident => dot $dot:expr, dequantize $dq:expr; avx512 dot $dot512:expr, dequantize $dq512:expr;)*) => {
        $(
            impl Kernels for qkern_formats::blocks::$B {
                #[cfg(target_arch = "x86_64")]
                const AVX2_DOT: Option<ChunkFn<Self>> = $dot;
                #[cfg(not(target_arch = "x86_64"))]
                const AVX2_DOT: Option<ChunkFn<Self>> = None;
                #[cfg(target_arch = "x86_64")]
                const AVX2_DEQUANTIZE: Option<DequantizeFn<Self>> = $dq;
                #[cfg(not(target_arch = "x86_64"))]
                const AVX2_DEQUANTIZE: Option<DequantizeFn<Self>> = None;
                #[cfg(target_arch = "x86_64")]
                const AVX512_DOT: Option<ChunkFn<Self>> = $dot512;
                #[cfg(not(target_arch = "x86_64"))]
                const AVX512_DOT: Option<ChunkFn<Self>> = None;
                #[cfg(target_arch = "x86_64")]
                const AVX512_DEQUANTIZE: Option<DequantizeFn<Self>> = $dq512;
                #[cfg(not(target_arch = "x86_64"))]
                const AVX512_DEQUANTIZE: Option<DequantizeFn<Self>> = None;
            }
        )*
    };
}

macro_rules! act_kernels {
    ($($B:ident => quantize $q:expr, prep $p:expr; avx512 quantize $q512:expr;)*) => {
        $(
            impl ActKernels for qkern_formats::blocks::$B {
                #[cfg(target_arch = "x86_64")]
                const AVX2_QUANTIZE: Option<QuantizeFn<Self>> = $q;
                #[cfg(not(target_arch = "x86_64"))]
                const AVX2_QUANTIZE: Option<QuantizeFn<Self>> = None;
                #[cfg(target_arch = "x86_64")]
                const AVX2_PREP: Option<PrepFn<Self>> = $p;
                #[cfg(not(target_arch = "x86_64"))]
                const AVX2_PREP: Option<PrepFn<Self>> = None;
                #[cfg(target_arch = "x86_64")]
                const AVX512_QUANTIZE: Option<QuantizeFn<Self>> = $q512;
                #[cfg(not(target_arch = "x86_64"))]
                const AVX512_QUANTIZE: Option<QuantizeFn<Self>> = None;
            }
        )*
    };
}

// `None` = no SIMD kernel: the scalar reference runs on the AVX2 path for that format
// (explicit fallback, see `rows_kernel`, `CpuBackend::dequantize`, `CpuBackend::quantize`).
//
// The AVX-512 path's dot kernels: the `x86::avx512` build where it was measured faster than
// the AVX2 build, the AVX2 build elsewhere (both read the same prepared activations and give
// the same bits). Measured on the H200 host's Xeon (AVX-512 VNNI), one interleaved run, 1
// thread, 128 MiB of weights, AVX-512 / AVX2 at NT 1 / 4 / 8
// (benches/results/2026-12-03-xeon-avx512/run2-final): q5_1 1.00 / 1.04 / 1.21, q8_0
// 1.04 / 1.08 / 1.16, iq4_nl 0.98 / 1.13 / 1.14, nvfp4 1.03 / 1.15 / 1.01, iq4_xs
// 1.03 / 1.01 / 1.18, iq3_xxs 1.04 / 1.15 / 1.05, iq2_xs 1.06 / 1.11 / 1.03 (AVX-512 kept);
// q4_K 1.00 / 1.00 / 1.01, q5_K 1.02 / 1.02 / 1.03, q6_K 1.03 / 0.99 / 0.94, iq2_xxs
// 1.22 / 0.98 / 0.91, iq3_s 1.00 / 1.01 / 0.96, iq2_s 1.10 / 0.98 / 1.01 (AVX2 kernels: no
// gain beyond the noise, or a loss at NT 8).
kernels! {
    BlockQ8_0 => dot Some(crate::x86::q8_0::chunk_avx2), dequantize Some(crate::x86::q8_0::dequantize_avx2);
        avx512 dot Some(crate::x86::avx512::q8_0::chunk_avx2), dequantize Some(crate::x86::avx512::dequantize_q8_0);
    BlockQ5_1 => dot Some(crate::x86::q5_1::chunk_avx2), dequantize Some(crate::x86::q5_1::dequantize_avx2);
        avx512 dot Some(crate::x86::avx512::q5_1::chunk_avx2), dequantize Some(crate::x86::avx512::dequantize_q5_1);
    BlockQ4K => dot Some(crate::x86::q4_k::chunk_avx2), dequantize Some(crate::x86::q4_k::dequantize_avx2);
        avx512 dot Some(crate::x86::q4_k::chunk_avx2), dequantize Some(crate::x86::avx512::dequantize_q4_k);
    BlockQ5K => dot Some(crate::x86::q5_k::chunk_avx2), dequantize Some(crate::x86::q5_k::dequantize_avx2);
        avx512 dot Some(crate::x86::q5_k::chunk_avx2), dequantize Some(crate::x86::avx512::dequantize_q5_k);
    BlockQ6K => dot Some(crate::x86::q6_k::chunk_avx2), dequantize Some(crate::x86::q6_k::dequantize_avx2);
        avx512 dot Some(crate::x86::q6_k::chunk_avx2), dequantize Some(crate::x86::avx512::dequantize_q6_k);
    BlockIq2Xxs => dot Some(crate::x86::iq::iq2_xxs_avx2), dequantize Some(crate::x86::iq::iq2_xxs_dequantize_avx2);
        avx512 dot Some(crate::x86::iq::iq2_xxs_avx2), dequantize Some(crate::x86::avx512::dequantize_iq2_xxs);
    BlockIq2Xs => dot Some(crate::x86::iq::iq2_xs_avx2), dequantize Some(crate::x86::iq::iq2_xs_dequantize_avx2);
        avx512 dot Some(crate::x86::avx512::iq::iq2_xs_avx2), dequantize Some(crate::x86::avx512::dequantize_iq2_xs);
    BlockIq2S => dot Some(crate::x86::iq::iq2_s_avx2), dequantize Some(crate::x86::iq::iq2_s_dequantize_avx2);
        avx512 dot Some(crate::x86::iq::iq2_s_avx2), dequantize Some(crate::x86::avx512::dequantize_iq2_s);
    BlockIq3Xxs => dot Some(crate::x86::iq::iq3_xxs_avx2), dequantize Some(crate::x86::iq::iq3_xxs_dequantize_avx2);
        avx512 dot Some(crate::x86::avx512::iq::iq3_xxs_avx2), dequantize Some(crate::x86::avx512::dequantize_iq3_xxs);
    BlockIq3S => dot Some(crate::x86::iq::iq3_s_avx2), dequantize Some(crate::x86::iq::iq3_s_dequantize_avx2);
        avx512 dot Some(crate::x86::iq::iq3_s_avx2), dequantize Some(crate::x86::avx512::dequantize_iq3_s);
    BlockIq4Nl => dot Some(crate::x86::iq4_nl::chunk_avx2), dequantize Some(crate::x86::iq4_nl::dequantize_avx2);
        avx512 dot Some(crate::x86::avx512::iq4_nl::chunk_avx2), dequantize Some(crate::x86::avx512::dequantize_iq4_nl);
    BlockIq4Xs => dot Some(crate::x86::iq::iq4_xs_avx2), dequantize Some(crate::x86::iq::iq4_xs_dequantize_avx2);
        avx512 dot Some(crate::x86::avx512::iq::iq4_xs_avx2), dequantize Some(crate::x86::avx512::dequantize_iq4_xs);
    BlockNvfp4 => dot Some(crate::x86::nvfp4::chunk_avx2), dequantize Some(crate::x86::nvfp4::dequantize_avx2);
        avx512 dot Some(crate::x86::avx512::nvfp4::chunk_avx2), dequantize Some(crate::x86::avx512::dequantize_nvfp4);
}

act_kernels! {
    BlockQ8_0 => quantize Some(crate::x86::q8_0::quantize_avx2), prep Some(crate::x86::prep_q8_0);
        avx512 quantize Some(crate::x86::avx512::quantize_q8_0);
    BlockQ8_1 => quantize Some(crate::x86::q5_1::quantize_q8_1_avx2), prep Some(crate::x86::prep_q8_1);
        avx512 quantize Some(crate::x86::avx512::quantize_q8_1);
    // ggml's x86 `quantize_row_q8_K` is the scalar `_ref` one; ours vectorizes it with the
    // same bits. Its blocks are re-laid for the kernels (aligned quants, `bsums` pair sums).
    // The AVX-512 path runs the AVX2 build (a quantizer of no loop-carried float state).
    BlockQ8K => quantize Some(crate::x86::q8_k::quantize_avx2), prep Some(crate::x86::prep_q8_k);
        avx512 quantize Some(crate::x86::q8_k::quantize_avx2);
}

/// Split `nt` tokens into `ceil(nt / MAX_NT)` chunks of near-equal size (e.g. 9 -> 5 + 4),
/// so that no chunk runs a much less efficient small-`NT` kernel.
pub(crate) fn token_chunks(nt: usize) -> impl Iterator<Item = Range<usize>> {
    let k = nt.div_ceil(MAX_NT).max(1);
    let (base, rem) = (nt / k, nt % k);
    (0..k).scan(0, move |t0, i| {
        let c = base + usize::from(i < rem);
        let r = *t0..*t0 + c;
        *t0 += c;
        Some(r)
    })
}

/// Rows `r` of the output on one path.
#[allow(clippy::too_many_arguments)]
fn rows_kernel<B: Kernels>(
    path: CpuPath,
    w: &[B],
    bpr: usize,
    a: &[B::Act],
    apr: usize,
    nt: usize,
    preps: &[Vec<Lane32>],
    rows: usize,
    r: Range<usize>,
    out: OutPtr,
) {
    match B::dot_kernel(path) {
        Some(kernel) => {
            let mut buf = [0f32; ROW_TILE * MAX_NT];
            let mut r0 = r.start;
            while r0 < r.end {
                let r1 = (r0 + ROW_TILE).min(r.end);
                let wr = &w[r0 * bpr..r1 * bpr];
                for (c, sc) in token_chunks(nt).zip(preps) {
                    let k = c.len();
                    let o = &mut buf[..(r1 - r0) * k];
                    // SAFETY: `path` is held by a `CpuBackend`, whose constructor checked that this
                    // CPU has the path's features (`cpu_has_features`); `k` is in 1..=MAX_NT, the
                    // activation slice holds the chunk's `k * apr` blocks and `o` one value per
                    // (row, token) of the tile.
                    unsafe { kernel(wr, bpr, &a[c.start * apr..c.end * apr], apr, k, sc, o) };
                    for (row, orow) in (r0..r1).zip(o.chunks_exact(k)) {
                        for (t, &v) in c.clone().zip(orow) {
                            // SAFETY: t < nt and row < rows: inside the `nt * rows` output; this
                            // task alone owns the rows in `r` (OutPtr's contract).
                            unsafe { out.0.add(t * rows + row).write(v) };
                        }
                    }
                }
                r0 = r1;
            }
        }
        // The scalar reference: the Scalar path, and the explicit fallback for a format
        // without a SIMD kernel on this path.
        None => {
            for row in r {
                let wr = &w[row * bpr..(row + 1) * bpr];
                for t in 0..nt {
                    let v = B::vec_dot(wr, &a[t * apr..(t + 1) * apr]);
                    // SAFETY: t < nt and row < rows, so the index is inside the `nt * rows`
                    // output slice; this task alone owns rows in `r` (OutPtr's contract).
                    unsafe { out.0.add(t * rows + row).write(v) };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_tokens() {
        for nt in 1..100 {
            let cs: Vec<_> = token_chunks(nt).collect();
            assert_eq!(cs.len(), nt.div_ceil(MAX_NT));
            assert_eq!(cs[0].start, 0);
            assert_eq!(cs.last().unwrap().end, nt);
            for w in cs.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
            let (lo, hi) = (cs.iter().map(|c| c.len()).min().unwrap(), cs.iter().map(|c| c.len()).max().unwrap());
            assert!(lo >= 1 && hi <= MAX_NT && hi - lo <= 1, "{nt}: {cs:?}");
        }
    }
}
