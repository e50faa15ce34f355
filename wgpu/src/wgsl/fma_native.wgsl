fn fmx(a: f32, b: f32, c: f32) -> f32 {
    return fma(a, b, c);
}
