//! `qkern`: the command line over the `qkern` facade. Each subcommand lives in its own module
//! under `cmd/` (its clap arguments and its `run`); `main` only parses, dispatches and turns
//! errors into one line on stderr (`qkern: error: ...`) and exit code 2. Exit code 1 is kept
//! for "ran, but found differences" (`qkern parity`).
// The subcommands' doc comments are clap's --help text, written for a terminal ([tokens][cols],
// <arch>.expert_count): rustdoc would read them as links and HTML tags.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

mod args;
mod cmd;
mod error;
mod io;

pub use error::{CliError, Result};

/// Bit-exact ggml quantized kernels: dot products, dequantization, activation quantization and
/// the parity check against ggml 0.26.0's reference vectors.
#[derive(Debug, Parser)]
#[command(name = "qkern", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: cmd::Command,
}

/// Exit code for errors: bad arguments, files or shapes, unavailable backends.
const EXIT_ERROR: u8 = 2;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        // A panic is a bug; still keep the one-line error convention.
        let msg = error::one_line(&info.to_string());
        eprintln!("qkern: error: internal error (please report): {msg}");
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_error(e),
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let code = match cli.command.run(&mut out) {
        Ok(code) => code,
        Err(e) => {
            let _ = out.flush();
            eprintln!("qkern: error: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    if let Err(e) = out.flush() {
        eprintln!("qkern: error: writing to stdout: {e}");
        return ExitCode::from(EXIT_ERROR);
    }
    code
}

/// Help and version go out as clap prints them; every other parse error becomes one line.
fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(EXIT_ERROR))
        }
        _ => {
            eprintln!("qkern: error: {}", error::clap_one_line(&e));
            ExitCode::from(EXIT_ERROR)
        }
    }
}
