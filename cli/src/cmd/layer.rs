//! `qkern layer`: load one layer's FFN tensors from a GGUF (positional reads into an arena,
//! no memory map), run the layer (MoE or dense) on seeded inputs through the `qkern` API,
//! print per-stage times and a hash of the output bits (identical on every backend, path
//! and thread count). `--report` adds the load report against plain sequential reads of the
//! same bytes (cold and warm) and the layer's time against the sum of its kernels' times
//! measured alone.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use qkern_engine::ffn::{self, FfnLayer, Gating, LayerOptions, StageTimes};
use qkern_engine::load::{self, LoadComparison, LoadOptions};

use crate::args::DeviceArgs;
use crate::error::stdout_error;
use crate::{CliError, Result};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The GGUF file.
    #[arg(long, value_name = "FILE")]
    pub gguf: PathBuf,
    /// The layer (blk.N).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub layer: usize,
    /// Tokens to run.
    #[arg(long, value_name = "T", default_value_t = 16)]
    pub tokens: usize,
    /// Seed of the inputs.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Experts used per token (default: <arch>.expert_used_count).
    #[arg(long, value_name = "K")]
    pub top_k: Option<usize>,
    /// Expected expert count (checked against the tensors and <arch>.expert_count).
    #[arg(long, value_name = "N")]
    pub experts: Option<usize>,
    /// Normalise the top-k weights (default: <arch>.expert_weights_norm).
    #[arg(long, value_name = "BOOL")]
    pub norm_topk: Option<bool>,
    /// softmax or sigmoid (default: <arch>.expert_gating_func, else softmax).
    #[arg(long, value_name = "G", value_parser = parse_gating)]
    pub gating: Option<Gating>,
    /// Experts per grouped call of an MoE layer (default 32; at most 64, and at most
    /// 512 / --tokens).
    #[arg(long, value_name = "N")]
    pub group: Option<usize>,
    /// Print the load report (ours vs sequential reads, cold and warm) and the layer time
    /// against the sum of its kernels measured alone.
    #[arg(long)]
    pub report: bool,
    /// Repetitions for the --report timings (best and median reported).
    #[arg(long, value_name = "R", default_value_t = 9)]
    pub reps: usize,
    /// Interleaved rounds of the --report load comparison (median and best reported).
    #[arg(long, value_name = "R", default_value_t = 5)]
    pub load_rounds: usize,
    /// Read with O_DIRECT (silently buffered where the file system refuses it).
    #[arg(long)]
    pub direct: bool,
    /// Drop the file from the page cache after loading.
    #[arg(long)]
    pub drop_cache: bool,
    /// Reader threads (default: cores, at most 8).
    #[arg(long, value_name = "N")]
    pub load_threads: Option<usize>,
    #[command(flatten)]
    pub device: DeviceArgs,
}

fn parse_gating(s: &str) -> std::result::Result<Gating, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "softmax" => Ok(Gating::Softmax),
        "sigmoid" => Ok(Gating::Sigmoid),
        _ => Err(format!("{s:?} is not softmax or sigmoid")),
    }
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn run(a: Args, out: &mut dyn Write) -> Result<ExitCode> {
    if a.tokens == 0 {
        return Err(CliError::new("--tokens must be at least 1"));
    }
    let mut opts = LoadOptions { direct: a.direct, drop_cache: a.drop_cache, ..LoadOptions::default() };
    if let Some(t) = a.load_threads {
        opts.threads = t.max(1);
    }
    let file = a.gguf.display().to_string();
    let select = ffn::layer_tensors(a.layer);
    let m = load::load(&a.gguf, &select, &opts).map_err(|e| CliError::new(format_args!("{file}: {e}")))?;
    let dev = a.device.open()?;
    let lopts =
        LayerOptions { top_k: a.top_k, n_expert: a.experts, norm_topk: a.norm_topk, gating: a.gating, group: a.group };
    let t0 = Instant::now();
    let mut layer = FfnLayer::from_model(&dev, &m, a.layer, &lopts, a.tokens)
        .map_err(|e| CliError::new(format_args!("{file}: {e}")))?;
    let upload = t0.elapsed();
    let ne = layer.n_embd();
    let x = ffn::seeded_inputs(a.seed, a.tokens * ne);
    let mut y = vec![0f32; x.len()];
    let mut times = StageTimes::default();
    layer.forward(&dev, &x, &mut y, &mut times).map_err(CliError::new)?;

    let mut s = String::new();
    s.push_str(&format!(
        "{file}: GGUF v{}, {}, layer {}: {}\n",
        m.gguf.version,
        m.gguf.architecture().unwrap_or("(no architecture)"),
        a.layer,
        layer.describe()
    ));
    s.push_str(&format!("device: {}\n", dev.name()));
    s.push_str(&format!("{}\n", m.report));
    s.push_str(&format!("upload: {:.3} ms\n", ms(upload)));
    s.push_str(&format!("tokens: {}, seed {}\n", a.tokens, a.seed));
    if let FfnLayer::Moe(l) = &layer {
        s.push_str(&format!("routed tokens per expert: {:?}\n", l.routed()));
        s.push_str(&format!("experts per grouped call: {}\n", l.group()));
    }
    s.push_str(&format!("stages (first run):\n{times}\n"));
    s.push_str(&format!("output: {} x {} f32\n", a.tokens, ne));
    s.push_str(&format!("hash: {:016x}\n", ffn::hash_f32(&y)));
    out.write_all(s.as_bytes()).map_err(stdout_error)?;

    if a.report {
        let mut s = String::new();
        let c = LoadComparison::run(&a.gguf, &select, &opts, a.load_rounds)
            .map_err(|e| CliError::new(format_args!("{file}: {e}")))?;
        s.push_str(&format!("{c}\n"));
        // The layer (warm) and each of its kernel calls alone, interleaved rep by rep (so
        // that both see the same machine when other work comes and goes); best and median.
        let reps = a.reps.max(1);
        let mut best = StageTimes::default();
        let mut best_k = ffn::KernelTimes::default();
        let (mut layer_t, mut kern_t) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let mut t = StageTimes::default();
            layer.forward(&dev, &x, &mut y, &mut t).map_err(CliError::new)?;
            let k = layer.kernels_alone(&dev, &x, 1).map_err(CliError::new)?;
            if layer_t.iter().all(|&d| t.total < d) {
                best = t.clone();
            }
            if kern_t.iter().all(|&d| k.sum() < d) {
                best_k = k.clone();
            }
            layer_t.push(t.total);
            kern_t.push(k.sum());
        }
        let median = |v: &mut Vec<std::time::Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        let (ml, mk) = (median(&mut layer_t), median(&mut kern_t));
        let ratio = |l: std::time::Duration, k: std::time::Duration| l.as_secs_f64() / k.as_secs_f64().max(1e-12);
        s.push_str(&format!("layer, best of {reps} runs:\n{best}\n"));
        s.push_str(&format!(
            "layer {:.3} ms vs its {} kernel calls alone {:.3} ms (matmul {:.3} + quantize {:.3}): {:.3}x (best of {reps} \
             interleaved runs each; medians {:.3} vs {:.3} ms: {:.3}x)\n",
            ms(best.total),
            best_k.calls,
            ms(best_k.sum()),
            ms(best_k.matmul),
            ms(best_k.quantize),
            ratio(best.total, best_k.sum()),
            ms(ml),
            ms(mk),
            ratio(ml, mk)
        ));
        out.write_all(s.as_bytes()).map_err(stdout_error)?;
    }
    Ok(ExitCode::SUCCESS)
}
