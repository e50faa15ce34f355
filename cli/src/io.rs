//! File I/O with sizes checked against the shape flags *before* anything is read, so a wrong
//! file is a one-line error (never a huge allocation), and outputs created only once every
//! input has been checked.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::{CliError, Result};

/// Open `path` and check that it is a regular file of exactly `expected` bytes.
/// `what` names it in errors (`weights`, `activations`); `shape` says where the size comes from.
pub fn open_sized(path: &Path, what: &str, expected: usize, shape: &str) -> Result<File> {
    let p = path.display();
    let file = File::open(path).map_err(|e| CliError::new(format_args!("{what} file {p}: {e}")))?;
    let meta = file.metadata().map_err(|e| CliError::new(format_args!("{what} file {p}: {e}")))?;
    if !meta.is_file() {
        return Err(CliError::new(format_args!("{what} file {p}: not a regular file")));
    }
    if meta.len() != expected as u64 {
        return Err(CliError::new(format_args!(
            "{what} file {p} has {} bytes, expected {expected} ({shape})",
            meta.len()
        )));
    }
    Ok(file)
}

/// Read the whole of a file opened by [`open_sized`] (`expected` bytes).
pub fn read_whole(mut file: File, path: &Path, what: &str, expected: usize) -> Result<Vec<u8>> {
    let mut buf = alloc::<u8>(expected, what)?;
    let p = path.display();
    file.read_exact(&mut buf).map_err(|e| CliError::new(format_args!("reading {what} file {p}: {e}")))?;
    // The file must not have grown since its size was checked.
    let mut extra = [0u8; 1];
    match file.read(&mut extra) {
        Ok(0) => Ok(buf),
        Ok(_) => Err(CliError::new(format_args!("{what} file {p} changed size while being read"))),
        Err(e) => Err(CliError::new(format_args!("reading {what} file {p}: {e}"))),
    }
}

/// Allocate `n` zeroed values, as an error (not an abort) when memory is short.
pub fn alloc<T: Clone + Default>(n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| CliError::new(format_args!("{what}: cannot allocate {n} values")))?;
    v.resize(n, T::default());
    Ok(v)
}

/// Reads little-endian f32 values from a size-checked file, chunk by chunk.
pub struct F32Reader {
    inner: BufReader<File>,
    path: PathBuf,
    what: String,
    bytes: Vec<u8>,
}

impl F32Reader {
    /// Open a file that must hold exactly `count` f32 values (`shape` explains `count`).
    pub fn open(path: &Path, what: &str, expected_bytes: usize, shape: &str) -> Result<F32Reader> {
        let file = open_sized(path, what, expected_bytes, shape)?;
        Ok(F32Reader {
            inner: BufReader::with_capacity(1 << 20, file),
            path: path.to_path_buf(),
            what: what.to_string(),
            bytes: Vec::new(),
        })
    }

    /// Fill `out` with the next `out.len()` values.
    pub fn read(&mut self, out: &mut [f32]) -> Result<()> {
        let n = out.len() * 4;
        if self.bytes.len() < n {
            self.bytes
                .try_reserve_exact(n - self.bytes.len())
                .map_err(|_| CliError::new(format_args!("{}: cannot allocate {n} bytes", self.what)))?;
            self.bytes.resize(n, 0);
        }
        let buf = &mut self.bytes[..n];
        self.inner
            .read_exact(buf)
            .map_err(|e| CliError::new(format_args!("reading {} file {}: {e}", self.what, self.path.display())))?;
        for (v, b) in out.iter_mut().zip(buf.chunks_exact(4)) {
            *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        Ok(())
    }
}

/// A buffered output file (created, or truncated, when opened).
pub struct OutFile {
    inner: BufWriter<File>,
    path: PathBuf,
}

impl OutFile {
    pub fn create(path: &Path) -> Result<OutFile> {
        let file = File::create(path)
            .map_err(|e| CliError::new(format_args!("cannot create output file {}: {e}", path.display())))?;
        Ok(OutFile { inner: BufWriter::with_capacity(1 << 20, file), path: path.to_path_buf() })
    }

    fn err(&self, e: std::io::Error) -> CliError {
        CliError::new(format_args!("writing output file {}: {e}", self.path.display()))
    }

    pub fn write_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.inner.write_all(bytes).map_err(|e| self.err(e))
    }

    /// Write f32 values little-endian.
    pub fn write_f32(&mut self, values: &[f32]) -> Result<()> {
        let mut buf = [0u8; 4096];
        for chunk in values.chunks(buf.len() / 4) {
            for (b, v) in buf.chunks_exact_mut(4).zip(chunk) {
                b.copy_from_slice(&v.to_le_bytes());
            }
            self.write_bytes(&buf[..chunk.len() * 4])?;
        }
        Ok(())
    }

    /// Flush; an error here (a full disk) is reported, not lost on drop.
    pub fn finish(mut self) -> Result<()> {
        self.inner.flush().map_err(|e| self.err(e))
    }
}
