//! Parity on a real GPU: the committed ggml vectors through the `qkern` API (`cuda:0`), and
//! live random cases through qkern-cuda against the scalar reference (which runs on this
//! machine's CPU in the same binary): activation quantize (specials included), dequantize to
//! f32/f16/bf16, matmul for NT 1..8 with both lane splits, chunked NT, grouped launches,
//! wild scales and MoE expert shapes. Prints a table (also written to
//! `$QKERN_RESULTS_DIR/parity_cuda.txt` when set). Without a device: "no CUDA device: skipped".
//! Run with `--test-threads=1`.

use std::fmt::Write as _;

use qkern_cuda::{CudaBackend, DeqKind, HostOut, WaitMode};
use qkern_formats::{Format, reference};
use qkern_parity::inputs::{Dist, Rng, floats, random_blocks};

fn backend() -> Option<CudaBackend> {
    match CudaBackend::new(0) {
        Ok(b) => Some(b),
        Err(e) => {
            println!("no CUDA device: skipped ({e})");
            None
        }
    }
}

fn save(name: &str, text: &str) {
    if let Some(d) = std::env::var_os("QKERN_RESULTS_DIR") {
        let p = std::path::Path::new(&d).join(name);
        let _ = std::fs::create_dir_all(&d);
        std::fs::write(&p, text).unwrap_or_else(|e| eprintln!("cannot write {}: {e}", p.display()));
    }
}

/// Bit-equal, except that NaN matches any NaN (payloads are not part of the contract).
fn diff(want: &[f32], got: &[f32]) -> usize {
    want.iter().zip(got).filter(|(a, b)| !(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))).count()
        + want.len().abs_diff(got.len())
}

fn ref_quantize(act: Format, cols: usize, x: &[f32]) -> Vec<u8> {
    let rb = act.row_bytes(cols).unwrap();
    let mut out = vec![0u8; x.len() / cols * rb];
    for (xr, o) in x.chunks_exact(cols).zip(out.chunks_exact_mut(rb)) {
        reference::quantize_row(act, xr, o).unwrap();
    }
    out
}

fn ref_matmul(f: Format, rows: usize, cols: usize, w: &[u8], acts: &[u8], nt: usize) -> Vec<f32> {
    let wb = f.row_bytes(cols).unwrap();
    let mut out = vec![0f32; nt * rows];
    let mut col = vec![0f32; nt];
    for r in 0..rows {
        reference::dot_tokens(f, cols, &w[r * wb..(r + 1) * wb], acts, &mut col).unwrap();
        for t in 0..nt {
            out[t * rows + r] = col[t];
        }
    }
    out
}

#[test]
fn gpu_committed_vectors() {
    let dev = match qkern::Device::parse("cuda:0", Default::default()) {
        Ok(d) => d,
        Err(e) => {
            println!("no CUDA device: skipped ({e})");
            return;
        }
    };
    let mut report = None::<qkern_parity::run::Report>;
    let mut missing = Vec::new();
    for f in Format::WEIGHTS {
        // QKERN_VECTORS_DIR: the vectors where the binary runs (built elsewhere, it cannot
        // rely on the build machine's path).
        let dir = std::env::var_os("QKERN_VECTORS_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(qkern_parity::vectors::committed_dir);
        match qkern_parity::vectors::VectorFile::load(dir.join(qkern_parity::vectors::file_name(f))) {
            Ok(file) => {
                let r = qkern_parity::run::run_file(&dev, &file).unwrap_or_else(|e| panic!("{f}: {e}"));
                match &mut report {
                    Some(all) => all.extend(r),
                    None => report = Some(r),
                }
            }
            Err(e) => missing.push(format!("{f}: {e}")),
        }
    }
    let mut text = format!("committed vectors on {}\n", dev.name());
    if let Some(r) = &report {
        write!(text, "{r}").unwrap();
    }
    for m in &missing {
        writeln!(text, "no vectors: {m}").unwrap();
    }
    println!("{text}");
    save("parity_vectors_cuda.txt", &text);
    assert!(report.as_ref().is_some_and(|r| r.all_equal()), "committed vectors differ on CUDA (table above)");
}

struct Row {
    format: Format,
    cells: Vec<(String, usize, usize)>, // (what, differing, total)
}

impl Row {
    fn add(&mut self, what: impl Into<String>, differing: usize, total: usize) {
        let what = what.into();
        match self.cells.iter_mut().find(|c| c.0 == what) {
            Some(c) => {
                c.1 += differing;
                c.2 += total;
            }
            None => self.cells.push((what, differing, total)),
        }
    }
}

/// A kernel choice of the live tests: (S = 4 row threshold, tensor-core tokens,
/// one-thread-per-row tokens, q4_K's two-phase kernel, staged row kernel tokens, two-thread
/// staged row kernel tokens).
type Config = (Option<u64>, Option<u32>, Option<u32>, bool, Option<u32>, Option<u32>);

fn live_format(b: &CudaBackend, f: Format, rng: &mut Rng, row: &mut Row, log: &mut String) {
    let act = f.vec_dot_type().unwrap();
    let unit = f.block_elems().max(act.block_elems());
    // matmul: widths of 1, 2, 3, 5 and 16 units; NT 1..8; S forced both ways
    for (i, units) in [1usize, 2, 3, 5, 16].into_iter().enumerate() {
        let cols = units * unit;
        for nt in 1..=8usize {
            let rows = [1, 7, 33, 40, 300][(nt + i) % 5];
            for wild in [false, true] {
                let w = random_blocks(rng, f, rows * cols / f.block_elems(), wild);
                let d = Dist::ALL[rng.below(Dist::ALL.len() as u64) as usize];
                let x = floats(rng, d, nt * cols);
                let want_q = ref_quantize(act, cols, &x);
                let wt = b.upload_weights(f, rows, cols, &w).unwrap();
                let mut acts = b.alloc_acts(act, cols, nt).unwrap();
                // device quantize == reference quantize
                b.quantize(&x, &mut acts).unwrap();
                let mut got_q = vec![0u8; want_q.len()];
                b.read_acts(&acts, nt, &mut got_q).unwrap();
                let qd = want_q
                    .chunks(act.block_bytes())
                    .zip(got_q.chunks(act.block_bytes()))
                    .filter(|(a, b)| a != b)
                    .count();
                row.add("quant", qd, want_q.len() / act.block_bytes());
                // the same tokens quantized by one grouped call into three buffers (the middle
                // one with 0 tokens, left as it is); the last case of a width groups 17 (more
                // than one launch takes)
                {
                    let t0 = nt / 2;
                    let mut bufs: Vec<_> = (0..3).map(|_| b.alloc_acts(act, cols, nt).unwrap()).collect();
                    let mut jobs: Vec<_> = bufs.iter_mut().zip([t0, 0, nt - t0]).collect();
                    b.quantize_grouped(&x, &mut jobs).unwrap();
                    let mut got = vec![0u8; want_q.len()];
                    let rb = want_q.len() / nt;
                    b.read_acts(&bufs[0], t0, &mut got[..t0 * rb]).unwrap();
                    b.read_acts(&bufs[2], nt - t0, &mut got[t0 * rb..]).unwrap();
                    let mut zero = vec![0xAAu8; rb];
                    b.read_acts(&bufs[1], 1, &mut zero).unwrap();
                    let untouched = usize::from(zero != vec![0u8; rb]);
                    let qd = want_q
                        .chunks(act.block_bytes())
                        .zip(got.chunks(act.block_bytes()))
                        .filter(|(a, b)| a != b)
                        .count();
                    row.add("quant grouped", qd + untouched, want_q.len() / act.block_bytes() + 1);
                    if nt == 8 {
                        let mut many: Vec<_> = (0..17).map(|_| b.alloc_acts(act, cols, 8).unwrap()).collect();
                        let xs: Vec<f32> = (0..17).flat_map(|_| x[..cols].iter().copied()).collect();
                        let mut jobs: Vec<_> = many.iter_mut().map(|a| (a, 1)).collect();
                        b.quantize_grouped(&xs, &mut jobs).unwrap();
                        let mut qd = 0;
                        for a in &many {
                            b.read_acts(a, 1, &mut got[..rb]).unwrap();
                            qd += usize::from(got[..rb] != want_q[..rb]);
                        }
                        row.add("quant grouped", qd, 17);
                    }
                }
                let want = ref_matmul(f, rows, cols, &w, &want_q, nt);
                // S = 1 and S = 4 forced; the formats with a tensor-core kernel run S = 1 both with
                // it at every NT (from 1 token) and without it; the 32-element formats run both
                // their two-thread and their one-thread-per-row kernels (activations from global
                // memory, and from the constant bank) at every NT
                let mut configs: Vec<Config> = if qkern_cuda::args::has_mma(f) {
                    vec![
                        (Some(0), Some(1), Some(0), false, Some(0), None),
                        (Some(u64::MAX), None, None, false, None, None),
                        (Some(0), Some(0), Some(0), false, Some(0), None),
                    ]
                } else {
                    vec![
                        (Some(0), None, Some(0), false, Some(0), None),
                        (Some(u64::MAX), None, None, false, None, None),
                    ]
                };
                if qkern_cuda::args::has_row(f) {
                    configs.push((Some(0), Some(0), Some(1), false, Some(0), None));
                    configs.push((Some(0), Some(0), Some(0), false, Some(1), Some(0)));
                }
                // the staged kernels with two threads a row (iq4_nl by block parity, q5_1 by lane), at every NT
                if qkern_cuda::args::has_pair(f) {
                    configs.push((Some(0), Some(0), Some(0), false, Some(1), Some(1)));
                }
                // q4_K's two-phase kernel: small launches (S = 4 threshold above every size)
                if qkern_cuda::args::has_mmk(f) && qkern_cuda::args::has_split(f) {
                    configs.push((Some(u64::MAX), Some(0), None, true, None, None));
                }
                for &(s, mma, rk, kq, ck, pk) in &configs {
                    if s == Some(u64::MAX) && f.block_elems() != 256 {
                        continue;
                    }
                    b.set_split_threshold(s);
                    b.set_mma_tokens(mma).unwrap();
                    b.set_row_tokens(rk).unwrap();
                    b.set_kq_two_phase(kq);
                    b.set_cact_tokens(ck).unwrap();
                    b.set_pair_tokens(pk).unwrap();
                    // every way back to host memory, in turn (the bits must not depend on it)
                    b.set_host_out([HostOut::Pageable, HostOut::Pinned, HostOut::Mapped][(nt + i + wild as usize) % 3]);
                    b.set_wait_mode(
                        [WaitMode::Sync, WaitMode::Query, WaitMode::Flag][(nt + i + 2 * wild as usize) % 3],
                    );
                    let mut got = vec![0f32; nt * rows];
                    b.matmul(&wt, &acts, nt, &mut got).unwrap();
                    let n = diff(&want, &got);
                    let what = if wild { "wild".to_string() } else { format!("NT{nt}") };
                    row.add(what.clone(), n, want.len());
                    if n > 0 {
                        let k = want
                            .iter()
                            .zip(&got)
                            .position(|(a, g)| !(a.to_bits() == g.to_bits() || (a.is_nan() && g.is_nan())))
                            .unwrap_or(0);
                        writeln!(
                            log,
                            "{f} {what} S={} mma {mma:?} row {rk:?} two-phase {kq} constant bank {ck:?} pairs {pk:?} {rows}x{cols}: {n}/{} differ, first (t {}, r {}): want {:#010x} got {:#010x}",
                            if s == Some(0) { 1 } else { 4 },
                            want.len(),
                            k / rows,
                            k % rows,
                            want[k].to_bits(),
                            got[k].to_bits()
                        )
                        .unwrap();
                    }
                }
                b.set_split_threshold(None);
                b.set_mma_tokens(None).unwrap();
                b.set_row_tokens(None).unwrap();
                b.set_kq_two_phase(qkern_cuda::args::KQ_MMK_DEFAULT);
                b.set_cact_tokens(None).unwrap();
                b.set_pair_tokens(None).unwrap();
                // more tokens than a launch holds: a typed error, the setting unchanged
                let e = b.set_mma_tokens(Some(qkern_cuda::args::MAX_NT as u32 + 1)).unwrap_err();
                assert!(matches!(e, qkern_cuda::CudaError::Invalid(_)), "{e}");
                // dequantize (f32, f16, bf16) on the first width only
                if nt <= 2 {
                    let mut dw = vec![0f32; rows * cols];
                    reference::dequantize_row(f, &w, &mut dw).unwrap();
                    let mut got = vec![0f32; rows * cols];
                    b.dequantize(&wt, &mut got).unwrap();
                    row.add("deq f32", diff(&dw, &got), dw.len());
                    for kind in [DeqKind::F16, DeqKind::Bf16] {
                        let mut h = vec![0u16; rows * cols];
                        b.dequantize_half(&wt, kind, &mut h).unwrap();
                        let exp: Vec<u16> = dw
                            .iter()
                            .map(|&v| {
                                if kind == DeqKind::F16 { qkern_formats::fp::f32_to_f16(v).to_bits() } else { bf16(v) }
                            })
                            .collect();
                        // NaN matches any NaN (x86 propagates a payload, the GPU a canonical NaN)
                        let nan = |v: u16| {
                            if kind == DeqKind::F16 {
                                v & 0x7c00 == 0x7c00 && v & 0x3ff != 0
                            } else {
                                v & 0x7f80 == 0x7f80 && v & 0x7f != 0
                            }
                        };
                        let n = exp.iter().zip(&h).filter(|(a, b)| a != b && !(nan(**a) && nan(**b))).count();
                        row.add(if kind == DeqKind::F16 { "deq f16" } else { "deq bf16" }, n, exp.len());
                    }
                }
            }
        }
    }
    // chunked NT (11 and 19 tokens) through import of reference-quantized activations
    for nt in [11usize, 19] {
        let (rows, cols) = (45, 3 * unit);
        let w = random_blocks(rng, f, rows * cols / f.block_elems(), false);
        let x = floats(rng, Dist::Gaussian, nt * cols);
        let q = ref_quantize(act, cols, &x);
        let wt = b.upload_weights(f, rows, cols, &w).unwrap();
        let mut acts = b.alloc_acts(act, cols, nt).unwrap();
        b.import(&q, &mut acts).unwrap();
        let mut got = vec![0f32; nt * rows];
        b.matmul(&wt, &acts, nt, &mut got).unwrap();
        let want = ref_matmul(f, rows, cols, &w, &q, nt);
        row.add("chunked", diff(&want, &got), want.len());
    }
    // grouped: 19 jobs (two launches), different rows and tokens
    let cols = 2 * unit;
    let mut ws = Vec::new();
    let mut as_ = Vec::new();
    let mut want = Vec::new();
    for k in 0..19usize {
        let (rows, nt) = (3 + 5 * (k % 4), 1 + k % 9);
        let w = random_blocks(rng, f, rows * cols / f.block_elems(), false);
        let x = floats(rng, Dist::ALL[k % 8], nt * cols);
        let q = ref_quantize(act, cols, &x);
        want.extend(ref_matmul(f, rows, cols, &w, &q, nt));
        ws.push(b.upload_weights(f, rows, cols, &w).unwrap());
        let mut a = b.alloc_acts(act, cols, nt).unwrap();
        b.quantize(&x, &mut a).unwrap();
        as_.push((a, nt));
    }
    let jobs: Vec<_> = ws.iter().zip(&as_).map(|(w, (a, nt))| (w, a, *nt)).collect();
    let mut got = vec![0f32; want.len()];
    b.matmul_grouped_host(&jobs, &mut got).unwrap();
    row.add("grouped", diff(&want, &got), want.len());
    // MoE expert shapes: 640 x 2560 (gate/up) and 2560 x 640 (down; 32-element formats)
    let shape = if f.block_elems() == 256 { (640, 2560) } else { (2560, 640) };
    let (rows, cols) = shape;
    let nt = 4;
    let w = random_blocks(rng, f, rows * cols / f.block_elems(), false);
    let x = floats(rng, Dist::Gaussian, nt * cols);
    let q = ref_quantize(act, cols, &x);
    let wt = b.upload_weights(f, rows, cols, &w).unwrap();
    let mut acts = b.alloc_acts(act, cols, nt).unwrap();
    b.quantize(&x, &mut acts).unwrap();
    let mut got = vec![0f32; nt * rows];
    b.matmul(&wt, &acts, nt, &mut got).unwrap();
    row.add("expert", diff(&ref_matmul(f, rows, cols, &w, &q, nt), &got), nt * rows);
    // HostOut::Chunked (rows >= 2 * 65536): three row chunks, the last a partial tile; with
    // each wait mode
    let (rows, cols, nt) = (2 * 65536 + 37, unit, 3);
    let w = random_blocks(rng, f, rows * cols / f.block_elems(), false);
    let x = floats(rng, Dist::Gaussian, nt * cols);
    let q = ref_quantize(act, cols, &x);
    let want = ref_matmul(f, rows, cols, &w, &q, nt);
    let wt = b.upload_weights(f, rows, cols, &w).unwrap();
    let mut acts = b.alloc_acts(act, cols, nt).unwrap();
    b.quantize(&x, &mut acts).unwrap();
    b.set_host_out(HostOut::Chunked);
    for wm in [WaitMode::Sync, WaitMode::Flag] {
        b.set_wait_mode(wm);
        let mut got = vec![f32::NAN; nt * rows];
        b.matmul(&wt, &acts, nt, &mut got).unwrap();
        row.add("chunked out", diff(&want, &got), want.len());
    }
}

/// ggml `ggml_compute_fp32_to_bf16`.
fn bf16(f: f32) -> u16 {
    let u = f.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

/// `inputs::SPECIALS`, NaN, and zeros (weight of 3 in 24).
const SPECIALS: [f32; 24] = {
    let mut v = [0.0f32; 24];
    let mut i = 0;
    while i < qkern_parity::inputs::SPECIALS.len() {
        v[i] = qkern_parity::inputs::SPECIALS[i];
        i += 1;
    }
    v[20] = f32::NAN;
    v
};

#[test]
fn gpu_live_random() {
    let Some(b) = backend() else { return };
    let t0 = std::time::Instant::now();
    b.warm_up().unwrap();
    let mut text = format!("live random cases on {} (kernels compiled and loaded in {:.1?})\n", b.name(), t0.elapsed());
    let mut log = String::new();
    let mut rng = Rng::new(0xC0DA);
    let mut rows = Vec::new();
    // activation quantizers on special values (NaN payloads, infinities, ties, subnormals)
    let mut special = Row { format: Format::Q8_0, cells: Vec::new() };
    for act in Format::ACTIVATIONS {
        for trial in 0..64 {
            let cols = act.block_elems() * 2;
            let nt = 1 + trial % 3;
            let mut x = floats(&mut rng, Dist::ALL[trial % 8], nt * cols);
            for v in x.iter_mut() {
                if rng.below(3) == 0 {
                    *v = SPECIALS[rng.below(SPECIALS.len() as u64) as usize];
                    if rng.below(5) == 0 {
                        *v =
                            f32::from_bits([0x7FC0_1234, 0xFFA0_0001, 0x7F80_0001, 0xFFC0_0000][rng.below(4) as usize]);
                    }
                }
            }
            if trial % 4 != 0 {
                x.iter_mut().filter(|v| !v.is_finite()).for_each(|v| *v = 1.0);
            }
            let want = ref_quantize(act, cols, &x);
            let mut a = b.alloc_acts(act, cols, nt).unwrap();
            b.quantize(&x, &mut a).unwrap();
            let mut got = vec![0u8; want.len()];
            b.read_acts(&a, nt, &mut got).unwrap();
            let n = want.chunks(act.block_bytes()).zip(got.chunks(act.block_bytes())).filter(|(a, b)| a != b).count();
            special.add(format!("{act} specials"), n, want.len() / act.block_bytes());
            if n > 0 {
                writeln!(
                    log,
                    "{act} specials trial {trial}: {}",
                    qkern_parity::bytes_equal("", act.block_bytes(), &want, &got).unwrap_err()
                )
                .unwrap();
            }
        }
    }
    for f in Format::WEIGHTS {
        let t = std::time::Instant::now();
        let mut row = Row { format: f, cells: Vec::new() };
        live_format(&b, f, &mut rng, &mut row, &mut log);
        eprintln!("{f}: {:.1?}", t.elapsed());
        rows.push(row);
    }
    // table
    let mut heads: Vec<String> = Vec::new();
    for r in &rows {
        for c in &r.cells {
            if !heads.contains(&c.0) {
                heads.push(c.0.clone());
            }
        }
    }
    write!(text, "| format |").unwrap();
    for h in &heads {
        write!(text, " {h} |").unwrap();
    }
    writeln!(text).unwrap();
    writeln!(text, "|---|{}", "---|".repeat(heads.len())).unwrap();
    let mut ok = true;
    for r in &rows {
        write!(text, "| {} |", r.format).unwrap();
        for h in &heads {
            match r.cells.iter().find(|c| &c.0 == h) {
                Some((_, d, t)) => {
                    ok &= *d == 0;
                    if *d == 0 {
                        write!(text, " ok {t} |").unwrap()
                    } else {
                        write!(text, " **{d}/{t} differ** |").unwrap()
                    }
                }
                None => write!(text, " - |").unwrap(),
            }
        }
        writeln!(text).unwrap();
    }
    for (h, d, t) in &special.cells {
        ok &= *d == 0;
        writeln!(text, "{h}: {}", if *d == 0 { format!("ok {t} blocks") } else { format!("{d}/{t} blocks differ") })
            .unwrap();
    }
    if !log.is_empty() {
        writeln!(text, "\nmismatches:\n{log}").unwrap();
    }
    writeln!(text, "total time {:.1?}", t0.elapsed()).unwrap();
    println!("{text}");
    save("parity_live_cuda.txt", &text);
    assert!(ok, "CUDA results differ from the reference (table above)");
}

#[test]
fn gpu_errors_are_errors() {
    let Some(b) = backend() else { return };
    let w = b.upload_weights(Format::Q8_0, 2, 64, &[0u8; 2 * 68]).unwrap();
    let a = b.alloc_acts(Format::Q8_K, 256, 1).unwrap();
    let mut out = vec![0f32; 2];
    assert!(b.matmul(&w, &a, 1, &mut out).is_err(), "pairing");
    assert!(b.upload_weights(Format::Q8_0, 2, 64, &[0u8; 10]).is_err(), "length");
    let mut a0 = b.alloc_acts(Format::Q8_0, 64, 1).unwrap();
    let mut bad = vec![0u8; 68];
    bad[5] = 0x80;
    assert!(b.import(&bad, &mut a0).is_err(), "-128");
    assert!(CudaBackend::new(1000).is_err(), "device index");
}
