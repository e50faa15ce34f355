//! `qkern-cpu` owns the CPU backend: the kernel paths (`scalar`, the bit-exact reference
//! from `qkern-formats`; `avx2`; `avx512`), their runtime detection (once, cached; forced
//! with `QKERN_CPU=scalar|avx2|avx512`), and the row-parallel `matmul` on a rayon pool
//! whose size the caller sets. The bits never depend on the path, thread count or row split:
//! every output is `vec_dot(row r, token t)` computed whole by one thread.

use std::sync::OnceLock;

use qkern_formats::{Format, ShapeError};

mod matmul;
#[cfg(target_arch = "x86_64")]
mod x86;
pub use matmul::check_activations;

pub use matmul::CpuBackend;

/// A CPU kernel path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CpuPath {
    /// The safe scalar reference (emulates the AVX2 lane order).
    Scalar,
    /// AVX2 + FMA + F16C kernels.
    Avx2,
    /// AVX-512 F/BW/VL/VNNI kernels (with AVX2, FMA, F16C): the AVX2 kernels' source
    /// compiled for the wider feature set (`x86::avx512`), the same bits.
    Avx512,
}

impl CpuPath {
    pub const ALL: [CpuPath; 3] = [CpuPath::Scalar, CpuPath::Avx2, CpuPath::Avx512];

    /// The name used by `QKERN_CPU` and, prefixed with `cpu-`, by the CLI.
    pub const fn name(self) -> &'static str {
        match self {
            CpuPath::Scalar => "scalar",
            CpuPath::Avx2 => "avx2",
            CpuPath::Avx512 => "avx512",
        }
    }

    pub fn from_name(s: &str) -> Result<CpuPath, CpuError> {
        CpuPath::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| CpuError::UnknownPath(s.to_string()))
    }

    /// Whether this CPU can run the path (and the path is built).
    pub fn supported(self) -> bool {
        self.cpu_has_features()
            && match self {
                CpuPath::Scalar => true,
                CpuPath::Avx2 => IMPLEMENTED_AVX2,
                CpuPath::Avx512 => IMPLEMENTED_AVX512,
            }
    }

    /// Whether this CPU has the instruction-set features the path's kernels use, whether
    /// or not the path is complete yet (see [`CpuBackend::new_unfinished`]).
    pub fn cpu_has_features(self) -> bool {
        let f = features();
        match self {
            CpuPath::Scalar => true,
            CpuPath::Avx2 => f.avx2 && f.fma && f.f16c,
            // Every feature the `x86::avx512` entry points enable (FEATURES there).
            CpuPath::Avx512 => f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni && f.avx2 && f.fma && f.f16c,
        }
    }
}

impl std::fmt::Display for CpuPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a SIMD path has kernels for every weight format (AVX2: all 13; AVX-512: all 13,
/// see `x86::avx512`).
const IMPLEMENTED_AVX2: bool = true;
const IMPLEMENTED_AVX512: bool = true;

/// Errors of the CPU backend.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuError {
    #[error("unknown CPU path {0:?} (expected scalar, avx2 or avx512)")]
    UnknownPath(String),
    #[error("this CPU cannot run the {0} path (features: {1})")]
    Unsupported(CpuPath, String),
    #[error("QKERN_CPU={0:?}: {1}")]
    Env(String, Box<CpuError>),
    #[error("thread pool: {0}")]
    Pool(String),
    #[error(transparent)]
    Shape(#[from] ShapeError),
    #[error(
        "{0} activations contain a byte of -128 (token {1}, block {2}); ggml's quantizers never emit it and qkern rejects it"
    )]
    Minus128(Format, usize, usize),
}

/// The CPU features that decide the path, detected once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    pub avx2: bool,
    pub fma: bool,
    pub f16c: bool,
    pub avx512f: bool,
    pub avx512bw: bool,
    pub avx512vl: bool,
    pub avx512vnni: bool,
}

impl std::fmt::Display for Features {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = [
            ("avx2", self.avx2),
            ("fma", self.fma),
            ("f16c", self.f16c),
            ("avx512f", self.avx512f),
            ("avx512bw", self.avx512bw),
            ("avx512vl", self.avx512vl),
            ("avx512vnni", self.avx512vnni),
        ];
        let on: Vec<&str> = names.iter().filter(|n| n.1).map(|n| n.0).collect();
        if on.is_empty() { f.write_str("none") } else { f.write_str(&on.join(" ")) }
    }
}

/// The CPU's features (detected on first call, cached).
pub fn features() -> Features {
    static F: OnceLock<Features> = OnceLock::new();
    *F.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            Features {
                avx2: std::is_x86_feature_detected!("avx2"),
                fma: std::is_x86_feature_detected!("fma"),
                f16c: std::is_x86_feature_detected!("f16c"),
                avx512f: std::is_x86_feature_detected!("avx512f"),
                avx512bw: std::is_x86_feature_detected!("avx512bw"),
                avx512vl: std::is_x86_feature_detected!("avx512vl"),
                avx512vnni: std::is_x86_feature_detected!("avx512vnni"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Features::default()
        }
    })
}

/// The path used by default: AVX-512 where the CPU has F/BW/VL/VNNI, else AVX2 where it has
/// AVX2 + FMA + F16C, else scalar.
///
/// The AVX-512 path runs, per format, whichever of its two builds of the kernels (AVX-512
/// VNNI or AVX2) was measured faster on an AVX-512 machine (the H200 host's Xeon, one
/// interleaved run: the table in `matmul.rs` and
/// benches/results/2026-12-03-xeon-avx512/run2-final); every build gives the same bits.
pub fn best_path() -> CpuPath {
    [CpuPath::Avx512, CpuPath::Avx2, CpuPath::Scalar].into_iter().find(|p| p.supported()).unwrap_or(CpuPath::Scalar)
}

/// Check that `path` can run here.
pub fn require(path: CpuPath) -> Result<CpuPath, CpuError> {
    if path.supported() { Ok(path) } else { Err(CpuError::Unsupported(path, features().to_string())) }
}

/// The default path: `QKERN_CPU` if set (an error if unknown or unsupported), else the best.
/// Read once and cached.
pub fn default_path() -> Result<CpuPath, CpuError> {
    static P: OnceLock<Result<CpuPath, CpuError>> = OnceLock::new();
    P.get_or_init(|| match std::env::var("QKERN_CPU") {
        Ok(v) if !v.trim().is_empty() => {
            CpuPath::from_name(&v).and_then(require).map_err(|e| CpuError::Env(v.clone(), Box::new(e)))
        }
        _ => Ok(best_path()),
    })
    .clone()
}

/// The paths this machine can run, scalar first.
pub fn available_paths() -> Vec<CpuPath> {
    CpuPath::ALL.into_iter().filter(|p| p.supported()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_names() {
        for p in CpuPath::ALL {
            assert_eq!(CpuPath::from_name(p.name()), Ok(p));
        }
        assert!(matches!(CpuPath::from_name("neon"), Err(CpuError::UnknownPath(_))));
        assert!(CpuPath::Scalar.supported());
        assert!(available_paths().contains(&best_path()));
    }
}
