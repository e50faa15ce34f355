//! The CLI's error: a message that `main` prints as one line (`qkern: error: ...`).

use std::fmt;

/// An error to report to the user; always rendered on one line.
#[derive(Debug)]
pub struct CliError(String);

pub type Result<T, E = CliError> = std::result::Result<T, E>;

impl CliError {
    pub fn new(msg: impl fmt::Display) -> CliError {
        CliError(one_line(&msg.to_string()))
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<qkern::Error> for CliError {
    fn from(e: qkern::Error) -> Self {
        CliError::new(e)
    }
}

impl From<qkern::ShapeError> for CliError {
    fn from(e: qkern::ShapeError) -> Self {
        CliError::new(e)
    }
}

impl From<qkern::FormatError> for CliError {
    fn from(e: qkern::FormatError) -> Self {
        CliError::new(e)
    }
}

/// Output to stdout failed (a closed pipe, a full disk).
pub fn stdout_error(e: std::io::Error) -> CliError {
    CliError::new(format_args!("writing to stdout: {e}"))
}

/// Collapse whitespace runs (newlines included) into single spaces.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// clap's rendered error, without its `error:` prefix, usage and `--help` hint, on one line.
pub fn clap_one_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let mut lines = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() && !lines.is_empty() {
            break;
        }
        if t.starts_with("Usage:") || t.starts_with("For more information") {
            break;
        }
        lines.push(t);
    }
    let joined = one_line(&lines.join(" "));
    joined.strip_prefix("error:").map(str::trim).unwrap_or(&joined).to_string()
}
