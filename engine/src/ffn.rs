//! One FFN layer computed only through the `qkern` API: an MoE layer (router -> softmax or
//! sigmoid -> top-k -> per expert, only its routed tokens: gate and up matmul ->
//! SiLU(gate) * up -> quantize -> down matmul -> weighted sum) and a dense FFN
//! (`down(SiLU(gate(x)) * up(x))`), with llama.cpp's tensor names and shapes:
//!
//! | tensor | ggml `ne` | |
//! |---|---|---|
//! | `blk.N.ffn_gate_inp.weight` | `[n_embd, n_expert]` | router, f32 / f16 / bf16 (or a quantized format) |
//! | `blk.N.ffn_gate_exps.weight`, `ffn_up_exps` | `[n_embd, n_ff, n_expert]` | experts stacked |
//! | `blk.N.ffn_down_exps.weight` | `[n_ff, n_embd, n_expert]` | |
//! | `blk.N.exp_probs_b.bias` (optional) | `[n_expert]` | f32 selection bias (DeepSeek V3) |
//! | `blk.N.ffn_gate.weight`, `ffn_up` / `ffn_down` | `[n_embd, n_ff]` / `[n_ff, n_embd]` | dense |
//!
//! Every float operation outside the kernels runs on the host in a fixed order, so the
//! output bits depend only on the kernels' bits, which qkern makes identical on every backend,
//! path and thread count:
//!
//! - router (float weights): `logit[t][e] = sum_i x[t][i] * w[e][i]` in f32 over 8 lanes, lane
//!   `l` summing `i = l, l + 8, ...` in increasing `i` (separate multiply and add, no fma),
//!   then the lanes as `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`, then the tail
//!   `i >= 8 * (n / 8)` added in order. Quantized routers go through `Device::matmul`.
//! - softmax as ggml's `soft_max`: `m = max`, `e_i = exp(l_i - m)` (f32), `sum` in f64 in
//!   index order, `p_i = e_i * (f32)(1 / sum)`; sigmoid gating `p = 1 / (1 + exp(-l))`.
//! - top-k: the k largest of `p (+ exp_probs_b)`, ties to the lower expert index (NaN lowest); weights
//!   are the selected `p`, divided by their f32 sum (slot order) when normalised, then times
//!   `expert_weights_scale` when that is not 1.
//! - SiLU: `g / (1 + exp(-g)) * u` in f32 (`ggml_silu_f32` form), `exp` being [`exp_f32`].
//! - combine (as llama.cpp's `build_moe_ffn` adds the expert views): `out = y0 * w0`, then
//!   `out = out + y_s * w_s` for slots `s = 1..k` in top-k order.
//!
//! Buffers are made once (for `max_tokens`); `forward` allocates nothing.

use std::time::{Duration, Instant};

use qkern::{Activations, Device, Format, Weights, WeightsRef};

use crate::gguf::{MetaTypeError, TensorInfo};
use crate::load::LoadedModel;

/// Errors building or running a layer.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error(transparent)]
    Qkern(#[from] qkern::Error),
    #[error(transparent)]
    Meta(#[from] MetaTypeError),
    #[error("layer {layer}: {msg}")]
    Layer { layer: usize, msg: String },
    #[error("{0}")]
    Shape(String),
    #[error("{got} tokens exceed the layer's max_tokens of {max}")]
    Tokens { got: usize, max: usize },
}

/// How router probabilities are made from logits (`<arch>.expert_gating_func`: 1 softmax,
/// 2 sigmoid).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gating {
    Softmax,
    Sigmoid,
}

/// Routing parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeConfig {
    pub n_expert: usize,
    pub top_k: usize,
    /// Divide the selected weights by their sum (`<arch>.expert_weights_norm`).
    pub norm_topk: bool,
    /// `<arch>.expert_weights_scale` (1: none).
    pub weights_scale: f32,
    pub gating: Gating,
    /// Experts per grouped call (`None`: [`GROUP`]; 1..=[`MAX_GROUP`]), fewer where the layer
    /// has fewer experts or is made for many tokens (see [`MoeLayer::group`]).
    pub group: Option<usize>,
}

/// `n_expert` matrices of `rows x cols` stacked in one tensor (expert-major).
#[derive(Clone, Copy, Debug)]
pub struct Stacked<'a> {
    pub format: Format,
    pub bytes: &'a [u8],
}

/// The host bytes of an MoE layer.
#[derive(Clone, Debug)]
pub struct MoeWeights<'a> {
    pub n_embd: usize,
    pub n_ff: usize,
    /// `[n_expert][n_embd]`: f32, f16, bf16, or a quantized weight format.
    pub router: Stacked<'a>,
    pub gate: Stacked<'a>,
    pub up: Stacked<'a>,
    pub down: Stacked<'a>,
    /// Optional f32 selection bias per expert.
    pub probs_bias: Option<Vec<f32>>,
}

/// The host bytes of a dense FFN.
#[derive(Clone, Copy, Debug)]
pub struct DenseWeights<'a> {
    pub n_embd: usize,
    pub n_ff: usize,
    pub gate: Stacked<'a>,
    pub up: Stacked<'a>,
    pub down: Stacked<'a>,
}

/// Accumulated wall time per stage (over every `forward` given the same value).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StageTimes {
    pub router: Duration,
    pub topk: Duration,
    pub gather: Duration,
    pub quantize: Duration,
    pub gate_up: Duration,
    pub act: Duration,
    pub down: Duration,
    pub combine: Duration,
    pub total: Duration,
    pub matmuls: u64,
    /// Quantize calls (a grouped call counts once).
    pub quantizes: u64,
    pub calls: u64,
}

impl StageTimes {
    pub fn stages(&self) -> [(&'static str, Duration); 8] {
        [
            ("router", self.router),
            ("softmax+top-k", self.topk),
            ("gather", self.gather),
            ("quantize", self.quantize),
            ("gate+up matmul", self.gate_up),
            ("silu*up", self.act),
            ("down matmul", self.down),
            ("combine", self.combine),
        ]
    }
}

impl std::fmt::Display for StageTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.calls.max(1) as f64;
        let tot = self.total.as_secs_f64().max(1e-12);
        for (name, d) in self.stages() {
            writeln!(
                f,
                "  {name:<16} {:>10.3} ms  {:>5.1} %",
                d.as_secs_f64() * 1e3 / n,
                d.as_secs_f64() / tot * 100.0
            )?;
        }
        write!(
            f,
            "  {:<16} {:>10.3} ms  ({} matmuls, {} quantize calls per run)",
            "total",
            self.total.as_secs_f64() * 1e3 / n,
            self.matmuls / self.calls.max(1),
            self.quantizes / self.calls.max(1)
        )
    }
}

/// Time of each kernel call of one forward, each measured alone (minimum over repetitions).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelTimes {
    pub quantize: Duration,
    pub matmul: Duration,
    pub calls: u64,
}

impl KernelTimes {
    pub fn sum(&self) -> Duration {
        self.quantize + self.matmul
    }
}

fn lap(t: &mut Instant) -> Duration {
    let now = Instant::now();
    let d = now - *t;
    *t = now;
    d
}

/// ggml's fp16 to f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1F) as u32;
    let man = (h & 0x3FF) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: value m * 2^-24, exact in f32.
            let v = m as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
        (31, 0) => sign | 0x7F80_0000,
        (31, m) => sign | 0x7FC0_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// Float rows (f32, f16, bf16) to f32, exactly.
pub fn float_rows(format: Format, bytes: &[u8], out: &mut Vec<f32>) -> Result<(), LayerError> {
    out.clear();
    match format {
        Format::F32 => out.extend(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))),
        Format::F16 => out.extend(bytes.chunks_exact(2).map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]])))),
        Format::BF16 => {
            out.extend(bytes.chunks_exact(2).map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16)))
        }
        f => return Err(LayerError::Shape(format!("{f} is not a float format"))),
    }
    Ok(())
}

/// The router dot product in the fixed order documented at the top of this module.
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let body = n / 8 * 8;
    let mut l = [0f32; 8];
    for (ca, cb) in a[..body].chunks_exact(8).zip(b[..body].chunks_exact(8)) {
        for j in 0..8 {
            l[j] += ca[j] * cb[j];
        }
    }
    lanes_sum(&l, &a[..n], &b[..n])
}

/// [`dot_f32`] of `a` with four rows at once (the same order per row, so the same bits as
/// four calls): 32 independent accumulators instead of 8, which the compiler keeps in
/// registers, about 3x faster on the router.
pub fn dot_f32_x4(a: &[f32], b: [&[f32]; 4]) -> [f32; 4] {
    let n = b.iter().fold(a.len(), |n, r| n.min(r.len()));
    let body = n / 8 * 8;
    let mut l = [[0f32; 8]; 4];
    let (b0, b1, b2, b3) = (&b[0][..body], &b[1][..body], &b[2][..body], &b[3][..body]);
    for (i, ca) in a[..body].chunks_exact(8).enumerate() {
        let r = i * 8..i * 8 + 8;
        let (c0, c1, c2, c3) = (&b0[r.clone()], &b1[r.clone()], &b2[r.clone()], &b3[r]);
        for j in 0..8 {
            l[0][j] += ca[j] * c0[j];
            l[1][j] += ca[j] * c1[j];
            l[2][j] += ca[j] * c2[j];
            l[3][j] += ca[j] * c3[j];
        }
    }
    std::array::from_fn(|e| lanes_sum(&l[e], &a[..n], &b[e][..n]))
}

/// Router logits `[tokens][n]` of `x` (`[tokens][ne]`) against `w` (`[n][ne]`), each one
/// [`dot_f32`]'s bits. Four experts at a time over every token (their rows stay in L1); where
/// the CPU has AVX (detected at run time, cached by std), two tokens at a time in 8-lane
/// registers (`router_quad_avx`: 3.3x the portable loop at 16 tokens, 2048 x 128).
pub fn router_logits(x: &[f32], w: &[f32], ne: usize, logits: &mut [f32]) {
    let n = w.len() / ne.max(1);
    let nt = (x.len() / ne.max(1)).min(logits.len() / n.max(1));
    let quads = n / 4;
    #[cfg(target_arch = "x86_64")]
    let avx = std::arch::is_x86_feature_detected!("avx");
    for q in 0..quads {
        let r = |k: usize| &w[(4 * q + k) * ne..(4 * q + k + 1) * ne];
        let rows = [r(0), r(1), r(2), r(3)];
        #[cfg(target_arch = "x86_64")]
        if avx {
            let a = |t: usize| &x[t * ne..(t + 1) * ne];
            let mut put = |t: usize, l: &[[f32; 8]; 4]| {
                for (e, row) in rows.iter().enumerate() {
                    logits[t * n + 4 * q + e] = lanes_sum(&l[e], a(t), row);
                }
            };
            let mut t = 0;
            while t + 1 < nt {
                // SAFETY: AVX was detected above; both tokens and every row hold `ne` floats,
                // the lengths the function reads within.
                let [l0, l1] = unsafe { router_quad_avx([a(t), a(t + 1)], rows, ne) };
                put(t, &l0);
                put(t + 1, &l1);
                t += 2;
            }
            if t < nt {
                // The last of an odd count (the only one at one token) alone: half the work of
                // a pair. SAFETY: as above.
                let [l0] = unsafe { router_quad_avx([a(t)], rows, ne) };
                put(t, &l0);
            }
            continue;
        }
        for t in 0..nt {
            let o = dot_f32_x4(&x[t * ne..(t + 1) * ne], rows);
            logits[t * n + 4 * q..t * n + 4 * q + 4].copy_from_slice(&o);
        }
    }
    for e in 4 * quads..n {
        let we = &w[e * ne..(e + 1) * ne];
        for t in 0..nt {
            logits[t * n + e] = dot_f32(&x[t * ne..(t + 1) * ne], we);
        }
    }
}

/// Multiply-adds a thread of [`router_logits_threaded`] must have to be started: about 30 us
/// of router work, against 10-20 us to start and join a thread.
pub const ROUTER_THREAD_WORK: usize = 1 << 20;

/// [`router_logits`] (the same bits: each logit is computed by the same code) with the experts
/// split among up to `threads` threads, the caller's one of them, as far as each has
/// [`ROUTER_THREAD_WORK`]: each part writes its experts' logits (`[tokens][its experts]`) into
/// its own span of `scratch` (at least `tokens * n` floats, else one thread runs), which are then
/// spread into `logits`.
pub fn router_logits_threaded(
    x: &[f32],
    w: &[f32],
    ne: usize,
    logits: &mut [f32],
    scratch: &mut [f32],
    threads: usize,
) {
    let n = w.len() / ne.max(1);
    let nt = (x.len() / ne.max(1)).min(logits.len() / n.max(1));
    let quads = n / 4;
    let parts = threads.min(quads).min(nt * n * ne / ROUTER_THREAD_WORK).max(1);
    if parts == 1 || scratch.len() < nt * n {
        return router_logits(x, w, ne, logits);
    }
    // Part j: experts bound(j)..bound(j + 1), whole quads (the last part to n).
    let bound = |j: usize| if j == parts { n } else { 4 * (quads * j / parts) };
    let x = &x[..nt * ne];
    let spawned = std::thread::scope(|s| {
        let mut rest = &mut scratch[..nt * n];
        let mut spawned = true;
        for j in 0..parts {
            let (e0, e1) = (bound(j), bound(j + 1));
            let (mine, r) = std::mem::take(&mut rest).split_at_mut(nt * (e1 - e0));
            rest = r;
            let wj = &w[e0 * ne..e1 * ne];
            if j + 1 == parts {
                router_logits(x, wj, ne, mine);
            } else {
                let job = move || router_logits(x, wj, ne, mine);
                spawned &= std::thread::Builder::new().spawn_scoped(s, job).is_ok();
            }
        }
        spawned
    });
    if !spawned {
        // The system refused a thread: the whole router on this one.
        return router_logits(x, w, ne, logits);
    }
    let mut off = 0;
    for j in 0..parts {
        let (e0, e1) = (bound(j), bound(j + 1));
        let m = e1 - e0;
        for t in 0..nt {
            logits[t * n + e0..t * n + e1].copy_from_slice(&scratch[off + t * m..off + (t + 1) * m]);
        }
        off += nt * m;
    }
}

/// [`dot_f32`]'s end: its 8 lanes `l` added in the documented order, then the tail of `a . b`
/// past the last whole 8 in order.
fn lanes_sum(l: &[f32; 8], a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let mut s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    for i in n / 8 * 8..n {
        s += a[i] * b[i];
    }
    s
}

/// The 8 lanes of [`dot_f32`] for the `T` tokens `a` (1 or 2) and four rows, over the first
/// `ne / 8 * 8` elements: lane `j` adds `a[i] * b[i]` for `i = j, j + 8, ...` in order, a
/// multiply then an add (no fma), as the scalar loop does, so the same bits.
///
/// # Safety
/// The CPU must have AVX, and every token and row must hold at least `ne` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn router_quad_avx<const T: usize>(a: [&[f32]; T], b: [&[f32]; 4], ne: usize) -> [[[f32; 8]; 4]; T] {
    use std::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_ps(); 4]; T];
    let mut i = 0;
    while i + 8 <= ne {
        // SAFETY (the loads): i + 8 <= ne <= every slice's length (the caller's contract).
        let mut x = [_mm256_setzero_ps(); T];
        for t in 0..T {
            x[t] = unsafe { _mm256_loadu_ps(a[t].as_ptr().add(i)) };
        }
        for e in 0..4 {
            let w = unsafe { _mm256_loadu_ps(b[e].as_ptr().add(i)) };
            for t in 0..T {
                acc[t][e] = _mm256_add_ps(acc[t][e], _mm256_mul_ps(x[t], w));
            }
        }
        i += 8;
    }
    let mut out = [[[0f32; 8]; 4]; T];
    for t in 0..T {
        for e in 0..4 {
            // SAFETY: `out[t][e]` is 8 writable floats.
            unsafe { _mm256_storeu_ps(out[t][e].as_mut_ptr(), acc[t][e]) };
        }
    }
    out
}

/// Softmax in place as documented above.
pub fn softmax(v: &mut [f32]) {
    let m = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f64;
    for x in v.iter_mut() {
        *x = (*x - m).exp();
        sum += *x as f64;
    }
    let inv = (1.0 / sum) as f32;
    for x in v.iter_mut() {
        *x *= inv;
    }
}

/// `e^x` in f32 with plain multiplies and adds (no fma, no libm), so the same bits on every
/// machine and a loop the compiler vectorises: `x` clamped to [-86, 88], `n = round(x / ln 2)`
/// (by the 1.5 * 2^23 trick), `r = (x - n * ln2_hi) - n * ln2_lo`, a degree-6 Taylor
/// polynomial in Horner form, scaled by `2^n` through the exponent bits. Relative error
/// about 2e-7.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75; // ln 2 rounded to 16 significant bits
    const LN2_LO: f32 = 1.428_606_8e-6; // ln 2 - LN2_HI
    let x = x.clamp(-86.0, 88.0);
    let z = x * LOG2E + MAGIC;
    let n = z - MAGIC;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let ni = (z.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    f32::from_bits((p.to_bits() as i32).wrapping_add(ni.wrapping_shl(23)) as u32)
}

/// SiLU(g) * u in place into `g`: `g / (1 + exp_f32(-g)) * u`. Where the CPU has AVX2
/// (detected at run time, cached by std) the same loop compiled for it: element by element the
/// same operations, so the same bits, 8 lanes at a time.
pub fn silu_mul(g: &mut [f32], u: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was detected just above.
        return unsafe { silu_mul_avx2(g, u) };
    }
    silu_mul_body(g, u);
}

#[inline(always)]
fn silu_mul_body(g: &mut [f32], u: &[f32]) {
    for (x, &y) in g.iter_mut().zip(u) {
        *x = *x / (1.0 + exp_f32(-*x)) * y;
    }
}

/// [`silu_mul`] 8 elements at a time in AVX2 registers: [`exp_f32`]'s operations in its order
/// (a multiply then an add, never fused; the clamp as `max(lo, x)` then `min(hi, x)`, which
/// keep a NaN `x` as the scalar clamp does), then the scalar loop for the tail.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn silu_mul_avx2(g: &mut [f32], u: &[f32]) {
    use std::arch::x86_64::*;
    let n = g.len().min(u.len());
    let c = |v: f32| _mm256_set1_ps(v);
    let (lo, hi, log2e, magic) = (c(-86.0), c(88.0), c(std::f32::consts::LOG2_E), c(12_582_912.0));
    let (ln2_hi, ln2_lo, one) = (c(0.693_145_75), c(1.428_606_8e-6), c(1.0));
    let k = [c(1.0 / 720.0), c(1.0 / 120.0), c(1.0 / 24.0), c(1.0 / 6.0), c(0.5), one, one];
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY (the loads and the store): i + 8 <= n <= both slices' lengths.
        let (gv, uv) = unsafe { (_mm256_loadu_ps(g.as_ptr().add(i)), _mm256_loadu_ps(u.as_ptr().add(i))) };
        // -g (a sign flip, as the scalar negation), clamped
        let x = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_xor_ps(gv, c(-0.0))));
        let z = _mm256_add_ps(_mm256_mul_ps(x, log2e), magic);
        let nn = _mm256_sub_ps(z, magic);
        let r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(nn, ln2_hi)), _mm256_mul_ps(nn, ln2_lo));
        // 1 + r * (1 + r * (0.5 + r * (1/6 + r * (1/24 + r * (1/120 + r * (1/720))))))
        let mut p = k[0];
        for kk in &k[1..] {
            p = _mm256_add_ps(*kk, _mm256_mul_ps(r, p));
        }
        let ni = _mm256_sub_epi32(_mm256_castps_si256(z), _mm256_castps_si256(magic));
        let e = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32::<23>(ni)));
        let y = _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), uv);
        unsafe { _mm256_storeu_ps(g.as_mut_ptr().add(i), y) };
        i += 8;
    }
    silu_mul_body(&mut g[i..n], &u[i..n]);
}

/// The `k` largest of `score` (ties to the lower index; NaN ranks lowest) into `sel`, largest
/// first. One pass: each score goes into the sorted list kept in `sel` after every entry it
/// does not beat (the entries before it have lower indices), if it makes the first `k`.
pub fn top_k(score: &[f32], sel: &mut [u32]) {
    let key = |v: f32| if v.is_nan() { f32::NEG_INFINITY } else { v };
    let k = sel.len().min(score.len());
    let mut len = 0;
    for (e, &v) in score.iter().enumerate() {
        let kv = key(v);
        // The place of `e`: after every kept entry whose key is >= its own.
        let mut at = len;
        while at > 0 && key(score[sel[at - 1] as usize]) < kv {
            at -= 1;
        }
        if at >= k {
            continue;
        }
        let end = (len + 1).min(k);
        sel.copy_within(at..end - 1, at + 1);
        sel[at] = e as u32;
        len = end;
    }
}

/// FNV-1a 64 over the little-endian bits of `v`: the output hash `qkern layer` prints.
pub fn hash_f32(v: &[f32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in v {
        for b in x.to_bits().to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Seeded inputs: SplitMix64, uniform in [-1, 1) with 24-bit resolution.
pub fn seeded_inputs(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed ^ 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn split<'a>(
    s: Stacked<'a>,
    n: usize,
    rows: usize,
    cols: usize,
    what: &str,
) -> Result<Vec<WeightsRef<'a>>, LayerError> {
    if !s.format.is_weight() {
        return Err(LayerError::Shape(format!("{what}: {} is not a quantized weight format qkern runs", s.format)));
    }
    let sz = s.format.matrix_bytes(rows, cols).map_err(qkern::Error::from)?;
    if s.bytes.len() != sz * n {
        return Err(LayerError::Shape(format!("{what}: {} bytes, expected {n} x {sz}", s.bytes.len())));
    }
    (0..n).map(|e| Ok(WeightsRef::new(s.format, rows, cols, &s.bytes[e * sz..(e + 1) * sz])?)).collect()
}

// One router per layer: the size difference costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
enum Router<'a> {
    /// Float weights `[n][n_embd]` on the host, the parts' scratch of
    /// [`router_logits_threaded`] (`max_tokens * n`), and its thread count.
    Host(Vec<f32>, Vec<f32>, usize),
    Device(Weights<'a>, Activations),
}

struct Expert<'a> {
    gate: Weights<'a>,
    up: Weights<'a>,
    down: Weights<'a>,
}

/// An MoE FFN layer resident on a device, with its buffers.
pub struct MoeLayer<'a> {
    pub n_embd: usize,
    pub n_ff: usize,
    pub cfg: MoeConfig,
    pub formats: [Format; 4],
    max_tokens: usize,
    router: Router<'a>,
    bias: Option<Vec<f32>>,
    experts: Vec<Expert<'a>>,
    // Buffers, made once.
    probs: Vec<f32>,
    score: Vec<f32>,
    sel: Vec<u32>,
    w: Vec<f32>,
    counts: Vec<u32>,
    order: Vec<u32>,
    xg: Vec<f32>,
    /// A group's gate results, then its up results (`[rows][n_ff]` each, experts in order).
    gu: Vec<f32>,
    /// Every group's down results (`[rows][n_embd]`, a group after the one before, experts in
    /// order within a group); `slot_row[token * k + s]`: the row of token's slot s.
    yd: Vec<f32>,
    slot_row: Vec<u32>,
    /// Experts per grouped call ([`MoeLayer::group`]), and the experts of the current group.
    group: usize,
    batch: [usize; MAX_GROUP],
    /// One activation buffer per expert of a group (gate input, up input where its format
    /// differs, down input).
    acts_gate: Vec<Activations>,
    acts_up: Option<Vec<Activations>>,
    acts_down: Vec<Activations>,
    /// The whole input quantized once a `forward`, for every expert that every token is routed
    /// to (at one token: every routed expert), whose gathered input would be the input itself.
    acts_all: Activations,
    acts_all_up: Option<Activations>,
}

/// The experts one grouped call takes by default ([`Device::matmul_grouped`]): a layer's routed
/// experts at up to 4 tokens for a top-k of 8. On CUDA a group of one format runs in one
/// launch per 16 jobs, on wgpu in one submission; on the CPU its matmuls run one after the
/// other. [`MoeConfig::group`] sets another size. 32 since session 38: a Qwen3-30B-A3B-shaped
/// layer (`qkern layer`, H100, engine/RESULTS.md), best of 21 runs, twice, groups of 8 / 32:
/// CUDA at 16 tokens 1.498, 1.564 / 1.254, 1.152 ms (at 4 tokens 0.377, 0.385 / 0.416, 0.328),
/// wgpu at 4 tokens 1.538, 1.406 / 1.055, 0.763 ms and at 16 tokens 4.730, 4.455 / 3.338,
/// 3.266 ms; at one token a top-8 layer has one group either way.
pub const GROUP: usize = 32;
/// The most experts a group may have ([`MoeConfig::group`]; the calls' job lists are arrays of
/// this size, so that `forward` allocates nothing).
pub const MAX_GROUP: usize = 64;
/// A group's activation buffers hold at most this many tokens (`group * max_tokens`; a group of
/// one past it), so that a layer made for long prompts keeps few of them: there each expert's
/// call has many tokens, and grouping saves little.
const GROUP_TOKENS: usize = 512;

/// A part of the layer's work, as [`StageTimes`] and [`KernelTimes`] count it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Gather,
    Quantize,
    GateUp,
    Act,
    Down,
    Combine,
}

/// Where the expert pass reports its stages: the layer's own stage times, or the kernel calls
/// alone.
trait Clock {
    fn run<E: Into<LayerError>>(&mut self, s: Stage, f: impl FnOnce() -> Result<(), E>) -> Result<(), LayerError>;
}

impl Clock for StageTimes {
    fn run<E: Into<LayerError>>(&mut self, s: Stage, f: impl FnOnce() -> Result<(), E>) -> Result<(), LayerError> {
        let t = Instant::now();
        f().map_err(Into::into)?;
        let d = t.elapsed();
        *match s {
            Stage::Gather => &mut self.gather,
            Stage::Quantize => &mut self.quantize,
            Stage::GateUp => &mut self.gate_up,
            Stage::Act => &mut self.act,
            Stage::Down => &mut self.down,
            Stage::Combine => &mut self.combine,
        } += d;
        Ok(())
    }
}

impl<'a> MoeLayer<'a> {
    /// Upload the layer to `dev` and make its buffers for up to `max_tokens` tokens.
    pub fn new(
        dev: &Device,
        w: &MoeWeights<'a>,
        cfg: MoeConfig,
        max_tokens: usize,
    ) -> Result<MoeLayer<'a>, LayerError> {
        let (ne, nf, n) = (w.n_embd, w.n_ff, cfg.n_expert);
        if n == 0 || cfg.top_k == 0 || cfg.top_k > n {
            return Err(LayerError::Shape(format!("top-k {} of {n} experts", cfg.top_k)));
        }
        if max_tokens == 0 {
            return Err(LayerError::Shape("max_tokens is 0".into()));
        }
        let router = if w.router.format.is_float() {
            let mut r = Vec::new();
            float_rows(w.router.format, w.router.bytes, &mut r)?;
            if r.len() != n * ne {
                return Err(LayerError::Shape(format!("router: {} values, expected {n} x {ne}", r.len())));
            }
            // The router's threads: at most 4 (the router of a 128-expert, 2048-wide layer at 16
            // tokens takes about 170 us on one core).
            let threads = std::thread::available_parallelism().map_or(1, |p| p.get()).min(4);
            Router::Host(r, vec![0.0; max_tokens * n], threads)
        } else {
            let wr = split(w.router, 1, n, ne, "router")?;
            let wr = dev.upload(wr[0])?;
            let acts = dev.activations_for(&wr, max_tokens)?;
            Router::Device(wr, acts)
        };
        if let Some(b) = &w.probs_bias
            && b.len() != n
        {
            return Err(LayerError::Shape(format!("exp_probs_b: {} values for {n} experts", b.len())));
        }
        let gate = split(w.gate, n, nf, ne, "ffn_gate_exps")?;
        let up = split(w.up, n, nf, ne, "ffn_up_exps")?;
        let down = split(w.down, n, ne, nf, "ffn_down_exps")?;
        let mut experts = Vec::with_capacity(n);
        for e in 0..n {
            experts.push(Expert { gate: dev.upload(gate[e])?, up: dev.upload(up[e])?, down: dev.upload(down[e])? });
        }
        let k = cfg.top_k;
        let group = match cfg.group {
            None => GROUP,
            Some(g @ 1..=MAX_GROUP) => g,
            Some(g) => return Err(LayerError::Shape(format!("a group of {g} experts (1 to {MAX_GROUP})"))),
        };
        let group = group.min(n).min((GROUP_TOKENS / max_tokens).max(1));
        let acts =
            |w: &Weights<'_>| (0..group).map(|_| dev.activations_for(w, max_tokens)).collect::<Result<Vec<_>, _>>();
        let acts_gate = acts(&experts[0].gate)?;
        let acts_up =
            if experts[0].up.act_format() != experts[0].gate.act_format() { Some(acts(&experts[0].up)?) } else { None };
        let acts_down = acts(&experts[0].down)?;
        let acts_all = dev.activations_for(&experts[0].gate, max_tokens)?;
        let acts_all_up = match &acts_up {
            Some(_) => Some(dev.activations_for(&experts[0].up, max_tokens)?),
            None => None,
        };
        // A group's rows: each token goes to at most min(k, group) of its experts.
        let group_rows = max_tokens * k.min(group);
        Ok(MoeLayer {
            n_embd: ne,
            n_ff: nf,
            formats: [w.router.format, w.gate.format, w.up.format, w.down.format],
            max_tokens,
            router,
            bias: w.probs_bias.clone(),
            experts,
            probs: vec![0.0; max_tokens * n],
            score: vec![0.0; n],
            sel: vec![0; max_tokens * k],
            w: vec![0.0; max_tokens * k],
            counts: vec![0; n + 1],
            order: vec![0; max_tokens * k],
            xg: vec![0.0; group_rows * ne],
            gu: vec![0.0; 2 * group_rows * nf],
            yd: vec![0.0; max_tokens * k * ne],
            slot_row: vec![0; max_tokens * k],
            group,
            batch: [0; MAX_GROUP],
            acts_gate,
            acts_up,
            acts_down,
            acts_all,
            acts_all_up,
            cfg,
        })
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Tokens routed to each expert by the last `forward`.
    pub fn routed(&self) -> Vec<usize> {
        self.counts.windows(2).map(|w| (w[1] - w[0]) as usize).collect()
    }

    /// Router, probabilities, top-k and the per-expert token lists for `x` (`nt` tokens).
    fn route(&mut self, dev: &Device, x: &[f32], nt: usize, times: &mut StageTimes) -> Result<(), LayerError> {
        let (ne, n, k) = (self.n_embd, self.cfg.n_expert, self.cfg.top_k);
        let mut t = Instant::now();
        let logits = &mut self.probs[..nt * n];
        match &mut self.router {
            Router::Host(r, scratch, threads) => router_logits_threaded(x, r, ne, logits, scratch, *threads),
            Router::Device(wr, acts) => {
                dev.quantize(x, acts)?;
                dev.matmul(wr, acts, logits)?;
                times.quantizes += 1;
                times.matmuls += 1;
            }
        }
        times.router += lap(&mut t);

        for t in 0..nt {
            let p = &mut self.probs[t * n..(t + 1) * n];
            match self.cfg.gating {
                Gating::Softmax => softmax(p),
                Gating::Sigmoid => p.iter_mut().for_each(|v| *v = 1.0 / (1.0 + (-*v).exp())),
            }
            self.score.copy_from_slice(p);
            if let Some(b) = &self.bias {
                self.score.iter_mut().zip(b).for_each(|(s, b)| *s += b);
            }
            let sel = &mut self.sel[t * k..(t + 1) * k];
            top_k(&self.score, sel);
            let w = &mut self.w[t * k..(t + 1) * k];
            for (wi, &e) in w.iter_mut().zip(sel.iter()) {
                *wi = p[e as usize];
            }
            if self.cfg.norm_topk {
                let mut s = 0f32;
                w.iter().for_each(|v| s += v);
                w.iter_mut().for_each(|v| *v /= s);
            }
            if self.cfg.weights_scale != 1.0 {
                let sc = self.cfg.weights_scale;
                w.iter_mut().for_each(|v| *v *= sc);
            }
        }
        // Counting sort of (token, slot) by expert: counts[e]..counts[e + 1] in `order`.
        self.counts.iter_mut().for_each(|c| *c = 0);
        for &e in &self.sel[..nt * k] {
            self.counts[e as usize + 1] += 1;
        }
        for e in 0..n {
            self.counts[e + 1] += self.counts[e];
        }
        for (ts, &e) in self.sel[..nt * k].iter().enumerate() {
            // counts[e] is the next free place of expert e (restored below).
            let c = &mut self.counts[e as usize];
            self.order[*c as usize] = ts as u32;
            *c += 1;
        }
        // Shift back: counts[e] was advanced to the end of expert e, which is start of e + 1.
        for e in (1..=n).rev() {
            self.counts[e] = self.counts[e - 1];
        }
        self.counts[0] = 0;
        times.topk += lap(&mut t);
        Ok(())
    }

    /// Experts per grouped call: [`MoeConfig::group`] (by default [`GROUP`]), fewer where the
    /// layer has fewer experts or is made for many tokens (a group's buffers hold at most 512
    /// tokens).
    pub fn group(&self) -> usize {
        self.group
    }

    /// Every routed expert's FFN, into `yd`, a group of experts at a time: the experts'
    /// tokens gathered and quantized by one grouped call (two where the gate and up inputs'
    /// formats differ), one grouped call for the group's gate and up matmuls (two where their
    /// formats differ), SiLU(gate) * up on the host, the down inputs quantized by one grouped
    /// call, one grouped call for the downs, each result's row noted in its token slot. The
    /// bits are those of one call per expert (every kernel is exact).
    fn experts_pass(&mut self, dev: &Device, x: &[f32], clock: &mut impl Clock) -> Result<(u64, u64), LayerError> {
        let (ne, nf, k, n) = (self.n_embd, self.n_ff, self.cfg.top_k, self.cfg.n_expert);
        let nt = x.len() / ne;
        let fused = self.formats[1] == self.formats[2];
        let (mut matmuls, mut quantizes) = (0u64, 0u64);
        let mut all_quantized = false;
        let (mut next, mut row0) = (0, 0);
        loop {
            // The group: the next experts with tokens, in expert order.
            let mut b = 0;
            while next < n && b < self.group {
                if self.counts[next + 1] > self.counts[next] {
                    self.batch[b] = next;
                    b += 1;
                }
                next += 1;
            }
            if b == 0 {
                return Ok((matmuls, quantizes));
            }
            let Self {
                experts,
                counts,
                order,
                xg,
                gu,
                yd,
                slot_row,
                batch,
                acts_gate,
                acts_up,
                acts_down,
                acts_all,
                acts_all_up,
                ..
            } = self;
            let span = |i: usize| (counts[batch[i]] as usize, counts[batch[i] + 1] as usize);
            // Each expert's rows (its tokens), and those gathered for its own gate/up input: none
            // for the experts routed every token (their tokens in order: the counting sort keeps
            // them ascending), which take the whole input, quantized once.
            let (mut tokens, mut gathered) = ([0usize; MAX_GROUP], [0usize; MAX_GROUP]);
            for i in 0..b {
                let (a, c) = span(i);
                tokens[i] = c - a;
                if c - a == nt {
                    debug_assert!(order[a..c].iter().enumerate().all(|(j, &ts)| ts as usize / k == j));
                    if !all_quantized {
                        clock.run(Stage::Quantize, || dev.quantize(x, acts_all))?;
                        quantizes += 1;
                        if let Some(au) = acts_all_up {
                            clock.run(Stage::Quantize, || dev.quantize(x, au))?;
                            quantizes += 1;
                        }
                        all_quantized = true;
                    }
                } else {
                    gathered[i] = c - a;
                }
            }
            let whole = |i: usize| gathered[i] == 0;
            let rows: usize = tokens[..b].iter().sum();
            let grows: usize = gathered[..b].iter().sum();
            if grows > 0 {
                // The other experts' tokens gathered one expert after another, all quantized by
                // one grouped call (the whole-input experts' buffers get 0 tokens: untouched).
                let xg = &mut xg[..grows * ne];
                clock.run(Stage::Gather, || {
                    let mut r = 0;
                    for i in (0..b).filter(|&i| !whole(i)) {
                        let (a, c) = span(i);
                        for &ts in &order[a..c] {
                            let tok = ts as usize / k;
                            xg[r * ne..(r + 1) * ne].copy_from_slice(&x[tok * ne..(tok + 1) * ne]);
                            r += 1;
                        }
                    }
                    Ok::<(), LayerError>(())
                })?;
                clock.run(Stage::Quantize, || dev.quantize_grouped(xg, &gathered[..b], &mut acts_gate[..b]))?;
                quantizes += 1;
                if let Some(au) = acts_up {
                    clock.run(Stage::Quantize, || dev.quantize_grouped(xg, &gathered[..b], &mut au[..b]))?;
                    quantizes += 1;
                }
            }
            let (ag, au) = (&acts_gate[..b], acts_up.as_deref().unwrap_or(acts_gate));
            let all_up = acts_all_up.as_ref().unwrap_or(acts_all);
            let gu = &mut gu[..2 * rows * nf];
            // The jobs in fixed arrays (no allocation), entries past the group's unused.
            let gate = |i: usize| {
                let i = i.min(b - 1);
                (&experts[batch[i]].gate, if whole(i) { &*acts_all } else { &ag[i] })
            };
            let up = |i: usize| {
                let i = i.min(b - 1);
                (&experts[batch[i]].up, if whole(i) { all_up } else { &au[i] })
            };
            if fused {
                let jobs: [_; 2 * MAX_GROUP] = std::array::from_fn(|j| if j < b { gate(j) } else { up(j - b) });
                clock.run(Stage::GateUp, || dev.matmul_grouped(&jobs[..2 * b], gu))?;
            } else {
                let (g, u) = gu.split_at_mut(rows * nf);
                let jobs: [_; MAX_GROUP] = std::array::from_fn(gate);
                clock.run(Stage::GateUp, || dev.matmul_grouped(&jobs[..b], g))?;
                let jobs: [_; MAX_GROUP] = std::array::from_fn(up);
                clock.run(Stage::GateUp, || dev.matmul_grouped(&jobs[..b], u))?;
            }
            matmuls += 2 * b as u64;
            let (g, u) = gu.split_at_mut(rows * nf);
            clock.run(Stage::Act, || {
                silu_mul(g, u);
                Ok::<(), LayerError>(())
            })?;
            clock.run(Stage::Quantize, || dev.quantize_grouped(g, &tokens[..b], &mut acts_down[..b]))?;
            quantizes += 1;
            let jobs: [_; MAX_GROUP] =
                std::array::from_fn(|i| (&experts[batch[i.min(b - 1)]].down, &acts_down[i.min(b - 1)]));
            let yd = &mut yd[row0 * ne..(row0 + rows) * ne];
            clock.run(Stage::Down, || dev.matmul_grouped(&jobs[..b], yd))?;
            matmuls += b as u64;
            clock.run(Stage::Combine, || {
                let mut r = row0;
                for i in 0..b {
                    let (a, c) = span(i);
                    for &ts in &order[a..c] {
                        slot_row[ts as usize] = r as u32;
                        r += 1;
                    }
                }
                Ok::<(), LayerError>(())
            })?;
            row0 += rows;
        }
    }

    /// `y = x W` for `nt` tokens of `x` (`[nt][n_embd]`) into `out` (`[nt][n_embd]`).
    pub fn forward(
        &mut self,
        dev: &Device,
        x: &[f32],
        out: &mut [f32],
        times: &mut StageTimes,
    ) -> Result<(), LayerError> {
        let t_all = Instant::now();
        let (ne, k) = (self.n_embd, self.cfg.top_k);
        let nt = check_io(x, out, ne, self.max_tokens)?;
        self.route(dev, x, nt, times)?;
        let (matmuls, quantizes) = self.experts_pass(dev, x, times)?;
        times.matmuls += matmuls;
        times.quantizes += quantizes;
        let t = Instant::now();
        for (tok, o) in out.chunks_exact_mut(ne).enumerate() {
            let w = &self.w[tok * k..(tok + 1) * k];
            let row = |s: usize| {
                let r = self.slot_row[tok * k + s] as usize;
                &self.yd[r * ne..(r + 1) * ne]
            };
            for (oi, &yi) in o.iter_mut().zip(row(0)) {
                *oi = yi * w[0];
            }
            for (s, &ws) in w.iter().enumerate().skip(1) {
                for (oi, &yi) in o.iter_mut().zip(row(s)) {
                    *oi += yi * ws;
                }
            }
        }
        times.combine += t.elapsed();
        times.total += t_all.elapsed();
        times.calls += 1;
        Ok(())
    }

    /// Every kernel call (quantize, matmul) a `forward` of `x` makes, each timed by itself:
    /// the calls run in the layer's order with the host work between them untimed, once per
    /// repetition; the sum of the fastest repetition. (Repeating one call back to back
    /// instead would time it with its weights in cache, which the layer, touching each
    /// expert once, never has.)
    pub fn kernels_alone(&mut self, dev: &Device, x: &[f32], reps: usize) -> Result<KernelTimes, LayerError> {
        let mut sink = StageTimes::default();
        let nt = tokens_of(x, self.n_embd, self.max_tokens)?;
        self.route(dev, x, nt, &mut sink)?;
        let mut calls = Calls::default();
        for _ in 0..reps.max(1) {
            calls.start();
            if let Router::Device(wr, acts) = &mut self.router {
                calls.time(false, || dev.quantize(x, acts))?;
                let logits = &mut self.probs[..nt * self.cfg.n_expert];
                calls.time(true, || dev.matmul(wr, acts, logits))?;
            }
            self.experts_pass(dev, x, &mut calls)?;
        }
        Ok(calls.total())
    }
}

/// Kernel-call times of one sequence of calls, repeated: the repetition whose sum is least
/// (the statistic the layer's own time uses: its fastest run).
#[derive(Default)]
struct Calls {
    cur: KernelTimes,
    best: Option<KernelTimes>,
}

impl Calls {
    fn start(&mut self) {
        self.finish();
        self.cur = KernelTimes::default();
    }
    fn finish(&mut self) {
        if self.cur.calls > 0 && self.best.as_ref().is_none_or(|b| self.cur.sum() < b.sum()) {
            self.best = Some(self.cur.clone());
        }
    }
    fn time<E: Into<LayerError>>(&mut self, matmul: bool, f: impl FnOnce() -> Result<(), E>) -> Result<(), LayerError> {
        let t = Instant::now();
        f().map_err(Into::into)?;
        let d = t.elapsed();
        if matmul {
            self.cur.matmul += d;
        } else {
            self.cur.quantize += d;
        }
        self.cur.calls += 1;
        Ok(())
    }
    fn total(mut self) -> KernelTimes {
        self.finish();
        self.best.unwrap_or_default()
    }
}

/// The kernel calls alone: quantizes and matmuls timed, host stages run untimed.
impl Clock for Calls {
    fn run<E: Into<LayerError>>(&mut self, s: Stage, f: impl FnOnce() -> Result<(), E>) -> Result<(), LayerError> {
        match s {
            Stage::Quantize => self.time(false, f),
            Stage::GateUp | Stage::Down => self.time(true, f),
            Stage::Gather | Stage::Act | Stage::Combine => f().map_err(Into::into),
        }
    }
}

/// Tokens of `x` (`[tokens][cols]`, at most `max`).
fn tokens_of(x: &[f32], cols: usize, max: usize) -> Result<usize, LayerError> {
    if x.is_empty() || !x.len().is_multiple_of(cols) {
        return Err(LayerError::Shape(format!("input of {} floats is not [tokens][{cols}]", x.len())));
    }
    let nt = x.len() / cols;
    if nt > max {
        return Err(LayerError::Tokens { got: nt, max });
    }
    Ok(nt)
}

/// Tokens of `x`, and `out` of the same length.
fn check_io(x: &[f32], out: &[f32], cols: usize, max: usize) -> Result<usize, LayerError> {
    let nt = tokens_of(x, cols, max)?;
    if out.len() != x.len() {
        return Err(LayerError::Shape(format!("output of {} floats, expected {}", out.len(), x.len())));
    }
    Ok(nt)
}

/// A dense FFN resident on a device, with its buffers.
pub struct DenseFfn<'a> {
    pub n_embd: usize,
    pub n_ff: usize,
    pub formats: [Format; 3],
    max_tokens: usize,
    gate: Weights<'a>,
    up: Weights<'a>,
    down: Weights<'a>,
    g: Vec<f32>,
    u: Vec<f32>,
    acts_gate: Activations,
    acts_up: Option<Activations>,
    acts_down: Activations,
}

impl<'a> DenseFfn<'a> {
    pub fn new(dev: &Device, w: &DenseWeights<'a>, max_tokens: usize) -> Result<DenseFfn<'a>, LayerError> {
        let (ne, nf) = (w.n_embd, w.n_ff);
        if max_tokens == 0 {
            return Err(LayerError::Shape("max_tokens is 0".into()));
        }
        let gate = dev.upload(split(w.gate, 1, nf, ne, "ffn_gate")?[0])?;
        let up = dev.upload(split(w.up, 1, nf, ne, "ffn_up")?[0])?;
        let down = dev.upload(split(w.down, 1, ne, nf, "ffn_down")?[0])?;
        let acts_gate = dev.activations_for(&gate, max_tokens)?;
        let acts_up =
            if up.act_format() != gate.act_format() { Some(dev.activations_for(&up, max_tokens)?) } else { None };
        let acts_down = dev.activations_for(&down, max_tokens)?;
        Ok(DenseFfn {
            n_embd: ne,
            n_ff: nf,
            formats: [w.gate.format, w.up.format, w.down.format],
            max_tokens,
            gate,
            up,
            down,
            g: vec![0.0; max_tokens * nf],
            u: vec![0.0; max_tokens * nf],
            acts_gate,
            acts_up,
            acts_down,
        })
    }

    pub fn forward(
        &mut self,
        dev: &Device,
        x: &[f32],
        out: &mut [f32],
        times: &mut StageTimes,
    ) -> Result<(), LayerError> {
        let t_all = Instant::now();
        let nt = check_io(x, out, self.n_embd, self.max_tokens)?;
        let mut t = Instant::now();
        dev.quantize(x, &mut self.acts_gate)?;
        if let Some(au) = &mut self.acts_up {
            dev.quantize(x, au)?;
            times.quantizes += 1;
        }
        times.quantizes += 1;
        times.quantize += lap(&mut t);
        let (g, u) = (&mut self.g[..nt * self.n_ff], &mut self.u[..nt * self.n_ff]);
        dev.matmul(&self.gate, &self.acts_gate, g)?;
        dev.matmul(&self.up, self.acts_up.as_ref().unwrap_or(&self.acts_gate), u)?;
        times.gate_up += lap(&mut t);
        silu_mul(g, u);
        times.act += lap(&mut t);
        dev.quantize(g, &mut self.acts_down)?;
        times.quantize += lap(&mut t);
        dev.matmul(&self.down, &self.acts_down, out)?;
        times.down += lap(&mut t);
        times.matmuls += 3;
        times.quantizes += 1;
        times.total += t_all.elapsed();
        times.calls += 1;
        Ok(())
    }

    /// As [`MoeLayer::kernels_alone`].
    pub fn kernels_alone(&mut self, dev: &Device, x: &[f32], reps: usize) -> Result<KernelTimes, LayerError> {
        let nt = tokens_of(x, self.n_embd, self.max_tokens)?;
        let mut out = vec![0f32; x.len()];
        let mut calls = Calls::default();
        for _ in 0..reps.max(1) {
            calls.start();
            calls.time(false, || dev.quantize(x, &mut self.acts_gate))?;
            if let Some(au) = &mut self.acts_up {
                calls.time(false, || dev.quantize(x, au))?;
            }
            let (g, u) = (&mut self.g[..nt * self.n_ff], &mut self.u[..nt * self.n_ff]);
            let au = self.acts_up.as_ref().unwrap_or(&self.acts_gate);
            calls.time(true, || dev.matmul(&self.gate, &self.acts_gate, g))?;
            calls.time(true, || dev.matmul(&self.up, au, u))?;
            silu_mul(g, u);
            let g = &self.g[..nt * self.n_ff];
            calls.time(false, || dev.quantize(g, &mut self.acts_down))?;
            calls.time(true, || dev.matmul(&self.down, &self.acts_down, &mut out))?;
        }
        Ok(calls.total())
    }
}

/// Overrides for what the GGUF metadata says.
#[derive(Clone, Debug, Default)]
pub struct LayerOptions {
    pub top_k: Option<usize>,
    pub n_expert: Option<usize>,
    pub norm_topk: Option<bool>,
    pub gating: Option<Gating>,
    /// Experts per grouped call ([`MoeConfig::group`]).
    pub group: Option<usize>,
}

/// A layer's FFN: MoE or dense.
pub enum FfnLayer<'a> {
    Moe(Box<MoeLayer<'a>>),
    Dense(Box<DenseFfn<'a>>),
}

/// The tensors of layer `n`'s FFN (what to load for it).
pub fn layer_tensors(n: usize) -> impl Fn(&TensorInfo) -> bool {
    let a = format!("blk.{n}.ffn_");
    let b = format!("blk.{n}.exp_probs_b");
    move |t: &TensorInfo| t.name.starts_with(&a) || t.name.starts_with(&b)
}

impl<'a> FfnLayer<'a> {
    /// Layer `layer`'s FFN from a loaded model (its `blk.N.ffn_*` tensors loaded).
    pub fn from_model(
        dev: &Device,
        m: &'a LoadedModel,
        layer: usize,
        opts: &LayerOptions,
        max_tokens: usize,
    ) -> Result<FfnLayer<'a>, LayerError> {
        let err = |msg: String| LayerError::Layer { layer, msg };
        let name = |s: &str| format!("blk.{layer}.{s}");
        let get = |s: &str| -> Result<Option<(&'a TensorInfo, Stacked<'a>)>, LayerError> {
            let n = name(s);
            let Some(t) = m.gguf.tensor(&n) else { return Ok(None) };
            let (_, bytes) = m.tensor(&n).ok_or_else(|| err(format!("tensor {n} was not loaded")))?;
            let format = t
                .format()
                .ok_or_else(|| err(format!("tensor {n} has type {}, which qkern does not run", t.ggml_type)))?;
            Ok(Some((t, Stacked { format, bytes })))
        };
        let need = |s: &str| get(s)?.ok_or_else(|| err(format!("missing tensor {}", name(s))));
        let arch = m.gguf.architecture().unwrap_or("").to_string();
        let key = |k: &str| format!("{arch}.{k}");
        let dims = |t: &TensorInfo, want: &[usize], what: &str| -> Result<(), LayerError> {
            let got: Vec<u64> = (0..want.len().max(t.dims.len())).map(|i| t.ne(i)).collect();
            let want: Vec<u64> = (0..got.len()).map(|i| want.get(i).copied().unwrap_or(1) as u64).collect();
            if got != want {
                return Err(err(format!("{what} has shape {:?}, expected {:?}", got, want)));
            }
            Ok(())
        };

        if let Some((rt, router)) = get("ffn_gate_inp.weight")? {
            let (gt, gate) = need("ffn_gate_exps.weight")?;
            let (ut, up) = need("ffn_up_exps.weight")?;
            let (dt, down) = need("ffn_down_exps.weight")?;
            let (ne, nf, n) = (gt.ne(0) as usize, gt.ne(1) as usize, gt.ne(2) as usize);
            dims(rt, &[ne, n], "ffn_gate_inp")?;
            dims(gt, &[ne, nf, n], "ffn_gate_exps")?;
            dims(ut, &[ne, nf, n], "ffn_up_exps")?;
            dims(dt, &[nf, ne, n], "ffn_down_exps")?;
            if let Some(meta) = m.gguf.get_u64(&key("expert_count"))?
                && meta as usize != n
            {
                return Err(err(format!("{} = {meta} but the tensors hold {n} experts", key("expert_count"))));
            }
            if let Some(o) = opts.n_expert
                && o != n
            {
                return Err(err(format!("--experts {o} but the tensors hold {n} experts")));
            }
            let top_k =
                match opts.top_k {
                    Some(k) => k,
                    None => m.gguf.get_u64(&key("expert_used_count"))?.ok_or_else(|| {
                        err(format!("no {} in the metadata: give the top-k", key("expert_used_count")))
                    })? as usize,
                };
            let norm_topk = match opts.norm_topk {
                Some(b) => b,
                None => m.gguf.get_bool(&key("expert_weights_norm"))?.unwrap_or(false),
            };
            let weights_scale = m.gguf.get_f32(&key("expert_weights_scale"))?.filter(|&s| s != 0.0).unwrap_or(1.0);
            let gating = match opts.gating {
                Some(g) => g,
                None => match m.gguf.get_u64(&key("expert_gating_func"))? {
                    None | Some(0) | Some(1) => Gating::Softmax,
                    Some(2) => Gating::Sigmoid,
                    Some(v) => {
                        return Err(err(format!(
                            "{} = {v} is not softmax (1) or sigmoid (2)",
                            key("expert_gating_func")
                        )));
                    }
                },
            };
            let probs_bias = match get("exp_probs_b.bias")? {
                None => None,
                Some((bt, b)) => {
                    dims(bt, &[n], "exp_probs_b")?;
                    let mut v = Vec::new();
                    float_rows(b.format, b.bytes, &mut v)?;
                    Some(v)
                }
            };
            let w = MoeWeights { n_embd: ne, n_ff: nf, router, gate, up, down, probs_bias };
            let cfg = MoeConfig { n_expert: n, top_k, norm_topk, weights_scale, gating, group: opts.group };
            return Ok(FfnLayer::Moe(Box::new(MoeLayer::new(dev, &w, cfg, max_tokens)?)));
        }
        if let Some((gt, gate)) = get("ffn_gate.weight")? {
            let (ut, up) = need("ffn_up.weight")?;
            let (dt, down) = need("ffn_down.weight")?;
            let (ne, nf) = (gt.ne(0) as usize, gt.ne(1) as usize);
            dims(gt, &[ne, nf], "ffn_gate")?;
            dims(ut, &[ne, nf], "ffn_up")?;
            dims(dt, &[nf, ne], "ffn_down")?;
            let w = DenseWeights { n_embd: ne, n_ff: nf, gate, up, down };
            return Ok(FfnLayer::Dense(Box::new(DenseFfn::new(dev, &w, max_tokens)?)));
        }
        Err(err(format!("no blk.{layer}.ffn_gate_inp.weight (MoE) or blk.{layer}.ffn_gate.weight (dense) in the file")))
    }

    pub fn n_embd(&self) -> usize {
        match self {
            FfnLayer::Moe(l) => l.n_embd,
            FfnLayer::Dense(l) => l.n_embd,
        }
    }

    pub fn forward(
        &mut self,
        dev: &Device,
        x: &[f32],
        out: &mut [f32],
        times: &mut StageTimes,
    ) -> Result<(), LayerError> {
        match self {
            FfnLayer::Moe(l) => l.forward(dev, x, out, times),
            FfnLayer::Dense(l) => l.forward(dev, x, out, times),
        }
    }

    pub fn kernels_alone(&mut self, dev: &Device, x: &[f32], reps: usize) -> Result<KernelTimes, LayerError> {
        match self {
            FfnLayer::Moe(l) => l.kernels_alone(dev, x, reps),
            FfnLayer::Dense(l) => l.kernels_alone(dev, x, reps),
        }
    }

    /// One line: kind, shapes, formats.
    pub fn describe(&self) -> String {
        match self {
            FfnLayer::Moe(l) => format!(
                "MoE: {} experts, top-{}{}{}, hidden {}, ffn {}, router {}, gate {}, up {}, down {}",
                l.cfg.n_expert,
                l.cfg.top_k,
                if l.cfg.gating == Gating::Sigmoid { " sigmoid" } else { " softmax" },
                if l.cfg.norm_topk { " normalised" } else { "" },
                l.n_embd,
                l.n_ff,
                l.formats[0],
                l.formats[1],
                l.formats[2],
                l.formats[3]
            ),
            FfnLayer::Dense(l) => format!(
                "dense FFN: hidden {}, ffn {}, gate {}, up {}, down {}",
                l.n_embd, l.n_ff, l.formats[0], l.formats[1], l.formats[2]
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_f32_is_accurate() {
        let mut worst = 0f64;
        let mut x = -86.0f32;
        while x <= 88.0 {
            let want = (x as f64).exp();
            let got = exp_f32(x) as f64;
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        assert!(worst < 5e-7, "relative error {worst}");
        assert_eq!(exp_f32(0.0), 1.0);
        assert!(exp_f32(-1000.0) > 0.0 && exp_f32(-1000.0) < 1e-37);
        assert!(exp_f32(1000.0).is_finite());
    }

    #[test]
    fn f16_conversion_is_exact() {
        for (h, f) in [(0x3C00u16, 1.0f32), (0xC000, -2.0), (0x0001, 5.960_464_5e-8), (0x7BFF, 65504.0), (0x8000, -0.0)]
        {
            assert_eq!(f16_to_f32(h).to_bits(), f.to_bits(), "{h:#x}");
        }
        assert!(f16_to_f32(0x7C00).is_infinite() && f16_to_f32(0x7E00).is_nan());
    }

    #[test]
    fn top_k_ties_go_to_the_lower_index() {
        let mut sel = [0u32; 3];
        top_k(&[0.1, 0.3, 0.3, 0.2, 0.3], &mut sel);
        assert_eq!(sel, [1, 2, 4]);
        top_k(&[f32::NAN, f32::NAN, 1.0], &mut sel);
        assert_eq!(sel[0], 2);
    }

    /// The one-pass top-k against the plain definition (for each slot, the lowest-index
    /// maximum not yet taken), on scores with many ties, NaNs and infinities.
    #[test]
    fn top_k_is_the_definition() {
        let plain = |score: &[f32], sel: &mut [u32]| {
            let key = |v: f32| if v.is_nan() { f32::NEG_INFINITY } else { v };
            for s in 0..sel.len() {
                let mut best = usize::MAX;
                for (e, &v) in score.iter().enumerate() {
                    if !sel[..s].contains(&(e as u32)) && (best == usize::MAX || key(v) > key(score[best])) {
                        best = e;
                    }
                }
                sel[s] = best as u32;
            }
        };
        let vals = [0.0f32, -0.0, 0.5, 0.25, 1.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -3.0];
        let mut st = 0x9E37_79B9_7F4A_7C15u64;
        for trial in 0..3000 {
            let n = 1 + trial % 40;
            let score: Vec<f32> = (0..n)
                .map(|_| {
                    st = st.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    vals[(st >> 33) as usize % if trial % 2 == 0 { vals.len() } else { 3 }]
                })
                .collect();
            let k = 1 + (trial / 40) % n;
            let (mut a, mut b) = (vec![0u32; k], vec![0u32; k]);
            plain(&score, &mut a);
            top_k(&score, &mut b);
            assert_eq!(a, b, "{score:?} k {k}");
        }
    }

    /// `silu_mul` (AVX2 where the CPU has it) gives the scalar formula's bits for every
    /// element, at every length (the 8-lane body and the tail), on specials and random bits.
    #[test]
    fn silu_mul_is_the_scalar_formula() {
        let mut st = 7u64;
        let mut g: Vec<f32> = (0..4099)
            .map(|i| {
                st = st.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                if i % 3 == 0 { f32::from_bits((st >> 32) as u32) } else { ((st >> 40) as f32 - 8e6) / 1e5 }
            })
            .collect();
        let specials =
            [f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1e-40, -1e-40, 86.0, -86.5, 88.5, 1e30];
        for (i, v) in specials.into_iter().enumerate() {
            g[5 * i] = v;
        }
        let u: Vec<f32> = (0..g.len()).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        for len in [0usize, 1, 7, 8, 9, 64, 1000, 4099] {
            let want: Vec<f32> = g[..len].iter().zip(&u).map(|(&x, &y)| x / (1.0 + exp_f32(-x)) * y).collect();
            let mut got = g[..len].to_vec();
            silu_mul(&mut got, &u[..len]);
            for (i, (a, b)) in want.iter().zip(&got).enumerate() {
                assert!(a.to_bits() == b.to_bits(), "len {len} element {i} ({:e}): {a:e} vs {b:e}", g[i]);
            }
        }
    }

    #[test]
    fn softmax_sums_to_one() {
        let mut v = [1.0f32, 2.0, 3.0, -50.0];
        softmax(&mut v);
        let s: f32 = v.iter().sum();
        assert!((s - 1.0).abs() < 1e-6 && v[2] > v[1] && v[1] > v[0]);
    }

    #[test]
    fn router_logits_are_dot_f32_bits() {
        for (ne, n, nt) in
            [(64usize, 8usize, 3usize), (21, 7, 3), (256, 5, 3), (8, 1, 3), (2048 + 13, 12, 5), (40, 9, 1), (7, 4, 2)]
        {
            let x = seeded_inputs(ne as u64, nt * ne);
            let w = seeded_inputs(n as u64 + 100, n * ne);
            let mut l = vec![0f32; nt * n];
            router_logits(&x, &w, ne, &mut l);
            for t in 0..nt {
                for e in 0..n {
                    let want = dot_f32(&x[t * ne..(t + 1) * ne], &w[e * ne..(e + 1) * ne]);
                    assert_eq!(l[t * n + e].to_bits(), want.to_bits(), "ne {ne} n {n} t {t} e {e}");
                }
            }
        }
    }

    /// The threaded router gives [`router_logits`]' bits for every split (expert counts not a
    /// multiple of 4 or of the parts, one token), and one thread where the work is small.
    #[test]
    fn router_threads_keep_the_bits() {
        for (ne, n, nt) in
            [(2048usize, 128usize, 16usize), (4096 + 8, 37, 16), (8192, 13, 40), (4096, 13, 1), (64, 8, 3)]
        {
            let x = seeded_inputs(ne as u64 + 7, nt * ne);
            let w = seeded_inputs(n as u64 + 200, n * ne);
            let mut want = vec![0f32; nt * n];
            router_logits(&x, &w, ne, &mut want);
            for threads in [1, 2, 3, 4, 8] {
                let mut got = vec![f32::NAN; nt * n];
                let mut scratch = vec![0f32; nt * n];
                router_logits_threaded(&x, &w, ne, &mut got, &mut scratch, threads);
                let same = want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "ne {ne} n {n} tokens {nt} threads {threads}");
            }
        }
    }

    #[test]
    fn dot_f32_order() {
        let a: Vec<f32> = (0..21).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..21).map(|i| 1.0 - i as f32 * 0.25).collect();
        let want: f64 = a.iter().zip(&b).map(|(x, y)| (*x as f64) * (*y as f64)).sum();
        assert!((dot_f32(&a, &b) as f64 - want).abs() < 1e-3);
    }
}
