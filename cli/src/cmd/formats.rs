//! `qkern formats`: every format with its block geometry, bits per weight, activation format
//! and the backends of this build and machine that run it; then the CPU features and path.

use std::io::Write;
use std::process::ExitCode;

use qkern::{BackendSpec, Format};

use crate::Result;
use crate::error::stdout_error;

#[derive(Debug, clap::Args)]
pub struct Args {}

/// What a format is used for.
fn role(f: Format) -> &'static str {
    match (f.is_weight(), f.is_activation(), f.is_float()) {
        (true, true, _) => "weight+act",
        (true, false, _) => "weight",
        (false, true, _) => "act",
        (false, false, true) => "float",
        _ => "-",
    }
}

pub fn run(_a: Args, out: &mut dyn Write) -> Result<ExitCode> {
    let backends = qkern::available_backends();
    let present: Vec<String> = backends.iter().filter(|b| b.1.is_ok()).map(|b| b.0.to_string()).collect();
    let present = present.join(",");
    let mut s = String::new();
    s.push_str(&format!(
        "{:<8} {:>3} {:>6} {:>6} {:>7} {:<10} {:<5} backends\n",
        "format", "id", "block", "bytes", "bpw", "role", "acts"
    ));
    for f in Format::ALL {
        let bpw = f.block_bytes() as f64 * 8.0 / f.block_elems() as f64;
        let acts = f.vec_dot_type().map_or("-", Format::name);
        // Weights run (matmul, dequantize) and activation formats quantize on every backend
        // present; float rows have no kernels yet.
        let runs = if f.is_weight() || f.is_activation() { present.as_str() } else { "-" };
        s.push_str(&format!(
            "{:<8} {:>3} {:>6} {:>6} {:>7} {:<10} {:<5} {}\n",
            f.name(),
            f.id(),
            f.block_elems(),
            f.block_bytes(),
            trim_float(bpw),
            role(f),
            acts,
            runs
        ));
    }
    s.push('\n');
    s.push_str(&cpu_lines());
    s.push_str("backends:\n");
    for (spec, status) in &backends {
        match status {
            Ok(()) => s.push_str(&format!("  {spec:<12} available\n")),
            Err(why) => s.push_str(&format!("  {spec:<12} unavailable: {why}\n")),
        }
    }
    out.write_all(s.as_bytes()).map_err(stdout_error)?;
    Ok(ExitCode::SUCCESS)
}

/// `8.5`, `4.5`, `2.0625`: no trailing zeros.
fn trim_float(x: f64) -> String {
    let s = format!("{x:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The CPU features, the default CPU path and how it was chosen (shared with `parity`).
pub fn cpu_lines() -> String {
    let mut s = format!("cpu features: {}\n", qkern_cpu::features());
    let paths: Vec<&str> = qkern_cpu::available_paths().into_iter().map(|p| p.name()).collect();
    s.push_str(&format!("cpu paths available: {}\n", paths.join(" ")));
    let how = match std::env::var("QKERN_CPU") {
        Ok(v) if !v.trim().is_empty() => format!("forced by QKERN_CPU={v}"),
        _ => {
            "default: the best this CPU runs (avx512, else avx2, else scalar); QKERN_CPU=scalar|avx2|avx512 forces one"
                .to_string()
        }
    };
    match qkern_cpu::default_path() {
        Ok(p) => s.push_str(&format!("cpu path in use: {} ({how})\n", BackendSpec::Cpu(Some(p)))),
        Err(e) => s.push_str(&format!("cpu path in use: none: {e}\n")),
    }
    s
}
