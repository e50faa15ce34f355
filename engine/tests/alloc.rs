//! `forward` allocates nothing: buffers are made once when the layer is built. Counted per
//! thread by a counting allocator, on a one-thread CPU device (whose matmul runs on the
//! calling thread; a pool's task handles are the pool's, not the layer's).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use qkern::{CpuPath, Device, DeviceOptions};
use qkern_engine::ffn::{self, FfnLayer, LayerOptions, StageTimes};
use qkern_engine::load::{self, LoadOptions};
use qkern_engine::synth::{self, SynthSpec};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

/// The layer itself allocates nothing in `forward`, on the scalar and the default CPU path
/// (one thread: every kernel runs on the calling thread, so every allocation would be the
/// layer's or the kernels'). On a 2-thread device the calling thread submits the matmul
/// tasks to the rayon pool (`qkern-cpu`'s `pool.scope`), and rayon's injector queue (a
/// crossbeam `Injector`) allocates one 1.5 KB block per 63 jobs pushed from outside the
/// pool: amortised, independent of the token count, and not the layer's. That case checks
/// the bound: at most one allocation per 32 matmul calls, and none from the token count.
#[test]
fn forward_allocates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    let spec = SynthSpec { n_expert: 8, top_k: 2, layers: 2, dense_layers: 1, ..SynthSpec::default() };
    synth::write(&path, &spec).unwrap();
    let m = load::load(&path, &|_| true, &LoadOptions::default()).unwrap();
    let best = Device::cpu().unwrap().spec();
    eprintln!("default CPU path: {best}");
    for (path, threads) in [(Some(CpuPath::Scalar), 1), (None, 1), (None, 2)] {
        let dev = match path {
            Some(p) => Device::cpu_with(p, Some(threads)).unwrap(),
            None => Device::open(best, DeviceOptions { threads: Some(threads) }).unwrap(),
        };
        for layer in [0, 1] {
            let mut l = FfnLayer::from_model(&dev, &m, layer, &LayerOptions::default(), 64).unwrap();
            let mut times = StageTimes::default();
            let mut total = 0;
            // Round 0 warms up: the CPU backend's per-thread scratch (prepared activation
            // scales) grows once to the largest shape; from then on nothing may allocate.
            for round in 0..8 {
                for nt in [64usize, 1, 17, 64] {
                    let x = ffn::seeded_inputs(nt as u64, nt * 256);
                    let mut out = vec![0f32; x.len()];
                    let before = allocs();
                    l.forward(&dev, &x, &mut out, &mut times).unwrap();
                    let n = allocs() - before;
                    if round > 0 {
                        total += n;
                    }
                    if threads == 1 && round > 0 {
                        assert_eq!(n, 0, "{}: layer {layer}, {nt} tokens: forward allocated", dev.name());
                    }
                }
            }
            eprintln!("{}: layer {layer}: {total} allocations in {} matmul calls", dev.name(), times.matmuls);
            assert!(total <= times.matmuls / 32, "{}: {total} allocations in {} matmuls", dev.name(), times.matmuls);
        }
    }
}
