//! Cold buffered read strategies on one file, interleaved over rounds (the cold rate of a
//! virtual disk varies 2-3x between reads): one plain sequential reader; the loader's
//! first scheme (chunks handed out in turn to threads sharing one open file description);
//! the current one (a stripe of consecutive chunks per thread, each through its own open
//! file description advised `POSIX_FADV_SEQUENTIAL`); and `O_DIRECT`. Each read fills a
//! fresh arena, after `posix_fadvise(DONTNEED)`. This is the measurement behind
//! `load::read_segments`' design:
//! `cargo run --release -p qkern-engine --example read_strategies -- FILE [ROUNDS]`.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::Instant;

use qkern_engine::load::{self, Arena};

#[derive(Clone, Copy)]
struct Strategy {
    name: &'static str,
    threads: usize,
    chunk: usize,
    /// Consecutive chunks per thread (else chunk i to thread i % threads).
    stripes: bool,
    /// Each thread opens its own description, advised sequential (else one shared).
    own_fd: bool,
    direct: bool,
}

/// GB/s of one cold read of the first `len` bytes of `p` with `s`.
fn run(p: &Path, len: usize, s: Strategy) -> f64 {
    load::drop_page_cache(p).expect("drop the page cache");
    let mut arena = Arena::new(len, true).expect("arena");
    let shared = File::open(p).expect("open");
    let t0 = Instant::now();
    let chunks: Vec<(usize, &mut [u8])> =
        arena.as_mut_slice().chunks_mut(s.chunk).enumerate().map(|(i, c)| (i * s.chunk, c)).collect();
    let n = chunks.len();
    let mut per: Vec<Vec<(usize, &mut [u8])>> = (0..s.threads).map(|_| Vec::new()).collect();
    for (i, c) in chunks.into_iter().enumerate() {
        per[if s.stripes { i * s.threads / n } else { i % s.threads }].push(c);
    }
    std::thread::scope(|sc| {
        for jobs in per {
            let shared = &shared;
            sc.spawn(move || {
                let own = if s.direct {
                    Some(std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(p).expect("O_DIRECT"))
                } else if s.own_fd {
                    let f = File::open(p).expect("open");
                    // SAFETY: advice on an open descriptor.
                    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
                    Some(f)
                } else {
                    None
                };
                let f = own.as_ref().unwrap_or(shared);
                for (off, b) in jobs {
                    if s.direct && b.len() % 4096 != 0 {
                        // The unaligned tail: buffered.
                        shared.read_exact_at(b, off as u64).expect("read");
                    } else {
                        f.read_exact_at(b, off as u64).expect("read");
                    }
                }
            });
        }
    });
    len as f64 / t0.elapsed().as_secs_f64() / 1e9
}

fn main() {
    let mut args = std::env::args().skip(1);
    let p = std::path::PathBuf::from(args.next().expect("usage: read_strategies FILE [ROUNDS]"));
    let rounds: usize = args.next().map_or(5, |s| s.parse().expect("ROUNDS"));
    let len = std::fs::metadata(&p).expect("stat").len() as usize;
    let m = 1 << 20;
    let st = |name, threads, chunk, stripes, own_fd, direct| Strategy { name, threads, chunk, stripes, own_fd, direct };
    let all = [
        st("sequential 1 x 16 MiB", 1, 16 * m, true, false, false),
        st("old: 2 x 8 MiB in turn, shared fd", 2, 8 * m, false, false, false),
        st("new: 2 x 8 MiB stripes, own fds", 2, 8 * m, true, true, false),
        st("new, 1 thread x 8 MiB", 1, 8 * m, true, true, false),
        st("new, 2 x 32 MiB stripes", 2, 32 * m, true, true, false),
        st("new, 4 x 8 MiB stripes", 4, 8 * m, true, true, false),
        st("O_DIRECT 2 x 8 MiB", 2, 8 * m, false, false, true),
    ];
    let mut res: Vec<Vec<f64>> = vec![Vec::new(); all.len()];
    for _ in 0..rounds {
        for (i, s) in all.iter().enumerate() {
            res[i].push(run(&p, len, *s));
        }
    }
    println!("{} MiB, {rounds} rounds, cold (page cache dropped before each read)", len >> 20);
    for (s, mut v) in all.iter().zip(res) {
        v.sort_by(f64::total_cmp);
        println!("  {:<36} GB/s  min {:.2}  median {:.2}  max {:.2}", s.name, v[0], v[v.len() / 2], v[v.len() - 1]);
    }
}
