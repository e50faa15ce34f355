//! Backend names: parsing, display and what this build and machine offer.

use std::fmt;
use std::str::FromStr;

use qkern_cpu::CpuPath;

use crate::Error;

/// Which backend to run: `cpu` (best or `QKERN_CPU`), `cpu-<path>`, `cuda[:N]`, `wgpu[:N]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendSpec {
    /// A CPU path; `None` is the default (`qkern_cpu::default_path`: AVX-512, else AVX2 where present, or `QKERN_CPU`).
    Cpu(Option<CpuPath>),
    /// A CUDA device ordinal.
    Cuda(usize),
    /// A wgpu adapter index (`None`: wgpu's default choice, honouring `WGPU_*` variables).
    Wgpu(Option<usize>),
}

impl fmt::Display for BackendSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendSpec::Cpu(None) => f.write_str("cpu"),
            BackendSpec::Cpu(Some(p)) => write!(f, "cpu-{p}"),
            BackendSpec::Cuda(n) => write!(f, "cuda:{n}"),
            BackendSpec::Wgpu(None) => f.write_str("wgpu"),
            BackendSpec::Wgpu(Some(n)) => write!(f, "wgpu:{n}"),
        }
    }
}

impl FromStr for BackendSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let t = s.trim().to_ascii_lowercase();
        let bad = || Error::UnknownBackend(s.to_string());
        let index = |rest: &str| rest.parse::<usize>().map_err(|_| bad());
        Ok(match t.as_str() {
            "cpu" => BackendSpec::Cpu(None),
            "cuda" => BackendSpec::Cuda(0),
            "wgpu" => BackendSpec::Wgpu(None),
            _ => {
                if let Some(p) = t.strip_prefix("cpu-") {
                    BackendSpec::Cpu(Some(CpuPath::from_name(p).map_err(|_| bad())?))
                } else if let Some(n) = t.strip_prefix("cuda:") {
                    BackendSpec::Cuda(index(n)?)
                } else if let Some(n) = t.strip_prefix("wgpu:") {
                    BackendSpec::Wgpu(Some(index(n)?))
                } else {
                    return Err(bad());
                }
            }
        })
    }
}

/// Every backend this build and machine can open, with the reason for each one that cannot.
pub fn available_backends() -> Vec<(BackendSpec, Result<(), String>)> {
    let mut v = Vec::new();
    for p in CpuPath::ALL {
        let r = if p.supported() {
            Ok(())
        } else {
            Err(format!("this CPU lacks it or it is not built (features: {})", qkern_cpu::features()))
        };
        v.push((BackendSpec::Cpu(Some(p)), r));
    }
    #[cfg(feature = "cuda")]
    match qkern_cuda::available() {
        Ok(n) => (0..n).for_each(|i| v.push((BackendSpec::Cuda(i), Ok(())))),
        Err(e) => v.push((BackendSpec::Cuda(0), Err(e.to_string()))),
    }
    #[cfg(not(feature = "cuda"))]
    v.push((BackendSpec::Cuda(0), Err("not built with cuda".into())));
    #[cfg(feature = "wgpu")]
    {
        let found = qkern_wgpu::adapters();
        v.push((
            BackendSpec::Wgpu(None),
            if found.is_empty() {
                Err("no wgpu adapter (on Linux: a Vulkan driver, e.g. mesa-vulkan-drivers)".into())
            } else {
                Ok(())
            },
        ));
    }
    #[cfg(not(feature = "wgpu"))]
    v.push((BackendSpec::Wgpu(None), Err("not built with wgpu".into())));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names() {
        for (s, want) in [
            ("cpu", BackendSpec::Cpu(None)),
            ("CPU-scalar", BackendSpec::Cpu(Some(CpuPath::Scalar))),
            ("cpu-avx2", BackendSpec::Cpu(Some(CpuPath::Avx2))),
            ("cuda", BackendSpec::Cuda(0)),
            ("cuda:3", BackendSpec::Cuda(3)),
            ("wgpu:1", BackendSpec::Wgpu(Some(1))),
        ] {
            assert_eq!(s.parse::<BackendSpec>().unwrap(), want, "{s}");
        }
        for s in ["gpu", "cpu-neon", "cuda:x", "cuda:", "wgpu:-1", ""] {
            assert!(matches!(s.parse::<BackendSpec>(), Err(Error::UnknownBackend(_))), "{s}");
        }
    }
}
