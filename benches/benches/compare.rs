//! `cargo bench -p qkern-bench --bench compare`: the same interleaved comparison as
//! `qkern bench` (the library's `run`), configured by environment variables:
//! `QKERN_BENCH_FORMATS`, `QKERN_BENCH_BACKENDS`, `QKERN_BENCH_TOKENS`, `QKERN_BENCH_THREADS`
//! (comma lists), `QKERN_BENCH_SECONDS`, `QKERN_BENCH_SHAPE` (out-of-cache|expert|both),
//! `QKERN_BENCH_MIB` (out-of-cache weights) and `QKERN_BENCH_OUT_DIR` (writes results.csv,
//! table.md, chart.svg and machine.txt there). Enable `--features ggml,candle` for the
//! ggml and candle columns.

use qkern_bench::{Config, Outputs, parse_formats, parse_list};

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn config() -> Result<Config, qkern_bench::Error> {
    let mut c = Config::default();
    if let Some(v) = env("QKERN_BENCH_FORMATS") {
        c.formats = parse_formats(&v)?;
    }
    if let Some(v) = env("QKERN_BENCH_BACKENDS") {
        c.backends = parse_list(&v)?;
    }
    if let Some(v) = env("QKERN_BENCH_TOKENS") {
        c.tokens = parse_list(&v)?;
    }
    if let Some(v) = env("QKERN_BENCH_THREADS") {
        c.threads = parse_list(&v)?;
    }
    if let Some(v) = env("QKERN_BENCH_SECONDS") {
        c.seconds = v.trim().parse().map_err(|e| qkern_bench::Error::Config(format!("QKERN_BENCH_SECONDS: {e}")))?;
    }
    if let Some(v) = env("QKERN_BENCH_SHAPE") {
        c.shapes = v.parse()?;
    }
    if let Some(v) = env("QKERN_BENCH_MIB") {
        c.weights_mib = v.trim().parse().map_err(|e| qkern_bench::Error::Config(format!("QKERN_BENCH_MIB: {e}")))?;
    }
    Ok(c)
}

fn main() {
    // `cargo bench` passes `--bench` (and any filter); this harness takes its settings from the
    // environment instead. `cargo test --benches` passes nothing to a harness = false bench
    // but also wants it quick: `--test`-less runs with no `--bench` flag do nothing.
    if !std::env::args().any(|a| a == "--bench") {
        println!("qkern-bench compare: run it with `cargo bench -p qkern-bench --bench compare`");
        return;
    }
    let result = config().and_then(|cfg| {
        let rep = qkern_bench::run(&cfg, &mut |line| eprintln!("{line}"))?;
        print!("{}", rep.table());
        if let Some(dir) = env("QKERN_BENCH_OUT_DIR") {
            for p in rep.write(&Outputs::in_dir(std::path::Path::new(&dir)))? {
                eprintln!("wrote {}", p.display());
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        eprintln!("qkern-bench: error: {e}");
        std::process::exit(2);
    }
}
