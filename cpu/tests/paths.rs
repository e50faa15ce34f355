//! Every CPU path this machine can run, bitwise against the scalar reference
//! (`qkern_formats::reference`), per weight format: random raw weight blocks with sane
//! scales, activations quantized by the reference (and raw random activation blocks,
//! -128 bytes included), NT 1..=16, thread counts 1, 2 and 3. Plus the activation
//! quantizers and dequantization on every path.
//!
//! Paths that are not complete yet are tested too (`CpuBackend::new_unfinished`): a format
//! without a SIMD kernel runs the scalar reference on them. The AVX-512 path is covered on a
//! CPU with AVX-512 F/BW/VL/VNNI (`simd_paths_present` asserts it there, and says on stderr
//! when this CPU lacks them).

use std::sync::OnceLock;

use proptest::prelude::*;
use qkern_cpu::{CpuBackend, CpuPath};
use qkern_formats::{Format, reference};

/// SplitMix64: test data from one proptest-chosen seed.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    fn normal(&mut self) -> f32 {
        let u1 = ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let u2 = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
    }
    fn fill(&mut self, out: &mut [u8]) {
        for c in out.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

/// `n` raw random blocks of `f` with every fp16 (q8_K: f32) scale set to a finite value
/// of moderate size (nvfp4's UE4M3 scales stay raw: every byte is finite).
fn random_blocks(rng: &mut Rng, f: Format, n: usize) -> Vec<u8> {
    let bb = f.block_bytes();
    let mut out = vec![0u8; bb * n];
    rng.fill(&mut out);
    for b in out.chunks_exact_mut(bb) {
        for &off in f.f16_scale_offsets() {
            // Mostly moderate, sometimes zero or tiny (subnormal) scales.
            let v = match rng.below(16) {
                0 => 0.0,
                1 => (rng.uniform() - 0.5) * 1e-6,
                _ => (rng.uniform() * 2.0 - 1.0) * 0.05,
            };
            b[off..off + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
        }
        if f == Format::Q8_K {
            b[0..4].copy_from_slice(&(rng.uniform() * 0.05).to_le_bytes());
        }
    }
    out
}

/// `n` floats: gaussian with a random per-call scale, some zero spans and outliers.
fn random_floats(rng: &mut Rng, n: usize) -> Vec<f32> {
    let scale = [1e-3f32, 0.1, 1.0, 30.0][rng.below(4) as usize];
    (0..n)
        .map(|i| match rng.below(64) {
            _ if (i / 32) % 7 == 3 => 0.0,
            0 => rng.normal() * scale * 100.0,
            _ => rng.normal() * scale,
        })
        .collect()
}

/// Paths this CPU can run (complete or not).
fn paths() -> Vec<CpuPath> {
    CpuPath::ALL.into_iter().filter(|p| p.cpu_has_features()).collect()
}

/// Cached backends: (path, threads) for threads 1, 2, 3.
fn backends() -> &'static [(CpuPath, usize, CpuBackend)] {
    static B: OnceLock<Vec<(CpuPath, usize, CpuBackend)>> = OnceLock::new();
    B.get_or_init(|| {
        let mut v = Vec::new();
        for p in paths() {
            for t in 1..=3 {
                v.push((p, t, CpuBackend::new_unfinished(p, Some(t)).expect("backend")));
            }
        }
        v
    })
}

const MAX_NT: usize = 16;

/// The body of one case: `rows` x `nblocks` blocks of `f`, 16 tokens, every path, NT
/// 1..=16, thread counts 1..=3, bitwise against `reference::dot_tokens`.
fn check_matmul(f: Format, seed: u64, rows: usize, nblocks: usize, raw_acts: bool) -> Result<(), TestCaseError> {
    let mut rng = Rng(seed);
    let act = f.vec_dot_type().unwrap();
    let cols = nblocks * f.block_elems();
    let w = random_blocks(&mut rng, f, rows * nblocks);
    let ab = act.row_bytes(cols).unwrap();
    let mut a = vec![0u8; ab * MAX_NT];
    for t in 0..MAX_NT {
        let row = &mut a[t * ab..(t + 1) * ab];
        if raw_acts && t % 2 == 1 {
            // Raw random activation blocks (bytes of -128 included, bsums inconsistent).
            row.copy_from_slice(&random_blocks(&mut rng, act, ab / act.block_bytes()));
        } else {
            reference::quantize_row(act, &random_floats(&mut rng, cols), row).unwrap();
        }
    }
    let wb = f.row_bytes(cols).unwrap();
    // want[t][r]
    let mut want = vec![0f32; MAX_NT * rows];
    for r in 0..rows {
        let mut o = [0f32; MAX_NT];
        reference::dot_tokens(f, cols, &w[r * wb..(r + 1) * wb], &a, &mut o).unwrap();
        for t in 0..MAX_NT {
            want[t * rows + r] = o[t];
        }
    }
    for (path, threads, be) in backends() {
        for nt in 1..=MAX_NT {
            let mut got = vec![f32::NAN; nt * rows];
            be.matmul(f, rows, cols, &w, &a[..nt * ab], &mut got).unwrap();
            for t in 0..nt {
                for r in 0..rows {
                    let (g, e) = (got[t * rows + r], want[t * rows + r]);
                    prop_assert_eq!(
                        g.to_bits(),
                        e.to_bits(),
                        "{} path {} threads {} nt {} token {} row {}: got {} want {}",
                        f,
                        path,
                        threads,
                        nt,
                        t,
                        r,
                        g,
                        e
                    );
                }
            }
        }
    }
    Ok(())
}

/// Dequantization of `f` on every path, bitwise against the reference.
fn check_dequantize(f: Format, seed: u64, nblocks: usize) -> Result<(), TestCaseError> {
    let mut rng = Rng(seed);
    let n = nblocks * f.block_elems();
    let bytes = random_blocks(&mut rng, f, nblocks);
    let mut want = vec![0f32; n];
    reference::dequantize_row(f, &bytes, &mut want).unwrap();
    for (path, threads, be) in backends() {
        if *threads != 1 {
            continue;
        }
        let mut got = vec![f32::NAN; n];
        be.dequantize(f, &bytes, &mut got).unwrap();
        for i in 0..n {
            prop_assert_eq!(got[i].to_bits(), want[i].to_bits(), "{} path {} element {}", f, path, i);
        }
    }
    Ok(())
}

macro_rules! format_tests {
    ($($name:ident => $f:expr;)*) => {
        $(
            mod $name {
                use super::*;
                proptest! {
                    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
                    #[test]
                    fn matmul_bitwise(seed in any::<u64>(), rows in 1usize..40, nblocks in 1usize..20, raw in any::<bool>()) {
                        // Odd and even block counts (iq4_nl's tail), rows of more than one segment (8
                        // super-blocks) with a partial last one.
                        check_matmul($f, seed, rows, nblocks, raw)?;
                    }

                    #[test]
                    fn dequantize_bitwise(seed in any::<u64>(), nblocks in 1usize..9) {
                        check_dequantize($f, seed, nblocks)?;
                    }
                }

                /// Long rows, including every NT and thread count, more than one task per thread.
                #[test]
                fn matmul_long_rows() {
                    let nb = (4096 / $f.block_elems()).max(1);
                    for seed in 0..3 {
                        check_matmul($f, 1000 + seed, 67, nb, seed == 2).unwrap();
                    }
                }
            }
        )*
    };
}

format_tests! {
    q8_0 => Format::Q8_0;
    q5_1 => Format::Q5_1;
    q4_k => Format::Q4_K;
    q5_k => Format::Q5_K;
    q6_k => Format::Q6_K;
    iq2_xxs => Format::IQ2_XXS;
    iq2_xs => Format::IQ2_XS;
    iq2_s => Format::IQ2_S;
    iq3_xxs => Format::IQ3_XXS;
    iq3_s => Format::IQ3_S;
    iq4_nl => Format::IQ4_NL;
    iq4_xs => Format::IQ4_XS;
    nvfp4 => Format::NVFP4;
}

/// The activation quantizers on every path against the reference, including rounding
/// ties, all-zero blocks, huge and tiny values.
fn check_quantize(act: Format, seed: u64, nblocks: usize, kind: u8) -> Result<(), TestCaseError> {
    let mut rng = Rng(seed);
    let cols = nblocks * act.block_elems();
    let nt = 1 + rng.below(3) as usize;
    let x: Vec<f32> = match kind {
        // Rounding ties: amax 127 per 32 (id = 1), the rest at k + 0.5.
        0 => (0..cols * nt)
            .map(|i| if i % 32 == 0 { 127.0 } else { (rng.below(254) as f32 - 127.0) + 0.5 * (rng.below(2) as f32) })
            .collect(),
        1 => (0..cols * nt).map(|_| rng.normal() * 1e-30).collect(),
        2 => (0..cols * nt).map(|_| rng.normal() * 6e4).collect(),
        // Non-finite values sprinkled in (NaN, +-Inf, f32::MAX): the x86 quantizers' max_ps /
        // cvtps_epi32 semantics.
        5 => (0..cols * nt)
            .map(|_| match rng.below(40) {
                0 => f32::NAN,
                1 => f32::INFINITY,
                2 => f32::NEG_INFINITY,
                3 => f32::MAX,
                _ => rng.normal(),
            })
            .collect(),
        // Runs of 32 that are all zero (either sign) or zero and NaN only, between normal
        // ones: the quantizers' zero-block path (`amax == 0`, NaN never counted).
        6 => (0..cols * nt)
            .collect::<Vec<_>>()
            .chunks(32)
            .flat_map(|run| {
                let k = rng.below(4);
                run.iter()
                    .map(|_| match (k, rng.below(3)) {
                        (0, 0) => -0.0,
                        (0, _) => 0.0,
                        (1, 0) => f32::NAN,
                        (1, _) => 0.0,
                        _ => rng.normal(),
                    })
                    .collect::<Vec<f32>>()
            })
            .collect(),
        _ => random_floats(&mut rng, cols * nt),
    };
    let rb = act.row_bytes(cols).unwrap();
    let mut want = vec![0u8; rb * nt];
    for (xr, o) in x.chunks_exact(cols).zip(want.chunks_exact_mut(rb)) {
        reference::quantize_row(act, xr, o).unwrap();
    }
    for (path, threads, be) in backends() {
        if *threads != 1 {
            continue;
        }
        let mut got = vec![0xAAu8; rb * nt];
        be.quantize(act, cols, &x, &mut got).unwrap();
        prop_assert!(got == want, "{} quantize on path {} differs", act, path);
        // And at an odd byte offset (unaligned output).
        let mut buf = vec![0u8; rb * nt + 1];
        be.quantize(act, cols, &x, &mut buf[1..]).unwrap();
        prop_assert!(buf[1..] == want[..], "{} quantize (unaligned) on path {} differs", act, path);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    #[test]
    fn quantize_q8_0(seed in any::<u64>(), nblocks in 1usize..20, kind in 0u8..7) {
        check_quantize(Format::Q8_0, seed, nblocks, kind)?;
    }
    #[test]
    fn quantize_q8_1(seed in any::<u64>(), nblocks in 1usize..20, kind in 0u8..7) {
        check_quantize(Format::Q8_1, seed, nblocks, kind)?;
    }
    #[test]
    fn quantize_q8_k(seed in any::<u64>(), nblocks in 1usize..4, kind in 0u8..7) {
        check_quantize(Format::Q8_K, seed, nblocks, kind)?;
    }
}

#[test]
fn simd_paths_present() {
    // On this project's x86 machines the AVX2 path must be exercised, not silently skipped.
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        assert!(paths().contains(&CpuPath::Avx2));
    }
    // And the AVX-512 path wherever the CPU has its features (F, BW, VL, VNNI).
    #[cfg(target_arch = "x86_64")]
    {
        let avx512 = std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vnni");
        if avx512 && std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            assert!(paths().contains(&CpuPath::Avx512));
            assert!(CpuPath::Avx512.supported());
        }
    }
    if !paths().contains(&CpuPath::Avx512) {
        eprintln!(
            "NOTE: the AVX-512 path is NOT tested on this machine: the CPU lacks some of avx512f/bw/vl/vnni ({})",
            qkern_cpu::features()
        );
    }
    eprintln!("paths under test: {:?}", paths());
}

/// A path the CPU cannot run is a typed error, never a silent fallback.
#[test]
fn unsupported_path_is_an_error() {
    for p in CpuPath::ALL {
        match CpuBackend::new(p, Some(1)) {
            Ok(be) => {
                assert!(p.supported());
                assert_eq!(be.path(), p);
            }
            Err(e) => {
                assert!(!p.supported(), "{p}: {e}");
                assert!(matches!(e, qkern_cpu::CpuError::Unsupported(q, _) if q == p), "{p}: {e}");
            }
        }
    }
}
