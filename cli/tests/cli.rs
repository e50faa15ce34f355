//! End-to-end tests of the `qkern` binary: the data round trip (quantize-acts -> dequant ->
//! dot) on q8_0 data made here, compared bit for bit with the `qkern` library, and every
//! error case exiting 2 with one line on stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use qkern::{BackendSpec, CpuPath, Device, DeviceOptions, Format, WeightsRef};

fn qkern(args: &[&str]) -> Output {
    qkern_env(args, &[])
}

fn qkern_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_qkern"));
    c.args(args).env_remove("QKERN_CPU").env_remove("QKERN_CHUNK_BYTES");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run qkern")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn assert_ok(o: &Output) {
    assert!(o.status.success(), "qkern failed: {:?}\nstderr: {}", o.status, stderr(o));
}

/// Exit code 2, nothing on stdout, exactly one `qkern: error: ...` line on stderr that
/// contains `needle`; returns the line.
#[track_caller]
fn assert_error(o: &Output, needle: &str) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "status {:?}, stderr: {err}", o.status);
    assert!(o.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&o.stdout));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "want one line on stderr, got: {err:?}");
    assert!(lines[0].starts_with("qkern: error: "), "{err:?}");
    assert!(!err.contains("panicked"), "{err:?}");
    assert!(lines[0].to_lowercase().contains(&needle.to_lowercase()), "{err:?} lacks {needle:?}");
    lines[0].to_string()
}

/// Deterministic pseudo-random floats in about [-scale, scale] (with a few outliers).
fn floats(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
            if i % 97 == 13 { u * scale * 20.0 } else { u * scale }
        })
        .collect()
}

fn write_f32(path: &Path, v: &[f32]) {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap();
}

fn read_f32(path: &Path) -> Vec<f32> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(b.len() % 4, 0);
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

struct Files {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        Files { _dir: dir, root }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

fn cpu() -> Device {
    Device::open(BackendSpec::Cpu(Some(CpuPath::Scalar)), DeviceOptions { threads: Some(1) }).unwrap()
}

/// The library's quantization of `x` (`tokens` x `cols`) to `format` activation bytes.
fn lib_quantize(format: Format, cols: usize, x: &[f32]) -> Vec<u8> {
    let dev = cpu();
    let tokens = x.len() / cols;
    let mut acts = dev.activations(format, cols, tokens).unwrap();
    dev.quantize(x, &mut acts).unwrap();
    let mut out = vec![0u8; tokens * format.row_bytes(cols).unwrap()];
    dev.read_activations(&acts, &mut out).unwrap();
    out
}

fn lib_matmul(format: Format, rows: usize, cols: usize, w: &[u8], x: &[f32]) -> Vec<f32> {
    let dev = cpu();
    let w = dev.upload(WeightsRef::new(format, rows, cols, w).unwrap()).unwrap();
    let tokens = x.len() / cols;
    let mut acts = dev.activations_for(&w, tokens).unwrap();
    dev.quantize(x, &mut acts).unwrap();
    let mut out = vec![0f32; tokens * rows];
    dev.matmul(&w, &acts, &mut out).unwrap();
    out
}

fn lib_dequant(format: Format, rows: usize, cols: usize, w: &[u8]) -> Vec<f32> {
    let dev = cpu();
    let w = dev.upload(WeightsRef::new(format, rows, cols, w).unwrap()).unwrap();
    let mut out = vec![0f32; rows * cols];
    dev.dequantize(&w, &mut out).unwrap();
    out
}

const ROWS: usize = 7;
const COLS: usize = 96;
const TOKENS: usize = 5;

/// Makes q8_0 weights with `qkern quantize-acts` (q8_0 weight and activation blocks are the
/// same layout) and activations; returns (weights path, acts path, weight floats, acts).
fn q8_0_inputs(f: &Files) -> (PathBuf, PathBuf, Vec<f32>, Vec<f32>) {
    let wf = floats(1, ROWS * COLS, 0.05);
    let x = floats(2, TOKENS * COLS, 1.0);
    let (wf_path, w_path, x_path) = (f.path("w.f32"), f.path("w.bin"), f.path("x.f32"));
    write_f32(&wf_path, &wf);
    write_f32(&x_path, &x);
    let rows = ROWS.to_string();
    let cols = COLS.to_string();
    assert_ok(&qkern(&[
        "quantize-acts",
        "--format",
        "q8_0",
        "--cols",
        &cols,
        "--tokens",
        &rows,
        "--acts",
        s(&wf_path),
        "--out",
        s(&w_path),
    ]));
    (w_path, x_path, wf, x)
}

#[test]
fn quantize_acts_matches_library() {
    let f = Files::new();
    for (format, cols, tokens) in [(Format::Q8_0, 96, 5), (Format::Q8_1, 64, 3), (Format::Q8_K, 512, 4)] {
        let x = floats(format.id() as u64, tokens * cols, 3.0);
        let (x_path, q_path) = (f.path("x.f32"), f.path("q.bin"));
        write_f32(&x_path, &x);
        let (c, t) = (cols.to_string(), tokens.to_string());
        let o = qkern(&[
            "quantize-acts",
            "--format",
            format.name(),
            "--cols",
            &c,
            "--tokens",
            &t,
            "--acts",
            s(&x_path),
            "--out",
            s(&q_path),
        ]);
        assert_ok(&o);
        assert!(o.stdout.is_empty() && o.stderr.is_empty());
        let got = std::fs::read(&q_path).unwrap();
        assert_eq!(got.len(), tokens * format.row_bytes(cols).unwrap(), "{format}");
        assert!(got == lib_quantize(format, cols, &x), "{format}: quantize-acts differs from the library");
    }
}

#[test]
fn dequant_round_trip() {
    let f = Files::new();
    let (w_path, _, wf, _) = q8_0_inputs(&f);
    let w = std::fs::read(&w_path).unwrap();
    assert_eq!(w.len(), ROWS * COLS / 32 * 34);
    let out = f.path("deq.f32");
    let (r, c) = (ROWS.to_string(), COLS.to_string());
    let args = ["dequant", "--format", "Q8_0", "--rows", &r, "--cols", &c, "--weights", s(&w_path), "--out", s(&out)];
    assert_ok(&qkern(&args));
    let got = read_f32(&out);
    assert_eq!(bits(&got), bits(&lib_dequant(Format::Q8_0, ROWS, COLS, &w)));
    // And it is a quantization of the floats: within half a step (d = amax / 127) per block,
    // plus the rounding of d to fp16 (relative 2^-11, times up to 127 steps).
    for (b, (g, x)) in got.chunks(32).zip(wf.chunks(32)).enumerate() {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (g, x) in g.iter().zip(x) {
            assert!((g - x).abs() <= amax / 127.0 * 0.5 + amax * 1e-3, "block {b}: {g} vs {x}");
        }
    }
    // Several row chunks (QKERN_CHUNK_BYTES) give the same bits.
    let out2 = f.path("deq2.f32");
    let mut args2 = args;
    args2[10] = s(&out2);
    assert_ok(&qkern_env(&args2, &[("QKERN_CHUNK_BYTES", "700")]));
    assert_eq!(bits(&read_f32(&out2)), bits(&got));
}

#[test]
fn dot_matches_library_matmul() {
    let f = Files::new();
    let (w_path, x_path, _, x) = q8_0_inputs(&f);
    let w = std::fs::read(&w_path).unwrap();
    let want = bits(&lib_matmul(Format::Q8_0, ROWS, COLS, &w, &x));
    let (r, c, t) = (ROWS.to_string(), COLS.to_string(), TOKENS.to_string());
    type Run<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);
    let runs: [Run; 5] = [
        (&[], &[]),
        (&["--backend", "cpu-scalar", "--threads", "1"], &[]),
        (&["--backend", "cpu", "--threads", "3"], &[]),
        (&["--threads", "2"], &[("QKERN_CHUNK_BYTES", "800")]), // 2 tokens per chunk
        (&["--backend", "CPU-SCALAR"], &[("QKERN_CHUNK_BYTES", "1")]), // 1 token per chunk
    ];
    for (i, (extra, env)) in runs.iter().enumerate() {
        let out = f.path(&format!("out{i}.f32"));
        let mut args = vec![
            "dot",
            "--format",
            "q8_0",
            "--rows",
            &r,
            "--cols",
            &c,
            "--tokens",
            &t,
            "--weights",
            s(&w_path),
            "--acts",
            s(&x_path),
            "--out",
            s(&out),
        ];
        args.extend_from_slice(extra);
        let o = qkern_env(&args, env);
        assert_ok(&o);
        let got = read_f32(&out);
        assert_eq!(got.len(), TOKENS * ROWS, "run {i}: output is [tokens][rows]");
        assert_eq!(bits(&got), want, "run {i} ({extra:?} {env:?})");
    }
}

#[test]
fn formats_lists_every_format_and_the_cpu() {
    let o = qkern(&["formats"]);
    assert_ok(&o);
    let text = String::from_utf8(o.stdout).unwrap();
    for f in Format::ALL {
        assert!(text.lines().any(|l| l.split_whitespace().next() == Some(f.name())), "{f} missing:\n{text}");
    }
    let q8 = text.lines().find(|l| l.starts_with("q8_0 ")).unwrap();
    assert!(q8.contains("8.5") && q8.contains("34") && q8.contains("cpu-scalar"), "{q8}");
    assert!(text.contains("cpu features:") && text.contains("cpu path in use: cpu-"), "{text}");
}

/// The arguments of a valid `dot` on the q8_0 inputs, with `(flag, value)` replaced.
fn dot_args(f: &Files, w: &Path, x: &Path, set: &[(&str, &str)]) -> Vec<String> {
    let out = f.path("err-out.f32");
    let mut kv: Vec<(String, String)> = [
        ("--format", "q8_0".to_string()),
        ("--rows", ROWS.to_string()),
        ("--cols", COLS.to_string()),
        ("--tokens", TOKENS.to_string()),
        ("--weights", s(w).to_string()),
        ("--acts", s(x).to_string()),
        ("--out", s(&out).to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for (k, v) in set {
        match kv.iter_mut().find(|e| e.0 == *k) {
            Some(e) => e.1 = v.to_string(),
            None => kv.push((k.to_string(), v.to_string())),
        }
    }
    let mut args = vec!["dot".to_string()];
    for (k, v) in kv {
        args.push(k);
        args.push(v);
    }
    args
}

#[test]
fn errors_exit_2_with_one_line() {
    let f = Files::new();
    let (w_path, x_path, _, _) = q8_0_inputs(&f);
    let short = f.path("short.bin");
    std::fs::write(&short, &std::fs::read(&w_path).unwrap()[..100]).unwrap();
    let missing = f.path("does-not-exist.bin");
    let dir = f.path("");
    let huge = (usize::MAX / 2).to_string();
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (vec![("--format", "q9_9")], "unknown format"),
        (vec![("--format", "q8_K")], "not a quantized weight format"),
        (vec![("--backend", "gpu")], "unknown backend"),
        (vec![("--backend", "cuda:x")], "unknown backend"),
        (vec![("--weights", s(&short))], "has 100 bytes, expected 714 (7 rows x 96 cols of q8_0)"),
        (vec![("--acts", s(&w_path))], "activations file"),
        (vec![("--weights", s(&missing))], "does-not-exist.bin"),
        (vec![("--acts", s(&missing))], "does-not-exist.bin"),
        (vec![("--weights", s(&dir))], "not a regular file"),
        (vec![("--cols", "100")], "not a multiple of its block size 32"),
        (vec![("--cols", "0")], "zero columns"),
        (vec![("--rows", "0")], "zero rows"),
        (vec![("--tokens", "0")], "zero tokens"),
        (vec![("--tokens", "-1")], "-1"),
        (vec![("--rows", &huge)], "overflow"),
        (vec![("--tokens", &huge)], "overflow"),
        (vec![("--threads", "0")], "at least 1"),
    ];
    for (set, needle) in &cases {
        let args = dot_args(&f, &w_path, &x_path, set);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let line = assert_error(&qkern(&args), needle);
        assert!(!f.path("err-out.f32").exists(), "{set:?}: output created on error ({line})");
    }
    // The other subcommands check the same way.
    let out = f.path("err-out.f32");
    let (r, c, t) = (ROWS.to_string(), COLS.to_string(), TOKENS.to_string());
    let more: Vec<(Vec<&str>, &str)> = vec![
        (vec!["dequant", "--format", "iq9", "--rows", &r, "--cols", &c], "unknown format"),
        (vec!["dequant", "--format", "q4_K", "--rows", &r, "--cols", "256"], "has 714 bytes, expected 1008"),
        (vec!["dequant", "--format", "q8_0", "--rows", &r, "--cols", "33"], "multiple"),
        (vec!["quantize-acts", "--format", "q4_K", "--cols", &c, "--tokens", &t], "not an activation format"),
        (vec!["quantize-acts", "--format", "q8_K", "--cols", &c, "--tokens", &t], "block size 256"),
        (vec!["quantize-acts", "--format", "q8_0", "--cols", &c, "--tokens", "0"], "zero tokens"),
        (vec!["quantize-acts", "--format", "q8_0", "--cols", &c, "--tokens", "4"], "expected 1536"),
    ];
    for (mut args, needle) in more {
        let input = if args[0] == "dequant" { s(&w_path) } else { s(&x_path) };
        args.extend_from_slice(&[if args[0] == "dequant" { "--weights" } else { "--acts" }, input, "--out", s(&out)]);
        assert_error(&qkern(&args), needle);
        assert!(!out.exists(), "{args:?}: output created on error");
    }
    assert_error(&qkern(&["dot", "--format", "q8_0"]), "required arguments");
    assert_error(&qkern(&["frobnicate"]), "frobnicate");
}

#[test]
fn bad_qkern_cpu() {
    // The default backend cannot open: a one-line error.
    let o =
        qkern_env(&["dequant", "--format", "q8_0", "--rows", "1", "--cols", "32", "--weights", "x", "--out", "y"], &[]);
    assert_error(&o, "x");
    let f = Files::new();
    let (w_path, _, _, _) = q8_0_inputs(&f);
    let out = f.path("o.f32");
    let (r, c) = (ROWS.to_string(), COLS.to_string());
    let args = ["dequant", "--format", "q8_0", "--rows", &r, "--cols", &c, "--weights", s(&w_path), "--out", s(&out)];
    assert_error(&qkern_env(&args, &[("QKERN_CPU", "avx9")]), "QKERN_CPU");
    // A named backend does not need QKERN_CPU.
    let mut named = args.to_vec();
    named.extend_from_slice(&["--backend", "cpu-scalar"]);
    assert_ok(&qkern_env(&named, &[("QKERN_CPU", "avx9")]));
    // `formats` still lists everything and says what is wrong with QKERN_CPU.
    let o = qkern_env(&["formats"], &[("QKERN_CPU", "avx9")]);
    assert_ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("QKERN_CPU=\"avx9\""),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn parity_on_the_committed_vectors() {
    // The default vectors directory is found from the executable (target/*/qkern).
    let o = qkern(&["parity", "--backend", "cpu-scalar", "--threads", "2"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_ok(&o);
    assert!(text.contains("cpu features:") && text.contains("cpu path in use:"), "{text}");
    assert!(text.contains("q8_0     | cpu-scalar"), "{text}");
    assert!(text.contains("parity: every value bit-equal to ggml"), "{text}");
    // Every backend this build or machine lacks is listed with its reason.
    for (spec, r) in qkern::available_backends() {
        if let Err(why) = r {
            assert!(text.contains(&format!("{spec} ({why})")), "{spec} not listed as absent:\n{text}");
        }
    }
}

fn committed_q8_0() -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../parity/vectors");
    std::fs::read(dir.join("q8_0.qkv")).expect("committed q8_0 vectors")
}

#[test]
fn parity_reports_a_difference_with_exit_1() {
    let f = Files::new();
    let mut bytes = committed_q8_0();
    // The byte before the checksum is the top byte of the last case's last expected dot.
    let n = bytes.len();
    bytes[n - 9] ^= 0x01;
    qkern_parity::vectors::reseal(&mut bytes);
    std::fs::write(f.path("q8_0.qkv"), &bytes).unwrap();
    let o = qkern(&["parity", "--backend", "cpu-scalar", "--vectors", s(&f.root)]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{text}\n{}", stderr(&o));
    assert!(text.contains("MISMATCH") && text.contains("first mismatches"), "{text}");
    assert!(text.contains("parity: DIFFERENCES"), "{text}");
}

#[test]
fn parity_errors_exit_2() {
    let f = Files::new();
    let missing = f.path("nope");
    assert_error(&qkern(&["parity", "--vectors", s(&missing)]), "does not exist");
    assert_error(&qkern(&["parity", "--vectors", s(&f.root)]), "no .qkv files");
    assert_error(&qkern(&["parity", "--backend", "tpu"]), "unknown backend");
    assert_error(&qkern(&["parity", "--backend", "cuda:99"]), "cuda");
    let mut bytes = committed_q8_0();
    bytes.truncate(bytes.len() - 100);
    std::fs::write(f.path("q8_0.qkv"), &bytes).unwrap();
    assert_error(&qkern(&["parity", "--backend", "cpu-scalar", "--vectors", s(&f.root)]), "q8_0.qkv");
}
