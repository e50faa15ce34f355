//! The GPU backends' host-side copy of large results into the caller's slice, split across a
//! small pool of threads (CUDA: floats out of a pinned stage; wgpu: bytes out of a mapped
//! buffer). One thread copies about 12-17 GB/s on the H200's host, which made the copy a large
//! part of a call with a large result.

/// Results of at least this many floats (256 KiB) are split across the copy threads; pieces
/// are at least an eighth of it.
pub const PAR_COPY_MIN: usize = 1 << 16;

/// The default number of copy threads, the caller's included: half the host's cores, at
/// most 8.
pub fn default_copy_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 8))
}

/// A `*_COPY_THREADS` knob's value: 1 to 64.
pub fn parse_copy_threads(v: &str) -> Option<usize> {
    v.parse().ok().filter(|n| (1..=64).contains(n))
}

/// The pool for `threads` copy threads in all: the caller copies too, so `threads - 1`
/// helpers named `{name}-{i}`; none for one thread.
pub fn copy_pool(threads: usize, name: &'static str) -> Result<Option<rayon::ThreadPool>, rayon::ThreadPoolBuildError> {
    if threads <= 1 {
        return Ok(None);
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads - 1)
        .thread_name(move |i| format!("{name}-{i}"))
        .build()
        .map(Some)
}

/// Copy each `(src, dst)` pair with `copy`, `total` destination floats in all, `unit` source
/// elements per float (`src` holds at least `unit * dst.len()`). From [`PAR_COPY_MIN`] floats
/// on, with a pool, the destinations are cut into pieces of `total / (threads + 1)` floats (at
/// least an eighth of the minimum), the pool's threads copy all but the last, which the
/// caller copies; else every pair in turn on the caller's thread. Allocates nothing.
///
/// # Panics
/// If a `src` is shorter than `unit * dst.len()`: a caller's bug (the backends size both from
/// one length), not bad input from their users.
pub fn par_copy<'a, S: Sync + 'a>(
    pool: Option<&rayon::ThreadPool>,
    total: usize,
    unit: usize,
    pairs: impl IntoIterator<Item = (&'a [S], &'a mut [f32])>,
    copy: impl Fn(&[S], &mut [f32]) + Sync,
) {
    let pool = match pool {
        Some(p) if total >= PAR_COPY_MIN => p,
        _ => {
            for (s, d) in pairs {
                copy(s, d);
            }
            return;
        }
    };
    let piece = total.div_ceil(pool.current_num_threads() + 1).max(PAR_COPY_MIN / 8);
    let copy = &copy;
    pool.in_place_scope(|sc| {
        let mut held: Option<(&[S], &mut [f32])> = None;
        for (s, d) in pairs {
            for (k, dp) in d.chunks_mut(piece).enumerate() {
                let at = k * piece * unit;
                if let Some((a, b)) = held.replace((&s[at..at + dp.len() * unit], dp)) {
                    sc.spawn(move |_| copy(a, b));
                }
            }
        }
        if let Some((a, b)) = held {
            copy(a, b);
        }
    });
}
