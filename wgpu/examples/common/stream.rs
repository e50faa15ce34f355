//! `bench --stream`: what a plain WGSL kernel that only reads memory reaches on the adapter,
//! the ceiling the matmul kernels' one-token GB/s can be set against. On the H200 (session 23)
//! wgpu's one-token kernels read no faster than on the H100 while CUDA's rose with the HBM
//! (benches/results/2026-12-06-session26 NOTES.md); this tells whether any WGSL kernel on that
//! driver can go faster, and with which loads.
//!
//! Each variant reads one buffer of about `gib` GiB once per dispatch, `reps` dispatches in one
//! submission, one wait (as `bench_matmul` times the kernels); the median of 5 such batches
//! after a warm-up. Variants: the load width (`vec4<u32>` or `u32`), the loads in flight per
//! invocation (`U`: each invocation reads U elements, 256 apart, before it combines them), and
//! wgpu's runtime bounds checks (kept, or dropped where every index is guarded). Beside them, a
//! buffer-to-buffer copy of the same bytes, counted read plus written as the CUDA benchmark
//! counts its copy.

use std::time::Instant;

use qkern_wgpu::block_on;

/// The read kernel: element type `ty` (`vec4<u32>` or `u32`), `u` loads per invocation.
fn source(ty: &str, u: u32, n: u64, nx: u32) -> String {
    let combine = if ty == "u32" { "acc" } else { "acc.x ^ acc.y ^ acc.z ^ acc.w" };
    format!(
        "@group(0) @binding(0) var<storage, read> W: array<{ty}>;
@group(0) @binding(1) var<storage, read_write> O: array<u32>;
const N: u32 = {n}u;
const NX: u32 = {nx}u;
const U: u32 = {u}u;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {{
    let base = (wid.y * NX + wid.x) * 256u * U + li;
    var acc = {ty}(0u);
    for (var k = 0u; k < U; k++) {{
        let i = base + k * 256u;
        if (i < N) {{ acc ^= W[i]; }}
    }}
    let s = {combine};
    // Never true for the buffer's contents (zeros), but the compiler cannot know: the loads stay.
    if (s == 0x9E3779B9u) {{ O[li] = s; }}
}}
"
    )
}

/// Run the stream benchmark on the first adapter wgpu picks (honouring `WGPU_BACKEND` and
/// `WGPU_ADAPTER_NAME`), printing one line per variant.
pub fn run(gib: f64, reps: usize) {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = match block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    })) {
        Ok(a) => a,
        Err(e) => {
            println!("stream: no adapter: {e}");
            return;
        }
    };
    let limits = adapter.limits();
    let (device, queue) = match block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("qkern stream"),
        required_limits: limits.clone(),
        ..Default::default()
    })) {
        Ok(d) => d,
        Err(e) => {
            println!("stream: no device: {e}");
            return;
        }
    };
    let max = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size).min(1 << 31);
    let bytes = ((gib * (1u64 << 30) as f64) as u64).min(max) & !4095;
    println!(
        "stream: {} ({:?}), {:.2} GiB a dispatch, {reps} dispatches a batch",
        adapter.get_info().name,
        adapter.get_info().backend,
        bytes as f64 / (1u64 << 30) as f64
    );
    use wgpu::BufferUsages as B;
    let buf = |label, size, usage| {
        device.create_buffer(&wgpu::BufferDescriptor { label: Some(label), size, usage, mapped_at_creation: false })
    };
    // Zero-initialised by wgpu.
    let src = buf("stream src", bytes, B::STORAGE | B::COPY_SRC);
    let dst = buf("stream dst", bytes, B::COPY_DST);
    let out = buf("stream out", 1024, B::STORAGE);
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: None,
        entries: &[0, 1].map(|b| wgpu::BindGroupLayoutEntry {
            binding: b,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: b == 0 },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }),
    });
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &layout,
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: src.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: out.as_entire_binding() },
        ],
    });
    let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: None,
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    // Median seconds of one repetition of `encode` (5 batches of `reps` after 0.3 s warm-up).
    let time = |encode: &dyn Fn(&mut wgpu::CommandEncoder)| {
        let batch = || {
            let mut enc = device.create_command_encoder(&Default::default());
            for _ in 0..reps {
                encode(&mut enc);
            }
            let t = Instant::now();
            queue.submit([enc.finish()]);
            device.poll(wgpu::PollType::wait_indefinitely()).expect("poll");
            t.elapsed().as_secs_f64()
        };
        let t0 = Instant::now();
        while t0.elapsed().as_secs_f64() < 0.3 {
            batch();
        }
        let mut v: Vec<f64> = (0..5).map(|_| batch()).collect();
        v.sort_by(f64::total_cmp);
        v[2] / reps as f64
    };
    for (ty, width) in [("vec4<u32>", 16u64), ("u32", 4)] {
        for u in [1u32, 2, 4, 8] {
            for checked in [true, false] {
                let n = bytes / width;
                let wgs = n.div_ceil(256 * u as u64);
                let nx = wgs.min(32768) as u32;
                let ny = wgs.div_ceil(nx as u64) as u32;
                let desc = wgpu::ShaderModuleDescriptor {
                    label: Some("qkern stream"),
                    source: wgpu::ShaderSource::Wgsl(source(ty, u, n, nx).into()),
                };
                let module = if checked {
                    device.create_shader_module(desc)
                } else {
                    // SAFETY: the one loop runs a compile-time count, and every index into `W` is
                    // guarded by `i < N` (its length) and into `O` is below 256 (of 256 words):
                    // what `ShaderRuntimeChecks::unchecked` requires.
                    unsafe { device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
                };
                let pipe = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some("qkern stream"),
                    layout: Some(&pl),
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                });
                let s = time(&|enc| {
                    let mut pass = enc.begin_compute_pass(&Default::default());
                    pass.set_pipeline(&pipe);
                    pass.set_bind_group(0, &group, &[]);
                    pass.dispatch_workgroups(nx, ny, 1);
                });
                let name = format!("{ty} U{u} {}", if checked { "checked" } else { "unchecked" });
                println!("stream read {name:<24} {:>8.0} GB/s  {:>8.3} ms", bytes as f64 / s / 1e9, s * 1e3);
            }
        }
    }
    let s = time(&|enc| enc.copy_buffer_to_buffer(&src, 0, &dst, 0, bytes));
    println!("stream copy (read + written)      {:>8.0} GB/s  {:>8.3} ms", 2.0 * bytes as f64 / s / 1e9, s * 1e3);
}
