//! Bit-for-bit comparison with a report that names what differs.

use std::fmt;

/// The first difference between two f32 outputs laid out `[tokens][rows]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub what: String,
    pub token: usize,
    pub row: usize,
    pub expected: u32,
    pub got: u32,
    pub differing: usize,
    pub total: usize,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}/{} values differ; first at (row {}, token {}): expected {:#010x} ({:e}), got {:#010x} ({:e})",
            self.what,
            self.differing,
            self.total,
            self.row,
            self.token,
            self.expected,
            f32::from_bits(self.expected),
            self.got,
            f32::from_bits(self.got),
        )
    }
}

impl std::error::Error for Mismatch {}

/// Compare `[tokens][rows]` f32 outputs with `to_bits()`.
pub fn bits_equal(what: impl Into<String>, rows: usize, expected: &[f32], got: &[f32]) -> Result<(), Mismatch> {
    let rows = rows.max(1);
    let mut first = None;
    let mut differing = 0;
    for (i, (e, g)) in expected.iter().zip(got).enumerate() {
        if e.to_bits() != g.to_bits() {
            differing += 1;
            first.get_or_insert((i, e.to_bits(), g.to_bits()));
        }
    }
    if expected.len() != got.len() {
        differing += expected.len().abs_diff(got.len());
        first.get_or_insert((expected.len().min(got.len()), 0, 0));
    }
    match first {
        None => Ok(()),
        Some((i, e, g)) => Err(Mismatch {
            what: what.into(),
            token: i / rows,
            row: i % rows,
            expected: e,
            got: g,
            differing,
            total: expected.len(),
        }),
    }
}

/// Compare byte outputs (quantized activations); reports the first differing block.
pub fn bytes_equal(what: &str, block_bytes: usize, expected: &[u8], got: &[u8]) -> Result<(), String> {
    if expected == got {
        return Ok(());
    }
    let i = expected.iter().zip(got).position(|(a, b)| a != b).unwrap_or(expected.len().min(got.len()));
    let b = i / block_bytes.max(1);
    let lo = b * block_bytes;
    let hi = (lo + block_bytes).min(expected.len()).min(got.len());
    Err(format!(
        "{what}: bytes differ first at byte {i} (block {b}, offset {}); lengths {} / {}\n expected block: {:02x?}\n      got block: {:02x?}",
        i - lo,
        expected.len(),
        got.len(),
        expected.get(lo..hi).unwrap_or(&[]),
        got.get(lo..hi).unwrap_or(&[]),
    ))
}
