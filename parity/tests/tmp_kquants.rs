//! Scratch (helper for q8_K/q4_K/q5_K/q6_K; to be deleted): extra live checks.
#![cfg(feature = "ggml")]
use qkern_formats::{Format, reference};
use qkern_parity::inputs::{Dist, Rng, floats, random_blocks};
use qkern_parity::ggml;

fn n() -> u64 { std::env::var("TMP_N").ok().and_then(|v| v.parse().ok()).unwrap_or(2000) }

fn q8k_check(x: &[f32]) {
    let rb = Format::Q8_K.row_bytes(x.len()).unwrap();
    let mut theirs = vec![0u8; rb];
    ggml::from_float(Format::Q8_K, x, &mut theirs).unwrap();
    let mut ours = vec![0u8; rb];
    reference::quantize_row(Format::Q8_K, x, &mut ours).unwrap();
    if theirs != ours {
        let i = theirs.iter().zip(&ours).position(|(a, b)| a != b).unwrap();
        panic!("q8_K byte {i}: ggml {} ours {}\ninput {:?}", theirs[i], ours[i], &x[..x.len().min(300)]);
    }
}

#[test]
fn tmp_q8k_stress() {
    let mut rng = Rng::new(99);
    let sp = [0.0f32, -0.0, 1e-40, -1e-45, 1e-45, f32::MIN_POSITIVE, 1e-38, 3e-39, f32::MAX, f32::MIN,
        f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::from_bits(0x7FC0_1234), f32::from_bits(0xFFA0_0001),
        f32::from_bits(0x7F80_0001), f32::from_bits(0xFFFF_FFFF), f32::from_bits(0x7FBF_FFFF), 0.5, -0.5, 127.0, -127.0, 1e30];
    for t in 0..n() {
        let mut x = match t % 6 {
            0 => { let d = Dist::ALL[(t / 6) as usize % 8]; floats(&mut rng, d, 512) }
            1 => (0..512).map(|_| rng.normal() * 1e-39).collect(),
            2 => (0..512).map(|_| sp[rng.below(sp.len() as u64) as usize]).collect(),
            3 => (0..512).map(|_| f32::from_bits(rng.next_u64() as u32)).collect(),
            4 => (0..512).map(|i| if i % 256 == 0 { if t % 12 == 4 { -127.0 } else { 127.0 } } else { (rng.below(255) as f32 - 127.0) + 0.5 }).collect(),
            _ => (0..512).map(|_| (rng.normal() * 10.0).round() * 0.25).collect(),
        };
        if t % 5 == 0 { for v in x.iter_mut() { if rng.below(4) == 0 { *v = sp[rng.below(sp.len() as u64) as usize]; } } }
        q8k_check(&x);
    }
}

fn wild_dot(f: Format, seed: u64, wild: bool) {
    let mut rng = Rng::new(seed);
    let nb = 1 + rng.below(6) as usize;
    let cols = nb * 256;
    let w = random_blocks(&mut rng, f, nb, wild);
    let mut theirs = vec![0f32; cols];
    ggml::to_float(f, &w, &mut theirs).unwrap();
    let mut ours = vec![0f32; cols];
    reference::dequantize_row(f, &w, &mut ours).unwrap();
    for (i, (a, b)) in theirs.iter().zip(&ours).enumerate() {
        assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "{f} dequant {i}: {:#x} {:#x}", a.to_bits(), b.to_bits());
    }
    // activations: raw random (wild or not, incl. extreme bsums) or ggml-quantized
    let a = if rng.below(2) == 0 {
        let ww = wild && rng.below(2) == 0;
        let mut a = random_blocks(&mut rng, Format::Q8_K, nb, ww);
        if rng.below(2) == 0 { // extreme bsums
            for b in a.chunks_exact_mut(292) { for k in 0..16 { let v: i16 = if rng.below(2) == 0 { i16::MAX } else { i16::MIN }; b[260 + 2*k..262 + 2*k].copy_from_slice(&v.to_le_bytes()); } }
        }
        a
    } else {
        let di = rng.below(8) as usize;
        let x = floats(&mut rng, Dist::ALL[di], cols);
        let mut a = vec![0u8; Format::Q8_K.row_bytes(cols).unwrap()];
        ggml::from_float(Format::Q8_K, &x, &mut a).unwrap();
        a
    };
    let e = ggml::vec_dot(f, cols, &w, &a).unwrap();
    let g = reference::vec_dot(f, cols, &w, &a).unwrap();
    assert!(e.to_bits() == g.to_bits() || (e.is_nan() && g.is_nan()), "{f} dot seed {seed} wild {wild}: ggml {:#x} ({e:e}) ours {:#x} ({g:e})", e.to_bits(), g.to_bits());
}

#[test]
fn tmp_kquant_dots() {
    for f in [Format::Q4_K, Format::Q5_K, Format::Q6_K] {
        for s in 0..n() { wild_dot(f, s, s % 2 == 0); }
    }
}
