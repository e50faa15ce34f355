//! Synthetic MoE GGUF files (real tensor names and shapes, scaled down), for the tests and
//! for demonstrating `qkern layer` without downloading a model. Weights are raw random
//! blocks of the format with every scale field set to a finite value of moderate size, so
//! that every output is finite; the data is streamed, so files of any size take bounded
//! memory. `qkern gguf-synth` writes one.

use std::io::Write;
use std::path::Path;

use qkern::Format;
use qkern::fp::f32_to_f16;

use crate::gguf::write::{GgufWriter, TensorSpec, WriteError};
use crate::gguf::{Array, GString, GgmlType, Value};

/// What to write.
#[derive(Clone, Debug)]
pub struct SynthSpec {
    /// `general.architecture` (the prefix of the `<arch>.expert_*` keys).
    pub arch: String,
    /// Gate and up (and dense) weights.
    pub format: Format,
    /// Up weights where they differ from `format` (None: `format`).
    pub up_format: Option<Format>,
    /// Down weights (default: `format`).
    pub down_format: Format,
    /// Router weights: f32, f16 or bf16 (or a quantized weight format).
    pub router: Format,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_expert: usize,
    pub top_k: usize,
    /// Layers in all.
    pub layers: usize,
    /// The first this many layers are dense FFNs (`ffn_gate/up/down`), the rest MoE.
    pub dense_layers: usize,
    /// `general.alignment` (None: ggml's default 32, key not written).
    pub alignment: Option<u32>,
    pub seed: u64,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec {
            arch: "qkern-synth".into(),
            format: Format::Q4_K,
            up_format: None,
            down_format: Format::Q4_K,
            router: Format::F32,
            n_embd: 256,
            n_ff: 512,
            n_expert: 4,
            top_k: 2,
            layers: 1,
            dense_layers: 0,
            alignment: None,
            seed: 1,
        }
    }
}

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn fill(&mut self, b: &mut [u8]) {
        for c in b.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

/// Random blocks of `f` with sane scales into `out` (whole blocks).
fn random_blocks(rng: &mut Rng, f: Format, out: &mut [u8]) {
    rng.fill(out);
    let bb = f.block_bytes();
    for b in out.chunks_exact_mut(bb) {
        for &off in f.f16_scale_offsets() {
            // +-(0.25..1) * 2^-7
            let v = (0.25 + 0.75 * rng.uniform()) / 128.0;
            let v = if rng.next() & 1 == 0 { v } else { -v };
            b[off..off + 2].copy_from_slice(&f32_to_f16(v).to_bits().to_le_bytes());
        }
        match f {
            // UE4M3 sub-block scales: exponent 3..=6 (2^-4 .. 2^-1), any mantissa.
            Format::NVFP4 => {
                for d in &mut b[..4] {
                    *d = ((3 + (*d & 3)) << 3) | (*d & 7);
                }
            }
            // ggml's quantizers never emit -128 in q8_0 weights.
            Format::Q8_0 => {
                for q in &mut b[2..] {
                    if *q == 0x80 {
                        *q = 0x81;
                    }
                }
            }
            _ => {}
        }
    }
}

fn float_bytes(rng: &mut Rng, f: Format, out: &mut [u8]) {
    match f {
        Format::F32 => {
            for c in out.chunks_exact_mut(4) {
                c.copy_from_slice(&((rng.uniform() * 2.0 - 1.0) * 0.1).to_le_bytes());
            }
        }
        Format::F16 => {
            for c in out.chunks_exact_mut(2) {
                c.copy_from_slice(&f32_to_f16((rng.uniform() * 2.0 - 1.0) * 0.1).to_bits().to_le_bytes());
            }
        }
        _ => {
            // bf16: the top half of an f32 (truncated).
            for c in out.chunks_exact_mut(2) {
                let b = ((rng.uniform() * 2.0 - 1.0) * 0.1).to_bits();
                c.copy_from_slice(&((b >> 16) as u16).to_le_bytes());
            }
        }
    }
}

/// The writer for `spec`: metadata and tensor declarations.
pub fn writer(spec: &SynthSpec) -> Result<GgufWriter, WriteError> {
    let mut w = GgufWriter::new();
    let a = &spec.arch;
    let u32v = |v: usize| Value::U32(v as u32);
    if let Some(al) = spec.alignment {
        w.set("general.alignment", Value::U32(al))?;
    }
    w.set("general.architecture", Value::Str(GString::from(a.as_str())))?;
    w.set("general.name", Value::Str(GString::from("qkern synthetic MoE")))?;
    w.set(&format!("{a}.block_count"), u32v(spec.layers))?;
    w.set(&format!("{a}.embedding_length"), u32v(spec.n_embd))?;
    w.set(&format!("{a}.feed_forward_length"), u32v(spec.n_ff))?;
    w.set(&format!("{a}.expert_feed_forward_length"), u32v(spec.n_ff))?;
    w.set(&format!("{a}.expert_count"), u32v(spec.n_expert))?;
    w.set(&format!("{a}.expert_used_count"), u32v(spec.top_k))?;
    w.set(&format!("{a}.leading_dense_block_count"), u32v(spec.dense_layers))?;
    w.set("qkern.synth.seed", Value::U64(spec.seed))?;
    let toks: Vec<GString> = ["<s>", "</s>", "a", "b", "ab", "\u{2581}the"].iter().map(|s| GString::from(*s)).collect();
    w.set("tokenizer.ggml.tokens", Value::Array(Array::Str(toks)))?;
    let (e, f, n) = (spec.n_embd as u64, spec.n_ff as u64, spec.n_expert as u64);
    let t = |f: Format| GgmlType::from(f);
    let up = spec.up_format.unwrap_or(spec.format);
    for l in 0..spec.layers {
        if l < spec.dense_layers {
            w.add_tensor(&format!("blk.{l}.ffn_gate.weight"), &[e, f], t(spec.format))?;
            w.add_tensor(&format!("blk.{l}.ffn_up.weight"), &[e, f], t(up))?;
            w.add_tensor(&format!("blk.{l}.ffn_down.weight"), &[f, e], t(spec.down_format))?;
        } else {
            w.add_tensor(&format!("blk.{l}.ffn_gate_inp.weight"), &[e, n], t(spec.router))?;
            w.add_tensor(&format!("blk.{l}.ffn_gate_exps.weight"), &[e, f, n], t(spec.format))?;
            w.add_tensor(&format!("blk.{l}.ffn_up_exps.weight"), &[e, f, n], t(up))?;
            w.add_tensor(&format!("blk.{l}.ffn_down_exps.weight"), &[f, e, n], t(spec.down_format))?;
        }
    }
    Ok(w)
}

/// Stream tensor `spec`'s random data (seeded by the file seed and the tensor index).
fn tensor_data(seed: u64, i: usize, t: &TensorSpec, out: &mut dyn Write) -> std::io::Result<()> {
    let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0xD134_2543_DE82_EF95));
    let Some(f) = t.ggml_type.format() else {
        return Err(std::io::Error::other(format!("{}: no qkern format", t.name)));
    };
    let bb = f.block_bytes();
    let chunk = (1 << 20) / bb * bb;
    let mut buf = vec![0u8; chunk.min(t.bytes as usize).max(bb)];
    let mut left = t.bytes as usize;
    while left > 0 {
        let n = left.min(buf.len());
        let b = &mut buf[..n];
        if f.is_float() {
            float_bytes(&mut rng, f, b)
        } else {
            random_blocks(&mut rng, f, b)
        }
        out.write_all(b)?;
        left -= n;
    }
    Ok(())
}

/// Write the synthetic file; returns its length.
pub fn write(path: &Path, spec: &SynthSpec) -> Result<u64, WriteError> {
    let w = writer(spec)?;
    w.write_file(path, |i, t, out| tensor_data(spec.seed, i, t, out))?;
    Ok(w.file_len())
}
