//! Writes the NVRTC PTX of kernel modules to a folder, for `ptxas -v` register and spill
//! reports without a GPU (`cuda/scripts/ptxas-report.sh` runs both).
//!
//! `cargo run -p qkern-cuda --example ptx -- DIR [sm_90] [module ...]` (modules: `quant` or a
//! weight format name; default every module). NVRTC options come from the same place as on a
//! GPU (`QKERN_CUDA_NVRTC_OPTS` included), so the report matches what the backend loads.

use qkern_cuda::kernels::{Module, all_modules, compile};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = std::path::PathBuf::from(args.first().ok_or("usage: ptx DIR [sm_XY] [module ...]")?);
    let arch: &'static str = Box::leak(args.get(1).cloned().unwrap_or_else(|| "sm_90".into()).into_boxed_str());
    let mut mods = Vec::new();
    for name in args.iter().skip(2) {
        mods.push(if name == "quant" { Module::Quant } else { Module::Weights(name.parse()?) });
    }
    if mods.is_empty() {
        mods = all_modules();
    }
    std::fs::create_dir_all(&dir)?;
    for m in mods {
        let ptx = compile(m, arch)?;
        let p = dir.join(format!("{m}.ptx"));
        std::fs::write(&p, ptx.as_bytes())?;
        println!("{}", p.display());
    }
    Ok(())
}
