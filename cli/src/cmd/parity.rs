//! `qkern parity`: the committed ggml reference vectors (`parity/vectors/*.qkv`) on every
//! backend present (or those named), the absent ones listed with the reason: a table of format
//! x backend x NT with bit-equal / total counts; exit code 1 on any difference.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use qkern::{BackendSpec, Device, DeviceOptions};
use qkern_parity::run::Report;
use qkern_parity::vectors::VectorFile;

use crate::args;
use crate::error::stdout_error;
use crate::{CliError, Result};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A backend to check (repeatable). Default: every backend present.
    #[arg(long = "backend", value_name = "B", value_parser = args::parse_backend)]
    pub backends: Vec<BackendSpec>,
    /// The vectors directory. Default: parity/vectors, found next to the executable, the
    /// cargo manifest or the current directory.
    #[arg(long, value_name = "DIR")]
    pub vectors: Option<PathBuf>,
    /// CPU worker threads (default: all cores).
    #[arg(long, value_name = "N", value_parser = args::parse_threads)]
    pub threads: Option<usize>,
}

pub fn run(a: Args, out: &mut dyn Write) -> Result<ExitCode> {
    let dir = vectors_dir(a.vectors.as_deref())?;
    let files = load_vectors(&dir)?;
    let all = qkern::available_backends();
    let specs: Vec<BackendSpec> = if a.backends.is_empty() {
        all.iter().filter(|b| b.1.is_ok()).map(|b| b.0).collect()
    } else {
        a.backends.clone()
    };
    // The backends this build or machine lacks, and why (e.g. "cuda: not built with cuda").
    let absent: Vec<String> =
        all.iter().filter_map(|(b, r)| r.as_ref().err().map(|why| format!("{b} ({why})"))).collect();
    let opts = DeviceOptions { threads: a.threads };
    // Open every device before running anything: a backend that cannot open is an error (2),
    // not a difference (1).
    let devices = specs
        .iter()
        .map(|&spec| Device::open(spec, opts).map_err(|e| CliError::new(format_args!("backend {spec}: {e}"))))
        .collect::<Result<Vec<Device>>>()?;

    let mut head = super::formats::cpu_lines();
    let ggml = files.first().map_or("?", |f| f.1.header.ggml_version.as_str());
    head.push_str(&format!("vectors: {} ({} formats, ggml {ggml})\n", dir.display(), files.len()));
    let names: Vec<String> = devices.iter().map(Device::name).collect();
    head.push_str(&format!("backends: {}\n", names.join(", ")));
    if !absent.is_empty() {
        head.push_str(&format!("absent: {}\n", absent.join("; ")));
    }
    head.push('\n');
    out.write_all(head.as_bytes()).map_err(stdout_error)?;
    out.flush().map_err(stdout_error)?;

    let mut report = Report::default();
    for (spec, dev) in specs.iter().zip(&devices) {
        for (path, file) in &files {
            let r = qkern_parity::run::run_file(dev, file).map_err(|e| {
                CliError::new(format_args!("{} on {spec}: {e}", path.file_name().unwrap_or_default().to_string_lossy()))
            })?;
            report.extend(r);
        }
    }
    // format x backend x NT: formats in ggml id order, backends in the order run.
    report.lines.sort_by_key(|l| l.format);
    writeln!(out, "{report}").map_err(stdout_error)?;
    if report.all_equal() {
        writeln!(out, "parity: every value bit-equal to ggml").map_err(stdout_error)?;
        Ok(ExitCode::SUCCESS)
    } else {
        writeln!(out, "parity: DIFFERENCES from ggml (see above)").map_err(stdout_error)?;
        Ok(ExitCode::from(1))
    }
}

/// Every `*.qkv` file of `dir`, parsed and validated, in ggml type id order.
fn load_vectors(dir: &Path) -> Result<Vec<(PathBuf, VectorFile)>> {
    let rd =
        std::fs::read_dir(dir).map_err(|e| CliError::new(format_args!("vectors directory {}: {e}", dir.display())))?;
    let mut paths: Vec<PathBuf> =
        rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "qkv") && p.is_file()).collect();
    paths.sort();
    let mut files = Vec::with_capacity(paths.len());
    for p in paths {
        let f = VectorFile::load(&p).map_err(|e| CliError::new(format_args!("vector file {}: {e}", p.display())))?;
        files.push((p, f));
    }
    files.sort_by_key(|f| f.1.header.format);
    if files.is_empty() {
        return Err(CliError::new(format_args!("vectors directory {} holds no .qkv files", dir.display())));
    }
    Ok(files)
}

/// Whether `dir` is a directory holding at least one `*.qkv` file.
fn has_vectors(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .is_ok_and(|rd| rd.flatten().any(|e| e.path().extension().is_some_and(|x| x == "qkv") && e.path().is_file()))
}

/// The vectors directory: `--vectors`, else the first `parity/vectors` with vector files
/// among: the executable's ancestors (`target/release/qkern` -> the workspace), the
/// `CARGO_MANIFEST_DIR` of the run and of the build, and the current directory.
pub fn vectors_dir(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(d) = given {
        if !d.is_dir() {
            return Err(CliError::new(format_args!("vectors directory {} does not exist", d.display())));
        }
        if !has_vectors(d) {
            return Err(CliError::new(format_args!("vectors directory {} holds no .qkv files", d.display())));
        }
        return Ok(d.to_path_buf());
    }
    let mut tried: Vec<PathBuf> = Vec::new();
    if let Some(exe_dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
        for anc in exe_dir.ancestors() {
            tried.push(anc.join("parity").join("vectors"));
        }
    }
    if let Ok(m) = std::env::var("CARGO_MANIFEST_DIR") {
        let m = PathBuf::from(m);
        tried.push(m.join("parity").join("vectors"));
        tried.push(m.join("..").join("parity").join("vectors"));
    }
    tried.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("parity").join("vectors"));
    if let Ok(cwd) = std::env::current_dir() {
        tried.push(cwd.join("parity").join("vectors"));
        tried.push(cwd.join("vectors"));
    }
    if let Some(d) = tried.iter().find(|d| has_vectors(d)) {
        return Ok(d.clone());
    }
    Err(CliError::new(format_args!(
        "no parity vectors found (looked for *.qkv in parity/vectors beside the executable, the cargo manifest \
         and the current directory); pass --vectors DIR"
    )))
}
