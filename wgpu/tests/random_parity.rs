//! The wgpu kernels against the scalar reference (`qkern_formats::reference`, itself checked
//! bit for bit against live ggml): for every weight format, random raw blocks, activations of
//! every distribution quantized on the device and compared byte for byte, dots for NT 1..=8
//! (and 11, two dispatches), odd block counts, rows that do not fill a workgroup; on the
//! default backend and on one with workgroup-memory reductions and weights split into parts.

mod common;

use qkern_formats::{Format, reference};
use qkern_parity::inputs::{Dist, Rng, floats, random_blocks};
use qkern_parity::{bits_equal, bytes_equal};
use qkern_wgpu::{Coop, Options, Tuning, WgpuBackend, WgpuError};

/// Raw random activation blocks without -128 bytes (outside the contract; see the crate docs).
fn raw_acts(rng: &mut Rng, act: Format, cols: usize, nt: usize) -> Vec<u8> {
    let mut v = random_blocks(rng, act, nt * cols / act.block_elems(), false);
    let bb = act.block_bytes();
    let (q0, q1) = match act {
        Format::Q8_0 => (2, 34),
        Format::Q8_1 => (4, 36),
        _ => (4, 260),
    };
    for b in v.chunks_exact_mut(bb) {
        for q in &mut b[q0..q1] {
            if *q == 0x80 {
                *q = 0x81;
            }
        }
    }
    v
}

fn case(
    be: &WgpuBackend,
    f: Format,
    seed: u64,
    rows: usize,
    units: usize,
    nt: usize,
    dist: Dist,
) -> Result<(), String> {
    case_then(be, f, seed, rows, units, nt, dist, &|| {})
}

/// [`case`], with `after_upload` run between the weights' upload and the calls.
#[allow(clippy::too_many_arguments)]
fn case_then(
    be: &WgpuBackend,
    f: Format,
    seed: u64,
    rows: usize,
    units: usize,
    nt: usize,
    dist: Dist,
    after_upload: &dyn Fn(),
) -> Result<(), String> {
    let act = f.vec_dot_type().unwrap();
    let cols = units * f.block_elems().max(act.block_elems());
    let mut rng = Rng::new(seed);
    let w = random_blocks(&mut rng, f, rows * cols / f.block_elems(), false);
    let tag = format!("{f} seed={seed:#x} rows={rows} cols={cols} nt={nt} {} [{}]", dist.name(), be.name());
    let e = |e: qkern_wgpu::WgpuError| format!("{tag}: {e}");
    let gw = be.upload_weights(f, rows, cols, &w).map_err(e)?;
    after_upload();
    if be.max_part_bytes() < 2048 && rows * (w.len() / rows) > 2048 && gw.parts() < 2 {
        return Err(format!("{tag}: expected the weights split into parts"));
    }

    // dequantize
    let mut want = vec![0f32; rows * cols];
    reference::dequantize_row(f, &w, &mut want).map_err(|x| x.to_string())?;
    let mut got = vec![0f32; rows * cols];
    be.dequantize(&gw, &mut got).map_err(e)?;
    bits_equal(format!("dequantize {tag}"), cols, &want, &got).map_err(|m| m.to_string())?;

    // activation quantize on the device
    let x = floats(&mut rng, dist, nt * cols);
    let arb = act.row_bytes(cols).unwrap();
    let mut qwant = vec![0u8; nt * arb];
    for (xr, qr) in x.chunks_exact(cols).zip(qwant.chunks_exact_mut(arb)) {
        reference::quantize_row(act, xr, qr).map_err(|x| x.to_string())?;
    }
    let mut ga = be.alloc_acts(act, cols, nt + 1).map_err(e)?;
    be.quantize(&x, &mut ga).map_err(e)?;
    let mut qgot = vec![0u8; nt * arb];
    be.read_acts(&ga, nt, &mut qgot).map_err(e)?;
    bytes_equal(&format!("quantize {act} {tag}"), act.block_bytes(), &qwant, &qgot)?;

    // dots on the device-quantized activations, then on raw random activation blocks
    for (which, a) in [("quantized", qwant), ("raw", raw_acts(&mut rng, act, cols, nt))] {
        be.import(&a, &mut ga).map_err(e)?;
        let mut want = vec![0f32; nt * rows];
        for r in 0..rows {
            let wr = &w[r * (w.len() / rows)..(r + 1) * (w.len() / rows)];
            let mut col = vec![0f32; nt];
            reference::dot_tokens(f, cols, wr, &a, &mut col).map_err(|x| x.to_string())?;
            for t in 0..nt {
                want[t * rows + r] = col[t];
            }
        }
        let mut got = vec![0f32; nt * rows];
        be.matmul(&gw, &ga, nt, &mut got).map_err(e)?;
        bits_equal(format!("dot ({which} activations) {tag}"), rows, &want, &got).map_err(|m| m.to_string())?;
    }
    Ok(())
}

fn run_format(f: Format) {
    let Some(be) = common::backend() else { return };
    let mut failures = Vec::new();
    let mut seeds = Rng::new(0xC0FFEE ^ f.id() as u64);
    // NT 1..=8 and 11 (two dispatches); 1, 2, 3, 5 units of columns; 1, 7, 13, 37 rows (the
    // pair layout tiles rows by 16: 37 has a short last tile).
    for (i, nt) in (1..=8).chain([11]).enumerate() {
        let rows = [13, 7, 1, 37][(i + i / 4) % 4];
        let units = [1, 3, 2, 5][i % 4];
        let dist = Dist::ALL[i % Dist::ALL.len()];
        if let Err(m) = case(be, f, seeds.next_u64(), rows, units, nt, dist) {
            failures.push(m);
        }
    }
    // The fallback reductions and split weights: fewer cases.
    if let Some(fb) = common::backend_fallback_split() {
        for (i, nt) in [1, 8].into_iter().enumerate() {
            if let Err(m) = case(fb, f, seeds.next_u64(), 21, [3, 2][i], nt, Dist::ALL[3 * i + 1]) {
                failures.push(m);
            }
        }
    }
    // The chunked readback (rows 37 and 70 make 2 and 3 chunks), copied to the chunks'
    // buffers and written there by the kernels (with weight parts ending inside chunks).
    for vb in [common::backend_chunked(), common::backend_chunked_direct()].into_iter().flatten() {
        for (i, nt) in [1, 3, 8].into_iter().enumerate() {
            if let Err(m) = case(vb, f, seeds.next_u64(), [13, 37, 70][i], [2, 1, 3][i], nt, Dist::ALL[i]) {
                failures.push(m);
            }
        }
    }
    // Staged activations (the pair formats and the thread pairs): every NT, several chunks a
    // row.
    if let Some(sb) = common::backend_staged() {
        assert!(sb.name().contains("staged activations from NT 1 (2 steps a chunk)"), "{}", sb.name());
        for (i, nt) in (1..=8).chain([11]).enumerate() {
            let rows = [13, 37, 1, 70][i % 4];
            if let Err(m) = case(sb, f, seeds.next_u64(), rows, [1, 3, 2][i % 3], nt, Dist::ALL[i % Dist::ALL.len()]) {
                failures.push(m);
            }
        }
    }
    // The cooperative-matrix kernels (q4_K, q5_K, the IQ2/IQ3 formats; native or emulated
    // tiles): every NT, short tiles.
    if matches!(
        f,
        Format::Q4_K
            | Format::Q5_K
            | Format::IQ2_XXS
            | Format::IQ2_XS
            | Format::IQ2_S
            | Format::IQ3_XXS
            | Format::IQ3_S
    ) && let Some(cb) = common::backend_coop()
    {
        for (i, nt) in (1..=8).chain([11]).enumerate() {
            let rows = [13, 37, 1, 70][i % 4];
            if let Err(m) = case(cb, f, seeds.next_u64(), rows, [1, 3, 2][i % 3], nt, Dist::ALL[i % Dist::ALL.len()]) {
                failures.push(m);
            }
        }
        // Long rows (40 blocks): lavapipe stops an invocation's loops after 65535 iterations
        // in all, which once cut the emulated tiles short from the 32nd block on.
        if let Err(m) = case(cb, f, seeds.next_u64(), 3, 40, 2, Dist::ALL[1]) {
            failures.push(m);
        }
    }
    // q4_K's, q5_K's and the IQ2/IQ3 formats' blocks in ggml's row order (`Options::ktile`
    // off; the other backends tile them) on the generic two-row kernel (weights in parts,
    // chunked readback), q4_K's and q5_K's own two-row bodies (staged, no subgroups) and the
    // cooperative matrices: every NT, short tiles.
    if qkern_wgpu::ktile_applies(f) {
        for kb in
            [common::backend_rowmajor_generic(), common::backend_rowmajor_staged(), common::backend_rowmajor_coop()]
                .into_iter()
                .flatten()
        {
            assert!(!kb.name().contains("tiled K-quants"), "{}", kb.name());
            for (i, nt) in (1..=8).enumerate() {
                let rows = [13, 37, 1, 70][i % 4];
                if let Err(m) =
                    case(kb, f, seeds.next_u64(), rows, [1, 3, 2][i % 3], nt, Dist::ALL[i % Dist::ALL.len()])
                {
                    failures.push(m);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failing case(s):\n{}", failures.len(), failures.join("\n"));
}

/// A weight matrix keeps the layout it was uploaded with: q4_K, q5_K and the IQ2/IQ3 formats
/// uploaded tiled (`Tuning::ktile`) and called (dequantize, matmul) after it was switched off,
/// and the reverse, give the reference's bits.
#[test]
fn weights_keep_their_layout() {
    let Some(be) = common::backend_ktile_switch() else { return };
    let mut seeds = Rng::new(0x1a70);
    for f in Format::WEIGHTS.into_iter().filter(|&f| qkern_wgpu::ktile_applies(f)) {
        for first in [true, false] {
            be.set_tuning(Tuning { ktile: first, ..be.tuning() });
            let flip = || {
                be.set_tuning(Tuning { ktile: !first, ..be.tuning() });
            };
            case_then(be, f, seeds.next_u64(), 37, 2, 3, Dist::ALL[0], &flip).unwrap();
            assert_eq!(be.tuning().ktile, !first);
        }
    }
}

/// Results large enough (72000 floats) to be copied out by several threads, read back in one
/// piece (the fallback backend) and in 3 chunks of 8 token rows each.
#[test]
fn large_result_parallel_copy() {
    let mut failures = Vec::new();
    for (k, be) in [common::backend_fallback_split(), common::backend_chunked()].into_iter().enumerate() {
        let Some(be) = be else { return };
        assert!(be.copy_threads() > 1, "{}: expected several copy threads", be.name());
        for (f, rows) in [(Format::Q8_0, 9000), (Format::Q4_K, 9001)] {
            if let Err(m) = case(be, f, 0x5EED + k as u64, rows, 1, 8, Dist::ALL[k]) {
                failures.push(m);
            }
        }
    }
    assert!(failures.is_empty(), "{} failing case(s):\n{}", failures.len(), failures.join("\n"));
}

/// Calls large enough to stage their activations on wider workgroups by default
/// (`qkern_wgpu::STAGE_ROWS` rows of a pair format: 128 rows a workgroup, staged from one
/// token; 20 units of columns, several chunks at 8 tokens), and one row fewer (staged on the
/// usual 32 rows, a partial last workgroup).
#[test]
fn large_calls_stage_by_default() {
    let Some(be) = common::backend() else { return };
    assert!(be.name().contains("staged activations by size"), "{}", be.name());
    let mut failures = Vec::new();
    for (i, f) in [Format::Q8_0, Format::Q5_1, Format::IQ4_NL, Format::NVFP4].into_iter().enumerate() {
        for (k, nt) in [1, 8, 11].into_iter().enumerate() {
            let rows = qkern_wgpu::STAGE_ROWS - usize::from(k == 2);
            let seed = 0x57A6E + (8 * i + k) as u64;
            if let Err(m) = case(be, f, seed, rows, 20, nt, Dist::ALL[(i + k) % Dist::ALL.len()]) {
                failures.push(m);
            }
        }
    }
    assert!(failures.is_empty(), "{} failing case(s):\n{}", failures.len(), failures.join("\n"));
}

/// The same for the thread-pair formats (the K-quants, iq4_xs, and iq2_xs and iq3_s where tiled,
/// on 64 rows a workgroup, the other IQ2/IQ3 formats on theirs, each staged at the token counts
/// its default names): one token,
/// and 11 (a dispatch of 8 and one of 3), on two blocks of 256 columns. (Small calls stage
/// the same way on their usual rows: every test of this file runs them.)
#[test]
fn large_thread_pair_calls_stage_by_default() {
    let Some(be) = common::backend() else { return };
    let mut failures = Vec::new();
    let formats = [
        Format::Q4_K,
        Format::Q5_K,
        Format::Q6_K,
        Format::IQ4_XS,
        Format::IQ2_XXS,
        Format::IQ2_XS,
        Format::IQ2_S,
        Format::IQ3_XXS,
        Format::IQ3_S,
    ];
    for (i, f) in formats.into_iter().enumerate() {
        for (k, nt) in [1, 11].into_iter().enumerate() {
            let seed = 0x57A7E + (8 * i + k) as u64;
            if let Err(m) = case(be, f, seed, qkern_wgpu::STAGE_ROWS, 2, nt, Dist::ALL[(i + k) % Dist::ALL.len()]) {
                failures.push(m);
            }
        }
    }
    assert!(failures.is_empty(), "{} failing case(s):\n{}", failures.len(), failures.join("\n"));
}

macro_rules! formats {
    ($($name:ident => $f:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            run_format($f);
        }
    )*};
}

formats! {
    q8_0 => Format::Q8_0,
    q5_1 => Format::Q5_1,
    q4_k => Format::Q4_K,
    q5_k => Format::Q5_K,
    q6_k => Format::Q6_K,
    iq2_xxs => Format::IQ2_XXS,
    iq2_xs => Format::IQ2_XS,
    iq2_s => Format::IQ2_S,
    iq3_xxs => Format::IQ3_XXS,
    iq3_s => Format::IQ3_S,
    iq4_nl => Format::IQ4_NL,
    iq4_xs => Format::IQ4_XS,
    nvfp4 => Format::NVFP4,
}

/// Byte offsets of the fp16 scales in a weight block (nvfp4: its four UE4M3 bytes).
fn weight_scales(f: Format) -> &'static [usize] {
    match f {
        Format::Q5_1 | Format::Q4_K | Format::Q5_K => &[0, 2],
        Format::Q6_K => &[208],
        Format::NVFP4 => &[],
        _ => &[0],
    }
}

/// Dots with scales at the bottom of their range, against the reference. `tiny_q8k`: q8_K
/// activation scales `d` from 2^-149 (subnormal) to 2^-77, below the FTZ-safe bound; else
/// the smallest fp16 scales (subnormal fp16: weights, q8_0/q8_1 activations) and q8_K scales
/// of 2^-76..2^-60. Returns (differing dots, dots).
fn tiny_case(be: &WgpuBackend, f: Format, seed: u64, tiny_q8k: bool) -> Result<(usize, usize), String> {
    let act = f.vec_dot_type().unwrap();
    let (rows, nt) = (9, 3);
    let cols = 2 * f.block_elems().max(act.block_elems());
    let mut rng = Rng::new(seed);
    let mut w = random_blocks(&mut rng, f, rows * cols / f.block_elems(), false);
    for b in w.chunks_exact_mut(f.block_bytes()) {
        for &o in weight_scales(f) {
            let h = (rng.next_u64() % 0x400) as u16 | ((rng.next_u64() & 1) as u16) << 15;
            b[o..o + 2].copy_from_slice(&h.to_le_bytes());
        }
        if f == Format::NVFP4 {
            for x in &mut b[..4] {
                *x = 1 + (rng.next_u64() % 7) as u8; // UE4M3 subnormals
            }
        }
    }
    let mut a = raw_acts(&mut rng, act, cols, nt);
    for b in a.chunks_exact_mut(act.block_bytes()) {
        match act {
            Format::Q8_K => {
                let (lo, hi) = if tiny_q8k { (-149i32, -77) } else { (-76, -60) };
                let e = lo + (rng.next_u64() % (hi - lo + 1) as u64) as i32;
                let m = 1.0 + (rng.next_u64() % (1 << 23)) as f32 / (1 << 23) as f32;
                let d =
                    if e < -126 { f32::from_bits((rng.next_u64() % 0x80_0000) as u32 | 1) } else { m * 2f32.powi(e) };
                b[..4].copy_from_slice(&d.to_le_bytes());
            }
            _ => {
                for o in if act == Format::Q8_1 { 0..2 } else { 0..1 } {
                    let h = (rng.next_u64() % 0x400) as u16 | ((rng.next_u64() & 1) as u16) << 15;
                    b[2 * o..2 * o + 2].copy_from_slice(&h.to_le_bytes());
                }
            }
        }
    }
    let tag = format!("{f} seed={seed:#x} tiny_q8k={tiny_q8k} [{}]", be.name());
    let e = |e: qkern_wgpu::WgpuError| format!("{tag}: {e}");
    let gw = be.upload_weights(f, rows, cols, &w).map_err(e)?;
    let mut ga = be.alloc_acts(act, cols, nt).map_err(e)?;
    be.import(&a, &mut ga).map_err(e)?;
    let rb = w.len() / rows;
    let mut want = vec![0f32; nt * rows];
    for r in 0..rows {
        let mut col = vec![0f32; nt];
        reference::dot_tokens(f, cols, &w[r * rb..(r + 1) * rb], &a, &mut col).map_err(|x| x.to_string())?;
        for t in 0..nt {
            want[t * rows + r] = col[t];
        }
    }
    let mut got = vec![0f32; nt * rows];
    be.matmul(&gw, &ga, nt, &mut got).map_err(e)?;
    let differ = want.iter().zip(&got).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
    Ok((differ, want.len()))
}

/// Subnormal-range scales. Within the kernels' FTZ-safe domain (any fp16 scale, subnormal
/// ones included; q8_K activation scales of at least 2^-76) every adapter must be bit-exact,
/// flush-to-zero or not: every chain value is a multiple of a power of two >= 2^-126 (crate
/// docs, "Subnormals"). Below it (q8_K scales < 2^-76) an adapter that keeps subnormals must
/// be exact too; one that flushes them (NVIDIA's Vulkan driver) is only reported.
#[test]
fn tiny_scales() {
    let Some(be) = common::backend() else { return };
    let mut failures = Vec::new();
    let mut below = (0, 0);
    for f in Format::WEIGHTS {
        for k in 0..4u64 {
            let seed = 0x7111 ^ (f.id() as u64) << 8 ^ k;
            match tiny_case(be, f, seed, false) {
                Ok((0, _)) => {}
                Ok((d, n)) => failures.push(format!("{f} seed={seed:#x}: {d}/{n} dots differ (FTZ-safe domain)")),
                Err(m) => failures.push(m),
            }
            if f.vec_dot_type() == Some(Format::Q8_K) {
                match tiny_case(be, f, seed ^ 0x55, true) {
                    Ok((d, n)) => {
                        below.0 += d;
                        below.1 += n;
                        if d > 0 && !be.flushes_subnormals() {
                            failures.push(format!("{f} seed={seed:#x}: {d}/{n} dots differ (tiny q8_K scales)"));
                        }
                    }
                    Err(m) => failures.push(m),
                }
            }
        }
    }
    eprintln!(
        "tiny q8_K activation scales (< 2^-76) on {}: {}/{} dots differ from the reference{}",
        be.name(),
        below.0,
        below.1,
        if be.flushes_subnormals() { " (FTZ adapter: outside the kernels' domain there)" } else { "" }
    );
    assert!(failures.is_empty(), "{} failing case(s):\n{}", failures.len(), failures.join("\n"));
}

/// Cooperative-matrix tiles asked for on an adapter without them (lavapipe) are a typed error
/// naming the adapter, not a silent fallback; where it has them the device opens with them.
#[test]
fn coop_native_needs_the_tiles() {
    let Some(be) = common::backend() else { return };
    for coop in [Coop::Native(1), Coop::NativeWords(4)] {
        match (
            WgpuBackend::with_options(common::index(), Options { coop: Some(coop), ..Options::default() }),
            be.supports_coop(),
        ) {
            (Ok(b), true) => assert_eq!(b.tuning().coop, coop),
            (Err(WgpuError::Unsupported(m)), false) => {
                assert!(m.contains("cooperative matrices") && m.contains(&be.adapter_info().name), "{m}")
            }
            (Ok(_), false) => panic!("{coop:?} opened on {}, which has no cooperative tiles", be.name()),
            (Err(e), _) => panic!("{coop:?}: {e}"),
        }
    }
}

/// One grouped quantize (one submission) gives each buffer the reference's bytes, leaves a
/// buffer of 0 tokens as it was, and refuses mixed widths and a wrong input length.
#[test]
fn grouped_quantize_is_the_reference() {
    let Some(be) = common::backend() else { return };
    let mut rng = Rng::new(0x960);
    for act in [Format::Q8_0, Format::Q8_1, Format::Q8_K] {
        let cols = 2 * act.block_elems();
        let arb = act.row_bytes(cols).unwrap();
        let tokens = [2usize, 0, 3, 1];
        let x = floats(&mut rng, Dist::ALL[act as usize % Dist::ALL.len()], tokens.iter().sum::<usize>() * cols);
        let mut bufs: Vec<_> = (0..tokens.len()).map(|_| be.alloc_acts(act, cols, 4).unwrap()).collect();
        // the 0-token buffer holds one earlier token
        let earlier = floats(&mut rng, Dist::ALL[0], cols);
        be.quantize(&earlier, &mut bufs[1]).unwrap();
        let mut jobs: Vec<_> = bufs.iter_mut().zip(tokens).collect();
        be.quantize_grouped(&x, &mut jobs).unwrap();
        let mut off = 0;
        for (i, &nt) in tokens.iter().enumerate() {
            let (src, n) = if nt == 0 { (&earlier[..], 1) } else { (&x[off * cols..(off + nt) * cols], nt) };
            let mut want = vec![0u8; n * arb];
            for (xr, qr) in src.chunks_exact(cols).zip(want.chunks_exact_mut(arb)) {
                reference::quantize_row(act, xr, qr).unwrap();
            }
            let mut got = vec![0u8; n * arb];
            be.read_acts(&bufs[i], n, &mut got).unwrap();
            if let Err(m) = bytes_equal(&format!("grouped quantize {act} job {i}"), act.block_bytes(), &want, &got) {
                panic!("{m}");
            }
            off += nt;
        }
        let mut narrow = be.alloc_acts(act, cols / 2, 4).unwrap();
        let (a, b) = bufs.split_at_mut(1);
        let mut jobs = [(&mut a[0], 1), (&mut narrow, 1)];
        assert!(be.quantize_grouped(&x[..cols + cols / 2], &mut jobs).is_err());
        let mut jobs = [(&mut a[0], 1), (&mut b[0], 1)];
        assert!(be.quantize_grouped(&x[..cols], &mut jobs).is_err());
        let mut jobs = [(&mut a[0], 5)];
        assert!(be.quantize_grouped(&x[..5 * cols], &mut jobs).is_err());
    }
}

/// A grouped quantize of more jobs than one submission's parameter slots, of two formats, and
/// one whose input exceeds a storage binding (where the adapter's limit is small enough to
/// try): every buffer the reference's bytes, and buffers quantized before the shared input
/// grew still right after it.
#[test]
fn grouped_quantize_splits_its_runs() {
    let Some(be) = common::backend() else { return };
    let mut rng = Rng::new(0x961);
    // Each job's bytes against the reference.
    let check = |be: &WgpuBackend, x: &[f32], bufs: &[qkern_wgpu::WgpuActs], tokens: &[usize], what: &str| {
        let mut off = 0;
        for (i, (a, &nt)) in bufs.iter().zip(tokens).enumerate() {
            let (act, cols) = (a.format(), a.cols());
            let arb = act.row_bytes(cols).unwrap();
            let mut want = vec![0u8; nt * arb];
            for (xr, qr) in x[off..off + nt * cols].chunks_exact(cols).zip(want.chunks_exact_mut(arb)) {
                reference::quantize_row(act, xr, qr).unwrap();
            }
            let mut got = vec![0u8; nt * arb];
            be.read_acts(a, nt, &mut got).unwrap();
            if let Err(m) = bytes_equal(&format!("{what}: job {i} ({act})"), act.block_bytes(), &want, &got) {
                panic!("{m}");
            }
            off += nt * cols;
        }
    };
    let cols = 256;
    let tokens: Vec<usize> = (0..150).map(|i| [1, 2, 1, 3][i % 4]).collect();
    let mut bufs: Vec<_> = (0..tokens.len())
        .map(|i| be.alloc_acts([Format::Q8_0, Format::Q8_K, Format::Q8_1][i % 3], cols, 3).unwrap())
        .collect();
    let x = floats(&mut rng, Dist::ALL[0], tokens.iter().sum::<usize>() * cols);
    let mut jobs: Vec<_> = bufs.iter_mut().zip(tokens.iter().copied()).collect();
    be.quantize_grouped(&x, &mut jobs).unwrap();
    check(be, &x, &bufs, &tokens, "150 jobs");

    let limit = be.limits().max_storage_buffer_binding_size.min(be.limits().max_buffer_size);
    if limit > 256 << 20 {
        eprintln!("binding limit {limit} bytes: the split by input size is left untried on {}", be.name());
        return;
    }
    // Two jobs of 0.6 binding each: two submissions, the shared input grown to the limit.
    let cols = 4096;
    let nt = (limit as usize * 6 / 10) / (cols * 4);
    let mut big: Vec<_> = (0..2).map(|_| be.alloc_acts(Format::Q8_0, cols, nt).unwrap()).collect();
    let xb = floats(&mut rng, Dist::ALL[1], 2 * nt * cols);
    let mut jobs: Vec<_> = big.iter_mut().map(|a| (a, nt)).collect();
    be.quantize_grouped(&xb, &mut jobs).unwrap();
    check(be, &xb, &big, &[nt, nt], "two jobs over one binding");
    drop(big);
    // The small buffers again, their bind groups made anew for the grown input.
    let x = floats(&mut rng, Dist::ALL[2], x.len());
    let mut jobs: Vec<_> = bufs.iter_mut().zip(tokens.iter().copied()).collect();
    be.quantize_grouped(&x, &mut jobs).unwrap();
    check(be, &x, &bufs, &tokens, "150 jobs after the input grew");
}
