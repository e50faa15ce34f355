//! `gen-vectors`: write the ggml reference vectors, one `<format>.qkv` per weight format
//! (file format: `qkern_parity::vectors`; plan: `vectors::plan`).
//!
//! ```sh
//! cargo run --release -p qkern-parity --features ggml --bin gen-vectors -- --out parity/vectors
//! ```
//!
//! Options: `--out DIR` (default `parity/vectors`), `--seed N` (base seed, default
//! `vectors::DEFAULT_SEED`), `--only q4_K,iq2_s` (a subset), `--check` (compare with the files
//! in DIR instead of writing them; exit 1 on a difference).

use std::path::PathBuf;
use std::process::ExitCode;

use qkern_formats::Format;
use qkern_parity::ggml;
use qkern_parity::vectors::{self, Isa, VectorFile};

struct Args {
    out: PathBuf,
    seed: u64,
    only: Option<Vec<Format>>,
    check: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { out: PathBuf::from("parity/vectors"), seed: vectors::DEFAULT_SEED, only: None, check: false };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--out" => a.out = PathBuf::from(val("--out")?),
            "--seed" => {
                let v = val("--seed")?;
                a.seed = match v.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16),
                    None => v.parse(),
                }
                .map_err(|e| format!("--seed {v}: {e}"))?
            }
            "--only" => {
                let v = val("--only")?;
                let fs =
                    v.split(',').map(Format::from_name).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
                if let Some(f) = fs.iter().find(|f| !f.is_weight()) {
                    return Err(format!("--only: {f} is not a weight format"));
                }
                a.only = Some(fs);
            }
            "--check" => a.check = true,
            "-h" | "--help" => {
                return Err("usage: gen-vectors [--out DIR] [--seed N] [--only fmt,fmt] [--check]".into());
            }
            _ => return Err(format!("unknown argument {arg:?} (try --help)")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let (avx2, fma, f16c, avx512) = ggml::isa();
    let isa = Isa { avx2, fma, f16c, avx512 };
    eprintln!("ggml {} built for: {isa}", vectors::GGML_VERSION);
    if isa != Isa::PINNED {
        eprintln!("error: this ggml build is not the pinned reference ({}); see shared/REFERENCE.md", Isa::PINNED);
        return ExitCode::FAILURE;
    }
    if !args.check
        && let Err(e) = std::fs::create_dir_all(&args.out)
    {
        eprintln!("{}: {e}", args.out.display());
        return ExitCode::FAILURE;
    }
    let formats = args.only.clone().unwrap_or_else(|| Format::WEIGHTS.to_vec());
    let mut total = 0usize;
    let mut failed = false;
    for f in formats {
        let file = match vectors::generate(f, args.seed) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("{f}: {e}");
                failed = true;
                continue;
            }
        };
        let bytes = match file.to_bytes() {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{f}: {e}");
                failed = true;
                continue;
            }
        };
        // The reader must give back exactly what was written.
        match VectorFile::parse(&bytes) {
            Ok(back) if back.to_bytes().ok().as_deref() == Some(&bytes[..]) => {}
            Ok(_) => {
                eprintln!("{f}: the file does not round-trip");
                failed = true;
                continue;
            }
            Err(e) => {
                eprintln!("{f}: the written file does not parse: {e}");
                failed = true;
                continue;
            }
        }
        total += bytes.len();
        let path = args.out.join(vectors::file_name(f));
        let values: usize = file.cases.iter().map(|c| c.dots.len()).sum();
        if args.check {
            match std::fs::read(&path) {
                Ok(old) if old == bytes => println!(
                    "{:<10} {:>9} bytes  {} cases, {values} dots: same",
                    f.name(),
                    bytes.len(),
                    file.cases.len()
                ),
                Ok(_) => {
                    println!("{:<10} DIFFERS from {}", f.name(), path.display());
                    failed = true;
                }
                Err(e) => {
                    println!("{:<10} {}: {e}", f.name(), path.display());
                    failed = true;
                }
            }
        } else {
            if let Err(e) = std::fs::write(&path, &bytes) {
                eprintln!("{}: {e}", path.display());
                failed = true;
                continue;
            }
            println!(
                "{:<10} {:>9} bytes  {} cases, {values} dots -> {}",
                f.name(),
                bytes.len(),
                file.cases.len(),
                path.display()
            );
        }
    }
    println!("total {total} bytes ({:.2} MiB)", total as f64 / (1024.0 * 1024.0));
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
