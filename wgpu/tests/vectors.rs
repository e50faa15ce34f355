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

#[test]
fn committed_vectors_bit_exact() {
    let spec = std::env::var("QKERN_WGPU_ADAPTER").map_or_else(|_| "wgpu".to_string(), |n| format!("wgpu:{n}"));
    let dev = match Device::parse(&spec, DeviceOptions::default()) {
        Ok(d) => d,
        Err(Error::NotBuilt(_)) => {
            eprintln!("SKIPPED: qkern built without `wgpu` (run with --features qkern/wgpu)");
            return;
        }
        Err(e) if !common::in_ci() => {
            eprintln!("SKIPPED: no usable wgpu adapter ({e})");
            return;
        }
        Err(e) => panic!("CI=true but {spec} is unavailable: {e}"),
    };
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
