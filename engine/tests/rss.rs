//! Loading a file of a few hundred MiB keeps RSS within the arena plus 64 MiB (VmHWM from
//! /proc/self/status, reset before the load), buffered and with O_DIRECT; the arena holds
//! the file's bytes; and the load is compared with plain sequential reads of the same file
//! in this run, cold (page cache dropped) and warm. The only test of this binary, so that
//! nothing else moves the process's peak RSS.

use std::os::unix::fs::FileExt;

use qkern::Format;
use qkern_engine::load::{self, LoadComparison, LoadOptions, LoadedModel, mib};
use qkern_engine::synth::{self, SynthSpec};

const SLACK: u64 = 64 << 20;

fn check_bytes(m: &LoadedModel) {
    let f = std::fs::File::open(&m.path).unwrap();
    let mut buf = vec![0u8; 4 << 20];
    for t in m.loaded() {
        let got = m.tensor(&t.name).unwrap().1;
        let mut off = 0usize;
        while off < got.len() {
            let n = (got.len() - off).min(buf.len());
            f.read_exact_at(&mut buf[..n], t.file_offset + off as u64).unwrap();
            assert!(buf[..n] == got[off..off + n], "{} differs at {off}", t.name);
            off += n;
        }
    }
}

fn load_checked(path: &std::path::Path, opts: &LoadOptions) -> LoadedModel {
    let reset = load::reset_peak_rss();
    let m = load::load(path, &|_| true, opts).unwrap();
    let r = &m.report;
    eprintln!("{r}\n  (VmHWM reset before the load: {reset})");
    let peak = r.peak_rss.expect("VmHWM");
    assert!(peak <= r.arena_bytes + SLACK, "peak RSS {} exceeds the arena {} + 64 MiB", mib(peak), mib(r.arena_bytes));
    m
}

#[test]
fn load_rss_stays_within_arena_plus_64_mib() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.gguf");
    // 40 experts of 2048 x 1024 q8_0 gate, up and down: 255 MiB of tensors.
    let spec = SynthSpec {
        format: Format::Q8_0,
        down_format: Format::Q8_0,
        n_embd: 1024,
        n_ff: 2048,
        n_expert: 40,
        top_k: 4,
        ..SynthSpec::default()
    };
    let len = synth::write(&path, &spec).unwrap();
    assert!(len > 250 << 20, "{len}");
    load::drop_page_cache(&path).unwrap();

    let m = load_checked(&path, &LoadOptions { drop_cache: true, ..LoadOptions::default() });
    assert!(m.report.arena_bytes >= len - 4096 && m.report.arena_bytes <= len + 8192);
    check_bytes(&m);
    drop(m);

    let _ = load::drop_page_cache(&path);
    let m = load_checked(&path, &LoadOptions { direct: true, drop_cache: true, ..LoadOptions::default() });
    check_bytes(&m);
    drop(m);

    let c = LoadComparison::run(&path, &|_| true, &LoadOptions { direct: true, ..LoadOptions::default() }, 2).unwrap();
    eprintln!("{c}");
    assert!(c.cache_dropped);
    assert_eq!((c.seq_cold.len(), c.ours_cold.len(), c.ours_warm.len(), c.ours_direct.len()), (2, 2, 2, 2));
    // Each load's arena is dropped before the next: the peak stays one arena (plus the
    // sequential baseline's fresh buffer of the same size, never both at once) + slack.
    for r in c.ours_cold.iter().chain(&c.ours_warm).chain(&c.ours_direct) {
        let peak = r.peak_rss.unwrap_or(0);
        assert!(peak <= r.arena_bytes + SLACK, "{}", mib(peak));
        assert_eq!(r.phase("read").map(|p| p.bytes), Some(r.arena_bytes.min(len)));
    }
}
