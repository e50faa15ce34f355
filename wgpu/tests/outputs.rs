//! Matmul results left on the device (`alloc_out`, `matmul_to`, `read_out`): the bits of the
//! host-output `matmul`, also with weights split into parts and direct output, and a typed
//! error for each bad input. Grouped calls (`matmul_grouped`): the bits of one `matmul` a job.

mod common;

use qkern_formats::{Format, ShapeError};
use qkern_parity::bits_equal;
use qkern_parity::inputs::{Rng, random_blocks};
use qkern_wgpu::{WgpuBackend, WgpuError};

fn device_output_matches_host_output(b: &WgpuBackend) {
    let mut rng = Rng::new(21);
    for (f, rows, cols) in [(Format::Q8_0, 37, 96), (Format::Q4_K, 19, 512), (Format::IQ2_XXS, 9, 256)] {
        let w =
            b.upload_weights(f, rows, cols, &random_blocks(&mut rng, f, rows * cols / f.block_elems(), false)).unwrap();
        let act = f.vec_dot_type().unwrap();
        for nt in [1usize, 3, 8, 11] {
            let mut a = b.alloc_acts(act, cols, nt).unwrap();
            let x: Vec<f32> = (0..nt * cols).map(|i| (i as f32 * 0.731).sin()).collect();
            b.quantize(&x, &mut a).unwrap();
            let mut want = vec![0f32; nt * rows];
            b.matmul(&w, &a, nt, &mut want).unwrap();
            // a longer buffer: the result is its prefix
            let mut out = b.alloc_out(nt * rows + 3).unwrap();
            assert_eq!(out.len(), nt * rows + 3);
            b.matmul_to(&w, &a, nt, &mut out).unwrap();
            b.synchronize().unwrap();
            let mut got = vec![0f32; nt * rows];
            b.read_out(&out, &mut got).unwrap();
            if let Err(m) = bits_equal(format!("device output {f} NT {nt}"), rows, &want, &got) {
                panic!("{m}");
            }
        }
    }
}

#[test]
fn device_output_bits() {
    if let Some(b) = common::backend() {
        device_output_matches_host_output(b);
    }
    // weights in parts of 1 KiB, direct output where the adapter has it
    if let Some(b) = common::backend_fallback_split() {
        device_output_matches_host_output(b);
    }
}

#[test]
fn device_output_rejects_bad_input() {
    let Some(b) = common::backend() else { return };
    let Some(other) = common::backend_fallback_split() else { return };
    let (rows, cols) = (4, 64);
    let mut rng = Rng::new(5);
    let w =
        b.upload_weights(Format::Q8_0, rows, cols, &random_blocks(&mut rng, Format::Q8_0, rows * 2, false)).unwrap();
    let mut a = b.alloc_acts(Format::Q8_0, cols, 2).unwrap();
    b.quantize(&vec![0.5f32; 2 * cols], &mut a).unwrap();
    let length = |e: WgpuError| matches!(e, WgpuError::Shape(ShapeError::Length { .. }));
    // too short, zero tokens, more tokens than the activations hold
    let mut short = b.alloc_out(2 * rows - 1).unwrap();
    assert!(length(b.matmul_to(&w, &a, 2, &mut short).unwrap_err()));
    let mut out = b.alloc_out(2 * rows).unwrap();
    assert!(length(b.matmul_to(&w, &a, 0, &mut out).unwrap_err()));
    assert!(length(b.matmul_to(&w, &a, 3, &mut out).unwrap_err()));
    // activations of the wrong format or width
    let mut k = b.alloc_acts(Format::Q8_K, 256, 1).unwrap();
    b.quantize(&vec![1.0f32; 256], &mut k).unwrap();
    assert!(matches!(b.matmul_to(&w, &k, 1, &mut out).unwrap_err(), WgpuError::Shape(ShapeError::Pairing { .. })));
    let mut wide = b.alloc_acts(Format::Q8_0, 128, 1).unwrap();
    b.quantize(&vec![1.0f32; 128], &mut wide).unwrap();
    assert!(length(b.matmul_to(&w, &wide, 1, &mut out).unwrap_err()));
    // reading past the end
    b.matmul_to(&w, &a, 2, &mut out).unwrap();
    assert!(length(b.read_out(&out, &mut vec![0f32; 2 * rows + 1]).unwrap_err()));
    b.read_out(&out, &mut []).unwrap();
    // another device's output, weights or activations
    let mut theirs = other.alloc_out(2 * rows).unwrap();
    assert!(matches!(b.matmul_to(&w, &a, 2, &mut theirs).unwrap_err(), WgpuError::Unsupported(_)));
    assert!(matches!(b.read_out(&theirs, &mut [0f32; 1]).unwrap_err(), WgpuError::Unsupported(_)));
    assert!(matches!(other.matmul_to(&w, &a, 2, &mut theirs).unwrap_err(), WgpuError::Unsupported(_)));
    // an output beyond the adapter's storage binding limit
    assert!(matches!(b.alloc_out(usize::MAX / 8).unwrap_err(), WgpuError::Unsupported(_) | WgpuError::Shape(_)));
}

/// `matmul_grouped` of `jobs` (format, rows, cols, tokens) against one `matmul` a job.
fn grouped_matches_matmul(b: &WgpuBackend, seed: u64, jobs: &[(Format, usize, usize, usize)]) {
    let mut rng = Rng::new(seed);
    let mut ws = Vec::new();
    let mut acts = Vec::new();
    let mut want = Vec::new();
    for (k, &(f, rows, cols, nt)) in jobs.iter().enumerate() {
        let w =
            b.upload_weights(f, rows, cols, &random_blocks(&mut rng, f, rows * cols / f.block_elems(), false)).unwrap();
        let mut a = b.alloc_acts(f.vec_dot_type().unwrap(), cols, nt).unwrap();
        let x: Vec<f32> = (0..nt * cols).map(|i| (i as f32 * 0.37 + k as f32).sin()).collect();
        b.quantize(&x, &mut a).unwrap();
        let mut o = vec![0f32; nt * rows];
        b.matmul(&w, &a, nt, &mut o).unwrap();
        want.extend(o);
        ws.push(w);
        acts.push(a);
    }
    let v: Vec<_> = ws.iter().zip(&acts).zip(jobs).map(|((w, a), j)| (w, a, j.3)).collect();
    let mut got = vec![f32::NAN; want.len()];
    b.matmul_grouped(&v, &mut got).unwrap();
    if let Err(m) = bits_equal(format!("grouped, {} jobs", jobs.len()), 1, &want, &got) {
        panic!("{m}");
    }
}

#[test]
fn grouped_bits() {
    // Formats, widths and token counts mixed in one call; then 40 jobs of 20 tokens (3
    // dispatches each, 120 in all) and 40 of 64 tokens (8 each: 320, past the 256-slot ring,
    // so two submissions); 70 jobs of one token (more than a run writes apart with direct
    // output: one shared output); then a single job of 2100 tokens (263 dispatches: alone past
    // the ring).
    let mixed = [
        (Format::Q8_0, 37, 96, 1),
        (Format::Q4_K, 19, 512, 3),
        (Format::IQ2_XXS, 9, 256, 8),
        (Format::Q5_1, 5, 64, 11),
        (Format::Q8_0, 64, 96, 2),
    ];
    let backends: Vec<_> = [common::backend(), common::backend_fallback_split(), common::backend_chunked_direct()]
        .into_iter()
        .flatten()
        .collect();
    // Both grouped paths: one output buffer (copy-out backends), a buffer a job (direct output).
    if !backends.is_empty() {
        assert!(backends.iter().any(|b| b.name().contains("direct out")), "no backend with direct output");
    }
    for b in backends {
        eprintln!("grouped bits on {}", b.name());
        grouped_matches_matmul(b, 1, &mixed);
        grouped_matches_matmul(b, 2, &[(Format::Q8_0, 16, 64, 20); 40]);
        grouped_matches_matmul(b, 3, &[(Format::IQ4_NL, 8, 64, 64); 40]);
        grouped_matches_matmul(b, 4, &[(Format::Q8_0, 3, 32, 2); 1]);
        grouped_matches_matmul(b, 6, &[(Format::Q5_1, 5, 64, 1); 70]);
    }
    if let Some(b) = common::backend() {
        grouped_matches_matmul(
            b,
            5,
            &[(Format::Q8_0, 4, 32, 1), (Format::Q8_0, 2, 32, 2100), (Format::Q8_0, 3, 32, 5)],
        );
    }
}

#[test]
fn grouped_rejects_bad_input() {
    let Some(b) = common::backend() else { return };
    let mut rng = Rng::new(9);
    let w = b.upload_weights(Format::Q8_0, 4, 64, &random_blocks(&mut rng, Format::Q8_0, 8, false)).unwrap();
    let mut a = b.alloc_acts(Format::Q8_0, 64, 2).unwrap();
    b.quantize(&vec![0.5f32; 2 * 64], &mut a).unwrap();
    let length = |e: WgpuError| matches!(e, WgpuError::Shape(ShapeError::Length { .. }));
    // an output of the wrong length, more tokens than the activations hold, zero tokens
    assert!(length(b.matmul_grouped(&[(&w, &a, 2), (&w, &a, 1)], &mut [0f32; 11]).unwrap_err()));
    assert!(length(b.matmul_grouped(&[(&w, &a, 3)], &mut [0f32; 12]).unwrap_err()));
    assert!(length(b.matmul_grouped(&[(&w, &a, 0)], &mut []).unwrap_err()));
    // no jobs: nothing to do
    b.matmul_grouped(&[], &mut []).unwrap();
    // another device's weights
    if let Some(other) = common::backend_fallback_split() {
        let mut theirs = other.alloc_acts(Format::Q8_0, 64, 2).unwrap();
        other.quantize(&vec![0.5f32; 2 * 64], &mut theirs).unwrap();
        assert!(b.matmul_grouped(&[(&w, &theirs, 2)], &mut [0f32; 8]).is_err());
    }
}
