//! The committed ggml reference vectors (`parity/vectors/*.qkv`) on every CPU path this
//! machine runs, with 1 and 2 threads: every dequantized value, quantized activation block
//! and dot must be bit-equal to ggml's. No ggml needed (except the last test, which checks
//! that the committed files are what live ggml gives today).
//!
//! Also: the file format's reader gives a typed error, never a panic, on damaged files.
//!
//! `cargo test -p qkern-parity --test vectors -- --nocapture` prints the report tables.

use qkern::Device;
use qkern_formats::Format;
use qkern_parity::inputs::{Dist, Rng};
use qkern_parity::run::{self, Report};
use qkern_parity::vectors::{
    self, CASE_BYTES, Case, DEFAULT_SEED, GGML_VERSION, HEADER_BYTES, Header, Isa, VectorError, VectorFile,
    WeightSource,
};

fn devices() -> Vec<Device> {
    let mut v = Vec::new();
    for p in qkern_cpu::available_paths() {
        for t in [1, 2] {
            v.push(Device::cpu_with(p, Some(t)).expect("open CPU device"));
        }
    }
    v
}

fn check_format(f: Format) {
    let file = vectors::load_committed(f).unwrap_or_else(|e| panic!("{f}: {e}"));
    assert_eq!(file.header.format, f);
    let mut report = Report::default();
    for dev in devices() {
        report.extend(run::run_file(&dev, &file).unwrap_or_else(|e| panic!("{f} on {}: {e}", dev.name())));
    }
    println!("{report}");
    assert!(report.all_equal(), "{f}: not bit-equal to ggml\n{report}");
}

macro_rules! vector_tests {
    ($($name:ident => $fmt:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            check_format($fmt);
        }
    )*};
}

vector_tests! {
    vectors_q8_0 => Format::Q8_0,
    vectors_q5_1 => Format::Q5_1,
    vectors_q4_k => Format::Q4_K,
    vectors_q5_k => Format::Q5_K,
    vectors_q6_k => Format::Q6_K,
    vectors_iq2_xxs => Format::IQ2_XXS,
    vectors_iq2_xs => Format::IQ2_XS,
    vectors_iq2_s => Format::IQ2_S,
    vectors_iq3_xxs => Format::IQ3_XXS,
    vectors_iq3_s => Format::IQ3_S,
    vectors_iq4_nl => Format::IQ4_NL,
    vectors_iq4_xs => Format::IQ4_XS,
    vectors_nvfp4 => Format::NVFP4,
}

/// Every weight format has a file; its header names the pinned ggml build; its cases follow
/// the plan; the directory holds nothing else and stays small.
#[test]
fn committed_files_are_complete() {
    let mut total = 0u64;
    for f in Format::WEIGHTS {
        let file = vectors::load_committed(f).unwrap_or_else(|e| panic!("{f}: {e}"));
        let h = &file.header;
        assert_eq!((h.format, Some(h.act)), (f, f.vec_dot_type()), "{f}");
        assert_eq!(h.ggml_version, GGML_VERSION, "{f}");
        assert_eq!(h.isa, Isa::PINNED, "{f}: vectors from another ggml build");
        assert_eq!(h.seed, vectors::file_seed(DEFAULT_SEED, f), "{f}");
        let plan = vectors::plan(f);
        assert_eq!(file.cases.len(), plan.len(), "{f}");
        for (i, (c, p)) in file.cases.iter().zip(&plan).enumerate() {
            assert_eq!(
                (c.rows, c.cols, c.nt, c.weight_source, c.act_dist),
                (p.rows, p.cols, p.nt, p.weights, p.act),
                "{f} case {i}"
            );
            assert_eq!(
                c.imatrix,
                matches!(f, Format::IQ2_XXS | Format::IQ2_XS) && c.weight_source != WeightSource::RawBlocks
            );
        }
        // what the plan promises: NT 1..=8, every activation distribution, every weight
        // source, one block up to 14336, a non-power-of-two length
        for nt in 1..=8 {
            assert!(file.cases.iter().any(|c| c.nt == nt), "{f}: no case with NT {nt}");
        }
        for d in Dist::ALL {
            assert!(file.cases.iter().any(|c| c.act_dist == d), "{f}: no activations {}", d.name());
        }
        for w in vectors::WEIGHT_SOURCES {
            assert!(file.cases.iter().any(|c| c.weight_source == w), "{f}: no weights {}", w.name());
        }
        // NaN payloads are not part of the contract (see live_ggml.rs): the vectors stay finite
        // so that bit-for-bit equality is exactly the contract.
        for (i, c) in file.cases.iter().enumerate() {
            let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
            assert!(finite(&c.dequant) && finite(&c.act_f32) && finite(&c.dots), "{f} case {i}: non-finite values");
        }
        assert!(file.cases.iter().any(|c| c.cols == vectors::unit_cols(f)));
        assert!(file.cases.iter().any(|c| c.cols == 14336));
        assert!(file.cases.iter().any(|c| !c.cols.is_power_of_two() && c.cols > 2 * vectors::unit_cols(f)));
        total += std::fs::metadata(vectors::committed_dir().join(vectors::file_name(f))).unwrap().len();
    }
    for e in std::fs::read_dir(vectors::committed_dir()).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".qkv") {
            assert!(Format::WEIGHTS.iter().any(|f| vectors::file_name(*f) == name), "stray vector file {name}");
        }
    }
    assert!(total <= 6 << 20, "the committed vectors grew to {total} bytes");
}

/// Reading and writing give back the same bytes.
#[test]
fn committed_files_round_trip() {
    for f in Format::WEIGHTS {
        let path = vectors::committed_dir().join(vectors::file_name(f));
        let bytes = std::fs::read(&path).unwrap();
        let file = VectorFile::parse(&bytes).unwrap();
        assert_eq!(file.to_bytes().unwrap(), bytes, "{f}");
    }
}

/// The report counts and names a planted difference (q8_0's kernels are complete).
#[test]
fn report_names_a_planted_mismatch() {
    let mut file = vectors::load_committed(Format::Q8_0).unwrap();
    let nt3: Vec<usize> = (0..file.cases.len()).filter(|&i| file.cases[i].nt == 3).collect();
    let (i, j) = (nt3[0], nt3[1]);
    let c = &mut file.cases[i];
    let k = c.rows + 1; // token 1, row 1
    c.dots[k] = f32::from_bits(c.dots[k].to_bits() ^ 1);
    c.dequant[5] = -c.dequant[5] - 1.0;
    // In another case of the same NT (the dots there use these bytes too, so they change).
    file.cases[j].act_q[3] ^= 0x40;
    let dev = Device::cpu_with(qkern::CpuPath::Scalar, Some(1)).unwrap();
    let r = run::run_case(&dev, &file, i).unwrap();
    assert_eq!(r.dot.total - r.dot.equal, 1);
    assert_eq!(r.dequant.total - r.dequant.equal, 1);
    assert!(r.quant.all_equal());
    let dot = &r.mismatches.iter().find(|m| m.0 == run::Op::Dot).unwrap().1;
    assert_eq!((dot.token, dot.row, dot.differing), (1, 1, 1));
    let deq = &r.mismatches.iter().find(|m| m.0 == run::Op::Dequant).unwrap().1;
    assert_eq!((deq.token, deq.row, deq.differing), (0, 5, 1));
    let r = run::run_case(&dev, &file, j).unwrap();
    assert_eq!(r.quant.total - r.quant.equal, 1);
    let q = &r.mismatches.iter().find(|m| m.0 == run::Op::Quant).unwrap().1;
    assert_eq!((q.token, q.row, q.differing), (0, 0, 1));
    let report = run::run_file(&dev, &file).unwrap();
    assert!(!report.all_equal());
    let text = report.to_string();
    assert!(text.contains("MISMATCH") && text.contains("first mismatches"), "{text}");
    let line = report.lines.iter().find(|l| l.nt == 3).unwrap();
    assert_eq!(line.first.len(), 3, "{text}");
}

// ---- damaged files ----

/// A tiny valid file: q8_0, one 1x32 case, one token (values need not be ggml's here).
fn tiny() -> VectorFile {
    let mut rng = Rng::new(1);
    let mut weights = vec![0u8; 34];
    rng.fill_bytes(&mut weights);
    let mut act_q = vec![0u8; 34];
    rng.fill_bytes(&mut act_q);
    VectorFile {
        header: Header {
            format: Format::Q8_0,
            act: Format::Q8_0,
            ggml_version: GGML_VERSION.into(),
            isa: Isa::PINNED,
            seed: 9,
        },
        cases: vec![Case {
            rows: 1,
            cols: 32,
            nt: 1,
            weight_source: WeightSource::RawBlocks,
            act_dist: Dist::Ties,
            imatrix: false,
            seed: 3,
            weights,
            dequant: (0..32).map(|i| i as f32).collect(),
            act_f32: (0..32).map(|i| -(i as f32)).collect(),
            act_q,
            dots: vec![f32::from_bits(0x7fc0_0001)],
        }],
    }
}

fn edited(f: impl FnOnce(&mut Vec<u8>)) -> Result<VectorFile, VectorError> {
    let mut b = tiny().to_bytes().unwrap();
    f(&mut b);
    vectors::reseal(&mut b);
    VectorFile::parse(&b)
}

#[test]
fn tiny_file_round_trips_bits() {
    let t = tiny();
    let b = t.to_bytes().unwrap();
    assert_eq!(b.len(), HEADER_BYTES + CASE_BYTES + 34 + 128 + 128 + 34 + 4 + 8);
    let back = VectorFile::parse(&b).unwrap();
    // NaN payloads survive (PartialEq on f32 would not say so).
    assert_eq!(back.cases[0].dots[0].to_bits(), 0x7fc0_0001);
    assert_eq!(back.to_bytes().unwrap(), b);
}

/// Every truncation and every single-bit flip is a typed error.
#[test]
fn every_truncation_and_bit_flip_is_an_error() {
    let b = tiny().to_bytes().unwrap();
    for n in 0..b.len() {
        match VectorFile::parse(&b[..n]) {
            Err(VectorError::Truncated { .. }) => {}
            other => panic!("truncated to {n}: {other:?}"),
        }
    }
    for i in 0..b.len() {
        for bit in 0..8 {
            let mut c = b.clone();
            c[i] ^= 1 << bit;
            assert!(VectorFile::parse(&c).is_err(), "flip of byte {i} bit {bit} accepted");
        }
    }
    let mut longer = b.clone();
    longer.push(0);
    assert!(matches!(VectorFile::parse(&longer), Err(VectorError::Trailing { extra: 1 })));
}

/// Damage to a committed file, at random places: always an error, never a panic.
#[test]
fn damaged_committed_file_is_an_error() {
    let b = std::fs::read(vectors::committed_dir().join(vectors::file_name(Format::IQ4_NL))).unwrap();
    let mut rng = Rng::new(42);
    for _ in 0..200 {
        let n = rng.below(b.len() as u64) as usize;
        assert!(matches!(VectorFile::parse(&b[..n]), Err(VectorError::Truncated { .. })), "truncated to {n}");
        let mut c = b.clone();
        let i = rng.below(c.len() as u64) as usize;
        c[i] ^= 1 + rng.below(255) as u8;
        assert!(VectorFile::parse(&c).is_err(), "damage at byte {i} accepted");
    }
    // garbage that starts like a vector file
    for _ in 0..200 {
        let mut c = vec![0u8; rng.below(2048) as usize + 96];
        rng.fill_bytes(&mut c);
        c[..8].copy_from_slice(&vectors::MAGIC);
        c[8..12].copy_from_slice(&1u32.to_le_bytes());
        assert!(VectorFile::parse(&c).is_err());
    }
}

#[test]
fn header_errors_are_typed() {
    let put = |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    assert!(matches!(edited(|b| b[0] = b'X'), Err(VectorError::Magic(_))));
    assert!(matches!(edited(|b| put(b, 8, 2)), Err(VectorError::Version(2))));
    assert!(matches!(edited(|b| put(b, 12, 64)), Err(VectorError::Header { field: "header bytes", .. })));
    assert!(matches!(edited(|b| put(b, 20, 0)), Err(VectorError::Header { field: "number of cases", .. })));
    assert!(matches!(edited(|b| put(b, 20, u32::MAX)), Err(VectorError::Header { field: "number of cases", .. })));
    // more cases than the file holds: the table runs into the payload and is caught there
    assert!(edited(|b| put(b, 20, 4000)).is_err());
    assert!(matches!(edited(|b| put(b, 24, 3)), Err(VectorError::Format(_))));
    assert!(matches!(edited(|b| put(b, 24, Format::Q8_K.id())), Err(VectorError::Header { field: "format", .. })));
    assert!(matches!(
        edited(|b| put(b, 28, Format::Q8_1.id())),
        Err(VectorError::Header { field: "activation format", .. })
    ));
    assert!(matches!(edited(|b| b[33] = b'5'), Err(VectorError::Header { field: "format name", .. })));
    assert!(matches!(edited(|b| b[60] = 0xff), Err(VectorError::Header { field: "ggml version", .. })));
    assert!(matches!(edited(|b| put(b, 80, 0x10)), Err(VectorError::Header { field: "ISA flags", .. })));
    // a bad checksum alone
    let mut b = tiny().to_bytes().unwrap();
    let n = b.len();
    b[n - 1] ^= 1;
    assert!(matches!(VectorFile::parse(&b), Err(VectorError::Checksum { .. })));
}

#[test]
fn case_errors_are_typed() {
    let put = |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let c = HEADER_BYTES;
    let case = |r: Result<VectorFile, VectorError>| matches!(r, Err(VectorError::Case { case: 0, .. }));
    assert!(case(edited(|b| put(b, c, 0))), "zero rows");
    assert!(case(edited(|b| put(b, c + 4, 33))), "cols not a block multiple");
    assert!(case(edited(|b| put(b, c + 4, 64))), "payload size disagrees with the shape");
    assert!(case(edited(|b| put(b, c, u32::MAX))), "huge rows");
    assert!(case(edited(|b| {
        put(b, c, u32::MAX);
        put(b, c + 4, u32::MAX - 31);
        put(b, c + 8, u32::MAX);
    })));
    assert!(case(edited(|b| b[c + 12] = 9)), "unknown weight source");
    assert!(case(edited(|b| b[c + 13] = 8)), "unknown activation distribution");
    assert!(case(edited(|b| b[c + 14] = 2)), "unknown flag");
    assert!(case(edited(|b| b[c + 24] ^= 1)), "offset");
    // a consistent but larger shape than the file holds
    assert!(matches!(
        edited(|b| {
            put(b, c + 8, 2);
            let plen = 34 + 128 + 2 * 128 + 2 * 34 + 2 * 4;
            b[c + 32..c + 40].copy_from_slice(&(plen as u64).to_le_bytes());
        }),
        Err(VectorError::Truncated { .. })
    ));
}

#[test]
fn writer_and_loader_errors_are_typed() {
    let mut t = tiny();
    t.cases[0].dots.push(0.0);
    assert!(matches!(t.to_bytes(), Err(VectorError::Case { case: 0, .. })));
    let mut t = tiny();
    t.cases.clear();
    assert!(matches!(t.to_bytes(), Err(VectorError::Header { .. })));
    let mut t = tiny();
    t.header.act = Format::Q8_K;
    assert!(matches!(t.to_bytes(), Err(VectorError::Header { .. })));
    assert!(matches!(VectorFile::load("/nonexistent/q8_0.qkv"), Err(VectorError::Io { .. })));
}

/// The committed files are exactly what live ggml gives today.
#[cfg(feature = "ggml")]
#[test]
fn committed_files_match_live_ggml() {
    for f in Format::WEIGHTS {
        let live = vectors::generate(f, DEFAULT_SEED).unwrap_or_else(|e| panic!("{f}: {e}"));
        let committed = std::fs::read(vectors::committed_dir().join(vectors::file_name(f))).unwrap();
        assert!(
            live.to_bytes().unwrap() == committed,
            "{f}: the committed vectors differ from live ggml (regenerate?)"
        );
    }
}
