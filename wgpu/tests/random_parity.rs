//! The wgpu kernels against the scalar reference (`qkern_formats::reference`, itself checked
//! bit for bit against live ggml): for every weight format, random raw blocks, activations of
//! every distribution quantized on the device and compared byte for byte, dots for NT 1..=8
//! (and 11, two dispatches), odd block counts, rows that do not fill a workgroup; on the
//! default backend and on one with workgroup-memory reductions and weights split into parts.

mod common;

use qkern_formats::{Format, reference};
use qkern_parity::inputs::{Dist, Rng, floats, random_blocks};
use qkern_parity::{bits_equal, bytes_equal};
use qkern_wgpu::WgpuBackend;

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
    let act = f.vec_dot_type().unwrap();
    let cols = units * f.block_elems().max(act.block_elems());
    let mut rng = Rng::new(seed);
    let w = random_blocks(&mut rng, f, rows * cols / f.block_elems(), false);
    let tag = format!("{f} seed={seed:#x} rows={rows} cols={cols} nt={nt} {} [{}]", dist.name(), be.name());
    let e = |e: qkern_wgpu::WgpuError| format!("{tag}: {e}");
    let gw = be.upload_weights(f, rows, cols, &w).map_err(e)?;
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
    // NT 1..=8 and 11 (two dispatches); 1, 2, 3, 5 units of columns; 1, 7, 13 rows.
    for (i, nt) in (1..=8).chain([11]).enumerate() {
        let rows = [13, 7, 1][i % 3];
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
