//! `qkern gguf-synth`, `qkern gguf` and `qkern layer` end to end: the layer's output hash is
//! identical on cpu-scalar, the best CPU path, thread counts 1 and 2 and every other backend
//! present; `--report` prints the load comparison and the kernel-time ratio; malformed
//! files and bad arguments are one error line.

use std::path::Path;
use std::process::{Command, Output};

use qkern::BackendSpec;

fn qkern(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qkern")).args(args).env_remove("QKERN_CPU").output().expect("run qkern")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[track_caller]
fn ok(o: Output) -> String {
    assert!(o.status.success(), "qkern failed: {:?}\nstderr: {}", o.status, String::from_utf8_lossy(&o.stderr));
    stdout(&o)
}

#[track_caller]
fn error_line(o: Output, needle: &str) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("qkern: error: ") && err.contains(needle), "{err:?} lacks {needle:?}");
    err
}

fn hash(out: &str) -> String {
    out.lines().find_map(|l| l.strip_prefix("hash: ")).expect("a hash line").to_string()
}

fn synth(path: &Path, extra: &[&str]) {
    let p = path.to_str().unwrap();
    let mut args = vec!["gguf-synth", "--out", p];
    args.extend_from_slice(extra);
    ok(qkern(&args));
}

/// Backend arguments: cpu-scalar, the default (best) CPU path and every other CPU path
/// present at 1 and 2 threads, and every GPU backend present.
fn backend_args() -> Vec<Vec<String>> {
    let mut v = Vec::new();
    for t in ["1", "2"] {
        v.push(vec!["--backend".into(), "cpu-scalar".into(), "--threads".into(), t.into()]);
        v.push(vec!["--backend".into(), "cpu".into(), "--threads".into(), t.into()]);
    }
    for (spec, r) in qkern::available_backends() {
        match (r, spec) {
            (Err(_), _) => {}
            (Ok(()), BackendSpec::Cpu(_)) => {
                for t in ["1", "2"] {
                    v.push(vec!["--backend".into(), spec.to_string(), "--threads".into(), t.into()]);
                }
            }
            (Ok(()), _) => v.push(vec!["--backend".into(), spec.to_string()]),
        }
    }
    v
}

#[test]
fn layer_hash_is_identical_on_every_backend_and_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (fmt, router)) in
        [("q4_K", "f32"), ("iq2_xxs", "bf16"), ("q5_1", "f16"), ("nvfp4", "f32")].iter().enumerate()
    {
        let f = dir.path().join(format!("m{i}.gguf"));
        synth(
            &f,
            &[
                "--format",
                fmt,
                "--router",
                router,
                "--layers",
                "2",
                "--dense-layers",
                "1",
                "--experts",
                "6",
                "--top-k",
                "2",
            ],
        );
        let fp = f.to_str().unwrap();
        for layer in ["0", "1"] {
            let mut first: Option<String> = None;
            for b in backend_args() {
                let mut args = vec!["layer", "--gguf", fp, "--layer", layer, "--tokens", "13", "--seed", "5"];
                args.extend(b.iter().map(String::as_str));
                let out = ok(qkern(&args));
                let h = hash(&out);
                assert_eq!(h.len(), 16);
                let want = first.get_or_insert_with(|| h.clone());
                assert_eq!(&h, want, "{fmt} layer {layer} with {b:?}:\n{out}");
            }
            // Another seed gives another hash.
            let out = ok(qkern(&["layer", "--gguf", fp, "--layer", layer, "--tokens", "13", "--seed", "6"]));
            assert_ne!(Some(hash(&out)), first);
        }
    }
}

#[test]
fn gguf_lists_metadata_and_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("m.gguf");
    synth(&f, &["--experts", "8", "--top-k", "3", "--hidden", "512"]);
    let out = ok(qkern(&["gguf", f.to_str().unwrap()]));
    for needle in [
        "GGUF v3",
        "general.architecture",
        "\"qkern-synth\"",
        "qkern-synth.expert_count",
        "arr[str; 6]",
        "blk.0.ffn_gate_inp.weight",
        "blk.0.ffn_down_exps.weight",
        "512 x 8",
        "q4_K",
    ] {
        assert!(out.contains(needle), "{needle:?} missing:\n{out}");
    }
}

#[test]
fn layer_report_prints_load_comparison_and_kernel_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("m.gguf");
    synth(&f, &["--format", "q8_0", "--experts", "8", "--top-k", "2"]);
    let fp = f.to_str().unwrap();
    let out =
        ok(qkern(&["layer", "--gguf", fp, "--tokens", "32", "--report", "--reps", "2", "--direct", "--drop-cache"]));
    for needle in [
        "load vs sequential read",
        "cold GB/s",
        "ours (buffered)",
        "ours (O_DIRECT",
        "kernel calls alone",
        "peak (VmHWM)",
        "hash: ",
    ] {
        assert!(out.contains(needle), "{needle:?} missing:\n{out}");
    }
}

#[test]
fn bad_files_and_arguments_are_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("m.gguf");
    synth(&f, &[]);
    let bytes = std::fs::read(&f).unwrap();
    let bad = dir.path().join("bad.gguf");
    let mut b = bytes.clone();
    b[8..16].copy_from_slice(&(1u64 << 60).to_le_bytes());
    std::fs::write(&bad, &b).unwrap();
    let bp = bad.to_str().unwrap();
    error_line(qkern(&["gguf", bp]), "header.tensor_count at byte 8");
    error_line(qkern(&["layer", "--gguf", bp]), "tensor count");
    std::fs::write(&bad, &bytes[..bytes.len() / 2]).unwrap();
    error_line(qkern(&["layer", "--gguf", bp]), "outside the file");
    let fp = f.to_str().unwrap();
    error_line(qkern(&["layer", "--gguf", fp, "--layer", "3"]), "blk.3.ffn_gate_inp.weight");
    error_line(qkern(&["layer", "--gguf", fp, "--top-k", "9"]), "top-k 9 of 4");
    error_line(qkern(&["layer", "--gguf", fp, "--tokens", "0"]), "--tokens");
    error_line(qkern(&["gguf-synth", "--out", fp, "--format", "q8_K"]), "--format");
    error_line(qkern(&["gguf-synth", "--out", fp, "--hidden", "100"]), "multiple");
}
