//! `qkern` is the facade an inference engine embeds: device selection (CPU paths with
//! runtime feature detection; CUDA and wgpu behind cargo features), and one API for
//! resident weights, quantized activations, `matmul` and `dequantize`.
//!
//! Every result is bit-identical to ggml 0.26.0's x86 AVX2 kernels (`vec_dot` per weight
//! row and token), on every backend, path, thread count and token count.
//!
//! ```
//! use qkern::{Device, Format, WeightsRef};
//! # fn main() -> Result<(), qkern::Error> {
//! let dev = Device::cpu()?;
//! let (rows, cols) = (4, 64);
//! let bytes = vec![0u8; Format::Q8_0.matrix_bytes(rows, cols)?];
//! // Weights resident on the device (borrowed on the CPU when aligned).
//! let w = dev.upload(WeightsRef::new(Format::Q8_0, rows, cols, &bytes)?)?;
//! // A reusable activation buffer for up to 8 tokens, quantized on the device.
//! let mut acts = dev.activations_for(&w, 8)?;
//! let x = vec![0.5f32; 2 * cols]; // 2 tokens, token-major
//! dev.quantize(&x, &mut acts)?;
//! let mut out = vec![0f32; 2 * rows]; // [tokens][rows]
//! dev.matmul(&w, &acts, &mut out)?;
//! # Ok(()) }
//! ```
//!
//! On a GPU, `matmul` waits for its result and copies it to the caller's slice;
//! [`Device::matmul_into`] leaves it in an [`Output`] on the device instead (queued, no wait),
//! for engines that chain device work, and [`Device::read_output`] brings it back.
//!
//! The hot path (`quantize`, `matmul`) allocates nothing: buffers are created once
//! (`upload`, `activations`) and reused, which is how an MoE engine runs hundreds of small
//! expert matrices with only the tokens routed to each.

use std::sync::atomic::{AtomicU64, Ordering};

pub use qkern_cpu::{CpuPath, Features as CpuFeatures};
/// ggml's scalar float conversions (fp16, bf16, nvfp4's ue4m3 and e2m1), bit for bit as its
/// x86 build: for callers that write or read block scales and float rows themselves.
pub use qkern_formats::fp;
pub use qkern_formats::{Format, FormatError, ShapeError};

mod buf;
mod spec;

pub use buf::AlignedBuf;
pub use spec::{BackendSpec, available_backends};

/// The CUDA backend crate, for engines that use its device-side API (device outputs,
/// device inputs, grouped launches) through [`Device::cuda`], [`Weights::cuda`] and
/// [`Activations::cuda`].
#[cfg(feature = "cuda")]
pub use qkern_cuda;

/// Everything that can go wrong in qkern's public API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error(transparent)]
    Shape(#[from] ShapeError),
    #[error("unknown backend {0:?} (expected cpu, cpu-scalar, cpu-avx2, cpu-avx512, cuda, cuda:N, wgpu or wgpu:N)")]
    UnknownBackend(String),
    #[error("qkern was not built with {0} (enable the `{0}` cargo feature)")]
    NotBuilt(&'static str),
    #[error("backend {backend} is not available: {reason}")]
    Unavailable { backend: String, reason: String },
    #[error("CPU backend: {0}")]
    Cpu(qkern_cpu::CpuError),
    #[error("{what} belongs to another device ({owner}), not {this}")]
    WrongDevice { what: &'static str, owner: String, this: String },
    #[error("{backend}: {message}")]
    Backend { backend: &'static str, message: String },
    #[error("{got} tokens exceed the activation buffer's capacity of {capacity}")]
    Capacity { capacity: usize, got: usize },
    #[error("the activation buffer holds no tokens yet (call quantize or import first)")]
    NoTokens,
    #[error("weights have {weights} columns but activations have {acts}")]
    Cols { weights: usize, acts: usize },
    #[error("activation buffers of {first} and {other} columns in one grouped quantize")]
    GroupCols { first: usize, other: usize },
}

impl From<qkern_cpu::CpuError> for Error {
    fn from(e: qkern_cpu::CpuError) -> Self {
        match e {
            qkern_cpu::CpuError::Shape(s) => Error::Shape(s),
            e => Error::Cpu(e),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Validated host weights: `rows` x `cols` of `format` as raw ggml blocks, row-major.
#[derive(Clone, Copy, Debug)]
pub struct WeightsRef<'a> {
    format: Format,
    rows: usize,
    cols: usize,
    bytes: &'a [u8],
}

impl<'a> WeightsRef<'a> {
    /// Checks that `format` is a weight format, `cols` a multiple of its block, and that
    /// `bytes` holds exactly `rows` rows.
    pub fn new(format: Format, rows: usize, cols: usize, bytes: &'a [u8]) -> Result<WeightsRef<'a>> {
        if !format.is_weight() {
            return Err(ShapeError::Role { format, role: "quantized weight" }.into());
        }
        let n = format.matrix_bytes(rows, cols)?;
        if n != bytes.len() {
            return Err(ShapeError::ByteLength { what: "weights", expected: n, got: bytes.len() }.into());
        }
        Ok(WeightsRef { format, rows, cols, bytes })
    }
    pub fn format(&self) -> Format {
        self.format
    }
    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

enum HostBytes<'a> {
    Borrowed(&'a [u8]),
    Owned(AlignedBuf),
}

impl HostBytes<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            HostBytes::Borrowed(b) => b,
            HostBytes::Owned(b) => b.as_slice(),
        }
    }
}

enum WeightStorage<'a> {
    Host(HostBytes<'a>),
    #[cfg(feature = "cuda")]
    Cuda(qkern_cuda::CudaWeights),
    #[cfg(feature = "wgpu")]
    Wgpu(qkern_wgpu::WgpuWeights),
}

/// Weights resident on a device.
pub struct Weights<'a> {
    format: Format,
    rows: usize,
    cols: usize,
    device: u64,
    storage: WeightStorage<'a>,
}

impl std::fmt::Debug for Weights<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Weights({} {}x{}, device {})", self.format, self.rows, self.cols, self.device)
    }
}

impl Weights<'_> {
    pub fn format(&self) -> Format {
        self.format
    }
    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// The activation format these weights are dotted with (ggml's `vec_dot_type`).
    pub fn act_format(&self) -> Format {
        self.format.vec_dot_type().unwrap_or(Format::Q8_0)
    }
    /// Bytes of weight data.
    pub fn byte_len(&self) -> usize {
        self.rows * self.format.row_bytes(self.cols).unwrap_or(0)
    }

    /// The CUDA buffer behind these weights (CUDA devices only).
    #[cfg(feature = "cuda")]
    pub fn cuda(&self) -> Option<&qkern_cuda::CudaWeights> {
        match &self.storage {
            WeightStorage::Cuda(w) => Some(w),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

enum ActStorage {
    Host(AlignedBuf),
    #[cfg(feature = "cuda")]
    Cuda(qkern_cuda::CudaActs),
    #[cfg(feature = "wgpu")]
    Wgpu(qkern_wgpu::WgpuActs),
}

/// A reusable buffer of quantized activations: up to `capacity` tokens of `cols` elements
/// in an activation format (q8_0, q8_1, q8_K), resident on a device.
pub struct Activations {
    format: Format,
    cols: usize,
    capacity: usize,
    tokens: usize,
    device: u64,
    storage: ActStorage,
}

impl std::fmt::Debug for Activations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Activations({} x{} of {}, cap {})", self.format, self.tokens, self.cols, self.capacity)
    }
}

impl Activations {
    pub fn format(&self) -> Format {
        self.format
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Tokens currently held (set by the last `quantize` or `import`).
    pub fn tokens(&self) -> usize {
        self.tokens
    }
    fn row_bytes(&self) -> usize {
        self.format.row_bytes(self.cols).unwrap_or(0)
    }
    /// The quantized bytes of the tokens held (host backends only; see
    /// [`Device::read_activations`] for any backend).
    pub fn host_bytes(&self) -> Option<&[u8]> {
        match &self.storage {
            ActStorage::Host(b) => Some(&b.as_slice()[..self.tokens * self.row_bytes()]),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The CUDA buffer behind these activations (CUDA devices only).
    #[cfg(feature = "cuda")]
    pub fn cuda(&self) -> Option<&qkern_cuda::CudaActs> {
        match &self.storage {
            ActStorage::Cuda(a) => Some(a),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

enum OutStorage {
    Host(Vec<f32>),
    #[cfg(feature = "cuda")]
    Cuda(qkern_cuda::CudaF32),
    #[cfg(feature = "wgpu")]
    Wgpu(qkern_wgpu::WgpuOut),
}

/// A matmul result buffer that stays where the device computes (GPU memory; host memory on
/// the CPU), made by [`Device::output`]: [`Device::matmul_into`] writes it without waiting or
/// copying back, [`Device::read_output`] brings it to the host. For engines that keep results
/// on the device between calls, and for timing the kernels without the copy back.
pub struct Output {
    len: usize,
    device: u64,
    storage: OutStorage,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Output({} f32, device {})", self.len, self.device)
    }
}

impl Output {
    /// Floats the buffer holds.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The CUDA buffer behind this output (CUDA devices only), e.g. for
    /// `CudaBackend::quantize_device`.
    #[cfg(feature = "cuda")]
    pub fn cuda(&self) -> Option<&qkern_cuda::CudaF32> {
        match &self.storage {
            OutStorage::Cuda(o) => Some(o),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

enum Inner {
    Cpu(qkern_cpu::CpuBackend),
    #[cfg(feature = "cuda")]
    Cuda(qkern_cuda::CudaBackend),
    #[cfg(feature = "wgpu")]
    Wgpu(qkern_wgpu::WgpuBackend),
}

/// Calls `$e` on a GPU backend value `$b` bound from `$inner`, mapping its error; used for
/// every operation so that each GPU backend crate offers the same small interface:
/// `new(index)`, `name()`, `upload_weights`, `alloc_acts`, `quantize`, `import`,
/// `read_acts`, `matmul`, `dequantize` (see `cuda/` and `wgpu/`).
#[allow(unused_macros)]
macro_rules! gpu_err {
    ($name:literal) => {
        |e| Error::Backend { backend: $name, message: e.to_string() }
    };
}

/// A compute device: a CPU path with its thread pool, or (with features) a GPU.
pub struct Device {
    id: u64,
    spec: BackendSpec,
    inner: Inner,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({})", self.name())
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Options for opening a device.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceOptions {
    /// CPU worker threads (`None`: the machine's cores).
    pub threads: Option<usize>,
}

/// The CPU arm of [`Device::matmul`] and [`Device::matmul_into`]: the used part of the activation
/// buffer dotted with the host weights into `out`.
fn cpu_matmul(
    c: &qkern_cpu::CpuBackend,
    w: &Weights<'_>,
    wb: &HostBytes<'_>,
    acts: &Activations,
    ab: &AlignedBuf,
    out: &mut [f32],
) -> Result<()> {
    let a = &ab.as_slice()[..acts.tokens * acts.row_bytes()];
    Ok(c.matmul(w.format, w.rows, w.cols, wb.as_slice(), a, out)?)
}

impl Device {
    /// The default CPU device: `QKERN_CPU` if set, else the fastest path; all cores.
    pub fn cpu() -> Result<Device> {
        Device::open(BackendSpec::Cpu(None), DeviceOptions::default())
    }

    /// A CPU device on a forced path with `threads` workers.
    pub fn cpu_with(path: CpuPath, threads: Option<usize>) -> Result<Device> {
        Device::open(BackendSpec::Cpu(Some(path)), DeviceOptions { threads })
    }

    /// The best backend present: CUDA device 0 where built and available, else the CPU.
    /// wgpu is never picked implicitly (its adapter may be a software rasteriser such as
    /// lavapipe): ask for it by name.
    pub fn best() -> Result<Device> {
        #[cfg(feature = "cuda")]
        if let Ok(d) = Device::open(BackendSpec::Cuda(0), DeviceOptions::default()) {
            return Ok(d);
        }
        Device::open(BackendSpec::Cpu(None), DeviceOptions::default())
    }

    /// Open a device by name (`cpu`, `cpu-scalar`, `cpu-avx2`, `cpu-avx512`, `cuda`,
    /// `cuda:N`, `wgpu`, `wgpu:N`).
    pub fn parse(name: &str, opts: DeviceOptions) -> Result<Device> {
        Device::open(name.parse()?, opts)
    }

    /// Open a device.
    pub fn open(spec: BackendSpec, opts: DeviceOptions) -> Result<Device> {
        let inner = match spec {
            BackendSpec::Cpu(path) => {
                let path = match path {
                    Some(p) => p,
                    None => qkern_cpu::default_path()?,
                };
                Inner::Cpu(qkern_cpu::CpuBackend::new(path, opts.threads)?)
            }
            #[cfg(feature = "cuda")]
            BackendSpec::Cuda(n) => Inner::Cuda(
                qkern_cuda::CudaBackend::new(n)
                    .map_err(|e| Error::Unavailable { backend: spec.to_string(), reason: e.to_string() })?,
            ),
            #[cfg(not(feature = "cuda"))]
            BackendSpec::Cuda(_) => return Err(Error::NotBuilt("cuda")),
            #[cfg(feature = "wgpu")]
            BackendSpec::Wgpu(n) => Inner::Wgpu(
                qkern_wgpu::WgpuBackend::new(n)
                    .map_err(|e| Error::Unavailable { backend: spec.to_string(), reason: e.to_string() })?,
            ),
            #[cfg(not(feature = "wgpu"))]
            BackendSpec::Wgpu(_) => return Err(Error::NotBuilt("wgpu")),
        };
        let spec = match (&spec, &inner) {
            (BackendSpec::Cpu(_), Inner::Cpu(c)) => BackendSpec::Cpu(Some(c.path())),
            _ => spec,
        };
        Ok(Device { id: NEXT_ID.fetch_add(1, Ordering::Relaxed), spec, inner })
    }

    /// The backend this device runs, with the CPU path resolved (`cpu-avx2`, `cuda:0`, ...).
    pub fn spec(&self) -> BackendSpec {
        self.spec
    }

    /// A human-readable name: backend, path and threads or adapter.
    pub fn name(&self) -> String {
        match &self.inner {
            Inner::Cpu(c) => format!("{} ({} threads)", self.spec, c.threads()),
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => format!("{} ({})", self.spec, c.name()),
            #[cfg(feature = "wgpu")]
            Inner::Wgpu(c) => format!("{} ({})", self.spec, c.name()),
        }
    }

    fn check_owner(&self, what: &'static str, owner: u64) -> Result<()> {
        if owner != self.id {
            return Err(Error::WrongDevice {
                what,
                owner: format!("device #{owner}"),
                this: format!("device #{}", self.id),
            });
        }
        Ok(())
    }

    /// Make weights resident on this device. On the CPU, aligned bytes are borrowed (no
    /// copy); unaligned ones are copied once into an aligned buffer.
    pub fn upload<'a>(&self, w: WeightsRef<'a>) -> Result<Weights<'a>> {
        match &self.inner {
            Inner::Cpu(_) if w.bytes.as_ptr().align_offset(4) == 0 => Ok(Weights {
                format: w.format,
                rows: w.rows,
                cols: w.cols,
                device: self.id,
                storage: WeightStorage::Host(HostBytes::Borrowed(w.bytes)),
            }),
            // unaligned host bytes, or a GPU: a copy either way
            _ => self.upload_owned(w),
        }
    }

    /// Like [`Device::upload`] but always owning a copy (`Weights<'static>`).
    pub fn upload_owned(&self, w: WeightsRef<'_>) -> Result<Weights<'static>> {
        let storage = match &self.inner {
            Inner::Cpu(_) => WeightStorage::Host(HostBytes::Owned(AlignedBuf::copy_from(w.bytes))),
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => {
                WeightStorage::Cuda(c.upload_weights(w.format, w.rows, w.cols, w.bytes).map_err(gpu_err!("cuda"))?)
            }
            #[cfg(feature = "wgpu")]
            Inner::Wgpu(c) => {
                WeightStorage::Wgpu(c.upload_weights(w.format, w.rows, w.cols, w.bytes).map_err(gpu_err!("wgpu"))?)
            }
        };
        Ok(Weights { format: w.format, rows: w.rows, cols: w.cols, device: self.id, storage })
    }

    /// A reusable activation buffer of `format` (q8_0, q8_1 or q8_K) for up to `capacity`
    /// tokens of `cols` elements.
    pub fn activations(&self, format: Format, cols: usize, capacity: usize) -> Result<Activations> {
        if !format.is_activation() {
            return Err(ShapeError::Role { format, role: "activation" }.into());
        }
        if capacity == 0 {
            return Err(ShapeError::ZeroTokens.into());
        }
        let bytes = format.row_bytes(cols)?.checked_mul(capacity).ok_or(ShapeError::Overflow)?;
        let storage = match &self.inner {
            Inner::Cpu(_) => ActStorage::Host(AlignedBuf::zeroed(bytes)),
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => ActStorage::Cuda(c.alloc_acts(format, cols, capacity).map_err(gpu_err!("cuda"))?),
            #[cfg(feature = "wgpu")]
            Inner::Wgpu(c) => ActStorage::Wgpu(c.alloc_acts(format, cols, capacity).map_err(gpu_err!("wgpu"))?),
        };
        Ok(Activations { format, cols, capacity, tokens: 0, device: self.id, storage })
    }

    /// An activation buffer in the format and width that `w` pairs with.
    pub fn activations_for(&self, w: &Weights<'_>, capacity: usize) -> Result<Activations> {
        self.activations(w.act_format(), w.cols, capacity)
    }

    /// Quantize `x` (`tokens x cols` f32, token-major) into `acts`, exactly as ggml-cpu's x86
    /// `from_float`. Sets `acts.tokens()`.
    pub fn quantize(&self, x: &[f32], acts: &mut Activations) -> Result<()> {
        self.check_owner("activation buffer", acts.device)?;
        if x.is_empty() || !x.len().is_multiple_of(acts.cols) {
            return Err(
                ShapeError::Length { what: "activations ([tokens][cols])", expected: acts.cols, got: x.len() }.into()
            );
        }
        let nt = x.len() / acts.cols;
        if nt > acts.capacity {
            return Err(Error::Capacity { capacity: acts.capacity, got: nt });
        }
        let rb = acts.row_bytes();
        match (&self.inner, &mut acts.storage) {
            (Inner::Cpu(c), ActStorage::Host(b)) => {
                c.quantize(acts.format, acts.cols, x, &mut b.as_mut_slice()[..nt * rb])?;
            }
            #[cfg(feature = "cuda")]
            (Inner::Cuda(c), ActStorage::Cuda(a)) => c.quantize(x, a).map_err(gpu_err!("cuda"))?,
            #[cfg(feature = "wgpu")]
            (Inner::Wgpu(c), ActStorage::Wgpu(a)) => c.quantize(x, a).map_err(gpu_err!("wgpu"))?,
            #[allow(unreachable_patterns)]
            _ => return Err(self.mixed()),
        }
        acts.tokens = nt;
        Ok(())
    }

    /// Quantize into several activation buffers at once (e.g. the inputs of a layer's routed
    /// experts): `x` holds `tokens[i]` rows (`[tokens][cols]`, every buffer `cols` wide) for
    /// each `acts[i]` in turn, so `x.len()` is the sum of `tokens` times `cols`. Sets each
    /// buffer's `tokens()`; a buffer with 0 tokens is left as it is. Formats may differ. The
    /// bits are those of one [`Device::quantize`] a buffer. On CUDA the inputs go to the device
    /// in one copy and each run of up to 16 buffers of one format is quantized in one launch;
    /// on wgpu all go in one submission; on the CPU one after the other.
    pub fn quantize_grouped(&self, x: &[f32], tokens: &[usize], acts: &mut [Activations]) -> Result<()> {
        if tokens.len() != acts.len() {
            return Err(ShapeError::Length {
                what: "grouped quantize token counts",
                expected: acts.len(),
                got: tokens.len(),
            }
            .into());
        }
        let Some(cols) = acts.first().map(|a| a.cols) else {
            return if x.is_empty() {
                Ok(())
            } else {
                Err(ShapeError::Length { what: "grouped quantize input", expected: 0, got: x.len() }.into())
            };
        };
        let mut elems = 0usize;
        for (a, &nt) in acts.iter().zip(tokens) {
            self.check_owner("activation buffer", a.device)?;
            if a.cols != cols {
                return Err(Error::GroupCols { first: cols, other: a.cols });
            }
            if nt > a.capacity {
                return Err(Error::Capacity { capacity: a.capacity, got: nt });
            }
            elems = nt.checked_mul(cols).and_then(|n| elems.checked_add(n)).ok_or(ShapeError::Overflow)?;
        }
        if x.len() != elems {
            return Err(ShapeError::Length { what: "grouped quantize input", expected: elems, got: x.len() }.into());
        }
        match &self.inner {
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => {
                let mut v = self.backend_acts(acts, tokens, |a| match a {
                    ActStorage::Cuda(ab) => Some(ab),
                    #[allow(unreachable_patterns)]
                    _ => None,
                })?;
                c.quantize_grouped(x, &mut v).map_err(gpu_err!("cuda"))?;
            }
            #[cfg(feature = "wgpu")]
            Inner::Wgpu(c) => {
                let mut v = self.backend_acts(acts, tokens, |a| match a {
                    ActStorage::Wgpu(ab) => Some(ab),
                    #[allow(unreachable_patterns)]
                    _ => None,
                })?;
                c.quantize_grouped(x, &mut v).map_err(gpu_err!("wgpu"))?;
            }
            Inner::Cpu(_) => {
                let mut off = 0;
                for (a, &nt) in acts.iter_mut().zip(tokens).filter(|j| *j.1 > 0) {
                    self.quantize(&x[off..off + nt * cols], a)?;
                    off += nt * cols;
                }
            }
        }
        for (a, &nt) in acts.iter_mut().zip(tokens).filter(|j| *j.1 > 0) {
            a.tokens = nt;
        }
        Ok(())
    }

    /// Import activations already quantized elsewhere (`tokens` rows of raw blocks). Bytes of
    /// -128 are rejected: ggml's quantizers never emit them, and ggml's AVX2 sign trick gives
    /// them an artefactual sign (see `qkern_formats::reference`).
    pub fn import_activations(&self, bytes: &[u8], acts: &mut Activations) -> Result<()> {
        self.check_owner("activation buffer", acts.device)?;
        let rb = acts.row_bytes();
        if bytes.is_empty() || !bytes.len().is_multiple_of(rb) {
            return Err(ShapeError::ByteLength { what: "quantized activations", expected: rb, got: bytes.len() }.into());
        }
        let nt = bytes.len() / rb;
        if nt > acts.capacity {
            return Err(Error::Capacity { capacity: acts.capacity, got: nt });
        }
        qkern_cpu::check_activations(acts.format, acts.cols, bytes)?;
        match (&self.inner, &mut acts.storage) {
            (Inner::Cpu(_), ActStorage::Host(b)) => b.as_mut_slice()[..bytes.len()].copy_from_slice(bytes),
            #[cfg(feature = "cuda")]
            (Inner::Cuda(c), ActStorage::Cuda(a)) => c.import(bytes, a).map_err(gpu_err!("cuda"))?,
            #[cfg(feature = "wgpu")]
            (Inner::Wgpu(c), ActStorage::Wgpu(a)) => c.import(bytes, a).map_err(gpu_err!("wgpu"))?,
            #[allow(unreachable_patterns)]
            _ => return Err(self.mixed()),
        }
        acts.tokens = nt;
        Ok(())
    }

    /// What a matmul of `w` with `acts` needs: both on this device, tokens held, the pairing
    /// and widths agreeing. Returns the output's length, `tokens * rows`.
    fn check_matmul(&self, w: &Weights<'_>, acts: &Activations) -> Result<usize> {
        self.check_owner("weights", w.device)?;
        self.check_owner("activation buffer", acts.device)?;
        if acts.tokens == 0 {
            return Err(Error::NoTokens);
        }
        if acts.format != w.act_format() {
            return Err(ShapeError::Pairing { weights: w.format, expected: w.act_format(), got: acts.format }.into());
        }
        if acts.cols != w.cols {
            return Err(Error::Cols { weights: w.cols, acts: acts.cols });
        }
        Ok(acts.tokens.checked_mul(w.rows).ok_or(ShapeError::Overflow)?)
    }

    /// `out[t * rows + r] = vec_dot(weight row r, token t)` for every token held by `acts`;
    /// `out.len()` must be `acts.tokens() * w.rows()`.
    pub fn matmul(&self, w: &Weights<'_>, acts: &Activations, out: &mut [f32]) -> Result<()> {
        let want = self.check_matmul(w, acts)?;
        if out.len() != want {
            return Err(ShapeError::Length { what: "output ([tokens][rows])", expected: want, got: out.len() }.into());
        }
        match (&self.inner, &w.storage, &acts.storage) {
            (Inner::Cpu(c), WeightStorage::Host(wb), ActStorage::Host(ab)) => cpu_matmul(c, w, wb, acts, ab, out)?,
            #[cfg(feature = "cuda")]
            (Inner::Cuda(c), WeightStorage::Cuda(wb), ActStorage::Cuda(a)) => {
                c.matmul(wb, a, acts.tokens, out).map_err(gpu_err!("cuda"))?
            }
            #[cfg(feature = "wgpu")]
            (Inner::Wgpu(c), WeightStorage::Wgpu(wb), ActStorage::Wgpu(a)) => {
                c.matmul(wb, a, acts.tokens, out).map_err(gpu_err!("wgpu"))?
            }
            #[allow(unreachable_patterns)]
            _ => return Err(self.mixed()),
        }
        Ok(())
    }

    /// A result buffer of `len` f32 on this device (zeroed), for [`Device::matmul_into`].
    pub fn output(&self, len: usize) -> Result<Output> {
        let storage = match &self.inner {
            Inner::Cpu(_) => OutStorage::Host(vec![0f32; len]),
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => OutStorage::Cuda(c.alloc_f32(len).map_err(gpu_err!("cuda"))?),
            #[cfg(feature = "wgpu")]
            Inner::Wgpu(c) => OutStorage::Wgpu(c.alloc_out(len).map_err(gpu_err!("wgpu"))?),
        };
        Ok(Output { len, device: self.id, storage })
    }

    /// As [`Device::matmul`], into `out[..tokens * rows]`, left on the device: on a GPU the
    /// call returns once the work is queued (no wait, no copy back); on the CPU it computes.
    /// [`Device::read_output`] and [`Device::synchronize`] wait for it. `out.len()` must be at
    /// least `acts.tokens() * w.rows()`; the same bits as `matmul`.
    pub fn matmul_into(&self, w: &Weights<'_>, acts: &Activations, out: &mut Output) -> Result<()> {
        let want = self.check_matmul(w, acts)?;
        self.check_owner("output buffer", out.device)?;
        if out.len < want {
            return Err(
                ShapeError::Length { what: "output buffer ([tokens][rows])", expected: want, got: out.len }.into()
            );
        }
        match (&self.inner, &w.storage, &acts.storage, &mut out.storage) {
            (Inner::Cpu(c), WeightStorage::Host(wb), ActStorage::Host(ab), OutStorage::Host(o)) => {
                cpu_matmul(c, w, wb, acts, ab, &mut o[..want])?
            }
            #[cfg(feature = "cuda")]
            (Inner::Cuda(c), WeightStorage::Cuda(wb), ActStorage::Cuda(a), OutStorage::Cuda(o)) => {
                c.matmul_device(wb, a, acts.tokens, o).map_err(gpu_err!("cuda"))?
            }
            #[cfg(feature = "wgpu")]
            (Inner::Wgpu(c), WeightStorage::Wgpu(wb), ActStorage::Wgpu(a), OutStorage::Wgpu(o)) => {
                c.matmul_to(wb, a, acts.tokens, o).map_err(gpu_err!("wgpu"))?
            }
            #[allow(unreachable_patterns)]
            _ => return Err(self.mixed()),
        }
        Ok(())
    }

    /// Wait for the queued work, then copy the first `dst.len()` floats of `out` to `dst`.
    pub fn read_output(&self, out: &Output, dst: &mut [f32]) -> Result<()> {
        self.check_owner("output buffer", out.device)?;
        if dst.len() > out.len {
            return Err(ShapeError::Length { what: "output read-back", expected: out.len, got: dst.len() }.into());
        }
        match (&self.inner, &out.storage) {
            (Inner::Cpu(_), OutStorage::Host(o)) => dst.copy_from_slice(&o[..dst.len()]),
            #[cfg(feature = "cuda")]
            (Inner::Cuda(c), OutStorage::Cuda(o)) => c.download_f32(o, dst).map_err(gpu_err!("cuda"))?,
            #[cfg(feature = "wgpu")]
            (Inner::Wgpu(c), OutStorage::Wgpu(o)) => c.read_out(o, dst).map_err(gpu_err!("wgpu"))?,
            #[allow(unreachable_patterns)]
            _ => return Err(self.mixed()),
        }
        Ok(())
    }

    /// The device's copy bandwidth in GB/s, counted as bytes read plus bytes written: a
    /// device-to-device copy of `bytes` on CUDA (the reference of issue #5's goals). `None` on the
    /// CPU (`qkern bench` measures its streaming read instead) and on wgpu, whose buffer copy is
    /// no bandwidth reference (834-841 GB/s on an H100 whose kernels read 2.9 TB/s;
    /// benches/results/2026-12-06-session30).
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    pub fn copy_gbps(&self, bytes: usize) -> Result<Option<f64>> {
        Ok(match &self.inner {
            Inner::Cpu(_) => None,
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => Some(c.copy_gbps(bytes, 10).map_err(gpu_err!("cuda"))?),
            #[cfg(feature = "wgpu")]
            Inner::Wgpu(_) => None,
        })
    }

    /// Wait until all work queued on this device has finished (the CPU never queues).
    pub fn synchronize(&self) -> Result<()> {
        match &self.inner {
            Inner::Cpu(_) => {}
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => c.synchronize().map_err(gpu_err!("cuda"))?,
            #[cfg(feature = "wgpu")]
            Inner::Wgpu(c) => c.synchronize().map_err(gpu_err!("wgpu"))?,
        }
        Ok(())
    }

    /// The backend's buffers and token count of each grouped job (`pick`: `None` where a
    /// buffer is another backend's, a mixed-device error).
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    fn backend_jobs<'j, W, A>(
        &self,
        jobs: &'j [(&Weights<'_>, &Activations)],
        pick: impl Fn(&'j WeightStorage<'_>, &'j ActStorage) -> Option<(&'j W, &'j A)>,
    ) -> Result<Vec<(&'j W, &'j A, usize)>> {
        jobs.iter()
            .map(|(w, a)| pick(&w.storage, &a.storage).map(|(wb, ab)| (wb, ab, a.tokens)).ok_or_else(|| self.mixed()))
            .collect()
    }

    /// The backend's buffer of each activation buffer, with its token count (`pick`: `None`
    /// where a buffer is another backend's, a mixed-device error).
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    fn backend_acts<'j, A>(
        &self,
        acts: &'j mut [Activations],
        tokens: &[usize],
        pick: impl Fn(&'j mut ActStorage) -> Option<&'j mut A>,
    ) -> Result<Vec<(&'j mut A, usize)>> {
        acts.iter_mut()
            .zip(tokens)
            .map(|(a, &nt)| pick(&mut a.storage).map(|ab| (ab, nt)).ok_or_else(|| self.mixed()))
            .collect()
    }

    /// Several matmuls in one call, e.g. a layer's routed experts each with its own tokens:
    /// job i's `[tokens_i][rows_i]` result is written to `out` right after job i-1's
    /// (`out.len()` is the sum of `tokens_i * rows_i`). On CUDA, jobs of one format and width
    /// run in one launch per 16 jobs of up to 8 tokens; on wgpu all jobs go in one submission
    /// with one wait (per 256 dispatches); on the CPU one after the other.
    pub fn matmul_grouped(&self, jobs: &[(&Weights<'_>, &Activations)], out: &mut [f32]) -> Result<()> {
        let mut total = 0usize;
        for (w, acts) in jobs {
            total = total.checked_add(self.check_matmul(w, acts)?).ok_or(ShapeError::Overflow)?;
        }
        if out.len() != total {
            return Err(ShapeError::Length { what: "grouped output", expected: total, got: out.len() }.into());
        }
        #[cfg(feature = "cuda")]
        if let Inner::Cuda(c) = &self.inner {
            let uniform = jobs.windows(2).all(|p| p[0].0.format == p[1].0.format && p[0].0.cols == p[1].0.cols);
            if uniform && !jobs.is_empty() {
                let v = self.backend_jobs(jobs, |w, a| match (w, a) {
                    (WeightStorage::Cuda(wb), ActStorage::Cuda(ab)) => Some((wb, ab)),
                    #[allow(unreachable_patterns)]
                    _ => None,
                })?;
                return c.matmul_grouped_host(&v, out).map_err(gpu_err!("cuda"));
            }
        }
        #[cfg(feature = "wgpu")]
        if let Inner::Wgpu(c) = &self.inner {
            let v = self.backend_jobs(jobs, |w, a| match (w, a) {
                (WeightStorage::Wgpu(wb), ActStorage::Wgpu(ab)) => Some((wb, ab)),
                #[allow(unreachable_patterns)]
                _ => None,
            })?;
            return c.matmul_grouped(&v, out).map_err(gpu_err!("wgpu"));
        }
        let mut off = 0;
        for (w, acts) in jobs {
            let n = acts.tokens * w.rows;
            self.matmul(w, acts, &mut out[off..off + n])?;
            off += n;
        }
        Ok(())
    }

    /// The CUDA backend of this device (CUDA devices only), for its device-side API:
    /// `matmul_device`, `matmul_grouped` into device memory, `quantize_device`.
    #[cfg(feature = "cuda")]
    pub fn cuda(&self) -> Option<&qkern_cuda::CudaBackend> {
        match &self.inner {
            Inner::Cuda(c) => Some(c),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Dequantize all weights to f32 (`out.len() == rows * cols`), as ggml's `to_float`.
    pub fn dequantize(&self, w: &Weights<'_>, out: &mut [f32]) -> Result<()> {
        self.check_owner("weights", w.device)?;
        let want = w.rows.checked_mul(w.cols).ok_or(ShapeError::Overflow)?;
        if out.len() != want {
            return Err(ShapeError::Length { what: "dequantize output", expected: want, got: out.len() }.into());
        }
        match (&self.inner, &w.storage) {
            (Inner::Cpu(c), WeightStorage::Host(wb)) => c.dequantize(w.format, wb.as_slice(), out)?,
            #[cfg(feature = "cuda")]
            (Inner::Cuda(c), WeightStorage::Cuda(wb)) => c.dequantize(wb, out).map_err(gpu_err!("cuda"))?,
            #[cfg(feature = "wgpu")]
            (Inner::Wgpu(c), WeightStorage::Wgpu(wb)) => c.dequantize(wb, out).map_err(gpu_err!("wgpu"))?,
            #[allow(unreachable_patterns)]
            _ => return Err(self.mixed()),
        }
        Ok(())
    }

    /// The quantized bytes of the tokens `acts` holds, copied to the host (for checks and
    /// debugging; `out.len()` must be `tokens * row bytes`).
    pub fn read_activations(&self, acts: &Activations, out: &mut [u8]) -> Result<()> {
        self.check_owner("activation buffer", acts.device)?;
        let n = acts.tokens * acts.row_bytes();
        if out.len() != n {
            return Err(ShapeError::ByteLength { what: "activation read-back", expected: n, got: out.len() }.into());
        }
        match (&self.inner, &acts.storage) {
            (Inner::Cpu(_), ActStorage::Host(b)) => out.copy_from_slice(&b.as_slice()[..n]),
            #[cfg(feature = "cuda")]
            (Inner::Cuda(c), ActStorage::Cuda(a)) => c.read_acts(a, acts.tokens, out).map_err(gpu_err!("cuda"))?,
            #[cfg(feature = "wgpu")]
            (Inner::Wgpu(c), ActStorage::Wgpu(a)) => c.read_acts(a, acts.tokens, out).map_err(gpu_err!("wgpu"))?,
            #[allow(unreachable_patterns)]
            _ => return Err(self.mixed()),
        }
        Ok(())
    }

    #[allow(dead_code)]
    fn mixed(&self) -> Error {
        Error::WrongDevice { what: "buffer", owner: "another backend".into(), this: self.name() }
    }
}
