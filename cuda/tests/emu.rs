//! The CUDA kernels, run by the host emulator (`cuda/emu/emu.cpp`: the same kernel sources
//! built as C++, one fiber per CUDA thread), against the scalar reference, bit for bit: the
//! activation quantizers, every format's matmul (NT 1..8 and chunked, both lane splits,
//! grouped launches) and dequantize (f32, f16, bf16). Needs a C++ compiler (`CXX`, `c++`,
//! `g++` or `clang++`); skips with a message otherwise. No GPU involved. `QKERN_EMU_DEFINES`
//! (`-DNAME=VALUE` words, as `QKERN_CUDA_NVRTC_OPTS` gives NVRTC) builds the kernels with other
//! values of their compile-time knobs (scripts/test.sh runs the off switches this way);
//! `QKERN_CUDA_Q8K=words` runs them all on the other q8_K activation layout, and
//! `QKERN_CUDA_IQ_TILE=0` on the IQ2/IQ3 formats row-major.

use std::path::PathBuf;
use std::sync::OnceLock;

use qkern_cuda::args::{self, DeqArgs, MmJobDesc, QuantArgs};
use qkern_cuda::kernels;
use qkern_cuda::layout::{ActLayout, WeightLayout, tables};
use qkern_formats::{Format, reference};
use qkern_parity::inputs::{Dist, Rng, SPECIALS, floats, random_blocks};

type LaunchFn = unsafe extern "C" fn(*const i8, u32, u32, *const u8, *mut i8, i32) -> i32;
type FillFn = unsafe extern "C" fn(*const u8, std::ffi::c_ulong) -> i32;
type SactBytesFn = unsafe extern "C" fn(u32, u32) -> u64;
type SactLimitFn = unsafe extern "C" fn() -> u64;
type QgroupShapeFn = unsafe extern "C" fn() -> u64;

struct Emu {
    _lib: libloading::Library,
    launch: LaunchFn,
    /// The host's stream-ordered copy into the constant bank (`qk_cact`).
    cact_fill: FillFn,
    /// The shared-memory copy's bytes for (columns, tokens), as the kernels compute them.
    sact_bytes: SactBytesFn,
    /// The kernels' limit on that copy (QK_SACT_BYTES).
    sact_limit: SactLimitFn,
    /// The grouped quantize's argument bytes * 1000 + its job capacity (QuantGroupArgs).
    qgroup_shape: QgroupShapeFn,
}

fn emu() -> Option<&'static Emu> {
    static E: OnceLock<Option<Emu>> = OnceLock::new();
    E.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let srcs: Vec<PathBuf> = std::fs::read_dir(dir.join("kernels"))
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .chain([dir.join("emu/emu.cpp")])
            .collect();
        // The q8_K layout of this process's ActLayouts (QKERN_CUDA_Q8K), as the backend passes it.
        // The IQ2/IQ3 tiling last, as kernels.rs `extra_options` gives NVRTC: the host's layouts
        // follow it whatever the user's defines say.
        let defines: Vec<String> = std::iter::once(qkern_cuda::layout::Q8kLayout::current().define())
            .chain(std::env::var("QKERN_EMU_DEFINES").unwrap_or_default().split_whitespace().map(String::from))
            .chain([qkern_cuda::layout::iq_tile_define()])
            .collect();
        if let Some(bad) = defines.iter().find(|d| !d.starts_with("-D")) {
            panic!("QKERN_EMU_DEFINES: {bad:?} is not a -DNAME[=VALUE] option");
        }
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in defines.iter().flat_map(|d| d.bytes().chain([0])) {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        let mut srcs_sorted = srcs.clone();
        srcs_sorted.sort();
        for p in &srcs_sorted {
            for b in std::fs::read(p).ok()? {
                h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
            }
        }
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("qkern_emu_{h:016x}.so"));
        if !out.exists() {
            let cxx = std::env::var("CXX").ok().into_iter().chain(["c++", "g++", "clang++"].map(String::from));
            let mut built = false;
            for c in cxx {
                let tmp = out.with_extension("tmp.so");
                let st = std::process::Command::new(&c)
                    .args(["-std=c++17", "-O2", "-ffp-contract=off", "-fno-fast-math", "-fPIC", "-shared", "-w"])
                    .args(&defines)
                    .arg("-o")
                    .arg(&tmp)
                    .arg(dir.join("emu/emu.cpp"))
                    .status();
                match st {
                    Ok(s) if s.success() => {
                        std::fs::rename(&tmp, &out).ok()?;
                        built = true;
                        break;
                    }
                    Ok(s) => panic!("the emulator failed to compile with {c} ({s})"),
                    Err(_) => continue,
                }
            }
            if !built {
                eprintln!("no C++ compiler found: emulator tests skipped");
                return None;
            }
        }
        let lib = unsafe { libloading::Library::new(&out) }.expect("load emulator");
        let launch: LaunchFn = *unsafe { lib.get::<LaunchFn>(b"qk_emu_launch\0") }.expect("qk_emu_launch");
        let cact_fill: FillFn = *unsafe { lib.get::<FillFn>(b"qk_emu_cact_fill\0") }.expect("qk_emu_cact_fill");
        // SAFETY: both are `extern "C"` functions of emu.cpp with these signatures.
        let sact_bytes: SactBytesFn =
            *unsafe { lib.get::<SactBytesFn>(b"qk_emu_sact_bytes\0") }.expect("qk_emu_sact_bytes");
        let sact_limit: SactLimitFn =
            *unsafe { lib.get::<SactLimitFn>(b"qk_emu_sact_limit\0") }.expect("qk_emu_sact_limit");
        let qgroup_shape: QgroupShapeFn =
            *unsafe { lib.get::<QgroupShapeFn>(b"qk_emu_qgroup_shape\0") }.expect("qk_emu_qgroup_shape");
        Some(Emu { _lib: lib, launch, cact_fill, sact_bytes, sact_limit, qgroup_shape })
    })
    .as_ref()
}

/// The emulator's global state (its scheduler, the constant bank, shared memory) serves one
/// launch at a time: held across a launch, and across a bank fill and the launch that reads it
/// (tests run in parallel threads).
fn emu_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn run<A>(e: &Emu, name: &str, grid: u32, block: u32, a: &A) {
    let _g = emu_lock();
    run_locked(e, name, grid, block, a);
}

/// [`run`] under a held [`emu_lock`].
fn run_locked<A>(e: &Emu, name: &str, grid: u32, block: u32, a: &A) {
    let n = std::ffi::CString::new(name).unwrap();
    let mut err = [0i8; 256];
    let r = unsafe { (e.launch)(n.as_ptr(), grid, block, a as *const A as *const u8, err.as_mut_ptr(), 256) };
    if r != 0 {
        let msg = unsafe { std::ffi::CStr::from_ptr(err.as_ptr()) };
        panic!("emulated launch of {name} failed: {msg:?}");
    }
}

/// An emulated device buffer: host memory with a 256-byte aligned base.
struct Buf(Vec<u64>);

impl Buf {
    fn new(bytes: usize) -> Buf {
        Buf(vec![0u64; bytes.div_ceil(8) + 32])
    }
    fn from(bytes: &[u8]) -> Buf {
        let mut b = Buf::new(bytes.len());
        b.bytes_mut()[..bytes.len()].copy_from_slice(bytes);
        b
    }
    fn base(&self) -> usize {
        let p = self.0.as_ptr() as usize;
        (p + 255) & !255
    }
    fn ptr(&self) -> u64 {
        self.base() as u64
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        let off = self.base() - self.0.as_ptr() as usize;
        let len = self.0.len() * 8 - off;
        unsafe { std::slice::from_raw_parts_mut((self.0.as_mut_ptr() as *mut u8).add(off), len) }
    }
    fn bytes(&self) -> &[u8] {
        let off = self.base() - self.0.as_ptr() as usize;
        let len = self.0.len() * 8 - off;
        unsafe { std::slice::from_raw_parts((self.0.as_ptr() as *const u8).add(off), len) }
    }
    fn f32s(&self, n: usize) -> Vec<f32> {
        self.bytes()[..4 * n].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }
}

fn tab() -> &'static Buf {
    static T: OnceLock<Buf> = OnceLock::new();
    T.get_or_init(|| Buf::from(bytemuck::cast_slice(&tables())))
}

/// Quantize `x` (`tokens x cols`) on the emulator; returns the ggml bytes.
fn emu_quantize(e: &Emu, act: Format, cols: usize, x: &[f32]) -> Vec<u8> {
    let nt = x.len() / cols;
    let l = ActLayout::new(act, cols, nt).unwrap();
    let xb = Buf::from(bytemuck::cast_slice(x));
    let buf = Buf::new(l.total);
    let p = |o: usize| if o == 0 && act == Format::Q8_K { 0 } else { buf.ptr() + o as u64 };
    let a = QuantArgs {
        x: xb.ptr(),
        qs: buf.ptr() + l.qs as u64,
        d16: if act == Format::Q8_K { 0 } else { buf.ptr() + l.d16 as u64 },
        d32: buf.ptr() + l.d32 as u64,
        x16: if l.x16 == 0 { 0 } else { p(l.x16) },
        x32: if l.x32 == 0 { 0 } else { p(l.x32) },
        cols: cols as u32,
        tokens: nt as u32,
        capw: l.capw as u32,
        pad: 0,
    };
    let (grid, block) = args::quant_launch(act, cols, nt);
    // a small grid too, to exercise the grid-stride loops
    run(e, args::quant_kernel_name(act), grid.min(3), block, &a);
    let mut out = vec![0u8; nt * act.row_bytes(cols).unwrap()];
    l.to_ggml(&buf.bytes()[..l.total], nt, &mut out);
    out
}

/// Quantize each of `xs` (`tokens x cols` each) into its own buffer with one grouped launch on
/// the emulator; returns each one's ggml bytes.
fn emu_quantize_group(e: &Emu, act: Format, cols: usize, xs: &[Vec<f32>], grid: u32) -> Vec<Vec<u8>> {
    let xbs: Vec<Buf> = xs.iter().map(|x| Buf::from(bytemuck::cast_slice(x))).collect();
    let layouts: Vec<ActLayout> = xs.iter().map(|x| ActLayout::new(act, cols, x.len() / cols + 1).unwrap()).collect();
    let bufs: Vec<Buf> = layouts.iter().map(|l| Buf::new(l.total)).collect();
    let jobs: Vec<QuantArgs> = (0..xs.len())
        .map(|j| {
            let (l, b) = (&layouts[j], &bufs[j]);
            let p = |o: usize| if o == 0 { 0 } else { b.ptr() + o as u64 };
            QuantArgs {
                x: xbs[j].ptr(),
                qs: b.ptr() + l.qs as u64,
                d16: if act == Format::Q8_K { 0 } else { b.ptr() + l.d16 as u64 },
                d32: b.ptr() + l.d32 as u64,
                x16: p(l.x16),
                x32: p(l.x32),
                cols: cols as u32,
                tokens: (xs[j].len() / cols) as u32,
                capw: l.capw as u32,
                pad: 0,
            }
        })
        .collect();
    let g = args::QuantGroupArgs::new(act, &jobs).unwrap();
    let (_, block) = args::quant_group_launch(act, g.end[jobs.len() - 1]);
    run(e, args::quant_group_kernel_name(act), grid, block, &g);
    (0..xs.len())
        .map(|j| {
            let nt = xs[j].len() / cols;
            let mut out = vec![0u8; nt * act.row_bytes(cols).unwrap()];
            layouts[j].to_ggml(&bufs[j].bytes()[..layouts[j].total], nt, &mut out);
            out
        })
        .collect()
}

/// The grouped quantize's argument block is the same size and capacity in Rust and in the
/// kernels.
#[test]
fn quant_group_args_agree_with_the_kernels() {
    let Some(e) = emu() else { return };
    // SAFETY: a pure function of no arguments (emu.cpp).
    let shape = unsafe { (e.qgroup_shape)() };
    assert_eq!(shape, std::mem::size_of::<args::QuantGroupArgs>() as u64 * 1000 + args::QGROUP as u64);
}

/// One grouped launch quantizes each of its jobs exactly as the reference (and as one launch a
/// job): 1..QGROUP jobs of 1..5 tokens, with the grid both full and small (the grid-stride walk
/// across jobs).
#[test]
fn grouped_quantizers_match_reference() {
    let Some(e) = emu() else { return };
    let mut rng = Rng::new(12);
    for act in Format::ACTIVATIONS {
        let cols = act.block_elems() * 2;
        for trial in 0..12 {
            let n = [1, 2, 3, 5, 8, args::QGROUP][trial % 6];
            let xs: Vec<Vec<f32>> = (0..n)
                .map(|_| {
                    let d = Dist::ALL[rng.below(Dist::ALL.len() as u64) as usize];
                    let nt = 1 + rng.below(5) as usize;
                    floats(&mut rng, d, nt * cols)
                })
                .collect();
            let units: u32 = xs.iter().map(|x| args::quant_units(act, cols, x.len() / cols)).sum();
            let grid = if trial % 2 == 0 { args::quant_group_launch(act, units).0 } else { 1 + trial as u32 % 3 };
            let got = emu_quantize_group(e, act, cols, &xs, grid);
            for (j, x) in xs.iter().enumerate() {
                let want = ref_quantize(act, cols, x);
                if let Err(m) = qkern_parity::bytes_equal(
                    &format!("{act} trial {trial} job {j}/{n}"),
                    act.block_bytes(),
                    &want,
                    &got[j],
                ) {
                    panic!("{m}");
                }
            }
        }
    }
}

fn ref_quantize(act: Format, cols: usize, x: &[f32]) -> Vec<u8> {
    let rb = act.row_bytes(cols).unwrap();
    let mut out = vec![0u8; x.len() / cols * rb];
    for (xr, o) in x.chunks_exact(cols).zip(out.chunks_exact_mut(rb)) {
        reference::quantize_row(act, xr, o).unwrap();
    }
    out
}

/// The shared-memory row kernels' copy is sized twice: by the host (args.rs `sact_bytes`, the
/// launch's dynamic shared memory and `alen`) and by the kernel (`ActS::SB`, `QK_SACT_BYTES`),
/// which runs its global-memory body where the copy would not fit. The two must agree, or the
/// staged kernels silently never run.
#[test]
fn shared_copy_sizes_agree_with_the_kernels() {
    // The defaults only (scripts/test.sh also builds the emulator with other sizes on purpose).
    if std::env::var("QKERN_EMU_DEFINES").is_ok_and(|d| !d.trim().is_empty()) {
        return;
    }
    let Some(e) = emu() else { return };
    // SAFETY: pure functions of their integer arguments (emu.cpp).
    assert_eq!(unsafe { (e.sact_limit)() }, qkern_cuda::args::SACT_BYTES);
    for cols in [32usize, 256, 4096, 5120] {
        for nt in 1..=8u32 {
            // SAFETY: as above.
            let kernel = unsafe { (e.sact_bytes)(cols as u32, nt) };
            assert_eq!(qkern_cuda::args::sact_bytes(cols, nt), kernel, "cols {cols} nt {nt}");
        }
    }
}

/// The layouts these tests pack follow `QKERN_CUDA_IQ_TILE` (scripts/test.sh runs them both ways):
/// a misspelt value would silently test the row-major layout instead.
#[test]
fn iq_layout_is_the_one_asked_for() {
    let want = if qkern_cuda::layout::iq_tile_from_env().unwrap() { 16 } else { 1 };
    for f in Format::WEIGHTS.into_iter().filter(|f| f.is_iq_grid()) {
        assert_eq!(WeightLayout::of(f).unwrap().tile, want, "{f}");
    }
}

#[test]
fn quantizers_match_reference() {
    let Some(e) = emu() else { return };
    let mut rng = Rng::new(11);
    for act in Format::ACTIVATIONS {
        let cols = act.block_elems() * 3;
        for trial in 0..40 {
            let nt = 1 + trial % 3;
            let d = Dist::ALL[trial % Dist::ALL.len()];
            let mut x = floats(&mut rng, d, nt * cols);
            if trial >= 16 {
                for v in x.iter_mut() {
                    if rng.below(4) == 0 {
                        *v = SPECIALS[rng.below(SPECIALS.len() as u64) as usize];
                    }
                }
            }
            if trial >= 28 {
                for v in x.iter_mut() {
                    if rng.below(9) == 0 {
                        *v = [
                            f32::NAN,
                            f32::from_bits(0x7FC0_1234),
                            f32::from_bits(0xFFA0_0001),
                            f32::from_bits(0x7F80_0001),
                        ][rng.below(4) as usize];
                    }
                }
            }
            let want = ref_quantize(act, cols, &x);
            let got = emu_quantize(e, act, cols, &x);
            if let Err(m) = qkern_parity::bytes_equal(
                &format!("{act} trial {trial} ({})", d.name()),
                act.block_bytes(),
                &want,
                &got,
            ) {
                panic!("{m}\ninput: {x:?}");
            }
        }
    }
}

/// Reference outputs `[t][rows]`.
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

/// Same bits, except that NaN matches any NaN (the payload is not part of the contract).
fn same(want: &[f32], got: &[f32]) -> Option<usize> {
    want.iter().zip(got).position(|(a, b)| !(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())))
}

struct Case {
    f: Format,
    rows: usize,
    cols: usize,
    w: Vec<u8>,
    acts: Vec<u8>,
    nt: usize,
}

fn make_case(rng: &mut Rng, f: Format, rows: usize, cols: usize, nt: usize, wild: bool) -> Case {
    let act = f.vec_dot_type().unwrap();
    let w = random_blocks(rng, f, rows * cols / f.block_elems(), wild);
    let d = Dist::ALL[rng.below(Dist::ALL.len() as u64) as usize];
    let x = floats(rng, d, nt * cols);
    let acts = ref_quantize(act, cols, &x);
    Case { f, rows, cols, w, acts, nt }
}

struct DevCase {
    w: Buf,
    wd: u64,
    a: Buf,
    l: ActLayout,
}

fn upload(c: &Case) -> DevCase {
    let act = c.f.vec_dot_type().unwrap();
    let wl = WeightLayout::of(c.f).unwrap();
    let nblocks = c.rows * c.cols / c.f.block_elems();
    let w = Buf::from(&wl.pack(&c.w, c.rows));
    let wd = if wl.split { w.ptr() + wl.d_region(nblocks) as u64 } else { 0 };
    let l = ActLayout::new(act, c.cols, c.nt).unwrap();
    let a = Buf::from(&l.from_ggml(&c.acts, c.nt));
    DevCase { w, wd, a, l }
}

fn desc(d: &DevCase, c: &Case, out: u64) -> MmJobDesc {
    let l = &d.l;
    MmJobDesc {
        w: d.w.ptr(),
        wd: d.wd,
        a_qs: d.a.ptr() + l.qs as u64,
        a_d: d.a.ptr() + l.d32 as u64,
        a_x: match l.format {
            Format::Q8_1 => d.a.ptr() + l.x32 as u64,
            Format::Q8_K => d.a.ptr() + l.x16 as u64,
            _ => 0,
        },
        out,
        rows: c.rows as u32,
        tokens: c.nt as u32,
        capw: l.capw as u32,
        act_blocks: l.blocks as u32,
        a_base: d.a.ptr(),
        a_len: l.total as u64,
    }
}

/// The kernel choices of `args::plan_matmul` ([`Config`]).
fn emu_matmul(e: &Emu, cases: &[&Case], (s4_rows, mma_nt, row_nt, kq_mmk, cact_nt, pair_nt): Knobs) -> Vec<Vec<f32>> {
    let devs: Vec<DevCase> = cases.iter().map(|c| upload(c)).collect();
    let outs: Vec<Buf> = cases.iter().map(|c| Buf::new(4 * c.rows * c.nt)).collect();
    let f = cases[0].f;
    let names = args::mm_kernel_names(f);
    let jobs = cases.iter().zip(&devs).zip(&outs).map(|((c, d), o)| desc(d, c, o.ptr()));
    // The emulator's kernels read staged activations from shared memory (the header's default)
    // unless its defines say otherwise (its shared memory is a static array of QK_SACT_BYTES).
    let smem = kernels::cact_smem_option(&std::env::var("QKERN_EMU_DEFINES").unwrap_or_default()).unwrap_or(true);
    // min_ctas 4: the small-CTA path for the tiny cases, the 256-thread one for the larger
    let k = args::PlanKnobs {
        s4_rows,
        min_ctas: 4,
        mma_mask: args::row_mask_from(mma_nt),
        row_mask: args::row_mask_from(row_nt),
        kq_mmk,
        cact_mask: args::row_mask_from(cact_nt),
        cact_smem: smem,
        pair_mask: args::row_mask_from(pair_nt),
        // every NT's kernels run as such (iq4_nl's 8-token chunks would run as two of 4 by
        // default: chunks, as the 11-token cases run them, change no token's bits)
        split8: false,
    };
    let (mut staged, mut pairs) = (0usize, 0usize);
    args::plan_matmul::<()>(f, cases[0].cols, tab().ptr(), jobs, k, |l, a| {
        let name = names[l.kernel].as_ref().expect("kernel exists");
        let _g = emu_lock();
        if let Some((src, n)) = l.stage {
            // the backend's device-to-device copy into the module's bank
            assert!(n <= args::CACT_BYTES, "{name}: {n} bytes staged");
            let r = unsafe { (e.cact_fill)(src as *const u8, n as std::ffi::c_ulong) };
            assert_eq!(r, 0, "{name}: the bank is smaller than args::CACT_BYTES");
            staged += 1;
        }
        // the staged kernels: with shared memory each CTA copies its tokens (no bank copy), else
        // the bank holds the buffer
        assert_eq!(
            name.starts_with("qk_mmc_") || name.starts_with("qk_mmp_"),
            l.stage.is_some() || l.shared > 0,
            "{name}"
        );
        assert!(l.stage.is_none() || !smem, "{name}: a bank copy with shared-memory kernels");
        assert!(l.shared == 0 || smem, "{name}: shared memory for the bank kernels");
        if l.shared > 0 {
            staged += 1;
        }
        // (pair_nt is 0 or 1 here: every staged launch of a format with them is paired)
        let paired = pair_nt > 0 && args::has_pair(f) && (l.stage.is_some() || l.shared > 0);
        assert_eq!(name.starts_with("qk_mmp_"), paired, "{name}");
        pairs += usize::from(paired);
        run_locked(e, name, l.grid, l.block, a);
        Ok(())
    })
    .unwrap();
    assert!(cact_nt == 0 || staged > 0 || cases.len() > 1 || !args::has_row(f), "{f}: nothing staged");
    assert!(pair_nt == 0 || pairs > 0 || cases.len() > 1 || !args::has_pair(f), "{f}: nothing paired");
    cases.iter().zip(&outs).map(|(c, o)| o.f32s(c.rows * c.nt)).collect()
}

fn check(c: &Case, got: &[f32], what: &str) {
    let want = ref_matmul(c.f, c.rows, c.cols, &c.w, &c.acts, c.nt);
    if let Some(i) = same(&want, got) {
        let n = want.iter().zip(got).filter(|(a, b)| a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan())).count();
        panic!(
            "{} {what} rows={} cols={} nt={}: {n}/{} differ; first at token {} row {}: want {:#010x} ({:e}) got {:#010x} ({:e})",
            c.f,
            c.rows,
            c.cols,
            c.nt,
            want.len(),
            i / c.rows,
            i % c.rows,
            want[i].to_bits(),
            want[i],
            got[i].to_bits(),
            got[i]
        );
    }
}

fn matmul_format(f: Format) {
    let Some(e) = emu() else { return };
    let mut rng = Rng::new(0x5eed ^ f.id() as u64);
    let unit = f.block_elems().max(f.vec_dot_type().unwrap().block_elems());
    // widths: 1, 2, 3 and 5 units (an odd number of blocks for iq4_nl's tail)
    for (i, units) in [1usize, 2, 3, 5].into_iter().enumerate() {
        let cols = units * unit;
        for nt in 1..=8usize {
            let rows = [1, 7, 33, 40][(nt + i) % 4];
            let c = make_case(&mut rng, f, rows, cols, nt, false);
            // both lane splits at every NT (the split only exists for the 256-element formats;
            // for the others both settings pick the one-phase or the two-phase kernel), and the
            // tensor-core kernel at every NT where the format has one
            for (k, what) in configs(f) {
                let got = emu_matmul(e, &[&c], k);
                check(&c, &got[0], what);
            }
        }
    }
    // more than 8 tokens (chunks), wild scales (NaN / Inf / subnormal), and a last 16-row tile
    // of 9 rows (tiled formats: both row halves of its tensor-core warp valid)
    for (k, what) in configs(f) {
        let c = make_case(&mut rng, f, 57, unit, 5, false);
        check(&c, &emu_matmul(e, &[&c], k)[0], &format!("57 rows {what}"));
        let c = make_case(&mut rng, f, 9, 2 * unit, 11, false);
        check(&c, &emu_matmul(e, &[&c], k)[0], &format!("chunked {what}"));
        let c = make_case(&mut rng, f, 12, 3 * unit, 3, true);
        check(&c, &emu_matmul(e, &[&c], k)[0], &format!("wild scales {what}"));
    }
    // q4_K's two-phase kernel on more than 256 threads (args.rs `mmk_block`: one round of
    // 4 rows x nb x 8 items): an expert's 10 blocks (320 threads) and the most it takes, 16 (512)
    if args::has_mmk(f) && args::has_split(f) {
        let two = configs(f).into_iter().filter(|((_, _, _, kq, _, _), _)| *kq).collect::<Vec<_>>();
        for nb in [10, args::KQ_MMK_BMAX as usize] {
            for (nt, rows) in [(4, 9), (8, 5)] {
                let c = make_case(&mut rng, f, rows, nb * unit, nt, false);
                for (k, what) in &two {
                    check(&c, &emu_matmul(e, &[&c], *k)[0], &format!("{nb} blocks, {what}"));
                }
            }
        }
    }
    // The staged row kernels on 256-thread CTAs (the tiny cases above take 64: min_ctas 4
    // against at most 2 CTAs of 256 threads), one thread a row and two, over an odd number of
    // blocks (iq4_nl's tail) and a short last CTA
    for (k, what) in configs(f).into_iter().filter(|((_, _, _, _, cact, _), _)| *cact > 0) {
        for nt in [3, 8] {
            let c = make_case(&mut rng, f, 777, 3 * unit, nt, false);
            check(&c, &emu_matmul(e, &[&c], k)[0], &format!("256-thread CTAs {what}"));
        }
    }
    // grouped: jobs with different rows and tokens in one launch (and over 16 jobs)
    let cols = 2 * unit;
    let cases: Vec<Case> = (0..19).map(|k| make_case(&mut rng, f, 3 + 5 * (k % 4), cols, 1 + k % 9, false)).collect();
    let refs: Vec<&Case> = cases.iter().collect();
    for (k, what) in configs(f) {
        let got = emu_matmul(e, &refs, k);
        for (c, g) in cases.iter().zip(&got) {
            check(c, g, &format!("grouped {what}"));
        }
    }
}

/// The kernel choices a format's matmul tests run: (S = 4 row threshold, tensor-core token
/// threshold, one-thread-per-row token threshold, q4_K's two-phase kernel, constant-bank row
/// kernel token threshold, two-threads-a-row staged kernel token threshold).
type Knobs = (u64, u32, u32, bool, u32, u32);
type Config = (Knobs, &'static str);
fn configs(f: Format) -> Vec<Config> {
    let mut v = vec![((0, 0, 0, false, 0, 0), "S=1"), ((u64::MAX, 0, 0, false, 0, 0), "S=4")];
    if args::has_mma(f) {
        v.push(((0, 1, 0, false, 0, 0), "MMA"));
    }
    if args::has_row(f) {
        v.push(((0, 0, 1, false, 0, 0), "row"));
        v.push(((0, 0, 0, false, 1, 0), "row, constant bank"));
    }
    if args::has_pair(f) {
        v.push(((0, 0, 0, false, 1, 1), "row pairs, staged"));
    }
    if args::has_mmk(f) && args::has_split(f) {
        v.push(((u64::MAX, 0, 0, true, 0, 0), "two-phase"));
    }
    v
}

fn dequant_format(f: Format) {
    let Some(e) = emu() else { return };
    let mut rng = Rng::new(0xdec ^ f.id() as u64);
    // 19 rows: a full 16-row tile and a short one (layout.rs `tiled_index`)
    let (rows, cols) = (19, 2 * f.block_elems());
    for wild in [false, true] {
        let w = random_blocks(&mut rng, f, rows * cols / f.block_elems(), wild);
        let wl = WeightLayout::of(f).unwrap();
        let nblocks = rows * cols / f.block_elems();
        let wb = Buf::from(&wl.pack(&w, rows));
        let mut want = vec![0f32; rows * cols];
        reference::dequantize_row(f, &w, &mut want).unwrap();
        for kind in [args::DeqKind::F32, args::DeqKind::F16, args::DeqKind::Bf16] {
            let out = Buf::new(4 * rows * cols);
            let a = DeqArgs {
                w: wb.ptr(),
                wd: if wl.split { wb.ptr() + wl.d_region(nblocks) as u64 } else { 0 },
                out: out.ptr(),
                tab: tab().ptr(),
                rows: rows as u32,
                cols: cols as u32,
                kind: kind as u32,
                pad: 0,
            };
            run(e, &args::deq_kernel_name(f), 2, 64, &a);
            match kind {
                args::DeqKind::F32 => {
                    let got = out.f32s(rows * cols);
                    if let Some(i) = same(&want, &got) {
                        panic!("{f} dequantize (wild={wild}) element {i}: want {:e} got {:e}", want[i], got[i]);
                    }
                }
                _ => {
                    let got: Vec<u16> = out.bytes()[..2 * rows * cols]
                        .chunks_exact(2)
                        .map(|c| u16::from_le_bytes([c[0], c[1]]))
                        .collect();
                    for (i, (&v, &g)) in want.iter().zip(&got).enumerate() {
                        let exp = if kind == args::DeqKind::F16 {
                            qkern_formats::fp::f32_to_f16(v).to_bits()
                        } else {
                            bf16(v)
                        };
                        assert_eq!(exp, g, "{f} dequantize {kind:?} (wild={wild}) element {i} ({v:e})");
                    }
                }
            }
        }
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

macro_rules! per_format {
    ($($name:ident, $dq:ident => $f:expr;)*) => {$(
        #[test]
        fn $name() { matmul_format($f) }
        #[test]
        fn $dq() { dequant_format($f) }
    )*};
}

per_format! {
    mm_q8_0, deq_q8_0 => Format::Q8_0;
    mm_q5_1, deq_q5_1 => Format::Q5_1;
    mm_q4_k, deq_q4_k => Format::Q4_K;
    mm_q5_k, deq_q5_k => Format::Q5_K;
    mm_q6_k, deq_q6_k => Format::Q6_K;
    mm_iq2_xxs, deq_iq2_xxs => Format::IQ2_XXS;
    mm_iq2_xs, deq_iq2_xs => Format::IQ2_XS;
    mm_iq2_s, deq_iq2_s => Format::IQ2_S;
    mm_iq3_xxs, deq_iq3_xxs => Format::IQ3_XXS;
    mm_iq3_s, deq_iq3_s => Format::IQ3_S;
    mm_iq4_nl, deq_iq4_nl => Format::IQ4_NL;
    mm_iq4_xs, deq_iq4_xs => Format::IQ4_XS;
    mm_nvfp4, deq_nvfp4 => Format::NVFP4;
}

/// q8_K blocks on which `fma(iscale, v, 12582912)` and `iscale*v + 12582912` round apart,
/// so that the quantizer test decides which one the kernel does.
#[test]
fn q8k_fused_or_not_is_tested() {
    let Some(e) = emu() else { return };
    let mut rng = Rng::new(99);
    let mut x = Vec::new();
    let mut found = 0;
    for _ in 0..20000 {
        let b = floats(&mut rng, Dist::Gaussian, 256);
        let max = b.iter().copied().fold(0f32, |m, v| if v.abs() > m.abs() { v } else { m });
        let iscale = -127.0f32 / max;
        let differs = b.iter().any(|&v| {
            let f = iscale.mul_add(v, 12582912.0).to_bits();
            let u = (iscale * v + 12582912.0).to_bits();
            f != u
        });
        if differs {
            x.extend_from_slice(&b);
            found += 1;
            if found == 8 {
                break;
            }
        }
    }
    assert!(found > 0, "no rounding-sensitive q8_K block found");
    let want = ref_quantize(Format::Q8_K, 256, &x);
    let got = emu_quantize(e, Format::Q8_K, 256, &x);
    qkern_parity::bytes_equal("q8_K rounding-sensitive blocks", 292, &want, &got).unwrap();
}
