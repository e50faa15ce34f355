//! What the adapter does with `fma()`, `a*b + c`, division, fp16 conversion, rounding and
//! subnormals, bit for bit against the CPU (`qkern_wgpu::probe`), reported (`--nocapture`)
//! and recorded in the crate docs.
//!
//! The assertions cover what the kernels rely on, in their domain: with no subnormal operand,
//! product or result (the "normal domain"), `fma()` must be fused where the kernels use it,
//! the laundered `a*b + c` unfused and `div_rn` correctly rounded; the fma emulation must be
//! exact in its range; `f16f`, `f32_to_f16_bits`, `round()` and `f32(i32)` exact everywhere
//! (integer code or exact operations). Subnormal handling is only reported: lavapipe keeps
//! subnormals, NVIDIA's Vulkan driver flushes them to zero (FTZ), and the crate docs
//! ("Subnormals") say why the kernels' results do not depend on it for ggml's fp16 scales, and
//! where they do (activation blocks whose largest |x| is below about 1e-14).
//! `tests/random_parity.rs` (`tiny_scales`) checks both claims on the adapter.

mod common;

#[test]
fn float_behaviour() {
    let Some(b) = common::backend() else { return };
    let r = b.float_probe(1 << 16, 0x5eed).expect("probe");
    eprintln!("{}:\n{r}", b.name());
    assert!(r.normal_cases > r.cases / 2 && r.fused_differs_normal > 1000, "too few informative cases:\n{r}");
    if b.uses_native_fma() {
        assert_eq!(r.fma_fused_normal, r.normal_cases, "fma() is used but not fused on this adapter:\n{r}");
    }
    assert_eq!(r.emul_exact, r.emul_cases, "the fma emulation is not exact:\n{r}");
    assert_eq!(r.laundered_unfused_normal, r.normal_cases, "the laundered a*b+c was contracted:\n{r}");
    assert_eq!(r.div_rn_exact_normal, r.div_normal_operands, "div_rn is not correctly rounded:\n{r}");
    assert_eq!(r.f16f_exact, r.f16_inputs, "f16f is not exact:\n{r}");
    assert_eq!(r.to_f16_exact, r.cases, "f32_to_f16_bits differs from ggml's converter:\n{r}");
    assert_eq!(r.round_exact, r.cases, "round() is not ties-to-even:\n{r}");
    assert_eq!(r.i2f_exact, r.cases, "f32(i32) is not correctly rounded:\n{r}");
    if !r.flushes_subnormals() {
        // An adapter that keeps subnormals must get them right (lavapipe does).
        assert_eq!(r.subnormal_products_exact, r.subnormal_products, "subnormal products:\n{r}");
        assert_eq!(r.subnormal_adds_exact, r.subnormal_adds, "subnormal additions:\n{r}");
    }
}
