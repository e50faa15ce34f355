//! The CUDA backend: context, stream, modules, buffers, launches.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, result, sys};
use cudarc::nvrtc::Ptx;
use qkern_formats::{Format, ShapeError, par};

use crate::args::{self, DeqArgs, DeqKind, MmJobDesc, QuantArgs};
use crate::kernels::{self, Module};
use crate::layout::{ActLayout, WeightLayout};
use crate::{CudaError, Result, probe};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// The context's scheduling flag unless `QKERN_CUDA_SYNC` says otherwise.
const DEFAULT_SYNC: SyncMode = SyncMode::Auto;
/// The way back to host memory unless `QKERN_CUDA_HOST_OUT` says otherwise. On the H200
/// (run4-b-chunked-flag, 1 GiB at K = 4096) chunked beat pageable (the old way) at every
/// format: q8_0 3453 against 2749 GB/s at NT = 1, 1025 against 650 at NT = 8.
const DEFAULT_HOST_OUT: HostOut = HostOut::Chunked;
/// Rows per chunk of [`HostOut::Chunked`] at least (a chunk keeps the whole GPU busy).
const CHUNK_ROWS: usize = 65536;
/// The wait of launch-to-result calls unless `QKERN_CUDA_WAIT` says otherwise. On the H200
/// (benches/results/2026-12-03-h200-cuda/run4-b-chunked-flag) the flag saved 0.4-1.3 us per
/// expert call against `cuStreamSynchronize` (the sync flag, Auto or Spin, made no difference).
const DEFAULT_WAIT: WaitMode = WaitMode::Flag;
const NO_OVERRIDE: u64 = u64::MAX - 1;

fn dptr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

/// A tuning knob from the environment ([`qkern_formats::env::knob`]): `None` where unset or
/// empty, else its parsed value, or a typed error naming the variable, its value and what it
/// accepts.
fn env_knob<T>(name: &'static str, expected: &'static str, parse: impl Fn(&str) -> Option<T>) -> Result<Option<T>> {
    Ok(qkern_formats::env::knob(name, expected, parse)?)
}

/// Copy each `(src, dst)` pair of equal lengths (`total` floats in all) on the copy threads
/// (`qkern_formats::par::par_copy`).
fn par_copy<'a>(
    pool: Option<&rayon::ThreadPool>,
    total: usize,
    pairs: impl Iterator<Item = (&'a [f32], &'a mut [f32])>,
) {
    qkern_formats::par::par_copy(pool, total, 1, pairs, |s, d| d.copy_from_slice(s));
}

fn parse_mma_nt(s: &str) -> Option<u32> {
    s.parse::<u32>().ok().filter(|&n| n <= args::MAX_NT as u32)
}

/// A token-count override stored as a mask (bit `ntm - 1`; `u32::MAX`: the format's default):
/// `None` is the default, `Some(n)` "from n tokens on" (0: never), more than 8 an error naming
/// `what`.
fn store_token_mask(slot: &std::sync::atomic::AtomicU32, n: Option<u32>, what: &str) -> Result<()> {
    let v = match n {
        None => u32::MAX,
        Some(n) if n > args::MAX_NT as u32 => {
            return Err(invalid(format!("{what} from {n} tokens: at most {}", args::MAX_NT)));
        }
        Some(n) => args::row_mask_from(n),
    };
    slot.store(v, Ordering::Relaxed);
    Ok(())
}

/// The mask a [`store_token_mask`] slot holds, or `default` where it holds none.
fn token_mask(slot: &std::sync::atomic::AtomicU32, default: u32) -> u32 {
    match slot.load(Ordering::Relaxed) {
        u32::MAX => default,
        m => m,
    }
}

fn invalid(msg: impl Into<String>) -> CudaError {
    CudaError::Invalid(msg.into())
}

/// A loaded module's functions.
struct Loaded {
    _module: Arc<CudaModule>,
    /// Matmul kernels in `args::mm_kernel_index` order.
    mm: Vec<Option<CudaFunction>>,
    deq: Option<CudaFunction>,
    /// Quantizers for q8_0, q8_1, q8_K, then their grouped forms (`args::QuantGroupArgs`).
    quant: Vec<CudaFunction>,
    /// The module's constant bank for the `qk_mmc_*` kernels (32-element formats).
    cact: Option<ConstBank>,
}

/// A module's `qk_cact` (mm_common.cuh `ActC`): its device address and size, and what it holds
/// now: `(source address, bytes, activation epoch)` of the last copy queued into it. The
/// lock is held from the check to the launch, so that another thread's copy cannot land
/// between this copy and the launch that reads it (one stream per backend: queue order is
/// execution order).
struct ConstBank {
    ptr: u64,
    bytes: u64,
    held: Mutex<Option<(u64, u64, u64)>>,
}

/// A CUDA device with its own stream. Buffers made by one backend are used with it only.
pub struct CudaBackend {
    id: u64,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    index: usize,
    name: String,
    arch: &'static str,
    sms: u32,
    tab: u64,
    /// Boxed: keeps the backend small (it sits in an enum in `qkern`).
    cold: Box<Cold>,
    /// Override of the S = 4 row threshold (`u64::MAX - 1` = none).
    s4_override: AtomicU64,
    /// Override of the token counts that run the tensor-core kernels (a mask, bit `ntm - 1`;
    /// `u32::MAX`: each format's `args::mma_default_mask`).
    mma_mask: std::sync::atomic::AtomicU32,
    /// Override of the token counts that run the one-thread-per-row kernels (a mask, bit
    /// `ntm - 1`; `u32::MAX`: each format's `args::row_default_mask`).
    row_mask: std::sync::atomic::AtomicU32,
    /// q4_K's two-phase small-launch kernel on ([`CudaBackend::set_kq_two_phase`]).
    kq_mmk: std::sync::atomic::AtomicBool,
    /// 0: each format's `args::split8_default`; 1: off; 2: on.
    split8: std::sync::atomic::AtomicU8,
    /// The token counts that run the constant-bank row kernels (a mask as `row_mask`;
    /// `u32::MAX`: each format's `args::cact_default_mask`).
    cact_mask: std::sync::atomic::AtomicU32,
    /// The token counts whose staged launches run two threads a row (a mask
    /// as `row_mask`; `u32::MAX`: each format's `args::pair_default_mask`).
    pair_mask: std::sync::atomic::AtomicU32,
    /// Bumped whenever an activation buffer of this backend may change (allocation,
    /// quantize, import), so that a constant bank's copy of a buffer is made again after.
    act_epoch: AtomicU64,
}

struct Cold {
    /// First: dropped while `_tables` still holds the context.
    stage: Mutex<Option<HostStage>>,
    /// The f32 inputs of quantize calls on their way to the device (see [`InStage`]); held
    /// from the host copy until the launches that read the device copy are queued.
    qin: Mutex<Option<InStage>>,
    _tables: CudaSlice<u32>,
    modules: Mutex<HashMap<Module, Arc<Loaded>>>,
    scratch: Mutex<Option<CudaSlice<f32>>>,
    /// [`HostOut`] as a `u8`.
    host_out: std::sync::atomic::AtomicU8,
    /// [`WaitMode`] as a `u8`.
    wait: std::sync::atomic::AtomicU8,
    flag: Mutex<Option<HostFlag>>,
    /// Helpers of the caller's thread for copying large results out of the pinned stage
    /// (`None`: the caller copies alone). See [`CudaBackend::copy_threads`].
    copy_pool: Option<rayon::ThreadPool>,
}

/// How the host waits for the stream's work (launch-to-result): [`CudaBackend::synchronize`]
/// and the waits of the host-output calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    /// `cuStreamSynchronize` (the context's [`SyncMode`] decides spin, yield or sleep).
    Sync = 0,
    /// Spin on `cuStreamQuery`.
    Query = 1,
    /// Queue `cuStreamWriteValue32` of a sequence number into a pinned host word (with its
    /// system-scope fence), spin on that word; `cuStreamQuery` now and then, so that a failed
    /// launch is an error rather than a hang.
    Flag = 2,
}

impl WaitMode {
    fn from_u8(v: u8) -> WaitMode {
        match v {
            1 => WaitMode::Query,
            2 => WaitMode::Flag,
            _ => WaitMode::Sync,
        }
    }
    /// `sync`, `query` or `flag`.
    pub fn parse(s: &str) -> Option<WaitMode> {
        Some(match s {
            "sync" => WaitMode::Sync,
            "query" => WaitMode::Query,
            "flag" => WaitMode::Flag,
            _ => return None,
        })
    }
}

/// A pinned, device-mapped host word that the stream writes when its work is done.
struct HostFlag {
    _stage: HostStage,
    host: *const u32,
    dev: u64,
    seq: u32,
}

// Plain host memory owned by this struct, used under `Cold::flag`'s mutex.
unsafe impl Send for HostFlag {}

/// How [`CudaBackend::matmul`] (result in host memory) brings the result back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostOut {
    /// The kernel writes device memory; one `cuMemcpyDtoHAsync` into the caller's (pageable)
    /// slice. The driver stages pageable copies itself, slowly (about 8 GB/s on the H200
    /// host, plus some microseconds per copy).
    Pageable = 0,
    /// The kernel writes device memory; DMA into a pinned staging buffer, then a host copy.
    Pinned = 1,
    /// The kernel writes straight into a pinned, device-mapped host buffer (no copy
    /// command), then a host copy into the caller's slice.
    Mapped = 2,
    /// As `Mapped`, and large single matmuls run as several row chunks, each followed by a
    /// flag write: the host copies chunk i while the device computes chunk i + 1.
    Chunked = 3,
}

impl HostOut {
    fn from_u8(v: u8) -> HostOut {
        match v {
            0 => HostOut::Pageable,
            1 => HostOut::Pinned,
            2 => HostOut::Mapped,
            _ => HostOut::Chunked,
        }
    }
    /// `pageable`, `pinned`, `mapped` or `chunked`.
    pub fn parse(s: &str) -> Option<HostOut> {
        Some(match s {
            "pageable" => HostOut::Pageable,
            "pinned" => HostOut::Pinned,
            "mapped" => HostOut::Mapped,
            "chunked" => HostOut::Chunked,
            _ => return None,
        })
    }
}

/// How the host waits for the device (the context's scheduling flag, `cuCtxSetFlags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// The driver's heuristic (spin while there are fewer active contexts than cores).
    Auto,
    /// Spin on the CPU while waiting: the lowest launch-to-result latency.
    Spin,
    /// Yield the thread while waiting.
    Yield,
    /// Sleep on an OS primitive while waiting.
    Blocking,
}

impl SyncMode {
    /// `auto`, `spin`, `yield` or `blocking`.
    pub fn parse(s: &str) -> Option<SyncMode> {
        Some(match s {
            "auto" => SyncMode::Auto,
            "spin" => SyncMode::Spin,
            "yield" => SyncMode::Yield,
            "blocking" => SyncMode::Blocking,
            _ => return None,
        })
    }
    fn flag(self) -> sys::CUctx_flags {
        use sys::CUctx_flags as F;
        match self {
            SyncMode::Auto => F::CU_CTX_SCHED_AUTO,
            SyncMode::Spin => F::CU_CTX_SCHED_SPIN,
            SyncMode::Yield => F::CU_CTX_SCHED_YIELD,
            SyncMode::Blocking => F::CU_CTX_SCHED_BLOCKING_SYNC,
        }
    }
}

/// A pinned, device-mapped host buffer of `len` f32 (grown, never shrunk).
struct HostStage {
    ctx: Arc<CudaContext>,
    host: *mut c_void,
    dev: u64,
    len: usize,
}

// The buffer is plain host memory owned by this struct; access goes through `Cold::stage`'s mutex.
unsafe impl Send for HostStage {}

impl HostStage {
    fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<HostStage> {
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        let bytes = len.checked_mul(4).ok_or(ShapeError::Overflow)?;
        // SAFETY: a plain pinned allocation of `bytes` (the caller's context is bound); the
        // pointer is owned by the HostStage made below and freed once, in its Drop.
        let host = unsafe { result::malloc_host(bytes, flags) }?;
        let mut dev = 0u64;
        // SAFETY: `host` was just allocated with CU_MEMHOSTALLOC_DEVICEMAP; `dev` is a live out-parameter.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, host, 0) }.result();
        if let Err(e) = r {
            // SAFETY: `host` is ours, not shared yet, and freed only here on this path.
            unsafe { result::free_host(host) }.ok();
            return Err(e.into());
        }
        Ok(HostStage { ctx: ctx.clone(), host, dev, len })
    }
}

impl Drop for HostStage {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `host` came from malloc_host in `new`, is owned by this struct, and no
            // queued work uses it any more (users wait for their results before releasing it).
            unsafe { result::free_host(self.host) }.ok();
        }
    }
}

/// Quantize inputs on their way in: the caller's f32 rows are copied into `host` (pinned), one
/// asynchronous DMA takes them to `dev`, whence the quantize kernels read them. `done` is
/// recorded after that DMA: the next copy into `host` waits for it (the kernels, queued on the
/// same stream after the DMA, and the next DMA, queued after them, need no wait).
struct InStage {
    host: HostStage,
    dev: CudaSlice<f32>,
    done: CudaEvent,
}

/// Weights resident on the device (in the layout of [`crate::layout::WeightLayout`]).
pub struct CudaWeights {
    owner: u64,
    format: Format,
    rows: usize,
    cols: usize,
    _buf: CudaSlice<u8>,
    w: u64,
    wd: u64,
}

/// A reusable activation buffer on the device (regions of [`crate::layout::ActLayout`]).
pub struct CudaActs {
    owner: u64,
    layout: ActLayout,
    _buf: CudaSlice<u8>,
    base: u64,
}

/// An f32 buffer on the device (matmul outputs, device-side inputs).
pub struct CudaF32 {
    owner: u64,
    buf: CudaSlice<f32>,
    ptr: u64,
    len: usize,
}

impl std::fmt::Debug for CudaWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaWeights({} {}x{})", self.format, self.rows, self.cols)
    }
}

impl std::fmt::Debug for CudaActs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaActs({} x{} cap {})", self.layout.format, self.layout.cols, self.layout.capacity)
    }
}

impl std::fmt::Debug for CudaF32 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaF32({})", self.len)
    }
}

impl CudaWeights {
    pub fn format(&self) -> Format {
        self.format
    }
    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Bytes of weight data in ggml's format (what a matmul reads).
    pub fn ggml_bytes(&self) -> usize {
        self.rows * self.format.row_bytes(self.cols).unwrap_or(0)
    }
}

impl CudaActs {
    pub fn format(&self) -> Format {
        self.layout.format
    }
    pub fn cols(&self) -> usize {
        self.layout.cols
    }
    pub fn capacity(&self) -> usize {
        self.layout.capacity
    }
    fn ptr(&self, off: usize) -> u64 {
        self.base + off as u64
    }
}

impl CudaF32 {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The raw device address (for engines launching their own kernels on it).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
    /// The underlying cudarc slice.
    pub fn slice(&self) -> &CudaSlice<f32> {
        &self.buf
    }
}

impl CudaBackend {
    /// Open CUDA device `index`: probes the driver and NVRTC libraries first, so that a
    /// machine without them gets an error, not cudarc's panic.
    pub fn new(index: usize) -> Result<CudaBackend> {
        probe::driver()?;
        probe::nvrtc()?;
        let count = probe::devices()?;
        if index >= count {
            return Err(CudaError::NoDevice { index, reason: format!("this machine has {count} CUDA device(s)") });
        }
        let ctx = CudaContext::new(index).map_err(|e| CudaError::NoDevice { index, reason: e.to_string() })?;
        // One stream per backend, and buffers never shared between streams: cudarc's
        // per-buffer event tracking is not needed (and would cost events in the hot path).
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream()?;
        let name = ctx.name()?;
        let (major, minor) = ctx.compute_capability()?;
        let sms = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let tables = stream.clone_htod(&crate::layout::tables())?;
        let tab = dptr(&tables, &stream);
        Ok(CudaBackend {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            ctx,
            stream,
            index,
            name,
            arch: kernels::arch_name(major, minor),
            sms,
            tab,
            cold: Box::new(Cold {
                stage: Mutex::new(None),
                qin: Mutex::new(None),
                _tables: tables,
                modules: Mutex::new(HashMap::new()),
                scratch: Mutex::new(None),
                host_out: std::sync::atomic::AtomicU8::new(DEFAULT_HOST_OUT as u8),
                wait: std::sync::atomic::AtomicU8::new(DEFAULT_WAIT as u8),
                flag: Mutex::new(None),
                copy_pool: par::copy_pool(
                    env_knob("QKERN_CUDA_COPY_THREADS", "1 to 64", par::parse_copy_threads)?
                        .unwrap_or_else(par::default_copy_threads),
                    "qkern-cuda-copy",
                )
                .map_err(|e| invalid(format!("starting the copy threads: {e}")))?,
            }),
            s4_override: AtomicU64::new(NO_OVERRIDE),
            // set below (set_mma_tokens: the per-format defaults where the device has the kernels)
            mma_mask: std::sync::atomic::AtomicU32::new(0),
            row_mask: std::sync::atomic::AtomicU32::new(u32::MAX),
            kq_mmk: std::sync::atomic::AtomicBool::new(args::KQ_MMK_DEFAULT),
            split8: std::sync::atomic::AtomicU8::new(0),
            cact_mask: std::sync::atomic::AtomicU32::new(u32::MAX),
            pair_mask: std::sync::atomic::AtomicU32::new(u32::MAX),
            act_epoch: AtomicU64::new(0),
        })
        .and_then(|b| {
            // Tuning knobs (read once per backend): QKERN_CUDA_SYNC=auto|spin|yield|blocking,
            // QKERN_CUDA_HOST_OUT=pageable|pinned|mapped|chunked, QKERN_CUDA_WAIT=sync|query|flag.
            // An unknown value is an error, not silently the default.
            match env_knob("QKERN_CUDA_SYNC", "auto, spin, yield or blocking", SyncMode::parse)? {
                Some(m) => b.set_sync_mode(m)?,
                None if DEFAULT_SYNC != SyncMode::Auto => b.set_sync_mode(DEFAULT_SYNC)?,
                None => {}
            }
            if let Some(m) = env_knob("QKERN_CUDA_HOST_OUT", "pageable, pinned, mapped or chunked", HostOut::parse)? {
                b.set_host_out(m);
            }
            if let Some(m) = env_knob("QKERN_CUDA_WAIT", "sync, query or flag", WaitMode::parse)? {
                b.set_wait_mode(m);
            }
            b.set_mma_tokens(env_knob("QKERN_CUDA_MMA_NT", "a token count 0..=8 (0: never)", parse_mma_nt)?)?;
            b.set_row_tokens(env_knob("QKERN_CUDA_ROW_NT", "a token count 0..=8 (0: never)", parse_mma_nt)?)?;
            b.set_cact_tokens(env_knob("QKERN_CUDA_CACT_NT", "a token count 0..=8 (0: never)", parse_mma_nt)?)?;
            b.set_pair_tokens(env_knob("QKERN_CUDA_PAIR_NT", "a token count 0..=8 (0: never)", parse_mma_nt)?)?;
            if let Some(on) = env_knob("QKERN_CUDA_KQ_MMK", "0 or 1", qkern_formats::env::switch)? {
                b.set_kq_two_phase(on);
            }
            if let Some(on) = env_knob("QKERN_CUDA_SPLIT8", "0 or 1", qkern_formats::env::switch)? {
                b.set_split8(Some(on));
            }
            // QKERN_CUDA_Q8K=words|quads: read once per process by the layouts and the NVRTC
            // options alike (Q8kLayout::current); refused here when unknown.
            crate::layout::Q8kLayout::from_env()?;
            // QKERN_CUDA_IQ_TILE=0|1: the same (layout::iq_tile), which no -DQK_IQ_TILE in
            // QKERN_CUDA_NVRTC_OPTS may contradict.
            crate::layout::iq_tile_from_env()?;
            kernels::iq_tile_option_from_env()?;
            // -DQK_IQ_HMMA in QKERN_CUDA_NVRTC_OPTS: 0 or 1 (kernels::iq_hmma); refused here
            // when anything else.
            kernels::iq_hmma_from_env()?;
            Ok(b)
        })
    }

    /// How the host waits for the device (for the whole context: the primary context is
    /// shared by every backend of this device in the process).
    pub fn set_sync_mode(&self, mode: SyncMode) -> Result<()> {
        self.ctx.set_flags(mode.flag())?;
        Ok(())
    }

    /// How [`CudaBackend::matmul`] and [`CudaBackend::matmul_grouped_host`] return their
    /// result to host memory (the bits are the same in every mode).
    pub fn set_host_out(&self, mode: HostOut) {
        self.cold.host_out.store(mode as u8, Ordering::Relaxed);
    }

    /// Threads that copy a large result (256 KiB or more) from the pinned stage into the
    /// caller's slice, the caller's included (`QKERN_CUDA_COPY_THREADS`, 1 to 64, else half the
    /// host's cores, at most 8). One thread copies about 12-17 GB/s on the H200's host (the wgpu
    /// backend's measurement, whose copy threads gained 6-21 % of NT 1 call GB/s: session 9);
    /// without them the host copy of an NT 8 result (15 MB for 1 GiB of q4_K) was most of the
    /// call (session 10 run6: 2106 GB/s into device memory, 817 into host memory).
    pub fn copy_threads(&self) -> usize {
        self.cold.copy_pool.as_ref().map_or(1, |p| p.current_num_threads() + 1)
    }

    pub fn host_out(&self) -> HostOut {
        HostOut::from_u8(self.cold.host_out.load(Ordering::Relaxed))
    }

    /// How [`CudaBackend::synchronize`] and the host-output calls wait for the device.
    pub fn set_wait_mode(&self, mode: WaitMode) {
        self.cold.wait.store(mode as u8, Ordering::Relaxed);
    }

    pub fn wait_mode(&self) -> WaitMode {
        WaitMode::from_u8(self.cold.wait.load(Ordering::Relaxed))
    }

    /// Wait for the stream by [`CudaBackend::wait_mode`].
    fn wait(&self) -> Result<()> {
        match self.wait_mode() {
            WaitMode::Sync => self.stream.synchronize()?,
            WaitMode::Query => {
                while !self.query()? {
                    std::hint::spin_loop();
                }
            }
            WaitMode::Flag => {
                let mut fl = self.flag()?;
                let f = fl.as_mut().expect("flag");
                let v = self.signal(f)?;
                self.wait_flag(f, v)?;
            }
        }
        Ok(())
    }

    /// `cuStreamQuery`: whether everything queued is done (an error if something failed).
    fn query(&self) -> Result<bool> {
        // SAFETY: the stream is this backend's own, alive for `self`'s lifetime.
        match unsafe { sys::cuStreamQuery(self.stream.cu_stream()) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            e => Err(CudaError::from(cudarc::driver::DriverError(e))),
        }
    }

    /// The mapped host stage, grown to at least `n` f32 (locked: the caller owns its contents
    /// until the guard drops; `Some` on return). The old stage is freed before the new one is
    /// allocated.
    fn stage(&self, n: usize) -> Result<std::sync::MutexGuard<'_, Option<HostStage>>> {
        let mut st = self.cold.stage.lock().unwrap_or_else(|e| e.into_inner());
        if st.as_ref().is_none_or(|b| b.len < n) {
            *st = None;
            *st = Some(HostStage::new(&self.ctx, n.max(1024))?);
        }
        Ok(st)
    }

    /// The flag word, allocated on first use (locked: the caller owns the sequence numbers).
    fn flag(&self) -> Result<std::sync::MutexGuard<'_, Option<HostFlag>>> {
        let mut fl = self.cold.flag.lock().unwrap_or_else(|e| e.into_inner());
        if fl.is_none() {
            let st = HostStage::new(&self.ctx, 1024)?;
            let host = st.host as *const u32;
            // SAFETY: the stage holds 1024 f32 (>= one u32), aligned by the allocator; nothing is queued on it yet.
            unsafe { std::ptr::write_volatile(st.host as *mut u32, 0) };
            *fl = Some(HostFlag { host, dev: st.dev, seq: 0, _stage: st });
        }
        Ok(fl)
    }

    /// Queue the write of the next sequence number into the flag word, after (and fenced
    /// against) everything queued before it; returns that number.
    fn signal(&self, f: &mut HostFlag) -> Result<u32> {
        f.seq = f.seq.wrapping_add(1);
        let flags = sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32;
        // SAFETY: `f.dev` is the device address of the flag's pinned word, kept alive by `f._stage`.
        unsafe { sys::cuStreamWriteValue32_v2(self.stream.cu_stream(), f.dev, f.seq, flags) }.result()?;
        Ok(f.seq)
    }

    /// Spin until the flag word has reached `v` (the stream's writes come in order); asks the
    /// driver now and then, so that a failed launch is an error, not a hang.
    fn wait_flag(&self, f: &HostFlag, v: u32) -> Result<()> {
        // SAFETY: `f.host` points into the flag's live pinned stage; volatile, as the GPU writes it.
        let reached = || (unsafe { std::ptr::read_volatile(f.host) }.wrapping_sub(v) as i32) >= 0;
        let mut n = 0u32;
        while !reached() {
            n = n.wrapping_add(1);
            if n.is_multiple_of(4096) && self.query()? && reached() {
                break;
            }
            std::hint::spin_loop();
        }
        std::sync::atomic::fence(Ordering::Acquire);
        Ok(())
    }

    /// The device's name and architecture (`NVIDIA H200 (sm_90, 132 SMs)`).
    pub fn name(&self) -> String {
        format!("{} ({}, {} SMs)", self.name, self.arch, self.sms)
    }

    pub fn index(&self) -> usize {
        self.index
    }

    pub fn arch(&self) -> &'static str {
        self.arch
    }

    pub fn sm_count(&self) -> u32 {
        self.sms
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// This backend's stream (every operation is ordered on it).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Compile (once per process) and load (once per backend) every kernel module now,
    /// compiling in parallel; otherwise each module is built on first use.
    pub fn warm_up(&self) -> Result<()> {
        kernels::compile_all(&kernels::all_modules(), self.arch)?;
        for m in kernels::all_modules() {
            self.module(m)?;
        }
        Ok(())
    }

    /// Per matmul kernel of `format`: (name, registers per thread, local-memory bytes per
    /// thread, resident 256-thread CTAs per SM), for tuning reports.
    pub fn kernel_stats(&self, format: Format) -> Result<Vec<(String, i32, i32, u32)>> {
        use cudarc::driver::sys::CUfunction_attribute_enum as A;
        let m = self.module(Module::Weights(format))?;
        let mut v = Vec::new();
        for (name, f) in args::mm_kernel_names(format).into_iter().zip(&m.mm) {
            if let (Some(n), Some(f)) = (name, f) {
                let regs = f.get_attribute(A::CU_FUNC_ATTRIBUTE_NUM_REGS)?;
                let local = f.get_attribute(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?;
                let occ = f.occupancy_max_active_blocks_per_multiprocessor(args::MM_BLOCK, 0, None)?;
                v.push((n, regs, local, occ));
            }
        }
        Ok(v)
    }

    fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread()?;
        Ok(())
    }

    fn module(&self, m: Module) -> Result<Arc<Loaded>> {
        let mut mods = self.cold.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = mods.get(&m) {
            return Ok(l.clone());
        }
        let ptx = kernels::compile(m, self.arch)?;
        let module = self.ctx.load_module(Ptx::from_src(ptx.as_str()))?;
        let load = |n: &str| module.load_function(n).map_err(CudaError::from);
        let loaded = match m {
            Module::Quant => Loaded {
                mm: Vec::new(),
                deq: None,
                quant: vec![
                    load("qk_quant_q8_0")?,
                    load("qk_quant_q8_1")?,
                    load("qk_quant_q8_k")?,
                    load("qk_quant_group_q8_0")?,
                    load("qk_quant_group_q8_1")?,
                    load("qk_quant_group_q8_k")?,
                ],
                cact: None,
                _module: module.clone(),
            },
            Module::Weights(f) => {
                let mut mm = Vec::new();
                for n in args::mm_kernel_names(f) {
                    mm.push(match n {
                        Some(n) => Some(load(&n)?),
                        None => None,
                    });
                }
                let cact = if args::has_row(f) {
                    let sym = module.get_global("qk_cact", &self.stream)?;
                    let (ptr, _sync) = sym.device_ptr(&self.stream);
                    Some(ConstBank { ptr, bytes: sym.len() as u64, held: Mutex::new(None) })
                } else {
                    None
                };
                Loaded {
                    mm,
                    deq: Some(load(&args::deq_kernel_name(f))?),
                    quant: Vec::new(),
                    cact,
                    _module: module.clone(),
                }
            }
        };
        let l = Arc::new(loaded);
        mods.insert(m, l.clone());
        Ok(l)
    }

    fn launch<A>(&self, f: &CudaFunction, grid: u32, block: u32, a: &A) -> Result<()> {
        self.launch_shared(f, grid, block, 0, a)
    }

    /// [`Self::launch`] with `shared` bytes of dynamic shared memory (at most 48 KiB, what a
    /// launch gets without opting in).
    fn launch_shared<A>(&self, f: &CudaFunction, grid: u32, block: u32, shared: u32, a: &A) -> Result<()> {
        let mut params = [a as *const A as *mut c_void];
        unsafe {
            result::launch_kernel(
                f.cu_function(),
                (grid, 1, 1),
                (block, 1, 1),
                shared,
                self.stream.cu_stream(),
                &mut params,
            )
        }?;
        Ok(())
    }

    fn check<T: Owned + ?Sized>(&self, what: &str, x: &T) -> Result<()> {
        if x.owner() != self.id {
            return Err(invalid(format!("{what} belongs to another CUDA backend")));
        }
        Ok(())
    }

    // ------------------------------------------------------------------ buffers

    /// Upload `rows x cols` weights of `format` (raw ggml blocks, row-major), once.
    pub fn upload_weights(&self, format: Format, rows: usize, cols: usize, bytes: &[u8]) -> Result<CudaWeights> {
        let layout = WeightLayout::of(format)?;
        let n = format.matrix_bytes(rows, cols)?;
        if n != bytes.len() {
            return Err(ShapeError::ByteLength { what: "weights", expected: n, got: bytes.len() }.into());
        }
        if rows > u32::MAX as usize || cols > u32::MAX as usize / 2 {
            return Err(invalid("weight matrix too large for the CUDA kernels (rows and cols must fit in 32 bits)"));
        }
        // The kernels step through a row's blocks with 32-bit offsets inside its tile (common.cuh
        // `qk_wstep`): a tile's bytes must fit in 32 bits.
        if rows > 0 && !layout.tile_fits(n / rows) {
            return Err(invalid(format!(
                "{format} rows of {cols} columns too long for the CUDA kernels ({} rows of them must fit in 4 GiB)",
                layout.tile
            )));
        }
        self.bind()?;
        let nblocks = rows * (cols / format.block_elems());
        let packed;
        let dev: &[u8] = if layout.repacked() {
            packed = layout.pack(bytes, rows);
            &packed
        } else {
            bytes
        };
        let buf = self.stream.clone_htod(dev)?;
        let w = dptr(&buf, &self.stream);
        let wd = if layout.split { w + layout.d_region(nblocks) as u64 } else { 0 };
        self.stream.synchronize()?;
        Ok(CudaWeights { owner: self.id, format, rows, cols, _buf: buf, w, wd })
    }

    /// A reusable activation buffer of `format` (q8_0, q8_1, q8_K) for up to `capacity`
    /// tokens of `cols` elements.
    pub fn alloc_acts(&self, format: Format, cols: usize, capacity: usize) -> Result<CudaActs> {
        let layout = ActLayout::new(format, cols, capacity)?;
        // capw * 16 (a q8_0 / q8_1 / q8_K-quad row of quads) is a u32 in the kernels
        if cols > u32::MAX as usize / 2 || capacity > (u32::MAX / 16 - 3) as usize {
            return Err(invalid("activation buffer too large for the CUDA kernels"));
        }
        self.bind()?;
        let buf = self.stream.alloc_zeros::<u8>(layout.total)?;
        // A new buffer may sit where a freed one was mirrored.
        self.act_epoch.fetch_add(1, Ordering::Relaxed);
        let base = dptr(&buf, &self.stream);
        Ok(CudaActs { owner: self.id, layout, _buf: buf, base })
    }

    /// A zeroed f32 device buffer.
    pub fn alloc_f32(&self, len: usize) -> Result<CudaF32> {
        self.bind()?;
        let buf = self.stream.alloc_zeros::<f32>(len.max(1))?;
        let ptr = dptr(&buf, &self.stream);
        Ok(CudaF32 { owner: self.id, buf, ptr, len })
    }

    /// Copy `x` into a device buffer of at least `x.len()` elements (ordered on the stream).
    pub fn upload_f32(&self, x: &[f32], dst: &mut CudaF32) -> Result<()> {
        self.check("f32 buffer", dst)?;
        if x.len() > dst.len {
            return Err(invalid(format!("{} floats do not fit a device buffer of {}", x.len(), dst.len)));
        }
        self.bind()?;
        unsafe { result::memcpy_htod_async(dst.ptr, x, self.stream.cu_stream()) }?;
        Ok(())
    }

    /// Copy the first `out.len()` elements of a device buffer to the host (waits).
    pub fn download_f32(&self, src: &CudaF32, out: &mut [f32]) -> Result<()> {
        self.check("f32 buffer", src)?;
        if out.len() > src.len {
            return Err(invalid(format!("cannot read {} floats from a device buffer of {}", out.len(), src.len)));
        }
        self.bind()?;
        unsafe { result::memcpy_dtoh_async(out, src.ptr, self.stream.cu_stream()) }?;
        self.stream.synchronize()?;
        Ok(())
    }

    /// Device-to-device copy of `bytes` bytes between f32 buffers (for bandwidth baselines).
    pub fn copy_f32(&self, src: &CudaF32, dst: &mut CudaF32) -> Result<()> {
        self.check("f32 buffer", src)?;
        self.check("f32 buffer", dst)?;
        let n = src.len.min(dst.len);
        self.bind()?;
        unsafe { result::memcpy_dtod_async(dst.ptr, src.ptr, 4 * n, self.stream.cu_stream()) }?;
        Ok(())
    }

    /// The device-to-device copy bandwidth in GB/s, counted as bytes read plus bytes written (as
    /// issue #5 counts it): `bytes` copied between two device buffers, CUDA events over `iters`
    /// copies after one untimed copy. The reference against which the matmul's GB/s are set.
    pub fn copy_gbps(&self, bytes: usize, iters: usize) -> Result<f64> {
        let n = (bytes / 4).max(1);
        let src = self.alloc_f32(n)?;
        let mut dst = self.alloc_f32(n)?;
        let ms = self.time_ms(iters, || self.copy_f32(&src, &mut dst))?;
        Ok(2.0 * 4.0 * n as f64 / (ms * 1e-3) / 1e9)
    }

    /// Wait for everything queued on this backend's stream (by [`CudaBackend::wait_mode`]).
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.wait()
    }

    /// Milliseconds per call of `f` over `iters` calls, timed with CUDA events on the stream
    /// (after one untimed call).
    pub fn time_ms(&self, iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
        self.bind()?;
        f()?;
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self.ctx.new_event(flags)?;
        let end = self.ctx.new_event(flags)?;
        start.record(&self.stream)?;
        for _ in 0..iters.max(1) {
            f()?;
        }
        end.record(&self.stream)?;
        end.synchronize()?;
        Ok(start.elapsed_ms(&end)? as f64 / iters.max(1) as f64)
    }

    // ------------------------------------------------------------------ activations

    /// Quantize `x` (`tokens x cols` f32, token-major, host memory) into `acts` on the device,
    /// exactly as ggml-cpu's x86 `from_float`. Returns without waiting.
    pub fn quantize(&self, x: &[f32], acts: &mut CudaActs) -> Result<()> {
        self.check("activation buffer", acts)?;
        let nt = self.act_tokens(x.len(), acts)?;
        self.quantize_grouped(x, &mut [(acts, nt)])
    }

    /// Quantize into several buffers at once: `x` holds each job's `tokens` rows
    /// (`[tokens][cols]`, every buffer `cols` wide), one job after the other; a job of 0
    /// tokens leaves its buffer as it is. One host copy into pinned memory, one DMA, and one
    /// launch for each run of up to [`args::QGROUP`] jobs of one activation format; returns
    /// without waiting. The bits are those of one [`CudaBackend::quantize`] a job.
    pub fn quantize_grouped(&self, x: &[f32], jobs: &mut [(&mut CudaActs, usize)]) -> Result<()> {
        // Validate everything before anything is queued.
        let mut elems = 0usize;
        let cols = jobs.first().map_or(0, |j| j.0.layout.cols);
        for (a, t) in jobs.iter() {
            self.check("activation buffer", &**a)?;
            if a.layout.cols != cols {
                return Err(invalid(format!(
                    "grouped quantize: buffers of {} and {cols} columns in one call",
                    a.layout.cols
                )));
            }
            if *t > 0 {
                self.act_tokens(t * cols, a)?;
            }
            elems = elems.checked_add(t * cols).ok_or(ShapeError::Overflow)?;
        }
        if x.len() != elems {
            return Err(ShapeError::Length { what: "grouped quantize input", expected: elems, got: x.len() }.into());
        }
        if elems == 0 {
            return Ok(());
        }
        self.bind()?;
        let mut qin = self.cold.qin.lock().unwrap_or_else(|e| e.into_inner());
        let src = self.stage_in(&mut qin, x)?;
        self.act_epoch.fetch_add(1, Ordering::Relaxed);
        let m = self.module(Module::Quant)?;
        // Runs of up to QGROUP consecutive jobs of one format, each one launch.
        let mut run: [QuantArgs; args::QGROUP] = [QuantArgs::default(); args::QGROUP];
        let (mut n, mut fmt, mut off) = (0usize, Format::Q8_0, 0u64);
        for (a, t) in jobs.iter().filter(|j| j.1 > 0) {
            let l = &a.layout;
            if n == args::QGROUP || (n > 0 && l.format != fmt) {
                self.quant_launch(m.as_ref(), fmt, &run[..n])?;
                n = 0;
            }
            fmt = l.format;
            run[n] = self.quant_args(src + 4 * off, *t, a);
            n += 1;
            off += (t * l.cols) as u64;
        }
        self.quant_launch(m.as_ref(), fmt, &run[..n])
    }

    /// Copy `x` into the pinned input stage (grown as needed) and queue its DMA to the
    /// device; returns the device copy's address.
    fn stage_in(&self, slot: &mut Option<InStage>, x: &[f32]) -> Result<u64> {
        if let Some(s) = slot.as_ref() {
            // The last DMA out of the pinned buffer is done before it is written or freed.
            s.done.synchronize()?;
        }
        if slot.as_ref().is_none_or(|s| s.host.len < x.len()) {
            let len = x.len().next_power_of_two().max(1 << 14);
            *slot = None;
            *slot = Some(InStage {
                host: HostStage::new(&self.ctx, len)?,
                dev: self.stream.alloc_zeros::<f32>(len)?,
                done: self.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))?,
            });
        }
        let s = slot.as_mut().expect("staged above");
        // SAFETY: `s.host.host` is a live pinned allocation of `s.host.len >= x.len()` f32,
        // owned by this InStage (under the caller's lock), and no DMA reads it any more (the
        // wait above); `x` is a separate caller slice.
        let pinned = unsafe {
            std::ptr::copy_nonoverlapping(x.as_ptr(), s.host.host as *mut f32, x.len());
            std::slice::from_raw_parts(s.host.host as *const f32, x.len())
        };
        let dev = dptr(&s.dev, &self.stream);
        // SAFETY: `dev` has room for `s.host.len >= x.len()` f32; the source is pinned, so the
        // copy runs asynchronously on this backend's stream, and `done` (recorded after it)
        // keeps the pinned buffer unwritten and alive until it has run.
        unsafe { result::memcpy_htod_async(dev, pinned, self.stream.cu_stream()) }?;
        s.done.record(&self.stream)?;
        Ok(dev)
    }

    /// Quantize `tokens` rows already on the device (`x`: `tokens x cols` f32).
    pub fn quantize_device(&self, x: &CudaF32, tokens: usize, acts: &mut CudaActs) -> Result<()> {
        self.check("activation buffer", acts)?;
        self.check("f32 buffer", x)?;
        let n = tokens.checked_mul(acts.layout.cols).ok_or(ShapeError::Overflow)?;
        if n > x.len {
            return Err(ShapeError::Length { what: "device activations", expected: n, got: x.len }.into());
        }
        let nt = self.act_tokens(n, acts)?;
        self.bind()?;
        self.quantize_ptr(x.ptr, nt, acts)
    }

    fn act_tokens(&self, elems: usize, acts: &CudaActs) -> Result<usize> {
        let cols = acts.layout.cols;
        if elems == 0 || !elems.is_multiple_of(cols) {
            return Err(ShapeError::Length { what: "activations ([tokens][cols])", expected: cols, got: elems }.into());
        }
        let nt = elems / cols;
        if nt > acts.layout.capacity {
            return Err(invalid(format!(
                "{nt} tokens exceed the activation buffer's capacity of {}",
                acts.layout.capacity
            )));
        }
        Ok(nt)
    }

    fn quantize_ptr(&self, x: u64, nt: usize, acts: &CudaActs) -> Result<()> {
        self.act_epoch.fetch_add(1, Ordering::Relaxed);
        let m = self.module(Module::Quant)?;
        self.quant_launch(m.as_ref(), acts.layout.format, &[self.quant_args(x, nt, acts)])
    }

    /// One launch quantizing `jobs` (1..=QGROUP, all of format `act`): the plain kernel for
    /// one, the grouped kernel for more.
    fn quant_launch(&self, m: &Loaded, act: Format, jobs: &[QuantArgs]) -> Result<()> {
        let k = match act {
            Format::Q8_0 => 0,
            Format::Q8_1 => 1,
            _ => 2,
        };
        if let [a] = jobs {
            let (grid, block) = args::quant_launch(act, a.cols as usize, a.tokens as usize);
            return self.launch(&m.quant[k], grid, block, a);
        }
        let g =
            args::QuantGroupArgs::new(act, jobs).ok_or_else(|| invalid("grouped quantize of no or too many jobs"))?;
        let (grid, block) = args::quant_group_launch(act, g.end[jobs.len() - 1]);
        self.launch(&m.quant[3 + k], grid, block, &g)
    }

    fn quant_args(&self, x: u64, nt: usize, acts: &CudaActs) -> QuantArgs {
        let l = &acts.layout;
        QuantArgs {
            x,
            qs: acts.ptr(l.qs),
            d16: if l.d16 == 0 && l.format == Format::Q8_K { 0 } else { acts.ptr(l.d16) },
            d32: acts.ptr(l.d32),
            x16: if l.x16 == 0 { 0 } else { acts.ptr(l.x16) },
            x32: if l.x32 == 0 { 0 } else { acts.ptr(l.x32) },
            cols: l.cols as u32,
            tokens: nt as u32,
            capw: l.capw as u32,
            pad: 0,
        }
    }

    /// Import activations already quantized (`tokens` ggml rows). Bytes of -128 are refused,
    /// as in `qkern`: ggml's quantizers never emit them and the AVX2 sign trick gives them an
    /// artefactual sign that the kernels do not reproduce.
    pub fn import(&self, bytes: &[u8], acts: &mut CudaActs) -> Result<()> {
        self.check("activation buffer", acts)?;
        let l = acts.layout;
        let rb = l.format.row_bytes(l.cols)?;
        if bytes.is_empty() || !bytes.len().is_multiple_of(rb) {
            return Err(ShapeError::ByteLength { what: "quantized activations", expected: rb, got: bytes.len() }.into());
        }
        let nt = bytes.len() / rb;
        if nt > l.capacity {
            return Err(invalid(format!("{nt} tokens exceed the activation buffer's capacity of {}", l.capacity)));
        }
        let img = l.from_ggml(bytes, nt);
        if l.has_minus_128(&img, nt) {
            return Err(invalid("activation bytes of -128 are not supported (ggml's quantizers never produce them)"));
        }
        self.bind()?;
        self.act_epoch.fetch_add(1, Ordering::Relaxed);
        unsafe { result::memcpy_htod_async(acts.base, &img, self.stream.cu_stream()) }?;
        self.stream.synchronize()?;
        Ok(())
    }

    /// The ggml bytes of the first `tokens` tokens of `acts` (waits).
    pub fn read_acts(&self, acts: &CudaActs, tokens: usize, out: &mut [u8]) -> Result<()> {
        self.check("activation buffer", acts)?;
        let l = acts.layout;
        let rb = l.format.row_bytes(l.cols)?;
        if tokens > l.capacity || out.len() != tokens * rb {
            return Err(
                ShapeError::ByteLength { what: "activation read-back", expected: tokens * rb, got: out.len() }.into()
            );
        }
        self.bind()?;
        let mut img = vec![0u8; l.total];
        unsafe { result::memcpy_dtoh_async(&mut img, acts.base, self.stream.cu_stream()) }?;
        self.stream.synchronize()?;
        l.to_ggml(&img, tokens, out);
        Ok(())
    }

    // ------------------------------------------------------------------ matmul

    fn job(&self, w: &CudaWeights, acts: &CudaActs, tokens: usize, out: u64) -> Result<MmJobDesc> {
        self.check("weights", w)?;
        self.check("activation buffer", acts)?;
        let want = w.format.vec_dot_type().unwrap_or(Format::Q8_0);
        if acts.layout.format != want {
            return Err(ShapeError::Pairing { weights: w.format, expected: want, got: acts.layout.format }.into());
        }
        if acts.layout.cols != w.cols {
            return Err(invalid(format!("weights have {} columns but activations have {}", w.cols, acts.layout.cols)));
        }
        if tokens == 0 {
            return Err(ShapeError::ZeroTokens.into());
        }
        if tokens > acts.layout.capacity {
            return Err(invalid(format!(
                "{tokens} tokens exceed the activation buffer's capacity of {}",
                acts.layout.capacity
            )));
        }
        let l = &acts.layout;
        Ok(MmJobDesc {
            w: w.w,
            wd: w.wd,
            a_qs: acts.ptr(l.qs),
            a_d: acts.ptr(l.d32),
            a_x: match l.format {
                Format::Q8_1 => acts.ptr(l.x32),
                Format::Q8_K => acts.ptr(l.x16),
                _ => 0,
            },
            out,
            rows: w.rows as u32,
            tokens: tokens as u32,
            capw: l.capw as u32,
            act_blocks: l.blocks as u32,
            a_base: acts.base,
            a_len: l.total as u64,
        })
    }

    /// Rows below which the S = 4 kernels (4x more threads per row) are used for the
    /// 256-element formats, or the two-phase small-K kernel for the 32-element ones. The
    /// 256-element formats run 2 threads per row at S = 1 and take S = 4 below 64 rows per SM
    /// (128 threads): on the H200 a 640-row q4_K expert ran in 9.2 us with S = 4 against 15.7
    /// with S = 1, and 1 GiB (466k rows) at 3034 against 1599 GB/s
    /// (benches/results/2026-12-04-h200-session7/run2).
    fn s4_rows(&self, format: Format) -> u64 {
        match self.s4_override.load(Ordering::Relaxed) {
            NO_OVERRIDE if args::has_split(format) => self.sms as u64 * 64,
            NO_OVERRIDE => self.sms as u64 * 128,
            v => v,
        }
    }

    /// From how many tokens the formats with a tensor-core kernel (`args::has_mma`) use it
    /// (`Some(0)`: never; `None`: each format's default token counts, `args::mma_default_mask`). The bits are
    /// the same either way; the kernels need compute capability 8.0, so on older devices only
    /// `Some(0)` and `None` (never, there) are valid.
    pub fn set_mma_tokens(&self, n: Option<u32>) -> Result<()> {
        let old = self.arch.trim_start_matches("sm_").parse::<u32>().map(|v| v < 80).unwrap_or(true);
        let v = match n {
            None if old => 0,
            None => u32::MAX,
            Some(n) if n > args::MAX_NT as u32 || (n > 0 && old) => {
                return Err(invalid(format!("tensor-core kernels from {n} tokens: not available on {}", self.arch)));
            }
            Some(n) => args::row_mask_from(n),
        };
        self.mma_mask.store(v, Ordering::Relaxed);
        Ok(())
    }

    /// From how many tokens the 32-element formats run their one-thread-per-row kernels in
    /// large launches (`Some(0)`: never; `None`: each format's default token counts,
    /// `args::row_default_mask`). The bits are the same either way.
    pub fn set_row_tokens(&self, n: Option<u32>) -> Result<()> {
        store_token_mask(&self.row_mask, n, "one-thread-per-row kernels")
    }

    /// From how many tokens the 32-element formats run the one-thread-per-row kernels that
    /// read a staged copy of the activations (`qk_mmc_*`: from their own shared memory, or on
    /// GPUs with less of it from the constant bank; off the L1 either way), in large launches
    /// whose copy fits (`args::sact_bytes` within `args::SACT_BYTES`; the bank: one activation
    /// buffer within `args::CACT_BYTES`; else `set_row_tokens` decides). `Some(0)`: never;
    /// `None`: each format's default (`args::cact_default_mask`). The bits are the same either
    /// way.
    pub fn set_cact_tokens(&self, n: Option<u32>) -> Result<()> {
        store_token_mask(&self.cact_mask, n, "staged-activation row kernels")
    }

    fn cact_mask(&self, format: Format) -> u32 {
        token_mask(&self.cact_mask, args::cact_default_mask(format, kernels::cact_smem(self.arch)))
    }

    /// From how many tokens the staged launches (`set_cact_tokens`) of iq4_nl and q5_1 run on
    /// two threads a row (`args::has_pair`, `qk_mmp_*`: half the accumulators a thread;
    /// iq4_nl's even blocks on one thread and its odd ones on the other, q5_1's lanes 0-3 and
    /// 4-7). `Some(0)`: never; `None`: each format's default (`args::pair_default_mask`).
    /// The staged masks' defaults count on these: with `Some(0)` q5_1 at 2 tokens and iq4_nl
    /// at 7-8 run their one-thread staged kernels, slower than before session 27's change
    /// (q5_1 NT 2 2561 against 2647 GB/s, H100 run7). The bits are the same either way.
    pub fn set_pair_tokens(&self, n: Option<u32>) -> Result<()> {
        store_token_mask(&self.pair_mask, n, "two-thread staged row kernels")
    }

    fn pair_mask(&self, format: Format) -> u32 {
        token_mask(&self.pair_mask, args::pair_default_mask(format))
    }

    /// Whether small launches of q4_K with at most 16 blocks per row (a MoE expert's gate and
    /// up projections) run its two-phase kernel (`args::has_mmk`; by default
    /// `args::KQ_MMK_DEFAULT`, on; `QKERN_CUDA_KQ_MMK=0|1`). The bits are the same either way.
    pub fn set_kq_two_phase(&self, on: bool) {
        self.kq_mmk.store(on, Ordering::Relaxed);
    }

    /// Whether large launches run an 8-token chunk as two chunks of 4 (`args::PlanKnobs::split8`):
    /// `Some` for every format, `None` for each format's default (`args::split8_default`;
    /// `QKERN_CUDA_SPLIT8=0|1`), except where the chunk runs on the staged two-threads-a-row
    /// kernel (`set_pair_tokens`), which stays whole. The bits are the same either way.
    pub fn set_split8(&self, on: Option<bool>) {
        self.split8.store(on.map_or(0, |o| 1 + o as u8), Ordering::Relaxed);
    }

    fn split8(&self, format: Format) -> bool {
        match self.split8.load(Ordering::Relaxed) {
            0 => args::split8_default(format),
            v => v == 2,
        }
    }

    fn row_mask(&self, format: Format) -> u32 {
        token_mask(&self.row_mask, args::row_default_mask(format))
    }

    fn mma_mask(&self, format: Format) -> u32 {
        token_mask(&self.mma_mask, args::mma_default_mask(format))
    }

    /// Tests and benchmarks: force the lane-split choice of the 256-element formats
    /// (`Some(0)`: always S = 1, `Some(u64::MAX)`: always S = 4, `None`: by size).
    pub fn set_split_threshold(&self, rows: Option<u64>) {
        self.s4_override.store(rows.unwrap_or(NO_OVERRIDE), Ordering::Relaxed);
    }

    fn run_jobs(&self, format: Format, cols: usize, jobs: impl IntoIterator<Item = MmJobDesc>) -> Result<()> {
        let m = self.module(Module::Weights(format))?;
        let k = args::PlanKnobs {
            s4_rows: self.s4_rows(format),
            min_ctas: 2 * self.sms as u64,
            mma_mask: self.mma_mask(format),
            row_mask: self.row_mask(format),
            kq_mmk: self.kq_mmk.load(Ordering::Relaxed),
            cact_mask: if m.cact.is_some() { self.cact_mask(format) } else { 0 },
            cact_smem: kernels::cact_smem(self.arch),
            pair_mask: self.pair_mask(format),
            split8: self.split8(format),
        };
        args::plan_matmul(format, cols, self.tab, jobs, k, |l, a| {
            let f = m.mm[l.kernel].as_ref().ok_or_else(|| invalid("missing matmul kernel"))?;
            let Some((src, n)) = l.stage else {
                // (the shared-memory row kernels copy their tokens themselves)
                return self.launch_shared(f, l.grid, l.block, l.shared, a);
            };
            let bank = m.cact.as_ref().ok_or_else(|| invalid("constant-bank kernel without a bank"))?;
            if n > bank.bytes {
                return Err(invalid(format!("{n} activation bytes exceed the constant bank's {}", bank.bytes)));
            }
            let mut held = bank.held.lock().unwrap_or_else(|e| e.into_inner());
            let key = (src, n, self.act_epoch.load(Ordering::Relaxed));
            if *held != Some(key) {
                *held = None;
                // SAFETY: `bank.ptr` is this module's `qk_cact`, `bank.bytes` long (n <= that);
                // `src .. src + n` is the activation buffer of a job validated by `job` (its
                // whole layout, alive for the call); ordered on this backend's stream before
                // the launch below, after every earlier launch that read the bank.
                unsafe { result::memcpy_dtod_async(bank.ptr, src, n as usize, self.stream.cu_stream()) }?;
                *held = Some(key);
            }
            self.launch(f, l.grid, l.block, a)
        })
    }

    fn with_scratch<R>(&self, n: usize, f: impl FnOnce(u64) -> Result<R>) -> Result<R> {
        let mut s = self.cold.scratch.lock().unwrap_or_else(|e| e.into_inner());
        if s.as_ref().is_none_or(|b| b.len() < n) {
            *s = Some(self.stream.alloc_zeros::<f32>(n.max(1024))?);
        }
        let p = dptr(s.as_ref().expect("scratch"), &self.stream);
        f(p)
    }

    /// `out[t * rows + r] = vec_dot(weight row r, token t)` for the first `tokens` tokens of
    /// `acts`; waits for the result, brought back by [`CudaBackend::host_out`] (by default the
    /// kernels write pinned host memory, large matrices in row chunks whose host copies
    /// overlap the next chunk's kernel). Allocates nothing once the internal output buffers
    /// have reached this size.
    pub fn matmul(&self, w: &CudaWeights, acts: &CudaActs, tokens: usize, out: &mut [f32]) -> Result<()> {
        let want = tokens.checked_mul(w.rows).ok_or(ShapeError::Overflow)?;
        if out.len() != want {
            return Err(ShapeError::Length { what: "output ([tokens][rows])", expected: want, got: out.len() }.into());
        }
        self.bind()?;
        // Validate before anything is launched.
        self.job(w, acts, tokens, 0)?;
        if self.host_out() == HostOut::Chunked && w.rows >= 2 * CHUNK_ROWS {
            return self.matmul_chunked(w, acts, tokens, out);
        }
        self.to_host(out, |p| {
            let j = self.job(w, acts, tokens, p)?;
            self.run_jobs(w.format, w.cols, [j])
        })
    }

    /// [`HostOut::Chunked`] for a large matmul: row chunks (multiples of the 16-row tile)
    /// as sub-matrices, each into its own `[tokens][chunk rows]` region of the mapped stage
    /// and followed by a flag write; the host copies each chunk's rows into `out` as soon as
    /// its flag arrives. Every row is computed by the same kernels as in one launch (the
    /// chunks are large enough to keep the plan's choices), so the bits are the same.
    fn matmul_chunked(&self, w: &CudaWeights, acts: &CudaActs, tokens: usize, out: &mut [f32]) -> Result<()> {
        let rows = w.rows;
        let layout = WeightLayout::of(w.format)?;
        let nb = w.cols / w.format.block_elems();
        let step = rows.div_ceil(8).max(CHUNK_ROWS).next_multiple_of(crate::layout::TILE);
        let n = out.len();
        let st = self.stage(n)?;
        let stage = st.as_ref().expect("stage: made by CudaBackend::stage");
        let mut fl = self.flag()?;
        let f = fl.as_mut().expect("flag");
        let base = self.job(w, acts, tokens, 0)?;
        let mut marks = [0u32; 8];
        let chunks = rows.div_ceil(step);
        let queued = (|| -> Result<()> {
            for (c, m) in marks.iter_mut().enumerate().take(chunks) {
                let (r0, r1) = (c * step, ((c + 1) * step).min(rows));
                let mut j = base;
                j.w = w.w + (r0 * nb * layout.body) as u64;
                j.wd = if w.wd == 0 { 0 } else { w.wd + (r0 * nb * layout.d_bytes) as u64 };
                j.rows = (r1 - r0) as u32;
                j.out = stage.dev + (4 * tokens * r0) as u64;
                self.run_jobs(w.format, w.cols, [j])?;
                *m = self.signal(f)?;
            }
            Ok(())
        })();
        if let Err(e) = queued {
            // Nothing may still write into the stage once the lock is released.
            let _ = self.stream.synchronize();
            return Err(e);
        }
        // SAFETY: the stage holds at least n f32, owned by this backend, used under the lock.
        let host = unsafe { std::slice::from_raw_parts(stage.host as *const f32, n) };
        for (c, &m) in marks.iter().enumerate().take(chunks) {
            let (r0, r1) = (c * step, ((c + 1) * step).min(rows));
            if let Err(e) = self.wait_flag(f, m) {
                let _ = self.stream.synchronize();
                return Err(e);
            }
            let cr = r1 - r0;
            let region = &host[tokens * r0..tokens * r1];
            let pairs = region.chunks(cr).zip(out.chunks_mut(rows)).map(|(s, d)| (s, &mut d[r0..r1]));
            par_copy(self.cold.copy_pool.as_ref(), tokens * cr, pairs);
        }
        Ok(())
    }

    /// Run `launch(device output address)` and bring its `out.len()` f32 back into `out`
    /// (waits), by [`CudaBackend::host_out`]'s method. Allocates nothing once the buffers
    /// have grown to size.
    fn to_host(&self, out: &mut [f32], launch: impl FnOnce(u64) -> Result<()>) -> Result<()> {
        let n = out.len();
        let mode = self.host_out();
        if mode == HostOut::Pageable {
            return self.with_scratch(n, |p| {
                launch(p)?;
                // SAFETY: `p` is the scratch buffer of at least `n` f32 and `out` holds `n`;
                // the wait below ends the copy before `out` is touched again.
                unsafe { result::memcpy_dtoh_async(out, p, self.stream.cu_stream()) }?;
                self.wait()
            });
        }
        let st = self.stage(n)?;
        let stage = st.as_ref().expect("stage: made by CudaBackend::stage");
        // SAFETY: the stage holds at least n f32, owned by this backend, used under the lock.
        let host = unsafe { std::slice::from_raw_parts_mut(stage.host as *mut f32, n) };
        if matches!(mode, HostOut::Mapped | HostOut::Chunked) {
            launch(stage.dev)?;
            self.wait()?;
        } else {
            self.with_scratch(n, |p| {
                launch(p)?;
                // SAFETY: as above, into the locked stage's `n` f32; the wait ends the copy.
                unsafe { result::memcpy_dtoh_async(&mut *host, p, self.stream.cu_stream()) }?;
                self.wait()
            })?;
        }
        par_copy(self.cold.copy_pool.as_ref(), n, std::iter::once((&*host, out)));
        Ok(())
    }

    /// As [`CudaBackend::matmul`], into a device buffer (`out.len() >= tokens * rows`);
    /// returns without waiting.
    pub fn matmul_device(&self, w: &CudaWeights, acts: &CudaActs, tokens: usize, out: &mut CudaF32) -> Result<()> {
        self.check("f32 buffer", out)?;
        let want = tokens.checked_mul(w.rows).ok_or(ShapeError::Overflow)?;
        if out.len < want {
            return Err(ShapeError::Length { what: "device output", expected: want, got: out.len }.into());
        }
        self.bind()?;
        let j = self.job(w, acts, tokens, out.ptr)?;
        self.run_jobs(w.format, w.cols, [j])
    }

    fn group_total(jobs: &[(&CudaWeights, &CudaActs, usize)]) -> Result<(Format, usize, usize)> {
        let (w0, _, _) = jobs.first().ok_or_else(|| invalid("a grouped matmul needs at least one job"))?;
        let mut total = 0usize;
        for (w, _, t) in jobs {
            if w.format != w0.format || w.cols != w0.cols {
                return Err(invalid(format!(
                    "a grouped matmul runs one format and width: {} x{} and {} x{}",
                    w0.format, w0.cols, w.format, w.cols
                )));
            }
            total =
                total.checked_add(t.checked_mul(w.rows).ok_or(ShapeError::Overflow)?).ok_or(ShapeError::Overflow)?;
        }
        Ok((w0.format, w0.cols, total))
    }

    /// Several matmuls of one format and width (e.g. a layer's routed experts, each with its
    /// own tokens) in as few launches as possible (one per 16 jobs of at most 8 tokens).
    /// Job i's `[tokens_i][rows_i]` result lands at `out[offset_i..]`, offsets consecutive
    /// in job order. Returns without waiting.
    pub fn matmul_grouped(&self, jobs: &[(&CudaWeights, &CudaActs, usize)], out: &mut CudaF32) -> Result<()> {
        self.check("f32 buffer", out)?;
        let (format, cols, total) = Self::group_total(jobs)?;
        if out.len < total {
            return Err(ShapeError::Length { what: "grouped device output", expected: total, got: out.len }.into());
        }
        self.bind()?;
        self.grouped_into(format, cols, jobs, out.ptr)
    }

    fn grouped_into(
        &self,
        format: Format,
        cols: usize,
        jobs: &[(&CudaWeights, &CudaActs, usize)],
        p: u64,
    ) -> Result<()> {
        // Validate everything before the first launch.
        for (w, a, t) in jobs {
            self.job(w, a, *t, p)?;
        }
        let mut off = 0u64;
        let iter = jobs.iter().map(|(w, a, t)| {
            let j = self.job(w, a, *t, p + 4 * off).expect("validated above");
            off += (*t * w.rows) as u64;
            j
        });
        self.run_jobs(format, cols, iter)
    }

    /// As [`CudaBackend::matmul_grouped`], results copied to `out` (all jobs' outputs
    /// concatenated); waits.
    pub fn matmul_grouped_host(&self, jobs: &[(&CudaWeights, &CudaActs, usize)], out: &mut [f32]) -> Result<()> {
        let (format, cols, total) = Self::group_total(jobs)?;
        if out.len() != total {
            return Err(ShapeError::Length { what: "grouped output", expected: total, got: out.len() }.into());
        }
        self.bind()?;
        for (w, a, t) in jobs {
            self.job(w, a, *t, 0)?;
        }
        self.to_host(out, |p| self.grouped_into(format, cols, jobs, p))
    }

    // ------------------------------------------------------------------ dequantize

    fn dequantize_raw(&self, w: &CudaWeights, kind: DeqKind, out: u64) -> Result<()> {
        let m = self.module(Module::Weights(w.format))?;
        let f = m.deq.as_ref().ok_or_else(|| invalid("missing dequantize kernel"))?;
        let a = DeqArgs {
            w: w.w,
            wd: w.wd,
            out,
            tab: self.tab,
            rows: w.rows as u32,
            cols: w.cols as u32,
            kind: kind as u32,
            pad: 0,
        };
        let (grid, block) = args::deq_launch((w.rows * w.cols) as u64);
        self.launch(f, grid, block, &a)
    }

    /// Dequantize all weights to f32 (`out.len() == rows * cols`), as ggml's `to_float`.
    pub fn dequantize(&self, w: &CudaWeights, out: &mut [f32]) -> Result<()> {
        self.check("weights", w)?;
        let n = w.rows * w.cols;
        if out.len() != n {
            return Err(ShapeError::Length { what: "dequantize output", expected: n, got: out.len() }.into());
        }
        self.bind()?;
        let buf = self.stream.alloc_zeros::<f32>(n)?;
        self.dequantize_raw(w, DeqKind::F32, dptr(&buf, &self.stream))?;
        unsafe { result::memcpy_dtoh_async(out, dptr(&buf, &self.stream), self.stream.cu_stream()) }?;
        self.stream.synchronize()?;
        Ok(())
    }

    /// Dequantize to fp16 or bf16 bits (`out.len() == rows * cols`): ggml's f32 values
    /// converted with ggml's `fp32_to_fp16` (round to nearest even, NaN -> sign|0x7E00) or
    /// `fp32_to_bf16` (round to nearest even, NaN quieted).
    pub fn dequantize_half(&self, w: &CudaWeights, kind: DeqKind, out: &mut [u16]) -> Result<()> {
        self.check("weights", w)?;
        let n = w.rows * w.cols;
        if out.len() != n || kind == DeqKind::F32 {
            return Err(ShapeError::Length { what: "dequantize output (f16/bf16)", expected: n, got: out.len() }.into());
        }
        self.bind()?;
        let buf = self.stream.alloc_zeros::<u16>(n)?;
        self.dequantize_raw(w, kind, dptr(&buf, &self.stream))?;
        unsafe { result::memcpy_dtoh_async(out, dptr(&buf, &self.stream), self.stream.cu_stream()) }?;
        self.stream.synchronize()?;
        Ok(())
    }

    /// Dequantize into device memory at `out` (a buffer of `rows*cols` elements of `kind`,
    /// e.g. for a later GEMM); returns without waiting.
    ///
    /// # Safety
    /// `out` must be a device address on this backend's context with room for
    /// `rows * cols` elements of `kind`.
    pub unsafe fn dequantize_to_device(&self, w: &CudaWeights, kind: DeqKind, out: u64) -> Result<()> {
        self.check("weights", w)?;
        self.bind()?;
        self.dequantize_raw(w, kind, out)
    }
}

trait Owned {
    fn owner(&self) -> u64;
}
impl Owned for CudaWeights {
    fn owner(&self) -> u64 {
        self.owner
    }
}
impl Owned for CudaActs {
    fn owner(&self) -> u64 {
        self.owner
    }
}
impl Owned for CudaF32 {
    fn owner(&self) -> u64 {
        self.owner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The token-count setters (`set_row_tokens`, `set_cact_tokens`, `set_pair_tokens`): more
    /// tokens than a launch holds is a typed error that leaves the slot as it was; `None` is
    /// the default, `Some(n)` "from n on", `Some(0)` never.
    #[test]
    fn token_masks_reject_too_many_tokens() {
        let slot = std::sync::atomic::AtomicU32::new(u32::MAX);
        store_token_mask(&slot, Some(3), "x").unwrap();
        assert_eq!(token_mask(&slot, 0x01), 0xfc);
        let e = store_token_mask(&slot, Some(args::MAX_NT as u32 + 1), "two-thread staged row kernels").unwrap_err();
        assert!(matches!(e, CudaError::Invalid(_)), "{e}");
        assert!(e.to_string().contains("two-thread staged row kernels"), "{e}");
        assert_eq!(token_mask(&slot, 0x01), 0xfc, "unchanged by the rejected value");
        store_token_mask(&slot, Some(0), "x").unwrap();
        assert_eq!(token_mask(&slot, 0x01), 0);
        store_token_mask(&slot, None, "x").unwrap();
        assert_eq!(token_mask(&slot, 0x01), 0x01);
    }

    #[test]
    fn par_copy_copies_every_piece() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let lens = [0usize, 1, 3, par::PAR_COPY_MIN / 8 - 1, par::PAR_COPY_MIN + 5, 70_001, 2 * par::PAR_COPY_MIN + 3];
        let src: Vec<Vec<f32>> =
            lens.iter().enumerate().map(|(k, &n)| (0..n).map(|i| (i * 7 + k) as f32).collect()).collect();
        for (pool, one) in [(Some(&pool), false), (Some(&pool), true), (None, false)] {
            let mut outs: Vec<Vec<f32>> = lens.iter().map(|&n| vec![f32::NAN; n]).collect();
            if one {
                // one pair at a time (the chunked path's per-chunk calls)
                for (s, o) in src.iter().zip(outs.iter_mut()) {
                    par_copy(pool, s.len(), std::iter::once((&s[..], &mut o[..])));
                }
            } else {
                let total = lens.iter().sum();
                par_copy(pool, total, src.iter().zip(outs.iter_mut()).map(|(s, o)| (&s[..], &mut o[..])));
            }
            assert_eq!(outs, src, "pool {} one {one}", pool.is_some());
        }
    }

    /// An environment knob's value: unset or empty is `None`, a known value parses, anything
    /// else is a typed error naming the variable (not silently the default).
    #[test]
    fn knobs_reject_unknown_values() {
        use qkern_formats::env::knob_value as knob;
        assert_eq!(knob("QKERN_CUDA_WAIT", None, "x", WaitMode::parse).unwrap(), None);
        assert_eq!(knob("QKERN_CUDA_WAIT", Some("flag".into()), "x", WaitMode::parse).unwrap(), Some(WaitMode::Flag));
        let e = knob("QKERN_CUDA_WAIT", Some("flg".into()), "sync, query or flag", WaitMode::parse).unwrap_err();
        let e = CudaError::from(e);
        assert!(matches!(e, CudaError::Env(_)));
        assert_eq!(e.to_string(), "QKERN_CUDA_WAIT=\"flg\": expected sync, query or flag");
        assert_eq!(knob("QKERN_CUDA_MMA_NT", Some("0".into()), "x", parse_mma_nt).unwrap(), Some(0));
        assert_eq!(knob("QKERN_CUDA_MMA_NT", Some("8".into()), "x", parse_mma_nt).unwrap(), Some(8));
        assert!(knob("QKERN_CUDA_MMA_NT", Some("9".into()), "x", parse_mma_nt).is_err());
        assert!(knob("QKERN_CUDA_MMA_NT", Some("two".into()), "x", parse_mma_nt).is_err());
        assert_eq!(knob("QKERN_CUDA_KQ_MMK", Some("1".into()), "x", qkern_formats::env::switch).unwrap(), Some(true));
        assert_eq!(knob("QKERN_CUDA_KQ_MMK", Some("0".into()), "x", qkern_formats::env::switch).unwrap(), Some(false));
        assert!(knob("QKERN_CUDA_KQ_MMK", Some("on".into()), "x", qkern_formats::env::switch).is_err());
        assert_eq!(knob("QKERN_CUDA_COPY_THREADS", Some("8".into()), "x", par::parse_copy_threads).unwrap(), Some(8));
        assert!(knob("QKERN_CUDA_COPY_THREADS", Some("0".into()), "x", par::parse_copy_threads).is_err());
        assert!(knob("QKERN_CUDA_COPY_THREADS", Some("65".into()), "x", par::parse_copy_threads).is_err());
    }
}
