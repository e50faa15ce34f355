//! `forward` allocates nothing: buffers are made once when the layer is built. Counted per
//! thread by a counting allocator, on a one-thread CPU device (whose matmul runs on the
//! calling thread; a pool's task handles are the pool's, not the layer's).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use qkern::{CpuPath, Device};
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

#[test]
fn forward_allocates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    let spec = SynthSpec { n_expert: 8, top_k: 2, layers: 2, dense_layers: 1, ..SynthSpec::default() };
    synth::write(&path, &spec).unwrap();
    let m = load::load(&path, &|_| true, &LoadOptions::default()).unwrap();
    let dev = Device::cpu_with(CpuPath::Scalar, Some(1)).unwrap();
    for layer in [0, 1] {
        let mut l = FfnLayer::from_model(&dev, &m, layer, &LayerOptions::default(), 64).unwrap();
        let mut times = StageTimes::default();
        for nt in [64usize, 1, 17, 64] {
            let x = ffn::seeded_inputs(nt as u64, nt * 256);
            let mut out = vec![0f32; x.len()];
            let before = allocs();
            l.forward(&dev, &x, &mut out, &mut times).unwrap();
            assert_eq!(allocs() - before, 0, "layer {layer}, {nt} tokens: forward allocated");
        }
    }
}
