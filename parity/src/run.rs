//! Run vector files against a [`qkern::Device`] and report, per format x NT, how many values
//! are bit-equal to ggml's for dequantize, activation quantize and dot, with the first
//! mismatch of each.
//!
//! Per case, on the device under test:
//!
//! - **dequant**: upload the weights, `dequantize`, compare every f32 with ggml's `to_float`
//!   (counted per element);
//! - **quant**: `quantize` the f32 activations, `read_activations`, compare with ggml-cpu's
//!   `from_float` bytes (counted per activation block);
//! - **dot**: `import_activations` of ggml's own quantized bytes (so that a quantizer bug
//!   cannot hide or cause a dot mismatch), `matmul`, compare with ggml's `vec_dot`
//!   (counted per output value); the same into a device output (`matmul_into`), and, per
//!   file, every case of one width again in one `matmul_grouped` call (a value counts as equal
//!   only where it is equal every way); likewise every case's activations of one width
//!   quantized again by one `quantize_grouped` call (a block counts as equal only where both
//!   quantizes give ggml's bytes).
//!
//! Nothing here catches a panic: a kernel that panics on valid input is a bug, and the test
//! that runs it should fail loudly. API errors are returned as `qkern::Error`.

use std::fmt;

use qkern::{Device, Format, WeightsRef};

use crate::compare::{Mismatch, bits_equal};
use crate::vectors::{Case, VectorFile};

/// Bit-equal values out of a total.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub equal: usize,
    pub total: usize,
}

impl Tally {
    pub fn all_equal(&self) -> bool {
        self.equal == self.total
    }
    fn add(&mut self, o: Tally) {
        self.equal += o.equal;
        self.total += o.total;
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = format!("{}/{}", self.equal, self.total);
        f.pad(&s)
    }
}

/// The three operations a case checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Dequant,
    Quant,
    Dot,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Dequant => "dequant",
            Op::Quant => "quant",
            Op::Dot => "dot",
        }
    }
}

/// The outcome of one case on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseResult {
    pub dequant: Tally,
    pub quant: Tally,
    pub dot: Tally,
    /// The first mismatch of each operation that had one.
    pub mismatches: Vec<(Op, Mismatch)>,
}

/// One line of the report: a format on a backend for one token count, summed over the
/// cases with that NT.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub format: Format,
    pub backend: String,
    pub nt: usize,
    pub cases: usize,
    pub dequant: Tally,
    pub quant: Tally,
    pub dot: Tally,
    /// The first mismatch of each operation, with the case index it came from.
    pub first: Vec<(Op, usize, Mismatch)>,
}

impl Line {
    pub fn all_equal(&self) -> bool {
        self.dequant.all_equal() && self.quant.all_equal() && self.dot.all_equal()
    }
}

/// Lines for formats x backends x NT.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub lines: Vec<Line>,
}

impl Report {
    /// Whether every value of every line is bit-equal.
    pub fn all_equal(&self) -> bool {
        self.lines.iter().all(Line::all_equal)
    }
    /// Append another report's lines.
    pub fn extend(&mut self, other: Report) {
        self.lines.extend(other.lines);
    }
    /// Totals over all lines.
    pub fn totals(&self) -> (Tally, Tally, Tally) {
        let mut t = (Tally::default(), Tally::default(), Tally::default());
        for l in &self.lines {
            t.0.add(l.dequant);
            t.1.add(l.quant);
            t.2.add(l.dot);
        }
        t
    }
}

impl fmt::Display for Report {
    /// A table `format | backend | NT | dequant | quant | dot` (bit-equal/total), then the
    /// first mismatch of each failing line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bw = self.lines.iter().map(|l| l.backend.len()).max().unwrap_or(7).max(7);
        writeln!(
            f,
            "{:<8} | {:<bw$} | {:>2} | {:>13} | {:>11} | {:>9}",
            "format", "backend", "NT", "dequant", "quant", "dot"
        )?;
        writeln!(f, "{:-<8}-|-{:-<bw$}-|-{:->2}-|-{:->13}-|-{:->11}-|-{:->9}", "", "", "", "", "", "")?;
        for l in &self.lines {
            writeln!(
                f,
                "{:<8} | {:<bw$} | {:>2} | {:>13} | {:>11} | {:>9}{}",
                l.format.name(),
                l.backend,
                l.nt,
                l.dequant,
                l.quant,
                l.dot,
                if l.all_equal() { "" } else { "  MISMATCH" }
            )?;
        }
        let failing: Vec<&Line> = self.lines.iter().filter(|l| !l.all_equal()).collect();
        if !failing.is_empty() {
            writeln!(f, "\nfirst mismatches:")?;
            for l in failing {
                for (op, case, m) in &l.first {
                    writeln!(f, "  {} {} NT={} {} (case {case}): {m}", l.format.name(), l.backend, l.nt, op.name())?;
                }
            }
        }
        let (d, q, t) = self.totals();
        write!(f, "total: dequant {d}, quant {q}, dot {t}")
    }
}

fn tally_of(total: usize, r: &Result<(), Mismatch>) -> Tally {
    match r {
        Ok(()) => Tally { equal: total, total },
        Err(m) => Tally { equal: total.saturating_sub(m.differing), total },
    }
}

/// Run one case of `file` on `dev`.
pub fn run_case(dev: &Device, file: &VectorFile, index: usize) -> qkern::Result<CaseResult> {
    let Some(c) = file.cases.get(index) else {
        return Err(qkern::ShapeError::Length { what: "case index", expected: file.cases.len(), got: index }.into());
    };
    let (fmt, act) = (file.header.format, file.header.act);
    let desc = |what: &str| format!("{what} {fmt} case {index} ({})", c.describe());
    let mut mismatches = Vec::new();

    // dequant: [weight row][column], reported as (token = weight row, row = column).
    let w = dev.upload(WeightsRef::new(fmt, c.rows, c.cols, &c.weights)?)?;
    let mut deq = vec![0f32; c.rows * c.cols];
    dev.dequantize(&w, &mut deq)?;
    let r = bits_equal(desc("dequantize") + " [token = weight row, row = column]", c.cols, &c.dequant, &deq);
    let dequant = tally_of(deq.len(), &r);
    if let Err(m) = r {
        mismatches.push((Op::Dequant, m));
    }

    // quant: compared per block.
    let mut acts = dev.activations(act, c.cols, c.nt)?;
    dev.quantize(&c.act_f32, &mut acts)?;
    let mut q = vec![0u8; c.act_q.len()];
    dev.read_activations(&acts, &mut q)?;
    let (quant, qm) = compare_blocks(&desc(&format!("quantize {act} for")), act, c, &q);
    if let Some(m) = qm {
        mismatches.push((Op::Quant, m));
    }

    // dot on ggml's own quantized activations.
    dev.import_activations(&c.act_q, &mut acts)?;
    let mut out = vec![0f32; c.nt * c.rows];
    dev.matmul(&w, &acts, &mut out)?;
    let r = bits_equal(desc("dot"), c.rows, &c.dots, &out);
    let mut dot = tally_of(out.len(), &r);
    if let Err(m) = r {
        mismatches.push((Op::Dot, m));
    }
    // The same dot into a result buffer left on the device (`matmul_into`; a longer buffer:
    // only its prefix is the result), read back: `dot` counts the values equal both ways.
    let mut dout = dev.output(out.len() + 5)?;
    dev.matmul_into(&w, &acts, &mut dout)?;
    dev.read_output(&dout, &mut out)?;
    let r = bits_equal(desc("dot into a device output"), c.rows, &c.dots, &out);
    dot.equal = dot.equal.min(tally_of(out.len(), &r).equal);
    if let Err(m) = r {
        mismatches.push((Op::Dot, m));
    }
    Ok(CaseResult { dequant, quant, dot, mismatches })
}

/// Count equal activation blocks; describe the first differing byte as a [`Mismatch`] with
/// `token` the token, `row` the block within the token's row, and `expected`/`got` the byte
/// values.
fn compare_blocks(what: &str, act: Format, c: &Case, got: &[u8]) -> (Tally, Option<Mismatch>) {
    let bb = act.block_bytes();
    let per_row = c.act_q.len() / c.nt.max(1) / bb;
    let total = c.act_q.len() / bb;
    let mut first = None;
    let mut differing = 0;
    for (i, (e, g)) in c.act_q.chunks_exact(bb).zip(got.chunks_exact(bb)).enumerate() {
        if e != g {
            differing += 1;
            if first.is_none() {
                let k = e.iter().zip(g).position(|(a, b)| a != b).unwrap_or(0);
                first = Some(Mismatch {
                    what: format!(
                        "{what} [token, row = block {} of the token; byte {k} of the block; values are bytes]\n      expected block {:02x?}\n           got block {:02x?}",
                        i % per_row.max(1),
                        e,
                        g
                    ),
                    token: i / per_row.max(1),
                    row: i % per_row.max(1),
                    expected: e[k] as u32,
                    got: g[k] as u32,
                    differing: 0,
                    total,
                });
            }
        }
    }
    if let Some(m) = first.as_mut() {
        m.differing = differing;
    }
    (Tally { equal: total - differing, total }, first)
}

/// Run every case of `file` on `dev`; one report line per NT (ascending).
pub fn run_file(dev: &Device, file: &VectorFile) -> qkern::Result<Report> {
    let backend = dev.name();
    let mut lines: Vec<Line> = Vec::new();
    for i in 0..file.cases.len() {
        let nt = file.cases[i].nt;
        let r = run_case(dev, file, i)?;
        let pos = match lines.iter().position(|l| l.nt == nt) {
            Some(p) => p,
            None => {
                lines.push(Line {
                    format: file.header.format,
                    backend: backend.clone(),
                    nt,
                    cases: 0,
                    dequant: Tally::default(),
                    quant: Tally::default(),
                    dot: Tally::default(),
                    first: Vec::new(),
                });
                lines.len() - 1
            }
        };
        let l = &mut lines[pos];
        l.cases += 1;
        l.dequant.add(r.dequant);
        l.quant.add(r.quant);
        l.dot.add(r.dot);
        for (op, m) in r.mismatches {
            if !l.first.iter().any(|(o, _, _)| *o == op) {
                l.first.push((op, i, m));
            }
        }
    }
    let quants = grouped_quants(dev, file)?.into_iter().map(|(i, m)| (Op::Quant, i, m));
    for (op, i, m) in quants.chain(grouped_dots(dev, file)?.into_iter().map(|(i, m)| (Op::Dot, i, m))) {
        let l = lines.iter_mut().find(|l| l.nt == file.cases[i].nt).expect("a line for every case's NT");
        let t = if op == Op::Quant { &mut l.quant } else { &mut l.dot };
        t.equal = t.equal.saturating_sub(m.differing);
        if !l.first.iter().any(|(o, _, _)| *o == op) {
            l.first.push((op, i, m));
        }
    }
    lines.sort_by_key(|l| l.nt);
    for l in &mut lines {
        l.first.sort_by_key(|(op, _, _)| *op);
    }
    Ok(Report { lines })
}

/// The case indices of `file` of each width (widths ascending).
fn cases_by_width(file: &VectorFile) -> Vec<(usize, Vec<usize>)> {
    let mut widths: Vec<usize> = file.cases.iter().map(|c| c.cols).collect();
    widths.sort_unstable();
    widths.dedup();
    widths
        .into_iter()
        .map(|cols| (cols, (0..file.cases.len()).filter(|&i| file.cases[i].cols == cols).collect()))
        .collect()
}

/// Every case's activations of `file` quantized again, all cases of one width by one
/// `quantize_grouped` call (on CUDA one copy and one launch per 16 buffers): the mismatches of
/// each case's buffer against ggml's bytes.
fn grouped_quants(dev: &Device, file: &VectorFile) -> qkern::Result<Vec<(usize, Mismatch)>> {
    let (fmt, act) = (file.header.format, file.header.act);
    let mut bad = Vec::new();
    for (cols, idx) in cases_by_width(file) {
        let mut acts =
            idx.iter().map(|&i| dev.activations(act, cols, file.cases[i].nt)).collect::<qkern::Result<Vec<_>>>()?;
        let tokens: Vec<usize> = idx.iter().map(|&i| file.cases[i].nt).collect();
        let x: Vec<f32> = idx.iter().flat_map(|&i| file.cases[i].act_f32.iter().copied()).collect();
        dev.quantize_grouped(&x, &tokens, &mut acts)?;
        for (&i, a) in idx.iter().zip(&acts) {
            let c = &file.cases[i];
            let mut q = vec![0u8; c.act_q.len()];
            dev.read_activations(a, &mut q)?;
            let what = format!(
                "quantize {act} in a grouped call of {} cases, for {fmt} case {i} ({})",
                idx.len(),
                c.describe()
            );
            if let (_, Some(m)) = compare_blocks(&what, act, c, &q) {
                bad.push((i, m));
            }
        }
    }
    Ok(bad)
}

/// Every case of `file` again, all cases of one width in one `matmul_grouped` call (jobs of
/// different rows and token counts; on CUDA one launch per 16 jobs): the mismatches of each
/// case's slice of the result against its dots.
fn grouped_dots(dev: &Device, file: &VectorFile) -> qkern::Result<Vec<(usize, Mismatch)>> {
    let (fmt, act) = (file.header.format, file.header.act);
    let mut bad = Vec::new();
    for (_, idx) in cases_by_width(file) {
        let mut ws = Vec::with_capacity(idx.len());
        let mut acts = Vec::with_capacity(idx.len());
        for &i in &idx {
            let c = &file.cases[i];
            ws.push(dev.upload(WeightsRef::new(fmt, c.rows, c.cols, &c.weights)?)?);
            let mut a = dev.activations(act, c.cols, c.nt)?;
            dev.import_activations(&c.act_q, &mut a)?;
            acts.push(a);
        }
        let jobs: Vec<_> = ws.iter().zip(&acts).collect();
        let mut out = vec![0f32; idx.iter().map(|&i| file.cases[i].nt * file.cases[i].rows).sum()];
        dev.matmul_grouped(&jobs, &mut out)?;
        let mut off = 0;
        for &i in &idx {
            let c = &file.cases[i];
            let n = c.nt * c.rows;
            let what = format!("dot in a grouped call of {} cases {fmt} case {i} ({})", idx.len(), c.describe());
            if let Err(m) = bits_equal(what, c.rows, &c.dots, &out[off..off + n]) {
                bad.push((i, m));
            }
            off += n;
        }
    }
    Ok(bad)
}
