//! The machine's streaming-read bandwidth: sum a buffer much larger than the caches, on one
//! thread and split over several, timed like any contender. This is the ceiling that
//! memory-bound kernels over out-of-cache weights are compared with (`% of bandwidth`).

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Instant;

use crate::stats::Summary;

/// A buffer of `bytes` (rounded down to whole 64-byte lines), every page touched.
pub struct ReadBuffer {
    words: Vec<u64>,
}

impl ReadBuffer {
    pub fn new(bytes: usize) -> ReadBuffer {
        let n = (bytes / 64).max(1) * 8;
        ReadBuffer { words: (0..n as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect() }
    }

    pub fn bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// One pass over the buffer with `threads` threads (contiguous parts, the calling thread
    /// taking the first); returns seconds from the common start to the last thread's end.
    pub fn pass(&self, threads: usize) -> f64 {
        let threads = threads.max(1);
        let part = self.words.len().div_ceil(threads).div_ceil(8) * 8;
        let parts: Vec<&[u64]> = self.words.chunks(part.max(8)).collect();
        if parts.len() == 1 {
            let t0 = Instant::now();
            black_box(sum(black_box(parts[0])));
            return t0.elapsed().as_secs_f64();
        }
        let barrier = Barrier::new(parts.len());
        std::thread::scope(|s| {
            for p in &parts[1..] {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    black_box(sum(black_box(p)));
                });
            }
            barrier.wait();
            let t0 = Instant::now();
            black_box(sum(black_box(parts[0])));
            // The scope joins the other threads before returning.
            t0
        })
        .elapsed()
        .as_secs_f64()
    }
}

/// Wrapping sum with eight independent accumulators (vectorised by the compiler), so that the
/// loop is bound by loads, not by one dependency chain.
fn sum(v: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for (a, x) in acc.iter_mut().zip(c) {
            *a = a.wrapping_add(*x);
        }
    }
    let mut s = chunks.remainder().iter().fold(0u64, |a, x| a.wrapping_add(*x));
    for a in acc {
        s = s.wrapping_add(a);
    }
    s
}

/// Streaming-read bandwidth at one thread count, in GB/s (1e9 bytes per second).
#[derive(Clone, Debug)]
pub struct Bandwidth {
    pub threads: usize,
    pub bytes: usize,
    /// Samples in GB/s, from every phase of the run (start and end).
    pub samples: Vec<f64>,
}

impl Bandwidth {
    pub fn summary(&self) -> Option<Summary> {
        Summary::of(&self.samples)
    }

    /// The median GB/s.
    pub fn gbps(&self) -> Option<f64> {
        self.summary().map(|s| s.median)
    }
}

/// Add `reps` timed passes (after one warm-up pass) at `threads` to `bw`.
pub fn measure(buf: &ReadBuffer, bw: &mut Bandwidth, reps: usize) {
    buf.pass(bw.threads);
    for _ in 0..reps.max(1) {
        let t = buf.pass(bw.threads);
        bw.samples.push(buf.bytes() as f64 / t / 1e9);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_passes() {
        assert_eq!(sum(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), 55);
        let b = ReadBuffer::new(1 << 20);
        assert_eq!(b.bytes(), 1 << 20);
        assert!(b.pass(1) > 0.0);
        assert!(b.pass(3) > 0.0);
        let mut bw = Bandwidth { threads: 2, bytes: b.bytes(), samples: vec![] };
        measure(&b, &mut bw, 2);
        assert_eq!(bw.samples.len(), 2);
        assert!(bw.gbps().unwrap() > 0.0);
    }
}
