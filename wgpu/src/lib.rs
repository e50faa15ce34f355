//! `qkern-wgpu` is qkern's portable GPU backend: WGSL compute kernels on wgpu 30 (Vulkan,
//! Metal, DX12) for every weight format, bit-identical to ggml 0.26.0's x86 AVX2 kernels
//! (`shared/REFERENCE.md`): dequantize, activation quantize (q8_0, q8_1, q8_K) on the device,
//! and matmul for 1..=8 tokens per dispatch (more in chunks of 8).
//!
//! The `qkern` facade (feature `wgpu`) calls [`WgpuBackend`]; the API here is the small one
//! every GPU backend crate offers: `new(index)`, `name()`, `upload_weights`, `alloc_acts`,
//! `quantize`, `import`, `read_acts`, `matmul`, `dequantize`.
//!
//! # Adapter choice
//!
//! The instance honours wgpu's environment variables (`WGPU_BACKEND`, ...). `new(None)` takes
//! the adapter named by `WGPU_ADAPTER_NAME` (a case-insensitive substring) if set, else wgpu's
//! default (`WGPU_POWER_PREF`, high performance unless set); `new(Some(n))` takes the n-th
//! adapter of `Instance::enumerate_adapters` ([`adapters`] lists them).
//!
//! # Device layout
//!
//! With [`Tuning::ktile`] off, the 256-element formats but q6_K and iq4_xs stay in ggml's
//! block bytes in storage buffers read as u32 words (blocks that are only 2-byte aligned are
//! read by funnel-shifting two words); the thread-pair kernels of the K-quants and iq4_xs
//! (`wgsl/kpair_head.wgsl`) give a row 2 invocations of 4 AVX2 lanes each and read q4_K and q5_K as 16-byte words. With
//! [`Tuning::ktile`] (the default) q4_K's and q5_K's blocks are stored whole in the tiled
//! order below, and the IQ2/IQ3 formats' split as the CUDA backend splits them (their bodies,
//! 4-byte aligned, in the tiled order, then their fp16 `d`). The
//! 32-element formats (q8_0, q5_1, iq4_nl, nvfp4) are repacked on upload into the *pair
//! layout* (`src/layout.rs`: quants and scales in two regions, rows tiled by 16, each of a
//! row's two invocations reading its share of a block with one 16- or 8-byte load; no byte
//! added), q6_K and iq4_xs into the same tiled two regions, their quants permuted so that each
//! invocation reads its share of a block in 16-byte loads. A matrix larger than `max_storage_buffer_binding_size` (128 MiB on lavapipe) is
//! split by whole rows into parts, one buffer and one dispatch each. Activations: q8_0 and
//! q8_1 rows as `[quants of every block][d of every block as f32]([s as f32])`, padded to 16
//! bytes; q8_K ([`Q8kLayout`]) by default per token as ggml's own 292-byte blocks (read by
//! the K-quants, iq4_xs and the IQ2/IQ3 kernels at few tokens) followed by a *split* copy, the
//! quants of every block, then the bsums, then the d (read by the IQ2/IQ3 thread pairs, from a
//! token count per format, [`iq_pairs_from`], and by iq4_xs's two-row pairs at 8 tokens);
//! `import` and `read_acts` convert exactly
//! (the fp16 -> f32 widening is injective, NaN payloads included).
//!
//! # Bits
//!
//! Integer lane sums use packed 4x8 dot products, exact in any order (the IQ2/IQ3 kernels
//! decode one sub-block per invocation and transpose-reduce the 8 lanes' partial sums with
//! exchanges, `tr8`; the lookup tables sit in workgroup memory). Every float chain keeps
//! the reference's order with `fmx()`, a fused multiply-add on every adapter: the adapter's
//! `fma()` where a probe at device creation (32,768 cases) measured it fused in every case of
//! the normal domain (see "Subnormals"), else an exact emulation from
//! unfused operations (`wgsl/fma.wgsl`: Dekker's product, TwoSum, round-to-odd; Boldo and
//! Melquiond 2008), every intermediate laundered through an integer XOR with a runtime zero
//! so that no driver can contract, reassociate or simplify it. No kernel writes `a*b + c`
//! with an inexact product, so whether a driver contracts it (naga's SPIR-V has no
//! `NoContraction`) cannot matter; where ggml's formula needs an unfused multiply-add
//! (q8_K's `iscale*x + 12582912`), the product is laundered first. Divisions are corrected to
//! round-to-nearest (`div_rn`: Vulkan allows 2.5 ulp); fp16 conversions are integer code.
//!
//! Measured ([`WgpuBackend::float_probe`], 65,536 cases, `tests/float_ops.rs`):
//!
//! - lavapipe (llvmpipe, LLVM 15.0.6, 256 bits; Mesa's Vulkan CPU driver): `fma()` is **not**
//!   fused: it equals the unfused `a*b + c` in all 65,536 cases, and in none of the 20,858
//!   where the fused result differs (so the kernels use the emulation there); a plain
//!   `a*b + c` is not contracted (65,536 of 65,536 unfused); native division was correctly
//!   rounded; `unpack2x16float`, `round()` (ties to even), `f32(i32)` and subnormal results
//!   exact.
//! - NVIDIA H200, Vulkan driver 580 (`benches/results/2026-12-03-h200-cuda/run2-*`): subnormal
//!   results and inputs are flushed to zero (FTZ): subnormal products exact in only 8,868 of
//!   15,223 cases (those that round to zero anyway), additions with a subnormal operand in
//!   1,308 of 8,264. Every other mismatch of that run is a subnormal case: `a*b + c` equals the
//!   unfused result in 60,927 of 65,536 cases and the fused one in 0 of the 20,858 where they
//!   differ (no contraction); `fma()` matched `f32::mul_add` in 64,683. The probe therefore
//!   judges `fma()` (and the float_ops test everything else) on the normal domain only: no
//!   subnormal operand, exact product or result. Where `fma()` is fused there, the kernels use
//!   it ("fma" in the backend's name), else the emulation, which is exact in its range under
//!   FTZ too (44,598 of 44,598 on the H200).
//!
//! # Subnormals
//!
//! The kernels' results do not depend on whether an adapter flushes subnormals, for all of
//! ggml's fp16 scales, subnormal ones included: an fp16 value is a multiple of 2^-24 (and
//! normal as an f32), so with fp16 activation scales (q8_0, q8_1) each chain term
//! `d * lane` with `d = dx * dy` is a multiple of Q = 2^-48 (nvfp4's UE4M3 scales: 2^-34), and
//! rounding a multiple of a power of two Q to f32 gives a multiple of Q (exact below 2^24 Q,
//! a coarser power-of-two grid above), so every accumulator, hsum and final scaling (x0.125)
//! is zero or at least 2^-51 in magnitude: never subnormal. With q8_K activations the scale
//! `dy` is an f32 of exponent E; the same argument gives multiples of 2^(E-47), normal for
//! E >= -76 (`dy >= 2^-76`, an activation block whose largest |x| is at least ~1.7e-21).
//! Below that (and for activation quantization of blocks whose largest |x| is below ~2^-117,
//! whose subnormal elements and scale flush), an FTZ adapter can differ from the reference;
//! an adapter that keeps subnormals (lavapipe) cannot. `tests/random_parity.rs`
//! (`tiny_scales`) checks the first claim on every adapter and the second where subnormals
//! are kept, and reports the FTZ differences below the bound.
//!
//! Activations with a byte of -128 (never produced by ggml's quantizers; rejected by
//! `qkern`'s `import_activations`) are outside the contract here: the kernels compute exact
//! products, not the AVX2 sign trick's artefact.
//!
//! # Variants
//!
//! [`Tuning`] (set by [`Options`], environment variables or [`WgpuBackend::set_tuning`])
//! picks among kernel variants that give the same bits: native or emulated fma, which of
//! wgpu's shader runtime checks stay ([`Checks`]; default: none, every index being in bounds
//! by construction: the H200 measured the bounds checks at 7 % on average, up to 1.5x),
//! blocks per loop iteration (default per format, `unroll_of`), rows per workgroup, rows per
//! pair of invocations ([`Tuning::pair_rows`]), loops unrolled in the source, and the pair
//! activations staged in workgroup memory ([`Tuning::stage`]: by default per format and token
//! count, on wider workgroups in calls of at least [`STAGE_ROWS`] rows; on an H100 q5_1 at 8
//! tokens went from 952 to 1267 GB/s, iq4_nl from 678 to 937, q6_K from 840 to 1677).
//! `examples/bench.rs --variants` times them side by side in one process.
//!
//! # Cooperative matrices (q4_K, q5_K, IQ2/IQ3; opt-in)
//!
//! At 8 tokens the thread-pair kernels are bound by their integer work (per lane, token and
//! block 8 packed dot products and 8 scale multiplies), 2-4x their one-token time on the H200.
//! [`Coop`] (`QKERN_WGPU_COOP`) runs the lane sums of q4_K, q5_K and the IQ2/IQ3 formats as
//! 16 x 16 x 16 tile products instead (`wgsl/kc_common.wgsl`), the CUDA backend's tensor-core
//! route in WGSL: f16 tiles of `scale * quant` (q4_K's biased by 1024: two per word from one
//! integer multiply-add; the IQ formats' signed grid bytes times their scale) and of
//! the activations, f32 sums, every value an integer below 2^24, so exact; then the same float
//! chains. wgpu 30 exposes its experimental cooperative
//! matrices where the Vulkan driver lists a configuration, and naga 30 takes f16 16 x 16
//! tiles (wgpu-types' documentation still says 8 x 8 f32 only); NVIDIA's driver lists f16 16
//! x 16 x 16 -> f32. The tile products also run emulated by plain invocations
//! ([`Coop::Emulated`]), the same sums, which is how `tests/random_parity.rs` checks the
//! kernel on lavapipe (and natively where the adapter has the tiles). Off by default: on the
//! H200 (NVIDIA Vulkan driver 580, benches/results/2026-12-05-h200-session13 run2) the tiles
//! staged in f16 arrays give the reference's bits at every NT but run 5-8x slower than the
//! thread pairs (q4_K NT 1 317 GB/s against 2475, NT 8 295 against 578; the IQ formats
//! 115-193 against 286-1225), and the u32-staged tiles do not compile there.
//!
//! # Hot path
//!
//! `quantize` and `matmul` create no buffers: pipelines are built once per (kernel, format,
//! NT) and cached, bind groups are made with the buffers, and the output/readback scratch and
//! the parameter ring are reused (grown only when a call needs more than any before). A
//! matmul whose parameters equal the previous call's does not rewrite the ring; otherwise
//! (and for `quantize`'s input) `Queue::write_buffer` stages the bytes, which wgpu does in a
//! staging buffer of its own.
//!
//! A call's cost beyond its kernel, measured on the H200 (`examples/bench.rs --latency`,
//! benches/results/2026-12-03-h200-session5, 2026-12-04-h200-session8 and -session9): about
//! 30-40 us for a small result with the default spin wait (75 us blocking,
//! [`Options::spin_wait`]), plus the result's way to the host. On GPU adapters the kernels
//! write their results straight into a mappable host-visible buffer ([`Options::direct_out`]),
//! and the host copies them out of it with several threads ([`Options::copy_threads`]; one
//! copied 12-17 GB/s there). Without direct output a copy pass moves the results to a readback
//! buffer, and from 2 MiB of results a call runs in row chunks, each with its own submission
//! and readback buffer, so that the host copies one chunk while the device computes the next
//! ([`Tuning::chunks`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use qkern_formats::{Format, ShapeError, par};

mod layout;
pub mod probe;
mod shaders;

pub use probe::FloatReport;

/// Tokens per matmul dispatch (longer batches run in chunks of this many).
pub const MAX_NT: usize = 8;

/// Padding after every buffer's data (the kernels' funnel-shift reads one word ahead).
const PAD: u64 = 16;

/// Bytes of one parameter slot (uniform dynamic offsets must be multiples of the
/// adapter's alignment, 256 at most).
const SLOT: u64 = 256;

/// Parameter slots in the ring (dispatches per submission).
const SLOTS: u64 = 256;
/// Parameter slots of the quantizer's ring (dispatches per submission of a grouped quantize).
const QSLOTS: u64 = 64;
/// The most jobs a grouped run writes into a readback buffer each (with direct output): more
/// share one output buffer, as without direct output. (64: the gate and up matmuls of 32
/// experts, the engine's largest group at 16 tokens.)
const APART_JOBS: usize = 64;

/// Everything that can go wrong in this backend.
#[derive(Debug, thiserror::Error)]
pub enum WgpuError {
    #[error("no wgpu adapter: {0}")]
    NoAdapter(String),
    #[error("requesting the wgpu device failed: {0}")]
    Device(String),
    #[error(transparent)]
    Shape(#[from] ShapeError),
    #[error("{0}")]
    Unsupported(String),
    #[error("GPU error: {0}")]
    Gpu(String),
    #[error(transparent)]
    Env(#[from] qkern_formats::env::EnvError),
}

/// A tuning knob from the environment ([`qkern_formats::env::knob`]): `None` where unset or
/// empty, else its parsed value, or a typed error naming the variable, its value and what it
/// accepts.
fn env_knob<T>(name: &'static str, expected: &'static str, parse: impl Fn(&str) -> Option<T>) -> Result<Option<T>> {
    Ok(qkern_formats::env::knob(name, expected, parse)?)
}

type Result<T, E = WgpuError> = std::result::Result<T, E>;

static NEXT_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// Options beyond the adapter index (for tests and tuning).
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Use subgroup shuffles for the lane reductions where the adapter offers them
    /// (`None`: yes unless `QKERN_WGPU_SUBGROUPS=0`).
    pub subgroups: Option<bool>,
    /// Use the adapter's `fma()` where it was measured fused (`None`: yes unless
    /// `QKERN_WGPU_FMA=emulate`); `Some(false)` always uses the emulation.
    pub native_fma: Option<bool>,
    /// Which of wgpu's shader runtime checks the kernels keep (`None`: `QKERN_WGPU_CHECKS` =
    /// `full`, `noloop` or `none`; default `none`). See [`Checks`].
    pub checks: Option<Checks>,
    /// Blocks per iteration of the matmul kernels' block loop: 1, 2 or 4, or 0: the default
    /// per kernel (2, except 1 for q4_K and q5_K at NT 1 and for q6_K and iq4_xs) (`None`:
    /// `QKERN_WGPU_UNROLL`, else 0); the chain's order is the same.
    pub unroll: Option<u32>,
    /// Weight rows per matmul workgroup (8 invocations each, 2 for the pair formats and the
    /// thread pairs of the K-quants and iq4_xs; `None`:
    /// `QKERN_WGPU_WG_ROWS`, else 32 for the formats with lookup tables, which each workgroup
    /// copies to workgroup memory, and for the pair formats, 8 for the others). Rounded to a
    /// power of two up to 128; at most 32 for the 8-invocation kernels.
    pub wg_rows: Option<u32>,
    /// Split weights into parts of at most this many bytes (`None`: the adapter's
    /// storage-binding limit, at most 2 GiB).
    pub max_part_bytes: Option<u64>,
    /// Unroll the kernels' constant-count loops in the source (`None`: `QKERN_WGPU_FLAT=1`,
    /// else no). See [`Tuning::flat`].
    pub flat: Option<bool>,
    /// Byte-pair lookup table for iq4_nl and nvfp4 (`None`: `QKERN_WGPU_LUT=nibble|pair`, else
    /// `pair`). See [`Tuning::lut2`].
    pub lut2: Option<bool>,
    /// How a call waits for its result: polling the device in a loop (`true`) or blocking in
    /// the driver (`None`: `QKERN_WGPU_WAIT=spin|block`, else spin on discrete and integrated
    /// GPUs, block on CPU adapters such as lavapipe, whose work needs the cores). Spinning,
    /// which also is what CUDA does by default, cut the H200's submit-and-wait round trip from
    /// about 60 us; it yields the core between polls and blocks after 20 ms.
    pub spin_wait: Option<bool>,
    /// Readback chunks of a matmul call (`None`: `QKERN_WGPU_CHUNKS`, else 0: by size). See
    /// [`Tuning::chunks`].
    pub chunks: Option<u8>,
    /// Let the matmul and dequantize kernels write their results straight into a host-visible
    /// buffer that is then mapped (no copy pass), where the adapter offers
    /// `Features::MAPPABLE_PRIMARY_BUFFERS` (`None`: `QKERN_WGPU_DIRECT_OUT=0|1`, else on for
    /// GPU adapters, off for CPU adapters).
    pub direct_out: Option<bool>,
    /// Threads that copy a large result out of the mapped readback buffer (`None`:
    /// `QKERN_WGPU_COPY_THREADS`, 1 to 64, else half the host's cores, at most 8, on GPU
    /// adapters and 1 on CPU adapters). See [`WgpuBackend::copy_threads`].
    pub copy_threads: Option<usize>,
    /// From how many tokens per dispatch the IQ2/IQ3 formats run on thread pairs (0: never;
    /// [`IQ_PAIRS_PER_FORMAT`]; `None`: `QKERN_WGPU_IQPAIR=0..8`, else by the q8_K layout,
    /// [`Options::q8k`]: per format with both layouts, 1 with the split one, 0 with ggml's).
    /// See [`Tuning::iq_pairs`].
    pub iq_pairs: Option<u8>,
    /// The device layout of q8_K activations (`None`: `QKERN_WGPU_Q8K=ggml|split|both`, else
    /// [`Q8kLayout::Both`]).
    pub q8k: Option<Q8kLayout>,
    /// q4_K's, q5_K's and the IQ2/IQ3 formats' matmul on cooperative matrices (`None`:
    /// `QKERN_WGPU_COOP`, else [`Coop::Off`]).
    /// See [`Coop`].
    pub coop: Option<Coop>,
    /// q4_K, q5_K and the IQ2/IQ3 formats uploaded tiled (`None`: `QKERN_WGPU_KTILE=0|1`, else
    /// yes). See [`Tuning::ktile`].
    pub ktile: Option<bool>,
    /// Rows per pair of invocations of the pair-layout and thread-pair kernels, and whether
    /// q4_K and q5_K take the generic two-row kernel (`None`: `QKERN_WGPU_PAIR_ROWS=1|2|2g`,
    /// else 0: per format and token count). See [`Tuning::pair_rows`].
    pub pair_rows: Option<(u8, bool)>,
    /// The activations staged in workgroup memory from this many tokens a dispatch on (0:
    /// never; [`STAGE_BY_SIZE`]: by format and token count, on rows by the call's size), and
    /// the steps or blocks a chunk (0: by size) (`None`: `QKERN_WGPU_STAGE=auto`, `N` or `N:S`,
    /// else [`STAGE_BY_SIZE`]). See [`Tuning::stage`].
    pub stage: Option<(u8, u8)>,
}

/// The matmul kernels of q4_K, q5_K and the IQ2/IQ3 formats with the integer lane sums from
/// 16 x 16 x 16 tile products
/// (`wgsl/kc_common.wgsl`: f16 A and B, f32 C; every operand and partial sum an integer below
/// 2^24, so exact; the thread pairs' float chains unchanged, so the bits are the same), from
/// a number of tokens on. The CUDA backend's route to NT 8 near NT 1's time (`mma.sync`);
/// here through wgpu's experimental cooperative matrices (`Features::EXPERIMENTAL_COOPERATIVE_MATRIX`,
/// which wgpu 30's Vulkan backend enables where the driver lists a configuration: NVIDIA's
/// include f16 16 x 16 x 16 -> f32). Off by default: slower than the thread pairs on the H200
/// (the crate documentation's "Cooperative matrices").
/// `QKERN_WGPU_COOP`: `0` (off), `1`..`8` or `f16:N` (native, from that many tokens, tiles
/// staged in f16 arrays), `words:N` (native, tiles staged in u32 words), `emulate` or
/// `emulate:N` (the same kernel with the tile
/// products computed by plain invocations: any adapter; for tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Coop {
    /// The thread-pair kernel at every token count.
    Off,
    /// The adapter's cooperative matrices, from this many tokens (1..=8) on. Needs f16 16 x 16 x
    /// 16 -> f32 tiles on subgroups of exactly 32 invocations ([`WgpuBackend::supports_coop`]).
    /// The tiles are staged in f16 workgroup arrays (`QKERN_WGPU_COOP=N`, or `f16:N`).
    Native(u8),
    /// As [`Coop::Native`], the tiles staged in u32 workgroup arrays (two f16 a word) and loaded
    /// as f16, as GLSL's coopMatLoad reads vector arrays (`QKERN_WGPU_COOP=words:N`). NVIDIA's
    /// Vulkan driver 580 rejects these shaders ("NVVM compilation failed", H200 session 13).
    NativeWords(u8),
    /// The kernel with emulated tile products, from this many tokens (1..=8) on.
    Emulated(u8),
}

impl Coop {
    /// Whether a dispatch of `nt` tokens of `f` runs the cooperative-matrix kernel, and how
    /// its tiles are formed.
    fn kernel(self, f: Format, nt: u32) -> Option<shaders::CoopTiles> {
        match self {
            _ if !shaders::has_coop(f) => None,
            Coop::Native(n) if nt >= n as u32 => Some(shaders::CoopTiles::Halves),
            Coop::NativeWords(n) if nt >= n as u32 => Some(shaders::CoopTiles::Words),
            Coop::Emulated(n) if nt >= n as u32 => Some(shaders::CoopTiles::Emulated),
            _ => None,
        }
    }

    /// Whether this asks for the adapter's cooperative matrices.
    fn native(self) -> bool {
        matches!(self, Coop::Native(_) | Coop::NativeWords(_))
    }
}

/// `QKERN_WGPU_COOP`: `0`, `1`..`8` (or `f16:N`), `words:N`, `emulate` or `emulate:N`.
fn parse_coop(v: &str) -> Option<Coop> {
    let n = |s: &str| s.parse().ok().filter(|n: &u8| (1..=8).contains(n));
    match v {
        "0" => Some(Coop::Off),
        "emulate" => Some(Coop::Emulated(1)),
        _ => {
            if let Some(k) = v.strip_prefix("emulate:") {
                n(k).map(Coop::Emulated)
            } else if let Some(k) = v.strip_prefix("f16:") {
                n(k).map(Coop::Native)
            } else if let Some(k) = v.strip_prefix("words:") {
                n(k).map(Coop::NativeWords)
            } else {
                n(v).map(Coop::Native)
            }
        }
    }
}

/// Whether `adapter` can run [`Coop::Native`]: wgpu offers its cooperative matrices, f16 and
/// subgroups, it lists f16 x f16 -> f32 tiles of 16 x 16 x 16, and its subgroups are exactly 32
/// invocations (each of a kernel's two tile halves is one subgroup's; that they are numbered
/// linearly is checked on the device, [`WgpuBackend::subgroups_usable`]).
fn coop_supported(adapter: &wgpu::Adapter, info: &wgpu::AdapterInfo) -> bool {
    let f = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16 | wgpu::Features::SUBGROUP;
    adapter.features().contains(f)
        && info.subgroup_min_size == 32
        && info.subgroup_max_size == 32
        && adapter.cooperative_matrix_properties().iter().any(|p| {
            (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
                && p.ab_type == wgpu::CooperativeScalarType::F16
                && p.cr_type == wgpu::CooperativeScalarType::F32
        })
}

/// wgpu's shader runtime checks (`wgpu::ShaderRuntimeChecks`) for the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Checks {
    /// wgpu's defaults: bounds checks and loop bounding (a counter added to every loop, which
    /// keeps drivers from unrolling the kernels' constant-count loops).
    Full,
    /// Bounds checks, no loop bounding. Every kernel loop runs a count that is a compile-time
    /// constant or a uniform parameter, so none is infinite (what dropping it requires).
    NoLoopBounding,
    /// Neither: every kernel index is in bounds by construction (padded buffers, clamped rows,
    /// table indices masked to their table, token counts within the activation buffer).
    None,
}

impl Checks {
    fn from_env() -> Result<Checks> {
        let c = env_knob("QKERN_WGPU_CHECKS", "full, noloop or none", |v| match v {
            "full" => Some(Checks::Full),
            "noloop" => Some(Checks::NoLoopBounding),
            "none" => Some(Checks::None),
            _ => None,
        })?;
        // No bounds checks by default: on the H200 (NVIDIA Vulkan, run13 of
        // benches/results/2026-12-03-h200-session4) they cost 7 % (geometric mean over 13
        // formats x NT 1, 8, best of two interleaved passes each), up to 1.51x (q5_1 NT 8);
        // no case was faster with them. Same bits.
        Ok(c.unwrap_or(Checks::None))
    }
}

/// The kernel variant knobs (all give the same bits; they differ in speed only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tuning {
    /// Use the adapter's `fma()` (only where it was measured fused; else the emulation).
    pub native_fma: bool,
    pub checks: Checks,
    /// Blocks per block-loop iteration (1, 2 or 4; 0: the per-kernel default).
    pub unroll: u32,
    /// Rows per matmul workgroup; 0: the per-format default.
    pub wg_rows: u32,
    /// Unroll the kernels' constant-count loops (token loops, sub-block loops) in the WGSL
    /// source (`shaders::flatten_loops`), so that every per-token accumulator index is a
    /// constant whatever the driver's compiler unrolls (`QKERN_WGPU_FLAT=1`). Off: on the H200
    /// no gain stood out of the benchmark's noise.
    pub flat: bool,
    /// iq4_nl and nvfp4 look up both nibbles of a weight byte at once in a 256-entry
    /// workgroup table (4 lookups per word instead of 8; `QKERN_WGPU_LUT=pair`, the default).
    /// On: H200 kernel-only NT 1, iq4_nl 1382 -> 1980 GB/s, nvfp4 1449 -> 2081; NT 8 606 -> 683
    /// and 630 -> 726 (benches/results/2026-12-03-h200-session6, run1). Off: one nibble per
    /// lookup in a 16-entry table (`QKERN_WGPU_LUT=nibble`).
    pub lut2: bool,
    /// Row chunks of a `matmul` call's result readback, each its own submission and buffer so
    /// that the host copies one chunk's results while the device computes the next (0: by the
    /// result's size with a copy pass, none with direct output, see `readback_chunks`; 1:
    /// none; `QKERN_WGPU_CHUNKS`).
    pub chunks: u8,
    /// From how many tokens per dispatch (0: never; [`IQ_PAIRS_PER_FORMAT`]: each format's
    /// own count, which depends on its weights' layout, [`Tuning::ktile`]) the IQ2/IQ3 formats
    /// run on thread pairs (`wgsl/kp_iq.wgsl`: 2 invocations per row, 4 lanes each, no per-token exchanges, reading the split q8_K layout where the
    /// activations have it) instead of 8 invocations per row (reading ggml's blocks where they
    /// have them). See [`iq_pairs_from`] for the measurements.
    pub iq_pairs: u8,
    /// q4_K, q5_K and the IQ2/IQ3 formats on cooperative matrices (see [`Coop`]; [`WgpuBackend::set_tuning`] turns
    /// [`Coop::Native`] off on a device without them).
    pub coop: Coop,
    /// q4_K and q5_K weights uploaded in the tiled block order of the other K-quants and of
    /// the CUDA backend (layout.rs `pack_whole`: rows in groups of 16, block b of a group's rows
    /// side by side, each block unchanged), so that a subgroup's 16 rows read one contiguous
    /// span a block; their kernels then address blocks by `tiled_block` (the default;
    /// `QKERN_WGPU_KTILE=0` keeps ggml's row order; bench variants `ktile`, `noktile`). Tiling
    /// gave CUDA's q4_K and q5_K 11-16 % at one token (H100, session 19), wgpu's q6_K and
    /// iq4_xs 23-35 % (session 18), and these two (H100, benches/results/2026-12-06-session28
    /// run3, device GB/s, row order / tiled): q4_K NT 1 2128 / 2608, NT 8 1126 / 1162; q5_K NT
    /// 1 2424 / 2574, NT 8 1280 / 1329; `qkern bench` (run4) agreed at NT 1 and 8. A weight matrix
    /// keeps the layout it was uploaded with: its calls run the kernels of that layout,
    /// whatever this says later. The bits are the same either way.
    ///
    /// The IQ2/IQ3 formats (66-110 byte blocks, only 2-byte aligned in ggml's row order, so
    /// that every word took two loads and a funnel shift) are stored tiled and split (layout.rs
    /// `pack_split`, as the CUDA backend splits them): each block's body, 4-byte aligned, in
    /// the tiled order, then the part's fp16 `d` in the same order. Their kernels (8
    /// invocations a row, thread pairs, cooperative matrices, dequantize) keep ggml's byte
    /// offsets within a block (shaders.rs `ktile_blocks`); the matmul kernels read each word
    /// with one load (the dequantize kernel keeps its any-offset reads). With it the thread
    /// pairs run from one token ([`iq_pairs_from`]): H100, kernel-only one-token
    /// GB/s, row order -> tiled, each on its default kernel (benches/results/2026-12-06-session29
    /// run4): iq2_xxs 1107 -> 1177, iq2_xs 1108 -> 1684, iq2_s 1183 -> 1365, iq3_xxs 1360 ->
    /// 1849, iq3_s 1415 -> 1877, and faster at 2, 4 and 8 tokens too; iq2_xxs (on 8 invocations
    /// at one token until session 38's 16-byte loads) 1177 -> 1596 (session 38 run1).
    pub ktile: bool,
    /// Rows per pair of invocations of the pair-layout kernels (q8_0, q5_1, iq4_nl, nvfp4) and
    /// the thread-pair kernels (the K-quants, iq4_xs, the IQ2/IQ3 formats on pairs): 1, or 2:
    /// pair p of a workgroup runs rows p and p + rows / 2, so that each activation word it
    /// loads can serve both rows (at 8 tokens the activation loads outnumber the weight loads
    /// 8 to 1 for q8_0, about 30 to 1 for q4_K). q4_K and q5_K have their own two-row bodies
    /// that load each activation word once (`wgsl/kpair2_head.wgsl`, `kp2_*`); the other
    /// formats run their step for each row (`wgsl/pair_main2.wgsl`, `wgsl/kpair_main2.wgsl`),
    /// whose identical loads, with no store between them, a compiler may merge. The same chains per
    /// row, so the same bits. 0 (the default): per format and token count where each measured
    /// faster (`pair_rows_of`); 1 or 2 for every format (`QKERN_WGPU_PAIR_ROWS=1|2`, bench
    /// variants `prow1`, `prow2`). Four rows per pair (each format's step four times, as
    /// here) measured slower at every format, NT 1 and 8, on the H200 (NT 8 down 1.8-9x: q6_K
    /// 825 -> 92 GB/s; benches/results/2026-12-05-h200-session17 run2), so there are none.
    pub pair_rows: u8,
    /// With `pair_rows` 2: q4_K and q5_K on the generic two-row kernel too
    /// (`QKERN_WGPU_PAIR_ROWS=2g`, bench variant `prow2g`).
    pub pair_generic: bool,
    /// From how many tokens a dispatch (0: never) the kernels stage their activations in workgroup
    /// memory ([`STAGE_BY_SIZE`]: per format and token count, below). The pair-layout kernels
    /// (q8_0, q5_1, iq4_nl, nvfp4; `wgsl/pair_stage.wgsl`): each workgroup copies a chunk of its
    /// tokens' activation blocks once, between two barriers, and every row's steps read them there,
    /// instead of each invocation loading every word from the buffer (at 8 tokens 16 loads a block
    /// step, against the weights' one). The CUDA backend's row kernels do the same
    /// (`QK_CACT_SMEM`), which on an H100 took q5_1 at 8 tokens from 1110 to 1828 GB/s and nvfp4
    /// from 969 to 1326. The words are the same, so are the bits.
    ///
    /// The thread-pair kernels (the K-quants, iq4_xs, the IQ2/IQ3 formats on pairs) stage their
    /// q8_K activations the same way (`wgsl/act_q8k_stage.wgsl`, chunks of up to 16 blocks of
    /// 256 elements). At 8 tokens each block step loads 8 x 72 activation words an invocation
    /// pair against 36 to 52 of weights; on an H100 staging took q6_K at 8 tokens from 840 to
    /// 1677 GB/s, q4_K from 769 to 1135.
    ///
    /// By default ([`STAGE_BY_SIZE`]) dispatches stage at the token counts measured faster for
    /// their format (none for iq2_s), in calls of at least [`STAGE_ROWS`] rows the pair formats
    /// on workgroups of 128 rows and the K-quants and iq4_xs on 64 (unless [`Tuning::wg_rows`]
    /// says otherwise), in smaller calls on the format's usual rows (`default_stage` and
    /// `call_tuning` have the H100's numbers). `QKERN_WGPU_STAGE=auto`,
    /// `N` (from N tokens, every call and format; 0: never) or `N:S`; bench variants `st`,
    /// `stcN`, `nost`.
    pub stage: u8,
    /// Steps (the pair formats) or blocks (the thread pairs) a chunk of the staged activations
    /// (0: the most, a power of two up to 64 steps or 16 blocks, whose arrays fit
    /// [`STAGE_BYTES`]); always within the adapter's workgroup storage.
    pub stage_steps: u8,
}

/// Workgroup bytes the staged activations take at most by default ([`Tuning::stage_steps`] 0).
pub const STAGE_BYTES: u32 = 8192;

/// Workgroup bytes a staged pair kernel keeps for its other arrays (`stage_steps_of`).
const PAIR_STAGE_RESERVE: u32 = 4608;
/// The same for a staged thread-pair kernel, besides its lookup table.
const KPAIR_STAGE_RESERVE: u32 = 6144;

/// [`Tuning::stage`]: by the call's rows, format and token count (the default): see
/// `call_tuning` and `default_stage`.
pub const STAGE_BY_SIZE: u8 = u8::MAX;

/// Rows from which a call's staged activations ([`STAGE_BY_SIZE`]) take the wider workgroups of
/// their format (`default_stage`): at 128 rows a workgroup (the pair formats), 256 workgroups
/// (about two an SM on an H100 or H200). Smaller calls stage on the format's usual rows.
pub const STAGE_ROWS: usize = 32768;

/// The device layout of q8_K activation rows ([`Options::q8k`]). `import` and `read_acts`
/// convert either way; the bits of every kernel are the same in each.
///
/// On the H200 (benches/results/2026-12-04-h200-session10/run1, kernel-only GB/s) the split
/// layout lifted the IQ2/IQ3 formats on thread pairs (NT 8 +40-95 % against ggml's blocks on
/// 8 invocations; NT 1 iq2_xxs 907 -> 1007, iq3_xxs 1177 -> 1279) but cost q4_K, q5_K and
/// iq4_xs 13-28 % at NT 8. Hence the default [`Q8kLayout::Both`]: each kernel reads the
/// layout it measured fastest with (the IQ2/IQ3 formats: ggml's blocks on 8 invocations a row
/// at few tokens, the split copy on thread pairs from a count per format, [`iq_pairs_from`];
/// since session 22 iq4_xs the split copy where its pairs run two rows, NT 8 +41 %), for a q8_K
/// buffer twice the size (a token of 4096 columns: 2.3 KiB more) and a quantizer that writes
/// both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Q8kLayout {
    /// ggml's own 292-byte blocks, 4-byte aligned (the kernels read them a word at a time).
    Ggml,
    /// Per token the quants of every block, then their bsums, then their d, so that a thread
    /// pair reads a token's 4 lane words with one 16-byte load (rows padded to 16 bytes).
    Split,
    /// Per token ggml's blocks (padded to 16 bytes), then the split layout: the IQ2/IQ3
    /// thread-pair kernels and iq4_xs's two-row pairs read the split copy, the others ggml's
    /// blocks.
    Both,
}

impl Q8kLayout {
    /// Whether the matmul kernels of `f` read the split layout (`iq_pairs`: the IQ2/IQ3
    /// formats run on thread pairs; `pair_rows`: rows per thread pair). In both layouts iq4_xs
    /// reads the split copy where its pairs run two rows: since session 22 its invocation h owns
    /// lanes 4h..4h+3, a token's 4 q8 words of a sub-block one 16-byte load there. H200, kernel-only
    /// GB/s, ggml's blocks / split (benches/results/2026-12-06-session22 run1 `iq4xs_q8k.txt`,
    /// two rounds): NT 8 (two rows) 653 / 920; NT 4 (one row) 1255 / 1013; NT 1 and 2 within 3 %.
    fn split_for(self, f: Format, iq_pairs: bool, pair_rows: u32) -> bool {
        match self {
            Q8kLayout::Ggml => false,
            Q8kLayout::Split => true,
            Q8kLayout::Both => (iq_pairs && f.is_iq_grid()) || (f == Format::IQ4_XS && pair_rows == 2),
        }
    }
}

/// Poll a wgpu future to completion (wgpu's native futures are ready after a device poll), for
/// callers that make their own wgpu requests beside the backend's (the bench's `--stream`).
pub fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// The process-wide wgpu instance (made on first use from wgpu's environment variables, and
/// never destroyed). Destroying the last instance makes the Vulkan loader unload the driver's
/// libraries; NVIDIA's (580) leave thread-exit handlers behind in them, so a thread that used
/// the driver and exits afterwards jumps into unmapped code. Seen on the H200 as a SIGSEGV at
/// thread exit (si_addr = the faulting instruction, in a freed library range) when several
/// threads opened and dropped wgpu devices beside CUDA ones (the engine's layer test).
fn instance() -> wgpu::Instance {
    static INSTANCE: std::sync::OnceLock<wgpu::Instance> = std::sync::OnceLock::new();
    INSTANCE
        .get_or_init(|| wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env()))
        .clone()
}

/// The adapters this machine offers (honouring `WGPU_BACKEND`), in the order `wgpu:N` counts
/// them: `(index, name, backend, device type)`.
pub fn adapters() -> Vec<(usize, String, String, String)> {
    block_on(instance().enumerate_adapters(wgpu::Backends::all()))
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let info = a.get_info();
            (i, info.name, format!("{:?}", info.backend), format!("{:?}", info.device_type))
        })
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kernel {
    Matmul(Format, u32, Tuning),
    /// (the format, the bounds checks, tiled K-quant blocks: [`Tuning::ktile`])
    Dequant(Format, Checks, bool),
    Quant(Format, bool, Checks),
    Probe,
}

struct Layouts {
    weights: wgpu::BindGroupLayout,
    acts: wgpu::BindGroupLayout,
    out: wgpu::BindGroupLayout,
    quant: wgpu::BindGroupLayout,
    matmul: wgpu::PipelineLayout,
    dequant: wgpu::PipelineLayout,
    quant_pl: wgpu::PipelineLayout,
    /// The quantizer's: input, activations, a parameter slot at a dynamic offset.
    quant_ring: wgpu::BindGroupLayout,
    quant_ring_pl: wgpu::PipelineLayout,
}

/// The quantizer's input: one storage buffer that every job of a quantize call reads at its
/// own offset, so that a call writes its input with one `write_buffer` (not one per
/// activation buffer, about 3.5 us each on lavapipe). Grown on demand, up to the binding limit.
struct QuantIn {
    /// The parameter ring: QSLOTS slots of SLOT bytes, one a job of a submission.
    ring: wgpu::Buffer,
    buf: Option<wgpu::Buffer>,
    size: u64,
    /// Bumped when `buf` is replaced: activation buffers' quantizer bind groups of an older
    /// generation are made again.
    generation: u64,
}

/// The output and readback scratch of `matmul` / `dequantize`, and the parameter ring.
struct Scratch {
    cap: u64,
    out: wgpu::Buffer,
    read: wgpu::Buffer,
    params: wgpu::Buffer,
    group: wgpu::BindGroup,
    staging: Vec<u8>,
    /// The bytes last written to `params` by a matmul (empty: unknown): a call whose parameters
    /// are the same (the same weights, activation layout and token count as the call before)
    /// skips the write, and with it a staging buffer and a copy per call.
    written: Vec<u8>,
    /// The readback buffers of a chunked call (`matmul_chunked`), `read_cap` bytes each (with
    /// direct output, written by the kernels through their bind group).
    reads: Vec<(wgpu::Buffer, Option<wgpu::BindGroup>)>,
    read_cap: u64,
    // (`params`, the matmul parameter ring of SLOTS slots of SLOT bytes, is made once with the
    // device and handed from scratch to grown scratch, so that the bind groups of [`WgpuOut`]
    // buffers stay valid.)
    /// The readback buffer of [`WgpuBackend::read_out`] (MAP_READ | COPY_DST) and its size.
    out_read: Option<(wgpu::Buffer, u64)>,
}

/// A wgpu device with qkern's kernels.
pub struct WgpuBackend {
    // Boxed: the `qkern` facade holds a backend in an enum beside small ones.
    /// The adapter's description and limits (boxed together).
    adapter: Box<(wgpu::AdapterInfo, wgpu::Limits)>,
    device: wgpu::Device,
    queue: wgpu::Queue,
    subgroups: bool,
    /// Results written straight to a mappable output buffer (see [`Options::direct_out`]).
    direct_out: bool,
    /// Calls wait for their results by polling (see [`Options::spin_wait`]).
    spin_wait: bool,
    /// The device layout of q8_K activations (see [`Q8kLayout`]).
    q8k: Q8kLayout,
    /// The threads besides the caller's that copy large results out of mapped buffers
    /// (`None`: the caller copies alone). See [`Options::copy_threads`].
    copy_pool: Option<rayon::ThreadPool>,
    fma_measured_fused: bool,
    ftz: bool,
    /// The adapter can run [`Coop::Native`] (whether or not this device enabled it).
    coop_supported: bool,
    /// The device was created with cooperative matrices and f16 ([`Coop::Native`] asked for).
    coop_enabled: bool,
    tuning: Mutex<Tuning>,
    max_part: u64,
    tables: wgpu::Buffer,
    layouts: Box<Layouts>,
    pipelines: Mutex<HashMap<Kernel, wgpu::ComputePipeline>>,
    scratch: Mutex<Box<Scratch>>,
    errors: Arc<Mutex<Vec<String>>>,
    /// One operation at a time: wgpu's uncaptured errors and buffer mappings are per device,
    /// so concurrent calls would see each other's; the queue is serial anyway. It guards the
    /// quantizer's shared input and parameter ring too.
    op: Mutex<Box<QuantIn>>,
    /// A process-unique id (buffers remember which backend made them).
    id: usize,
}

impl std::fmt::Debug for WgpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WgpuBackend({})", self.name())
    }
}

/// One part of a weight matrix: whole rows `row0..row0+rows` in one buffer.
struct Part {
    row0: usize,
    rows: usize,
    _buffer: wgpu::Buffer,
    group: wgpu::BindGroup,
}

/// An f32 buffer on a wgpu device that [`WgpuBackend::matmul_to`] writes (results kept on
/// the device; [`WgpuBackend::read_out`] copies them back).
pub struct WgpuOut {
    device: usize,
    buf: wgpu::Buffer,
    group: wgpu::BindGroup,
    len: usize,
}

impl WgpuOut {
    /// Floats the buffer holds.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for WgpuOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WgpuOut({})", self.len)
    }
}

/// Weights resident on a wgpu device.
pub struct WgpuWeights {
    format: Format,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    parts: Vec<Part>,
    device: usize,
    /// Uploaded with [`Tuning::ktile`] (q4_K, q5_K tiled whole, layout.rs `pack_whole`; the
    /// IQ2/IQ3 formats tiled and split, `pack_split`).
    ktiled: bool,
}

impl WgpuWeights {
    pub fn format(&self) -> Format {
        self.format
    }
    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Buffers the matrix was split into (1 unless it exceeds the binding limit).
    pub fn parts(&self) -> usize {
        self.parts.len()
    }
}

/// A reusable activation buffer on a wgpu device (device layout: see the crate docs).
pub struct WgpuActs {
    format: Format,
    cols: usize,
    capacity: usize,
    /// u32 words per token in the device layout.
    row_words: usize,
    buf: wgpu::Buffer,
    group: wgpu::BindGroup,
    /// The quantizer's bind group (the device's shared input, `buf`, its parameter ring) and
    /// the generation of the shared input it binds ([`QuantIn`]); made by the first quantize.
    qgroup: Option<(u64, wgpu::BindGroup)>,
    read: wgpu::Buffer,
    host: Vec<u8>,
    device: usize,
}

impl WgpuActs {
    pub fn format(&self) -> Format {
        self.format
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Device-layout words per token of an activation row of `cols` columns (q8_0 / q8_1:
/// `layout::act_stride`; q8_K: [`Q8kLayout`]).
fn act_row_words(act: Format, cols: usize, q8k: Q8kLayout) -> usize {
    let nb = cols / act.block_elems();
    match act {
        Format::Q8_0 | Format::Q8_1 => layout::act_stride(act, nb),
        // The split layout's rows start on 16 bytes (its kernels read 16-byte elements).
        _ => match q8k {
            Q8kLayout::Ggml => nb * 73,
            Q8kLayout::Split => (nb * 73).next_multiple_of(4),
            Q8kLayout::Both => 2 * (nb * 73).next_multiple_of(4),
        },
    }
}

/// q8_K's split device layout (see [`Q8kLayout::Split`]) from ggml's blocks, one token: `src`
/// is `nb` 292-byte blocks, `dst` the token's device words as bytes.
fn q8k_split(src: &[u8], dst: &mut [u8]) {
    let nb = src.len() / 292;
    for (b, blk) in src.chunks_exact(292).enumerate() {
        dst[256 * b..256 * b + 256].copy_from_slice(&blk[4..260]);
        dst[256 * nb + 32 * b..256 * nb + 32 * b + 32].copy_from_slice(&blk[260..292]);
        dst[288 * nb + 4 * b..288 * nb + 4 * b + 4].copy_from_slice(&blk[..4]);
    }
}

/// The inverse of [`q8k_split`].
fn q8k_join(src: &[u8], dst: &mut [u8]) {
    let nb = dst.len() / 292;
    for (b, blk) in dst.chunks_exact_mut(292).enumerate() {
        blk[4..260].copy_from_slice(&src[256 * b..256 * b + 256]);
        blk[260..292].copy_from_slice(&src[256 * nb + 32 * b..256 * nb + 32 * b + 32]);
        blk[..4].copy_from_slice(&src[288 * nb + 4 * b..288 * nb + 4 * b + 4]);
    }
}

/// fp16 bits -> the f32 bits the device layout keeps (as the WGSL `f16f`: exact, NaN payload
/// kept unquietened, so that [`narrow_f16`] inverts it).
fn widen_f16(h: u16) -> u32 {
    let h = h as u32;
    let (e, m, s) = ((h >> 10) & 0x1f, h & 0x3ff, (h & 0x8000) << 16);
    let mag = match e {
        0 => (m as f32 * f32::from_bits(0x3380_0000)).to_bits(), // m * 2^-24
        31 => 0x7f80_0000 | (m << 13),
        _ => ((e + 112) << 23) | (m << 13),
    };
    s | mag
}

/// The inverse of [`widen_f16`].
fn narrow_f16(w: u32) -> u16 {
    let s = ((w >> 16) & 0x8000) as u16;
    let a = w & 0x7fff_ffff;
    if a >= 0x7f80_0000 {
        return s | 0x7c00 | ((a >> 13) & 0x3ff) as u16;
    }
    s | half::f16::from_f32(f32::from_bits(a)).to_bits()
}

impl WgpuBackend {
    /// Open adapter `index` (`None`: `WGPU_ADAPTER_NAME` or wgpu's default).
    pub fn new(index: Option<usize>) -> Result<WgpuBackend> {
        WgpuBackend::with_options(index, Options::default())
    }

    /// [`WgpuBackend::new`] with [`Options`].
    pub fn with_options(index: Option<usize>, opts: Options) -> Result<WgpuBackend> {
        let instance = instance();
        let adapter = match index {
            Some(i) => {
                let mut all = block_on(instance.enumerate_adapters(wgpu::Backends::all()));
                if i >= all.len() {
                    return Err(WgpuError::NoAdapter(format!(
                        "adapter index {i} out of range ({} adapters)",
                        all.len()
                    )));
                }
                all.swap_remove(i)
            }
            None => match std::env::var("WGPU_ADAPTER_NAME") {
                Ok(name) if !name.is_empty() => {
                    let want = name.to_lowercase();
                    block_on(instance.enumerate_adapters(wgpu::Backends::all()))
                        .into_iter()
                        .find(|a| a.get_info().name.to_lowercase().contains(&want))
                        .ok_or_else(|| {
                            WgpuError::NoAdapter(format!("no adapter name contains WGPU_ADAPTER_NAME={name:?}"))
                        })?
                }
                _ => block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
                    power_preference:
                        wgpu::PowerPreference::from_env().unwrap_or(wgpu::PowerPreference::HighPerformance),
                    force_fallback_adapter: false,
                    compatible_surface: None,
                    apply_limit_buckets: false,
                }))
                .map_err(|e| WgpuError::NoAdapter(e.to_string()))?,
            },
        };
        let info = adapter.get_info();
        let bool01 = qkern_formats::env::switch;
        let want_sg = match opts.subgroups {
            Some(b) => b,
            None => env_knob("QKERN_WGPU_SUBGROUPS", "0 or 1", bool01)?.unwrap_or(true),
        };
        // Read before any work, so that a bad value fails here.
        let checks = match opts.checks {
            Some(c) => c,
            None => Checks::from_env()?,
        };
        let unroll = match opts.unroll {
            Some(u) => u,
            None => {
                env_knob("QKERN_WGPU_UNROLL", "0, 1, 2 or 4", |v| v.parse().ok().filter(|u| [0, 1, 2, 4].contains(u)))?
                    .unwrap_or(0)
            }
        };
        let wg_rows = match opts.wg_rows {
            Some(r) => r,
            None => env_knob("QKERN_WGPU_WG_ROWS", "1, 2, 4, 8, 16, 32, 64 or 128", |v| {
                v.parse().ok().filter(|r: &u32| r.is_power_of_two() && *r <= 128)
            })?
            .unwrap_or(0),
        };
        let flat = match opts.flat {
            Some(f) => f,
            None => env_knob("QKERN_WGPU_FLAT", "0 or 1", bool01)?.unwrap_or(false),
        };
        let lut2 = match opts.lut2 {
            Some(b) => b,
            None => env_knob("QKERN_WGPU_LUT", "nibble or pair", |v| match v {
                "nibble" => Some(false),
                "pair" => Some(true),
                _ => None,
            })?
            .unwrap_or(true),
        };
        let q8k = match opts.q8k {
            Some(l) => l,
            None => env_knob("QKERN_WGPU_Q8K", "ggml, split or both", parse_q8k)?.unwrap_or(Q8kLayout::Both),
        };
        // The IQ pair kernels pay off with the split q8_K layout only (H200, session 10 run1,
        // kernel-only NT 8: iq2_xxs 284 -> 467 GB/s, iq3_xxs 409 -> 670 with both, against 172 and
        // 242 with pairs on ggml's layout), so they follow it unless asked; with both layouts
        // the dispatches of few tokens may keep 8 invocations a row on ggml's blocks
        // (iq_pairs_from: iq2_xxs at one token with the weights tiled, as the default).
        let iq_pairs = match opts.iq_pairs {
            Some(n) => n,
            None => env_knob("QKERN_WGPU_IQPAIR", "0 to 8", parse_iq_pairs)?.unwrap_or(match q8k {
                Q8kLayout::Ggml => 0,
                Q8kLayout::Split => 1,
                Q8kLayout::Both => IQ_PAIRS_PER_FORMAT,
            }),
        };
        let coop = match opts.coop {
            Some(c) => c,
            None => env_knob("QKERN_WGPU_COOP", "0, 1 to 8, f16:N, words:N, emulate or emulate:N", parse_coop)?
                .unwrap_or(Coop::Off),
        };
        let ktile = match opts.ktile {
            Some(b) => b,
            None => env_knob("QKERN_WGPU_KTILE", "0 or 1", bool01)?.unwrap_or(true),
        };
        let (pair_rows, pair_generic) = match opts.pair_rows {
            Some(n) => n,
            None => env_knob("QKERN_WGPU_PAIR_ROWS", "0, 1, 2 or 2g", parse_pair_rows)?.unwrap_or((0, false)),
        };
        let (stage, stage_steps) = match opts.stage {
            Some(v) => v,
            None => env_knob("QKERN_WGPU_STAGE", "auto, 0 to 8, or N:S (S steps a chunk, 1 to 64)", parse_stage)?
                .unwrap_or((STAGE_BY_SIZE, 0)),
        };
        let chunks = match opts.chunks {
            Some(c) => c,
            None => env_knob("QKERN_WGPU_CHUNKS", "0 to 64", parse_chunks)?.unwrap_or(0),
        };
        let want_native = match opts.native_fma {
            Some(b) => b,
            None => env_knob("QKERN_WGPU_FMA", "native or emulate", |v| match v {
                "native" => Some(true),
                "emulate" => Some(false),
                _ => None,
            })?
            .unwrap_or(true),
        };
        let want_direct = match opts.direct_out {
            Some(b) => b,
            // On by default on GPU adapters: on the H200 (NVIDIA Vulkan) the `qkern bench` call
            // path at 1 GiB of weights gained 4-14 % at NT 1 and 5-46 % at NT 8 against the
            // copy pass (benches/results/2026-12-04-h200-session9, run1 `envsweep`). Session 5
            // had made it opt-in after the engine's layer test died once (SIGSEGV while opening
            // its devices) in the run where it was the default; every layer test since, with it
            // on and off (`enginediag`, session 8), passed. Off on CPU adapters, whose memory is
            // the host's either way.
            None => env_knob("QKERN_WGPU_DIRECT_OUT", "0 or 1", bool01)?
                .unwrap_or(!matches!(info.device_type, wgpu::DeviceType::Cpu)),
        };
        let spin_wait = match opts.spin_wait {
            Some(b) => b,
            None => env_knob("QKERN_WGPU_WAIT", "spin or block", parse_wait)?
                .unwrap_or(!matches!(info.device_type, wgpu::DeviceType::Cpu)),
        };
        let copy_threads = match opts.copy_threads {
            Some(n) => n.clamp(1, 64),
            None => env_knob("QKERN_WGPU_COPY_THREADS", "1 to 64", par::parse_copy_threads)?.unwrap_or_else(|| {
                if matches!(info.device_type, wgpu::DeviceType::Cpu) { 1 } else { par::default_copy_threads() }
            }),
        };
        let copy_pool = par::copy_pool(copy_threads, "qkern-wgpu-copy")
            .map_err(|e| WgpuError::Device(format!("starting the copy threads: {e}")))?;
        let direct_out = want_direct && adapter.features().contains(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS);
        let has_sg = adapter.features().contains(wgpu::Features::SUBGROUP) && info.subgroup_min_size >= 8;
        let coop_supported = coop_supported(&adapter, &info);
        let coop_enabled = coop.native();
        // Subgroups for the lane reductions, and for checking the cooperative tiles' halves.
        let mut features =
            if (want_sg && has_sg) || coop_enabled { wgpu::Features::SUBGROUP } else { wgpu::Features::empty() };
        if direct_out {
            features |= wgpu::Features::MAPPABLE_PRIMARY_BUFFERS;
        }
        if coop_enabled && !coop_supported {
            return Err(WgpuError::Unsupported(format!(
                "QKERN_WGPU_COOP / Options::coop: {} offers no cooperative matrices of f16 16x16x16 -> f32 on \
                 subgroups of 32 invocations (use emulate, or 0)",
                info.name
            )));
        }
        let experimental = if coop_enabled {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16;
            // SAFETY: wgpu's contract for experimental features is that their implementation
            // may still have bugs; asked for only with `Coop::Native` (opt-in, off by
            // default), whose kernel uses nothing but cooperative loads, stores and
            // multiply-adds of workgroup memory with in-bounds offsets and strides.
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
        let limits = adapter.limits();
        let (device, queue) = block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("qkern"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: experimental,
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| WgpuError::Device(e.to_string()))?;
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e| {
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));

        let max_binding = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        let max_part = opts.max_part_bytes.unwrap_or(u64::MAX).min(max_binding).min(1 << 31) - PAD;
        let max_part = max_part & !3;

        let tables_words = shaders::tables_words();
        let tables = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("qkern tables"),
            size: (tables_words.len() * 4) as u64 + PAD,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        queue.write_buffer(&tables, 0, bytemuck::cast_slice(&tables_words));

        let layouts = Box::new(make_layouts(&device));
        let params = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("qkern params"),
            size: SLOT * SLOTS,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let scratch = Box::new(make_scratch(&device, &layouts, &params, 4096, direct_out));
        let qring = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("qkern quant params"),
            size: SLOT * QSLOTS,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut be = WgpuBackend {
            adapter: Box::new((info, limits)),
            device,
            queue,
            subgroups: want_sg && features.contains(wgpu::Features::SUBGROUP),
            direct_out,
            spin_wait,
            q8k,
            copy_pool,
            fma_measured_fused: false,
            ftz: false,
            coop_supported,
            coop_enabled,
            tuning: Mutex::new(Tuning {
                native_fma: false,
                checks,
                unroll,
                wg_rows,
                flat,
                lut2,
                chunks,
                iq_pairs,
                coop,
                ktile,
                pair_rows: pair_rows.min(2),
                pair_generic,
                stage,
                stage_steps,
            }),
            max_part,
            tables,
            layouts,
            pipelines: Mutex::default(),
            scratch: Mutex::new(scratch),
            errors,
            op: Mutex::new(Box::new(QuantIn { ring: qring, buf: None, size: 0, generation: 0 })),
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        };
        // One probe run serves both users of linearly numbered subgroups.
        let sg_usable = (coop_enabled || be.subgroups) && be.subgroups_usable()?;
        if coop_enabled && !sg_usable {
            return Err(WgpuError::Unsupported(format!(
                "QKERN_WGPU_COOP / Options::coop: the subgroups of {} are not numbered linearly by \
                 invocation index, which the cooperative tiles' halves assume",
                be.adapter.0.name
            )));
        }
        be.subgroups &= sg_usable;
        // Whether `fma()` is fused here: measured on the normal-domain cases (no subnormal
        // operand, product or result; the kernels' domain, see "Subnormals" in the crate docs),
        // which include thousands where fused and unfused differ.
        let probe = be.float_probe(1 << 15, 0xf3a)?;
        be.fma_measured_fused = probe.fma_fused_in_normal_domain();
        be.ftz = probe.flushes_subnormals();
        be.set_tuning(Tuning { native_fma: want_native, ..be.tuning() });
        if let Ok(mut c) = be.pipelines.lock() {
            c.remove(&Kernel::Probe);
        }
        be.check_errors()?;
        Ok(be)
    }

    /// The largest buffer a kernel may bind: the adapter's storage-binding and buffer limits.
    fn max_binding(&self) -> u64 {
        let l = &self.adapter.1;
        l.max_storage_buffer_binding_size.min(l.max_buffer_size)
    }

    /// The adapter's name and backend.
    pub fn name(&self) -> String {
        let t = self.tuning();
        format!(
            "{} ({:?}, {}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{})",
            self.adapter.0.name,
            self.adapter.0.backend,
            if t.native_fma { "fma" } else { "emulated fma" },
            if self.subgroups { ", subgroups" } else { "" },
            if self.direct_out { ", direct out" } else { "" },
            match self.q8k {
                Q8kLayout::Ggml => "",
                Q8kLayout::Split => ", split q8_K",
                Q8kLayout::Both => ", q8_K both ways",
            },
            if self.ftz { ", FTZ" } else { "" },
            match t.checks {
                Checks::Full => ", full checks",
                Checks::NoLoopBounding => ", bounds checks",
                Checks::None => "",
            },
            if t.unroll > 1 { format!(", unroll {}", t.unroll) } else { String::new() },
            if t.wg_rows != 0 { format!(", {} rows/wg", t.wg_rows) } else { String::new() },
            if t.flat { ", flat" } else { "" },
            if t.lut2 { ", byte-pair lut" } else { "" },
            if t.ktile { ", tiled K-quants and IQ2/IQ3" } else { "" },
            match t.iq_pairs {
                0 => String::new(),
                1 => ", IQ pairs".to_string(),
                IQ_PAIRS_PER_FORMAT => ", IQ pairs by format".to_string(),
                n => format!(", IQ pairs from NT {n}"),
            },
            match (t.pair_rows, t.pair_generic) {
                (2, false) => ", 2 rows/pair",
                (2, true) => ", 2 rows/pair (generic)",
                (1, _) => ", 1 row/pair",
                _ => "",
            },
            match (t.stage, t.stage_steps) {
                (0, _) => String::new(),
                (STAGE_BY_SIZE, 0) => ", staged activations by size".to_string(),
                (STAGE_BY_SIZE, c) => format!(", staged activations by size ({c} steps a chunk)"),
                (n, 0) => format!(", staged activations from NT {n}"),
                (n, c) => format!(", staged activations from NT {n} ({c} steps a chunk)"),
            },
            if self.spin_wait { ", spin wait" } else { "" },
            match t.coop {
                Coop::Off => String::new(),
                Coop::Native(n) => format!(", cooperative matrices from NT {n}"),
                Coop::NativeWords(n) => format!(", cooperative matrices (u32 staging) from NT {n}"),
                Coop::Emulated(n) => format!(", emulated tiles from NT {n}"),
            }
        )
    }

    /// The current kernel variant.
    pub fn tuning(&self) -> Tuning {
        self.tuning.lock().map(|t| *t).unwrap_or(Tuning {
            native_fma: false,
            checks: Checks::Full,
            unroll: 1,
            wg_rows: 0,
            flat: false,
            lut2: true,
            chunks: 0,
            iq_pairs: 0,
            coop: Coop::Off,
            ktile: true,
            pair_rows: 0,
            pair_generic: false,
            stage: STAGE_BY_SIZE,
            stage_steps: 0,
        })
    }

    /// Switch kernel variants (for benchmarks; every variant gives the same bits). The
    /// adapter's `fma()` is used only where it was measured fused. [`Tuning::ktile`] acts on
    /// later uploads only: a matrix keeps the layout it was uploaded with. Returns the variant
    /// in effect.
    pub fn set_tuning(&self, t: Tuning) -> Tuning {
        let t = Tuning {
            native_fma: t.native_fma && self.fma_measured_fused,
            unroll: match t.unroll {
                0 => 0,
                1 => 1,
                2 | 3 => 2,
                _ => 4,
            },
            wg_rows: if t.wg_rows == 0 { 0 } else { t.wg_rows.clamp(1, 128).next_power_of_two().min(128) },
            coop: if t.coop.native() && !self.coop_enabled { Coop::Off } else { t.coop },
            pair_rows: t.pair_rows.min(2),
            stage: if t.stage == STAGE_BY_SIZE { t.stage } else { t.stage.min(8) },
            stage_steps: t.stage_steps.min(64),
            ..t
        };
        if let Ok(mut g) = self.tuning.lock() {
            *g = t;
        }
        t
    }

    /// Whether the probe saw subnormal results or inputs flushed to zero (see "Subnormals"
    /// in the crate docs for what that changes).
    pub fn flushes_subnormals(&self) -> bool {
        self.ftz
    }

    /// The adapter's information.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.adapter.0
    }

    /// The device's limits (the adapter's own, all requested).
    pub fn limits(&self) -> &wgpu::Limits {
        &self.adapter.1
    }

    /// Whether the kernels use the adapter's `fma()` (measured fused) or the emulation.
    pub fn uses_native_fma(&self) -> bool {
        self.tuning().native_fma
    }

    /// Whether the adapter's `fma()` was measured to be a fused multiply-add.
    pub fn fma_is_fused(&self) -> bool {
        self.fma_measured_fused
    }

    /// Whether the adapter can run the cooperative-matrix kernels on its own tiles
    /// ([`Coop::Native`]).
    pub fn supports_coop(&self) -> bool {
        self.coop_supported
    }

    /// Whether the lane reductions use subgroup shuffles.
    pub fn uses_subgroups(&self) -> bool {
        self.subgroups
    }

    /// The largest weight part (bytes) this device uses.
    pub fn max_part_bytes(&self) -> u64 {
        self.max_part
    }

    fn lock_op(&self) -> Result<std::sync::MutexGuard<'_, Box<QuantIn>>> {
        self.op.lock().map_err(|_| WgpuError::Gpu("device lock poisoned".into()))
    }

    fn check_errors(&self) -> Result<()> {
        let mut v = self.errors.lock().map_err(|_| WgpuError::Gpu("error sink poisoned".into()))?;
        if v.is_empty() {
            return Ok(());
        }
        let msg = v.join("; ");
        v.clear();
        Err(WgpuError::Gpu(msg))
    }

    fn pipeline(&self, k: Kernel) -> Result<wgpu::ComputePipeline> {
        let mut cache = self.pipelines.lock().map_err(|_| WgpuError::Gpu("pipeline cache poisoned".into()))?;
        if let Some(p) = cache.get(&k) {
            return Ok(p.clone());
        }
        let (src, layout, checks) = match k {
            Kernel::Matmul(f, nt, t) => {
                let limit = self.adapter.1.max_compute_workgroup_storage_size;
                (matmul_kernel_source(f, nt, t, self.subgroups, self.q8k, limit), &self.layouts.matmul, t.checks)
            }
            Kernel::Dequant(f, c, kt) => (shaders::dequant_source(f, kt), &self.layouts.dequant, c),
            Kernel::Quant(f, nf, c) => (shaders::quant_source(f, nf, self.q8k), &self.layouts.quant_ring_pl, c),
            Kernel::Probe => (Some(shaders::probe_source(false)), &self.layouts.quant_pl, Checks::Full),
        };
        let src = src.ok_or_else(|| WgpuError::Unsupported(format!("no {k:?} kernel")))?;
        let desc =
            wgpu::ShaderModuleDescriptor { label: Some("qkern kernel"), source: wgpu::ShaderSource::Wgsl(src.into()) };
        let module = match checks {
            Checks::Full => self.device.create_shader_module(desc),
            // SAFETY: every loop of these kernels runs a count that is a compile-time constant
            // or a uniform parameter (no infinite loop), which is what dropping the loop
            // bounding requires; bounds checks stay.
            Checks::NoLoopBounding => unsafe {
                self.device.create_shader_module_trusted(
                    desc,
                    wgpu::ShaderRuntimeChecks { force_loop_bounding: false, ..wgpu::ShaderRuntimeChecks::checked() },
                )
            },
            // SAFETY: as above, and every buffer index is in bounds by construction (buffers
            // padded by PAD bytes past the funnel-shift reads, rows clamped, table indices
            // masked to their table), which is what `ShaderRuntimeChecks::unchecked` requires.
            Checks::None => unsafe {
                self.device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
            },
        };
        let p = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("qkern kernel"),
            layout: Some(layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        self.check_errors()?;
        cache.insert(k, p.clone());
        Ok(p)
    }

    fn device_id(&self) -> usize {
        self.id
    }

    fn buffer(&self, label: &str, size: u64, usage: wgpu::BufferUsages) -> Result<wgpu::Buffer> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let b = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(4).next_multiple_of(4),
            usage,
            mapped_at_creation: false,
        });
        if let Some(e) = block_on(scope.pop()) {
            return Err(WgpuError::Gpu(format!("allocating {size} bytes for {label}: {e}")));
        }
        Ok(b)
    }

    /// Wait until a callback (a mapping's, or the queue's work-done) has set `done` (every
    /// submission before it complete): by polling with `spin_wait` (for at most 20 ms, then
    /// blocking), else blocking.
    fn wait_done(&self, done: &Mutex<Option<bool>>) -> Result<()> {
        let gpu = |e: wgpu::PollError| WgpuError::Gpu(e.to_string());
        if self.spin_wait {
            let t0 = std::time::Instant::now();
            while t0.elapsed() < std::time::Duration::from_millis(20) {
                self.device.poll(wgpu::PollType::Poll).map_err(gpu)?;
                if done.lock().map(|g| g.is_some()).unwrap_or(true) {
                    return Ok(());
                }
                std::thread::yield_now();
            }
        }
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(gpu)?;
        Ok(())
    }

    /// Map `read[..n]`, hand the bytes to `f`, unmap.
    fn read_back<R>(&self, read: &wgpu::Buffer, n: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let n = n.next_multiple_of(4);
        let done = map_read(read, 0..n);
        self.wait_done(&done)?;
        let ok = map_ok(&done)?;
        if !ok {
            read.unmap();
            self.check_errors()?;
            return Err(WgpuError::Gpu("mapping the readback buffer failed".into()));
        }
        if let Err(e) = self.check_errors() {
            read.unmap();
            return Err(e);
        }
        let r = {
            let view = read.get_mapped_range(0..n).map_err(|e| WgpuError::Gpu(e.to_string()))?;
            f(&view)
        };
        read.unmap();
        Ok(r)
    }

    /// Make `rows` x `cols` of `format` (raw ggml blocks) resident.
    pub fn upload_weights(&self, format: Format, rows: usize, cols: usize, bytes: &[u8]) -> Result<WgpuWeights> {
        let _op = self.lock_op()?;
        if !format.is_weight() {
            return Err(ShapeError::Role { format, role: "quantized weight" }.into());
        }
        let n = format.matrix_bytes(rows, cols)?;
        if n != bytes.len() {
            return Err(ShapeError::ByteLength { what: "weights", expected: n, got: bytes.len() }.into());
        }
        let row_bytes = format.row_bytes(cols)?;
        // (The tiled layouts need no more bytes than ggml's blocks, plus 16.)
        let rows_per_part = ((self.max_part as usize).saturating_sub(16) / row_bytes).min(rows);
        if rows_per_part == 0 {
            return Err(WgpuError::Unsupported(format!(
                "one row of {row_bytes} bytes exceeds this adapter's storage binding limit ({} bytes)",
                self.max_part
            )));
        }
        if format.row_bytes(cols)? / format.block_bytes() > u32::MAX as usize / 2 {
            return Err(ShapeError::Overflow.into());
        }
        let ktiled = self.tuning().ktile && layout::ktiles(format);
        let mut parts = Vec::new();
        let mut row0 = 0;
        while row0 < rows {
            let pr = rows_per_part.min(rows - row0);
            let raw = &bytes[row0 * row_bytes..(row0 + pr) * row_bytes];
            let packed;
            let data = if layout::is_tiled(format) {
                packed = layout::pack(format, raw, pr);
                &packed[..]
            } else if ktiled {
                packed = layout::pack_ktile(format, raw, pr);
                &packed[..]
            } else {
                raw
            };
            let size = (data.len() as u64).next_multiple_of(16) + PAD;
            let buffer =
                self.buffer("qkern weights", size, wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST)?;
            // Upload in pieces of at most 64 MiB (wgpu stages each write).
            const PIECE: usize = 64 << 20;
            let whole = data.len() / 4 * 4;
            for (i, c) in data[..whole].chunks(PIECE).enumerate() {
                self.queue.write_buffer(&buffer, (i * PIECE) as u64, c);
                if whole > PIECE {
                    self.queue.submit([]);
                    self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| WgpuError::Gpu(e.to_string()))?;
                }
            }
            let mut tail = [0u8; 4];
            tail[..data.len() - whole].copy_from_slice(&data[whole..]);
            if data.len() > whole {
                self.queue.write_buffer(&buffer, whole as u64, &tail);
            }
            let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("qkern weights"),
                layout: &self.layouts.weights,
                entries: &[
                    wgpu::BindGroupEntry { binding: 0, resource: buffer.as_entire_binding() },
                    wgpu::BindGroupEntry { binding: 1, resource: self.tables.as_entire_binding() },
                ],
            });
            parts.push(Part { row0, rows: pr, _buffer: buffer, group });
            row0 += pr;
        }
        self.queue.submit([]);
        self.check_errors()?;
        Ok(WgpuWeights { format, rows, cols, row_bytes, parts, device: self.device_id(), ktiled })
    }

    /// A reusable activation buffer of `format` (q8_0, q8_1, q8_K) for `capacity` tokens.
    pub fn alloc_acts(&self, format: Format, cols: usize, capacity: usize) -> Result<WgpuActs> {
        let _op = self.lock_op()?;
        if !format.is_activation() {
            return Err(ShapeError::Role { format, role: "activation" }.into());
        }
        if capacity == 0 {
            return Err(ShapeError::ZeroTokens.into());
        }
        format.row_bytes(cols)?;
        let row_words = act_row_words(format, cols, self.q8k);
        let bytes = (row_words * 4).checked_mul(capacity).ok_or(ShapeError::Overflow)? as u64;
        let xin_bytes = (cols * 4).checked_mul(capacity).ok_or(ShapeError::Overflow)? as u64;
        if bytes + PAD > self.max_binding() || xin_bytes + PAD > self.max_binding() {
            return Err(WgpuError::Unsupported(format!(
                "{capacity} tokens of {cols} columns exceed this adapter's storage binding limit ({} bytes)",
                self.max_binding()
            )));
        }
        use wgpu::BufferUsages as U;
        let buf = self.buffer("qkern acts", bytes + PAD, U::STORAGE | U::COPY_DST | U::COPY_SRC)?;
        let read = self.buffer("qkern acts readback", bytes, U::MAP_READ | U::COPY_DST)?;
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("qkern acts"),
            layout: &self.layouts.acts,
            entries: &[wgpu::BindGroupEntry { binding: 0, resource: buf.as_entire_binding() }],
        });
        self.check_errors()?;
        Ok(WgpuActs {
            format,
            cols,
            capacity,
            row_words,
            buf,
            group,
            qgroup: None,
            read,
            host: vec![0u8; row_words * 4 * capacity],
            device: self.device_id(),
        })
    }

    fn check_acts(&self, a: &WgpuActs) -> Result<()> {
        if a.device != self.device_id() {
            return Err(WgpuError::Unsupported("activation buffer of another wgpu device".into()));
        }
        Ok(())
    }

    fn check_out(&self, out: &WgpuOut) -> Result<()> {
        if out.device != self.device_id() {
            return Err(WgpuError::Unsupported("an output of another wgpu device".into()));
        }
        Ok(())
    }

    /// Quantize `x` (`tokens x cols` f32) into `a` on the device, as ggml-cpu's x86
    /// `from_float`.
    pub fn quantize(&self, x: &[f32], a: &mut WgpuActs) -> Result<()> {
        if x.is_empty() || !x.len().is_multiple_of(a.cols) || x.len() / a.cols > a.capacity {
            return Err(
                ShapeError::Length { what: "activations ([tokens][cols])", expected: a.cols, got: x.len() }.into()
            );
        }
        let nt = x.len() / a.cols;
        self.quantize_grouped(x, &mut [(a, nt)])
    }

    /// Quantize into several buffers in one submission: `x` holds each job's `tokens` rows
    /// (`[tokens][cols]`, every buffer `cols` wide), one job after the other; a job of 0
    /// tokens leaves its buffer as it is. The bits are those of one [`WgpuBackend::quantize`]
    /// a job.
    pub fn quantize_grouped(&self, x: &[f32], jobs: &mut [(&mut WgpuActs, usize)]) -> Result<()> {
        let mut qin = self.lock_op()?;
        let mut elems = 0usize;
        let cols = jobs.first().map_or(0, |j| j.0.cols);
        for (a, nt) in jobs.iter() {
            self.check_acts(a)?;
            if a.cols != cols {
                return Err(WgpuError::Unsupported(format!(
                    "grouped quantize: buffers of {} and {cols} columns in one call",
                    a.cols
                )));
            }
            if *nt > a.capacity {
                return Err(WgpuError::Unsupported(format!(
                    "{nt} tokens exceed the activation buffer's capacity of {}",
                    a.capacity
                )));
            }
            elems = elems.checked_add(nt * cols).ok_or(ShapeError::Overflow)?;
        }
        if x.len() != elems {
            return Err(ShapeError::Length { what: "grouped quantize input", expected: elems, got: x.len() }.into());
        }
        if elems == 0 {
            return Ok(());
        }
        let t = self.tuning();
        // Runs of jobs, each one submission: at most QSLOTS jobs and one binding of input (a
        // job alone always fits: `alloc_acts` holds its input to the binding limit).
        let limit = self.max_binding() - PAD;
        let (mut first, mut off) = (0, 0);
        while first < jobs.len() {
            let (mut end, mut n, mut slots) = (first, 0, 0);
            while end < jobs.len() {
                let m = jobs[end].1 * cols;
                if (m > 0 && slots == QSLOTS) || ((n + m) * 4) as u64 > limit {
                    break;
                }
                n += m;
                slots += u64::from(m > 0);
                end += 1;
            }
            if end == first {
                // (`alloc_acts` keeps a buffer's whole input within the limit: not reached)
                return Err(WgpuError::Unsupported(format!(
                    "a quantize job of {} bytes exceeds this adapter's storage binding limit ({limit} bytes)",
                    jobs[first].1 * cols * 4
                )));
            }
            self.quantize_run(&mut qin, &x[off..off + n], &mut jobs[first..end], t)?;
            (first, off) = (end, off + n);
        }
        self.check_errors()
    }

    /// One submission of [`WgpuBackend::quantize_grouped`]: `x` (every job's rows, in order)
    /// into the shared input with one write, each job's parameters (its offset in the input
    /// among them) into a slot of the ring with one more, one dispatch a job.
    fn quantize_run(&self, qin: &mut QuantIn, x: &[f32], jobs: &mut [(&mut WgpuActs, usize)], t: Tuning) -> Result<()> {
        use wgpu::BufferUsages as U;
        let bytes = (x.len() * 4) as u64 + PAD;
        if qin.buf.is_none() || qin.size < bytes {
            let size = bytes.max(qin.size.saturating_mul(2)).max(1 << 16).min(self.max_binding());
            qin.buf = Some(self.buffer("qkern quant input", size, U::STORAGE | U::COPY_DST)?);
            qin.size = size;
            qin.generation += 1;
        }
        let Some(input) = qin.buf.as_ref() else { return Ok(()) };
        let mut params = [0u8; (SLOT * QSLOTS) as usize];
        let mut enc = self.device.create_command_encoder(&Default::default());
        let mut slot = 0usize;
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            let mut off = 0;
            // The pipeline set last (a run's jobs are mostly of one format).
            let mut set: Option<Format> = None;
            for (a, nt) in jobs.iter_mut().filter(|j| j.1 > 0) {
                let n = *nt * a.cols;
                let nblocks = (n / a.format.block_elems()) as u32;
                if set != Some(a.format) {
                    pass.set_pipeline(&self.pipeline(Kernel::Quant(a.format, t.native_fma, t.checks))?);
                    set = Some(a.format);
                }
                let (gx, gy) = grid(nblocks.div_ceil(64));
                let nbr = (a.cols / a.format.block_elems()) as u32;
                let p = [nblocks, gx, 0, nbr, a.row_words as u32, off as u32];
                let at = slot * SLOT as usize;
                params[at..at + 24].copy_from_slice(bytemuck::cast_slice(&p));
                if a.qgroup.as_ref().is_none_or(|g| g.0 != qin.generation) {
                    let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some("qkern quant"),
                        layout: &self.layouts.quant_ring,
                        entries: &[
                            wgpu::BindGroupEntry { binding: 0, resource: input.as_entire_binding() },
                            wgpu::BindGroupEntry { binding: 1, resource: a.buf.as_entire_binding() },
                            wgpu::BindGroupEntry { binding: 2, resource: ring_slot(&qin.ring) },
                        ],
                    });
                    a.qgroup = Some((qin.generation, group));
                }
                let group = a.qgroup.as_ref().map(|g| &g.1);
                pass.set_bind_group(0, group, &[at as u32]);
                pass.dispatch_workgroups(gx, gy, 1);
                off += n;
                slot += 1;
            }
        }
        // (staged by the queue, applied before the submission below, after the ones before it)
        self.queue.write_buffer(input, 0, bytemuck::cast_slice(x));
        self.queue.write_buffer(&qin.ring, 0, &params[..slot * SLOT as usize]);
        self.queue.submit([enc.finish()]);
        Ok(())
    }

    /// Import activations already quantized (`tokens` rows of ggml blocks).
    pub fn import(&self, bytes: &[u8], a: &mut WgpuActs) -> Result<()> {
        let _op = self.lock_op()?;
        self.check_acts(a)?;
        let rb = a.format.row_bytes(a.cols)?;
        if bytes.is_empty() || !bytes.len().is_multiple_of(rb) || bytes.len() / rb > a.capacity {
            return Err(ShapeError::ByteLength { what: "quantized activations", expected: rb, got: bytes.len() }.into());
        }
        let tokens = bytes.len() / rb;
        let rw = a.row_words * 4;
        let host = &mut a.host[..tokens * rw];
        match a.format {
            Format::Q8_K => {
                for (src, dst) in bytes.chunks_exact(rb).zip(host.chunks_exact_mut(rw)) {
                    match self.q8k {
                        Q8kLayout::Ggml => dst.copy_from_slice(src),
                        Q8kLayout::Split => q8k_split(src, dst),
                        Q8kLayout::Both => {
                            // ggml's blocks, then the split copy in the row's second half
                            // (the padding between stays as it is: no kernel reads it).
                            dst[..rb].copy_from_slice(src);
                            q8k_split(src, &mut dst[rw / 2..]);
                        }
                    }
                }
            }
            Format::Q8_0 | Format::Q8_1 => {
                let (bb, nb) = (a.format.block_bytes(), a.cols / 32);
                let nh = if a.format == Format::Q8_0 { 1 } else { 2 };
                for (src, dst) in bytes.chunks_exact(rb).zip(host.chunks_exact_mut(rw)) {
                    for (b, blk) in src.chunks_exact(bb).enumerate() {
                        dst[32 * b..32 * b + 32].copy_from_slice(&blk[2 * nh..]);
                        for k in 0..nh {
                            let h = u16::from_le_bytes([blk[2 * k], blk[2 * k + 1]]);
                            let o = 4 * ((8 + k) * nb + b);
                            dst[o..o + 4].copy_from_slice(&widen_f16(h).to_le_bytes());
                        }
                    }
                }
            }
            f => return Err(ShapeError::Role { format: f, role: "activation" }.into()),
        }
        self.queue.write_buffer(&a.buf, 0, host);
        self.queue.submit([]);
        self.check_errors()
    }

    /// Copy the first `tokens` rows of `a` back in ggml's block layout.
    pub fn read_acts(&self, a: &WgpuActs, tokens: usize, out: &mut [u8]) -> Result<()> {
        let _op = self.lock_op()?;
        self.check_acts(a)?;
        let rb = a.format.row_bytes(a.cols)?;
        if tokens > a.capacity || out.len() != tokens * rb {
            return Err(
                ShapeError::ByteLength { what: "activation read-back", expected: tokens * rb, got: out.len() }.into()
            );
        }
        if tokens == 0 {
            return Ok(());
        }
        let n = (tokens * a.row_words * 4) as u64;
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&a.buf, 0, &a.read, 0, n);
        self.queue.submit([enc.finish()]);
        let fmt = a.format;
        let (bb, nb, rw) = (fmt.block_bytes(), a.cols / 32, a.row_words * 4);
        let q8k = self.q8k;
        self.read_back(&a.read, n, |dev| match fmt {
            Format::Q8_K => {
                for (src, dst) in dev.chunks_exact(rw).zip(out.chunks_exact_mut(rb)) {
                    match q8k {
                        Q8kLayout::Split => q8k_join(src, dst),
                        // ggml's blocks (first in the row with both layouts).
                        Q8kLayout::Ggml | Q8kLayout::Both => dst.copy_from_slice(&src[..rb]),
                    }
                }
            }
            _ => {
                let nh = if fmt == Format::Q8_0 { 1 } else { 2 };
                for (src, dst) in dev.chunks_exact(rw).zip(out.chunks_exact_mut(rb)) {
                    for (b, blk) in dst.chunks_exact_mut(bb).enumerate() {
                        blk[2 * nh..].copy_from_slice(&src[32 * b..32 * b + 32]);
                        for k in 0..nh {
                            let o = 4 * ((8 + k) * nb + b);
                            let w = u32::from_le_bytes([src[o], src[o + 1], src[o + 2], src[o + 3]]);
                            blk[2 * k..2 * k + 2].copy_from_slice(&narrow_f16(w).to_le_bytes());
                        }
                    }
                }
            }
        })
    }

    /// Lock the scratch, growing its output/readback buffers to at least `bytes`.
    fn scratch(&self, bytes: u64) -> Result<std::sync::MutexGuard<'_, Box<Scratch>>> {
        let mut s = self.scratch.lock().map_err(|_| WgpuError::Gpu("scratch poisoned".into()))?;
        if bytes > s.cap {
            if bytes + PAD > self.max_binding() {
                return Err(WgpuError::Unsupported(format!(
                    "an output of {bytes} bytes exceeds this adapter's storage binding limit ({} bytes)",
                    self.max_binding()
                )));
            }
            let cap = bytes.max(s.cap * 2).min(self.max_binding() - PAD);
            // The parameter ring carries over: [`WgpuOut`] bind groups point at it.
            let params = s.params.clone();
            **s = make_scratch(&self.device, &self.layouts, &params, cap, self.direct_out);
            self.check_errors()?;
        }
        Ok(s)
    }

    /// `out[t * rows + r] = vec_dot(row r, token t)` for the first `tokens` tokens of `a`.
    pub fn matmul(&self, w: &WgpuWeights, a: &WgpuActs, tokens: usize, out: &mut [f32]) -> Result<()> {
        let _op = self.lock_op()?;
        self.matmul_locked(w, a, tokens, out)
    }

    /// [`WgpuBackend::matmul`] under the caller's operation lock.
    fn matmul_locked(&self, w: &WgpuWeights, a: &WgpuActs, tokens: usize, out: &mut [f32]) -> Result<()> {
        self.check_matmul(w, a, tokens, "output ([tokens][rows])", out.len(), true)?;
        let n = (out.len() * 4) as u64;
        let mut sc = self.scratch(n)?;
        if self.matmul_chunked(&mut sc, w, a, tokens, out)?.is_some() {
            return Ok(());
        }
        self.encode_matmul(&mut sc, w, a, tokens, 1, !self.direct_out)?;
        let src = if self.direct_out { &sc.out } else { &sc.read };
        self.read_back(src, n, |b| self.copy_out(&mut [(&b[..out.len() * 4], out)]))
    }

    /// Several matmuls in one submission and one read-back, e.g. a layer's routed experts each
    /// with its own tokens: job i's `[tokens_i][rows_i]` result lands in `out` right after job
    /// i-1's (`out.len()` is the sum of `tokens_i * rows_i`). The jobs go in runs whose
    /// dispatches fit the parameter ring (256 slots), one submission and one wait a run; a job
    /// that alone needs more runs as [`WgpuBackend::matmul`]. The same kernels, so the same
    /// bits, as one `matmul` a job.
    pub fn matmul_grouped(&self, jobs: &[(&WgpuWeights, &WgpuActs, usize)], out: &mut [f32]) -> Result<()> {
        let _op = self.lock_op()?;
        let mut total = 0usize;
        for &(w, a, t) in jobs {
            let n = t.checked_mul(w.rows).ok_or(ShapeError::Overflow)?;
            self.check_matmul(w, a, t, "grouped job output", n, true)?;
            total = total.checked_add(n).ok_or(ShapeError::Overflow)?;
        }
        if out.len() != total {
            return Err(ShapeError::Length { what: "grouped output", expected: total, got: out.len() }.into());
        }
        // Each job's dispatches (`jobs_of`); `grouped_run` moves their results to the job's
        // offset in the run's output: row r of token t at `off + t * rows + r` (`push_params`).
        let plan: Vec<(Vec<Job>, Tuning)> =
            jobs.iter().map(|&(w, _, t)| (jobs_of(w, t, 0, w.rows), self.call_tune(w))).collect();
        let (mut i, mut off) = (0, 0);
        while i < jobs.len() {
            let (w, a, t) = jobs[i];
            let n = t * w.rows;
            if plan[i].0.len() > SLOTS as usize {
                self.matmul_locked(w, a, t, &mut out[off..off + n])?;
                (i, off) = (i + 1, off + n);
                continue;
            }
            // The run: jobs i..e, whose dispatches fit the ring together.
            let (mut e, mut slots, mut len) = (i, 0, 0);
            while e < jobs.len() && slots + plan[e].0.len() <= SLOTS as usize {
                slots += plan[e].0.len();
                len += jobs[e].2 * jobs[e].0.rows;
                e += 1;
            }
            self.grouped_run(&jobs[i..e], &plan[i..e], &mut out[off..off + len])?;
            (i, off) = (e, off + len);
        }
        Ok(())
    }

    /// One submission of `jobs` (their dispatches `plan`, at most [`SLOTS`] in all), then
    /// the read-back into `out`. With direct output, runs of up to [`APART_JOBS`] jobs write
    /// each job's results into its own readback buffer (`sc.reads[k]`), so that no two jobs'
    /// dispatches write one buffer: wgpu puts a barrier between two dispatches that write the
    /// same storage buffer, which on Vulkan waits for all earlier dispatches, so that into one
    /// output a group's small matmuls run one at a time. Otherwise every job writes its place
    /// in the scratch output, read back at once.
    fn grouped_run(
        &self,
        jobs: &[(&WgpuWeights, &WgpuActs, usize)],
        plan: &[(Vec<Job>, Tuning)],
        out: &mut [f32],
    ) -> Result<()> {
        let n = (out.len() * 4) as u64;
        let mut sc = self.scratch(n)?;
        let apart = self.direct_out && (2..=APART_JOBS).contains(&jobs.len());
        let lens: Vec<u64> = jobs.iter().map(|&(w, _, t)| (t * w.rows * 4) as u64).collect();
        if apart {
            self.ensure_reads(&mut sc, jobs.len(), lens.iter().copied().max().unwrap_or(0))?;
        }
        let mut pipes = Vec::with_capacity(jobs.len());
        sc.staging.clear();
        let mut off = 0usize;
        for (&(w, a, t), (djobs, tune)) in jobs.iter().zip(plan) {
            let wr = wg_rows(w.format, *tune);
            push_params(&mut sc.staging, w, a, djobs, wr, if apart { 0 } else { off });
            pipes.push((self.matmul_pipes(w.format, djobs, *tune)?, wr));
            off += t * w.rows;
        }
        // The ring now holds other parameters than any single call's.
        self.queue.write_buffer(&sc.params, 0, &sc.staging);
        sc.written.clear();
        let mut enc = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            let mut slot0 = 0;
            for (k, ((&(w, a, _), (djobs, _)), (jp, wr))) in jobs.iter().zip(plan).zip(&pipes).enumerate() {
                let group = if apart {
                    sc.reads[k].1.as_ref().expect("direct output: a bind group a buffer")
                } else {
                    &sc.group
                };
                pass.set_bind_group(1, &a.group, &[]);
                self.dispatch_jobs(&mut pass, group, w, djobs, slot0, jp, *wr);
                slot0 += djobs.len();
            }
        }
        if !self.direct_out {
            enc.copy_buffer_to_buffer(&sc.out, 0, &sc.read, 0, n);
        }
        self.queue.submit([enc.finish()]);
        if !apart {
            let src = if self.direct_out { &sc.out } else { &sc.read };
            return self.read_back(src, n, |b| self.copy_out(&mut [(&b[..out.len() * 4], out)]));
        }
        let done: Vec<_> = sc.reads.iter().zip(&lens).map(|((read, _), &n)| map_read(read, 0..n)).collect();
        let mut offs = Vec::with_capacity(lens.len());
        let mut off = 0;
        for &n in &lens {
            offs.push(off);
            off += n as usize / 4;
        }
        self.read_mapped(&sc.reads, &done, &lens, "a grouped job's output", |k, view| {
            let o = offs[k];
            self.copy_out(&mut [(view, &mut out[o..o + view.len() / 4])]);
        })
    }

    /// Wait for the mappings `done[k]` of `reads[k]`'s first `lens[k]` bytes in turn, hand each
    /// mapped range to `f(k, bytes)`, and unmap every buffer whatever fails (the first error
    /// is returned; `what` names the buffers in it).
    fn read_mapped(
        &self,
        reads: &[(wgpu::Buffer, Option<wgpu::BindGroup>)],
        done: &[Arc<Mutex<Option<bool>>>],
        lens: &[u64],
        what: &str,
        mut f: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        let mut result = Ok(());
        for (k, &n) in lens.iter().enumerate() {
            let read = &reads[k].0;
            if result.is_ok() {
                result = self.wait_done(&done[k]);
            }
            if !map_ok(&done[k]).unwrap_or(false) {
                if result.is_ok() {
                    result = Err(WgpuError::Gpu(format!("mapping {what} failed")));
                }
                continue;
            }
            if result.is_ok() {
                match read.get_mapped_range(0..n) {
                    Ok(view) => f(k, &view),
                    Err(e) => result = Err(WgpuError::Gpu(e.to_string())),
                }
            }
            read.unmap();
        }
        self.check_errors()?;
        result
    }

    /// What a matmul of `tokens` tokens of `a` with `w` into `out_len` floats needs: both of
    /// this device, the pairing and widths agreeing, 1..=capacity tokens, and `out_len` equal
    /// to (`exact`) or at least `tokens * rows`.
    fn check_matmul(
        &self,
        w: &WgpuWeights,
        a: &WgpuActs,
        tokens: usize,
        what: &'static str,
        out_len: usize,
        exact: bool,
    ) -> Result<()> {
        self.check_acts(a)?;
        if w.device != self.device_id() {
            return Err(WgpuError::Unsupported("weights of another wgpu device".into()));
        }
        let act = w.format.vec_dot_type().unwrap_or(Format::Q8_0);
        if a.format != act {
            return Err(ShapeError::Pairing { weights: w.format, expected: act, got: a.format }.into());
        }
        if a.cols != w.cols {
            return Err(ShapeError::Length { what: "activation columns", expected: w.cols, got: a.cols }.into());
        }
        let want = tokens.checked_mul(w.rows).ok_or(ShapeError::Overflow)?;
        if tokens == 0 || tokens > a.capacity || (if exact { out_len != want } else { out_len < want }) {
            return Err(ShapeError::Length { what, expected: want, got: out_len }.into());
        }
        Ok(())
    }

    /// Threads that copy a large result out of a mapped buffer, the caller's included
    /// ([`Options::copy_threads`]). One thread copied about 12-17 GB/s on the H200's host
    /// (benches/results/2026-12-04-h200-session8, `--latency`), which made the copy a third of a
    /// 1 GiB NT 1 call's cost beyond its kernel.
    pub fn copy_threads(&self) -> usize {
        self.copy_pool.as_ref().map_or(1, |p| p.current_num_threads() + 1)
    }

    /// Copy each `(bytes, out)` pair out of a mapped range ([`par_copy`] on the copy threads).
    fn copy_out(&self, pairs: &mut [(&[u8], &mut [f32])]) {
        par_copy(self.copy_pool.as_ref(), pairs);
    }

    /// Encode and submit `reps` repetitions of the matmul of `tokens` tokens (the parameter
    /// ring is written once per batch; with `copy`, the output is copied to the readback
    /// buffer after the last dispatch).
    fn encode_matmul(
        &self,
        sc: &mut Scratch,
        w: &WgpuWeights,
        a: &WgpuActs,
        tokens: usize,
        reps: usize,
        copy: bool,
    ) -> Result<()> {
        self.encode_matmul_into(sc, None, w, a, tokens, reps, copy)
    }

    /// [`WgpuBackend::encode_matmul`] into `out` (a [`WgpuOut`]'s bind group; `None`: the
    /// scratch output).
    #[allow(clippy::too_many_arguments)]
    fn encode_matmul_into(
        &self,
        sc: &mut Scratch,
        out: Option<&wgpu::BindGroup>,
        w: &WgpuWeights,
        a: &WgpuActs,
        tokens: usize,
        reps: usize,
        copy: bool,
    ) -> Result<()> {
        let n = (tokens * w.rows * 4) as u64;
        let jobs = jobs_of(w, tokens, 0, w.rows);
        let tune = self.call_tune(w);
        let pipes = self.matmul_pipes(w.format, &jobs, tune)?;
        let wr = wg_rows(w.format, tune);
        let nbatches = jobs.len().div_ceil(SLOTS as usize);
        for (bi, batch) in jobs.chunks(SLOTS as usize).enumerate() {
            self.stage_params(sc, w, a, batch, wr, nbatches == 1);
            let mut enc = self.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pass.set_bind_group(1, &a.group, &[]);
                for _ in 0..reps {
                    self.dispatch_jobs(&mut pass, out.unwrap_or(&sc.group), w, batch, 0, &pipes, wr);
                }
            }
            if copy && bi + 1 == nbatches {
                enc.copy_buffer_to_buffer(&sc.out, 0, &sc.read, 0, n);
            }
            self.queue.submit([enc.finish()]);
        }
        Ok(())
    }

    /// The tuning a call on `w` runs: the current one resolved for the call's size
    /// (`call_tuning`), with the layout `w` was uploaded with ([`Tuning::ktile`]).
    fn call_tune(&self, w: &WgpuWeights) -> Tuning {
        Tuning { ktile: w.ktiled, ..call_tuning(w.format, w.rows, self.tuning()) }
    }

    /// The matmul pipelines `jobs` need, by token count.
    fn matmul_pipes(
        &self,
        f: Format,
        jobs: &[Job],
        tune: Tuning,
    ) -> Result<[Option<wgpu::ComputePipeline>; MAX_NT + 1]> {
        let mut pipes: [Option<wgpu::ComputePipeline>; MAX_NT + 1] = Default::default();
        for j in jobs {
            if pipes[j.nt].is_none() {
                pipes[j.nt] = Some(self.pipeline(Kernel::Matmul(f, j.nt as u32, tune))?);
            }
        }
        Ok(pipes)
    }

    /// Write the parameter slots of `jobs` (at most [`SLOTS`]) into the ring, unless the ring
    /// already holds exactly these (`remember`: the ring will not be overwritten before the
    /// next call, so the next call may skip an identical write).
    fn stage_params(&self, sc: &mut Scratch, w: &WgpuWeights, a: &WgpuActs, jobs: &[Job], wr: u32, remember: bool) {
        sc.staging.clear();
        push_params(&mut sc.staging, w, a, jobs, wr, 0);
        if !remember || sc.staging != sc.written {
            self.queue.write_buffer(&sc.params, 0, &sc.staging);
            sc.written.clear();
            if remember {
                sc.written.extend_from_slice(&sc.staging);
            }
        }
    }

    /// Dispatch `jobs`, whose parameters are in ring slots `slot0..`.
    #[allow(clippy::too_many_arguments)]
    fn dispatch_jobs(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        out: &wgpu::BindGroup,
        w: &WgpuWeights,
        jobs: &[Job],
        slot0: usize,
        pipes: &[Option<wgpu::ComputePipeline>; MAX_NT + 1],
        wr: u32,
    ) {
        for (k, j) in jobs.iter().enumerate() {
            let (gx, gy) = grid((j.nrows as u32).div_ceil(wr));
            if let Some(pipe) = &pipes[j.nt] {
                pass.set_pipeline(pipe);
            }
            pass.set_bind_group(0, &w.parts[j.part].group, &[]);
            pass.set_bind_group(2, out, &[((slot0 + k) as u64 * SLOT) as u32]);
            pass.dispatch_workgroups(gx, gy, 1);
        }
    }

    /// The matmul in row chunks (`readback_chunks`), each its own submission with its own
    /// readback buffer, so that the host copies chunk c's results while the device computes
    /// chunk c + 1 (`None`: one chunk, or the jobs do not fit the parameter ring; the caller
    /// runs it whole). With [`Options::direct_out`] the chunk's kernels write its
    /// `[tokens][chunk rows]` results straight into its buffer; else they are copied there.
    fn matmul_chunked(
        &self,
        sc: &mut Scratch,
        w: &WgpuWeights,
        a: &WgpuActs,
        tokens: usize,
        out: &mut [f32],
    ) -> Result<Option<()>> {
        let tune = self.call_tune(w);
        let chunks = readback_chunks(out.len() as u64 * 4, w.rows, tune, self.direct_out);
        if chunks < 2 {
            return Ok(None);
        }
        let wr = wg_rows(w.format, tune);
        let per = w.rows.div_ceil(chunks).next_multiple_of(wr as usize);
        let ranges: Vec<(usize, usize)> = (0..w.rows).step_by(per).map(|r| (r, (r + per).min(w.rows))).collect();
        let direct = self.direct_out;
        let per_chunk: Vec<Vec<Job>> = ranges
            .iter()
            .map(|&(ra, rb)| {
                let mut jobs = jobs_of(w, tokens, ra, rb);
                if direct {
                    for j in &mut jobs {
                        (j.out_stride, j.out_row0) = (rb - ra, ra);
                    }
                }
                jobs
            })
            .collect();
        let all: Vec<Job> = per_chunk.iter().flatten().copied().collect();
        if all.len() > SLOTS as usize {
            return Ok(None);
        }
        let pipes = self.matmul_pipes(w.format, &all, tune)?;
        self.ensure_reads(sc, ranges.len(), (tokens * per * 4) as u64)?;
        self.stage_params(sc, w, a, &all, wr, true);
        let mut done: Vec<Arc<Mutex<Option<bool>>>> = Vec::with_capacity(ranges.len());
        let mut slot0 = 0;
        for (c, (&(ra, rb), jobs)) in ranges.iter().zip(&per_chunk).enumerate() {
            let (read, group) = &sc.reads[c];
            let mut enc = self.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pass.set_bind_group(1, &a.group, &[]);
                self.dispatch_jobs(&mut pass, group.as_ref().unwrap_or(&sc.group), w, jobs, slot0, &pipes, wr);
            }
            slot0 += jobs.len();
            let cr = (rb - ra) as u64;
            if group.is_none() {
                for t in 0..tokens as u64 {
                    enc.copy_buffer_to_buffer(&sc.out, (t * w.rows as u64 + ra as u64) * 4, read, t * cr * 4, cr * 4);
                }
            }
            self.queue.submit([enc.finish()]);
            done.push(map_read(read, 0..tokens as u64 * cr * 4));
        }
        // Every chunk's buffer is unmapped before returning, whatever fails.
        let lens: Vec<u64> = ranges.iter().map(|&(ra, rb)| (tokens * (rb - ra) * 4) as u64).collect();
        self.read_mapped(&sc.reads, &done, &lens, "a readback chunk", |c, view| {
            let (ra, rb) = ranges[c];
            let mut pairs: Vec<(&[u8], &mut [f32])> = view
                .chunks_exact((rb - ra) * 4)
                .zip(out.chunks_mut(w.rows))
                .take(tokens)
                .map(|(b, o)| (b, &mut o[ra..rb]))
                .collect();
            self.copy_out(&mut pairs);
        })
        .map(|()| Some(()))
    }

    /// At least `count` readback buffers of `need` bytes or more in `sc.reads` (with direct
    /// output, each with its bind group as an output).
    fn ensure_reads(&self, sc: &mut Scratch, count: usize, need: u64) -> Result<()> {
        if sc.reads.len() >= count && sc.read_cap >= need {
            return Ok(());
        }
        let direct = self.direct_out;
        let cap = need.max(sc.read_cap);
        let usage = if direct {
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::STORAGE
        } else {
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST
        };
        sc.reads = (0..count.max(sc.reads.len()))
            .map(|_| {
                let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("qkern readback chunk"),
                    size: cap + PAD,
                    usage,
                    mapped_at_creation: false,
                });
                let group = direct.then(|| out_group(&self.device, &self.layouts, &buf, &sc.params));
                (buf, group)
            })
            .collect();
        sc.read_cap = cap;
        self.check_errors()
    }

    /// The copy-out call path of [`WgpuBackend::matmul`] run one phase at a time, each waited
    /// for: (kernel submitted and waited, copy to the readback buffer submitted and waited,
    /// `map_async` resolved, host copy out of the mapped range, unmap). A diagnostic for
    /// `examples/bench.rs --latency` (the real call overlaps nothing either, but waits once).
    #[doc(hidden)]
    pub fn call_phases(
        &self,
        w: &WgpuWeights,
        a: &WgpuActs,
        tokens: usize,
        out: &mut [f32],
    ) -> Result<[std::time::Duration; 5]> {
        let _op = self.lock_op()?;
        self.check_acts(a)?;
        if self.direct_out || tokens == 0 || tokens > a.capacity || out.len() != tokens * w.rows {
            return Err(WgpuError::Unsupported("call_phases: copy-out backend, tokens x rows output".into()));
        }
        let n = (out.len() * 4) as u64;
        let wait = || self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| WgpuError::Gpu(e.to_string()));
        let mut sc = self.scratch(n)?;
        let t = std::time::Instant::now();
        self.encode_matmul(&mut sc, w, a, tokens, 1, false)?;
        wait()?;
        let t1 = t.elapsed();
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&sc.out, 0, &sc.read, 0, n);
        self.queue.submit([enc.finish()]);
        wait()?;
        let t2 = t.elapsed();
        let done = map_read(&sc.read, 0..n);
        wait()?;
        let t3 = t.elapsed();
        if map_ok(&done)? {
            {
                let view = sc.read.get_mapped_range(0..n).map_err(|e| WgpuError::Gpu(e.to_string()))?;
                self.copy_out(&mut [(&view[..out.len() * 4], out)]);
            }
        }
        let t4 = t.elapsed();
        sc.read.unmap();
        let t5 = t.elapsed();
        self.check_errors()?;
        Ok([t1, t2 - t1, t3 - t2, t4 - t3, t5 - t4])
    }

    /// Device time of `reps` back-to-back matmuls of `tokens` tokens (one submission, one
    /// wait; no readback): for benchmarks of the kernels alone. The result stays on the
    /// device.
    pub fn bench_matmul(
        &self,
        w: &WgpuWeights,
        a: &WgpuActs,
        tokens: usize,
        reps: usize,
    ) -> Result<std::time::Duration> {
        let _op = self.lock_op()?;
        self.check_acts(a)?;
        if tokens == 0 || tokens > a.capacity || a.cols != w.cols || Some(a.format) != w.format.vec_dot_type() {
            return Err(ShapeError::Length { what: "bench tokens", expected: a.capacity, got: tokens }.into());
        }
        let mut sc = self.scratch((tokens * w.rows * 4) as u64)?;
        // Warm (pipelines built, caches hot), then time.
        self.encode_matmul(&mut sc, w, a, tokens, 1, false)?;
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| WgpuError::Gpu(e.to_string()))?;
        let t = std::time::Instant::now();
        self.encode_matmul(&mut sc, w, a, tokens, reps.max(1), false)?;
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| WgpuError::Gpu(e.to_string()))?;
        let d = t.elapsed();
        self.check_errors()?;
        Ok(d)
    }

    /// A device buffer of `len` f32 for [`WgpuBackend::matmul_to`] (zeroed). At most the
    /// adapter's storage binding size.
    pub fn alloc_out(&self, len: usize) -> Result<WgpuOut> {
        let _op = self.lock_op()?;
        let bytes = (len.max(1) as u64).checked_mul(4).ok_or(ShapeError::Overflow)?;
        if bytes + PAD > self.max_binding() {
            return Err(WgpuError::Unsupported(format!(
                "an output of {bytes} bytes exceeds this adapter's storage binding limit ({} bytes)",
                self.max_binding()
            )));
        }
        use wgpu::BufferUsages as U;
        let buf = self.buffer("qkern device out", bytes + PAD, U::STORAGE | U::COPY_SRC)?;
        let group = out_group(&self.device, &self.layouts, &buf, &self.scratch(0)?.params);
        self.check_errors()?;
        Ok(WgpuOut { device: self.device_id(), buf, group, len })
    }

    /// As [`WgpuBackend::matmul`], into `out[..tokens * rows]` on the device: returns once the
    /// work is submitted (no wait, no copy). [`WgpuBackend::read_out`] or
    /// [`WgpuBackend::synchronize`] wait for it.
    pub fn matmul_to(&self, w: &WgpuWeights, a: &WgpuActs, tokens: usize, out: &mut WgpuOut) -> Result<()> {
        let _op = self.lock_op()?;
        self.check_out(out)?;
        self.check_matmul(w, a, tokens, "device output ([tokens][rows])", out.len, false)?;
        let mut sc = self.scratch(0)?;
        self.encode_matmul_into(&mut sc, Some(&out.group), w, a, tokens, 1, false)?;
        self.check_errors()
    }

    /// Wait for the submitted work, then copy the first `dst.len()` floats of `out` to `dst`.
    pub fn read_out(&self, out: &WgpuOut, dst: &mut [f32]) -> Result<()> {
        let _op = self.lock_op()?;
        self.check_out(out)?;
        if dst.len() > out.len {
            return Err(
                ShapeError::Length { what: "device output read-back", expected: out.len, got: dst.len() }.into()
            );
        }
        if dst.is_empty() {
            return Ok(());
        }
        let n = (dst.len() * 4) as u64;
        let mut sc = self.scratch(0)?;
        if sc.out_read.as_ref().is_none_or(|(_, cap)| *cap < n) {
            use wgpu::BufferUsages as U;
            sc.out_read = Some((self.buffer("qkern device out read-back", n, U::MAP_READ | U::COPY_DST)?, n));
        }
        let (read, _) = sc.out_read.as_ref().expect("made above");
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&out.buf, 0, read, 0, n);
        self.queue.submit([enc.finish()]);
        self.read_back(read, n, |b| self.copy_out(&mut [(&b[..dst.len() * 4], dst)]))
    }

    /// Wait until every submitted operation of this device has finished: by polling where
    /// calls spin ([`Options::spin_wait`], until the queue's work-done callback has run), else
    /// blocking. A blocking wait cost about 75 us against 30-40 spinning on the H200 (see the
    /// crate docs' "Hot path").
    pub fn synchronize(&self) -> Result<()> {
        let _op = self.lock_op()?;
        let (done, set) = done_flag();
        self.queue.on_submitted_work_done(move || set(true));
        self.wait_done(&done)?;
        self.check_errors()
    }

    /// Dequantize all of `w` to f32 (`out.len() == rows * cols`), as ggml's `to_float`.
    pub fn dequantize(&self, w: &WgpuWeights, out: &mut [f32]) -> Result<()> {
        let _op = self.lock_op()?;
        if w.device != self.device_id() {
            return Err(WgpuError::Unsupported("weights of another wgpu device".into()));
        }
        if out.len() != w.rows * w.cols {
            return Err(
                ShapeError::Length { what: "dequantize output", expected: w.rows * w.cols, got: out.len() }.into()
            );
        }
        let pipe = self.pipeline(Kernel::Dequant(w.format, self.tuning().checks, w.ktiled))?;
        // Rows per dispatch: the output chunk stays within 64 MiB and the binding limit.
        let chunk_bytes = (64u64 << 20).min(self.max_binding() - PAD);
        let rows_per = ((chunk_bytes / (w.cols as u64 * 4)) as usize).max(1);
        for p in &w.parts {
            let mut r = 0;
            while r < p.rows {
                let nr = rows_per.min(p.rows - r);
                let ne = nr * w.cols;
                let n = (ne * 4) as u64;
                let mut sc = self.scratch(n)?;
                let (gx, gy) = grid((ne as u32).div_ceil(256));
                let nb = (w.cols / w.format.block_elems()) as u32;
                let words: [u32; 7] = [ne as u32, w.cols as u32, w.row_bytes as u32, r as u32, gx, p.rows as u32, nb];
                self.queue.write_buffer(&sc.params, 0, bytemuck::cast_slice(&words));
                sc.written.clear();
                let mut enc = self.device.create_command_encoder(&Default::default());
                {
                    let mut pass = enc.begin_compute_pass(&Default::default());
                    pass.set_pipeline(&pipe);
                    pass.set_bind_group(0, &p.group, &[]);
                    pass.set_bind_group(1, &sc.group, &[0]);
                    pass.dispatch_workgroups(gx, gy, 1);
                }
                if !self.direct_out {
                    enc.copy_buffer_to_buffer(&sc.out, 0, &sc.read, 0, n);
                }
                self.queue.submit([enc.finish()]);
                let dst = &mut out[(p.row0 + r) * w.cols..(p.row0 + r + nr) * w.cols];
                let sc = &mut *sc;
                let src = if self.direct_out { &sc.out } else { &sc.read };
                self.read_back(src, n, |b| self.copy_out(&mut [(&b[..ne * 4], dst)]))?;
                r += nr;
            }
        }
        Ok(())
    }

    /// Run the probe kernel on `words` (3 per case), returning `per` words per case.
    pub(crate) fn run_probe(&self, words: &[u32], n: usize, per: usize) -> Result<Vec<u32>> {
        let _op = self.lock_op()?;
        let pipe = self.pipeline(Kernel::Probe)?;
        self.probe_dispatch(&pipe, words, n as u32, (n as u32).div_ceil(64), (n * per * 4) as u64)
    }

    /// One dispatch of a probe kernel (the quantizers' bindings: input words, output words, a
    /// uniform whose first word is `param`) over `groups` workgroups; returns the first
    /// `obytes` of its output as words.
    fn probe_dispatch(
        &self,
        pipe: &wgpu::ComputePipeline,
        words: &[u32],
        param: u32,
        groups: u32,
        obytes: u64,
    ) -> Result<Vec<u32>> {
        use wgpu::BufferUsages as U;
        let input = self.buffer("probe in", (words.len().max(4) * 4) as u64, U::STORAGE | U::COPY_DST)?;
        let output = self.buffer("probe out", obytes, U::STORAGE | U::COPY_SRC)?;
        let read = self.buffer("probe read", obytes, U::MAP_READ | U::COPY_DST)?;
        let params = self.buffer("probe params", SLOT, U::UNIFORM | U::COPY_DST)?;
        self.queue.write_buffer(&input, 0, bytemuck::cast_slice(words));
        self.queue.write_buffer(&params, 0, bytemuck::cast_slice(&[param, 0, 0, 0]));
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("probe"),
            layout: &self.layouts.quant,
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: input.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: output.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 2, resource: params.as_entire_binding() },
            ],
        });
        let mut enc = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(pipe);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(groups, 1, 1);
        }
        enc.copy_buffer_to_buffer(&output, 0, &read, 0, obytes);
        self.queue.submit([enc.finish()]);
        self.read_back(&read, obytes, |b| words_of(&b[..obytes as usize]))
    }

    /// Whether subgroups hold whole, linearly numbered groups of 8 invocations (what the
    /// shuffle-based lane reductions assume): one small kernel run at device creation.
    fn subgroups_usable(&self) -> Result<bool> {
        let src = "\
            @group(0) @binding(0) var<storage, read> PI: array<u32>;\n\
            @group(0) @binding(1) var<storage, read_write> PO: array<u32>;\n\
            @group(0) @binding(2) var<uniform> PPar: vec4<u32>;\n\
            @compute @workgroup_size(64)\n\
            fn main(@builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) sid: u32,\n\
                    @builtin(subgroup_size) ss: u32) {\n\
                let x = subgroupShuffleXor(lid, 5u);\n\
                PO[lid] = sid | (ss << 8u) | (x << 16u);\n\
            }\n";
        let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("qkern subgroup probe"),
            source: wgpu::ShaderSource::Wgsl(src.into()),
        });
        let pipe = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("qkern subgroup probe"),
            layout: Some(&self.layouts.quant_pl),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        // A shader the adapter rejects is an error here, before anything runs.
        if self.check_errors().is_err() {
            return Ok(false);
        }
        let words = self.probe_dispatch(&pipe, &[], 0, 1, 256)?;
        Ok(words.iter().enumerate().all(|(lid, &w)| {
            let (sid, ss, x) = (w & 0xff, (w >> 8) & 0xff, w >> 16);
            ss >= 8 && ss.is_power_of_two() && sid as usize == lid % ss as usize && x as usize == lid ^ 5
        }))
    }
}

/// `QKERN_WGPU_CHUNKS`: readback chunks, 0 (by size) to 64.
fn parse_chunks(v: &str) -> Option<u8> {
    v.parse().ok().filter(|c: &u8| *c <= 64)
}

/// Whether [`Tuning::ktile`] changes the device layout of `f` (q4_K and q5_K: their blocks
/// whole in the tiled order; the IQ2/IQ3 formats: tiled and split).
pub fn ktile_applies(f: Format) -> bool {
    layout::ktiles(f)
}

/// `QKERN_WGPU_IQPAIR`: from how many tokens the IQ2/IQ3 formats run on thread pairs (0: never).
fn parse_iq_pairs(v: &str) -> Option<u8> {
    v.parse().ok().filter(|n: &u8| *n <= 8)
}

/// [`Tuning::iq_pairs`]: each IQ2/IQ3 format from its own token count ([`iq_pairs_from`]).
pub const IQ_PAIRS_PER_FORMAT: u8 = u8::MAX;

/// From how many tokens the IQ2/IQ3 format `f` runs on thread pairs by default, with q8_K in both
/// layouts, its weights tiled and split ([`Tuning::ktile`], the default: `tiled`) or in ggml's
/// row order.
///
/// Tiled and split: the thread pairs from one token (iq2_xxs's from 2 until its pairs read
/// 16-byte elements, session 38, `shaders::iq_elem`: then NT 1 1184 / 1596 and 1183 / 1586
/// kernel-only GB/s, 8 invocations / pairs, H100, benches/results/2026-12-07-session38 run1).
/// Before that, H100 (driver
/// 580.159.04), benches/results/2026-12-06-session29 run4, kernel-only GB/s, fastest of 3
/// interleaved rounds, 8 invocations / pairs: NT 1 iq2_xxs 1177 / 1032, iq2_xs 1229 / 1684,
/// iq2_s 1332 / 1365, iq3_xxs 1550 / 1849, iq3_s 1593 / 1877; NT 2 iq2_xxs 843 / 982, iq2_xs 893
/// / 1133, iq2_s 993 / 1144, iq3_xxs 1133 / 1618, iq3_s 1209 / 1606; NT 4 and 8 the pairs by
/// 50-100 %. (In ggml's row order the same run agreed with the counts below: NT 1 iq2_xs 1112 /
/// 1015, iq2_s 1182 / 912, iq3_s 1429 / 1244.) Against the row order's defaults, the tiled
/// defaults gained at NT 1: iq2_xxs 1107 -> 1177, iq2_xs 1108 -> 1684, iq2_s 1183 -> 1365, iq3_xxs
/// 1360 -> 1849, iq3_s 1415 -> 1877.
///
/// Row order: where the pairs on the split copy measured faster than 8 invocations a row on ggml's
/// blocks on the H200 (benches/results/2026-12-05-h200-session16 run7 `iqnt.log`, kernel-only GB/s,
/// 8 invocations / pairs): iq2_xxs from 1 token (NT 1 1058 / 1103, NT 2 774 / 875), iq3_xxs from 2
/// (NT 1 1360 / 1244, NT 2 1045 / 1118), iq2_s from 4 (NT 2 889 / 734, NT 3 710 / 686, NT 4 590 /
/// 643), iq3_s then from 4 too (NT 3 881 / 804, NT 4 740 / 868); iq2_xs, measured at NT 1 and 8
/// only (run1: 1111 / 1000, 320 / 469), from 2. At NT 8 the pairs gain 33-72 % for every one of
/// them (iq2_xxs 290 / 491, iq3_xxs 413 / 623).
///
/// iq3_s moved to 2 once the pairs staged their activations (session 25, `default_stage`): H100
/// (driver 580.159.04), benches/results/2026-12-06-session26 run5-wstage, fastest of 3 interleaved
/// rounds (`examples/bench.rs --rounds`), 8 invocations / pairs: NT 1 1429 / 1239, NT 2 1103 /
/// 1188, NT 3 891 / 980, NT 4 747 / 993. The same run kept the others: iq3_xxs NT 1 1376 / 1375 (a
/// tie; session 16's H200 had 8 invocations ahead), NT 2 1052 / 1246; iq2_s NT 2 897 / 731, NT 3
/// 713 / 681, NT 4 594 / 643. (Runs 2-4, one round each, had iq3_xxs's pairs 9 % ahead at NT 1;
/// identical kernels read up to 2.5x apart there, the GPU's clocks, which the fastest of
/// interleaved rounds filters.)
pub fn iq_pairs_from(f: Format, tiled: bool) -> u8 {
    match (f, tiled) {
        (_, true) => 1,
        (Format::IQ2_XXS, false) => 1,
        (Format::IQ2_S, false) => 4,
        _ => 2,
    }
}

/// Whether `nt`-token dispatches of `f` run the IQ2/IQ3 formats on thread pairs under `t` (a
/// call's tuning, whose `ktile` is its weights' layout: `call_tune`).
fn iq_pairs_at(t: Tuning, f: Format, nt: u32) -> bool {
    let from = if t.iq_pairs == IQ_PAIRS_PER_FORMAT { iq_pairs_from(f, t.ktile) } else { t.iq_pairs };
    from != 0 && nt >= u32::from(from)
}

/// `QKERN_WGPU_PAIR_ROWS`: 0 (per format), 1, 2 or 2g (two, q4_K and q5_K on the generic
/// kernel too).
fn parse_pair_rows(v: &str) -> Option<(u8, bool)> {
    match v {
        "0" => Some((0, false)),
        "1" => Some((1, false)),
        "2" => Some((2, false)),
        "2g" => Some((2, true)),
        _ => None,
    }
}

/// `QKERN_WGPU_STAGE`: `auto` (by format and token count, `call_tuning`), `N` (from N tokens,
/// 0 to 8; 0: never) or `N:S` (S steps or blocks a chunk, 1 to 64).
fn parse_stage(v: &str) -> Option<(u8, u8)> {
    let (n, c) = match v.split_once(':') {
        Some((n, c)) => (n, Some(c)),
        None => (v, None),
    };
    let n: u8 = if n == "auto" { STAGE_BY_SIZE } else { n.parse().ok().filter(|&n| n <= 8)? };
    let c: u8 = match c {
        Some(c) => c.parse().ok().filter(|c| (1..=64).contains(c))?,
        None => 0,
    };
    Some((n, c))
}

/// The tuning of a matmul call of `rows` rows of format `f` under `t`: [`STAGE_BY_SIZE`]
/// resolved. The dispatches of a format with a default staging ([`default_stage`]) stage at
/// the token counts it names ([`STAGE_PER_NT`]); calls of at least [`STAGE_ROWS`] rows on its
/// rows per workgroup, smaller ones on the format's usual rows (unless `t` fixes the rows).
///
/// Smaller calls, H100 (benches/results/2026-12-06-session25, run7: about 1000-2000 rows, run8:
/// 7000-20000, 4096 columns), kernel-only GB/s not staged / staged on the usual rows, NT 1, 4,
/// 8. Run8: q4_K 1263 / 1813, 649 / 854, 439 / 438; q6_K 959 / 1638, 597 / 1033, 482 / 712;
/// q5_1 795 / 792, 471 / 562, 385 / 404; q8_0 931 / 917, 518 / 721, 380 / 486; iq4_nl 1043 /
/// 1034, 487 / 893, 444 / 628; iq3_xxs 1047 / 1037, 481 / 700, 484 / 526. Run7 (bound by the
/// dispatch more than the weights): q6_K 104 / 207, 64 / 124, 52 / 86; q8_0 133 / 130, 66 /
/// 93, 46 / 61; iq4_nl 115 / 113, 56 / 123, 53 / 92; q4_K 145 / 211, 66 / 90, 10.7 / 8.9.
/// Run10 timed this rule against `nost` in all 13 formats, twice (the session's NOTES.md has
/// the tables): at 4 and 8 tokens it won in most cells (nvfp4 x2.3-2.8), at one token it was
/// within the noise of these short dispatches or better; it lost 5-9 % in medium calls of
/// iq2_xxs and q5_K at 8 tokens. Timed again with 5 interleaved rounds
/// (benches/results/2026-12-06-session26 run6-wstage, staged / not, NT 8): iq2_xxs 333 / 363 at
/// 30504 rows, a loss kept as small and large calls gain; q5_K 397 / 401, q4_K 379 / 385.
fn call_tuning(f: Format, rows: usize, t: Tuning) -> Tuning {
    if t.stage != STAGE_BY_SIZE {
        return t;
    }
    // The cooperative-matrix kernels (opt-in) run only on their own rows per workgroup
    // (`coop_kernel`): where a call may take them, it keeps the format's rows.
    let coop = (1..=MAX_NT as u32).any(|nt| t.coop.kernel(f, nt).is_some());
    match default_stage(f) {
        (0, _) => Tuning { stage: 0, ..t },
        (_, wr) => {
            let wg_rows = if t.wg_rows != 0 {
                t.wg_rows
            } else if rows >= STAGE_ROWS && !coop {
                wr
            } else {
                0
            };
            Tuning { stage: STAGE_PER_NT, wg_rows, ..t }
        }
    }
}

/// [`Tuning::stage`] as `call_tuning` resolves [`STAGE_BY_SIZE`]: a dispatch of `nt` tokens
/// stages where bit `nt - 1` of its format's [`default_stage`] mask is set (`nt` above 8 as 8).
/// Never set by a user: [`WgpuBackend::set_tuning`] and the options keep `stage` to 0..=8 or
/// [`STAGE_BY_SIZE`].
const STAGE_PER_NT: u8 = u8::MAX - 1;

/// The staging of a call of `f` by default: (the token counts that stage, bit `nt - 1`; rows
/// per workgroup in calls of at least [`STAGE_ROWS`] rows, 0: the format's). Measured on an
/// H100 (driver 580.159.04), 1 GiB of weights, kernel-only GB/s, not staged on the format's
/// rows / staged on the rows here.
///
/// The pair formats, on 128 rows (benches/results/2026-12-06-session24, run6), NT 1, 4, 8: q8_0
/// 2928 / 2867, 2434 / 2686, 1479 / 1948; q5_1 2790 / 2681, 1597 / 1966, 952 / 1267; iq4_nl
/// 2202 / 2245, 1213 / 1448, 678 / 937; nvfp4 2234 / 2338, 1252 / 1626, 731 / 950. In these
/// 1 GiB calls staging on 32 rows lost at NT 1 (iq4_nl 2144 -> 1406, run2), and 64 rows
/// unstaged lost there too (q8_0 2742 -> 2320, run4); in calls below [`STAGE_ROWS`] rows,
/// staged on 32 rows, NT 1 was within the noise (`call_tuning`).
///
/// The thread pairs (benches/results/2026-12-06-session25, run3 and run4 at every NT, run4 twice),
/// the K-quants and iq4_xs on 64 rows, NT 1, 4, 8: q4_K 2036 / 2135, 1174 / 1650, 769 / 1135; q5_K
/// 2384 / 2444, 1543 / 2060, 1065 / 1280 (but NT 2 2329 / 2219, so not there); q6_K 2537 / 2593,
/// 1193 / 2451, 840 / 1677; iq4_xs 1794 / 1878, 1294 / 1494, 943 / 1045. The IQ2/IQ3 formats on
/// their 32 rows (staged only where they run on pairs, [`iq_pairs_from`]: then iq2_xxs from 1
/// token, iq2_s and iq3_s from 4 (iq3_s from 2 since session 26), the rest from 2), NT 2, 4, 8:
/// iq2_xxs 889 / 949, 513 / 759, 504 / 561 (NT 1 1127 / 1089, so not there); iq2_xs 855 / 897, 449 / 745, 453 / 531 (NT 3 774 / 734, so
/// not there); iq3_xxs 1133 / 1265, 687 / 997, 611 / 783; iq3_s 1115 / 1118, 868 / 1005, 586 / 783;
/// iq2_s lost from 4 tokens on (646 / 562, 506 / 418), so it does not stage. (Those were ggml's
/// row order. Tiled and split, the default since session 29, the pairs run from one token but
/// iq2_xxs's from 2, with these masks: session 29 run4 timed exactly these kernels, NT 1
/// iq3_xxs and iq3_s staged, iq2_xs and iq2_s not.)
///
/// Tiled and split, iq2_xs and iq3_s on 64 rows (benches/results/2026-12-06-session30 run7,
/// fastest of 3 interleaved rounds, 32 / 64 rows), NT 1, 2, 3, 4, 8: iq2_xs 1603 / 1591, 1114 /
/// 1412, 770 / 780, 854 / 1057, 587 / 692; iq3_s 1780 / 1881, 1601 / 1739, 1275 / 1499, 1193 /
/// 1367, 904 / 934 (run6 alike). iq2_s gained at NT 1-2 but lost 14-21 % from NT 3 (1016 / 799,
/// 921 / 810, 636 / 546), iq3_xxs was within 4 % either way: they keep 32.
///
/// iq2_xs stages at 3 tokens too since session 31 (benches/results/2026-12-06-session31
/// run3-wstage-iq2, H100, kernel-only GB/s, 64 rows not staged / staged): NT 3 787 / 1186; NT 1
/// 1726 / 1737 (within the noise: not there). iq2_s, staged on 64 rows / its default (32 rows,
/// not staged): NT 1 1382 / 1377, NT 2 1204 / 1156, NT 3 1075 / 1027, NT 4 920 / 924, NT 8 645 /
/// 648, within 5 %: it keeps its default.
///
/// Calls of fewer than [`STAGE_ROWS`] rows stage at the same token counts on the format's
/// usual rows (`call_tuning` has their numbers).
fn default_stage(f: Format) -> (u8, u32) {
    match f {
        Format::Q8_0 | Format::Q5_1 | Format::IQ4_NL | Format::NVFP4 => (0xff, 128),
        Format::Q4_K | Format::Q6_K | Format::IQ4_XS => (0xff, 64),
        Format::Q5_K => (0xfd, 64),
        Format::IQ2_XXS => (0xfe, 0),
        Format::IQ2_XS => (0xfe, 64),
        Format::IQ3_XXS => (0xff, 0),
        Format::IQ3_S => (0xff, 64),
        _ => (0, 0),
    }
}

/// Whether an `nt`-token dispatch of `f` stages under `t` (before its kernel's own limits,
/// `stage_steps_of`).
fn stages_at(f: Format, nt: u32, t: Tuning) -> bool {
    match t.stage {
        0 | STAGE_BY_SIZE => false,
        STAGE_PER_NT => default_stage(f).0 >> (nt.clamp(1, 8) - 1) & 1 == 1,
        s => nt >= u32::from(s),
    }
}

/// Steps a chunk of the staged activations (`Tuning::stage`) of `nt`-token dispatches of `f`
/// under `t`, on an adapter with `limit` bytes of workgroup storage; 0: not staged. The pair
/// formats' chunks are steps (at most 64); the thread pairs' (the K-quants, iq4_xs, the
/// IQ2/IQ3 formats where they run on pairs) are blocks of 256 elements (at most 16). Not
/// staged: other kernels (the IQ2/IQ3 formats on 8 invocations a row, the cooperative
/// matrices), too few tokens, or not even one step or block fitting beside the kernel's
/// tables.
fn stage_steps_of(f: Format, nt: u32, t: Tuning, limit: u32) -> u32 {
    if !stages_at(f, nt, t) {
        return 0;
    }
    let pair = layout::is_pair(f);
    let kpair = shaders::on_kpair(f, iq_pairs_at(t, f, nt)) && coop_kernel(f, nt, t).is_none();
    if !pair && !kpair {
        return 0;
    }
    let bytes = |n: u32| {
        if pair { shaders::stage_bytes(f, nt, n) } else { shaders::kstage_bytes(f, nt, n) }
    };
    // Room beside the kernel's other workgroup arrays: the pair formats' 16-entry and
    // byte-pair tables (16 bytes and 2 KiB), the reductions without subgroups (8 bytes an
    // invocation, at most 2 KiB); the thread pairs' grids (table_words) and iq4_xs's byte-pair
    // tables (2 KiB), the reductions. `staged_kernels_fit_the_workgroup_storage` checks it.
    let reserve = if pair { PAIR_STAGE_RESERVE } else { KPAIR_STAGE_RESERVE + 4 * shaders::table_words(f) as u32 };
    let room = limit.saturating_sub(reserve);
    let most = if pair { 64 } else { 16 };
    let want = if t.stage_steps != 0 { u32::from(t.stage_steps).min(most) } else { most };
    let budget = if t.stage_steps != 0 { room } else { room.min(STAGE_BYTES) };
    let mut n = want;
    while n > 1 && bytes(n) > budget {
        n = if t.stage_steps != 0 { n - 1 } else { n / 2 };
    }
    if bytes(n) > room { 0 } else { n }
}

/// The WGSL source of the matmul kernel of `f` for `nt` tokens under `t` (resolved per call,
/// `call_tuning`), on a device with or without subgroups, q8_K layout `q8k` and `limit` bytes
/// of workgroup storage; `None`: no such kernel.
fn matmul_kernel_source(f: Format, nt: u32, t: Tuning, subgroups: bool, q8k: Q8kLayout, limit: u32) -> Option<String> {
    let iq_pairs = iq_pairs_at(t, f, nt);
    let (pair_rows, pair_generic) = pair_rows_of(f, nt, t);
    let o = shaders::MmSrc {
        nt,
        subgroups,
        native_fma: t.native_fma,
        unroll: unroll_of(f, nt, t),
        rows: wg_rows(f, t),
        lut2: t.lut2,
        iq_pairs,
        q8k_split: q8k.split_for(f, iq_pairs, pair_rows),
        q8k_both: q8k == Q8kLayout::Both,
        pair_rows,
        pair_generic,
        stage: stage_steps_of(f, nt, t, limit),
        ktile: t.ktile && crate::layout::ktiles(f),
    };
    match coop_kernel(f, nt, t) {
        Some(tiles) => shaders::coop_source(f, &o, tiles),
        None => shaders::matmul_source(f, &o)
            .map(|s| if t.flat || flat_by_default(f) { shaders::flatten_loops(&s, nt, 8) } else { s }),
    }
}

/// `QKERN_WGPU_Q8K`: `ggml`, `split` or `both`.
fn parse_q8k(v: &str) -> Option<Q8kLayout> {
    match v {
        "split" => Some(Q8kLayout::Split),
        "ggml" => Some(Q8kLayout::Ggml),
        "both" => Some(Q8kLayout::Both),
        _ => None,
    }
}

/// `QKERN_WGPU_WAIT`: `spin` (true) or `block` (false).
fn parse_wait(v: &str) -> Option<bool> {
    match v {
        "spin" => Some(true),
        "block" => Some(false),
        _ => None,
    }
}

/// Ask wgpu to map `buf[range]` for reading: the returned state becomes `Some(ok)` in the
/// callback, once the submissions before have completed (during a device poll).
fn map_read(buf: &wgpu::Buffer, range: std::ops::Range<u64>) -> Arc<Mutex<Option<bool>>> {
    let (done, set) = done_flag();
    buf.map_async(wgpu::MapMode::Read, range, move |r| set(r.is_ok()));
    done
}

/// A flag for a wgpu callback ([`WgpuBackend::wait_done`] waits for it) and the setter the
/// callback calls with its outcome.
fn done_flag() -> (Arc<Mutex<Option<bool>>>, impl FnOnce(bool) + Send + 'static) {
    let done: Arc<Mutex<Option<bool>>> = Arc::default();
    let d2 = done.clone();
    let set = move |ok: bool| {
        if let Ok(mut g) = d2.lock() {
            *g = Some(ok);
        }
    };
    (done, set)
}

/// Whether the mapping that `done` tracks succeeded (false: failed or not yet resolved).
fn map_ok(done: &Mutex<Option<bool>>) -> Result<bool> {
    Ok(done.lock().map_err(|_| WgpuError::Gpu("map state poisoned".into()))?.unwrap_or(false))
}

/// Append the parameter-ring slots of `jobs` (dispatches of `w` on `a`, `wr` rows a
/// workgroup) to `staging`, one [`SLOT`] each, their results `out_off` floats further into the
/// bound output (a grouped job's place after the jobs before it; 0 for one matmul).
fn push_params(staging: &mut Vec<u8>, w: &WgpuWeights, a: &WgpuActs, jobs: &[Job], wr: u32, out_off: usize) {
    let nb = (w.cols / w.format.block_elems()) as u32;
    for j in jobs {
        let p = &w.parts[j.part];
        let (gx, _) = grid((j.nrows as u32).div_ceil(wr));
        let words: [u32; 11] = [
            p.rows as u32,
            nb,
            w.row_bytes as u32,
            a.row_words as u32,
            j.t0 as u32,
            j.out_stride as u32,
            // Wrapping: a chunk buffer's row 0 is the chunk's first row, which may lie after
            // the part's (the kernels add the row in the part, also wrapping).
            (p.row0 as u32).wrapping_sub(j.out_row0 as u32).wrapping_add(out_off as u32),
            0,
            gx,
            j.rbase as u32,
            (j.rbase + j.nrows) as u32,
        ];
        let start = staging.len();
        staging.extend_from_slice(bytemuck::cast_slice(&words));
        staging.resize(start + SLOT as usize, 0);
    }
}

/// One dispatch of a matmul: weight part, first token, tokens (at most [`MAX_NT`]), first row
/// in the part and rows; where its results go: output row `r` (of the whole matrix) of token
/// `t` at `t * out_stride + r - out_row0` of the bound output buffer.
#[derive(Clone, Copy, Debug)]
struct Job {
    part: usize,
    t0: usize,
    nt: usize,
    rbase: usize,
    nrows: usize,
    out_stride: usize,
    out_row0: usize,
}

/// The dispatches of the rows `ra..rb` of `w` (part by part, token batches in order).
fn jobs_of(w: &WgpuWeights, tokens: usize, ra: usize, rb: usize) -> Vec<Job> {
    let mut jobs = Vec::new();
    for (pi, p) in w.parts.iter().enumerate() {
        let lo = ra.max(p.row0);
        let hi = rb.min(p.row0 + p.rows);
        if lo >= hi {
            continue;
        }
        for t0 in (0..tokens).step_by(MAX_NT) {
            jobs.push(Job {
                part: pi,
                t0,
                nt: (tokens - t0).min(MAX_NT),
                rbase: lo - p.row0,
                nrows: hi - lo,
                out_stride: w.rows,
                out_row0: 0,
            });
        }
    }
    jobs
}

/// Readback chunks of a matmul call with `n` bytes of results over `rows` rows:
/// [`Tuning::chunks`], or by default one per 2 MiB of results, at most 8, where a copy pass
/// moves the results to the readback buffer, and none with direct output (`direct`). On the
/// H200 (call GB/s at 1 GiB of weights): with the copy pass, chunks of 256 KiB cost 2-13 % at
/// 1.2-1.8 MiB of results (the extra submissions cost more than the overlap saves) and gained
/// 9-32 % at 10-15 MiB (q4_K NT 8 334 -> 436 GB/s, q5_K 428 -> 567; session 8, run3); with
/// direct output, 2 MiB chunks lost 2-32 % at NT 8 against none (q5_1 577 -> 437, q4_K
/// 617 -> 505; iq2_xxs +4 %) and 8 chunks lost at NT 1 and 8 (session 9, run2 `envsweep`).
fn readback_chunks(n: u64, rows: usize, t: Tuning, direct: bool) -> usize {
    let c = if t.chunks != 0 {
        t.chunks as usize
    } else if direct {
        1
    } else {
        ((n >> 21) as usize).clamp(1, 8)
    };
    c.clamp(1, rows.max(1))
}

/// Blocks per loop iteration of the matmul kernel of `f` for `nt` tokens under `t`.
fn unroll_of(f: Format, nt: u32, t: Tuning) -> u32 {
    if t.unroll != 0 {
        return t.unroll;
    }
    // The default, from the H200 (NVIDIA Vulkan, 2 blocks per iteration against 1, same
    // kernels otherwise). benches/results/2026-12-03-h200-session5, run2 and run4: the pair
    // formats gain 7-12 % at NT 8 (q8_0, q5_1, nvfp4) and -2..+9 % at NT 1, iq4_nl (whose
    // step is a pair of blocks) 5-6 % at NT 1; the IQ formats 1-6 % at NT 1, +-2 % at NT 8.
    // The K-quants' thread pairs (run1 of benches/results/2026-12-04-h200-session8): NT 1 the
    // same within 1 %; NT 8 q5_K 655 -> 972 GB/s with 2, q6_K 831 -> 803. iq4_xs's thread
    // pairs (benches/results/2026-12-04-h200-session9, run7): 1 block, NT 1 1380 against 1346,
    // NT 8 755 against 614.
    match f {
        Format::Q6_K | Format::IQ4_XS => 1,
        // Their thread pairs: as iq4_xs's (unmeasured).
        _ if iq_pairs_at(t, f, nt) && f.is_iq_grid() => 1,
        Format::Q4_K | Format::Q5_K if nt < 2 => 1,
        _ => 2,
    }
}

/// Rows per pair of invocations of `nt`-token dispatches of `f` under `t`, and whether q4_K
/// and q5_K take the generic two-row kernel ([`Tuning::pair_rows`]; 0 there: these defaults).
/// Two rows where they measured faster on the H200 (NVIDIA Vulkan driver 580,
/// benches/results/2026-12-05-h200-session16 run5 and run6, kernel-only GB/s, one row / two):
/// q8_0 at every NT (NT 1 3802 / 3991, NT 4 2505 / 2893, NT 8 1452 / 1530), q5_1 at every NT
/// (NT 1 2677 / 3078, NT 8 746 / 956), iq4_nl and nvfp4 at NT 1-3 (iq4_nl NT 2 1589 / 1758,
/// nvfp4 NT 1 2003 / 2186; at NT 4, 6, 8 one row is faster), q4_K at NT 1 and 4-8 (NT 1 2360 /
/// 2512, NT 7 558 / 875, NT 8 584 / 813; NT 2-3 within 3 %), q5_K with its own two-row body
/// from NT 2 (NT 8 909 / 1180) and at NT 1 with the generic one (2505 / 3032). q6_K, iq4_xs
/// and the IQ2/IQ3 pairs stay on one row (q6_K NT 5 1355 / 1058, iq4_xs NT 8 752 / 603, iq2_xxs
/// NT 8 501 / 426; run7: q6_K and iq4_xs with their own two-row bodies, written after run6,
/// lost too, NT 8 830 / 701 and 754 / 699, and were removed). Since session 18's tiled iq4_xs
/// layout (layout.rs) its NT 8 takes two rows (H100, benches/results/2026-12-05-h100-session18
/// run7: NT 8 419 / 622; NT 1 1744 / 1766, NT 2 1348 / 1377 and NT 4 1114 / 1155 with an
/// 8-byte-load step since dropped, whose one row measured 9-15 % under the kept step's there).
fn pair_rows_of(f: Format, nt: u32, t: Tuning) -> (u32, bool) {
    if t.pair_rows != 0 {
        return (u32::from(t.pair_rows), t.pair_generic);
    }
    match f {
        Format::Q8_0 | Format::Q5_1 => (2, false),
        Format::IQ4_NL | Format::NVFP4 if nt <= 3 => (2, false),
        Format::Q4_K if nt == 1 || nt >= 4 => (2, false),
        Format::Q5_K => (2, nt == 1),
        Format::IQ4_XS if nt >= 8 => (2, false),
        _ => (1, false),
    }
}

/// Whether the matmul kernels of `f` are flattened (`shaders::flatten_loops`) even without
/// [`Tuning::flat`]: q5_K, NT 1 2420 -> 2634 GB/s and 2403 -> 2666 on the H200 in two runs
/// (benches/results/2026-12-04-h200-session8 run2, run3), NT 8 the same.
fn flat_by_default(f: Format) -> bool {
    f == Format::Q5_K
}

/// Whether `nt`-token dispatches of `f` run the cooperative-matrix kernel under `t` (and
/// natively): only where its rows per workgroup are the format's ([`wg_rows`]), since one
/// call's dispatches of different token counts share them.
fn coop_kernel(f: Format, nt: u32, t: Tuning) -> Option<shaders::CoopTiles> {
    t.coop.kernel(f, nt).filter(|_| wg_rows(f, t) == shaders::COOP_ROWS)
}

/// Rows per matmul workgroup of format `f` under `t`.
fn wg_rows(f: Format, t: Tuning) -> u32 {
    // The rows per workgroup are one per call whatever the token counts of its dispatches: the
    // IQ2/IQ3 formats count as pairs only where every dispatch takes them (from one token).
    let pair = layout::is_pair(f) || shaders::on_kpair(f, iq_pairs_at(t, f, 1));
    if t.wg_rows != 0 {
        // 8 invocations per row: at most 256 per workgroup (WebGPU's default limit).
        return if pair { t.wg_rows } else { t.wg_rows.min(32) };
    }
    if pair || shaders::table_words(f) > 0 { 32 } else { 8 }
}

/// Copy each `(bytes, out)` pair (little-endian f32, `bytes` at least `4 * out.len()` long)
/// on the copy threads (`qkern_formats::par::par_copy`).
fn par_copy(pool: Option<&rayon::ThreadPool>, pairs: &mut [(&[u8], &mut [f32])]) {
    let total: usize = pairs.iter().map(|(_, o)| o.len()).sum();
    par::par_copy(pool, total, 4, pairs.iter_mut().map(|(b, o)| (&**b, &mut **o)), copy_f32);
}

fn copy_f32(b: &[u8], out: &mut [f32]) {
    // One memcpy on little-endian hosts where the bytes are 4-aligned (a mapped range is: wgpu
    // maps at multiples of 8).
    if cfg!(target_endian = "little")
        && let Ok(src) = bytemuck::try_cast_slice::<u8, f32>(&b[..4 * out.len()])
    {
        out.copy_from_slice(src);
        return;
    }
    for (o, c) in out.iter_mut().zip(b.chunks_exact(4)) {
        *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
}

fn words_of(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// A 2D workgroup grid for `n` workgroups (at most 65535 along x).
fn grid(n: u32) -> (u32, u32) {
    let gx = n.clamp(1, 65535);
    (gx, n.div_ceil(gx).max(1))
}

fn storage(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

fn uniform(binding: u32, dynamic: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: dynamic,
            min_binding_size: None,
        },
        count: None,
    }
}

fn make_layouts(device: &wgpu::Device) -> Layouts {
    let bgl = |label: &str, entries: &[wgpu::BindGroupLayoutEntry]| {
        device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(label), entries })
    };
    let weights = bgl("qkern weights", &[storage(0, true), storage(1, true)]);
    let acts = bgl("qkern acts", &[storage(0, true)]);
    let out = bgl("qkern out", &[storage(0, false), uniform(1, true)]);
    let quant = bgl("qkern quant", &[storage(0, true), storage(1, false), uniform(2, false)]);
    let pl = |label: &str, groups: &[Option<&wgpu::BindGroupLayout>]| {
        device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(label),
            bind_group_layouts: groups,
            immediate_size: 0,
        })
    };
    let matmul = pl("qkern matmul", &[Some(&weights), Some(&acts), Some(&out)]);
    let dequant = pl("qkern dequant", &[Some(&weights), Some(&out)]);
    let quant_pl = pl("qkern quant", &[Some(&quant)]);
    let quant_ring = bgl("qkern quant ring", &[storage(0, true), storage(1, false), uniform(2, true)]);
    let quant_ring_pl = pl("qkern quant ring", &[Some(&quant_ring)]);
    Layouts { weights, acts, out, quant, matmul, dequant, quant_pl, quant_ring, quant_ring_pl }
}

/// One SLOT of the parameter ring `ring`, bound at a dynamic offset (the matmul kernels' and
/// the quantizer's parameters).
fn ring_slot(ring: &wgpu::Buffer) -> wgpu::BindingResource<'_> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: ring, offset: 0, size: wgpu::BufferSize::new(SLOT) })
}

/// `direct`: the output buffer is itself mappable (`Features::MAPPABLE_PRIMARY_BUFFERS`): the
/// kernels write their results straight to host-visible memory and no copy pass runs.
/// The matmul kernels' output bind group: `out` and a slot of the parameter ring.
fn out_group(device: &wgpu::Device, layouts: &Layouts, out: &wgpu::Buffer, params: &wgpu::Buffer) -> wgpu::BindGroup {
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("qkern out"),
        layout: &layouts.out,
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: out.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: ring_slot(params) },
        ],
    })
}

fn make_scratch(device: &wgpu::Device, layouts: &Layouts, params: &wgpu::Buffer, cap: u64, direct: bool) -> Scratch {
    use wgpu::BufferUsages as U;
    let mk = |label: &str, size: u64, usage| {
        device.create_buffer(&wgpu::BufferDescriptor { label: Some(label), size, usage, mapped_at_creation: false })
    };
    let out = mk("qkern out", cap + PAD, if direct { U::STORAGE | U::MAP_READ } else { U::STORAGE | U::COPY_SRC });
    let read = mk("qkern readback", if direct { 16 } else { cap }, U::MAP_READ | U::COPY_DST);
    let params = params.clone();
    let group = out_group(device, layouts, &out, &params);
    Scratch {
        cap,
        out,
        read,
        params,
        group,
        staging: Vec::with_capacity((SLOT * SLOTS) as usize),
        written: Vec::with_capacity((SLOT * SLOTS) as usize),
        reads: Vec::new(),
        read_cap: 0,
        out_read: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A knob with an unknown value is this backend's typed error, naming the variable (the
    /// parsing itself: `qkern_formats::env`).
    #[test]
    fn knobs_reject_unknown_values() {
        let p = |v: &str| match v {
            "a" => Some(1),
            _ => None,
        };
        let e = qkern_formats::env::knob_value("QKERN_WGPU_X", Some("b".into()), "a", p).unwrap_err();
        let e = WgpuError::from(e);
        assert!(matches!(e, WgpuError::Env(_)));
        assert_eq!(e.to_string(), "QKERN_WGPU_X=\"b\": expected a");
    }

    #[test]
    fn chunk_and_wait_knobs_parse_strictly() {
        assert_eq!(parse_chunks("0"), Some(0));
        assert_eq!(parse_chunks("64"), Some(64));
        for bad in ["65", "-1", "x", "", " 3", "300"] {
            assert_eq!(parse_chunks(bad), None, "{bad:?}");
        }
        assert_eq!(parse_pair_rows("0"), Some((0, false)));
        assert_eq!(parse_pair_rows("2g"), Some((2, true)));
        for bad in ["3", "1g", "", "two"] {
            assert_eq!(parse_pair_rows(bad), None, "{bad:?}");
        }
        assert_eq!(parse_q8k("split"), Some(Q8kLayout::Split));
        assert_eq!(parse_q8k("ggml"), Some(Q8kLayout::Ggml));
        assert_eq!(parse_q8k("both"), Some(Q8kLayout::Both));
        for bad in ["Split", "1", "", "q8_K", "Both"] {
            assert_eq!(parse_q8k(bad), None, "{bad:?}");
        }
        assert_eq!(parse_wait("spin"), Some(true));
        assert_eq!(parse_wait("block"), Some(false));
        for bad in ["Spin", "1", "", "poll"] {
            assert_eq!(parse_wait(bad), None, "{bad:?}");
        }
        let e = qkern_formats::env::knob_value("QKERN_WGPU_CHUNKS", Some("65".into()), "0 to 64", parse_chunks);
        assert_eq!(WgpuError::from(e.unwrap_err()).to_string(), "QKERN_WGPU_CHUNKS=\"65\": expected 0 to 64");
    }

    #[test]
    fn par_copy_copies_every_piece() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let lens = [0usize, 1, 3, par::PAR_COPY_MIN / 8 - 1, par::PAR_COPY_MIN + 5, 70_001, 2 * par::PAR_COPY_MIN + 3];
        let src: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(k, &n)| {
                // One spare byte, unaligned for k odd: the byte-wise path too.
                (0..4 * n + 1).map(|i| (i.wrapping_mul(2654435761) >> 7 ^ k) as u8).collect()
            })
            .collect();
        for (threads, one) in [(Some(&pool), false), (Some(&pool), true), (None, false)] {
            let mut outs: Vec<Vec<f32>> = lens.iter().map(|&n| vec![f32::NAN; n]).collect();
            let mut pairs: Vec<(&[u8], &mut [f32])> = src
                .iter()
                .enumerate()
                .zip(outs.iter_mut())
                .filter(|((k, _), _)| !one || *k == 6)
                .map(|((k, b), o)| (&b[k % 2..], o.as_mut_slice()))
                .collect();
            par_copy(threads, &mut pairs);
            for (k, (b, o)) in src.iter().zip(&outs).enumerate() {
                if one && k != 6 {
                    assert!(o.iter().all(|v| v.is_nan()), "pair {k} written");
                    continue;
                }
                let b = &b[k % 2..];
                for (i, v) in o.iter().enumerate() {
                    let want = u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
                    assert_eq!(v.to_bits(), want, "pair {k} float {i} (pool {})", threads.is_some());
                }
            }
        }
        assert_eq!(par::parse_copy_threads("1"), Some(1));
        assert_eq!(par::parse_copy_threads("64"), Some(64));
        for bad in ["0", "65", "-2", "", "x"] {
            assert_eq!(par::parse_copy_threads(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn q8k_split_layout_roundtrips() {
        for nb in [1usize, 2, 3, 16] {
            let src: Vec<u8> = (0..292 * nb).map(|i| (i * 7 + i / 292) as u8).collect();
            let rw = 4 * act_row_words(Format::Q8_K, 256 * nb, Q8kLayout::Split);
            assert_eq!(rw % 16, 0);
            assert!(rw >= 292 * nb && rw < 292 * nb + 16);
            let mut dev = vec![0u8; rw];
            q8k_split(&src, &mut dev);
            // Block b's quants at word 64b, bsums at 64nb + 8b, d at 72nb + b.
            for b in 0..nb {
                assert_eq!(dev[256 * b..256 * b + 256], src[292 * b + 4..292 * b + 260]);
                assert_eq!(dev[256 * nb + 32 * b..256 * nb + 32 * b + 32], src[292 * b + 260..292 * b + 292]);
                assert_eq!(dev[288 * nb + 4 * b..288 * nb + 4 * b + 4], src[292 * b..292 * b + 4]);
            }
            let mut back = vec![0u8; 292 * nb];
            q8k_join(&dev, &mut back);
            assert_eq!(back, src);
        }
        assert_eq!(act_row_words(Format::Q8_K, 256, Q8kLayout::Ggml), 73);
        assert_eq!(act_row_words(Format::Q8_K, 256, Q8kLayout::Split), 76);
        assert_eq!(act_row_words(Format::Q8_K, 512, Q8kLayout::Both), 2 * 148);
    }

    /// `QKERN_WGPU_COOP` values, and which dispatches take the cooperative-matrix kernel.
    #[test]
    fn coop_knob_and_kernel_choice() {
        assert_eq!(parse_coop("0"), Some(Coop::Off));
        assert_eq!(parse_coop("3"), Some(Coop::Native(3)));
        assert_eq!(parse_coop("emulate"), Some(Coop::Emulated(1)));
        assert_eq!(parse_coop("emulate:8"), Some(Coop::Emulated(8)));
        assert_eq!(parse_coop("f16:2"), Some(Coop::Native(2)));
        assert_eq!(parse_coop("words:2"), Some(Coop::NativeWords(2)));
        for bad in ["9", "-1", "on", "emulate:0", "emulate:9", "emulate:", "f16:0", "f16", ""] {
            assert_eq!(parse_coop(bad), None, "{bad:?}");
        }
        let t = |coop| Tuning { coop, ..plain_tuning() };
        assert_eq!(coop_kernel(Format::Q4_K, 8, t(Coop::Off)), None);
        assert_eq!(coop_kernel(Format::Q4_K, 2, t(Coop::Native(3))), None);
        assert_eq!(coop_kernel(Format::Q4_K, 3, t(Coop::Native(3))), Some(shaders::CoopTiles::Halves));
        assert_eq!(coop_kernel(Format::Q4_K, 8, t(Coop::NativeWords(3))), Some(shaders::CoopTiles::Words));
        assert_eq!(coop_kernel(Format::Q4_K, 1, t(Coop::Emulated(1))), Some(shaders::CoopTiles::Emulated));
        // only q4_K and q5_K have the kernel, and only at its own rows per workgroup
        assert_eq!(coop_kernel(Format::Q5_K, 8, t(Coop::Native(1))), Some(shaders::CoopTiles::Halves));
        assert_eq!(coop_kernel(Format::Q6_K, 8, t(Coop::Native(1))), None);
        assert_eq!(coop_kernel(Format::Q4_K, 8, Tuning { wg_rows: 16, ..t(Coop::Native(1)) }), None);
    }

    /// Bytes of a kernel's workgroup arrays.
    fn workgroup_bytes(m: &wgpu::naga::Module) -> u32 {
        let mut lay = wgpu::naga::proc::Layouter::default();
        lay.update(m.to_ctx()).unwrap();
        m.global_variables
            .iter()
            .filter(|(_, v)| v.space == wgpu::naga::AddressSpace::WorkGroup)
            .map(|(_, v)| lay[v.ty].size)
            .sum()
    }

    /// Every tuning knob at its default (no device needed).
    fn plain_tuning() -> Tuning {
        Tuning {
            native_fma: false,
            checks: Checks::None,
            unroll: 0,
            wg_rows: 0,
            flat: false,
            lut2: true,
            chunks: 0,
            iq_pairs: 0,
            coop: Coop::Off,
            ktile: true,
            pair_rows: 0,
            pair_generic: false,
            stage: STAGE_BY_SIZE,
            stage_steps: 0,
        }
    }

    /// The staged activations' chunks: the pair formats and the thread pairs, from the token
    /// count asked, the most steps or blocks (a power of two, at most 64 or 16) within
    /// `STAGE_BYTES`, or those asked where they fit the adapter beside the tables, else fewer;
    /// none where not one fits.
    #[test]
    fn stage_chunks() {
        let t = Tuning { stage: 4, ..plain_tuning() };
        assert_eq!(stage_steps_of(Format::Q8_0, 8, plain_tuning(), 49152), 0);
        assert_eq!(stage_steps_of(Format::Q8_0, 3, t, 49152), 0);
        // q8_0, 8 tokens: 36 bytes an activation block and token (+ 4), 16 steps = 4612 bytes.
        assert_eq!(stage_steps_of(Format::Q8_0, 8, t, 49152), 16);
        assert_eq!(stage_steps_of(Format::Q8_0, 4, t, 49152), 32);
        // q5_1 stages its s too; nvfp4 and iq4_nl read two activation blocks a step.
        assert_eq!(stage_steps_of(Format::Q5_1, 8, t, 49152), 16);
        assert_eq!(stage_steps_of(Format::NVFP4, 8, t, 49152), 8);
        assert_eq!(stage_steps_of(Format::IQ4_NL, 5, t, 49152), 16);
        for (f, nt) in [(Format::Q8_0, 8), (Format::Q5_1, 4), (Format::NVFP4, 8), (Format::IQ4_NL, 6)] {
            let s = stage_steps_of(f, nt, t, 49152);
            assert!(shaders::stage_bytes(f, nt, s) <= STAGE_BYTES);
            assert!(shaders::stage_bytes(f, nt, 2 * s) > STAGE_BYTES || s == 64);
        }
        // By size: resolved per call (call_tuning) before any kernel is chosen.
        assert_eq!(stage_steps_of(Format::Q8_0, 8, Tuning { stage: STAGE_BY_SIZE, ..t }, 49152), 0);
        // Steps asked: kept where they fit, fewer where not.
        let t40 = Tuning { stage_steps: 40, ..t };
        assert_eq!(stage_steps_of(Format::Q8_0, 8, t40, 49152), 40);
        assert_eq!(stage_steps_of(Format::Q8_0, 8, t40, 8192), 12);
        assert_eq!(stage_steps_of(Format::NVFP4, 8, t, PAIR_STAGE_RESERVE + 600), 1);
        assert_eq!(stage_steps_of(Format::NVFP4, 8, t, PAIR_STAGE_RESERVE + 500), 0);
        // The thread pairs: blocks of 256 elements, 292 bytes a token (q4_K, with its bsums)
        // or 260 (iq4_xs), at most 16; the IQ2/IQ3 formats only on pairs (iq_pairs), and not
        // on the cooperative matrices.
        assert_eq!(stage_steps_of(Format::Q4_K, 8, t, 49152), 2);
        assert_eq!(stage_steps_of(Format::Q4_K, 4, t, 49152), 4);
        assert_eq!(stage_steps_of(Format::IQ4_XS, 4, t, 49152), 4);
        assert_eq!(shaders::kstage_bytes(Format::Q4_K, 8, 2), 16 * 292);
        assert_eq!(shaders::kstage_bytes(Format::IQ4_XS, 8, 2), 16 * 260 + 16);
        let pairs = Tuning { iq_pairs: 1, ..t };
        assert_eq!(stage_steps_of(Format::IQ2_XXS, 8, t, 49152), 0);
        assert_eq!(stage_steps_of(Format::IQ2_XXS, 8, pairs, 49152), 2);
        assert_eq!(stage_steps_of(Format::Q4_K, 8, Tuning { coop: Coop::Emulated(1), ..t }, 49152), 0);
        // the room beside iq2_s's grid (1024 words): none in 8 KiB
        assert_eq!(stage_steps_of(Format::IQ2_S, 4, pairs, 8192), 0);
        assert_eq!(stage_steps_of(Format::IQ2_S, 4, Tuning { stage_steps: 40, ..pairs }, 49152), 16);
    }

    /// Every staged kernel's workgroup arrays (the staged activations with the tables and
    /// reductions beside them) fit the adapter's workgroup storage, for the smallest limit
    /// WebGPU allows (16 KiB) and larger ones, with the chunks by size and the most asked,
    /// one and two rows a pair, with and without subgroups, 32 and 128 rows a workgroup, and the
    /// defaults of large (64 or 128 rows) and small calls.
    #[test]
    fn staged_kernels_fit_the_workgroup_storage() {
        use wgpu::naga;
        let mut staged = 0;
        for limit in [16384u32, 32768, 49152] {
            for f in Format::WEIGHTS {
                // The defaults of a large and a small call (`call_tuning`), with and without
                // subgroups, and fixed tunings at their extremes.
                let by_size = |rows| {
                    call_tuning(
                        f,
                        rows,
                        Tuning { stage: STAGE_BY_SIZE, iq_pairs: IQ_PAIRS_PER_FORMAT, ..plain_tuning() },
                    )
                };
                let (big, small) = (by_size(STAGE_ROWS), by_size(STAGE_ROWS - 1));
                for nt in 1u32..=8 {
                    let fixed = [(0u8, 0u32, 0u8, true), (64, 128, 1, false), (64, 32, 2, false), (0, 128, 0, false)]
                        .map(|(steps, wg_rows, pair_rows, sg)| {
                            let t = Tuning {
                                stage: 1,
                                stage_steps: steps,
                                wg_rows,
                                pair_rows,
                                iq_pairs: 1,
                                ..plain_tuning()
                            };
                            (t, sg)
                        });
                    for (t, sg) in [(big, true), (big, false), (small, true), (small, false)].into_iter().chain(fixed) {
                        let (steps, wg_rows, pair_rows) = (t.stage_steps, t.wg_rows, t.pair_rows);
                        if stage_steps_of(f, nt, t, limit) == 0 {
                            continue;
                        }
                        staged += 1;
                        let src = matmul_kernel_source(f, nt, t, sg, Q8kLayout::Both, limit).unwrap();
                        let bytes = workgroup_bytes(&naga::front::wgsl::parse_str(&src).unwrap());
                        assert!(
                            bytes <= limit,
                            "{f} nt {nt} steps {steps} rows {wg_rows} pair rows {pair_rows} sg {sg}: {bytes} > {limit}"
                        );
                    }
                }
            }
        }
        assert!(staged > 100, "{staged}");
    }

    /// By size: every call stages at the token counts of its format's mask; large calls of the
    /// pair formats on 128 rows (or the rows asked), the K-quants, iq4_xs, iq2_xs and iq3_s on
    /// 64, the other IQ2/IQ3 formats on theirs; small calls on the usual rows; a fixed `stage` is
    /// kept.
    #[test]
    fn call_tuning_by_size() {
        let t = Tuning { stage: STAGE_BY_SIZE, ..plain_tuning() };
        let staged_nts = |f: Format, tt: Tuning| (1..=8u32).filter(|&nt| stages_at(f, nt, tt)).collect::<Vec<_>>();
        for f in Format::WEIGHTS {
            let big = call_tuning(f, STAGE_ROWS, t);
            let small = call_tuning(f, STAGE_ROWS - 1, t);
            let (nts, rows): (Vec<u32>, u32) = match f {
                Format::Q8_0 | Format::Q5_1 | Format::IQ4_NL | Format::NVFP4 => ((1..=8).collect(), 128),
                Format::Q4_K | Format::Q6_K | Format::IQ4_XS => ((1..=8).collect(), 64),
                Format::Q5_K => (vec![1, 3, 4, 5, 6, 7, 8], 64),
                // iq2_xs on 8 invocations a row (`plain_tuning`): at most 32 rows (below for pairs).
                Format::IQ2_XXS | Format::IQ2_XS => ((2..=8).collect(), 32),
                Format::IQ3_XXS | Format::IQ3_S => ((1..=8).collect(), 32),
                _ => (vec![], if shaders::table_words(f) > 0 { 32 } else { 8 }),
            };
            assert_eq!(staged_nts(f, big), nts, "{f}");
            assert_eq!(staged_nts(f, small), nts, "{f}");
            assert_eq!(big.stage, if nts.is_empty() { 0 } else { STAGE_PER_NT }, "{f}");
            assert_eq!(small.stage, big.stage, "{f}");
            assert_eq!(wg_rows(f, big), rows, "{f}");
            // On thread pairs from one token (tiled: iq2_xs, iq2_s, iq3_xxs, iq3_s), iq2_xs and
            // iq3_s take 64 rows in large calls, the others their 32.
            if f.is_iq_grid() {
                let pairs = Tuning { iq_pairs: IQ_PAIRS_PER_FORMAT, ..big };
                let want = if matches!(f, Format::IQ2_XS | Format::IQ3_S) { 64 } else { 32 };
                assert_eq!(wg_rows(f, pairs), want, "{f}");
                assert_eq!(wg_rows(f, Tuning { iq_pairs: IQ_PAIRS_PER_FORMAT, ..small }), 32, "{f}");
            }
            assert_eq!(small.wg_rows, 0, "{f}");
            if !nts.is_empty() {
                assert_eq!(call_tuning(f, STAGE_ROWS, Tuning { wg_rows: 16, ..t }).wg_rows, 16, "{f}");
            }
            // The masked token counts get a staged kernel where their kernel can stage (the
            // pair formats, the thread pairs; the IQ2/IQ3 formats from the token count they
            // run on pairs), on a 32 KiB adapter, in large and small calls alike.
            let per_format = |tt: Tuning| Tuning { iq_pairs: IQ_PAIRS_PER_FORMAT, ..tt };
            for nt in 1..=8u32 {
                let can = layout::is_pair(f) || shaders::on_kpair(f, iq_pairs_at(per_format(big), f, nt));
                for tt in [big, small].map(per_format) {
                    let staged = stage_steps_of(f, nt, tt, 32768) > 0;
                    assert_eq!(staged, can && nts.contains(&nt), "{f} nt {nt} rows {}", tt.wg_rows);
                }
            }
        }
        // The opt-in cooperative matrices keep their rows: large q4_K and q5_K calls do not
        // widen where they may run them.
        for f in [Format::Q4_K, Format::Q5_K] {
            let ct = Tuning { coop: Coop::Emulated(1), ..t };
            let big = call_tuning(f, STAGE_ROWS, ct);
            assert_eq!(big.wg_rows, 0, "{f}");
            assert!(coop_kernel(f, 8, big).is_some(), "{f}");
            assert_eq!(call_tuning(f, STAGE_ROWS, Tuning { coop: Coop::Emulated(8), ..t }).wg_rows, 0, "{f}");
        }
        // A fixed stage counts from its token count; STAGE_BY_SIZE unresolved stages nothing.
        let from3 = Tuning { stage: 3, ..plain_tuning() };
        assert_eq!(staged_nts(Format::Q4_K, from3), (3..=8).collect::<Vec<_>>());
        assert!(staged_nts(Format::Q4_K, t).is_empty());
        let fixed = Tuning { stage: 3, ..plain_tuning() };
        assert_eq!(call_tuning(Format::Q8_0, 1 << 20, fixed), fixed);
        assert_eq!(parse_stage("auto"), Some((STAGE_BY_SIZE, 0)));
        assert_eq!(parse_stage("auto:8"), Some((STAGE_BY_SIZE, 8)));
        assert_eq!(parse_stage("4:16"), Some((4, 16)));
        assert_eq!(parse_stage("0"), Some((0, 0)));
        for bad in ["9", "1:0", "1:65", "x", ""] {
            assert_eq!(parse_stage(bad), None, "{bad:?}");
        }
    }

    /// The rows per pair: the per-format defaults, and an override for every format.
    #[test]
    fn pair_rows_defaults_and_override() {
        let t = plain_tuning();
        assert_eq!(pair_rows_of(Format::Q8_0, 1, t), (2, false));
        assert_eq!(pair_rows_of(Format::IQ4_NL, 3, t), (2, false));
        assert_eq!(pair_rows_of(Format::IQ4_NL, 4, t), (1, false));
        assert_eq!(pair_rows_of(Format::Q4_K, 2, t), (1, false));
        assert_eq!(pair_rows_of(Format::Q4_K, 8, t), (2, false));
        assert_eq!(pair_rows_of(Format::Q5_K, 1, t), (2, true));
        assert_eq!(pair_rows_of(Format::Q5_K, 8, t), (2, false));
        assert_eq!(pair_rows_of(Format::Q6_K, 8, t), (1, false));
        assert_eq!(pair_rows_of(Format::IQ4_XS, 4, t), (1, false));
        assert_eq!(pair_rows_of(Format::IQ4_XS, 8, t), (2, false));
        assert_eq!(pair_rows_of(Format::IQ2_XXS, 1, t), (1, false));
        // The IQ2/IQ3 formats' thread pairs from a token count on (0: never; per format).
        let f = Format::IQ2_S;
        assert!(!iq_pairs_at(Tuning { iq_pairs: 2, ..t }, f, 1));
        assert!(iq_pairs_at(Tuning { iq_pairs: 2, ..t }, f, 2));
        assert!(iq_pairs_at(Tuning { iq_pairs: 1, ..t }, f, 1));
        assert!(!iq_pairs_at(Tuning { iq_pairs: 0, ..t }, f, 8));
        // Per format, in ggml's row order ...
        let by_format = Tuning { iq_pairs: IQ_PAIRS_PER_FORMAT, ktile: false, ..t };
        assert!(!iq_pairs_at(by_format, f, 3) && iq_pairs_at(by_format, f, 4));
        assert!(iq_pairs_at(by_format, Format::IQ2_XXS, 1));
        assert!(!iq_pairs_at(by_format, Format::IQ3_XXS, 1) && iq_pairs_at(by_format, Format::IQ3_XXS, 2));
        assert!(!iq_pairs_at(by_format, Format::IQ3_S, 1) && iq_pairs_at(by_format, Format::IQ3_S, 2));
        assert!(!iq_pairs_at(by_format, Format::IQ2_XS, 1) && iq_pairs_at(by_format, Format::IQ2_XS, 2));
        // ... and tiled and split (the default layout): from one token.
        let tiled = Tuning { ktile: true, ..by_format };
        for g in [Format::IQ2_XXS, Format::IQ2_XS, Format::IQ2_S, Format::IQ3_XXS, Format::IQ3_S] {
            assert!(iq_pairs_at(tiled, g, 1), "{g}");
        }
        assert_eq!(parse_iq_pairs("2"), Some(2));
        assert_eq!(parse_iq_pairs("9"), None);
        assert!(!Q8kLayout::Both.split_for(Format::IQ2_XXS, false, 1));
        assert!(Q8kLayout::Both.split_for(Format::IQ2_XXS, true, 1));
        assert!(!Q8kLayout::Both.split_for(Format::Q4_K, true, 2));
        assert!(Q8kLayout::Split.split_for(Format::Q4_K, false, 1));
        // iq4_xs: the split copy where its pairs run two rows (its default from 8 tokens).
        let iq4 = |nt| Q8kLayout::Both.split_for(Format::IQ4_XS, false, pair_rows_of(Format::IQ4_XS, nt, t).0);
        assert!((1..8).all(|nt| !iq4(nt)) && iq4(8));
        assert!(!Q8kLayout::Ggml.split_for(Format::IQ4_XS, false, 2));
        for f in [Format::Q8_0, Format::Q5_K, Format::IQ2_XXS] {
            for nt in 1..=8 {
                assert_eq!(pair_rows_of(f, nt, Tuning { pair_rows: 1, ..t }), (1, false));
                assert_eq!(pair_rows_of(f, nt, Tuning { pair_rows: 2, pair_generic: true, ..t }), (2, true));
            }
        }
    }

    #[test]
    fn readback_chunks_by_size_and_tuning() {
        let t = plain_tuning();
        // One chunk per 2 MiB, at least 1, at most 8, never more than the rows; with direct
        // output none unless asked for.
        for direct in [false, true] {
            let by_size = |c: usize| if direct { 1 } else { c };
            assert_eq!(readback_chunks(4, 1, t, direct), 1);
            assert_eq!(readback_chunks((2 << 20) - 4, 1 << 20, t, direct), 1);
            assert_eq!(readback_chunks(6 << 20, 1 << 20, t, direct), by_size(3));
            assert_eq!(readback_chunks(64 << 20, 1 << 24, t, direct), by_size(8));
            assert_eq!(readback_chunks(64 << 20, 5, t, direct), by_size(5));
            assert_eq!(readback_chunks(4, 16, Tuning { chunks: 3, ..t }, direct), 3);
            assert_eq!(readback_chunks(4, 2, Tuning { chunks: 3, ..t }, direct), 2);
        }
    }

    #[test]
    fn widen_narrow_roundtrip_every_fp16() {
        for h in 0..=u16::MAX {
            let w = widen_f16(h);
            assert_eq!(narrow_f16(w), h, "{h:#06x}");
            let f = half::f16::from_bits(h);
            if !f.is_nan() {
                assert_eq!(w, f.to_f32().to_bits(), "{h:#06x}");
            }
        }
    }

    #[test]
    fn backend_is_small() {
        // The `qkern` facade keeps a backend in an enum beside the CPU one (24 bytes; clippy's
        // large_enum_variant allows 200 bytes of difference: 224 at most).
        assert!(std::mem::size_of::<WgpuBackend>() <= 224, "{}", std::mem::size_of::<WgpuBackend>());
    }

    #[test]
    fn grid_covers() {
        for n in [0u32, 1, 8, 65535, 65536, 200_000] {
            let (x, y) = grid(n);
            assert!(x as u64 * y as u64 >= n as u64 && (1..=65535).contains(&x) && y >= 1);
        }
    }
}
