//! The AVX-512 path, stage 1: every AVX2 kernel of this crate compiled a second time, from
//! the same source files, inside entry points with the wider feature set FEATURES
//! (`avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni`).
//!
//! ## How
//!
//! Each kernel file (`q8_0.rs`, `q4_k.rs`, ..., `iq.rs`) is included here once more as a
//! module of its own (`#[path]`), so that all its items are new items: every generic
//! kernel (`dot::<NT>`, iq4_nl's `span::<NT, K>`, `superblocks_g`'s closures) gets its own
//! monomorphisations, whose only caller is one `nt<N>` entry point below. That matters:
//! the AVX2 kernels rely on LLVM inlining each such instance into its single caller (a
//! second caller, e.g. an AVX-512 twin of the same instance, would leave a large kernel out
//! of line, compiled for AVX2 only). The files import their helpers with `use super::...`;
//! here `super` is this module, which re-exports everything of `x86` (`use super::*`) except
//! [`avx2_chunk_fn!`](crate::x86::avx512::avx2_chunk_fn), redefined below to give the `nt<N>`
//! functions and the `ChunkFn` entry (`<file>::chunk_avx2` / `<mod>_avx2`, names kept from
//! the shared source) the feature set FEATURES. Every `#[target_feature(enable =
//! "avx2,fma,f16c")]` function of the files is `#[inline]` and its features are a subset of
//! FEATURES, so LLVM inlines it into those entry points and compiles it there with
//! AVX-512 enabled: EVEX encodings, 32 vector registers (fewer spills), VNNI
//! (`vpdpwssd` from `vpmaddwd` + `vpaddd`). `scripts/spill-check.sh --avx512` disassembles
//! the entry points (`qkern_cpu::x86::avx512::<file>::<mod>::nt<N>`) and checks that they
//! call no kernel out of line.
//!
//! ## Why the bits are the AVX2 path's
//!
//! The source is the AVX2 path's, operation for operation; only instruction selection
//! changes. Integer operations have one result whatever their encoding (an EVEX `vpmaddubsw`
//! saturates as the VEX one; `vpdpwssd` is `vpmaddwd` + wrapping `vpaddd`). Float operations
//! are IEEE operations LLVM may not re-associate or contract without fast-math flags, which
//! Rust never sets: an `_mm256_mul_ps` + `_mm256_add_ps` stays two roundings and an
//! `_mm256_fmadd_ps` one, on any encoding. Conversions (`vcvtph2ps`, `vcvtdq2ps`,
//! `vcvtps2dq`, `vroundps`/`vrndscaleps`) are exact or round as MXCSR says (nearest-even
//! here), and `vmaxps` keeps its x86 operand-order semantics (the intrinsics lower to the
//! x86-specific node, not to IEEE `maxnum`). `cpu/tests/paths.rs` checks every kernel of
//! this path bitwise against the scalar reference on a CPU that has the features.
//!
//! ## Safety
//!
//! As for the AVX2 path (`x86` module doc): the entry points are `unsafe fn`s with
//! FEATURES, called only through `matmul`'s kernel tables once
//! `CpuPath::Avx512.cpu_has_features()` said yes.

// Everything the kernel files import from `super` (helpers, `Lane32`, `Q8KPrep`, ...), but
// `avx2_chunk_fn`, which the definition below shadows.
pub(crate) use super::*;

// The kernel files again, as new modules (see the module doc). Clippy's `duplicate_mod`
// flags a file included twice; here that is the point. `dead_code` is allowed in the copies
// whose dot kernels the AVX-512 path does not dispatch (q4_K, q5_K, q6_K, iq2_xxs, iq2_s,
// iq3_s: it runs their AVX2 builds, which were as fast or faster; the table in `matmul.rs`):
// those copies' other items (dequantizers, the other IQ kernels) are used.
#[allow(clippy::duplicate_mod, dead_code)]
#[path = "iq.rs"]
pub(crate) mod iq;
#[allow(clippy::duplicate_mod)]
#[path = "iq4_nl.rs"]
pub(crate) mod iq4_nl;
#[allow(clippy::duplicate_mod)]
#[path = "nvfp4.rs"]
pub(crate) mod nvfp4;
#[allow(clippy::duplicate_mod, dead_code)]
#[path = "q4_k.rs"]
pub(crate) mod q4_k;
#[allow(clippy::duplicate_mod)]
#[path = "q5_1.rs"]
pub(crate) mod q5_1;
#[allow(clippy::duplicate_mod, dead_code)]
#[path = "q5_k.rs"]
pub(crate) mod q5_k;
#[allow(clippy::duplicate_mod, dead_code)]
#[path = "q6_k.rs"]
pub(crate) mod q6_k;
#[allow(clippy::duplicate_mod)]
#[path = "q8_0.rs"]
pub(crate) mod q8_0;

// FEATURES: every AVX-512 entry point below carries
// `#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]`
// (spelled out: the attribute takes a literal), and `CpuPath::Avx512.cpu_has_features()`
// requires each of these features at run time.

/// `x86::avx2_chunk_fn!` with FEATURES on the `nt<N>` functions and the `ChunkFn` entry
/// point (see there); the same row loop, the same `$dot::<NT>` of the shared source.
macro_rules! avx2_chunk_fn {
    (mod $m:ident, fn $name:ident, $dot:ident, $W:ty, $A:ty) => {
        $crate::x86::avx2_chunk_fn!(@ ["avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni", "The CPU must support the AVX-512 path (`CpuPath::Avx512.cpu_has_features()`)."] [] mod $m, fn $name, $W, $A, |w, a, apr, _sc, o| $dot(w, a, apr, o));
    };
    (scaled mod $m:ident, fn $name:ident, $dot:ident, $W:ty, $A:ty) => {
        $crate::x86::avx2_chunk_fn!(@ ["avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni", "The CPU must support the AVX-512 path (`CpuPath::Avx512.cpu_has_features()`)."] [] mod $m, fn $name, $W, $A, |w, a, apr, sc, o| $dot(w, a, apr, sc, o));
    };
    (scaled pairs $dot2:ident, mod $m:ident, fn $name:ident, $dot:ident, $W:ty, $A:ty) => {
        $crate::x86::avx2_chunk_fn!(@ ["avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni", "The CPU must support the AVX-512 path (`CpuPath::Avx512.cpu_has_features()`)."] [$dot2] mod $m, fn $name, $W, $A, |w, a, apr, sc, o| $dot(w, a, apr, sc, o));
    };
}
pub(crate) use avx2_chunk_fn;

/// An AVX-512 entry point `$name` for the shared-source function `$f` (a quantizer or a
/// dequantizer of this module's copies, `#[inline]`, called only from here: it inlines).
macro_rules! avx512_fn {
    ($(#[doc = $doc:literal])* fn $name:ident($($a:ident: $t:ty),*) = $f:path) => {
        $(#[doc = $doc])*
        ///
        /// # Safety
        /// The CPU must support the AVX-512 path (`CpuPath::Avx512.cpu_has_features()`); the
        /// lengths as for the AVX2 function.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        pub(crate) unsafe fn $name($($a: $t),*) {
            // SAFETY: this function's target features include `$f`'s (AVX2, FMA, F16C);
            // the length contract is the caller's, passed on unchanged.
            unsafe { $f($($a),*) }
        }
    };
}

// ---------------------------------------------------------------------------------------
// Stage 2: helpers that the shared kernel source calls and that this module redefines with
// VNNI (one so far: `mul_sum_us8_pairs`, and through it `mul_sum_i8_pairs_float`). Their names shadow the glob import above, so that the copies' `use super::<name>`
// resolves here. Each gives the AVX2 helper's exact integer result, under that helper's
// stated contract.
//
// They carry the AVX2 functions' feature set, as their callers in the shared source do (a
// function with more features could not be called safely from there), and call the VNNI
// intrinsic in an `unsafe` block. Sound because they are private to this module: only the
// kernel copies below it can call them, and those copies run only inside the AVX-512 entry
// points (`nt<N>` and the `ChunkFn`s of `avx2_chunk_fn!` above, which carry FEATURES and are
// called only after `CpuPath::Avx512.cpu_has_features()`); there LLVM inlines the whole chain
// (`scripts/spill-check.sh --avx512` checks that no kernel is left out of line).

/// [`x86::mul_sum_us8_pairs`](super::mul_sum_us8_pairs) as one `vpdpbusd`: each int32 lane
/// the sum of its 4 products `ax * sy` (u8 times i8). Equal to `madd(ones, maddubs(ax, sy))`
/// whenever `maddubs` does not saturate, which every caller shows at its call site
/// (q8_0: pairs in [-32768, 32512]; q5_1: |pair| <= 7936; iq4_nl: <= 32512; nvfp4: <= 3072).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn mul_sum_us8_pairs(ax: __m256i, sy: __m256i) -> __m256i {
    // SAFETY: AVX512-VNNI and AVX512-VL are present: only this module's kernel copies call
    // this function, and they run only inside the AVX-512 entry points (see above).
    unsafe { _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sy) }
}

/// [`x86::mul_sum_i8_pairs_float`](super::mul_sum_i8_pairs_float) with the VNNI
/// [`mul_sum_us8_pairs`] (same contract): the sign trick, then `cvtepi32_ps`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn mul_sum_i8_pairs_float(x: __m256i, y: __m256i) -> __m256 {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    _mm256_cvtepi32_ps(mul_sum_us8_pairs(ax, sy))
}

// Not shadowed: [`x86::madd_acc`](super::madd_acc) (`acc + madd(a, b)`, used by the K-quant
// and IQ kernels for `sumi += madd(scale, maddubs(q, q8))`). `_mm256_dpwssd_epi32(acc, a, b)`
// would be exact too (the same sum modulo 2^32), and was so on the Xeon (run 1 of
// benches/results/2026-12-03-xeon-avx512), but it puts vpdpwssd's 5-cycle latency on the
// loop-carried `sumi` chain (8 steps per super-block) where AVX2 has a 1-cycle `vpaddd`, and
// its speed was not measured: the copies keep AVX2's `vpmaddwd` + `vpaddd`. To try it, define
// here `fn madd_acc(acc, a, b) -> __m256i { unsafe { _mm256_dpwssd_epi32(acc, a, b) } }`
// (as `mul_sum_us8_pairs` above) and measure.

use qkern_formats::blocks::{
    BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Nl, BlockIq4Xs, BlockNvfp4, BlockQ4K,
    BlockQ5_1, BlockQ5K, BlockQ6K, BlockQ8_0, BlockQ8_1,
};

avx512_fn!(/// x86 `quantize_row_q8_0` (AVX2 branch's operations), AVX-512 instantiation.
    fn quantize_q8_0(x: &[f32], y: &mut [BlockQ8_0]) = q8_0::quantize_avx2);
avx512_fn!(/// x86 `quantize_row_q8_1` (AVX2 branch's operations), AVX-512 instantiation.
    fn quantize_q8_1(x: &[f32], y: &mut [BlockQ8_1]) = q5_1::quantize_q8_1_avx2);
avx512_fn!(/// `dequantize_row_q8_0`, AVX-512 instantiation.
    fn dequantize_q8_0(x: &[BlockQ8_0], y: &mut [f32]) = q8_0::dequantize_avx2);
avx512_fn!(/// `dequantize_row_q5_1`, AVX-512 instantiation.
    fn dequantize_q5_1(x: &[BlockQ5_1], y: &mut [f32]) = q5_1::dequantize_avx2);
avx512_fn!(/// `dequantize_row_q4_K`, AVX-512 instantiation.
    fn dequantize_q4_k(x: &[BlockQ4K], y: &mut [f32]) = q4_k::dequantize_avx2);
avx512_fn!(/// `dequantize_row_q5_K`, AVX-512 instantiation.
    fn dequantize_q5_k(x: &[BlockQ5K], y: &mut [f32]) = q5_k::dequantize_avx2);
avx512_fn!(/// `dequantize_row_q6_K`, AVX-512 instantiation.
    fn dequantize_q6_k(x: &[BlockQ6K], y: &mut [f32]) = q6_k::dequantize_avx2);
avx512_fn!(/// `dequantize_row_iq4_nl`, AVX-512 instantiation.
    fn dequantize_iq4_nl(x: &[BlockIq4Nl], y: &mut [f32]) = iq4_nl::dequantize_avx2);
avx512_fn!(/// `dequantize_row_iq2_xxs`, AVX-512 instantiation.
    fn dequantize_iq2_xxs(x: &[BlockIq2Xxs], y: &mut [f32]) = iq::iq2_xxs_dequantize_avx2);
avx512_fn!(/// `dequantize_row_iq2_xs`, AVX-512 instantiation.
    fn dequantize_iq2_xs(x: &[BlockIq2Xs], y: &mut [f32]) = iq::iq2_xs_dequantize_avx2);
avx512_fn!(/// `dequantize_row_iq2_s`, AVX-512 instantiation.
    fn dequantize_iq2_s(x: &[BlockIq2S], y: &mut [f32]) = iq::iq2_s_dequantize_avx2);
avx512_fn!(/// `dequantize_row_iq3_xxs`, AVX-512 instantiation.
    fn dequantize_iq3_xxs(x: &[BlockIq3Xxs], y: &mut [f32]) = iq::iq3_xxs_dequantize_avx2);
avx512_fn!(/// `dequantize_row_iq3_s`, AVX-512 instantiation.
    fn dequantize_iq3_s(x: &[BlockIq3S], y: &mut [f32]) = iq::iq3_s_dequantize_avx2);
avx512_fn!(/// `dequantize_row_iq4_xs`, AVX-512 instantiation.
    fn dequantize_iq4_xs(x: &[BlockIq4Xs], y: &mut [f32]) = iq::iq4_xs_dequantize_avx2);
avx512_fn!(/// `dequantize_row_nvfp4`, AVX-512 instantiation.
    fn dequantize_nvfp4(x: &[BlockNvfp4], y: &mut [f32]) = nvfp4::dequantize_avx2);
