//! candle's CPU quantized kernels (feature `candle`, `candle-core =0.11.1`).
//!
//! - matmul: `candle_core::quantized::k_quants::matmul::<T>((tokens, cols, rows), x, w, dst)`,
//!   the function `QMatMul::forward` reaches on the CPU for compact weights
//!   (`QStorage::Cpu::matmul_t`). It takes f32 activations and quantizes them to
//!   `T::VecDotType` inside every call (candle has no entry point for pre-quantized ones), so
//!   its time includes that step; for the shapes here it is a small part (tokens x cols
//!   floats against rows x cols weights). It reads the weight bytes in place (cast to candle's
//!   `#[repr(C)]` block structs, whose layout is checked against ggml's).
//!   Not measured: `QMatMul::forward`'s x86 repacked route (`repack::try_matmul_f32`), which for
//!   q4_K (and q6_K with 2+ tokens) first copies the weights into a tiled layout, i.e. not the
//!   same weight memory.
//! - Threads: candle's own pool is sized once per process (`CANDLE_NUM_THREADS`); the harness
//!   sets it to 1 ([`init`]) and, for N threads, splits the rows into N contiguous parts, one
//!   `matmul` call per part on N workers of a rayon pool (per part outputs are `[tokens][part
//!   rows]` in a scratch buffer).
//! - dequant: `T::to_float` over 16 rows per call; quantize: `T::from_float` per token row.
//!
//! Formats: q8_0, q5_1, q4_K, q5_K, q6_K (candle has no IQ formats, no nvfp4, no iq4_nl).

#[cfg(feature = "candle")]
pub use imp::{Dequant, Matmul, Quantize, init, version};
#[cfg(not(feature = "candle"))]
pub use stub::{Dequant, Matmul, Quantize, init, version};

/// Whether this build has the candle contender.
pub const BUILT: bool = cfg!(feature = "candle");

/// The weight formats candle-core has CPU kernels for (of qkern's formats).
pub const FORMATS: [qkern::Format; 5] =
    [qkern::Format::Q8_0, qkern::Format::Q5_1, qkern::Format::Q4_K, qkern::Format::Q5_K, qkern::Format::Q6_K];

#[cfg(feature = "candle")]
mod imp {
    use std::hint::black_box;
    use std::marker::PhantomData;
    use std::sync::{Arc, Mutex};

    use candle_core::quantized::k_quants::{
        self, BlockQ4K, BlockQ5_1, BlockQ5K, BlockQ6K, BlockQ8_0, BlockQ8_1, BlockQ8K, GgmlType,
    };
    use qkern::Format;

    use crate::contenders::{Absent, DEQUANT_CHUNK_ROWS, WeightSet, split};

    pub fn version() -> String {
        format!("candle-core =0.11.1 (CPU, k_quants::matmul; CANDLE_NUM_THREADS={})", init())
    }

    /// Size candle's own pool to one thread (the harness does the threading), unless the
    /// environment already says otherwise; returns the value in force.
    pub fn init() -> String {
        static INIT: std::sync::Once = std::sync::Once::new();
        INIT.call_once(|| {
            if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
                // SAFETY: called once, before the harness starts candle or any thread that
                // reads the environment (the first contender is built after this).
                unsafe { std::env::set_var("CANDLE_NUM_THREADS", "1") };
            }
        });
        std::env::var("CANDLE_NUM_THREADS").unwrap_or_default()
    }

    fn cast<B: GgmlType>(w: &[u8]) -> Option<&[B]> {
        let size = std::mem::size_of::<B>();
        if !w.len().is_multiple_of(size) || w.as_ptr().align_offset(std::mem::align_of::<B>()) != 0 {
            return None;
        }
        // SAFETY: candle's blocks are #[repr(C)] structs of f16 / f32 / u8 / i8 fields (every bit
        // pattern valid); length and alignment are checked above; the borrow keeps `w` alive.
        Some(unsafe { std::slice::from_raw_parts(w.as_ptr().cast::<B>(), w.len() / size) })
    }

    trait WeightOps: Send + Sync {
        fn matmul(&self, nt: usize, cols: usize, x: &[f32], w: &[u8], dst: &mut [f32]) -> Result<(), String>;
        fn dequant(&self, w: &[u8], out: &mut [f32]) -> Result<(), String>;
    }

    struct Typed<B>(PhantomData<fn() -> B>);

    impl<B: GgmlType> WeightOps for Typed<B> {
        fn matmul(&self, nt: usize, cols: usize, x: &[f32], w: &[u8], dst: &mut [f32]) -> Result<(), String> {
            let rhs = cast::<B>(w).ok_or("misaligned weights")?;
            let rows = rhs.len() * B::BLCK_SIZE / cols;
            k_quants::matmul::<B>((nt, cols, rows), x, rhs, dst).map_err(|e| e.to_string())
        }
        fn dequant(&self, w: &[u8], out: &mut [f32]) -> Result<(), String> {
            B::to_float(cast::<B>(w).ok_or("misaligned weights")?, out);
            Ok(())
        }
    }

    fn check<B: GgmlType + 'static>(f: Format) -> Result<Box<dyn WeightOps>, Absent> {
        if std::mem::size_of::<B>() != f.block_bytes() || B::BLCK_SIZE != f.block_elems() {
            return Err(Absent::NotSupported(format!("candle's {f} block has another layout")));
        }
        Ok(Box::new(Typed::<B>(PhantomData)))
    }

    fn weight_ops(f: Format) -> Result<Box<dyn WeightOps>, Absent> {
        match f {
            Format::Q8_0 => check::<BlockQ8_0>(f),
            Format::Q5_1 => check::<BlockQ5_1>(f),
            Format::Q4_K => check::<BlockQ4K>(f),
            Format::Q5_K => check::<BlockQ5K>(f),
            Format::Q6_K => check::<BlockQ6K>(f),
            _ => Err(Absent::NotSupported(format!("candle has no {f}"))),
        }
    }

    /// candle's matmul of `nt` tokens.
    pub struct Matmul<'w> {
        ops: Box<dyn WeightOps>,
        set: &'w WeightSet,
        nt: usize,
        parts: Vec<std::ops::Range<usize>>,
        dst: Vec<f32>,
        pool: Option<Arc<rayon::ThreadPool>>,
    }

    impl<'w> Matmul<'w> {
        pub fn new(set: &'w WeightSet, nt: usize, pool: Option<Arc<rayon::ThreadPool>>) -> Result<Self, Absent> {
            init();
            let ops = weight_ops(set.format)?;
            let nt = nt.clamp(1, set.max_tokens);
            let threads = pool.as_ref().map_or(1, |p| p.current_num_threads());
            let parts = split(set.rows, threads);
            Ok(Matmul { ops, set, nt, parts, dst: vec![0f32; nt * set.rows], pool })
        }

        pub fn run(&mut self) -> Result<(), String> {
            let (nt, cols, rb) = (self.nt, self.set.cols, self.set.row_bytes());
            let x = black_box(self.set.x(nt));
            let w = black_box(self.set.weights.as_slice());
            match &self.pool {
                None => self.ops.matmul(nt, cols, x, w, &mut self.dst)?,
                Some(pool) => {
                    let errors = Mutex::new(Vec::new());
                    let ops = &*self.ops;
                    pool.scope(|s| {
                        let mut rest = self.dst.as_mut_slice();
                        for r in &self.parts {
                            let (d, tail) = rest.split_at_mut(nt * r.len());
                            rest = tail;
                            let wpart = &w[r.start * rb..r.end * rb];
                            let errors = &errors;
                            s.spawn(move |_| {
                                if let Err(e) = ops.matmul(nt, cols, x, wpart, d) {
                                    errors.lock().map(|mut v| v.push(e)).ok();
                                }
                            });
                        }
                    });
                    if let Some(e) = errors.into_inner().ok().and_then(|v| v.into_iter().next()) {
                        return Err(e);
                    }
                }
            }
            black_box(&self.dst);
            Ok(())
        }
    }

    /// `to_float` over the whole matrix, 16 rows per call.
    pub struct Dequant<'w> {
        ops: Box<dyn WeightOps>,
        set: &'w WeightSet,
        buf: Vec<f32>,
    }

    impl<'w> Dequant<'w> {
        pub fn new(set: &'w WeightSet) -> Result<Self, Absent> {
            init();
            Ok(Dequant { ops: weight_ops(set.format)?, set, buf: vec![0f32; DEQUANT_CHUNK_ROWS * set.cols] })
        }

        pub fn run(&mut self) -> Result<(), String> {
            let (rb, cols) = (self.set.row_bytes(), self.set.cols);
            let w = black_box(self.set.weights.as_slice());
            for r in (0..self.set.rows).step_by(DEQUANT_CHUNK_ROWS) {
                let n = DEQUANT_CHUNK_ROWS.min(self.set.rows - r);
                self.ops.dequant(&w[r * rb..(r + n) * rb], &mut self.buf[..n * cols])?;
            }
            black_box(&self.buf);
            Ok(())
        }
    }

    trait QuantOps: Send {
        fn run(&mut self, x: &[f32], cols: usize);
    }

    struct Q<B>(Vec<B>);

    impl<B: GgmlType + Send> QuantOps for Q<B> {
        fn run(&mut self, x: &[f32], cols: usize) {
            for (xr, or) in x.chunks_exact(cols).zip(self.0.chunks_exact_mut(cols / B::BLCK_SIZE)) {
                B::from_float(xr, or);
            }
            black_box(&self.0);
        }
    }

    fn quant_ops<B: GgmlType + Send + 'static>(cols: usize, tokens: usize) -> Result<Box<dyn QuantOps>, Absent> {
        if !cols.is_multiple_of(B::BLCK_SIZE) {
            return Err(Absent::NotSupported(format!("{cols} columns")));
        }
        Ok(Box::new(Q::<B>(vec![B::zeros(); tokens * cols / B::BLCK_SIZE])))
    }

    /// `from_float` of the activation format, per token row.
    pub struct Quantize<'x> {
        ops: Box<dyn QuantOps>,
        x: &'x [f32],
        cols: usize,
    }

    impl<'x> Quantize<'x> {
        pub fn new(act: Format, cols: usize, x: &'x [f32]) -> Result<Self, Absent> {
            init();
            let tokens = x.len() / cols.max(1);
            let ops = match act {
                Format::Q8_0 => quant_ops::<BlockQ8_0>(cols, tokens)?,
                Format::Q8_1 => quant_ops::<BlockQ8_1>(cols, tokens)?,
                Format::Q8_K => quant_ops::<BlockQ8K>(cols, tokens)?,
                _ => return Err(Absent::NotSupported(format!("candle has no {act} activations"))),
            };
            Ok(Quantize { ops, x, cols })
        }

        pub fn run(&mut self) -> Result<(), String> {
            self.ops.run(black_box(self.x), self.cols);
            Ok(())
        }
    }
}

#[cfg(not(feature = "candle"))]
mod stub {
    use std::convert::Infallible;
    use std::marker::PhantomData;

    use qkern::Format;

    use crate::contenders::{Absent, WeightSet};

    pub fn version() -> String {
        "not built (enable the `candle` feature)".into()
    }

    pub fn init() -> String {
        String::new()
    }

    pub struct Matmul<'w>(PhantomData<&'w ()>, Infallible);
    impl<'w> Matmul<'w> {
        pub fn new(_: &'w WeightSet, _: usize, _: Option<std::sync::Arc<rayon::ThreadPool>>) -> Result<Self, Absent> {
            Err(Absent::NotBuilt)
        }
        pub fn run(&mut self) -> Result<(), String> {
            match self.1 {}
        }
    }

    pub struct Dequant<'w>(PhantomData<&'w ()>, Infallible);
    impl<'w> Dequant<'w> {
        pub fn new(_: &'w WeightSet) -> Result<Self, Absent> {
            Err(Absent::NotBuilt)
        }
        pub fn run(&mut self) -> Result<(), String> {
            match self.1 {}
        }
    }

    pub struct Quantize<'x>(PhantomData<&'x ()>, Infallible);
    impl<'x> Quantize<'x> {
        pub fn new(_: Format, _: usize, _: &'x [f32]) -> Result<Self, Absent> {
            Err(Absent::NotBuilt)
        }
        pub fn run(&mut self) -> Result<(), String> {
            match self.1 {}
        }
    }
}
