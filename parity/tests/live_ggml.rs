//! Live properties against ggml 0.26.0 (x86 AVX2 build): dequantize, activation quantize and
//! dot for every format, random blocks and random activations, NT 1..8, shrinking on.
//! Run with `cargo test -p qkern-parity --features ggml`.
#![cfg(feature = "ggml")]

use proptest::prelude::*;
use qkern_formats::{Format, reference};
use qkern_parity::inputs::{Dist, Rng, floats, random_blocks};
use qkern_parity::{bits_equal, bytes_equal, ggml};

/// 256 cases per format and operation, or `PROPTEST_CASES` when set.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

/// Weights for one case: ggml-quantized floats of a distribution, or raw random blocks.
fn weights(f: Format, rng: &mut Rng, rows: usize, cols: usize, dist: Option<Dist>) -> Vec<u8> {
    match dist {
        Some(d) => {
            let x = floats(rng, d, rows * cols);
            let im: Option<Vec<f32>> =
                ggml::requires_imatrix(f).then(|| (0..cols).map(|_| 0.1 + rng.uniform()).collect());
            ggml::quantize(f, &x, cols, im.as_deref()).expect("ggml quantize")
        }
        None => random_blocks(rng, f, rows * cols / f.block_elems(), false),
    }
}

/// One activation row: ggml-quantized floats (checked against ours), or raw random blocks
/// (which may contain -128 bytes: the reference must match ggml's sign-trick wart too).
fn activation(act: Format, rng: &mut Rng, cols: usize, dist: Option<Dist>) -> Result<Vec<u8>, String> {
    match dist {
        Some(d) => {
            let x = floats(rng, d, cols);
            let rb = act.row_bytes(cols).map_err(|e| e.to_string())?;
            let mut theirs = vec![0u8; rb];
            ggml::from_float(act, &x, &mut theirs).map_err(|e| e.to_string())?;
            let mut ours = vec![0u8; rb];
            reference::quantize_row(act, &x, &mut ours).map_err(|e| e.to_string())?;
            bytes_equal(&format!("quantize {act} ({})", d.name()), act.block_bytes(), &theirs, &ours)?;
            Ok(theirs)
        }
        None => Ok(random_blocks(rng, act, cols / act.block_elems(), false)),
    }
}

fn weight_case(f: Format, seed: u64, nblocks: usize, nt: usize, wdist: usize, adist: usize) -> Result<(), String> {
    let act = f.vec_dot_type().unwrap();
    let unit = f.block_elems().max(act.block_elems());
    let cols = nblocks * unit;
    let mut rng = Rng::new(seed);
    let pick = |i: usize| Dist::ALL.get(i).copied();
    let w = weights(f, &mut rng, 1, cols, pick(wdist));

    // dequantize
    let mut theirs = vec![0f32; cols];
    ggml::to_float(f, &w, &mut theirs).map_err(|e| e.to_string())?;
    let mut ours = vec![0f32; cols];
    reference::dequantize_row(f, &w, &mut ours).map_err(|e| e.to_string())?;
    bits_equal(format!("dequantize {f} cols={cols}"), cols, &theirs, &ours).map_err(|m| m.to_string())?;

    // activations for nt tokens, then dot
    let mut acts = Vec::new();
    for _ in 0..nt {
        acts.extend(activation(act, &mut rng, cols, pick(adist))?);
    }
    let ab = act.row_bytes(cols).unwrap();
    let expected: Vec<f32> =
        acts.chunks_exact(ab).map(|a| ggml::vec_dot(f, cols, &w, a).expect("ggml vec_dot")).collect();
    let mut got = vec![0f32; nt];
    reference::dot_tokens(f, cols, &w, &acts, &mut got).map_err(|e| e.to_string())?;
    bits_equal(format!("dot {f} cols={cols} nt={nt}"), 1, &expected, &got).map_err(|m| m.to_string())
}

macro_rules! live_weight_tests {
    ($($name:ident => $fmt:expr),* $(,)?) => {$(
        proptest! {
            #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]
            #[test]
            fn $name(
                seed in any::<u64>(),
                nblocks in 1usize..=12,
                nt in 1usize..=8,
                wdist in 0usize..=Dist::ALL.len(),
                adist in 0usize..=Dist::ALL.len(),
            ) {
                let r = weight_case($fmt, seed, nblocks, nt, wdist, adist);
                prop_assert!(r.is_ok(), "{}", r.unwrap_err());
            }
        }
    )*};
}

live_weight_tests! {
    live_q8_0 => Format::Q8_0,
    live_q5_1 => Format::Q5_1,
    live_q4_k => Format::Q4_K,
    live_q5_k => Format::Q5_K,
    live_q6_k => Format::Q6_K,
    live_iq2_xxs => Format::IQ2_XXS,
    live_iq2_xs => Format::IQ2_XS,
    live_iq2_s => Format::IQ2_S,
    live_iq3_xxs => Format::IQ3_XXS,
    live_iq3_s => Format::IQ3_S,
    live_iq4_nl => Format::IQ4_NL,
    live_iq4_xs => Format::IQ4_XS,
    live_nvfp4 => Format::NVFP4,
}

/// Activation quantizers on hand-picked special values: ties, signed zeros, subnormals,
/// huge values, infinities and NaN.
#[test]
fn live_activation_special_values() {
    let nans = [f32::NAN, f32::from_bits(0x7FC0_1234), f32::from_bits(0xFFA0_0001), f32::from_bits(0x7F80_0001)];
    let specials: Vec<f32> = qkern_parity::inputs::SPECIALS.iter().chain(&nans).copied().collect();
    let mut rng = Rng::new(7);
    for act in Format::ACTIVATIONS {
        if ggml::from_float_available(act) {
            for trial in 0..64 {
                let cols = act.block_elems() * 2;
                let mut x = floats(&mut rng, Dist::Gaussian, cols);
                for v in x.iter_mut() {
                    if rng.below(3) == 0 {
                        *v = specials[rng.below(specials.len() as u64) as usize]
                            * if trial % 2 == 0 { 1.0 } else { 3.0 };
                    }
                }
                // keep NaN/Inf out of half the trials so that finite edge cases are seen alone
                if trial % 4 != 0 {
                    x.iter_mut().filter(|v| !v.is_finite()).for_each(|v| *v = 1.0);
                }
                let rb = act.row_bytes(cols).unwrap();
                let mut theirs = vec![0u8; rb];
                ggml::from_float(act, &x, &mut theirs).unwrap();
                let mut ours = vec![0u8; rb];
                reference::quantize_row(act, &x, &mut ours).unwrap();
                if let Err(e) = bytes_equal(&format!("quantize {act} trial {trial}"), act.block_bytes(), &theirs, &ours)
                {
                    panic!("{e}\ninput: {x:?}");
                }
            }
        }
    }
}

/// Weights with random scale bits (NaN, Inf, subnormal fp16 scales; for nvfp4 every UE4M3
/// byte): dequantize and dot must equal ggml's bits. Where ggml's result is NaN, ours must be
/// NaN too; the NaN payload is not part of the contract (x86 propagates the payload of
/// whichever operand the compiler placed first, which neither C nor Rust pins down).
fn wild_case(f: Format, seed: u64, nblocks: usize) -> Result<usize, String> {
    let act = f.vec_dot_type().unwrap();
    let cols = nblocks * f.block_elems().max(act.block_elems());
    let mut rng = Rng::new(seed);
    let w = random_blocks(&mut rng, f, cols / f.block_elems(), true);
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    let mut theirs = vec![0f32; cols];
    ggml::to_float(f, &w, &mut theirs).unwrap();
    let mut ours = vec![0f32; cols];
    reference::dequantize_row(f, &w, &mut ours).unwrap();
    let mut nans = 0;
    for (i, (a, b)) in theirs.iter().zip(&ours).enumerate() {
        if !same(*a, *b) {
            return Err(format!(
                "dequantize {f} wild: element {i}: ggml {:#010x}, ours {:#010x}",
                a.to_bits(),
                b.to_bits()
            ));
        }
        nans += a.is_nan() as usize;
    }
    let a = activation(act, &mut rng, cols, Some(Dist::Gaussian))?;
    let e = ggml::vec_dot(f, cols, &w, &a).unwrap();
    let g = reference::vec_dot(f, cols, &w, &a).unwrap();
    if !same(e, g) {
        return Err(format!("dot {f} wild: ggml {:#010x} ({e:e}), ours {:#010x} ({g:e})", e.to_bits(), g.to_bits()));
    }
    Ok(nans)
}

#[test]
fn live_wild_scales_all_formats() {
    let mut total_nans = 0;
    for f in Format::WEIGHTS {
        for seed in 0..64u64 {
            match wild_case(f, seed * 7919 + f.id() as u64, 1 + (seed as usize % 5)) {
                Ok(n) => total_nans += n,
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert!(total_nans > 0, "the wild cases never produced a NaN: the generator is not wild");
}

macro_rules! live_quantize_tests {
    ($($name:ident => $fmt:expr),* $(,)?) => {$(
        proptest! {
            #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]
            /// Activation quantize alone: every distribution, 1..16 blocks, ours == ggml bytes.
            #[test]
            fn $name(seed in any::<u64>(), nblocks in 1usize..=16, dist in 0usize..Dist::ALL.len()) {
                let act = $fmt;
                let mut rng = Rng::new(seed);
                let r = activation(act, &mut rng, nblocks * act.block_elems(), Some(Dist::ALL[dist]));
                prop_assert!(r.is_ok(), "{}", r.unwrap_err());
            }
        }
    )*};
}

live_quantize_tests! {
    live_quantize_q8_0 => Format::Q8_0,
    live_quantize_q8_1 => Format::Q8_1,
    live_quantize_q8_k => Format::Q8_K,
}
