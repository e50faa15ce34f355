//! Sweep the loader's threads / read size / huge pages on one file, warm and cold, beside
//! plain sequential reads: `cargo run --release -p qkern-engine --example load_sweep -- FILE`.

use std::path::{Path, PathBuf};

use qkern_engine::gguf::Gguf;
use qkern_engine::load::{self, LoadOptions, SEQ_READ_BYTES};

fn seq(path: &Path, g: &Gguf, fresh: bool, cold: bool) -> f64 {
    if cold {
        load::drop_page_cache(path).unwrap();
    }
    load::sequential_read(path, load::span(g, &|_| true), SEQ_READ_BYTES, fresh).unwrap().gbps()
}

fn ours(path: &Path, g: &Gguf, o: &LoadOptions, cold: bool) -> f64 {
    if cold {
        load::drop_page_cache(path).unwrap();
    }
    load::load_parsed(path, g.clone(), &|_| true, o).unwrap().report.phase("read").unwrap().gbps()
}

fn best3(f: impl Fn() -> f64) -> f64 {
    (0..3).map(|_| f()).fold(0f64, f64::max)
}

fn main() {
    let path = PathBuf::from(std::env::args().nth(1).expect("usage: load_sweep FILE"));
    let g = Gguf::open(&path).expect("parse");
    println!(
        "sequential: fresh warm {:.2}  reused warm {:.2}  fresh cold {:.2} GB/s",
        best3(|| seq(&path, &g, true, false)),
        best3(|| seq(&path, &g, false, false)),
        seq(&path, &g, true, true)
    );
    for huge in [true, false] {
        for threads in [1, 2, 4, 8] {
            for chunk in [1usize << 20, 8 << 20, 32 << 20] {
                let o = LoadOptions { threads, chunk_bytes: chunk, huge_pages: huge, ..LoadOptions::default() };
                let warm = best3(|| ours(&path, &g, &o, false));
                let cold = ours(&path, &g, &o, true);
                let direct = ours(&path, &g, &LoadOptions { direct: true, ..o.clone() }, true);
                println!(
                    "huge {huge:5} threads {threads} chunk {:>2} MiB: warm {warm:.2}  cold {cold:.2}  direct {direct:.2} GB/s",
                    chunk >> 20
                );
            }
        }
    }
}
