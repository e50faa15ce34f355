//! The committed ggml reference vectors (`parity/vectors/*.qkv`) on the wgpu backend, through
//! the `qkern` facade and `qkern_parity::run` (dequantize, activation quantize on the device,
//! dot on ggml's own activations), every format, every NT the files hold.
//!
//! Needs `qkern` built with `wgpu`: `cargo test -p qkern-wgpu --features qkern/wgpu --test
//! vectors` (scripts/test.sh does). Without the feature the test says so and passes, so that
//! `cargo test --workspace` stays green; without an adapter it skips, except in CI.

mod common;

use qkern::{Device, DeviceOptions, Error, Format};
use qkern_parity::run::{Report, run_file};
use qkern_parity::vectors::load_committed;

/// The wgpu device (`QKERN_WGPU_ADAPTER` picks the adapter), or `None` with a skip message
/// where qkern lacks the feature or (outside CI) there is no adapter.
fn open() -> Option<Device> {
    let spec = std::env::var("QKERN_WGPU_ADAPTER").map_or_else(|_| "wgpu".to_string(), |n| format!("wgpu:{n}"));
    match Device::parse(&spec, DeviceOptions::default()) {
        Ok(d) => Some(d),
        Err(Error::NotBuilt(_)) => {
            eprintln!("SKIPPED: qkern built without `wgpu` (run with --features qkern/wgpu)");
            None
        }
        Err(e) if !common::in_ci() => {
            eprintln!("SKIPPED: no usable wgpu adapter ({e})");
            None
        }
        Err(e) => panic!("CI=true but {spec} is unavailable: {e}"),
    }
}

#[test]
fn committed_vectors_bit_exact() {
    let Some(dev) = open() else { return };
    let mut report = Report::default();
    let mut missing = Vec::new();
    for f in Format::WEIGHTS {
        match load_committed(f) {
            Ok(file) => report.extend(run_file(&dev, &file).unwrap_or_else(|e| panic!("{f}: {e}"))),
            Err(e) => missing.push(format!("{f}: {e}")),
        }
    }
    eprintln!("{report}");
    assert!(missing.is_empty(), "missing vector files:\n{}", missing.join("\n"));
    assert!(report.all_equal(), "{report}");
}

/// A device output made before the backend's scratch grows (a larger host-output matmul) keeps
/// working after it: its bind group points at the parameter ring, which the grown scratch keeps.
#[test]
fn device_outputs_survive_scratch_growth() {
    let Some(dev) = open() else { return };
    let f = Format::Q8_0;
    let cols = 64;
    let mut rng = qkern_parity::inputs::Rng::new(7);
    let blocks = |rows: usize, rng: &mut qkern_parity::inputs::Rng| {
        qkern_parity::inputs::random_blocks(rng, f, rows * cols / f.block_elems(), false)
    };
    let (small, other, big) = (blocks(5, &mut rng), blocks(7, &mut rng), blocks(20_000, &mut rng));
    let ws = dev.upload(qkern::WeightsRef::new(f, 5, cols, &small).unwrap()).unwrap();
    let wo = dev.upload(qkern::WeightsRef::new(f, 7, cols, &other).unwrap()).unwrap();
    let wb = dev.upload(qkern::WeightsRef::new(f, 20_000, cols, &big).unwrap()).unwrap();
    let mut acts = dev.activations_for(&ws, 3).unwrap();
    let x: Vec<f32> = (0..3 * cols).map(|i| (i as f32 * 0.61).cos()).collect();
    dev.quantize(&x, &mut acts).unwrap();
    let mut res = dev.output(3 * 7).unwrap();
    dev.matmul_into(&ws, &acts, &mut res).unwrap();
    // 240 KiB of results: the scratch grows past its first 4 KiB
    let mut out_big = vec![0f32; 3 * 20_000];
    dev.matmul(&wb, &acts, &mut out_big).unwrap();
    // then another matrix (other parameters) into the output made before
    let mut want = vec![0f32; 3 * 7];
    dev.matmul(&wo, &acts, &mut want).unwrap();
    dev.matmul_into(&wo, &acts, &mut res).unwrap();
    let mut got = vec![0f32; 3 * 7];
    dev.read_output(&res, &mut got).unwrap();
    assert!(want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "{want:?}\n{got:?}");
}
