//! x86-64 SIMD kernels (AVX2 + FMA + F16C), bit-identical to the scalar reference in
//! `qkern_formats::reference`, which is bit-identical to ggml 0.26.0's AVX2 kernels
//! (ggml/src/ggml-cpu/arch/x86/quants.c, the `#if defined(__AVX2__)` branches). One file
//! per format family: `q8_0` (also the q8_0 quantizer), `q5_1` (also q8_1), `iq4_nl`,
//! `nvfp4`, `q4_k`, `q5_k`, `q6_k`, `iq` (the six IQ formats on q8_K).
//!
//! ## Shape of a dot kernel
//!
//! Every weight format has one function `dot::<NT>` per token count `NT = 1..=8` (const
//! generics; `avx2_chunk_fn!` gives each its own symbol `<format>::nt::nt<NT>`). Each weight
//! block is loaded and unpacked once and used for all `NT` tokens; each token keeps its own
//! accumulators. Per token the lane assignment and the float operations and their order
//! are exactly ggml's `vec_dot` for that token alone: tokens never mix, scales are computed
//! as ggml computes them (a scalar product broadcast is the same product in every lane), and
//! only exact integer work (wrapping lane sums inside a block or super-block) is regrouped.
//!
//! Two loop shapes keep the accumulators in registers (`scripts/spill-check.sh` shows it
//! from the built library for every format and NT):
//!
//! - blocks of 32 (q8_0, q5_1, iq4_nl, nvfp4 up to 5 tokens): per block, unpack, then the
//!   tokens in turn (`for_tokens!`, unrolled in the source so that the `[__m256; NT]`
//!   accumulator arrays are only indexed by constants); iq4_nl, with two accumulators per
//!   token, runs at most 4 tokens per pass over the row (two passes for 5..8 tokens);
//! - super-blocks (K-quants, IQ formats; nvfp4 beyond 5 tokens): [`superblocks_g`]: the
//!   row in segments of [`SEG`] blocks, each segment unpacked once into an L1 buffer, then
//!   the tokens in groups of `G` (2 or 4) over it, so that every buffer load serves `G`
//!   tokens while only those tokens' accumulators are live in the inner loop. (A
//!   super-block's state per token, e.g. q4_K's `acc`, `acc_m` and integer `sumi`, times 8
//!   tokens does not fit AVX2's 16 registers.) Where the tokens are exactly one group, the
//!   K-quants and iq4_xs skip the buffer (`DIRECT_G`): q4_K, q6_K and iq4_xs at 2 tokens and
//!   q6_K at 4 then spill a few accumulators, and are still 18-35 % faster than with the
//!   buffer.
//!
//! Work that depends only on the activations is done once per matmul, not once per weight
//! row (`matmul::PrepFn`, the chunk's "prepared" activations, see [`prep_q8_0`],
//! [`prep_q8_1`], [`prep_q8_k`]): q8_0/q8_1 scales as f32 in block-major lanes (a token's
//! `dy` is one broadcast load), q8_K blocks re-laid with 32-byte aligned quants and the
//! `bsums` pair sums of q4_K/q5_K. Weight scales (f16) convert through a table
//! ([`f16_table`], as ggml's build does) or `vcvtph2ps`. All of it is exact: conversions,
//! copies and wrapping integer sums.
//!
//! `crate::matmul::ChunkFn` is the type-erased entry point used by `matmul.rs`: a tile of
//! weight rows against 1..=8 tokens (a loop over rows inside each `nt<N>` symbol, no
//! dispatch per row); the caller splits larger token counts into chunks.
//!
//! ## The AVX-512 path
//!
//! [`avx512`] compiles these same files a second time inside entry points with AVX-512
//! F/BW/VL/VNNI enabled (32 vector registers, EVEX encodings), and there redefines one
//! helper of the shared source with VNNI: [`mul_sum_us8_pairs`] becomes one `vpdpbusd`
//! (under its no-saturation contract, proven at each call site: q8_0, q5_1, iq4_nl,
//! nvfp4). ([`madd_acc`] is the hook for `vpdpwssd` in the K-quant and IQ kernels; not
//! enabled, see [`avx512`].) Same operations, same lanes, same float order: the bits are
//! the AVX2 path's (`cpu/tests/paths.rs` and `qkern parity` check it on an AVX-512 machine).
//!
//! Per-format choice: `matmul.rs`'s kernel table gives the AVX-512 path, for each format,
//! either its own instantiation or the AVX2 kernel where that was faster on the measured
//! Xeon (benches/results/2026-12-03-xeon-avx512/README.md). Current choice: the table in
//! `matmul.rs` (`kernels!`, the `avx512 dot` entries) is authoritative; see the README for
//! the numbers behind it.
//!
//! ## Safety
//!
//! Functions with `#[target_feature(enable = "avx2,fma,f16c")]` are only called after
//! runtime detection: `CpuBackend` holds a SIMD path only once `CpuPath::cpu_has_features`
//! said yes (`crate::require` / `CpuBackend::new_unfinished`), and only the AVX2/AVX-512
//! paths reach this module. Loads from block fields go through the small helpers below,
//! which take fixed-size array references, so every unaligned load reads exactly the bytes
//! of a live array. The other `unsafe` blocks (in [`superblocks`], [`superblocks_g`]) read
//! back the part of a `MaybeUninit` buffer written just before; [`Q8KPrep`] (and
//! `matmul::Lane32`) implement `Pod` by hand, their layouts checked to have no padding.

use core::arch::x86_64::*;

use half::f16;

pub(crate) use crate::matmul::Lane32;

pub(crate) mod avx512;
pub(crate) mod iq;
pub(crate) mod iq4_nl;
pub(crate) mod nvfp4;
pub(crate) mod q4_k;
pub(crate) mod q5_1;
pub(crate) mod q5_k;
pub(crate) mod q6_k;
pub(crate) mod q8_0;
pub(crate) mod q8_k;

/// Define the `ChunkFn` entry point `$name` for the const-generic AVX2 kernel `$dot` and,
/// in module `$m`, one non-inlined function per token count (`$m::nt1` .. `$m::nt8`, each
/// a loop over the weight rows it is given with `$dot::<NT>` inlined), so that every
/// specialisation is a symbol of its own in the built library (`scripts/spill-check.sh`
/// disassembles them by name) and the per-row cost is the row loop's, not a dispatch.
/// (`x86::avx512` instantiates the same arms with its wider feature set: `@ [features, safety]`.)
macro_rules! avx2_chunk_fn {
    (mod $m:ident, fn $name:ident, $dot:ident, $W:ty, $A:ty) => {
        $crate::x86::avx2_chunk_fn!(@ ["avx2,fma,f16c", "The CPU must support AVX2, FMA and F16C (`CpuPath::Avx2.cpu_has_features()`)."] [] mod $m, fn $name, $W, $A, |w, a, apr, _sc, o| $dot(w, a, apr, o));
    };
    // A kernel that reads the chunk's prepared activation scales (`matmul::PrepFn`).
    (scaled mod $m:ident, fn $name:ident, $dot:ident, $W:ty, $A:ty) => {
        $crate::x86::avx2_chunk_fn!(@ ["avx2,fma,f16c", "The CPU must support AVX2, FMA and F16C (`CpuPath::Avx2.cpu_has_features()`)."] [] mod $m, fn $name, $W, $A, |w, a, apr, sc, o| $dot(w, a, apr, sc, o));
    };
    // The same, and one token runs two weight rows at a time through `$dot2(row0, row1, a,
    // sc) -> [[f32; 1]; 2]` (the last row of an odd count through `$dot`).
    (scaled pairs $dot2:ident, mod $m:ident, fn $name:ident, $dot:ident, $W:ty, $A:ty) => {
        $crate::x86::avx2_chunk_fn!(@ ["avx2,fma,f16c", "The CPU must support AVX2, FMA and F16C (`CpuPath::Avx2.cpu_has_features()`)."] [$dot2] mod $m, fn $name, $W, $A, |w, a, apr, sc, o| $dot(w, a, apr, sc, o));
    };
    (@ [$feat:literal, $safety:literal] [$($dot2:ident)?] mod $m:ident, fn $name:ident, $W:ty, $A:ty, |$w:ident, $a:ident, $apr:ident, $sc:ident, $o:ident| $dot:ident($($arg:ident),*)) => {
        pub(crate) mod $m {
            use super::*;
            macro_rules! nt_fn {
                ($f:ident, $n:literal) => {
                    #[inline(never)]
                    #[target_feature(enable = $feat)]
                    pub(super) fn $f($w: &[$W], bpr: usize, $a: &[$A], $apr: usize, $sc: &[$crate::matmul::Lane32], out: &mut [[f32; $n]]) {
                        for (wr, $o) in $w.chunks_exact(bpr).zip(out.iter_mut()) {
                            let $w = wr;
                            $dot::<$n>($($arg),*)
                        }
                    }
                };
            }
            #[inline(never)]
            #[target_feature(enable = $feat)]
            pub(super) fn nt1($w: &[$W], bpr: usize, $a: &[$A], $apr: usize, $sc: &[$crate::matmul::Lane32], out: &mut [[f32; 1]]) {
                #[allow(unused_mut)]
                let (mut rows, mut out) = ($w, out);
                $(
                    let n2 = (rows.len() / bpr).min(out.len()) / 2 * 2;
                    let (pw, rw) = rows.split_at(n2 * bpr);
                    let (po, ro) = out.split_at_mut(n2);
                    for (wr, o) in pw.chunks_exact(2 * bpr).zip(po.as_chunks_mut::<2>().0) {
                        let (r0, r1) = wr.split_at(bpr);
                        *o = $dot2(r0, r1, $a, $sc);
                    }
                    (rows, out) = (rw, ro);
                )?
                for (wr, $o) in rows.chunks_exact(bpr).zip(out.iter_mut()) {
                    let $w = wr;
                    $dot::<1>($($arg),*)
                }
            }
            nt_fn!(nt2, 2);
            nt_fn!(nt3, 3);
            nt_fn!(nt4, 4);
            nt_fn!(nt5, 5);
            nt_fn!(nt6, 6);
            nt_fn!(nt7, 7);
            nt_fn!(nt8, 8);
        }

        /// Weight rows (`bpr` blocks each) against a chunk of 1..=8 tokens (`ChunkFn`).
        ///
        /// # Safety
        #[doc = $safety]
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn $name(w: &[$W], bpr: usize, a: &[$A], apr: usize, nt: usize, sc: &[$crate::matmul::Lane32], out: &mut [f32]) {
            if bpr == 0 {
                return;
            }
            macro_rules! arm {
                ($f:ident, $n:literal) => {
                    $m::$f(w, bpr, a, apr, sc, out.as_chunks_mut::<$n>().0)
                };
            }
            match nt {
                1 => arm!(nt1, 1),
                2 => arm!(nt2, 2),
                3 => arm!(nt3, 3),
                4 => arm!(nt4, 4),
                5 => arm!(nt5, 5),
                6 => arm!(nt6, 6),
                7 => arm!(nt7, 7),
                8 => arm!(nt8, 8),
                // matmul.rs never passes more than MAX_NT tokens (nor zero).
                _ => debug_assert!(false, "chunk of {nt} tokens"),
            }
        }
    };
}
pub(crate) use avx2_chunk_fn;

/// `for $t in 0..$nt { $body }` for a const `$nt <= 8`, unrolled in the source: each copy
/// sees `$t` as a literal, so `[__m256; NT]` accumulator arrays are only ever indexed by
/// constants and live in registers. (LLVM's own unroller gives up on large token-loop
/// bodies and then keeps the array on the stack, indexed at run time.)
macro_rules! for_tokens {
    ($nt:expr, $t:ident => $body:block) => {{
        $crate::x86::for_tokens!(@one $nt, $t, 0, $body);
        $crate::x86::for_tokens!(@one $nt, $t, 1, $body);
        $crate::x86::for_tokens!(@one $nt, $t, 2, $body);
        $crate::x86::for_tokens!(@one $nt, $t, 3, $body);
        $crate::x86::for_tokens!(@one $nt, $t, 4, $body);
        $crate::x86::for_tokens!(@one $nt, $t, 5, $body);
        $crate::x86::for_tokens!(@one $nt, $t, 6, $body);
        $crate::x86::for_tokens!(@one $nt, $t, 7, $body);
        const { assert!($nt <= 8, "for_tokens! unrolls at most 8 tokens") };
    }};
    (@one $nt:expr, $t:ident, $i:literal, $body:block) => {
        if $i < $nt {
            #[allow(clippy::identity_op, clippy::erasing_op)]
            let $t: usize = $i;
            $body
        }
    };
}
pub(crate) use for_tokens;

/// Super-blocks per segment of the two-level kernels ([`superblocks`]): the unpacked
/// segment (at most ~6 KiB) stays in L1 while every token passes over it.
pub(crate) const SEG: usize = 8;

/// The loop structure of the two-level kernels (K-quants and IQ formats, super-blocks of
/// 256 against q8_K), for `NT` tokens: per token a float state `S` (its accumulators) is
/// carried through the super-blocks with `step(unpacked, x, y, state)`, which must perform
/// exactly ggml's per-super-block float operations for that token.
///
/// For one token this is ggml's loop, `direct(x, y, state)` per super-block (which must
/// equal `step(&unpack(x), x, y, state)`; it may interleave unpacking and use, as ggml
/// does, to keep register pressure low). For more, the row is cut into
/// segments of [`SEG`] super-blocks: each segment is unpacked once into a buffer (every
/// weight block loaded and unpacked once), then each token in turn runs the segment's
/// super-blocks in a loop whose only loop-carried values are that token's accumulators, so
/// they stay in registers whatever `NT` is (on AVX2 a super-block's per-token state times 8
/// tokens does not fit the 16 registers). Between segments the token states sit in `state`
/// (one load and one store per token and segment, outside the inner loops).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn superblocks<const NT: usize, W, A, U: Copy, S: Copy>(
    w: &[W],
    ys: &[&[A]; NT],
    s0: S,
    unpack: impl Fn(&W) -> U,
    step: impl Fn(&U, &W, &A, S) -> S,
    direct: impl Fn(&W, &A, S) -> S,
) -> [S; NT] {
    let mut state = [s0; NT];
    if NT == 1 {
        let y = ys[0];
        let mut s = s0;
        for (i, x) in w.iter().enumerate() {
            prefetch_ahead(w, i);
            s = direct(x, &y[i], s);
        }
        state[0] = s;
        return state;
    }
    let mut buf = [const { core::mem::MaybeUninit::<U>::uninit() }; SEG];
    for (si, seg) in w.chunks(SEG).enumerate() {
        for (j, (b, x)) in buf.iter_mut().zip(seg).enumerate() {
            prefetch_ahead(w, si * SEG + j);
            b.write(unpack(x));
        }
        // SAFETY: the loop above initialised `buf[..seg.len()]` (`seg.len() <= SEG`), and
        // `MaybeUninit<U>` has the layout of `U`.
        let unpacked: &[U] = unsafe { core::slice::from_raw_parts(buf.as_ptr().cast::<U>(), seg.len()) };
        let base = si * SEG;
        for_tokens!(NT, t => {
            let y = &ys[t][base..base + seg.len()];
            let mut s = state[t];
            for ((u, x), y) in unpacked.iter().zip(seg).zip(y) {
                s = step(u, x, y, s);
            }
            state[t] = s;
            // Park the token states in memory between the tokens' loops: otherwise LLVM
            // keeps earlier tokens' states in registers across later tokens' inner loops,
            // and those run out of registers and spill their own accumulators.
            core::hint::black_box(&mut state);
        });
    }
    state
}

/// [`superblocks`] with the tokens of a segment taken `G` at a time: `stepg` runs one
/// super-block for `G` tokens together (each token's float operations exactly those of
/// `step`), so that every unpacked vector it loads from the segment buffer serves `G`
/// tokens (the buffer loads, not the arithmetic, bound the one-token inner loop). Tokens
/// left over (`NT % G`) run `step` alone. Per token the super-blocks still go in order
/// through the same `step` operations: the bits are [`superblocks`]'.
///
/// `DIRECT_G`: with exactly `G` tokens, skip the segment buffer and run `stepg(&unpack(x),
/// ..)` block by block. Faster where unpacking is cheap and the buffer's stores and loads
/// are not (2 tokens, out of cache: q4_K 1.01x -> 1.31x ggml, q5_K 1.27x -> 1.69x, iq4_xs
/// 1.19x -> 1.60x; q6_K at 4 tokens 1.20x -> 1.59x), slower where unpacking is the work
/// (the IQ2/IQ3 grids: 1.25x -> 1.14x for iq2_xxs), so each caller chooses.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn superblocks_g<const NT: usize, const G: usize, const DIRECT_G: bool, W, A, U: Copy, S: Copy>(
    w: &[W],
    ys: &[&[A]; NT],
    s0: S,
    unpack: impl Fn(&W) -> U,
    step: impl Fn(&U, &W, &A, S) -> S,
    stepg: impl Fn(&U, &W, [&A; G], [S; G]) -> [S; G],
    direct: impl Fn(&W, &A, S) -> S,
) -> [S; NT] {
    if NT < G {
        return superblocks(w, ys, s0, unpack, step, direct);
    }
    let mut state = [s0; NT];
    if DIRECT_G && NT == G {
        // One group of tokens: no segment buffer; each super-block unpacked where `stepg`
        // uses it (as `direct` does for one token).
        let yg: [&[A]; G] = core::array::from_fn(|g| ys[g]);
        let mut sg: [S; G] = [s0; G];
        for (i, x) in w.iter().enumerate() {
            prefetch_ahead(w, i);
            sg = stepg(&unpack(x), x, core::array::from_fn(|g| &yg[g][i]), sg);
        }
        state[..G].copy_from_slice(&sg);
        return state;
    }
    let mut buf = [const { core::mem::MaybeUninit::<U>::uninit() }; SEG];
    for (si, seg) in w.chunks(SEG).enumerate() {
        for (j, (b, x)) in buf.iter_mut().zip(seg).enumerate() {
            prefetch_ahead(w, si * SEG + j);
            b.write(unpack(x));
        }
        // SAFETY: the loop above initialised `buf[..seg.len()]` (`seg.len() <= SEG`), and
        // `MaybeUninit<U>` has the layout of `U`.
        let unpacked: &[U] = unsafe { core::slice::from_raw_parts(buf.as_ptr().cast::<U>(), seg.len()) };
        let (base, len) = (si * SEG, seg.len());
        // Constant trip counts: the leftover loop is gone when `G` divides `NT`.
        for gi in 0..NT / G {
            let t = gi * G;
            let yg: [&[A]; G] = core::array::from_fn(|g| &ys[t + g][base..base + len]);
            let mut sg: [S; G] = core::array::from_fn(|g| state[t + g]);
            for (j, (u, x)) in unpacked.iter().zip(seg).enumerate() {
                sg = stepg(u, x, core::array::from_fn(|g| &yg[g][j]), sg);
            }
            state[t..t + G].copy_from_slice(&sg);
            // As in `superblocks`: park the states between the groups' loops.
            core::hint::black_box(&mut state);
        }
        for t in NT / G * G..NT {
            let y = &ys[t][base..base + len];
            let mut st = state[t];
            for ((u, x), y) in unpacked.iter().zip(seg).zip(y) {
                st = step(u, x, y, st);
            }
            state[t] = st;
            core::hint::black_box(&mut state);
        }
    }
    state
}

/// The activation rows of `NT` tokens (`apr` blocks apart in `a`), each `n` blocks long.
/// Slicing here, once per row, lets the block loops index without per-token checks.
#[inline(always)]
pub(crate) fn token_rows<A, const NT: usize>(a: &[A], apr: usize, n: usize) -> [&[A]; NT] {
    let mut rows = [&a[..0]; NT];
    for (t, r) in rows.iter_mut().enumerate() {
        *r = &a[t * apr..][..n];
    }
    rows
}

// ---------------------------------------------------------------------------------------
// Loads and conversions.

/// How far ahead of the block in use the block loops ask for weight bytes
/// ([`prefetch_ahead`]): every block loop that streams a row from memory (the one-token
/// loops, q8_0's and q5_1's at every token count, iq4_nl's first span, the two-level
/// kernels' segment unpacking and one-group loops). ggml's loops leave streaming to the
/// hardware prefetchers; on session 12's Zen 2 one core then read a row-major q8_0 matrix at
/// 80-85 % of its streaming bandwidth, and with a prefetch this far ahead (384, 512, 768 and
/// 1024 bytes tried; 512 best) at about 95 % (`benches/results/2026-12-05-amd-epyc-2cpu-session12`).
/// There the segmented loops at 2-8 tokens lost 3-10 % with it; on session 13's Xeon, whose
/// hardware prefetch keeps up far less, they gained up to 2x (q4_K at 2 tokens 4.96 -> 9.55
/// GB/s, iq4_nl 2.44 -> 5.00, from 0.65x ggml to 1.31x;
/// `benches/results/2026-12-05-xeon-2cpu-session13`), so every streaming loop has it.
pub(crate) const PREFETCH_BYTES: usize = 512;

/// `prefetcht0` of the byte [`PREFETCH_BYTES`] past the start of `w[i]`. The address may lie
/// past the end of `w` (past the matrix even): a prefetch never faults and reads nothing
/// into the program, and the pointer is only computed (`wrapping_add`), never dereferenced.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn prefetch_ahead<T>(w: &[T], i: usize) {
    _mm_prefetch::<_MM_HINT_T0>(w.as_ptr().wrapping_add(i).cast::<i8>().wrapping_add(PREFETCH_BYTES));
}

/// `_mm256_loadu_si256` of 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_i8x32(x: &[i8; 32]) -> __m256i {
    // SAFETY: `x` is a live 32-byte array; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(x.as_ptr().cast()) }
}

/// `_mm256_loadu_si256` of 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_u8x32(x: &[u8; 32]) -> __m256i {
    // SAFETY: `x` is a live 32-byte array; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(x.as_ptr().cast()) }
}

/// `_mm_loadu_si128` of 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_u8x16(x: &[u8; 16]) -> __m128i {
    // SAFETY: `x` is a live 16-byte array; `loadu` has no alignment requirement.
    unsafe { _mm_loadu_si128(x.as_ptr().cast()) }
}

/// `_mm_loadu_si128` of 16 signed bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_i8x16(x: &[i8; 16]) -> __m128i {
    // SAFETY: `x` is a live 16-byte array; `loadu` has no alignment requirement.
    unsafe { _mm_loadu_si128(x.as_ptr().cast()) }
}

/// `_mm_loadl_epi64` of 8 int8 (the upper half zero): folds into a `vpmovsx*` memory operand.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_i8x8(x: &[i8; 8]) -> __m128i {
    // SAFETY: `x` is a live 8-byte array; `loadl` reads exactly 8 bytes, unaligned.
    unsafe { _mm_loadl_epi64(x.as_ptr().cast()) }
}

/// `_mm_loadu_si128` of 8 int16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_i16x8(x: &[i16; 8]) -> __m128i {
    // SAFETY: `x` is a live 16-byte array; `loadu` has no alignment requirement.
    unsafe { _mm_loadu_si128(x.as_ptr().cast()) }
}

/// `_mm256_loadu_si256` of 16 int16 (the q8_K `bsums`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_i16x16(x: &[i16; 16]) -> __m256i {
    // SAFETY: `x` is a live 32-byte array; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(x.as_ptr().cast()) }
}

/// The `k`-th 32-byte piece of a 256-element q8_K quant array.
#[inline(always)]
pub(crate) fn q8k_32(qs: &[i8; 256], k: usize) -> &[i8; 32] {
    &qs.as_chunks::<32>().0[k]
}

/// quants.c `get_scale_shuffle_k4`: row `i` repeats bytes `2i, 2i+1` 16 times.
pub(crate) static SCALE_SHUFFLE_K4: [[u8; 32]; 8] = {
    let mut t = [[0u8; 32]; 8];
    let mut i = 0;
    while i < 8 {
        let mut b = 0;
        while b < 32 {
            t[i][b] = (2 * i + b % 2) as u8;
            b += 1;
        }
        i += 1;
    }
    t
};

/// quants.c `get_scale_shuffle`: row `i` is 8 x byte `2i`, then 8 x byte `2i+1`.
pub(crate) static SCALE_SHUFFLE: [[u8; 16]; 8] = {
    let mut t = [[0u8; 16]; 8];
    let mut i = 0;
    while i < 8 {
        let mut b = 0;
        while b < 16 {
            t[i][b] = (2 * i + b / 8) as u8;
            b += 1;
        }
        i += 1;
    }
    t
};

/// `_mm256_loadu_ps` of 8 floats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_f32x8(x: &[f32; 8]) -> __m256 {
    // SAFETY: `x` is a live array of 8 f32; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_ps(x.as_ptr()) }
}

/// `_mm256_storeu_ps` of 8 floats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn store_f32x8(out: &mut [f32; 8], v: __m256) {
    // SAFETY: `out` is a live, exclusively borrowed array of 8 f32; no alignment needed.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) }
}

/// `_mm256_storeu_si256` of 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn store_i8x32(out: &mut [i8; 32], v: __m256i) {
    // SAFETY: `out` is a live, exclusively borrowed 32-byte array; no alignment needed.
    unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), v) }
}

/// `GGML_CPU_FP16_TO_FP32` in ggml's F16C build: `_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(x)))`.
/// Exact, as the reference's `f16::to_f32`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f16_to_f32(h: f16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h.to_bits() as i32)))
}

/// `GGML_CPU_FP16_TO_FP32(h)` broadcast to 8 lanes (`vpbroadcastw` + `vcvtph2ps`). The
/// kernels multiply scales as vectors of equal lanes (each lane the scalar product ggml
/// computes): the scalar conversion above compiles to a `vpinsrw` into a stale register,
/// often an accumulator, a false dependency that serialises the block loop.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f16_to_f32x8(h: f16) -> __m256 {
    _mm256_cvtph_ps(_mm_set1_epi16(h.to_bits() as i16))
}

/// `GGML_CPU_FP16_TO_FP32` of every half (65536 f32, 256 KiB), as ggml's own x86 build
/// converts scales in its kernels (`ggml_table_f32_f16` lookups: a scalar load, no vector
/// op). Built once, at first use, with the F16C conversion itself, so every entry (NaN
/// payloads included) has the bits of [`f16_to_f32`].
pub(crate) struct F16Table(pub(crate) [f32; 65536]);

/// The table of [`F16Table`], built on first use. Call once per kernel call and pass the
/// reference down (the `OnceLock` check stays out of the block loops).
#[inline]
pub(crate) fn f16_table() -> &'static F16Table {
    static T: std::sync::OnceLock<Box<F16Table>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        #[target_feature(enable = "avx2,fma,f16c")]
        fn fill(t: &mut F16Table) {
            for (i, v) in t.0.iter_mut().enumerate() {
                *v = f16_to_f32(f16::from_bits(i as u16));
            }
        }
        let mut t = Box::new(F16Table([0f32; 65536]));
        // SAFETY: only the AVX2 kernels call `f16_table`, and they run only on a CPU with
        // AVX2, FMA and F16C (module doc).
        unsafe { fill(&mut t) };
        t
    })
}

impl F16Table {
    /// `GGML_CPU_FP16_TO_FP32(h)` (exact), a table load.
    #[inline(always)]
    pub(crate) fn get(&self, h: f16) -> f32 {
        self.0[h.to_bits() as usize]
    }

    /// `GGML_CPU_FP16_TO_FP32(h)` broadcast to 8 lanes: one `vbroadcastss` from the table.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn x8(&self, h: f16) -> __m256 {
        _mm256_set1_ps(self.get(h))
    }
}

/// `matmul::PrepFn` for q8_0 activations: `out[i].0[t] = FP16_TO_FP32(token t's block
/// i .d)` (lanes `t >= nt` zero), so that the kernels broadcast a token's scale with one
/// load instead of converting it once per weight row.
///
/// # Safety
/// None beyond the type's (the table is built with F16C only on a CPU that has it: the
/// AVX2 paths are the only callers).
pub(crate) unsafe fn prep_q8_0(a: &[qkern_formats::blocks::BlockQ8_0], apr: usize, nt: usize, out: &mut Vec<Lane32>) {
    let tab = f16_table();
    out.clear();
    out.resize(apr, Lane32::default());
    for (t, row) in a.chunks_exact(apr).take(nt.min(8)).enumerate() {
        for (o, b) in out.iter_mut().zip(row) {
            o.0[t] = tab.get(b.d);
        }
    }
}

/// `matmul::PrepFn` for q8_1 activations: `out[2 i].0[t]` = token t's `d`, `out[2 i +
/// 1].0[t]` its `s` (as f32; lanes `t >= nt` zero).
///
/// # Safety
/// As [`prep_q8_0`].
pub(crate) unsafe fn prep_q8_1(a: &[qkern_formats::blocks::BlockQ8_1], apr: usize, nt: usize, out: &mut Vec<Lane32>) {
    let tab = f16_table();
    out.clear();
    out.resize(2 * apr, Lane32::default());
    for (t, row) in a.chunks_exact(apr).take(nt.min(8)).enumerate() {
        for (o, b) in out.chunks_exact_mut(2).zip(row) {
            o[0].0[t] = tab.get(b.d);
            o[1].0[t] = tab.get(b.s);
        }
    }
}

/// A q8_K block as the AVX2 kernels read it (`prep_q8_k`): the quants 32-byte aligned
/// (in `BlockQ8K` they sit at offset 4 of a 292-byte block, so that about half of the
/// 32-byte loads straddle two cache lines), the `bsums`, their pair sums `q8s[j] =
/// bsums[2j] + bsums[2j+1]` (wrapping: `_mm_hadd_epi16(bsums[0..8], bsums[8..16])`, which
/// q4_K and q5_K take per token and super-block), `d` and `nd = -d`.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub(crate) struct Q8KPrep {
    pub(crate) qs: [i8; 256],
    pub(crate) bsums: [i16; 16],
    pub(crate) q8s: [i16; 8],
    pub(crate) d: f32,
    pub(crate) nd: f32,
    _pad: [u8; 8],
}
const _: () = assert!(core::mem::size_of::<Q8KPrep>() == 10 * 32);
// SAFETY: `repr(C)`, every field Pod, no padding (256 + 32 + 16 + 4 + 4 + 8 = 320 bytes, a
// multiple of the alignment 32, checked above).
unsafe impl bytemuck::Zeroable for Q8KPrep {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Q8KPrep {}

/// `matmul::PrepFn` for q8_K activations: the chunk's blocks as [`Q8KPrep`], token-major
/// (token t's block i at `t * apr + i`), exact copies and wrapping integer sums.
///
/// # Safety
/// None.
pub(crate) unsafe fn prep_q8_k(a: &[qkern_formats::blocks::BlockQ8K], apr: usize, nt: usize, out: &mut Vec<Lane32>) {
    out.clear();
    out.resize(10 * apr * nt, Lane32::default());
    let p: &mut [Q8KPrep] = bytemuck::cast_slice_mut(out.as_mut_slice());
    for (o, b) in p.iter_mut().zip(&a[..apr * nt]) {
        o.qs = b.qs;
        o.bsums = b.bsums;
        for j in 0..8 {
            o.q8s[j] = b.bsums[2 * j].wrapping_add(b.bsums[2 * j + 1]);
        }
        o.d = b.d;
        o.nd = -b.d;
    }
}

/// The prepared q8_K blocks of a chunk (`prep_q8_k`'s output).
#[inline(always)]
pub(crate) fn q8k_prep(sc: &[Lane32]) -> &[Q8KPrep] {
    bytemuck::cast_slice(sc)
}

/// `GGML_CPU_FP32_TO_FP16` as this ggml build runs it: ggml's software converter (round to
/// nearest even, canonical NaN), not F16C. For every f32 but NaN the two give the same bits
/// (checked over all 2^32 inputs: `tests::f16c_matches_ggml_software_converter`), so the
/// single `vcvtps2ph` is used there and the software converter only for NaN, whose payload
/// F16C would keep. (The q8_1 quantizer converts two values per 32-element block: with the
/// software converter for both it ran at 0.85x ggml's speed on this build's AMD EPYC host,
/// 1.17x with F16C.)
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f32_to_f16(x: f32) -> f16 {
    if x.is_nan() {
        return qkern_formats::fp::f32_to_f16(x);
    }
    f16::from_bits(_mm_extract_epi16::<0>(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(x))) as u16)
}

// ---------------------------------------------------------------------------------------
// ggml's AVX2 helpers (quants.c, top of file), one for one.

/// `hsum_float_8`: `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum_float_8(x: __m256) -> f32 {
    let mut res = _mm256_extractf128_ps::<1>(x);
    res = _mm_add_ps(res, _mm256_castps256_ps128(x));
    res = _mm_add_ps(res, _mm_movehl_ps(res, res));
    res = _mm_add_ss(res, _mm_movehdup_ps(res));
    _mm_cvtss_f32(res)
}

/// `mul_sum_us8_pairs_float` without the final conversion: `madd(ones, maddubs(ax, sy))`.
///
/// Contract: the caller guarantees that `maddubs` cannot saturate, i.e. that every pair
/// `ax[2j] * sy[2j] + ax[2j+1] * sy[2j+1]` (u8 times i8) lies in i16, and says why at the
/// call site. Then each int32 lane is the exact sum of its 4 products, and the AVX-512
/// copy of the kernels computes it with one VNNI `vpdpbusd` (`x86::avx512` shadows this
/// function): the same bits. (Where `maddubs` may saturate, call the intrinsics directly.)
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mul_sum_us8_pairs(ax: __m256i, sy: __m256i) -> __m256i {
    let dot = _mm256_maddubs_epi16(ax, sy);
    _mm256_madd_epi16(_mm256_set1_epi16(1), dot)
}

/// `_mm256_add_epi32(acc, _mm256_madd_epi16(a, b))`. Always exact modulo 2^32 (the
/// products of int16 fit in int32; the pair sum and the add wrap), which is also VNNI
/// `vpdpwssd`'s definition: the hook where the AVX-512 copy could use
/// `_mm256_dpwssd_epi32` with the same bits (not enabled, see `x86::avx512`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn madd_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
}

/// `mul_sum_i8_pairs_float` (AVX2 branch, no VNNI): the sign trick, then
/// `cvtepi32_ps(madd(ones, maddubs(|x|, sign(y, x))))`. Under [`mul_sum_us8_pairs`]'s
/// contract (the caller shows `maddubs(|x|, sign(y, x))` cannot saturate); shadowed in
/// `x86::avx512` by the VNNI form.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mul_sum_i8_pairs_float(x: __m256i, y: __m256i) -> __m256 {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    _mm256_cvtepi32_ps(mul_sum_us8_pairs(ax, sy))
}

/// `bytes_from_nibbles_32`: 16 bytes -> 32 bytes, low nibbles first, then high nibbles.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn bytes_from_nibbles_32(x: &[u8; 16]) -> __m256i {
    let tmp = load_u8x16(x);
    let bytes = _mm256_set_m128i(_mm_srli_epi16::<4>(tmp), tmp);
    _mm256_and_si256(_mm256_set1_epi8(0xF), bytes)
}

/// `bytes_from_bits_32`: bit j of the little-endian `x` -> byte j of 0xFF or 0x00.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn bytes_from_bits_32(x: &[u8; 4]) -> __m256i {
    let x32 = u32::from_le_bytes(*x);
    let shuf_mask = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000);
    let mut bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x32 as i32), shuf_mask);
    let bit_mask = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    bytes = _mm256_or_si256(bytes, bit_mask);
    _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
}

// ---------------------------------------------------------------------------------------
// Activation quantizers (quants.c `quantize_row_q8_0` / `quantize_row_q8_1`, AVX2 branch).

/// One 32-float block of the x86 q8 quantizers: `(d, [i0, i1, i2, i3])`, the scale and
/// the four vectors of unsaturated int32 quants (`_mm256_cvtps_epi32(round(v * id))`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn q8_block(x: &[f32; 32]) -> (f32, [__m256i; 4]) {
    let x8: &[[f32; 8]; 4] = bytemuck::cast_ref(x);
    let v = [load_f32x8(&x8[0]), load_f32x8(&x8[1]), load_f32x8(&x8[2]), load_f32x8(&x8[3])];
    // Compute max(abs(e)) for the block
    let sign_bit = _mm256_set1_ps(-0.0);
    let mut max_abs = _mm256_andnot_ps(sign_bit, v[0]);
    max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v[1]));
    max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v[2]));
    max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v[3]));
    let mut max4 = _mm_max_ps(_mm256_extractf128_ps::<1>(max_abs), _mm256_castps256_ps128(max_abs));
    max4 = _mm_max_ps(max4, _mm_movehl_ps(max4, max4));
    max4 = _mm_max_ss(max4, _mm_movehdup_ps(max4));
    let max_scalar = _mm_cvtss_f32(max4);
    let d = max_scalar / 127.0;
    let id = if max_scalar != 0.0 { 127.0 / max_scalar } else { 0.0 };
    let mul = _mm256_set1_ps(id);
    let mut q = [_mm256_setzero_si256(); 4];
    for (qk, vk) in q.iter_mut().zip(v) {
        *qk = _mm256_cvtps_epi32(_mm256_round_ps::<_MM_FROUND_TO_NEAREST_INT>(_mm256_mul_ps(vk, mul)));
    }
    (d, q)
}

/// The saturating packs and the order fix of the x86 q8 quantizers.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn q8_pack(i: [__m256i; 4]) -> __m256i {
    let i0 = _mm256_packs_epi32(i[0], i[1]);
    let i2 = _mm256_packs_epi32(i[2], i[3]);
    let i0 = _mm256_packs_epi16(i0, i2);
    let perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    _mm256_permutevar8x32_epi32(i0, perm)
}

/// `hsum_i32_8`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum_i32_8(a: __m256i) -> i32 {
    let sum128 = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256::<1>(a));
    let hi64 = _mm_unpackhi_epi64(sum128, sum128);
    let sum64 = _mm_add_epi32(hi64, sum128);
    let hi32 = _mm_shuffle_epi32::<0b10_11_00_01>(sum64);
    _mm_cvtsi128_si32(_mm_add_epi32(sum64, hi32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The F16C conversion of [`f32_to_f16`] gives ggml's software converter's bits for every
    /// f32 (all 2^32 bit patterns, NaN included through the fallback).
    #[test]
    fn f16c_matches_ggml_software_converter() {
        let f = crate::features();
        if !(f.avx2 && f.fma && f.f16c) {
            eprintln!("skipped: this CPU has no AVX2+FMA+F16C");
            return;
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8) as u64;
        let span = (1u64 << 32) / threads;
        let bad: u64 = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..threads)
                .map(|k| {
                    sc.spawn(move || {
                        let end = if k + 1 == threads { 1u64 << 32 } else { (k + 1) * span };
                        let mut bad = 0u64;
                        for b in k * span..end {
                            let x = f32::from_bits(b as u32);
                            // SAFETY: AVX2, FMA and F16C were detected above.
                            let got = unsafe { f32_to_f16(x) }.to_bits();
                            let want = qkern_formats::fp::f32_to_f16(x).to_bits();
                            if got != want {
                                if bad == 0 {
                                    eprintln!("{b:#010x}: f16c path {got:#06x}, ggml {want:#06x}");
                                }
                                bad += 1;
                            }
                        }
                        bad
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(bad, 0, "{bad} f32 inputs convert differently");
    }
}
