//! The adapter the tests run on: `QKERN_WGPU_ADAPTER=N` picks one by index, otherwise wgpu's
//! choice (honouring `WGPU_BACKEND` / `WGPU_ADAPTER_NAME`). In CI (`CI=true`) a missing
//! adapter fails the test; elsewhere the test prints why it skips and passes.
#![allow(dead_code)]

use std::sync::OnceLock;

use qkern_wgpu::{Coop, Options, Q8kLayout, WgpuBackend};

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

pub fn index() -> Option<usize> {
    std::env::var("QKERN_WGPU_ADAPTER").ok().and_then(|v| v.parse().ok())
}

fn open(opts: Options) -> Option<WgpuBackend> {
    match WgpuBackend::with_options(index(), opts) {
        Ok(b) => {
            eprintln!("wgpu adapter: {}", b.name());
            Some(b)
        }
        Err(e) => {
            if in_ci() {
                panic!("CI=true but no usable wgpu adapter: {e} (install mesa-vulkan-drivers: scripts/setup.sh)");
            }
            eprintln!("SKIPPED: no usable wgpu adapter ({e}); install mesa-vulkan-drivers (scripts/setup.sh) to run");
            None
        }
    }
}

/// The shared backend (default options), or `None` (skip) outside CI without an adapter.
pub fn backend() -> Option<&'static WgpuBackend> {
    static B: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    B.get_or_init(|| open(Options::default())).as_ref()
}

/// A backend with the workgroup-memory reductions (no subgroups), weights split into parts of
/// at most 1 KiB and results written straight to a mappable buffer where the adapter offers it
/// (`Options::direct_out`), the nibble lookup table (`Options::lut2` off), 2 copy threads, the
/// IQ2/IQ3 formats on thread pairs (`Options::iq_pairs`), the pair and thread-pair kernels on
/// two rows per pair (`Options::pair_rows`; q4_K and q5_K on their own two-row bodies), to
/// exercise the fallback, the splitting and those options on small matrices.
pub fn backend_fallback_split() -> Option<&'static WgpuBackend> {
    static B: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    B.get_or_init(|| {
        open(Options {
            subgroups: Some(false),
            max_part_bytes: Some(1024),
            direct_out: Some(true),
            lut2: Some(false),
            copy_threads: Some(2),
            iq_pairs: Some(1),
            pair_rows: Some((2, false)),
            ..Options::default()
        })
    })
    .as_ref()
}

/// A backend with q4_K's, q5_K's and the IQ2/IQ3 formats' blocks in ggml's row order
/// (`Options::ktile` off; tiled is the default, which every other backend here runs) on the
/// generic two-row kernel (`Options::pair_rows`), 8 rows per workgroup, weights split into
/// parts of at most 8 KiB (whole tiles of 16 rows and a short one in a part) and results read back in 3 row
/// chunks (`Options::chunks`).
pub fn backend_rowmajor_generic() -> Option<&'static WgpuBackend> {
    static B: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    B.get_or_init(|| {
        open(Options {
            ktile: Some(false),
            pair_rows: Some((2, true)),
            wg_rows: Some(8),
            max_part_bytes: Some(8192),
            chunks: Some(3),
            ..Options::default()
        })
    })
    .as_ref()
}

/// A backend with q4_K's, q5_K's and the IQ2/IQ3 formats' blocks in ggml's row order
/// (`Options::ktile` off) on q4_K's and q5_K's own two-row bodies (`Options::pair_rows`), the
/// workgroup-memory reductions and activations staged from one token in chunks of 2 blocks
/// (`backend_staged`'s, which keeps ggml's order and one row per pair).
pub fn backend_rowmajor_staged() -> Option<&'static WgpuBackend> {
    static B: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    B.get_or_init(|| {
        open(Options {
            ktile: Some(false),
            pair_rows: Some((2, false)),
            subgroups: Some(false),
            stage: Some((1, 2)),
            ..Options::default()
        })
    })
    .as_ref()
}

/// A backend of its own for the test that switches [`qkern_wgpu::Tuning::ktile`] between an
/// upload and the calls (no other test shares its tuning).
pub fn backend_ktile_switch() -> Option<&'static WgpuBackend> {
    static B: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    B.get_or_init(|| open(Options::default())).as_ref()
}

/// [`backend_coop`] with q4_K's, q5_K's and the IQ2/IQ3 formats' blocks in ggml's row order
/// (`Options::ktile` off).
pub fn backend_rowmajor_coop() -> Option<&'static WgpuBackend> {
    static B: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    B.get_or_init(|| open(Options { ktile: Some(false), coop: Some(coop_choice()?), ..Options::default() })).as_ref()
}

/// A backend that reads every matmul's result back in 3 row chunks (`Options::chunks`; by
/// default only results of 2 MiB or more are), copied out by 3 threads from 256 KiB of results
/// (`Options::copy_threads`), with q8_K activations in the split device layout
/// (`Options::q8k`) and the IQ2/IQ3 formats on 8 invocations a row (`Options::iq_pairs`
/// off), the pair and thread-pair kernels on two rows per pair, q4_K and q5_K on their own
/// two-row bodies (`Options::pair_rows`), the pair and thread-pair formats' activations staged
/// from 3 tokens in chunks of 3 steps or blocks (`Options::stage`; the IQ2/IQ3 formats on 8
/// invocations a row are not staged), and weights in parts of at most 4 KiB (so that the
/// IQ2/IQ3 formats' 8-invocation kernels run on their tiled and split blocks in several parts
/// too).
pub fn backend_chunked() -> Option<&'static WgpuBackend> {
    static B: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    B.get_or_init(|| {
        open(Options {
            max_part_bytes: Some(4096),
            chunks: Some(3),
            copy_threads: Some(3),
            q8k: Some(Q8kLayout::Split),
            iq_pairs: Some(0),
            pair_rows: Some((2, false)),
            stage: Some((3, 3)),
            ..Options::default()
        })
    })
    .as_ref()
}

/// A backend whose kernels write every matmul's 3 row chunks straight into the chunks'
/// mappable buffers (`Options::direct_out` where the adapter offers it), weights split into
/// parts of at most 2 KiB (part boundaries inside chunks), 2 copy threads, the IQ2/IQ3 formats
/// on thread pairs, q8_K activations in ggml's blocks alone (`Options::q8k`; the other
/// backends have the default, both layouts, or the split one), every pair and thread-pair
/// kernel on the generic two-row kernel (`Options::pair_rows`) with 8 rows per workgroup, so
/// that a pair's second row (4 rows on) lies within the small weight parts.
pub fn backend_chunked_direct() -> Option<&'static WgpuBackend> {
    static B: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    B.get_or_init(|| {
        open(Options {
            chunks: Some(3),
            direct_out: Some(true),
            max_part_bytes: Some(2048),
            copy_threads: Some(2),
            iq_pairs: Some(1),
            q8k: Some(Q8kLayout::Ggml),
            pair_rows: Some((2, true)),
            wg_rows: Some(8),
            ..Options::default()
        })
    })
    .as_ref()
}

/// A backend whose pair-format kernels (q8_0, q5_1, iq4_nl, nvfp4) and thread-pair kernels
/// (the K-quants, iq4_xs, the IQ2/IQ3 formats, here on pairs from one token) stage their
/// activations in workgroup memory from one token (`Options::stage`), in chunks of 2 steps or
/// blocks (so that rows of several units take several chunks, the last one short), one row
/// per pair, and the workgroup-memory reductions.
pub fn backend_staged() -> Option<&'static WgpuBackend> {
    static B: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    B.get_or_init(|| {
        open(Options {
            stage: Some((1, 2)),
            pair_rows: Some((1, false)),
            subgroups: Some(false),
            iq_pairs: Some(1),
            ..Options::default()
        })
    })
    .as_ref()
}

/// A backend that runs the cooperative-matrix kernels (q4_K, q5_K, IQ2/IQ3) (`Options::coop`) from one token: on
/// the adapter's cooperative matrices where it has them (`WgpuBackend::supports_coop`: e.g.
/// NVIDIA's Vulkan driver), else with the tile products emulated (lavapipe), so that the
/// kernel's layout, bias and chains are checked everywhere and the tiles themselves where a
/// device has them (tiles staged as f16, or as u32 words with `QKERN_TEST_COOP=words`).
pub fn backend_coop() -> Option<&'static WgpuBackend> {
    static B: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    B.get_or_init(|| open(Options { coop: Some(coop_choice()?), ..Options::default() })).as_ref()
}

/// The cooperative-matrix kernels from one token: native where the adapter has them (u32
/// words with `QKERN_TEST_COOP=words`), else emulated; None without an adapter.
fn coop_choice() -> Option<Coop> {
    Some(match backend()?.supports_coop() {
        false => Coop::Emulated(1),
        true if std::env::var("QKERN_TEST_COOP").is_ok_and(|v| v == "words") => Coop::NativeWords(1),
        true => Coop::Native(1),
    })
}
