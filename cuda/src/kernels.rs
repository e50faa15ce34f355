//! Kernel sources (`cuda/kernels/*.cu`, embedded) and their NVRTC compilation: one module per
//! weight format plus one for the activation quantizers, compiled once per process and
//! architecture with `--fmad=false` (REFERENCE.md "On GPUs"), cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use qkern_formats::Format;
use qkern_formats::env::EnvError;

use crate::CudaError;

const COMMON: &str = include_str!("../kernels/common.cuh");
const MM_COMMON: &str = include_str!("../kernels/mm_common.cuh");
const KQUANTS: &str = include_str!("../kernels/kquants.cuh");
const QUANT: &str = include_str!("../kernels/quant.cu");

/// A compilation unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Module {
    /// The activation quantizers (q8_0, q8_1, q8_K).
    Quant,
    /// Matmul and dequantize kernels of one weight format.
    Weights(Format),
}

impl std::fmt::Display for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Module::Quant => f.write_str("quant"),
            Module::Weights(w) => write!(f, "{w}"),
        }
    }
}

fn format_source(f: Format) -> Option<&'static str> {
    Some(match f {
        Format::Q8_0 => include_str!("../kernels/q8_0.cu"),
        Format::Q5_1 => include_str!("../kernels/q5_1.cu"),
        Format::Q4_K => include_str!("../kernels/q4_k.cu"),
        Format::Q5_K => include_str!("../kernels/q5_k.cu"),
        Format::Q6_K => include_str!("../kernels/q6_k.cu"),
        Format::IQ2_XXS => include_str!("../kernels/iq2_xxs.cu"),
        Format::IQ2_XS => include_str!("../kernels/iq2_xs.cu"),
        Format::IQ2_S => include_str!("../kernels/iq2_s.cu"),
        Format::IQ3_XXS => include_str!("../kernels/iq3_xxs.cu"),
        Format::IQ3_S => include_str!("../kernels/iq3_s.cu"),
        Format::IQ4_NL => include_str!("../kernels/iq4_nl.cu"),
        Format::IQ4_XS => include_str!("../kernels/iq4_xs.cu"),
        Format::NVFP4 => include_str!("../kernels/nvfp4.cu"),
        _ => return None,
    })
}

/// Every module.
pub fn all_modules() -> Vec<Module> {
    let mut v = vec![Module::Quant];
    v.extend(Format::WEIGHTS.into_iter().map(Module::Weights));
    v
}

fn strip(src: &str, out: &mut String) {
    for line in src.lines() {
        let t = line.trim_start();
        if t.starts_with("#include \"") || t.starts_with("#pragma once") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
}

/// The self-contained source NVRTC compiles for `m` (local includes inlined).
pub fn source(m: Module) -> Result<String, CudaError> {
    let mut s = String::with_capacity(64 * 1024);
    strip(COMMON, &mut s);
    match m {
        Module::Quant => strip(QUANT, &mut s),
        Module::Weights(f) => {
            let src = format_source(f).ok_or_else(|| CudaError::Invalid(format!("{f} is not a weight format")))?;
            strip(MM_COMMON, &mut s);
            if matches!(f, Format::Q4_K | Format::Q5_K) {
                strip(KQUANTS, &mut s);
            }
            strip(src, &mut s);
        }
    }
    Ok(s)
}

/// NVRTC target name for a compute capability (`sm_90`).
pub fn arch_name(major: i32, minor: i32) -> &'static str {
    static NAMES: OnceLock<Mutex<HashMap<(i32, i32), &'static str>>> = OnceLock::new();
    let mut m = NAMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    m.entry((major, minor)).or_insert_with(|| Box::leak(format!("sm_{major}{minor}").into_boxed_str()))
}

type PtxCache = Mutex<HashMap<(Module, &'static str), Arc<String>>>;

/// Compile `m` for `arch` (`sm_90`) to PTX, once per process (cached). Probes for NVRTC
/// first, so that a missing library is an error, not a panic.
pub fn compile(m: Module, arch: &'static str) -> Result<Arc<String>, CudaError> {
    static CACHE: OnceLock<PtxCache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(p) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&(m, arch)) {
        return Ok(p.clone());
    }
    crate::probe::nvrtc()?;
    let src = source(m)?;
    let opts = cudarc::nvrtc::CompileOptions {
        ftz: Some(false),
        prec_sqrt: Some(true),
        prec_div: Some(true),
        fmad: Some(false),
        arch: Some(arch),
        options: extra_options(arch),
        name: Some(format!("qkern_{m}.cu")),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(&src, opts)
        .map_err(|e| CudaError::Compile { module: m.to_string(), log: compile_log(e) })?;
    let ptx = Arc::new(ptx.to_src());
    cache.lock().unwrap_or_else(|e| e.into_inner()).insert((m, arch), ptx.clone());
    Ok(ptx)
}

/// Whether an architecture's SMs have at least 160 KiB of shared memory (A100, Orin, H100/H200,
/// B200): room for four 48 KiB CTAs of the IQ kernels' replicated grid and sign tables
/// (mm_common.cuh `GridRep`, `SignTab`). The others (64 KiB on Turing, 100 KiB on consumer
/// Ampere, Ada and Blackwell) get a quarter of those tables, so that the copies do not cut the
/// CTAs an SM holds.
pub fn big_shared(arch: &str) -> bool {
    matches!(arch, "sm_80" | "sm_87" | "sm_90" | "sm_100" | "sm_103")
}

/// NVRTC options: C++17, the q8_K activation layout ([`crate::layout::Q8kLayout::current`]) and
/// the IQ2/IQ3 weights' tiling ([`crate::layout::iq_tile`]), the IQ tables' shared-memory budget of `arch` ([`big_shared`]), plus
/// the words of `QKERN_CUDA_NVRTC_OPTS` (tuning experiments, e.g. `-DQK_UNROLL_K=4
/// --maxrregcount=64`; read once per process; bits never depend on them).
fn extra_options(arch: &str) -> Vec<String> {
    let mut v = vec!["--std=c++17".to_string(), crate::layout::Q8kLayout::current().define()];
    if !big_shared(arch) {
        v.extend(["-DQK_GRID_WORDS=2048".to_string(), "-DQK_SIGN_WORDS=1024".to_string()]);
    }
    let (user, smem) = user_options();
    if smem.is_none() {
        v.push(format!("-DQK_CACT_SMEM={}", cact_smem(arch) as u32));
    }
    v.extend(user.split_whitespace().map(String::from));
    // Last, so that it wins over any other spelling in the user's options: the kernels agree
    // with the host's reading (args::mma_default_mask's token counts).
    v.push(format!("-DQK_IQ_HMMA={}", iq_hmma()));
    // The same for the IQ2/IQ3 weights' tiling, which the host's layouts follow.
    v.push(crate::layout::iq_tile_define());
    v
}

/// The IQ2/IQ3 tensor-core kernels' products (mm_common.cuh `QK_IQ_HMMA`): 0 int8, 1 fp16 (the
/// default); from `-DQK_IQ_HMMA=v` in `QKERN_CUDA_NVRTC_OPTS` ([`iq_hmma_option`]). Every module
/// is compiled with this value (`extra_options`). Read once per process. Any other value
/// reads as the default here; the backend refuses it when it starts ([`iq_hmma_from_env`], as
/// an unknown `QKERN_CUDA_Q8K`), so no kernel runs with it.
///
/// The former 2 (B from an fp16 copy of the q8_K quants in the activation buffers) is removed:
/// slower than 1 for every IQ2/IQ3 format and token count (H100, kernel-only GB/s, iq3_xxs 1518
/// -> 1188; benches/results/2026-12-06-session29/run1-hmma).
pub fn iq_hmma() -> u32 {
    static C: OnceLock<u32> = OnceLock::new();
    *C.get_or_init(|| iq_hmma_option(&user_options().0).ok().flatten().unwrap_or(1))
}

/// [`iq_hmma_option`] of this process's `QKERN_CUDA_NVRTC_OPTS`: a typed error where it sets
/// `QK_IQ_HMMA` to anything but 0 or 1 (the backend checks it when it starts).
pub fn iq_hmma_from_env() -> Result<Option<u32>, EnvError> {
    iq_hmma_option(&user_options().0)
}

/// `QK_IQ_HMMA` as an options string sets it: the last `-DQK_IQ_HMMA=v` decides; None where it
/// is not given, an error naming `QKERN_CUDA_NVRTC_OPTS` where v is not 0 or 1.
pub fn iq_hmma_option(opts: &str) -> Result<Option<u32>, EnvError> {
    match opts.split_whitespace().filter_map(|w| w.strip_prefix("-DQK_IQ_HMMA=")).next_back() {
        None => Ok(None),
        Some("0") => Ok(Some(0)),
        Some("1") => Ok(Some(1)),
        Some(_) => Err(EnvError {
            name: "QKERN_CUDA_NVRTC_OPTS",
            value: opts.to_string(),
            expected: "-DQK_IQ_HMMA=0 or 1, if any (2, the q8_K fp16 copy, was removed)",
        }),
    }
}

/// `QK_IQ_TILE` may not be set through an options string: the host's weight layouts follow
/// `QKERN_CUDA_IQ_TILE` ([`crate::layout::iq_tile`]), which gives the kernels their value (last,
/// `extra_options`). An error naming `QKERN_CUDA_NVRTC_OPTS` where `opts` sets it.
pub fn iq_tile_option(opts: &str) -> Result<(), EnvError> {
    if opts.split_whitespace().any(|w| w.starts_with("-DQK_IQ_TILE")) {
        return Err(EnvError {
            name: "QKERN_CUDA_NVRTC_OPTS",
            value: opts.to_string(),
            expected: "no -DQK_IQ_TILE (QKERN_CUDA_IQ_TILE=0 or 1 sets the IQ2/IQ3 layout and its kernels)",
        });
    }
    Ok(())
}

/// [`iq_tile_option`] of this process's `QKERN_CUDA_NVRTC_OPTS` (the backend checks it when it
/// starts).
pub fn iq_tile_option_from_env() -> Result<(), EnvError> {
    iq_tile_option(&user_options().0)
}

/// The words of `QKERN_CUDA_NVRTC_OPTS`, read once per process, and the `QK_CACT_SMEM` they set
/// ([`cact_smem_option`]).
fn user_options() -> &'static (String, Option<bool>) {
    static O: OnceLock<(String, Option<bool>)> = OnceLock::new();
    O.get_or_init(|| {
        let s = std::env::var("QKERN_CUDA_NVRTC_OPTS").unwrap_or_default();
        let smem = cact_smem_option(&s);
        (s, smem)
    })
}

/// Whether the row kernels with staged activations (`qk_mmc_*`) of `arch` read them from
/// shared memory (mm_common.cuh `QK_CACT_SMEM`), not from the constant bank: on the devices with
/// the large shared memory ([`big_shared`]: their 48 KiB a CTA leave room for 4 CTAs an SM),
/// unless `QKERN_CUDA_NVRTC_OPTS` says otherwise (`-DQK_CACT_SMEM=0|1`). Reads no environment
/// (the options are read once per process): the matmul calls ask it.
pub fn cact_smem(arch: &str) -> bool {
    user_options().1.unwrap_or_else(|| big_shared(arch))
}

/// `QK_CACT_SMEM` as an options string (NVRTC's, or the emulator's defines) sets it: the last
/// `-DQK_CACT_SMEM=v` (or `-DQK_CACT_SMEM`, which means 1) decides; None where it is not given.
pub fn cact_smem_option(opts: &str) -> Option<bool> {
    opts.split_whitespace()
        .filter_map(|w| w.strip_prefix("-DQK_CACT_SMEM"))
        .filter_map(|r| if r.is_empty() { Some(true) } else { r.strip_prefix('=').map(|v| v != "0") })
        .next_back()
}

fn compile_log(e: cudarc::nvrtc::CompileError) -> String {
    match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
        e => format!("{e:?}"),
    }
}

/// Compile several modules in parallel threads (each once per process).
pub fn compile_all(ms: &[Module], arch: &'static str) -> Result<(), CudaError> {
    std::thread::scope(|sc| {
        let hs: Vec<_> = ms.iter().map(|&m| sc.spawn(move || compile(m, arch).map(|_| ()))).collect();
        hs.into_iter()
            .try_for_each(|h| h.join().unwrap_or_else(|_| Err(CudaError::Invalid("compile thread panicked".into()))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iq_tile_is_not_an_option() {
        assert_eq!(iq_tile_option(""), Ok(()));
        assert_eq!(iq_tile_option("-DQK_IQ_HMMA=0 --maxrregcount=64"), Ok(()));
        for o in ["-DQK_IQ_TILE=1", "-DQK_PF_R=2 -DQK_IQ_TILE=0", "-DQK_IQ_TILE"] {
            let e = iq_tile_option(o).unwrap_err();
            assert_eq!((e.name, e.value.as_str()), ("QKERN_CUDA_NVRTC_OPTS", o));
        }
    }

    #[test]
    fn iq_hmma_options() {
        assert_eq!(iq_hmma_option("-DQK_UNROLL_K=4 -DQK_IQ_HMMA=0"), Ok(Some(0)));
        assert_eq!(iq_hmma_option("-DQK_IQ_HMMA=0 -DQK_IQ_HMMA=1"), Ok(Some(1)));
        assert_eq!(iq_hmma_option("-DQK_IQ_HMMA=2 -DQK_IQ_HMMA=0"), Ok(Some(0)));
        assert_eq!(iq_hmma_option("-D QK_IQ_HMMA=2"), Ok(None));
        assert_eq!(iq_hmma_option(""), Ok(None));
        // 2 (the removed fp16 copy), other numbers and other spellings: a typed error
        for o in ["-DQK_IQ_HMMA=2", "-DQK_IQ_HMMA=0 -DQK_IQ_HMMA=2", "-DQK_IQ_HMMA=3", "-DQK_IQ_HMMA=1u"] {
            let e = iq_hmma_option(o).unwrap_err();
            assert_eq!((e.name, e.value.as_str()), ("QKERN_CUDA_NVRTC_OPTS", o));
        }
        // every module gets the values the host reads, last (after the user's options): the
        // IQ products, then the IQ2/IQ3 weights' tiling
        let o = extra_options("sm_90");
        assert_eq!(o[o.len() - 2..], [format!("-DQK_IQ_HMMA={}", iq_hmma()), crate::layout::iq_tile_define()]);
        assert!(iq_hmma() <= 1);
        assert_eq!(crate::layout::iq_tile_define(), format!("-DQK_IQ_TILE={}", crate::layout::iq_tile() as u32));
    }

    #[test]
    fn cact_smem_options() {
        assert_eq!(cact_smem_option(""), None);
        assert_eq!(cact_smem_option("-DQK_UNROLL_K=4"), None);
        assert_eq!(cact_smem_option("-DQK_CACT_SMEM=0"), Some(false));
        assert_eq!(cact_smem_option("-DQK_CACT_SMEM"), Some(true));
        assert_eq!(cact_smem_option("-DQK_CACT_SMEM=0 -DQK_CACT_SMEM=1"), Some(true));
        assert_eq!(cact_smem_option("-DQK_CACT_SMEMX=0"), None);
    }

    #[test]
    fn iq_table_budget_by_shared_memory_per_sm() {
        // 160 KiB or more: the full tables; Turing, consumer Ampere / Ada / Blackwell: a quarter
        for a in ["sm_80", "sm_87", "sm_90", "sm_100"] {
            assert!(big_shared(a) && !extra_options(a).iter().any(|o| o.starts_with("-DQK_GRID_WORDS")), "{a}");
        }
        for a in ["sm_75", "sm_86", "sm_89", "sm_120"] {
            let o = extra_options(a);
            assert!(!big_shared(a), "{a}");
            assert!(
                o.contains(&"-DQK_GRID_WORDS=2048".to_string()) && o.contains(&"-DQK_SIGN_WORDS=1024".to_string()),
                "{a}"
            );
        }
    }
}
