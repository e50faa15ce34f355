//! `qkern gguf-synth`: write a synthetic MoE GGUF (llama.cpp tensor names and shapes, scaled
//! down; random weight blocks with sane scales) to demonstrate `qkern layer` without a model.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use qkern::Format;
use qkern_engine::load::mib;
use qkern_engine::synth::{self, SynthSpec};

use crate::args;
use crate::error::stdout_error;
use crate::{CliError, Result};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output file.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Gate and up weights (q4_K, iq2_xxs, ...).
    #[arg(long, value_name = "F", value_parser = args::parse_format, default_value = "q4_K")]
    pub format: Format,
    /// Up weights (default: --format).
    #[arg(long, value_name = "F", value_parser = args::parse_format)]
    pub up_format: Option<Format>,
    /// Down weights (default: --format).
    #[arg(long, value_name = "F", value_parser = args::parse_format)]
    pub down_format: Option<Format>,
    /// Router weights: f32, f16 or bf16.
    #[arg(long, value_name = "F", value_parser = args::parse_format, default_value = "f32")]
    pub router: Format,
    /// Hidden size (n_embd).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub hidden: usize,
    /// Expert (and dense) FFN size.
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub ffn: usize,
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub experts: usize,
    /// Experts used per token (written as <arch>.expert_used_count).
    #[arg(long, value_name = "K", default_value_t = 2)]
    pub top_k: usize,
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub layers: usize,
    /// The first N layers are dense FFNs.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub dense_layers: usize,
    /// general.architecture.
    #[arg(long, value_name = "NAME", default_value = "qkern-synth")]
    pub arch: String,
    /// general.alignment (default: not written, ggml's 32).
    #[arg(long, value_name = "A")]
    pub alignment: Option<u32>,
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
}

pub fn run(a: Args, out: &mut dyn Write) -> Result<ExitCode> {
    let down = a.down_format.unwrap_or(a.format);
    let up = a.up_format.unwrap_or(a.format);
    for (what, f) in [("--format", a.format), ("--up-format", up), ("--down-format", down)] {
        if !f.is_weight() {
            args::require_role(f, true).map_err(|e| CliError::new(format_args!("{what}: {e}")))?;
        }
    }
    if !a.router.is_float() && !a.router.is_weight() {
        return Err(CliError::new(format_args!("--router {} is neither a float nor a weight format", a.router)));
    }
    if a.top_k == 0 || a.top_k > a.experts {
        return Err(CliError::new(format_args!("--top-k {} must be 1..={} (--experts)", a.top_k, a.experts)));
    }
    if a.layers == 0 || a.dense_layers > a.layers {
        return Err(CliError::new("--layers must be at least 1 and --dense-layers at most --layers"));
    }
    for (what, f, cols) in [
        ("--hidden", a.format, a.hidden),
        ("--hidden", up, a.hidden),
        ("--ffn", down, a.ffn),
        ("--hidden", a.router, a.hidden),
    ] {
        if cols == 0 || !cols.is_multiple_of(f.block_elems()) {
            return Err(CliError::new(format_args!(
                "{what} {cols} is not a multiple of {f}'s block of {}",
                f.block_elems()
            )));
        }
    }
    let spec = SynthSpec {
        arch: a.arch,
        format: a.format,
        up_format: a.up_format,
        down_format: down,
        router: a.router,
        n_embd: a.hidden,
        n_ff: a.ffn,
        n_expert: a.experts,
        top_k: a.top_k,
        layers: a.layers,
        dense_layers: a.dense_layers,
        alignment: a.alignment,
        seed: a.seed,
    };
    let n = synth::write(&a.out, &spec).map_err(|e| CliError::new(format_args!("{}: {e}", a.out.display())))?;
    writeln!(
        out,
        "wrote {}: {} ({n} bytes), {} layers ({} dense), {} experts top-{}, hidden {}, ffn {}, gate {}, up {}, down {}, router {}",
        a.out.display(),
        mib(n),
        spec.layers,
        spec.dense_layers,
        spec.n_expert,
        spec.top_k,
        spec.n_embd,
        spec.n_ff,
        spec.format,
        up,
        spec.down_format,
        spec.router
    )
    .map_err(stdout_error)?;
    Ok(ExitCode::SUCCESS)
}
