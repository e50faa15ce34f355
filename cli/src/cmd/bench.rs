//! `qkern bench`: qkern's kernels side by side with ggml's own `vec_dot` loop and candle's
//! quantized matmul, interleaved in one run over the same weight memory, against the machine's
//! streaming-read bandwidth (the measurement core is the `qkern-bench` crate).
//!
//! Prints the table on stdout and progress on stderr; `--csv`, `--md`, `--svg` and `--out-dir`
//! write the same results as files. Build with `--features ggml,candle` for the ggml and
//! candle columns (without them those columns say "not built").

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use qkern_bench::{Config, Outputs, parse_formats, parse_list};

use crate::error::stdout_error;
use crate::{CliError, Result};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Weight formats, comma-separated, or `all`.
    #[arg(long, value_name = "LIST", default_value = "all")]
    pub formats: String,
    /// Backends, comma-separated: cpu (the default CPU path, or QKERN_CPU), cpu-scalar, cpu-avx2,
    /// cpu-avx512, cuda, wgpu.
    #[arg(long, value_name = "LIST", default_value = "cpu")]
    pub backends: String,
    /// Token counts (NT), comma-separated.
    #[arg(long, value_name = "LIST", default_value = "1,2,4,8,16")]
    pub tokens: String,
    /// Thread counts, comma-separated (default: 1 and all cores).
    #[arg(long, value_name = "LIST")]
    pub threads: Option<String>,
    /// Timed seconds per contender per measurement (after warm-up).
    #[arg(long, value_name = "S", default_value_t = 0.25)]
    pub seconds: f64,
    /// Samples per contender per measurement, at least...
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub min_reps: usize,
    /// ...unless they already add up to this many seconds (a cap for very slow paths).
    #[arg(long, value_name = "S", default_value_t = 6.0)]
    pub max_seconds: f64,
    /// Shapes: out-of-cache (--weights-mib of weights at 4096 columns), expert (one MoE
    /// expert: 640 x 2560 gate/up and 2560 x 640 down) or both.
    #[arg(long, value_name = "SHAPE", default_value = "both")]
    pub shape: String,
    /// MiB of weights per format for the out-of-cache shape.
    #[arg(long, value_name = "MIB", default_value_t = 512)]
    pub weights_mib: usize,
    /// Operations, comma-separated: matmul, dequant, quantize.
    #[arg(long, value_name = "LIST", default_value = "matmul,dequant,quantize")]
    pub ops: String,
    /// GPU backends' matmul results: host (copied back, as `Device::matmul` returns them),
    /// device (left in a device buffer by `Device::matmul_into`, then a wait: the kernels'
    /// time, as GPU kernels are usually compared) or both (two rows per GPU).
    #[arg(long, value_name = "WHERE", default_value = "both")]
    pub gpu_out: String,
    /// A remark recorded in every output (e.g. what else loaded the machine).
    #[arg(long, value_name = "TEXT")]
    pub note: Vec<String>,
    /// Write the results as CSV (one row per measurement).
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
    /// Write the results as Markdown.
    #[arg(long, value_name = "PATH")]
    pub md: Option<PathBuf>,
    /// Write the chart (GB/s per format for each token count) as SVG.
    #[arg(long, value_name = "PATH")]
    pub svg: Option<PathBuf>,
    /// Write results.csv, table.md, chart.svg and machine.txt into DIR.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

fn bench_err(e: qkern_bench::Error) -> CliError {
    CliError::new(e)
}

fn config(a: &Args) -> Result<Config> {
    let d = Config::default();
    Ok(Config {
        formats: parse_formats(&a.formats).map_err(bench_err)?,
        backends: parse_list(&a.backends).map_err(bench_err)?,
        tokens: parse_list(&a.tokens).map_err(bench_err)?,
        threads: match &a.threads {
            Some(t) => parse_list(t).map_err(bench_err)?,
            None => d.threads.clone(),
        },
        seconds: a.seconds,
        min_reps: a.min_reps,
        max_seconds: a.max_seconds,
        shapes: a.shape.parse().map_err(bench_err)?,
        weights_mib: a.weights_mib,
        ops: parse_list(&a.ops).map_err(bench_err)?,
        gpu_out: a.gpu_out.parse().map_err(bench_err)?,
        ..d
    })
}

pub fn run(a: Args, out: &mut dyn Write) -> Result<ExitCode> {
    let cfg = config(&a)?;
    let quiet = a.quiet;
    let mut rep = qkern_bench::run(&cfg, &mut |line| {
        if !quiet {
            eprintln!("{line}");
        }
    })
    .map_err(bench_err)?;
    rep.notes = a.note.clone();
    out.write_all(rep.table().as_bytes()).map_err(stdout_error)?;
    let mut files = a.out_dir.as_deref().map(Outputs::in_dir).unwrap_or_default();
    files.csv = a.csv.or(files.csv);
    files.md = a.md.or(files.md);
    files.svg = a.svg.or(files.svg);
    for p in rep.write(&files).map_err(bench_err)? {
        if !quiet {
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
