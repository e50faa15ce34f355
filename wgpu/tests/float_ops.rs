//! What the adapter does with `fma()`, `a*b + c`, division, fp16 conversion, rounding and
//! subnormals, bit for bit against the CPU (`qkern_wgpu::probe`). The kernels need `fma()` to
//! be fused, the laundered `a*b + c` to be unfused, `div_rn`, `f16f` and `f32_to_f16_bits` to
//! be exact; the rest is reported (`--nocapture`) and recorded in the crate docs.

mod common;

#[test]
fn float_behaviour() {
    let Some(b) = common::backend() else { return };
    let r = b.float_probe(1 << 16, 0x5eed).expect("probe");
    eprintln!("{}:\n{r}", b.name());
    let n = r.cases;
    if b.uses_native_fma() {
        assert_eq!(r.fma_fused, n, "fma() is used but not fused on this adapter:\n{r}");
    }
    assert_eq!(r.emul_exact, r.emul_cases, "the fma emulation is not exact:\n{r}");
    assert_eq!(r.laundered_unfused, n, "the laundered a*b+c was contracted:\n{r}");
    assert_eq!(r.div_rn_exact, r.div_normal, "div_rn is not correctly rounded:\n{r}");
    assert_eq!(r.f16f_exact, r.f16_inputs, "f16f is not exact:\n{r}");
    assert_eq!(r.to_f16_exact, n, "f32_to_f16_bits differs from ggml's converter:\n{r}");
    assert_eq!(r.round_exact, n, "round() is not ties-to-even:\n{r}");
    assert_eq!(r.i2f_exact, n, "f32(i32) is not correctly rounded:\n{r}");
}
