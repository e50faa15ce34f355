//! Interleaved timing of several contenders over the same inputs.
//!
//! One measurement runs every contender in round-robin order (A, B, C, A, B, C, ...), so that
//! slow drifts of the machine (other processes, frequency, thermal state) fall on all of them
//! alike. Each contender is first warmed up (one untimed call, or one untimed batch for fast
//! operations), then calibrated to a batch of `iters` calls lasting at least
//! [`Budget::sample_floor`] so that the clock's resolution does not matter, then timed batch
//! by batch. A contender leaves the rotation once it has `min_reps` samples and its batches
//! add up to `seconds` (or, for very slow paths, its samples reach `max_seconds`); the others
//! go on, still interleaved among themselves.

use std::time::{Duration, Instant};

/// How long to measure each contender.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Timed seconds per contender (after warm-up).
    pub seconds: f64,
    /// At least this many timed samples per contender, however long they take.
    pub min_reps: usize,
    /// At most this many samples per contender.
    pub max_reps: usize,
    /// Stop a contender once its timed samples add up to this many seconds, even below
    /// `min_reps` (it always gets one sample): a cap for very slow paths.
    pub max_seconds: f64,
    /// Before the first timed call, run the contenders round-robin for this many seconds (0:
    /// not at all). GPUs leave their idle clocks only under sustained load: on the H200 with
    /// NVIDIA's Vulkan driver alone the SM clock was measured falling from 1980 to 405-735 MHz
    /// between measurements (benches/results/2026-12-04-h200-session8).
    pub prewarm: f64,
}

impl Budget {
    pub fn new(seconds: f64, min_reps: usize) -> Budget {
        Budget {
            seconds: seconds.max(0.0),
            min_reps: min_reps.max(1),
            max_reps: 2000,
            max_seconds: f64::INFINITY,
            prewarm: 0.0,
        }
    }

    /// Shortest batch worth timing: a 25th of the budget, between 0.5 ms and 20 ms.
    pub fn sample_floor(&self) -> Duration {
        Duration::from_secs_f64((self.seconds / 25.0).clamp(0.5e-3, 20e-3))
    }
}

/// One contender's timed operation; returns an error message if the operation failed.
pub type Op<'a> = Box<dyn FnMut() -> Result<(), String> + 'a>;

/// Time `ops` interleaved; returns each contender's samples in seconds per operation.
pub fn interleaved(ops: &mut [Op<'_>], budget: Budget) -> Result<Vec<Vec<f64>>, String> {
    let n = ops.len();
    let mut iters = vec![1usize; n];
    let floor = budget.sample_floor();
    let t0 = Instant::now();
    while n > 0 && t0.elapsed().as_secs_f64() < budget.prewarm {
        for op in ops.iter_mut() {
            op()?;
        }
    }
    for (op, it) in ops.iter_mut().zip(iters.iter_mut()) {
        // Warm-up call, which also estimates the cost of one call.
        let t = time(op, 1)?;
        if t < floor {
            *it = (floor.as_secs_f64() / t.as_secs_f64().max(1e-9)).ceil().clamp(1.0, 1e7) as usize;
            // Warm the batch itself (caches, branch predictors, CPU frequency).
            time(op, *it)?;
        }
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut spent = vec![0f64; n];
    let mut active = vec![true; n];
    while active.iter().any(|&a| a) {
        for i in 0..n {
            if !active[i] {
                continue;
            }
            let t = time(&mut ops[i], iters[i])?.as_secs_f64();
            samples[i].push(t / iters[i] as f64);
            spent[i] += t;
            let enough = samples[i].len() >= budget.min_reps && spent[i] >= budget.seconds;
            if enough || samples[i].len() >= budget.max_reps || spent[i] >= budget.max_seconds {
                active[i] = false;
            }
        }
    }
    Ok(samples)
}

fn time(op: &mut Op<'_>, iters: usize) -> Result<Duration, String> {
    let t0 = Instant::now();
    for _ in 0..iters {
        op()?;
    }
    Ok(t0.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn round_robin_until_budget() {
        let order = std::cell::RefCell::new(Vec::new());
        let calls = [Cell::new(0usize), Cell::new(0usize)];
        let mut ops: Vec<Op<'_>> = (0..2)
            .map(|i| {
                let order = &order;
                let calls = &calls;
                Box::new(move || {
                    calls[i].set(calls[i].get() + 1);
                    order.borrow_mut().push(i);
                    std::thread::sleep(Duration::from_millis(2));
                    Ok(())
                }) as Op<'_>
            })
            .collect();
        let s = interleaved(&mut ops, Budget::new(0.0, 3)).unwrap();
        assert_eq!(s[0].len(), 3);
        assert_eq!(s[1].len(), 3);
        // After the two warm-ups, strictly alternating.
        let o = order.borrow();
        assert!(o[2..].windows(2).all(|w| w[0] != w[1]), "{o:?}");
    }

    #[test]
    fn errors_surface() {
        let mut ops: Vec<Op<'_>> = vec![Box::new(|| Err("boom".to_string()))];
        assert_eq!(interleaved(&mut ops, Budget::new(0.0, 1)).unwrap_err(), "boom");
    }
}
