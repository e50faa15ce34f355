//! CUDA matmul throughput and MoE-expert latency, with the device-to-device copy bandwidth
//! measured in the same run (counted as bytes read plus bytes written, as the issue asks).
//!
//! `cargo run --release -p qkern-cuda --example cuda_bench [-- --gib 1 --iters 20]`
//!
//! - per format: K = 4096, rows so that the weights are `--gib` GiB in ggml's format;
//!   NT = 1, 2, 4, 8 in one launch (CUDA events, back to back); GB/s = weight bytes / time.
//! - experts: 640 x 2560 (gate/up, q4_K) and 2560 x 640 (down: q5_1, q8_0, iq4_nl) at NT = 4:
//!   launch-to-result on the host clock (matmul into device memory, then stream sync; and
//!   matmul into host memory), and a grouped launch of 8 distinct experts, per expert.
//!
//! - beside them, a dense bf16 GEMV/GEMM of the same logical shapes through cuBLAS
//!   (`cublasGemmEx`: bf16 weights and activations, f32 compute, bf16 out), K = 4096 with the
//!   same bytes of bf16 weights at NT = 1 and 8, and the expert shapes at NT = 4 (CUDA
//!   events, back to back); skipped with a note where libcublas cannot be loaded (`--no-cublas`).
//!
//! Writes `bench_cuda.md` to `$QKERN_RESULTS_DIR` when set. `--formats q4_K,nvfp4` limits the
//! formats, `--no-forced` skips the forced lane splits, `--no-experts` the experts,
//! `--kernels-only` both the launch-to-result table and the experts (tuning sweeps),
//! `--experts-only` everything but the experts (whose formats `--formats` also limits: a
//! profiler's run, `scripts/gpu-run.sh ncu`);
//! `--mma-sweep` adds, for the formats with tensor-core kernels, their GB/s and the lane
//! kernels' at every NT 1..8, and for the 32-element formats the two-thread and the
//! one-thread-per-row kernels' at every NT 1..8.

use std::fmt::Write as _;
use std::time::Instant;

use qkern_cuda::{CudaBackend, HostOut, SyncMode, WaitMode};
use qkern_formats::Format;

fn fill(seed: u64, out: &mut [u8]) {
    let mut s = seed | 1;
    for c in out.chunks_mut(8) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let v = s.to_le_bytes();
        c.copy_from_slice(&v[..c.len()]);
    }
}

/// Random blocks with moderate fp16 scales (the speed does not depend on the values).
fn weights(f: Format, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let mut w = vec![0u8; f.matrix_bytes(rows, cols).unwrap()];
    fill(seed, &mut w);
    let offs = f.f16_scale_offsets();
    let s = half::f16::from_f32(0.01).to_le_bytes();
    for b in w.chunks_exact_mut(f.block_bytes()) {
        for &o in offs {
            b[o..o + 2].copy_from_slice(&s);
        }
        if f == Format::NVFP4 {
            b[..4].copy_from_slice(&[0x38; 4]);
        }
    }
    w
}

fn acts_x(cols: usize, nt: usize, seed: u64) -> Vec<f32> {
    let mut r = qkern_parity::inputs::Rng::new(seed);
    (0..cols * nt).map(|_| r.normal()).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// ggml 0.26.0's own CUDA mul_mat on an H200 (GB/s at N = 1 and N = 8), from issue 5.
fn ggml_ref(f: Format) -> Option<(f64, f64)> {
    Some(match f {
        Format::Q8_0 => (3025.0, 1567.0),
        Format::Q4_K => (1850.0, 742.0),
        Format::Q5_1 => (2620.0, 1282.0),
        Format::IQ4_XS => (1925.0, 904.0),
        Format::NVFP4 => (1920.0, 886.0),
        Format::IQ2_XS => (844.0, 379.0),
        Format::IQ3_S => (1103.0, 568.0),
        _ => return None,
    })
}

/// The reference point: a dense bf16 GEMV (NT = 1) / GEMM (NT > 1) of the same logical
/// shape through cuBLAS on the same card, in this run. `cublasGemmEx` with bf16 A, B and C and
/// f32 compute (what `torch.matmul` of bf16 tensors calls): C (rows x nt, column-major, i.e.
/// token-major as qkern's output) = W^T (W: K x rows column-major = rows x K row-major, the
/// weights' layout) x X (K x nt). GB/s = bf16 weight bytes / time (CUDA events around `iters`
/// back-to-back calls, after 3 warm-up calls). Its own context handle on the device's primary
/// context and its own stream.
fn cublas_section(md: &mut String, gib: f64, iters: usize, copy_gbs: f64) -> Result<(), Box<dyn std::error::Error>> {
    use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
    use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
    use cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
    use half::bf16;

    writeln!(md, "## cuBLAS bf16 of the same logical shapes (dense reference)\n")?;
    // SAFETY: only tries to load the library (dlopen of libcublas' candidate names).
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        writeln!(md, "not measured: libcublas could not be loaded (add its directory to LD_LIBRARY_PATH)\n")?;
        return Ok(());
    }
    let ctx = cudarc::driver::CudaContext::new(0)?;
    let stream = ctx.new_stream()?;
    let blas = CudaBlas::new(stream.clone())?;
    writeln!(md, "| shape | NT | us per call | GB/s (bf16 weights) | % copy |\n|---|---|---|---|---|")?;
    let k_big = 4096usize;
    let rows_big = (gib * (1u64 << 30) as f64 / (2 * k_big) as f64) as usize;
    for (rows, k, nts) in [(rows_big, k_big, &[1usize, 8][..]), (640, 2560, &[4][..]), (2560, 640, &[4][..])] {
        let host: Vec<bf16> = (0..rows * k).map(|i| bf16::from_f32(((i * 7919 % 255) as f32 - 127.0) / 64.0)).collect();
        let w = stream.clone_htod(&host)?;
        drop(host);
        let xh: Vec<bf16> = (0..k * 8).map(|i| bf16::from_f32(((i * 104729 % 199) as f32 - 99.0) / 50.0)).collect();
        let x = stream.clone_htod(&xh)?;
        let mut y = stream.alloc_zeros::<bf16>(rows * 8)?;
        for &nt in nts {
            let cfg = GemmConfig {
                transa: CUBLAS_OP_T,
                transb: CUBLAS_OP_N,
                m: rows as i32,
                n: nt as i32,
                k: k as i32,
                alpha: bf16::ONE,
                lda: k as i32,
                ldb: k as i32,
                beta: bf16::ZERO,
                ldc: rows as i32,
            };
            let mut run = |n: usize| -> Result<(), Box<dyn std::error::Error>> {
                for _ in 0..n {
                    // SAFETY: `w` holds k x rows, `x` k x 8 >= k x nt and `y` rows x 8 >= rows x
                    // nt elements: the extents `cfg` describes with these leading dimensions.
                    unsafe { blas.gemm(cfg, &w, &x, &mut y) }?;
                }
                Ok(())
            };
            run(3)?;
            let n = if rows == rows_big { iters.max(3) } else { 200 };
            let (e0, e1) = (ctx.new_event(Some(CU_EVENT_DEFAULT))?, ctx.new_event(Some(CU_EVENT_DEFAULT))?);
            e0.record(&stream)?;
            run(n)?;
            e1.record(&stream)?;
            let ms = e0.elapsed_ms(&e1)? as f64 / n as f64;
            let gbs = (2 * rows * k) as f64 / (ms * 1e-3) / 1e9;
            writeln!(
                md,
                "| {rows} x {k} bf16 ({:.2} GiB) | {nt} | {:.1} | {gbs:.0} | {:.0}% |",
                (2 * rows * k) as f64 / (1u64 << 30) as f64,
                ms * 1e3,
                100.0 * gbs / copy_gbs
            )?;
        }
    }
    writeln!(md)?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |k: &str, d: f64| {
        args.iter().position(|a| a == k).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(d)
    };
    let gib = arg("--gib", 1.0);
    let iters = arg("--iters", 20.0) as usize;
    let only: Option<Vec<Format>> = args
        .iter()
        .position(|a| a == "--formats")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect());

    let kernels_only = args.iter().any(|a| a == "--kernels-only");
    let experts_only = args.iter().any(|a| a == "--experts-only");
    let skip = |f: Format| only.as_ref().is_some_and(|o| !o.contains(&f));
    let b = CudaBackend::new(0)?;
    let t = Instant::now();
    b.warm_up()?;
    // The report, printed as it grows (`show`: what is new since the last print), so that a
    // run cut short still shows its tables with their headers.
    let mut md = String::new();
    let mut shown = 0usize;
    writeln!(md, "# qkern CUDA bench\n\ndevice: {} (kernels compiled + loaded in {:.1?})\n", b.name(), t.elapsed())?;

    // copy bandwidth: 2 x `gib` GiB buffers, device to device
    let n = (gib * (1u64 << 30) as f64 / 4.0) as usize;
    let copy_gbs = b.copy_gbps(4 * n, iters)?;
    let ms = 2.0 * 4.0 * n as f64 / (copy_gbs * 1e9) * 1e3;
    writeln!(
        md,
        "device-to-device copy of {:.2} GiB: {ms:.3} ms, **{copy_gbs:.0} GB/s** (read + written)\n",
        4.0 * n as f64 / (1u64 << 30) as f64
    )?;
    if !experts_only && !args.iter().any(|a| a == "--no-cublas") {
        // Not fatal: the qkern tables below are this run's point. (cudarc panics on a symbol
        // missing from the loaded library, hence the unwind guard.)
        let mut sec = String::new();
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cublas_section(&mut sec, gib, iters, copy_gbs)));
        md.push_str(&sec);
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => writeln!(md, "\ncuBLAS reference not measured: {e}\n")?,
            Err(_) => writeln!(md, "\ncuBLAS reference not measured: cudarc panicked (see stderr)\n")?,
        }
    }
    show(&md, &mut shown);

    // matmul throughput
    let cols = 4096;
    writeln!(md, "## matmul, K = {cols}, {gib} GiB of weights (ggml bytes), one launch per call\n")?;
    writeln!(
        md,
        "| format | rows | NT=1 GB/s | % copy | NT=2 | NT=4 | NT=8 GB/s | NT8/NT1 time | ggml N=1 / N=8 |\n|---|---|---|---|---|---|---|---|---|"
    )?;
    let mut stats = Vec::new();
    let mut l2r = Vec::new();
    let default_out = b.host_out();
    for f in Format::WEIGHTS {
        if experts_only || skip(f) {
            continue;
        }
        let act = f.vec_dot_type().unwrap();
        let rb = f.row_bytes(cols)?;
        let rows = ((gib * (1u64 << 30) as f64) / rb as f64) as usize;
        let w = weights(f, rows, cols, f.id() as u64 + 7);
        let wt = b.upload_weights(f, rows, cols, &w)?;
        drop(w);
        let bytes = wt.ggml_bytes() as f64;
        let mut acts = b.alloc_acts(act, cols, 8)?;
        b.quantize(&acts_x(cols, 8, 3), &mut acts)?;
        let mut out = b.alloc_f32(rows * 8)?;
        let mut gbs = Vec::new();
        let mut times = Vec::new();
        for nt in [1usize, 2, 4, 8] {
            let ms = b.time_ms(iters, || b.matmul_device(&wt, &acts, nt, &mut out))?;
            times.push(ms);
            gbs.push(bytes / (ms * 1e-3) / 1e9);
        }
        // The 256-element formats: both lane splits forced, whatever the size heuristic picks.
        let mut forced = Vec::new();
        if qkern_cuda::args::has_split(f) && !args.iter().any(|a| a == "--no-forced") {
            for (name, th, mma) in
                [("S=1", 0u64, Some(0)), ("S=4", u64::MAX, Some(0)), ("S=1, tensor cores", 0, Some(1))]
            {
                if mma == Some(1) && !qkern_cuda::args::has_mma(f) {
                    continue;
                }
                b.set_split_threshold(Some(th));
                b.set_mma_tokens(mma)?;
                let mut g = Vec::new();
                for nt in [1usize, 2, 4, 8] {
                    let ms = b.time_ms(iters, || b.matmul_device(&wt, &acts, nt, &mut out))?;
                    g.push((bytes / (ms * 1e-3) / 1e9, ms));
                }
                forced.push(format!(
                    "| {f} ({name}) | {rows} | {:.0} | {:.0}% | {:.0} | {:.0} | {:.0} | {:.2}x | |",
                    g[0].0,
                    100.0 * g[0].0 / copy_gbs,
                    g[1].0,
                    g[2].0,
                    g[3].0,
                    g[3].1 / g[0].1
                ));
            }
            b.set_split_threshold(None);
            b.set_mma_tokens(None)?;
        }
        // GB/s at every NT 1..8 with the backend's current kernel choices, as table cells.
        let nt_cells = |out: &mut qkern_cuda::CudaF32| -> Result<String, Box<dyn std::error::Error>> {
            let mut c = String::new();
            for nt in 1..=8usize {
                let ms = b.time_ms(iters, || b.matmul_device(&wt, &acts, nt, out))?;
                write!(c, " {:.0} |", bytes / (ms * 1e-3) / 1e9)?;
            }
            Ok(c)
        };
        // `--mma-sweep`: every NT 1..8 with the lane kernels (S = 1) and with the tensor cores,
        // to place a format's default token counts (args::mma_default_mask).
        if qkern_cuda::args::has_mma(f) && args.iter().any(|a| a == "--mma-sweep") {
            b.set_split_threshold(Some(0));
            let mut cells = [String::new(), String::new()];
            for (k, mma) in [Some(0u32), Some(1)].into_iter().enumerate() {
                b.set_mma_tokens(mma)?;
                cells[k] = nt_cells(&mut out)?;
            }
            b.set_split_threshold(None);
            b.set_mma_tokens(None)?;
            let d = mask_nts(qkern_cuda::args::mma_default_mask(f));
            forced.push(format!("| {f} NT 1..8, lane kernels (S=1) |{}", cells[0]));
            forced.push(format!("| {f} NT 1..8, tensor cores (default at NT {d}) |{}", cells[1]));
        }
        // `--mma-sweep`, the 32-element formats: every NT 1..8 with two threads per row and with
        // one (args::row_default_mask), both without the tensor cores.
        if qkern_cuda::args::has_row(f) && args.iter().any(|a| a == "--mma-sweep") {
            b.set_mma_tokens(Some(0))?;
            // each NT on its own kernels (not iq4_nl's 8 tokens as two chunks of 4)
            b.set_split8(Some(false));
            let pair = qkern_cuda::args::has_pair(f);
            let mut cells = [String::new(), String::new(), String::new(), String::new()];
            for (k, (row, cact, pairs)) in [(0u32, 0u32, 0u32), (1, 0, 0), (0, 1, 0), (0, 1, 1)].into_iter().enumerate()
            {
                if pairs == 1 && !pair {
                    continue;
                }
                b.set_row_tokens(Some(row))?;
                b.set_cact_tokens(Some(cact))?;
                b.set_pair_tokens(Some(pairs))?;
                cells[k] = nt_cells(&mut out)?;
            }
            b.set_row_tokens(None)?;
            b.set_cact_tokens(None)?;
            b.set_pair_tokens(None)?;
            b.set_mma_tokens(None)?;
            b.set_split8(None);
            let d = mask_nts(qkern_cuda::args::row_default_mask(f));
            forced.push(format!("| {f} NT 1..8, two threads per row |{}", cells[0]));
            forced.push(format!("| {f} NT 1..8, one thread per row (default at NT {d}) |{}", cells[1]));
            let staged =
                if qkern_cuda::kernels::cact_smem(b.arch()) { "in shared memory" } else { "in the constant bank" };
            let d = mask_nts(qkern_cuda::args::cact_default_mask(f, qkern_cuda::kernels::cact_smem(b.arch())));
            forced.push(format!(
                "| {f} NT 1..8, one thread per row, activations {staged} (default at NT {d}) |{}",
                cells[2]
            ));
            if pair {
                let d = mask_nts(qkern_cuda::args::pair_default_mask(f));
                let split = if f == Format::IQ4_NL { "by block parity" } else { "by lane" }; // (q5_1)
                forced.push(format!(
                    "| {f} NT 1..8, two threads per row ({split}), activations {staged} (default at NT {d}) |{}",
                    cells[3]
                ));
            }
        }
        // Launch-to-result, one call at a time (host clock): into device memory + stream
        // sync, and into host memory (`matmul`, what `qkern::Device::matmul` calls) by each
        // way back. (`--kernels-only`: skipped, with the experts.)
        if !kernels_only {
            let mut cells = Vec::new();
            let default_wait = b.wait_mode();
            for nt in [1usize, 8] {
                for wm in [WaitMode::Sync, WaitMode::Flag] {
                    b.set_wait_mode(wm);
                    let mut dev_t = Vec::new();
                    for _ in 0..iters.max(3) {
                        let t = Instant::now();
                        b.matmul_device(&wt, &acts, nt, &mut out)?;
                        b.synchronize()?;
                        dev_t.push(t.elapsed().as_secs_f64());
                    }
                    cells.push(format!("{:.0}", bytes / median(dev_t) / 1e9));
                }
                b.set_wait_mode(default_wait);
                let mut host = vec![0f32; rows * nt];
                for mode in [HostOut::Chunked, HostOut::Mapped, HostOut::Pinned, HostOut::Pageable] {
                    b.set_host_out(mode);
                    b.matmul(&wt, &acts, nt, &mut host)?;
                    let mut v = Vec::new();
                    for _ in 0..iters.max(3) {
                        let t = Instant::now();
                        b.matmul(&wt, &acts, nt, &mut host)?;
                        v.push(t.elapsed().as_secs_f64());
                    }
                    cells.push(format!("{:.0}", bytes / median(v) / 1e9));
                }
            }
            b.set_host_out(default_out);
            l2r.push(format!("| {f} | {} |", cells.join(" | ")));
        }
        let g = ggml_ref(f).map(|(a, c)| format!("{a:.0} / {c:.0}")).unwrap_or_else(|| "-".into());
        for (n, regs, local, occ) in b.kernel_stats(f)? {
            if ["_n1", "_n4", "_n8"].iter().any(|k| n.contains(&format!("{k}_")) || n.ends_with(k)) {
                stats.push(format!("{n}: {regs} regs, {local} B local, {occ} CTAs/SM"));
            }
        }
        let line = format!(
            "| {f} | {rows} | {:.0} | {:.0}% | {:.0} | {:.0} | {:.0} | {:.2}x | {g} |",
            gbs[0],
            100.0 * gbs[0] / copy_gbs,
            gbs[1],
            gbs[2],
            gbs[3],
            times[3] / times[0]
        );
        writeln!(md, "{line}")?;
        show(&md, &mut shown);
        for l in forced {
            writeln!(md, "{l}")?;
            show(&md, &mut shown);
        }
    }

    writeln!(md, "\n### launch-to-result, one call at a time (host clock, median of {} calls), GB/s\n", iters.max(3))?;
    writeln!(
        md,
        "device out = matmul_device + wait (stream sync, or flag: cuStreamWriteValue32 into pinned memory + spin); \
         host out = `matmul` into a host slice, by way back (chunked: mapped in row chunks, copy overlapped; \
         mapped: kernel writes pinned host memory, then one copy; pinned: DMA to pinned staging + copy; \
         pageable: DMA into the caller's slice)\n"
    )?;
    writeln!(
        md,
        "| format | NT1 dev sync | NT1 dev flag | NT1 host chunked | mapped | pinned | pageable | NT8 dev sync | NT8 dev flag | NT8 host chunked | mapped | pinned | pageable |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )?;
    for l in &l2r {
        writeln!(md, "{l}")?;
        show(&md, &mut shown);
    }
    writeln!(md, "\nkernels (registers, local memory, occupancy at 256 threads):\n")?;
    for l in &stats {
        writeln!(md, "- {l}")?;
    }
    if kernels_only || args.iter().any(|a| a == "--no-experts") {
        show(&md, &mut shown);
        return Ok(());
    }
    // experts
    writeln!(md, "\n## MoE experts, NT = 4\n")?;
    writeln!(
        md,
        "| expert | format | kernel (events) us | launch-to-result, device out, us | to host out, us | grouped x8, us/expert |\n|---|---|---|---|---|---|"
    )?;
    let nt = 4;
    let mut notes = Vec::new();
    let mut sync_rows = Vec::new();
    for (name, f, rows, cols) in [
        ("gate/up 640x2560", Format::Q4_K, 640usize, 2560usize),
        ("down 2560x640", Format::Q5_1, 2560, 640),
        ("down 2560x640", Format::Q8_0, 2560, 640),
        ("down 2560x640", Format::IQ4_NL, 2560, 640),
    ] {
        if skip(f) {
            continue;
        }
        let act = f.vec_dot_type().unwrap();
        let ws: Vec<_> =
            (0..8).map(|k| b.upload_weights(f, rows, cols, &weights(f, rows, cols, 100 + k)).unwrap()).collect();
        let mut acts: Vec<_> = (0..8).map(|_| b.alloc_acts(act, cols, nt).unwrap()).collect();
        for (k, a) in acts.iter_mut().enumerate() {
            b.quantize(&acts_x(cols, nt, 50 + k as u64), a)?;
        }
        let mut out = b.alloc_f32(8 * rows * nt)?;
        let mut host = vec![0f32; rows * nt];
        let kern = b.time_ms(200, || b.matmul_device(&ws[0], &acts[0], nt, &mut out))? * 1e3;
        if qkern_cuda::args::has_split(f) {
            // The S = 1 / S = 4 / tensor-core kernels themselves, not the two-phase one.
            b.set_kq_two_phase(false);
            let mut v = Vec::new();
            for (th, mma) in [(0u64, Some(0)), (u64::MAX, Some(0)), (0, Some(1))] {
                b.set_split_threshold(Some(th));
                b.set_mma_tokens(mma)?;
                v.push(b.time_ms(200, || b.matmul_device(&ws[0], &acts[0], nt, &mut out))? * 1e3);
            }
            b.set_split_threshold(None);
            b.set_mma_tokens(None)?;
            let tc = if qkern_cuda::args::has_mma(f) {
                format!(", {:.1} us on tensor cores (S=1)", v[2])
            } else {
                String::new()
            };
            // q4_K's two-phase kernel (QKERN_CUDA_KQ_MMK)
            let two = if qkern_cuda::args::has_mmk(f) {
                b.set_kq_two_phase(true);
                let us = b.time_ms(200, || b.matmul_device(&ws[0], &acts[0], nt, &mut out))? * 1e3;
                format!(", {us:.1} us two-phase")
            } else {
                String::new()
            };
            b.set_kq_two_phase(qkern_cuda::args::KQ_MMK_DEFAULT);
            notes.push(format!("{name} {f}: kernel {:.1} us with S=1 forced, {:.1} us with S=4{tc}{two}", v[0], v[1]));
        }
        let jobs: Vec<_> = ws.iter().zip(&acts).map(|(w, a)| (w, a, nt)).collect();
        // A/B: the context's sync mode x the way back to host memory (medians of 300 calls).
        let default_wait = b.wait_mode();
        let modes = [
            (SyncMode::Auto, WaitMode::Sync),
            (SyncMode::Spin, WaitMode::Sync),
            (SyncMode::Auto, WaitMode::Query),
            (SyncMode::Auto, WaitMode::Flag),
        ];
        for (sm, wm) in modes {
            b.set_sync_mode(sm)?;
            b.set_wait_mode(wm);
            let mut cells = vec![format!("{name} {f}"), format!("{sm:?} / {wm:?}")];
            let mut v = Vec::new();
            for _ in 0..300 {
                let t = Instant::now();
                b.matmul_device(&ws[0], &acts[0], nt, &mut out)?;
                b.synchronize()?;
                v.push(t.elapsed().as_secs_f64() * 1e6);
            }
            cells.push(format!("{:.1}", median(v)));
            for mode in [HostOut::Mapped, HostOut::Pinned, HostOut::Pageable] {
                b.set_host_out(mode);
                let mut v = Vec::new();
                for _ in 0..300 {
                    let t = Instant::now();
                    b.matmul(&ws[0], &acts[0], nt, &mut host)?;
                    v.push(t.elapsed().as_secs_f64() * 1e6);
                }
                cells.push(format!("{:.1}", median(v)));
            }
            b.set_host_out(default_out);
            // the floor: one tiny quantize launch (one 256-element token) + sync
            let mut tiny = b.alloc_acts(Format::Q8_K, 256, 1)?;
            let x1 = b.alloc_f32(256)?;
            let mut v = Vec::new();
            for _ in 0..300 {
                let t = Instant::now();
                b.quantize_device(&x1, 1, &mut tiny)?;
                b.synchronize()?;
                v.push(t.elapsed().as_secs_f64() * 1e6);
            }
            cells.push(format!("{:.1}", median(v)));
            // host cost of one launch: 100 tiny launches queued, then one wait
            let mut v = Vec::new();
            for _ in 0..20 {
                let t = Instant::now();
                for _ in 0..100 {
                    b.quantize_device(&x1, 1, &mut tiny)?;
                }
                v.push(t.elapsed().as_secs_f64() * 1e6 / 100.0);
                b.synchronize()?;
            }
            cells.push(format!("{:.2}", median(v)));
            // and of one expert matmul launch
            let mut v = Vec::new();
            for _ in 0..20 {
                let t = Instant::now();
                for _ in 0..50 {
                    b.matmul_device(&ws[0], &acts[0], nt, &mut out)?;
                }
                v.push(t.elapsed().as_secs_f64() * 1e6 / 50.0);
                b.synchronize()?;
            }
            cells.push(format!("{:.2}", median(v)));
            sync_rows.push(format!("| {} |", cells.join(" | ")));
        }
        b.set_wait_mode(default_wait);
        b.set_sync_mode(SyncMode::Auto)?;
        if let Some(m) = std::env::var("QKERN_CUDA_SYNC").ok().and_then(|v| SyncMode::parse(&v)) {
            b.set_sync_mode(m)?;
        }
        let mut dev_t = Vec::new();
        let mut host_t = Vec::new();
        let mut grp_t = Vec::new();
        for _ in 0..300 {
            let t = Instant::now();
            b.matmul_device(&ws[0], &acts[0], nt, &mut out)?;
            b.synchronize()?;
            dev_t.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            b.matmul(&ws[0], &acts[0], nt, &mut host)?;
            host_t.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            b.matmul_grouped(&jobs, &mut out)?;
            b.synchronize()?;
            grp_t.push(t.elapsed().as_secs_f64() * 1e6 / 8.0);
        }
        let line = format!(
            "| {name} | {f} | {kern:.1} | {:.1} | {:.1} | {:.2} |",
            median(dev_t),
            median(host_t),
            median(grp_t)
        );
        writeln!(md, "{line}")?;
        show(&md, &mut shown);
        // The grouped launch on the tensor-core kernel (S = 1 forced; the size heuristic gives
        // a layer's experts S = 4), for the formats that have one.
        if qkern_cuda::args::has_mma(f) {
            b.set_split_threshold(Some(0));
            b.set_mma_tokens(Some(1))?;
            let mut g = Vec::new();
            for _ in 0..300 {
                let t = Instant::now();
                b.matmul_grouped(&jobs, &mut out)?;
                b.synchronize()?;
                g.push(t.elapsed().as_secs_f64() * 1e6 / 8.0);
            }
            b.set_split_threshold(None);
            b.set_mma_tokens(None)?;
            notes.push(format!("{name} {f}: grouped x8 on tensor cores (S=1 forced) {:.2} us/expert", median(g)));
        }
    }
    writeln!(md, "\n(medians of 300 host-timed calls; kernel column: CUDA events over 200 back-to-back launches)")?;
    for n in &notes {
        writeln!(md, "\n{n}")?;
        show(&md, &mut shown);
    }
    writeln!(md, "\n### experts, NT = 4: sync flag / wait x way back (launch-to-result, us, medians of 300)\n")?;
    writeln!(
        md,
        "tiny = one q8_K quantize launch of one 256-element token; enqueue = host time per launch of 100 (tiny) or 50 (expert) queued launches\n"
    )?;
    writeln!(
        md,
        "| expert | sync flag / wait | device out | host mapped | host pinned | host pageable | tiny launch + wait | tiny enqueue | expert enqueue |\n|---|---|---|---|---|---|---|---|---|"
    )?;
    for l in &sync_rows {
        writeln!(md, "{l}")?;
        show(&md, &mut shown);
    }
    show(&md, &mut shown);
    if let Some(d) = std::env::var_os("QKERN_RESULTS_DIR") {
        std::fs::create_dir_all(&d)?;
        std::fs::write(std::path::Path::new(&d).join("bench_cuda.md"), &md)?;
    }
    Ok(())
}

/// The token counts of a token-count mask (bit `n - 1`), e.g. "3,5,6,7,8".
fn mask_nts(m: u32) -> String {
    (1..=8u32).filter(|n| m >> (n - 1) & 1 == 1).map(|n| n.to_string()).collect::<Vec<_>>().join(",")
}

/// Print what `md` gained since the last call (`shown`: bytes already printed).
fn show(md: &str, shown: &mut usize) {
    print!("{}", &md[(*shown).min(md.len())..]);
    *shown = md.len();
}
