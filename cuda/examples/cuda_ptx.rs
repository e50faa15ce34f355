//! Print the PTX NVRTC makes of one kernel module (tuning aid; no GPU needed, only NVRTC):
//! `cargo run -p qkern-cuda --example cuda_ptx -- q8_0 [sm_90]` (`quant` for the quantizers).
//! Extra NVRTC options come from `QKERN_CUDA_NVRTC_OPTS`, as in the backend.

use qkern_cuda::kernels::{self, Module};
use qkern_formats::Format;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map(String::as_str).unwrap_or("q8_0");
    let arch: &'static str = Box::leak(args.get(2).cloned().unwrap_or_else(|| "sm_90".into()).into_boxed_str());
    let m = if name == "quant" { Module::Quant } else { Module::Weights(name.parse::<Format>()?) };
    print!("{}", kernels::compile(m, arch)?);
    Ok(())
}
