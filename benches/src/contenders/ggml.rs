//! ggml 0.26.0's own CPU kernels (feature `ggml`), called the way ggml calls them.
//!
//! - matmul: [`Matmul`] is `ggml_compute_forward_mul_mat` (ggml-cpu.c) for a weight `src0` and
//!   activations already in `vec_dot_type`, minus the llamafile sgemm and tiled routes (which
//!   give other bits; `shared/REFERENCE.md`): the same chunk plan (`chunk_size` 16, or 64 when
//!   one side is a single row; re-chunked by thread when there are fewer than `4 * nth`
//!   chunks; further chunks taken from an atomic counter) and, per chunk,
//!   `ggml_compute_forward_mul_mat_one_chunk`'s 16 x 16 tiling: for each block of 16 tokens,
//!   each block of 16 rows, each token, each row, one `vec_dot(n, &tmp[i], 0, row, 0, token,
//!   0, nrc = 1)`, then a `memcpy` of the 16 results into `dst`. The activation quantization
//!   that `mul_mat` does first is left out, as it is for qkern (both are timed separately as
//!   the `quantize` op).
//! - dequant: `ggml_get_type_traits(t)->to_float` over 16 rows per call.
//! - quantize: `ggml_get_type_traits_cpu(vec_dot_type)->from_float`, one call per token row.
//!
//! With more than one thread the chunks are shared by that many workers of a rayon pool (ggml
//! uses its own pool; the plan, not the pool, decides who computes what).

#[cfg(feature = "ggml")]
pub use imp::{Dequant, Matmul, Quantize, version};
#[cfg(not(feature = "ggml"))]
pub use stub::{Dequant, Matmul, Quantize, version};

/// Whether this build has the ggml contender.
pub const BUILT: bool = cfg!(feature = "ggml");

#[cfg(feature = "ggml")]
mod imp {
    use std::hint::black_box;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use qkern::{AlignedBuf, Format};
    use qkern_parity::ggml as live;
    use qkern_parity::ggml::{FromFloat, ToFloat, VecDot};

    use crate::contenders::{Absent, DEQUANT_CHUNK_ROWS, WeightSet};

    pub fn version() -> String {
        let (avx2, fma, f16c, avx512) = live::isa();
        format!("ggml 0.26.0 (llama-cpp-sys-2 =0.1.161), built with avx2={avx2} fma={fma} f16c={f16c} avx512={avx512}")
    }

    /// ggml's kernels of `f`, after checking that ggml's block layout and `vec_dot_type`
    /// agree with qkern's (so the same bytes mean the same thing to both).
    fn traits(f: Format) -> Result<live::RawKernels, Absent> {
        // block_layout runs ggml_cpu_init first (once).
        let (be, bb) = live::block_layout(f);
        if (be, bb) != (f.block_elems(), f.block_bytes()) {
            return Err(Absent::NotSupported(format!("ggml's {f} block is {be} x {bb} B")));
        }
        if f.is_weight() && live::vec_dot_type(f) != f.vec_dot_type() {
            return Err(Absent::NotSupported(format!("ggml pairs {f} with another activation")));
        }
        Ok(live::raw_kernels(f))
    }

    #[derive(Clone, Copy)]
    struct OutPtr(*mut f32);
    // SAFETY: each chunk of the plan writes a disjoint set of (token, row) outputs (see
    // `Plan::one_chunk`); the buffer outlives the parallel section.
    unsafe impl Send for OutPtr {}
    unsafe impl Sync for OutPtr {}

    /// The read-only side of one matmul: kernel, shapes, inputs and the chunk counter.
    struct Plan<'w> {
        vec_dot: VecDot,
        w: &'w [u8],
        a: &'w [u8],
        rows: usize,
        cols: usize,
        nt: usize,
        wrb: usize,
        arb: usize,
        current_chunk: AtomicUsize,
    }

    impl Plan<'_> {
        /// `ggml_compute_forward_mul_mat` for thread `ith` of `nth`, from "Now select a
        /// reasonable chunk size" on.
        fn thread(&self, ith: usize, nth: usize, out: OutPtr) {
            let (nr0, nr1) = (self.rows, self.nt);
            let chunk_size = if nr0 == 1 || nr1 == 1 { 64 } else { 16 };
            let mut nchunk0 = nr0.div_ceil(chunk_size);
            let mut nchunk1 = nr1.div_ceil(chunk_size);
            if nchunk0 * nchunk1 < nth * 4 {
                nchunk0 = if nr0 > nr1 { nth } else { 1 };
                nchunk1 = if nr0 > nr1 { 1 } else { nth };
            }
            let dr0 = nr0.div_ceil(nchunk0);
            let dr1 = nr1.div_ceil(nchunk1);
            let mut current = ith;
            while current < nchunk0 * nchunk1 {
                let (ith0, ith1) = (current % nchunk0, current / nchunk0);
                let ir0_start = dr0 * ith0;
                let ir0_end = (ir0_start + dr0).min(nr0);
                let ir1_start = dr1 * ith1;
                let ir1_end = (ir1_start + dr1).min(nr1);
                self.one_chunk(ir0_start, ir0_end, ir1_start, ir1_end, out);
                if nth >= nchunk0 * nchunk1 {
                    break;
                }
                current = self.current_chunk.fetch_add(1, Ordering::Relaxed);
            }
        }

        /// `ggml_compute_forward_mul_mat_one_chunk` with `num_rows_per_vec_dot = 1`.
        fn one_chunk(&self, ir0_start: usize, ir0_end: usize, ir1_start: usize, ir1_end: usize, out: OutPtr) {
            const BLCK_0: usize = 16;
            const BLCK_1: usize = 16;
            if ir0_start >= ir0_end || ir1_start >= ir1_end {
                return;
            }
            let mut tmp = [0f32; 32];
            for iir1 in (ir1_start..ir1_end).step_by(BLCK_1) {
                for iir0 in (ir0_start..ir0_end).step_by(BLCK_0) {
                    let end0 = (iir0 + BLCK_0).min(ir0_end);
                    for ir1 in iir1..(iir1 + BLCK_1).min(ir1_end) {
                        let src1_col = self.a[ir1 * self.arb..(ir1 + 1) * self.arb].as_ptr();
                        for ir0 in iir0..end0 {
                            let src0_row = self.w[ir0 * self.wrb..(ir0 + 1) * self.wrb].as_ptr();
                            // SAFETY: one weight row and one activation row of exactly the sizes
                            // ggml reads for n = cols (checked in Matmul::new); nrc = 1 writes one
                            // float to tmp[ir0 - iir0] (< 16).
                            unsafe {
                                (self.vec_dot)(
                                    self.cols as i32,
                                    tmp.as_mut_ptr().add(ir0 - iir0),
                                    0,
                                    src0_row.cast(),
                                    0,
                                    src1_col.cast(),
                                    0,
                                    1,
                                )
                            };
                        }
                        // SAFETY: dst[ir1][iir0..end0] is inside the nt x rows output; this chunk
                        // alone owns those (token, row) pairs.
                        unsafe {
                            std::ptr::copy_nonoverlapping(tmp.as_ptr(), out.0.add(ir1 * self.rows + iir0), end0 - iir0)
                        };
                    }
                }
            }
        }
    }

    /// ggml's matmul loop over `nt` tokens (see the module doc).
    pub struct Matmul<'w> {
        plan: Plan<'w>,
        out: Vec<f32>,
        pool: Option<Arc<rayon::ThreadPool>>,
        threads: usize,
    }

    impl<'w> Matmul<'w> {
        pub fn new(set: &'w WeightSet, nt: usize, pool: Option<Arc<rayon::ThreadPool>>) -> Result<Self, Absent> {
            let vec_dot =
                traits(set.format)?.vec_dot.ok_or_else(|| Absent::NotSupported("ggml has no vec_dot".into()))?;
            let nt = nt.clamp(1, set.max_tokens);
            let a = set.acts(nt);
            let (wrb, arb) = (set.row_bytes(), set.act_row_bytes());
            if wrb * set.rows != set.bytes() || arb * nt != a.len() || set.cols > i32::MAX as usize {
                return Err(Absent::NotSupported("inconsistent weight set".into()));
            }
            let threads = pool.as_ref().map_or(1, |p| p.current_num_threads());
            let plan = Plan {
                vec_dot,
                w: set.weights.as_slice(),
                a,
                rows: set.rows,
                cols: set.cols,
                nt,
                wrb,
                arb,
                current_chunk: AtomicUsize::new(0),
            };
            Ok(Matmul { plan, out: vec![0f32; nt * set.rows], pool, threads })
        }

        pub fn run(&mut self) -> Result<(), String> {
            let out = OutPtr(black_box(self.out.as_mut_ptr()));
            let nth = self.threads;
            // ggml: thread 0 stores nth before the barrier; every thread starts at chunk ith.
            self.plan.current_chunk.store(nth, Ordering::Relaxed);
            let plan = &self.plan;
            match &self.pool {
                None => plan.thread(0, 1, out),
                Some(pool) => pool.scope(|s| {
                    for ith in 0..nth {
                        s.spawn(move |_| plan.thread(ith, nth, out));
                    }
                }),
            }
            black_box(&self.out);
            Ok(())
        }

        pub fn out(&self) -> &[f32] {
            &self.out
        }
    }

    /// `to_float` over the whole matrix, 16 rows per call into one reused buffer.
    pub struct Dequant<'w> {
        to_float: ToFloat,
        set: &'w WeightSet,
        buf: Vec<f32>,
    }

    impl<'w> Dequant<'w> {
        pub fn new(set: &'w WeightSet) -> Result<Self, Absent> {
            let to_float =
                traits(set.format)?.to_float.ok_or_else(|| Absent::NotSupported("ggml has no to_float".into()))?;
            Ok(Dequant { to_float, set, buf: vec![0f32; DEQUANT_CHUNK_ROWS * set.cols] })
        }

        pub fn run(&mut self) -> Result<(), String> {
            let (rb, cols) = (self.set.row_bytes(), self.set.cols);
            let w = black_box(self.set.weights.as_slice());
            for r in (0..self.set.rows).step_by(DEQUANT_CHUNK_ROWS) {
                let n = DEQUANT_CHUNK_ROWS.min(self.set.rows - r);
                let src = &w[r * rb..(r + n) * rb];
                // SAFETY: src holds exactly n whole rows of blocks; buf has room for n * cols.
                unsafe { (self.to_float)(src.as_ptr().cast(), self.buf.as_mut_ptr(), (n * cols) as i64) };
            }
            black_box(&self.buf);
            Ok(())
        }
    }

    /// `from_float` of the activation format, one call per token row.
    pub struct Quantize<'x> {
        from_float: FromFloat,
        x: &'x [f32],
        cols: usize,
        out: AlignedBuf,
        rb: usize,
    }

    impl<'x> Quantize<'x> {
        pub fn new(act: Format, cols: usize, x: &'x [f32]) -> Result<Self, Absent> {
            let from_float =
                traits(act)?.from_float.ok_or_else(|| Absent::NotSupported("ggml has no from_float".into()))?;
            let rb = act.row_bytes(cols).map_err(|e| Absent::NotSupported(e.to_string()))?;
            let tokens = x.len() / cols.max(1);
            Ok(Quantize { from_float, x, cols, out: AlignedBuf::zeroed(rb * tokens), rb })
        }

        pub fn run(&mut self) -> Result<(), String> {
            let out = self.out.as_mut_slice();
            for (t, xr) in black_box(self.x).chunks_exact(self.cols).enumerate() {
                // SAFETY: one row of cols floats into one row of rb bytes (checked in new).
                unsafe { (self.from_float)(xr.as_ptr(), out[t * self.rb..].as_mut_ptr().cast(), self.cols as i64) };
            }
            black_box(&self.out);
            Ok(())
        }
    }
}

#[cfg(not(feature = "ggml"))]
mod stub {
    use std::convert::Infallible;
    use std::marker::PhantomData;

    use qkern::Format;

    use crate::contenders::{Absent, WeightSet};

    pub fn version() -> String {
        "not built (enable the `ggml` feature)".into()
    }

    pub struct Matmul<'w>(PhantomData<&'w ()>, Infallible);
    impl<'w> Matmul<'w> {
        pub fn new(_: &'w WeightSet, _: usize, _: Option<std::sync::Arc<rayon::ThreadPool>>) -> Result<Self, Absent> {
            Err(Absent::NotBuilt)
        }
        pub fn run(&mut self) -> Result<(), String> {
            match self.1 {}
        }
        pub fn out(&self) -> &[f32] {
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
