//! qkern through its public API, as an engine calls it: weights resident (`upload`, which
//! borrows aligned host bytes), activations quantized once into a reusable buffer, then only
//! `matmul` (or `dequantize`, `quantize`) inside the timed loop.

use std::cell::RefCell;
use std::hint::black_box;

use qkern::{Activations, Device, Output, Weights, WeightsRef};

use super::{DEQUANT_CHUNK_ROWS, WeightSet};

/// `Device::matmul` of `nt` tokens over a resident weight matrix: results copied to host
/// memory ([`Matmul::run`], what `matmul` returns), or left in a device buffer
/// ([`Matmul::run_device`]: `matmul_into`, then `synchronize`, so that each call still ends
/// when its kernels do). The two share the weights and activations; interior mutability lets
/// the interleaved measurement hold both.
pub struct Matmul<'d, 'w> {
    dev: &'d Device,
    w: Weights<'w>,
    acts: Activations,
    out: RefCell<Vec<f32>>,
    dout: Option<RefCell<Output>>,
}

impl<'d, 'w> Matmul<'d, 'w> {
    /// `device_out`: also make the device buffer of [`Matmul::run_device`].
    pub fn new(dev: &'d Device, set: &'w WeightSet, nt: usize, device_out: bool) -> Result<Self, qkern::Error> {
        let w = dev.upload(WeightsRef::new(set.format, set.rows, set.cols, set.weights.as_slice())?)?;
        let mut acts = dev.activations_for(&w, nt)?;
        // Quantized once, outside the timed loop (bit-identical to `set.acts`).
        dev.quantize(set.x(nt), &mut acts)?;
        let dout = if device_out { Some(RefCell::new(dev.output(nt * set.rows)?)) } else { None };
        Ok(Matmul { dev, w, acts, out: RefCell::new(vec![0f32; nt * set.rows]), dout })
    }

    pub fn run(&self) -> Result<(), String> {
        let mut out = self.out.borrow_mut();
        self.dev
            .matmul(black_box(&self.w), black_box(&self.acts), black_box(&mut out[..]))
            .map_err(|e| e.to_string())?;
        black_box(&out);
        Ok(())
    }

    pub fn run_device(&self) -> Result<(), String> {
        let d = self.dout.as_ref().ok_or("no device output buffer")?;
        let mut d = d.borrow_mut();
        self.dev.matmul_into(black_box(&self.w), black_box(&self.acts), &mut d).map_err(|e| e.to_string())?;
        self.dev.synchronize().map_err(|e| e.to_string())
    }

    /// `[tokens][rows]` of the last [`Matmul::run`].
    pub fn out(&self) -> Vec<f32> {
        self.out.borrow().clone()
    }

    /// `[tokens][rows]` of the last [`Matmul::run_device`], read back.
    pub fn out_device(&self) -> Result<Vec<f32>, qkern::Error> {
        let mut v = vec![0f32; self.out.borrow().len()];
        if let Some(d) = &self.dout {
            self.dev.read_output(&d.borrow(), &mut v)?;
        }
        Ok(v)
    }
}

/// `Device::dequantize` over the whole matrix, [`DEQUANT_CHUNK_ROWS`] rows per call into one
/// reused buffer (so the f32 output stays in cache while the weights stream).
pub struct Dequant<'d, 'w> {
    dev: &'d Device,
    chunks: Vec<Weights<'w>>,
    buf: Vec<f32>,
}

impl<'d, 'w> Dequant<'d, 'w> {
    pub fn new(dev: &'d Device, set: &'w WeightSet) -> Result<Self, qkern::Error> {
        let rb = set.row_bytes();
        let mut chunks = Vec::new();
        for r in (0..set.rows).step_by(DEQUANT_CHUNK_ROWS) {
            let n = DEQUANT_CHUNK_ROWS.min(set.rows - r);
            let bytes = &set.weights.as_slice()[r * rb..(r + n) * rb];
            chunks.push(dev.upload(WeightsRef::new(set.format, n, set.cols, bytes)?)?);
        }
        Ok(Dequant { dev, chunks, buf: vec![0f32; DEQUANT_CHUNK_ROWS * set.cols] })
    }

    pub fn run(&mut self) -> Result<(), String> {
        for w in &self.chunks {
            let n = w.rows() * w.cols();
            self.dev.dequantize(black_box(w), black_box(&mut self.buf[..n])).map_err(|e| e.to_string())?;
        }
        black_box(&self.buf);
        Ok(())
    }
}

/// `Device::quantize` of `tokens` f32 rows into an activation buffer.
pub struct Quantize<'d, 'x> {
    dev: &'d Device,
    x: &'x [f32],
    acts: Activations,
}

impl<'d, 'x> Quantize<'d, 'x> {
    pub fn new(dev: &'d Device, act: qkern::Format, cols: usize, x: &'x [f32]) -> Result<Self, qkern::Error> {
        let tokens = (x.len() / cols.max(1)).max(1);
        let acts = dev.activations(act, cols, tokens)?;
        Ok(Quantize { dev, x, acts })
    }

    pub fn run(&mut self) -> Result<(), String> {
        self.dev.quantize(black_box(self.x), black_box(&mut self.acts)).map_err(|e| e.to_string())?;
        black_box(&self.acts);
        Ok(())
    }
}
