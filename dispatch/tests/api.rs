//! The public API's validation: every bad input is a typed error, never a panic.

use proptest::prelude::*;
use qkern::{BackendSpec, CpuPath, Device, DeviceOptions, Error, Format, ShapeError, WeightsRef};

fn q8_0_weights(rows: usize, cols: usize) -> Vec<u8> {
    let dev = Device::cpu_with(CpuPath::Scalar, Some(1)).unwrap();
    // Quantize some floats with qkern's own q8_0 quantizer: they are valid q8_0 weights.
    let x: Vec<f32> = (0..rows * cols).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
    let mut acts = dev.activations(Format::Q8_0, cols, rows).unwrap();
    dev.quantize(&x, &mut acts).unwrap();
    acts.host_bytes().unwrap().to_vec()
}

/// The CPU has no copy reference (`qkern bench` sets its rows against the streaming read).
#[test]
fn cpu_has_no_copy_reference() {
    let d = Device::cpu().unwrap();
    assert_eq!(d.copy_gbps(1 << 20).unwrap(), None);
    assert_eq!(d.copy_gbps(0).unwrap(), None);
}

#[test]
fn weights_ref_validates() {
    let b = vec![0u8; 34 * 4];
    assert!(WeightsRef::new(Format::Q8_0, 2, 64, &b).is_ok());
    assert!(matches!(
        WeightsRef::new(Format::Q8_0, 3, 64, &b),
        Err(Error::Shape(ShapeError::ByteLength { expected: 204, got: 136, .. }))
    ));
    assert!(matches!(
        WeightsRef::new(Format::Q8_0, 2, 65, &b),
        Err(Error::Shape(ShapeError::ColsNotBlockMultiple { cols: 65, block: 32, .. }))
    ));
    assert!(matches!(WeightsRef::new(Format::Q8_0, 0, 64, &[]), Err(Error::Shape(ShapeError::ZeroRows))));
    assert!(matches!(WeightsRef::new(Format::Q8_0, 1, 0, &[]), Err(Error::Shape(ShapeError::ZeroCols))));
    assert!(matches!(WeightsRef::new(Format::Q8_0, usize::MAX, 64, &b), Err(Error::Shape(ShapeError::Overflow))));
    assert!(matches!(WeightsRef::new(Format::Q8_K, 1, 256, &[0; 292]), Err(Error::Shape(ShapeError::Role { .. }))));
    assert!(matches!(WeightsRef::new(Format::F32, 1, 1, &[0; 4]), Err(Error::Shape(ShapeError::Role { .. }))));
    assert!(matches!(WeightsRef::new(Format::Q4_K, 1, 640, &[0; 360]), Err(Error::Shape(_))));
}

#[test]
fn unknown_ids_names_and_backends() {
    assert!(matches!(Format::from_id(2), Err(qkern::FormatError::UnknownId(2))));
    assert!(matches!("q4_0".parse::<Format>(), Err(qkern::FormatError::UnknownName(_))));
    assert!(matches!(Device::parse("tpu", DeviceOptions::default()), Err(Error::UnknownBackend(_))));
    // Without the feature: "not built"; with it (a workspace build may unify it on), a machine
    // without the driver says the backend is unavailable, and one with it opens.
    let cuda_built = std::hint::black_box(cfg!(feature = "cuda"));
    match Device::open(BackendSpec::Cuda(0), DeviceOptions::default()) {
        Err(Error::NotBuilt("cuda")) => assert!(!cuda_built),
        Err(Error::Unavailable { backend, reason }) => {
            assert!(cuda_built && backend == "cuda:0" && !reason.is_empty())
        }
        Ok(_) => assert!(cuda_built),
        Err(e) => panic!("unexpected error {e}"),
    }
    if !cfg!(feature = "wgpu") {
        let e = Device::open(BackendSpec::Wgpu(None), DeviceOptions::default()).unwrap_err();
        assert_eq!(e.to_string(), "qkern was not built with wgpu (enable the `wgpu` cargo feature)");
    }
}

#[test]
fn matmul_validates_everything() {
    let dev = Device::cpu().unwrap();
    let other = Device::cpu().unwrap();
    let (rows, cols) = (3, 64);
    let wb = q8_0_weights(rows, cols);
    let w = dev.upload(WeightsRef::new(Format::Q8_0, rows, cols, &wb).unwrap()).unwrap();
    let mut acts = dev.activations_for(&w, 4).unwrap();
    let mut out = vec![0f32; rows * 2];
    assert!(matches!(dev.matmul(&w, &acts, &mut out), Err(Error::NoTokens)));
    let x = vec![0.25f32; cols * 2];
    dev.quantize(&x, &mut acts).unwrap();
    assert_eq!(acts.tokens(), 2);
    dev.matmul(&w, &acts, &mut out).unwrap();
    assert!(matches!(dev.matmul(&w, &acts, &mut out[..5]), Err(Error::Shape(ShapeError::Length { .. }))));
    assert!(matches!(dev.quantize(&vec![0.0; cols * 5], &mut acts), Err(Error::Capacity { capacity: 4, got: 5 })));
    assert!(matches!(dev.quantize(&x[..cols - 1], &mut acts), Err(Error::Shape(_))));
    assert!(matches!(dev.quantize(&[], &mut acts), Err(Error::Shape(_))));
    assert!(matches!(other.matmul(&w, &acts, &mut out), Err(Error::WrongDevice { .. })));
    let mut wide = dev.activations(Format::Q8_0, 128, 2).unwrap();
    dev.quantize(&vec![0.0; 128], &mut wide).unwrap();
    assert!(matches!(dev.matmul(&w, &wide, &mut out[..rows]), Err(Error::Cols { weights: 64, acts: 128 })));
    let mut k = dev.activations(Format::Q8_K, 256, 1).unwrap();
    dev.quantize(&vec![1.0; 256], &mut k).unwrap();
    assert!(matches!(dev.matmul(&w, &k, &mut out[..rows]), Err(Error::Shape(ShapeError::Pairing { .. }))));
    assert!(matches!(dev.activations(Format::Q4_K, 256, 1), Err(Error::Shape(ShapeError::Role { .. }))));
    assert!(matches!(dev.activations(Format::Q8_0, 64, 0), Err(Error::Shape(ShapeError::ZeroTokens))));
    assert!(matches!(dev.activations(Format::Q8_0, 32, usize::MAX), Err(Error::Shape(ShapeError::Overflow))));
}

#[test]
fn device_outputs_hold_the_matmul_and_validate() {
    let dev = Device::cpu().unwrap();
    let other = Device::cpu().unwrap();
    let (rows, cols) = (3, 64);
    let wb = q8_0_weights(rows, cols);
    let w = dev.upload(WeightsRef::new(Format::Q8_0, rows, cols, &wb).unwrap()).unwrap();
    let mut acts = dev.activations_for(&w, 4).unwrap();
    let x: Vec<f32> = (0..2 * cols).map(|i| (i as f32 * 0.37).sin()).collect();
    dev.quantize(&x, &mut acts).unwrap();
    let mut want = vec![0f32; 2 * rows];
    dev.matmul(&w, &acts, &mut want).unwrap();
    // a longer buffer: the result is its prefix, the rest untouched
    let mut out = dev.output(2 * rows + 4).unwrap();
    assert_eq!((out.len(), out.is_empty()), (2 * rows + 4, false));
    assert!(matches!(dev.matmul_into(&w, &acts, &mut out), Ok(())));
    dev.synchronize().unwrap();
    let mut got = vec![1f32; 2 * rows + 4];
    dev.read_output(&out, &mut got).unwrap();
    assert!(want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "{want:?} {got:?}");
    assert_eq!(&got[2 * rows..], &[0.0; 4]);
    // too short, read past the end, another device's buffer or weights
    let mut short = dev.output(2 * rows - 1).unwrap();
    assert!(matches!(dev.matmul_into(&w, &acts, &mut short), Err(Error::Shape(ShapeError::Length { .. }))));
    assert!(matches!(
        dev.read_output(&out, &mut vec![0f32; 2 * rows + 5]),
        Err(Error::Shape(ShapeError::Length { .. }))
    ));
    let mut theirs = other.output(2 * rows).unwrap();
    assert!(matches!(dev.matmul_into(&w, &acts, &mut theirs), Err(Error::WrongDevice { .. })));
    assert!(matches!(dev.read_output(&theirs, &mut got[..1]), Err(Error::WrongDevice { .. })));
    assert!(matches!(other.matmul_into(&w, &acts, &mut theirs), Err(Error::WrongDevice { .. })));
}

#[test]
fn grouped_matmuls_are_the_single_ones_and_validate() {
    let dev = Device::cpu().unwrap();
    let other = Device::cpu().unwrap();
    let cols = 64;
    let (wa, wb) = (q8_0_weights(3, cols), q8_0_weights(5, cols));
    let w3 = dev.upload(WeightsRef::new(Format::Q8_0, 3, cols, &wa).unwrap()).unwrap();
    let w5 = dev.upload(WeightsRef::new(Format::Q8_0, 5, cols, &wb).unwrap()).unwrap();
    let mut a1 = dev.activations_for(&w3, 4).unwrap();
    let mut a2 = dev.activations_for(&w3, 4).unwrap();
    dev.quantize(&(0..cols).map(|i| (i as f32 * 0.3).cos()).collect::<Vec<_>>(), &mut a1).unwrap();
    dev.quantize(&(0..2 * cols).map(|i| (i as f32 * 0.7).sin()).collect::<Vec<_>>(), &mut a2).unwrap();
    // job i's [tokens][rows] right after job i - 1's
    let mut want = vec![0f32; 3 + 10 + 6];
    dev.matmul(&w3, &a1, &mut want[..3]).unwrap();
    dev.matmul(&w5, &a2, &mut want[3..13]).unwrap();
    dev.matmul(&w3, &a2, &mut want[13..]).unwrap();
    let mut got = vec![f32::NAN; want.len()];
    dev.matmul_grouped(&[(&w3, &a1), (&w5, &a2), (&w3, &a2)], &mut got).unwrap();
    assert!(want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "{want:?} {got:?}");
    dev.matmul_grouped(&[], &mut []).unwrap();
    // the output's length, a job's tokens and pairing, another device's weights
    let length = |e| matches!(e, Error::Shape(ShapeError::Length { .. }));
    assert!(length(dev.matmul_grouped(&[(&w3, &a1), (&w5, &a2)], &mut got[..12]).unwrap_err()));
    let empty = dev.activations_for(&w3, 1).unwrap();
    assert!(matches!(dev.matmul_grouped(&[(&w3, &a1), (&w3, &empty)], &mut got[..4]), Err(Error::NoTokens)));
    let mut k = dev.activations(Format::Q8_K, 256, 1).unwrap();
    dev.quantize(&vec![1.0; 256], &mut k).unwrap();
    assert!(matches!(dev.matmul_grouped(&[(&w3, &k)], &mut got[..3]), Err(Error::Shape(ShapeError::Pairing { .. }))));
    assert!(matches!(other.matmul_grouped(&[(&w3, &a1)], &mut got[..3]), Err(Error::WrongDevice { .. })));
}

#[test]
fn grouped_quantize_is_the_single_ones_and_validates() {
    let dev = Device::cpu().unwrap();
    let other = Device::cpu().unwrap();
    let cols = 256;
    let x: Vec<f32> = (0..6 * cols).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
    for fmts in [[Format::Q8_0; 3], [Format::Q8_K, Format::Q8_1, Format::Q8_0]] {
        let mut acts: Vec<_> = fmts.iter().map(|&f| dev.activations(f, cols, 4).unwrap()).collect();
        // buffer 1 keeps an earlier token (0 tokens in the grouped call)
        dev.quantize(&x[..cols], &mut acts[1]).unwrap();
        let kept = acts[1].host_bytes().unwrap().to_vec();
        dev.quantize_grouped(&x, &[2, 0, 4], &mut acts).unwrap();
        assert_eq!((acts[0].tokens(), acts[1].tokens(), acts[2].tokens()), (2, 1, 4));
        assert_eq!(acts[1].host_bytes().unwrap(), &kept[..]);
        for (i, (lo, hi)) in [(0, 2), (2, 6)].into_iter().enumerate() {
            let mut one = dev.activations(fmts[2 * i], cols, 4).unwrap();
            dev.quantize(&x[lo * cols..hi * cols], &mut one).unwrap();
            assert_eq!(acts[2 * i].host_bytes().unwrap(), one.host_bytes().unwrap(), "{:?} job {}", fmts, 2 * i);
        }
    }
    let mut acts: Vec<_> = (0..2).map(|_| dev.activations(Format::Q8_0, cols, 4).unwrap()).collect();
    dev.quantize_grouped(&[], &[], &mut []).unwrap();
    dev.quantize_grouped(&[], &[0, 0], &mut acts).unwrap();
    let length = |e| matches!(e, Error::Shape(ShapeError::Length { .. }));
    assert!(length(dev.quantize_grouped(&x[..3 * cols], &[1, 1], &mut acts).unwrap_err()));
    assert!(length(dev.quantize_grouped(&x[..cols], &[1], &mut acts).unwrap_err()));
    assert!(length(dev.quantize_grouped(&x[..cols], &[], &mut []).unwrap_err()));
    assert!(matches!(
        dev.quantize_grouped(&x[..6 * cols], &[1, 5], &mut acts),
        Err(Error::Capacity { capacity: 4, got: 5 })
    ));
    let mut mixed =
        vec![dev.activations(Format::Q8_0, cols, 4).unwrap(), dev.activations(Format::Q8_0, 64, 4).unwrap()];
    assert!(matches!(
        dev.quantize_grouped(&x[..cols + 64], &[1, 1], &mut mixed),
        Err(Error::GroupCols { first: 256, other: 64 })
    ));
    assert!(matches!(other.quantize_grouped(&x[..cols], &[1, 0], &mut acts), Err(Error::WrongDevice { .. })));
}

#[test]
fn imported_activations_reject_minus_128() {
    let dev = Device::cpu().unwrap();
    let mut acts = dev.activations(Format::Q8_0, 64, 2).unwrap();
    // Valid q8_0 blocks: fp16 scale 1.0 (0x3c00), quants of 1.
    let mut bytes: Vec<u8> = (0..4).flat_map(|_| [0x00, 0x3c].into_iter().chain([1u8; 32])).collect();
    dev.import_activations(&bytes, &mut acts).unwrap();
    assert_eq!(acts.tokens(), 2);
    bytes[68 + 2 + 5] = 0x80; // token 1, block 0, quant 5
    let e = dev.import_activations(&bytes, &mut acts).unwrap_err();
    assert!(e.to_string().contains("-128 (token 1, block 0)"), "{e}");
    assert!(matches!(dev.import_activations(&bytes[..67], &mut acts), Err(Error::Shape(_))));
}

#[test]
fn results_do_not_depend_on_threads() {
    let (rows, cols) = (67, 96);
    let wb = q8_0_weights(rows, cols);
    let x: Vec<f32> = (0..cols * 3).map(|i| (i as f32 * 0.37).sin()).collect();
    let mut outs = Vec::new();
    for threads in [1, 2, 3, 5] {
        let dev = Device::cpu_with(CpuPath::Scalar, Some(threads)).unwrap();
        let w = dev.upload(WeightsRef::new(Format::Q8_0, rows, cols, &wb).unwrap()).unwrap();
        let mut acts = dev.activations_for(&w, 3).unwrap();
        dev.quantize(&x, &mut acts).unwrap();
        let mut out = vec![0f32; rows * 3];
        dev.matmul(&w, &acts, &mut out).unwrap();
        outs.push(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
    assert!(outs.windows(2).all(|p| p[0] == p[1]));
}

#[test]
fn unaligned_weights_are_copied_and_give_the_same_bits() {
    let (rows, cols) = (5, 64);
    let wb = q8_0_weights(rows, cols);
    let mut shifted = vec![0u8; wb.len() + 1];
    shifted[1..].copy_from_slice(&wb);
    let dev = Device::cpu().unwrap();
    let a = dev.upload(WeightsRef::new(Format::Q8_0, rows, cols, &wb).unwrap()).unwrap();
    let b = dev.upload(WeightsRef::new(Format::Q8_0, rows, cols, &shifted[1..]).unwrap()).unwrap();
    let mut acts = dev.activations_for(&a, 1).unwrap();
    dev.quantize(&vec![0.5; cols], &mut acts).unwrap();
    let (mut oa, mut ob) = (vec![0f32; rows], vec![0f32; rows]);
    dev.matmul(&a, &acts, &mut oa).unwrap();
    dev.matmul(&b, &acts, &mut ob).unwrap();
    assert_eq!(oa.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), ob.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    let mut d = vec![0f32; rows * cols];
    dev.dequantize(&b, &mut d).unwrap();
    assert!(matches!(dev.dequantize(&b, &mut d[1..]), Err(Error::Shape(_))));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    /// Random formats, shapes and bytes: either a typed error or a result, never a panic.
    #[test]
    fn random_bytes_and_shapes_never_panic(
        fmt in 0usize..Format::ALL.len(),
        rows in 0usize..6,
        cols in prop_oneof![0usize..600, Just(256usize), Just(512usize)],
        extra in -3isize..3,
        tokens in 0usize..4,
        seed in any::<u64>(),
    ) {
        let f = Format::ALL[fmt];
        let expect = f.matrix_bytes(rows, cols).unwrap_or(0);
        let len = (expect as isize + extra).max(0) as usize;
        let mut s = seed;
        let bytes: Vec<u8> = (0..len).map(|_| { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (s >> 56) as u8 }).collect();
        let dev = Device::cpu().unwrap();
        if let Ok(wr) = WeightsRef::new(f, rows, cols, &bytes) {
            let w = dev.upload(wr).unwrap();
            let mut d = vec![0f32; rows * cols];
            prop_assert!(dev.dequantize(&w, &mut d).is_ok());
            if let Ok(mut acts) = dev.activations_for(&w, 4) {
                let ab = w.act_format().row_bytes(cols).unwrap();
                let raw: Vec<u8> = bytes.iter().cycle().take(ab * tokens).copied().collect();
                if dev.import_activations(&raw, &mut acts).is_ok() {
                    let mut out = vec![0f32; rows * tokens];
                    prop_assert!(dev.matmul(&w, &acts, &mut out).is_ok());
                }
            }
        }
    }
}
