//! `qkern-bench`: the measurement core behind `qkern bench` and `cargo bench -p qkern-bench`.
//!
//! For every format x backend x token count x thread count it times, **in the same run and
//! interleaved** (round-robin repetitions over the same weight memory):
//!
//! - **ours**: `qkern::Device::matmul` on resident weights, activations quantized once outside
//!   the timed loop (also `dequantize` and `quantize`);
//! - **ggml**: ggml 0.26.0's own `vec_dot` with `nrc = 1`, called per row and token exactly as
//!   `ggml_compute_forward_mul_mat` calls it (feature `ggml`; see [`contenders::ggml`]);
//! - **candle**: candle-core's CPU quantized matmul for the formats it has (feature `candle`;
//!   see [`contenders::candle`]);
//!
//! and the machine's streaming-read bandwidth (1 thread and every thread count measured), at
//! the start and at the end of the run. Results are medians with quartiles and extremes over
//! repeated samples ([`measure`]), reported as GB/s of weight bytes (f32 input bytes for
//! `quantize`), tokens x rows per second, the ratio ours / ggml and the percentage of the
//! streaming bandwidth. [`Report`] renders a text table, CSV, Markdown and an SVG chart.
//!
//! Shapes: out of cache (default 512 MiB of weights, 4096 columns) and in cache (one MoE
//! expert: 640 x 2560 gate or up, 2560 x 640 down). A format whose block does not divide the
//! columns (the 256-element formats at 640) gets rows marked "n/a", not dropped.

use std::time::Instant;

use qkern::{BackendSpec, Device, DeviceOptions, Format};

pub mod bandwidth;
mod chart;
pub mod contenders;
pub mod machine;
pub mod measure;
mod report;
pub mod stats;

pub use contenders::{Absent, WeightSet};
pub use machine::Machine;
pub use measure::Budget;
pub use stats::Summary;

use bandwidth::{Bandwidth, ReadBuffer};
use contenders::{Pools, candle, ggml, ours};

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Qkern(#[from] qkern::Error),
    #[error("{what}: {message}")]
    Run { what: String, message: String },
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("chart: {0}")]
    Chart(String),
}

/// The measured operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// weights x quantized activations (`vec_dot` per row and token).
    Matmul,
    /// weights to f32.
    Dequant,
    /// f32 activations to q8_0 / q8_1 / q8_K.
    Quantize,
}

impl Op {
    pub const ALL: [Op; 3] = [Op::Matmul, Op::Dequant, Op::Quantize];
    pub fn name(self) -> &'static str {
        match self {
            Op::Matmul => "matmul",
            Op::Dequant => "dequant",
            Op::Quantize => "quantize",
        }
    }
}

impl std::str::FromStr for Op {
    type Err = Error;
    fn from_str(s: &str) -> Result<Op, Error> {
        Op::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| Error::Config(format!("unknown op {s:?} (expected matmul, dequant or quantize)")))
    }
}

/// A weight shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shape {
    /// `weights_mib` of weights at `cols` columns: streams from memory.
    OutOfCache,
    /// One MoE expert's gate or up projection: 640 rows x 2560 columns.
    ExpertGateUp,
    /// One MoE expert's down projection: 2560 rows x 640 columns.
    ExpertDown,
}

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::OutOfCache => "out-of-cache",
            Shape::ExpertGateUp => "expert-gate-up",
            Shape::ExpertDown => "expert-down",
        }
    }

    /// `(rows, cols)` for `format` (out of cache: as many rows as fit in `weights_mib`).
    pub fn dims(self, format: Format, cfg: &Config) -> (usize, usize) {
        match self {
            Shape::OutOfCache => {
                let rb = format.row_bytes(cfg.cols).unwrap_or(0);
                let rows = (cfg.weights_mib << 20).checked_div(rb).unwrap_or(0);
                (rows.max(1), cfg.cols)
            }
            Shape::ExpertGateUp => (640, 2560),
            Shape::ExpertDown => (2560, 640),
        }
    }
}

/// Which shapes to run (`--shape`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeSel {
    OutOfCache,
    Expert,
    Both,
}

impl ShapeSel {
    pub fn shapes(self) -> Vec<Shape> {
        match self {
            ShapeSel::OutOfCache => vec![Shape::OutOfCache],
            ShapeSel::Expert => vec![Shape::ExpertGateUp, Shape::ExpertDown],
            ShapeSel::Both => vec![Shape::OutOfCache, Shape::ExpertGateUp, Shape::ExpertDown],
        }
    }
}

impl std::str::FromStr for ShapeSel {
    type Err = Error;
    fn from_str(s: &str) -> Result<ShapeSel, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "out-of-cache" | "ooc" => Ok(ShapeSel::OutOfCache),
            "expert" | "in-cache" => Ok(ShapeSel::Expert),
            "both" | "all" => Ok(ShapeSel::Both),
            _ => Err(Error::Config(format!("unknown shape {s:?} (expected out-of-cache, expert or both)"))),
        }
    }
}

/// Where a GPU backend's matmul results go (`--gpu-out`): copied to host memory, as
/// `Device::matmul` returns them; left in a device buffer (`Device::matmul_into`, then
/// `synchronize`: the kernels' time plus a launch and a wait, as ggml's own GPU kernels are
/// usually timed); or both, as two rows ("cuda:0" and "cuda:0 (device out)").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuOut {
    Host,
    Device,
    Both,
}

impl GpuOut {
    fn host(self) -> bool {
        self != GpuOut::Device
    }
    fn device(self) -> bool {
        self != GpuOut::Host
    }
}

impl std::str::FromStr for GpuOut {
    type Err = Error;
    fn from_str(s: &str) -> Result<GpuOut, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "host" => Ok(GpuOut::Host),
            "device" => Ok(GpuOut::Device),
            "both" => Ok(GpuOut::Both),
            _ => Err(Error::Config(format!("unknown GPU output {s:?} (expected host, device or both)"))),
        }
    }
}

/// The backend column of a GPU's device-output rows.
pub fn device_out_name(backend: &str) -> String {
    format!("{backend} (device out)")
}

/// What to measure and for how long.
#[derive(Clone, Debug)]
pub struct Config {
    pub formats: Vec<Format>,
    /// Backend names as `qkern::BackendSpec` parses them (`cpu`, `cpu-scalar`, ...).
    pub backends: Vec<String>,
    pub tokens: Vec<usize>,
    pub threads: Vec<usize>,
    /// Timed seconds per contender per measurement.
    pub seconds: f64,
    /// At least this many samples per contender per measurement...
    pub min_reps: usize,
    /// ...unless its samples already add up to this many seconds (a cap for slow paths).
    pub max_seconds: f64,
    pub shapes: ShapeSel,
    pub ops: Vec<Op>,
    /// Weights per format for the out-of-cache shape, MiB.
    pub weights_mib: usize,
    /// Columns of the out-of-cache shape.
    pub cols: usize,
    /// The streaming-read buffer, MiB (default: the weights' size, at least 64 MiB).
    pub bandwidth_mib: Option<usize>,
    pub seed: u64,
    /// GPU backends' matmul results: host memory, device memory or both ([`GpuOut`]).
    pub gpu_out: GpuOut,
}

impl Default for Config {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut threads = vec![1, cores];
        threads.dedup();
        Config {
            formats: Format::WEIGHTS.to_vec(),
            backends: vec!["cpu".into()],
            tokens: vec![1, 2, 4, 8, 16],
            threads,
            seconds: 0.25,
            min_reps: 3,
            max_seconds: 6.0,
            shapes: ShapeSel::Both,
            ops: Op::ALL.to_vec(),
            weights_mib: 512,
            cols: 4096,
            bandwidth_mib: None,
            seed: 0x5eed_0004,
            gpu_out: GpuOut::Both,
        }
    }
}

impl Config {
    fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if let Some(f) = self.formats.iter().find(|f| !f.is_weight()) {
            return bad(format!("{f} is not a quantized weight format"));
        }
        if self.formats.is_empty() || self.backends.is_empty() || self.tokens.is_empty() || self.threads.is_empty() {
            return bad("--formats, --backends, --tokens and --threads need at least one value each".into());
        }
        if self.tokens.contains(&0) || self.threads.contains(&0) {
            return bad("token and thread counts must be at least 1".into());
        }
        if !(self.seconds.is_finite() && self.seconds >= 0.0) {
            return bad(format!("--seconds must be a non-negative number, not {}", self.seconds));
        }
        if self.max_seconds.is_nan() || self.max_seconds <= 0.0 {
            return bad(format!("--max-seconds must be positive, not {}", self.max_seconds));
        }
        if self.weights_mib == 0 || self.cols == 0 {
            return bad("--weights-mib and the column count must be at least 1".into());
        }
        Ok(())
    }

    fn bandwidth_bytes(&self) -> usize {
        self.bandwidth_mib.unwrap_or(self.weights_mib.max(64)) << 20
    }

    /// Thread counts at which bandwidth is measured: 1, every count asked for, all CPUs.
    fn bandwidth_threads(&self) -> Vec<usize> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut v: Vec<usize> = self.threads.iter().copied().chain([1, cores]).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// One line per setting (the reports' "configuration" block).
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        let join = |v: &[usize]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",");
        vec![
            ("formats", self.formats.iter().map(|f| f.name()).collect::<Vec<_>>().join(",")),
            ("backends", self.backends.join(",")),
            ("tokens", join(&self.tokens)),
            ("threads", join(&self.threads)),
            ("seconds per contender per measurement", format!("{}", self.seconds)),
            (
                "samples per contender",
                format!("at least {} (fewer once they add up to {} s)", self.min_reps, self.max_seconds),
            ),
            ("shapes", self.shapes.shapes().iter().map(|s| s.name()).collect::<Vec<_>>().join(",")),
            ("ops", self.ops.iter().map(|o| o.name()).collect::<Vec<_>>().join(",")),
            ("out-of-cache weights", format!("{} MiB per format, {} columns", self.weights_mib, self.cols)),
            ("bandwidth buffer", format!("{} MiB", self.bandwidth_bytes() >> 20)),
        ]
    }
}

/// A contender's result in one measurement.
#[derive(Clone, Debug)]
pub enum Cell {
    /// Seconds per operation.
    Measured(Summary),
    /// Why there is no number ("not built", "not supported (...)", "n/a ...").
    Absent(String),
}

impl Cell {
    fn from(r: Result<Summary, String>) -> Cell {
        match r {
            Ok(s) => Cell::Measured(s),
            Err(e) => Cell::Absent(e),
        }
    }
    pub fn seconds(&self) -> Option<&Summary> {
        match self {
            Cell::Measured(s) => Some(s),
            Cell::Absent(_) => None,
        }
    }
}

/// One row of the results: one measurement of one backend.
#[derive(Clone, Debug)]
pub struct Record {
    pub shape: Shape,
    pub op: Op,
    /// The weight format (the activation format for `quantize`).
    pub format: Format,
    pub backend: String,
    pub tokens: Option<usize>,
    pub threads: usize,
    pub rows: usize,
    pub cols: usize,
    /// The bytes GB/s refer to: weight bytes (matmul, dequant) or f32 input bytes (quantize).
    pub bytes: usize,
    pub ours: Cell,
    pub ggml: Cell,
    pub candle: Cell,
    /// Streaming-read bandwidth at `threads` (CPU backends), or the device's copy bandwidth,
    /// read plus written (CUDA: [`Report::copies`]).
    pub bandwidth_gbps: Option<f64>,
    /// Whether ours' output equals ggml's bit for bit (matmul, both measured).
    pub matches_ggml: Option<bool>,
    /// "n/a: ..." when the shape does not apply to the format.
    pub note: String,
}

impl Record {
    /// GB/s summary of a contender.
    pub fn gbps(&self, c: &Cell) -> Option<Summary> {
        c.seconds().map(|s| s.rate(self.bytes as f64 / 1e9))
    }
    /// tokens x rows per second (matmul).
    pub fn tok_rows_per_s(&self, c: &Cell) -> Option<f64> {
        let t = self.tokens?;
        (self.op == Op::Matmul).then(|| c.seconds().map(|s| (t * self.rows) as f64 / s.median)).flatten()
    }
    /// ours / ggml in throughput (= ggml's time / ours).
    pub fn ratio(&self) -> Option<f64> {
        Some(self.gbps(&self.ours)?.median / self.gbps(&self.ggml)?.median)
    }
    pub fn candle_ratio(&self) -> Option<f64> {
        Some(self.gbps(&self.ours)?.median / self.gbps(&self.candle)?.median)
    }
    /// ours as a percentage of the streaming-read bandwidth (CPU) or of the copy bandwidth (CUDA).
    pub fn pct_bandwidth(&self) -> Option<f64> {
        Some(100.0 * self.gbps(&self.ours)?.median / self.bandwidth_gbps?)
    }
}

/// A GPU backend's copy bandwidth samples (GB/s, read plus written) over `bytes`.
#[derive(Clone, Debug)]
pub struct DeviceCopy {
    pub backend: String,
    pub bytes: usize,
    pub samples: Vec<f64>,
}

impl DeviceCopy {
    pub fn summary(&self) -> Option<Summary> {
        Summary::of(&self.samples)
    }

    /// Whether a record of `backend` (`cuda:0` or `cuda:0 (device out)`) runs on this device.
    pub fn covers(&self, backend: &str) -> bool {
        backend == self.backend || backend.strip_prefix(self.backend.as_str()).is_some_and(|r| r.starts_with(" ("))
    }
}

/// Add 3 copy samples of `bytes` on `dev` to its entry of `copies`, made by the first phase,
/// where the device has a copy reference ([`qkern::Device::copy_gbps`]; none on the CPU or wgpu).
fn measure_copy(dev: &Dev, bytes: usize, copies: &mut Vec<DeviceCopy>) -> Result<(), Error> {
    for _ in 0..3 {
        let Some(g) = dev.dev.copy_gbps(bytes)? else { return Ok(()) };
        match copies.iter_mut().find(|c| c.backend == dev.name) {
            Some(c) => c.samples.push(g),
            None => copies.push(DeviceCopy { backend: dev.name.clone(), bytes, samples: vec![g] }),
        }
    }
    Ok(())
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct Report {
    pub machine: Machine,
    pub config: Config,
    pub bandwidth: Vec<Bandwidth>,
    /// The GPU backends' copy bandwidth (read plus written, [`qkern::Device::copy_gbps`]), by
    /// backend name, in the same phases; the reference of their rows' `% bw`.
    pub copies: Vec<DeviceCopy>,
    pub records: Vec<Record>,
    pub elapsed_s: f64,
    /// Free-form remarks added by the caller (e.g. "2 cores shared with other jobs").
    pub notes: Vec<String>,
}

struct Dev {
    name: String,
    threads: usize,
    is_cpu: bool,
    dev: Device,
}

fn open_devices(cfg: &Config) -> Result<Vec<Dev>, Error> {
    let mut v = Vec::new();
    for b in &cfg.backends {
        let spec: BackendSpec = b.parse()?;
        for &t in &cfg.threads {
            let dev = Device::open(spec, DeviceOptions { threads: Some(t) })?;
            let resolved = dev.spec();
            let is_cpu = matches!(resolved, BackendSpec::Cpu(_));
            if !is_cpu && v.iter().any(|d: &Dev| d.name == resolved.to_string()) {
                continue;
            }
            v.push(Dev { name: resolved.to_string(), threads: t, is_cpu, dev });
        }
    }
    Ok(v)
}

/// Progress of a run: measurements done, their total, and the seconds since the start.
struct Progress<'p> {
    done: usize,
    total: usize,
    start: Instant,
    sink: &'p mut dyn FnMut(&str),
}

impl Progress<'_> {
    fn step(&mut self, msg: &str) {
        self.done += 1;
        let s = self.start.elapsed().as_secs();
        (self.sink)(&format!("[{:>4}/{} {:>3}m{:02}s] {msg}", self.done, self.total, s / 60, s % 60));
    }
    fn say(&mut self, msg: &str) {
        (self.sink)(msg);
    }
}

/// The progress line of one measurement: `what`, then the first record's three contenders.
fn contenders_line(what: &str, r: &Record) -> String {
    format!(
        "{what}: ours {}, ggml {}, candle {}",
        short(&r.ours, r.bytes),
        short(&r.ggml, r.bytes),
        short(&r.candle, r.bytes)
    )
}

fn short(c: &Cell, bytes: usize) -> String {
    match c.seconds() {
        Some(s) => format!("{:.2} GB/s", bytes as f64 / 1e9 / s.median),
        None => match c {
            Cell::Absent(a) => a.split(" (").next().unwrap_or(a).to_string(),
            Cell::Measured(_) => String::new(),
        },
    }
}

/// Run the benchmark; `progress` receives one line per measurement (for stderr).
pub fn run(cfg: &Config, progress: &mut dyn FnMut(&str)) -> Result<Report, Error> {
    cfg.validate()?;
    candle::init();
    let start = Instant::now();
    let mut machine = Machine::detect();
    let devices = open_devices(cfg)?;
    let gpu: Vec<String> = devices.iter().filter(|d| !d.is_cpu).map(|d| d.dev.name()).collect();
    if !gpu.is_empty() {
        machine.gpu = gpu.join("; ");
    }
    let shapes = cfg.shapes.shapes();
    let max_nt = cfg.tokens.iter().copied().max().unwrap_or(1);
    let ops = |o: Op| cfg.ops.contains(&o);
    let mut act_formats: Vec<Format> = cfg.formats.iter().filter_map(|f| f.vec_dot_type()).collect();
    act_formats.sort();
    act_formats.dedup();
    let total = shapes.len()
        * (cfg.formats.len()
            * (usize::from(ops(Op::Matmul)) * cfg.threads.len() * cfg.tokens.len() + usize::from(ops(Op::Dequant)))
            + usize::from(ops(Op::Quantize)) * act_formats.len());
    let mut prog = Progress { done: 0, total, start, sink: progress };

    // Streaming-read bandwidth, first phase.
    let bw_buf = ReadBuffer::new(cfg.bandwidth_bytes());
    let mut bandwidth: Vec<Bandwidth> = cfg
        .bandwidth_threads()
        .into_iter()
        .map(|t| Bandwidth { threads: t, bytes: bw_buf.bytes(), samples: Vec::new() })
        .collect();
    for bw in &mut bandwidth {
        bandwidth::measure(&bw_buf, bw, 5);
        prog.say(&format!(
            "bandwidth: {} thread(s) {:.1} GB/s (sum of {} MiB)",
            bw.threads,
            bw.gbps().unwrap_or(0.0),
            bw_buf.bytes() >> 20
        ));
    }

    // The GPU backends' copy bandwidth, first phase: bytes as the streaming read's buffer, at
    // most 1 GiB (two buffers beside the weights). A device that cannot (out of memory) leaves
    // its rows' % bw empty and says why; the run goes on.
    let copy_bytes = cfg.bandwidth_bytes().min(1 << 30);
    let mut copies = Vec::new();
    for d in devices.iter().filter(|d| !d.is_cpu) {
        if let Err(e) = measure_copy(d, copy_bytes, &mut copies) {
            prog.say(&format!("copy: {} not measured: {e}", d.name));
        }
    }
    for c in &copies {
        prog.say(&format!(
            "copy: {} {:.0} GB/s read + written ({} MiB)",
            c.backend,
            c.summary().map_or(0.0, |s| s.median),
            c.bytes >> 20
        ));
    }

    let budget = Budget { max_seconds: cfg.max_seconds, ..Budget::new(cfg.seconds, cfg.min_reps) };
    let mut pools = Pools::default();
    let mut records = Vec::new();
    for &shape in &shapes {
        for &format in &cfg.formats {
            let (rows, cols) = shape.dims(format, cfg);
            if let Err(e) = format.row_bytes(cols) {
                let note = format!("n/a: {e}");
                na_records(cfg, &devices, shape, format, rows, cols, &note, &mut records, &mut prog);
                continue;
            }
            let set = WeightSet::random(format, rows, cols, max_nt, cfg.seed)?;
            if ops(Op::Matmul) {
                for &t in &cfg.threads {
                    for &nt in &cfg.tokens {
                        let recs = matmul(&set, shape, nt, t, &devices, &mut pools, budget, cfg.gpu_out)?;
                        prog.step(&contenders_line(
                            &format!("matmul {} {format} NT={nt} thr={t}", shape.name()),
                            &recs[0],
                        ));
                        records.extend(recs);
                    }
                }
            }
            if ops(Op::Dequant) {
                let recs = dequant(&set, shape, &devices, budget)?;
                prog.step(&contenders_line(&format!("dequant {} {format}", shape.name()), &recs[0]));
                records.extend(recs);
            }
        }
        if ops(Op::Quantize) {
            let cols = shape.dims(Format::Q8_0, cfg).1;
            for &act in &act_formats {
                let recs = quantize(act, shape, cols, max_nt, cfg.seed, &devices, budget)?;
                prog.step(&contenders_line(&format!("quantize {} {act} x{max_nt}", shape.name()), &recs[0]));
                records.extend(recs);
            }
        }
    }

    // Bandwidth again at the end: the medians cover both phases.
    for bw in &mut bandwidth {
        bandwidth::measure(&bw_buf, bw, 5);
    }
    drop(bw_buf);
    let measured: Vec<String> = copies.iter().map(|c| c.backend.clone()).collect();
    for d in devices.iter().filter(|d| measured.contains(&d.name)) {
        if let Err(e) = measure_copy(d, copy_bytes, &mut copies) {
            prog.say(&format!("copy: {} not measured again: {e}", d.name));
        }
    }
    for r in &mut records {
        let cpu = devices.iter().any(|d| d.name == r.backend && d.is_cpu);
        r.bandwidth_gbps = if cpu {
            bandwidth.iter().find(|b| b.threads == r.threads).and_then(|b| b.gbps())
        } else {
            copies.iter().find(|c| c.covers(&r.backend)).and_then(|c| c.summary()).map(|s| s.median)
        };
    }
    machine.load_end = machine::loadavg();
    Ok(Report {
        machine,
        config: cfg.clone(),
        bandwidth,
        copies,
        records,
        elapsed_s: start.elapsed().as_secs_f64(),
        notes: vec![],
    })
}

#[allow(clippy::too_many_arguments)]
fn na_records(
    cfg: &Config,
    devices: &[Dev],
    shape: Shape,
    format: Format,
    rows: usize,
    cols: usize,
    note: &str,
    records: &mut Vec<Record>,
    prog: &mut Progress<'_>,
) {
    let cell = || Cell::Absent(note.to_string());
    let mut push = |op: Op, tokens: Option<usize>, threads: usize, backend: &str| {
        records.push(Record {
            shape,
            op,
            format,
            backend: backend.to_string(),
            tokens,
            threads,
            rows,
            cols,
            bytes: 0,
            ours: cell(),
            ggml: cell(),
            candle: cell(),
            bandwidth_gbps: None,
            matches_ggml: None,
            note: note.to_string(),
        })
    };
    if cfg.ops.contains(&Op::Matmul) {
        for &t in &cfg.threads {
            for &nt in &cfg.tokens {
                for d in devices.iter().filter(|d| d.threads == t || !d.is_cpu) {
                    push(Op::Matmul, Some(nt), t, &d.name);
                }
                prog.step(&format!("matmul {} {format} NT={nt} thr={t}: {note}", shape.name()));
            }
        }
    }
    if cfg.ops.contains(&Op::Dequant) {
        for d in dequant_devices(devices) {
            push(Op::Dequant, None, 1, &d.name);
        }
        prog.step(&format!("dequant {} {format}: {note}", shape.name()));
    }
}

/// Devices of one thread count per backend: the smallest (dequant and quantize run on the
/// calling thread in qkern's API).
fn dequant_devices(devices: &[Dev]) -> Vec<&Dev> {
    let mut v: Vec<&Dev> = Vec::new();
    for d in devices {
        match v.iter_mut().find(|x| x.name == d.name) {
            Some(x) if d.threads < x.threads => *x = d,
            Some(_) => {}
            None => v.push(d),
        }
    }
    v
}

fn candle_absent(format: Format) -> Option<Absent> {
    if !candle::BUILT {
        Some(Absent::NotBuilt)
    } else if !candle::FORMATS.contains(&format) {
        Some(Absent::NotSupported(format!("candle has no {format}")))
    } else {
        None
    }
}

fn summarize(samples: &[f64]) -> Result<Summary, String> {
    Summary::of(samples).ok_or_else(|| "no samples".to_string())
}

/// Whether two outputs are equal bit for bit (NaN equal to NaN).
fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

fn run_err(what: String) -> impl Fn(String) -> Error {
    move |message| Error::Run { what: what.clone(), message }
}

#[allow(clippy::too_many_arguments)]
fn matmul(
    set: &WeightSet,
    shape: Shape,
    nt: usize,
    threads: usize,
    devices: &[Dev],
    pools: &mut Pools,
    budget: Budget,
    gpu_out: GpuOut,
) -> Result<Vec<Record>, Error> {
    let what = format!("matmul {} {} NT={nt} threads={threads}", shape.name(), set.format);
    let pool = pools.get(threads).map_err(run_err(what.clone()))?;
    let devs: Vec<&Dev> = devices.iter().filter(|d| d.threads == threads || !d.is_cpu).collect();
    let ours_r = devs
        .iter()
        .map(|d| ours::Matmul::new(&d.dev, set, nt, !d.is_cpu && gpu_out.device()))
        .collect::<Result<Vec<_>, _>>()?;
    // The rows measured, in order: (index into devs and ours_r, device output).
    let mut rows: Vec<(usize, bool)> = Vec::new();
    for (i, d) in devs.iter().enumerate() {
        if d.is_cpu || gpu_out.host() {
            rows.push((i, false));
        }
        if !d.is_cpu && gpu_out.device() {
            rows.push((i, true));
        }
    }
    let mut gg = ggml::Matmul::new(set, nt, pool.clone());
    let mut cd = match candle_absent(set.format) {
        Some(a) => Err(a),
        None => candle::Matmul::new(set, nt, pool),
    };
    // GPU measurements start after half a second of load (see `Budget::prewarm`).
    let budget = Budget { prewarm: if devs.iter().any(|d| !d.is_cpu) { 0.5 } else { 0.0 }, ..budget };
    let samples = {
        let mut ops: Vec<measure::Op<'_>> = Vec::new();
        for &(i, dev_out) in &rows {
            let o = &ours_r[i];
            if dev_out {
                ops.push(Box::new(move || o.run_device()));
            } else {
                ops.push(Box::new(move || o.run()));
            }
        }
        if let Ok(g) = &mut gg {
            ops.push(Box::new(move || g.run()));
        }
        if let Ok(c) = &mut cd {
            ops.push(Box::new(move || c.run()));
        }
        measure::interleaved(&mut ops, budget).map_err(run_err(what.clone()))?
    };
    let mut it = samples.into_iter();
    let ours_s: Vec<Vec<f64>> = (0..rows.len()).map(|_| it.next().unwrap_or_default()).collect();
    let ggml_cell = match &gg {
        Ok(_) => Cell::from(summarize(&it.next().unwrap_or_default())),
        Err(a) => Cell::Absent(a.to_string()),
    };
    let candle_cell = match &cd {
        Ok(_) => Cell::from(summarize(&it.next().unwrap_or_default())),
        Err(a) => Cell::Absent(a.to_string()),
    };
    let mut recs = Vec::with_capacity(rows.len());
    for (&(i, dev_out), s) in rows.iter().zip(ours_s) {
        let (d, o) = (devs[i], &ours_r[i]);
        let out = if dev_out { o.out_device().map_err(|e| run_err(what.clone())(e.to_string()))? } else { o.out() };
        recs.push(Record {
            shape,
            op: Op::Matmul,
            format: set.format,
            backend: if dev_out { device_out_name(&d.name) } else { d.name.clone() },
            tokens: Some(nt),
            threads,
            rows: set.rows,
            cols: set.cols,
            bytes: set.bytes(),
            ours: Cell::from(summarize(&s)),
            ggml: ggml_cell.clone(),
            candle: candle_cell.clone(),
            bandwidth_gbps: None,
            matches_ggml: gg.as_ref().ok().map(|g| same_bits(&out, g.out())),
            note: String::new(),
        });
    }
    Ok(recs)
}

fn dequant(set: &WeightSet, shape: Shape, devices: &[Dev], budget: Budget) -> Result<Vec<Record>, Error> {
    let what = format!("dequant {} {}", shape.name(), set.format);
    let devs = dequant_devices(devices);
    let mut ours_r = devs.iter().map(|d| ours::Dequant::new(&d.dev, set)).collect::<Result<Vec<_>, _>>()?;
    let mut gg = ggml::Dequant::new(set);
    let mut cd = match candle_absent(set.format) {
        Some(a) => Err(a),
        None => candle::Dequant::new(set),
    };
    let samples = {
        let mut ops: Vec<measure::Op<'_>> = Vec::new();
        for o in &mut ours_r {
            ops.push(Box::new(move || o.run()));
        }
        if let Ok(g) = &mut gg {
            ops.push(Box::new(move || g.run()));
        }
        if let Ok(c) = &mut cd {
            ops.push(Box::new(move || c.run()));
        }
        measure::interleaved(&mut ops, budget).map_err(run_err(what))?
    };
    Ok(records_of(samples, &devs, gg.is_ok(), gg.err(), cd.is_ok(), cd.err(), |d, ours, ggml, candle| Record {
        shape,
        op: Op::Dequant,
        format: set.format,
        backend: d.name.clone(),
        tokens: None,
        threads: 1,
        rows: set.rows,
        cols: set.cols,
        bytes: set.bytes(),
        ours,
        ggml,
        candle,
        bandwidth_gbps: None,
        matches_ggml: None,
        note: String::new(),
    }))
}

fn quantize(
    act: Format,
    shape: Shape,
    cols: usize,
    tokens: usize,
    seed: u64,
    devices: &[Dev],
    budget: Budget,
) -> Result<Vec<Record>, Error> {
    let what = format!("quantize {} {act}", shape.name());
    let devs = dequant_devices(devices);
    let make = |d: &&Dev, ours, ggml, candle| Record {
        shape,
        op: Op::Quantize,
        format: act,
        backend: d.name.clone(),
        tokens: Some(tokens),
        threads: 1,
        rows: tokens,
        cols,
        bytes: tokens * cols * 4,
        ours,
        ggml,
        candle,
        bandwidth_gbps: None,
        matches_ggml: None,
        note: String::new(),
    };
    if let Err(e) = act.row_bytes(cols) {
        let note = format!("n/a: {e}");
        return Ok(devs
            .iter()
            .map(|d| {
                let mut r = make(d, Cell::Absent(note.clone()), Cell::Absent(note.clone()), Cell::Absent(note.clone()));
                r.note = note.clone();
                r.bytes = 0;
                r
            })
            .collect());
    }
    let mut rng = qkern_parity::inputs::Rng::new(seed ^ 0x9a);
    let x = qkern_parity::inputs::floats(&mut rng, qkern_parity::inputs::Dist::Gaussian, tokens * cols);
    let mut ours_r = devs.iter().map(|d| ours::Quantize::new(&d.dev, act, cols, &x)).collect::<Result<Vec<_>, _>>()?;
    let mut gg = ggml::Quantize::new(act, cols, &x);
    let mut cd = if candle::BUILT { candle::Quantize::new(act, cols, &x) } else { Err(Absent::NotBuilt) };
    let samples = {
        let mut ops: Vec<measure::Op<'_>> = Vec::new();
        for o in &mut ours_r {
            ops.push(Box::new(move || o.run()));
        }
        if let Ok(g) = &mut gg {
            ops.push(Box::new(move || g.run()));
        }
        if let Ok(c) = &mut cd {
            ops.push(Box::new(move || c.run()));
        }
        measure::interleaved(&mut ops, budget).map_err(run_err(what))?
    };
    Ok(records_of(samples, &devs, gg.is_ok(), gg.err(), cd.is_ok(), cd.err(), make))
}

/// Split interleaved samples (ours per device, then ggml, then candle where present) into
/// records.
#[allow(clippy::too_many_arguments)]
fn records_of<'d>(
    samples: Vec<Vec<f64>>,
    devs: &[&'d Dev],
    ggml_ok: bool,
    ggml_err: Option<Absent>,
    candle_ok: bool,
    candle_err: Option<Absent>,
    make: impl Fn(&&'d Dev, Cell, Cell, Cell) -> Record,
) -> Vec<Record> {
    let mut it = samples.into_iter();
    let ours: Vec<Cell> = devs.iter().map(|_| Cell::from(summarize(&it.next().unwrap_or_default()))).collect();
    let absent = |e: Option<Absent>| Cell::Absent(e.map_or_else(String::new, |a| a.to_string()));
    let ggml = if ggml_ok { Cell::from(summarize(&it.next().unwrap_or_default())) } else { absent(ggml_err) };
    let candle = if candle_ok { Cell::from(summarize(&it.next().unwrap_or_default())) } else { absent(candle_err) };
    devs.iter().zip(ours).map(|(d, o)| make(d, o, ggml.clone(), candle.clone())).collect()
}

/// Where a report's files go.
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    pub csv: Option<std::path::PathBuf>,
    pub md: Option<std::path::PathBuf>,
    pub svg: Option<std::path::PathBuf>,
    /// machine.txt (written with `--out-dir`).
    pub machine: Option<std::path::PathBuf>,
}

impl Outputs {
    /// All four files in `dir`: results.csv, table.md, chart.svg, machine.txt.
    pub fn in_dir(dir: &std::path::Path) -> Outputs {
        Outputs {
            csv: Some(dir.join("results.csv")),
            md: Some(dir.join("table.md")),
            svg: Some(dir.join("chart.svg")),
            machine: Some(dir.join("machine.txt")),
        }
    }
}

impl Report {
    /// The plain-text table (what `qkern bench` prints).
    pub fn table(&self) -> String {
        report::table(self)
    }
    /// One CSV row per measurement and backend.
    pub fn csv(&self) -> String {
        report::csv(self)
    }
    /// The Markdown report (`chart` is the relative path of the SVG to link, if any).
    pub fn markdown(&self, chart: Option<&str>) -> String {
        report::markdown(self, chart)
    }
    /// The machine, configuration and bandwidth as `key: value` lines.
    pub fn machine_txt(&self) -> String {
        report::machine_txt(self)
    }
    /// An SVG chart of GB/s per format for each token count, ours beside ggml (and candle).
    pub fn svg(&self) -> Result<String, Error> {
        chart::svg(self)
    }

    /// Write the files named in `out` (creating parent directories).
    pub fn write(&self, out: &Outputs) -> Result<Vec<std::path::PathBuf>, Error> {
        let mut written = Vec::new();
        let mut put = |path: &std::path::Path, text: &str| -> Result<(), Error> {
            let io = |err| Error::Io { path: path.display().to_string(), err };
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(io)?;
            }
            std::fs::write(path, text).map_err(io)?;
            written.push(path.to_path_buf());
            Ok(())
        };
        if let Some(p) = &out.csv {
            put(p, &self.csv())?;
        }
        if let Some(p) = &out.svg {
            put(p, &self.svg()?)?;
        }
        if let Some(p) = &out.md {
            // Link the chart relative to the Markdown file when both are written side by side.
            let link = out.svg.as_ref().and_then(|s| {
                (s.parent() == p.parent()).then(|| s.file_name().map(|n| n.to_string_lossy().into_owned())).flatten()
            });
            put(p, &self.markdown(link.as_deref()))?;
        }
        if let Some(p) = &out.machine {
            put(p, &self.machine_txt())?;
        }
        Ok(written)
    }
}

/// Parse a comma-separated list (`1,2,4` or `q8_0,q4_K`); `all` for formats means every
/// weight format.
pub fn parse_list<T: std::str::FromStr>(s: &str) -> Result<Vec<T>, Error>
where
    T::Err: std::fmt::Display,
{
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<T>().map_err(|e| Error::Config(format!("{x:?}: {e}"))))
        .collect()
}

/// `--formats`: a list of weight format names, or `all`.
pub fn parse_formats(s: &str) -> Result<Vec<Format>, Error> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(Format::WEIGHTS.to_vec());
    }
    parse_list(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device's copy bandwidth covers its own rows (host and device out), not another device's.
    #[test]
    fn device_copy_covers_its_rows() {
        let c = DeviceCopy { backend: "cuda:0".into(), bytes: 1 << 20, samples: vec![3000.0, 3100.0, 2900.0] };
        assert!(c.covers("cuda:0"));
        assert!(c.covers(&device_out_name("cuda:0")));
        assert!(!c.covers("cuda:1"));
        assert!(!c.covers("cuda:01"));
        assert!(!c.covers("wgpu (NVIDIA H100)"));
        assert_eq!(c.summary().map(|s| s.median), Some(3000.0));
    }

    #[test]
    fn gpu_out_parses_and_names_its_rows() {
        assert_eq!("host".parse::<GpuOut>().unwrap(), GpuOut::Host);
        assert_eq!(" Device".parse::<GpuOut>().unwrap(), GpuOut::Device);
        assert_eq!("both".parse::<GpuOut>().unwrap(), GpuOut::Both);
        assert!(matches!("mapped".parse::<GpuOut>(), Err(Error::Config(_))));
        assert!(GpuOut::Both.host() && GpuOut::Both.device());
        assert!(GpuOut::Host.host() && !GpuOut::Host.device());
        assert!(!GpuOut::Device.host() && GpuOut::Device.device());
        assert_eq!(device_out_name("cuda:0"), "cuda:0 (device out)");
        assert_eq!(Config::default().gpu_out, GpuOut::Both);
    }
}
