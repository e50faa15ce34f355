//! `cargo bench -p qkern-bench --bench kernels`: divan microbenchmarks of single kernels, one
//! contender at a time, single-threaded: matmul for every weight format x NT in {1, 2, 4, 8,
//! 16}, dequant for every format and activation quantize for q8_0, q8_1 and q8_K, reported in
//! bytes/s of weights (f32 input for quantize). ggml's and candle's versions are listed beside
//! ours with `--features ggml` / `--features candle`.
//!
//! The inputs come from the library's fixtures (`WeightSet`, the `contenders` runners), the same
//! code `qkern bench` times. The shape is one MoE expert's gate/up (640 x 2560, in cache);
//! `QKERN_BENCH_MIB=N` switches to N MiB of weights at 4096 columns (out of cache).
//! For the interleaved side-by-side table with bandwidth, use `qkern bench`.

use divan::Bencher;
use divan::counter::BytesCount;
use qkern::{Device, Format};
use qkern_bench::WeightSet;
use qkern_bench::contenders::{Pools, candle, ggml, ours};

fn main() {
    candle::init();
    divan::main();
}

const FORMATS: [Format; 13] = Format::WEIGHTS;
const ACTS: [Format; 3] = Format::ACTIVATIONS;

fn set(format: Format, nt: usize) -> WeightSet {
    let (rows, cols) = match std::env::var("QKERN_BENCH_MIB").ok().and_then(|v| v.parse::<usize>().ok()) {
        Some(mib) => ((mib << 20) / format.row_bytes(4096).expect("4096 columns fit every format"), 4096),
        None => (640, 2560),
    };
    WeightSet::random(format, rows, cols, nt, 7).expect("weight set")
}

fn device() -> Device {
    Device::cpu_with(qkern_cpu::default_path().expect("CPU path"), Some(1)).expect("CPU device")
}

#[divan::bench(args = FORMATS, consts = [1, 2, 4, 8, 16], max_time = 0.5)]
fn matmul_ours<const NT: usize>(b: Bencher, format: Format) {
    let (dev, s) = (device(), set(format, NT));
    let r = ours::Matmul::new(&dev, &s, NT, false).expect("ours");
    b.counter(BytesCount::new(s.bytes())).bench_local(|| r.run().expect("matmul"));
}

#[divan::bench(args = FORMATS, consts = [1, 2, 4, 8, 16], max_time = 0.5, ignore = !ggml::BUILT)]
fn matmul_ggml<const NT: usize>(b: Bencher, format: Format) {
    let s = set(format, NT);
    let Ok(mut r) = ggml::Matmul::new(&s, NT, Pools::default().get(1).expect("pool")) else { return };
    b.counter(BytesCount::new(s.bytes())).bench_local(|| r.run().expect("ggml"));
}

#[divan::bench(args = candle::FORMATS, consts = [1, 2, 4, 8, 16], max_time = 0.5, ignore = !candle::BUILT)]
fn matmul_candle<const NT: usize>(b: Bencher, format: Format) {
    let s = set(format, NT);
    let Ok(mut r) = candle::Matmul::new(&s, NT, None) else { return };
    b.counter(BytesCount::new(s.bytes())).bench_local(|| r.run().expect("candle"));
}

#[divan::bench(args = FORMATS, max_time = 0.5)]
fn dequant_ours(b: Bencher, format: Format) {
    let (dev, s) = (device(), set(format, 1));
    let mut r = ours::Dequant::new(&dev, &s).expect("ours");
    b.counter(BytesCount::new(s.bytes())).bench_local(|| r.run().expect("dequant"));
}

#[divan::bench(args = FORMATS, max_time = 0.5, ignore = !ggml::BUILT)]
fn dequant_ggml(b: Bencher, format: Format) {
    let s = set(format, 1);
    let Ok(mut r) = ggml::Dequant::new(&s) else { return };
    b.counter(BytesCount::new(s.bytes())).bench_local(|| r.run().expect("ggml"));
}

#[divan::bench(args = candle::FORMATS, max_time = 0.5, ignore = !candle::BUILT)]
fn dequant_candle(b: Bencher, format: Format) {
    let s = set(format, 1);
    let Ok(mut r) = candle::Dequant::new(&s) else { return };
    b.counter(BytesCount::new(s.bytes())).bench_local(|| r.run().expect("candle"));
}

/// 16 tokens of 4096 columns.
fn floats() -> Vec<f32> {
    let mut rng = qkern_parity::inputs::Rng::new(9);
    qkern_parity::inputs::floats(&mut rng, qkern_parity::inputs::Dist::Gaussian, 16 * 4096)
}

#[divan::bench(args = ACTS, max_time = 0.5)]
fn quantize_ours(b: Bencher, act: Format) {
    let (dev, x) = (device(), floats());
    let mut r = ours::Quantize::new(&dev, act, 4096, &x).expect("ours");
    b.counter(BytesCount::new(x.len() * 4)).bench_local(|| r.run().expect("quantize"));
}

#[divan::bench(args = ACTS, max_time = 0.5, ignore = !ggml::BUILT)]
fn quantize_ggml(b: Bencher, act: Format) {
    let x = floats();
    let Ok(mut r) = ggml::Quantize::new(act, 4096, &x) else { return };
    b.counter(BytesCount::new(x.len() * 4)).bench_local(|| r.run().expect("ggml"));
}

#[divan::bench(args = ACTS, max_time = 0.5, ignore = !candle::BUILT)]
fn quantize_candle(b: Bencher, act: Format) {
    let x = floats();
    let Ok(mut r) = candle::Quantize::new(act, 4096, &x) else { return };
    b.counter(BytesCount::new(x.len() * 4)).bench_local(|| r.run().expect("candle"));
}
