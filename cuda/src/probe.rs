//! Probing for the CUDA driver and NVRTC libraries before cudarc touches them: cudarc's
//! dynamic loading panics when a library is missing, qkern returns an error instead.

use std::sync::OnceLock;

use crate::CudaError;

fn try_names(lib: &str) -> Result<(), Vec<String>> {
    let names = cudarc::get_lib_name_candidates(lib);
    for n in &names {
        // SAFETY: loading a shared library runs its initialisers; these are the libraries
        // cudarc itself is about to load.
        if let Ok(lib) = unsafe { libloading::Library::new(n) } {
            // Kept loaded: cudarc loads the same library next, and a load/unload cycle would
            // run (and unmap) the driver's initialisers and thread-exit handlers twice.
            std::mem::forget(lib);
            return Ok(());
        }
    }
    Err(names)
}

/// Whether `libcuda.so.1` (or another name cudarc accepts) can be loaded.
pub fn driver() -> Result<(), CudaError> {
    static R: OnceLock<Result<(), String>> = OnceLock::new();
    R.get_or_init(|| {
        try_names("cuda").map_err(|names| {
            format!(
                "the CUDA driver library (libcuda.so.1) is not installed or not on the library path ({} names tried)",
                names.len()
            )
        })
    })
    .clone()
    .map_err(CudaError::NoDriver)
}

/// Whether NVRTC can be loaded. If no name on the library path loads, `QKERN_NVRTC` (a
/// path to the library) and the usual toolkit folders (`$CUDA_HOME/lib64`,
/// `$CUDA_PATH/lib64`, `/usr/local/cuda/lib64`) are tried; a library found there stays
/// loaded, so that cudarc's load by name finds it by its soname.
pub fn nvrtc() -> Result<(), CudaError> {
    static R: OnceLock<Result<(), String>> = OnceLock::new();
    R.get_or_init(|| {
        let names = match try_names("nvrtc") {
            Ok(()) => return Ok(()),
            Err(n) => n,
        };
        let mut paths: Vec<std::path::PathBuf> = Vec::new();
        if let Some(p) = std::env::var_os("QKERN_NVRTC") {
            paths.push(p.into());
        }
        let mut dirs: Vec<std::path::PathBuf> = Vec::new();
        for v in ["CUDA_HOME", "CUDA_PATH"] {
            if let Some(p) = std::env::var_os(v) {
                dirs.push(std::path::PathBuf::from(p).join("lib64"));
            }
        }
        dirs.push("/usr/local/cuda/lib64".into());
        for d in &dirs {
            for n in &names {
                paths.push(d.join(n));
            }
        }
        for p in &paths {
            if p.exists() {
                // SAFETY: as above; the library is kept loaded for the life of the process.
                if let Ok(lib) = unsafe { libloading::Library::new(p) } {
                    std::mem::forget(lib);
                    if try_names("nvrtc").is_ok() {
                        return Ok(());
                    }
                }
            }
        }
        Err(format!(
            "NVRTC (libnvrtc.so.13) is not installed or not on the library path ({} names and the CUDA toolkit \
             folders tried; set QKERN_NVRTC to its path)",
            names.len()
        ))
    })
    .clone()
    .map_err(CudaError::NoNvrtc)
}

/// Both libraries, then the device count: `Ok(n)` devices, or why CUDA cannot be used.
pub fn devices() -> Result<usize, CudaError> {
    driver()?;
    nvrtc()?;
    let n = cudarc::driver::CudaContext::device_count().map_err(|e| CudaError::NoDevice {
        index: 0,
        reason: format!("the CUDA driver found no usable device ({e})"),
    })?;
    if n <= 0 {
        return Err(CudaError::NoDevice { index: 0, reason: "the CUDA driver reports no devices".into() });
    }
    Ok(n as usize)
}
