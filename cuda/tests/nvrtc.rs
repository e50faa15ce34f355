//! Every kernel module compiles with NVRTC for sm_90, and exports every kernel the backend
//! loads. Runs where NVRTC is found (no GPU or driver needed); skips with a message otherwise.

use qkern_cuda::{args, kernels, probe};
use qkern_formats::Format;

#[test]
fn every_module_compiles_for_sm_90() {
    if let Err(e) = probe::nvrtc() {
        eprintln!("NVRTC not found: skipped ({e})");
        return;
    }
    let t = std::time::Instant::now();
    let mods = kernels::all_modules();
    kernels::compile_all(&mods, "sm_90").unwrap_or_else(|e| panic!("{e}"));
    eprintln!("compiled {} modules in {:.1?}", mods.len(), t.elapsed());
    for m in mods {
        let ptx = kernels::compile(m, "sm_90").unwrap();
        let mut names: Vec<String> = Vec::new();
        match m {
            kernels::Module::Quant => {
                for a in Format::ACTIVATIONS {
                    names.push(args::quant_kernel_name(a).to_string());
                }
            }
            kernels::Module::Weights(f) => {
                names.extend(args::mm_kernel_names(f).into_iter().flatten());
                names.push(args::deq_kernel_name(f));
            }
        }
        for n in names {
            assert!(ptx.contains(&format!(".entry {n}(")), "{m}: PTX lacks kernel {n}");
        }
        if let kernels::Module::Weights(f) = m {
            // The tensor-core kernels really use the tensor cores on sm_90: int8 products, or
            // for the IQ2/IQ3 formats fp16 ones (mm_common.cuh QK_IQ_HMMA).
            let fp16 = f.is_iq_grid() && kernels::iq_hmma() != 0;
            let (i8mma, f16mma) = (
                ptx.contains("mma.sync.aligned.m16n8k32"),
                ptx.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
            );
            assert_eq!(i8mma, args::has_mma(f) && !fp16, "{m}: int8 mma.sync in the PTX");
            assert_eq!(f16mma, args::has_mma(f) && fp16, "{m}: fp16 mma.sync in the PTX");
            // The staged row kernels of the 32-element formats take their activations into
            // dynamic shared memory on sm_90 (mm_common.cuh QK_CACT_SMEM; unless the options say
            // otherwise).
            let smem = kernels::cact_smem("sm_90");
            assert_eq!(
                ptx.contains(".extern .shared .align 16 .b8 qk_sact[]"),
                smem && args::has_row(f),
                "{m}: dynamic shared memory in the PTX"
            );
        }
        // No contraction: with --fmad=false every fused op is an explicit fma.rn.
        assert!(!ptx.contains("mad.f32") && !ptx.contains("mad.rn.f32"), "{m}: PTX has an unfused-looking mad");
        // No spills to local memory for the register arrays.
        let local = ptx.matches(".local").count();
        if local > 0 {
            eprintln!("{m}: {local} .local declarations in the PTX");
        }
    }
}

/// On an architecture without int8 `mma.sync` (before sm_80) every module still compiles: the
/// tensor-core kernels trap there, and the backend never selects them on such devices.
#[test]
fn every_module_compiles_for_sm_75() {
    if let Err(e) = probe::nvrtc() {
        eprintln!("NVRTC not found: skipped ({e})");
        return;
    }
    for m in kernels::all_modules() {
        let ptx = kernels::compile(m, "sm_75").unwrap_or_else(|e| panic!("{e}"));
        assert!(!ptx.contains("mma.sync"), "{m}: mma.sync in sm_75 PTX");
        // its 64 KiB of shared memory an SM: the staged row kernels read the constant bank
        // (kernels::cact_smem), unless the options say otherwise
        assert_eq!(ptx.contains("qk_sact"), kernels::cact_smem("sm_75"), "{m}: shared-memory activations on sm_75");
    }
}
