//! `qkern bench` smoke test for CI: a short run completes and writes its files. No timing is
//! asserted (the numbers depend on the machine and its load); only that the run finishes, the
//! outputs exist and have the agreed shape, and bad arguments fail cleanly.

use std::process::{Command, Output};

fn qkern(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qkern")).args(args).env_remove("QKERN_CPU").output().expect("run qkern")
}

#[test]
fn short_run_writes_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("results");
    let extra_csv = dir.path().join("extra").join("b.csv");
    let o = qkern(&[
        "bench",
        "--seconds",
        "0.2",
        "--min-reps",
        "1",
        "--weights-mib",
        "4",
        "--formats",
        "q8_0,q4_K",
        "--tokens",
        "1,2",
        "--threads",
        "1",
        "--note",
        "CI smoke run",
        "--out-dir",
        out_dir.to_str().unwrap(),
        "--csv",
        extra_csv.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "qkern bench failed: {:?}\n{stderr}", o.status);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("== matmul, GB/s of weights: out-of-cache"), "{stdout}");
    assert!(stdout.contains("expert-down"), "{stdout}");
    // q4_K at 640 columns is listed as not applicable, not dropped.
    assert!(stdout.contains("n/a: q4_K: 640 columns"), "{stdout}");
    assert!(stderr.contains("bandwidth: 1 thread(s)"), "{stderr}");

    for f in ["table.md", "chart.svg", "machine.txt"] {
        let text = std::fs::read_to_string(out_dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(!text.is_empty(), "{f} is empty");
        assert!(text.contains("CI smoke run") || f == "chart.svg", "{f} lacks the note");
    }
    assert!(std::fs::read_to_string(out_dir.join("chart.svg")).unwrap().starts_with("<svg"));
    // --csv overrides the directory's results.csv.
    assert!(!out_dir.join("results.csv").exists());
    let csv = std::fs::read_to_string(&extra_csv).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    for col in [
        "format",
        "backend",
        "op",
        "tokens",
        "threads",
        "rows",
        "cols",
        "ours_gbps",
        "ggml_gbps",
        "ratio",
        "bandwidth_gbps",
        "pct_bandwidth",
        "candle_gbps",
        "ours_tok_rows_per_s",
    ] {
        assert!(head.contains(&col), "CSV lacks {col}: {head:?}");
    }
    // At least 3 shapes x 2 formats x 2 token counts of matmul and 3 x 2 of dequant (n/a rows
    // included), then the quantize rows.
    let rows: Vec<&str> = lines.collect();
    assert!(rows.len() >= 3 * 2 * 2 + 3 * 2, "{} rows", rows.len());
    let ours = head.iter().position(|c| *c == "ours_gbps").unwrap();
    let measured = rows
        .iter()
        .filter(|r| r.starts_with("q8_0,") && r.contains(",matmul,"))
        .filter(|r| r.split(',').nth(ours).is_some_and(|v| v.parse::<f64>().is_ok_and(|x| x > 0.0)))
        .count();
    assert_eq!(measured, 3 * 2, "q8_0 matmul rows with a positive ours_gbps");
}

#[test]
fn bad_arguments_fail_with_one_line() {
    for (args, needle) in [
        (&["bench", "--formats", "q8_K"][..], "not a quantized weight format"),
        (&["bench", "--shape", "tiny"][..], "unknown shape"),
        (&["bench", "--tokens", "0"][..], "at least 1"),
        (&["bench", "--backends", "tpu"][..], "unknown backend"),
    ] {
        let o = qkern(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
