//! GB/s of weights per format on a wgpu adapter: about `--gib` GiB of random blocks at 4096
//! columns, matmul for each `--nt`, timed two ways: `device` (`reps` back-to-back dispatches in
//! one submission, one wait: the kernels alone) and `call` (the API's `matmul`, which also
//! submits, waits and reads the `[tokens][rows]` result back; median of `reps` calls). The
//! first and last 64 rows of one call are checked bit for bit against the scalar reference.
//!
//! `--variants` (or `QKERN_WGPU_VARIANTS`) runs every (format, NT) under several kernel
//! variants in one process (same bits, different speed; each variant's `call` timed too):
//! `default` (the backend's choice), `emul` (fma emulation even where `fma()` is fused),
//! `full` / `checked` / `none` (wgpu's shader runtime checks all kept / bounds checks without
//! loop bounding / all dropped, the default), `u1` / `u2` / `u4` (1 / 2 / 4 blocks per loop iteration), `rows`
//! (the other rows-per-workgroup default: 8 for the formats with tables, 32 for the others),
//! `rN` (N rows per workgroup), `lut2` / `lut1` (iq4_nl's and nvfp4's byte-pair / nibble lookup table),
//! `lutcN` (the byte-pair tables of iq4_xs, iq4_nl and nvfp4 in N = 1, 2, 4 or 8 copies),
//! `iqpair` / `iqpair2` / `iq8` (the IQ2/IQ3 formats on thread pairs with 1 / 2 blocks per
//! iteration, or on 8 invocations per row), `cN` (the call's readback in N row chunks), `flat`,
//! `coop` / `coopwords` / `nocoop` (q4_K, q5_K and the IQ2/IQ3 formats on cooperative matrices from one token, tiles staged
//! as f16 / as u32 words, or not: the device has
//! them only when made with `QKERN_WGPU_COOP=1`..`8`, which also makes `default` use them).
//! The CSV is written line by line, so a run cut short keeps what it measured.
//!
//! `--rounds R` (default 1) measures the device times of a (format, NT)'s variants R times,
//! interleaved (every variant once per round), and keeps each variant's fastest round: the
//! GPU's clocks drift between measurements (identical kernels measured up to 2.5x apart in one
//! process, benches/results/2026-12-06-session26 run2), and a slow round can only be the clocks,
//! so the fastest round is the kernel's time.
//!
//! `--latency` times instead the API's `matmul` call on q8_0 matrices of 256 columns and
//! 16..1M rows (NT 1) beside its kernel alone: the per-call cost (submit, wait, readback of the
//! `[tokens][rows]` result) as a fixed part and a per-output-byte part.
//!
//! `--stream` times instead plain WGSL kernels that only read a buffer (load width, loads in
//! flight, bounds checks) and a buffer copy: the adapter's ceiling for the kernels above
//! (common/stream.rs).
//!
//! `cargo run --release -p qkern-wgpu --example bench -- [--gib 1] [--nt 1,8] [--reps 20]
//!  [--formats q8_0,q4_K|all] [--variants default,emul,...] [--rounds 1] [--csv PATH] [--direct-out]`

use std::io::Write;
use std::time::Instant;

use qkern_formats::{Format, reference};
use qkern_parity::inputs::{Dist, Rng, floats, random_blocks};
use qkern_wgpu::{Checks, Coop, Tuning, WgpuBackend};

#[path = "common/stream.rs"]
mod stream;

/// The tuning of variant `name` for format `f`, from the backend's default `d`: one name, or
/// several joined by `+` (applied in order: `st+r64`). An unknown name is an error (a removed
/// variant must not quietly time the default).
fn variant(name: &str, f: Format, d: Tuning) -> Tuning {
    name.split('+').fold(d, |t, n| variant1(n, f, t).unwrap_or_else(|| panic!("--variants: unknown variant {n:?}")))
}

/// The tuning of one variant name (`None`: no such variant).
fn variant1(name: &str, f: Format, d: Tuning) -> Option<Tuning> {
    let has_table = !matches!(f, Format::Q8_0 | Format::Q5_1 | Format::Q4_K | Format::Q5_K | Format::Q6_K);
    Some(match name {
        "default" => d,
        "emul" => Tuning { native_fma: false, ..d },
        "full" => Tuning { checks: Checks::Full, ..d },
        "none" => Tuning { checks: Checks::None, ..d },
        "checked" => Tuning { checks: Checks::NoLoopBounding, ..d },
        "u1" => Tuning { unroll: 1, ..d },
        "u2" => Tuning { unroll: 2, ..d },
        "u4" => Tuning { unroll: 4, ..d },
        "flat" => Tuning { flat: true, ..d },
        "lut2" => Tuning { lut2: true, ..d },
        "lut1" => Tuning { lut2: false, ..d },
        // the IQ2/IQ3 formats on thread pairs (with their own default unroll), or not
        "iqpair" => Tuning { iq_pairs: 1, ..d },
        "iq8" => Tuning { iq_pairs: 0, ..d },
        "iqpair2" => Tuning { iq_pairs: 1, unroll: 2, ..d },
        // q4_K, q5_K and the IQ2/IQ3 formats on cooperative matrices from one token (the device must have been made with
        // them: QKERN_WGPU_COOP=1; else this is the default), or not
        "coop" => Tuning { coop: Coop::Native(1), ..d },
        "coopwords" => Tuning { coop: Coop::NativeWords(1), ..d },
        "nocoop" => Tuning { coop: Coop::Off, ..d },
        // the pair and thread-pair kernels on one row or two (Tuning::pair_rows; 0: per format)
        "prow0" => Tuning { pair_rows: 0, pair_generic: false, ..d },
        "prow1" => Tuning { pair_rows: 1, pair_generic: false, ..d },
        "prow2" => Tuning { pair_rows: 2, ..d },
        "prow2u1" => Tuning { pair_rows: 2, unroll: 1, ..d },
        "prow2g" => Tuning { pair_rows: 2, pair_generic: true, ..d },
        // `cN`: the call's readback in N row chunks (c1: none)
        c if c.strip_prefix('c').and_then(|n| n.parse::<u8>().ok()).is_some() => {
            Tuning { chunks: c[1..].parse().unwrap_or(0), ..d }
        }
        // the activations staged in workgroup memory (Tuning::stage) from one token in every
        // format (the pair formats and the thread pairs), chunks by size (`st`) or of N steps
        // or blocks (`stcN`); `nost`: not staged
        "st" => Tuning { stage: 1, stage_steps: 0, ..d },
        "nost" => Tuning { stage: 0, ..d },
        c if c.strip_prefix("stc").and_then(|n| n.parse::<u8>().ok()).is_some() => {
            Tuning { stage: 1, stage_steps: c[3..].parse().unwrap_or(0), ..d }
        }
        // q4_K, q5_K and the IQ2/IQ3 formats tiled (Tuning::ktile: a second copy of the
        // weights, uploaded so), or not
        "ktile" => Tuning { ktile: true, ..d },
        "noktile" => Tuning { ktile: false, ..d },
        "flatu2" => Tuning { flat: true, unroll: 2, ..d },
        "flatnone" => Tuning { flat: true, checks: Checks::None, ..d },
        "rows" => Tuning { wg_rows: if has_table { 8 } else { 32 }, ..d },
        // `rN`: N rows per workgroup
        r if r.strip_prefix('r').and_then(|n| n.parse::<u32>().ok()).is_some() => {
            Tuning { wg_rows: r[1..].parse().unwrap_or(0), ..d }
        }
        _ => return None,
    })
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let gib: f64 = arg(&args, "--gib").map_or(1.0, |v| v.parse().expect("--gib"));
    let reps: usize = arg(&args, "--reps").map_or(20, |v| v.parse().expect("--reps"));
    let rounds: usize = arg(&args, "--rounds").map_or(1, |v| v.parse().expect("--rounds")).max(1);
    let nts: Vec<usize> =
        arg(&args, "--nt").map_or(vec![1, 8], |v| v.split(',').map(|x| x.trim().parse().expect("--nt")).collect());
    let formats: Vec<Format> = match arg(&args, "--formats").as_deref() {
        None | Some("all") => Format::WEIGHTS.to_vec(),
        Some(l) => l.split(',').map(|f| f.parse().expect("--formats")).collect(),
    };
    let variants: Vec<String> = arg(&args, "--variants")
        .or_else(|| std::env::var("QKERN_WGPU_VARIANTS").ok())
        .unwrap_or_else(|| "default".into())
        .split(',')
        .map(|v| v.trim().to_string())
        .collect();
    // Results copied to a device-local output buffer (no direct output, which would put the
    // kernels' stores over the bus): `device` times the kernels as the CUDA benchmark does.
    // `--latency` compares the two call paths; `--direct-out` (where offered) times the
    // kernels writing to the mappable buffer, as `qkern bench` runs them.
    if args.iter().any(|a| a == "--stream") {
        stream::run(gib, reps);
        return;
    }
    let direct_out = Some(args.iter().any(|a| a == "--direct-out"));
    let be = WgpuBackend::with_options(None, qkern_wgpu::Options { direct_out, ..Default::default() })
        .expect("wgpu adapter");
    let default = be.tuning();
    for v in &variants {
        variant(v, Format::Q8_0, default); // an unknown name stops the run here, not midway
    }
    eprintln!(
        "adapter: {} (max part {} MiB, cooperative matrices: {})",
        be.name(),
        be.max_part_bytes() >> 20,
        if be.supports_coop() { "yes" } else { "no" }
    );
    if args.iter().any(|a| a == "--latency") {
        latency(&be);
        // The same with direct output (where offered).
        let opts = qkern_wgpu::Options { direct_out: Some(true), ..Default::default() };
        match WgpuBackend::with_options(None, opts) {
            Ok(d) => {
                println!("{}:", d.name());
                latency(&d)
            }
            Err(e) => println!("copy-out backend: {e}"),
        }
        return;
    }
    let cols = 4096usize;
    let mut csv = arg(&args, "--csv").map(|p| std::fs::File::create(p).expect("create csv"));
    let mut line = |l: String| {
        if let Some(c) = csv.as_mut() {
            let _ = writeln!(c, "{l}");
            let _ = c.flush();
        }
    };
    line("format,rows,cols,weight_bytes,parts,nt,variant,device_gbps,call_gbps,device_ms,call_ms,bit_exact".into());
    println!(
        "{:<8} {:>7} {:>5} {:>3} {:<8} {:>11} {:>11} {:>10} {:>10} {:>6}",
        "format", "rows", "parts", "NT", "variant", "device GB/s", "call GB/s", "device ms", "call ms", "exact"
    );
    for f in formats {
        let act = f.vec_dot_type().expect("weight format");
        let rb = f.row_bytes(cols).expect("cols");
        let rows = ((gib * (1u64 << 30) as f64) as usize / rb).max(64);
        let mut rng = Rng::new(0xBE7C4 ^ f.id() as u64);
        let t = Instant::now();
        let w = random_blocks(&mut rng, f, rows * cols / f.block_elems(), false);
        let gw = be.upload_weights(f, rows, cols, &w).expect("upload");
        // The weights in the other layout too (q4_K, q5_K, the IQ2/IQ3 formats), where a variant
        // asks for it: a matrix keeps the layout it was uploaded with (Tuning::ktile).
        let kt = qkern_wgpu::ktile_applies(f);
        let gw_other = (kt && variants.iter().any(|v| variant(v, f, default).ktile != default.ktile)).then(|| {
            be.set_tuning(Tuning { ktile: !default.ktile, ..default });
            let g = be.upload_weights(f, rows, cols, &w).expect("upload");
            be.set_tuning(default);
            g
        });
        let weights = |t: &Tuning| if kt && t.ktile != default.ktile { gw_other.as_ref().unwrap_or(&gw) } else { &gw };
        eprintln!(
            "{f}: {rows} rows, {:.2} GiB, prepared in {:.1}s",
            w.len() as f64 / (1u64 << 30) as f64,
            t.elapsed().as_secs_f64()
        );
        let max_nt = nts.iter().copied().max().unwrap_or(1);
        let x = floats(&mut rng, Dist::Gaussian, max_nt * cols);
        let mut ga = be.alloc_acts(act, cols, max_nt).expect("acts");
        for (ni, &nt) in nts.iter().enumerate() {
            be.quantize(&x[..nt * cols], &mut ga).expect("quantize");
            // The variants that run kernels of their own (not e.g. `emul` where fma() is not
            // fused), with the tuning each runs.
            let runs: Vec<(usize, &String, Tuning)> = variants
                .iter()
                .enumerate()
                .filter_map(|(vi, vname)| {
                    let used = be.set_tuning(variant(vname, f, default));
                    (vi == 0 || vname == "default" || used != default).then_some((vi, vname, used))
                })
                .collect();
            let device = |gw: &qkern_wgpu::WgpuWeights, nt: usize| {
                let mut batches: Vec<f64> =
                    (0..5).map(|_| be.bench_matmul(gw, &ga, nt, reps).expect("bench").as_secs_f64()).collect();
                batches.sort_by(f64::total_cmp);
                batches[2] / reps as f64
            };
            // Warm-up of at least 0.25 s (the GPU leaves its idle clocks while the next
            // format's weights are prepared on the host; one warm-up batch was not enough:
            // identical kernels measured 0.6-3x apart in one process), then the median of
            // 5 batches of `reps` back-to-back dispatches, the fastest of `rounds`. The first
            // measurement after a format's weights were prepared warms for 1 s (0.25 s still
            // left 4 of 26 of them 1.5-3x low in run13 of benches/results/2026-12-03-h200-session4).
            let mut best = vec![f64::INFINITY; runs.len()];
            for round in 0..rounds {
                for (k, &(vi, _, t)) in runs.iter().enumerate() {
                    be.set_tuning(t);
                    let warm = if ni == 0 && vi == 0 && round == 0 { 1.0 } else { 0.25 };
                    let t0 = Instant::now();
                    while t0.elapsed().as_secs_f64() < warm {
                        be.bench_matmul(weights(&t), &ga, nt, reps).expect("bench");
                    }
                    best[k] = best[k].min(device(weights(&t), nt));
                }
            }
            for (k, &(_, vname, t)) in runs.iter().enumerate() {
                be.set_tuning(t);
                let mut device_s = best[k];
                let gw = weights(&t);
                let mut out = vec![0f32; nt * rows];
                be.matmul(gw, &ga, nt, &mut out).expect("matmul");
                let mut times = Vec::with_capacity(reps);
                for _ in 0..reps.clamp(3, 50) {
                    let t = Instant::now();
                    be.matmul(gw, &ga, nt, &mut out).expect("matmul");
                    times.push(t.elapsed().as_secs_f64());
                }
                times.sort_by(f64::total_cmp);
                let call_s = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
                // A call runs the same dispatches plus a submission, a wait and a copy, so a
                // device time well above the call's says the batches ran at lower clocks (the
                // H200 measured q5_K NT 8 at 248 GB/s device, 558 call, in session 16's run7):
                // measure them again, twice at most, keep the lower median, and say so.
                for retry in 1..=2 {
                    if device_s <= 1.1 * call_s {
                        break;
                    }
                    eprintln!(
                        "{f} NT {nt} {vname}: device {:.3} ms above the call's {:.3} ms; measuring again ({retry}/2)",
                        device_s * 1e3,
                        call_s * 1e3
                    );
                    device_s = device_s.min(device(gw, nt));
                }
                // Bit check of the first and last 64 rows against the reference.
                let arb = act.row_bytes(cols).expect("act row");
                let mut q = vec![0u8; nt * arb];
                be.read_acts(&ga, nt, &mut q).expect("read acts");
                let mut exact = true;
                for r in (0..64.min(rows)).chain(rows.saturating_sub(64)..rows) {
                    let mut want = vec![0f32; nt];
                    reference::dot_tokens(f, cols, &w[r * rb..(r + 1) * rb], &q, &mut want).expect("reference");
                    for (t, v) in want.iter().enumerate() {
                        exact &= v.to_bits() == out[t * rows + r].to_bits();
                    }
                }
                let gbps = |s: f64| w.len() as f64 / s / 1e9;
                println!(
                    "{:<8} {:>7} {:>5} {:>3} {:<8} {:>11.1} {:>11.1} {:>10.3} {:>10.3} {:>6}",
                    f.name(),
                    rows,
                    gw.parts(),
                    nt,
                    vname,
                    gbps(device_s),
                    gbps(call_s),
                    device_s * 1e3,
                    call_s * 1e3,
                    exact
                );
                line(format!(
                    "{},{rows},{cols},{},{},{nt},{vname},{:.2},{:.2},{:.4},{:.4},{exact}",
                    f.name(),
                    w.len(),
                    gw.parts(),
                    gbps(device_s),
                    gbps(call_s),
                    device_s * 1e3,
                    call_s * 1e3
                ));
            }
            be.set_tuning(default);
        }
    }
}

/// Median `matmul` call time vs kernel time for small and large outputs (see the docs).
fn latency(be: &WgpuBackend) {
    let f = Format::Q8_0;
    let cols = 256usize;
    println!("{:>8} {:>10} {:>10} {:>10} {:>10}", "rows", "out KiB", "call us", "kernel us", "rest us");
    for rows in [16usize, 4096, 65536, 262144, 1 << 20] {
        let mut rng = Rng::new(0x1A7 ^ rows as u64);
        let w = random_blocks(&mut rng, f, rows * cols / 32, false);
        let gw = be.upload_weights(f, rows, cols, &w).expect("upload");
        let x = floats(&mut rng, Dist::Gaussian, cols);
        let mut ga = be.alloc_acts(Format::Q8_0, cols, 1).expect("acts");
        be.quantize(&x, &mut ga).expect("quantize");
        let mut out = vec![0f32; rows];
        let t0 = Instant::now();
        while t0.elapsed().as_secs_f64() < 0.25 {
            be.matmul(&gw, &ga, 1, &mut out).expect("matmul");
        }
        let mut calls: Vec<f64> = (0..101)
            .map(|_| {
                let t = Instant::now();
                be.matmul(&gw, &ga, 1, &mut out).expect("matmul");
                t.elapsed().as_secs_f64()
            })
            .collect();
        calls.sort_by(f64::total_cmp);
        let reps = 50;
        let mut k: Vec<f64> =
            (0..5).map(|_| be.bench_matmul(&gw, &ga, 1, reps).expect("bench").as_secs_f64() / reps as f64).collect();
        k.sort_by(f64::total_cmp);
        let (c, kk) = (calls[50] * 1e6, k[2] * 1e6);
        print!("{rows:>8} {:>10.1} {c:>10.1} {kk:>10.1} {:>10.1}", rows as f64 * 4.0 / 1024.0, c - kk);
        // The copy-out call's phases one at a time (median of 21 of each): kernel submitted
        // and waited, copy, map, host copy, unmap.
        let mut ph: Vec<[f64; 5]> = (0..21)
            .filter_map(|_| be.call_phases(&gw, &ga, 1, &mut out).ok())
            .map(|p| p.map(|d| d.as_secs_f64() * 1e6))
            .collect();
        if ph.is_empty() {
            println!();
            continue;
        }
        let med = |i: usize, ph: &mut Vec<[f64; 5]>| {
            ph.sort_by(|a, b| a[i].total_cmp(&b[i]));
            ph[ph.len() / 2][i]
        };
        let m: Vec<f64> = (0..5).map(|i| med(i, &mut ph)).collect();
        println!(
            "   phases us: kernel+wait {:.1} copy {:.1} map {:.1} host {:.1} unmap {:.1}",
            m[0], m[1], m[2], m[3], m[4]
        );
    }
}
