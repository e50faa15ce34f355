//! `qkern gguf FILE`: a GGUF file's header, metadata and tensors (read with qkern-engine's
//! validating reader: a malformed file is one error line naming the field and its offset).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use qkern_engine::gguf::Gguf;
use qkern_engine::load::mib;

use crate::error::stdout_error;
use crate::{CliError, Result};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The GGUF file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

pub fn run(a: Args, out: &mut dyn Write) -> Result<ExitCode> {
    let g = Gguf::open(&a.file).map_err(|e| CliError::new(format_args!("{}: {e}", a.file.display())))?;
    let mut s = String::new();
    s.push_str(&format!(
        "{}: GGUF v{}, {} metadata keys, {} tensors ({}), alignment {}, data at byte {}, file {}\n",
        a.file.display(),
        g.version,
        g.kv.len(),
        g.tensors.len(),
        mib(g.data_bytes()),
        g.alignment,
        g.data_offset,
        mib(g.file_len)
    ));
    s.push_str("metadata:\n");
    let kw = g.kv.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in &g.kv {
        s.push_str(&format!("  {k:<kw$}  {:<4} {v}\n", v.value_type().name()));
    }
    s.push_str("tensors:\n");
    let nw = g.tensors.iter().map(|t| t.name.len()).max().unwrap_or(4).max(4);
    s.push_str(&format!(
        "  {:<nw$}  {:<8} {:<22} {:>12} {:>12}  qkern\n",
        "name", "type", "shape (ne)", "offset", "bytes"
    ));
    for t in &g.tensors {
        let runs = match t.format() {
            Some(f) if f.is_weight() => "matmul",
            Some(f) if f.is_float() => "host",
            _ => "-",
        };
        s.push_str(&format!(
            "  {:<nw$}  {:<8} {:<22} {:>12} {:>12}  {runs}\n",
            t.name,
            t.ggml_type.name(),
            t.shape(),
            t.file_offset,
            t.bytes
        ));
    }
    out.write_all(s.as_bytes()).map_err(stdout_error)?;
    Ok(ExitCode::SUCCESS)
}
