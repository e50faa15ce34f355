//! Records, at build time, the git commit the harness (and the `qkern` CLI that embeds it) was
//! built from, so that a results table names the binary's source and not whatever checkout
//! the binary later runs in (GPU runs carry binaries built elsewhere).

use std::process::Command;

fn main() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(h) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
            if dirty { format!("{h}, with uncommitted changes") } else { h }
        }
        None => "unknown".into(),
    };
    println!("cargo:rustc-env=QKERN_GIT_HEAD={head}");
    // Again after a commit, a checkout or an edit of any crate's sources (directories are
    // scanned for changed files).
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for f in ["HEAD", "index"] {
            println!("cargo:rerun-if-changed={git_dir}/{f}");
        }
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={git_dir}/{r}");
        }
    }
    for d in ["formats", "cpu", "cuda", "wgpu", "dispatch", "parity/src", "benches/src", "engine/src", "cli/src"] {
        println!("cargo:rerun-if-changed={root}/{d}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
