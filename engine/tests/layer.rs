//! The MoE and dense FFN layers on synthetic GGUF files in every weight format:
//!
//! - files written by ggml's own writer with ggml-quantized weights: the layer's output is
//!   bit-identical to the same computation done with ggml's `from_float` and `vec_dot`
//!   (so the wiring, expert slicing, transposes and routed-token gathers are right);
//! - the output bits are identical on every backend present, CPU paths and thread counts
//!   1 and 2 included;
//! - files from `synth` (our writer, random blocks) run too, with a bf16 router and a dense
//!   layer.

use qkern::{BackendSpec, Device, DeviceOptions, Format};
use qkern_engine::ffn::{self, FfnLayer, Gating, LayerOptions, StageTimes};
use qkern_engine::load::{self, LoadOptions, LoadedModel};
use qkern_engine::synth::{self, SynthSpec};
use qkern_parity::ggml;
use qkern_parity::gguf_writer::{GgmlGgufWriter, KvValue};
use qkern_parity::inputs::Rng;

const NE: usize = 256;
const NF: usize = 512;
const NEXP: usize = 4;
const TOPK: usize = 2;

/// Every device this build and machine can open: CPU paths with 1 and 2 threads, GPUs.
/// wgpu is opened directly as well as through `available_backends` (which, in this
/// version of `qkern`, lists wgpu as not built even when it is), so that a build with
/// `--features qkern/wgpu` runs every check on wgpu too (lavapipe here). Set
/// `QKERN_TEST_REQUIRE=wgpu` (or `cuda`, comma-separated) to fail when one is missing.
fn devices() -> Vec<Device> {
    let mut v: Vec<Device> = Vec::new();
    let mut specs: Vec<BackendSpec> =
        qkern::available_backends().into_iter().filter(|(_, ok)| ok.is_ok()).map(|(s, _)| s).collect();
    if !specs.iter().any(|s| matches!(s, BackendSpec::Wgpu(_))) {
        specs.push(BackendSpec::Wgpu(None));
    }
    for spec in specs {
        match spec {
            BackendSpec::Cpu(_) => {
                for t in [1, 2] {
                    v.push(Device::open(spec, DeviceOptions { threads: Some(t) }).expect("open CPU device"));
                }
            }
            _ => match Device::open(spec, DeviceOptions::default()) {
                Ok(d) => v.push(d),
                Err(e) => eprintln!("{spec}: not tested ({e})"),
            },
        }
    }
    let names: Vec<String> = v.iter().map(|d| d.name()).collect();
    eprintln!("devices: {names:?}");
    for want in std::env::var("QKERN_TEST_REQUIRE").unwrap_or_default().split(',').filter(|s| !s.is_empty()) {
        assert!(
            v.iter().any(|d| d.spec().to_string().starts_with(want.trim())),
            "QKERN_TEST_REQUIRE={want} but only {names:?} opened"
        );
    }
    assert!(v.iter().any(|d| d.spec() == BackendSpec::Cpu(Some(qkern::CpuPath::Scalar))), "no cpu-scalar");
    v
}

fn quantized(rng: &mut Rng, f: Format, rows: usize, cols: usize) -> Vec<u8> {
    let x: Vec<f32> = (0..rows * cols).map(|_| rng.normal() * 0.05).collect();
    let im: Option<Vec<f32>> = ggml::requires_imatrix(f).then(|| (0..cols).map(|_| 0.5 + rng.uniform()).collect());
    ggml::quantize(f, &x, cols, im.as_deref()).expect("ggml quantize")
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A file with blk.0 MoE (router f32 or bf16) and blk.1 dense, weights quantized by ggml,
/// written by ggml; returns the router as f32.
fn write_ggml_file(path: &std::path::Path, f: Format, bf16_router: bool, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut w = GgmlGgufWriter::new();
    w.set("general.architecture", KvValue::Str("qkern-moe".into())).unwrap();
    w.set("qkern-moe.expert_count", KvValue::U32(NEXP as u32)).unwrap();
    w.set("qkern-moe.expert_used_count", KvValue::U32(TOPK as u32)).unwrap();
    w.set("qkern-moe.expert_weights_norm", KvValue::Bool(seed.is_multiple_of(2))).unwrap();
    let router: Vec<f32> = (0..NEXP * NE).map(|_| rng.normal() * 0.2).collect();
    let (rt, rb, router) = if bf16_router {
        let b: Vec<u16> = router.iter().map(|x| (x.to_bits() >> 16) as u16).collect();
        let r = b.iter().map(|&h| f32::from_bits((h as u32) << 16)).collect();
        (Format::BF16, b.iter().flat_map(|h| h.to_le_bytes()).collect(), r)
    } else {
        (Format::F32, f32_bytes(&router), router)
    };
    w.add_tensor("blk.0.ffn_gate_inp.weight", rt.id(), &[NE as u64, NEXP as u64], rb).unwrap();
    let stack = |rng: &mut Rng, rows, cols| {
        let mut v = Vec::new();
        for _ in 0..NEXP {
            v.extend(quantized(rng, f, rows, cols));
        }
        v
    };
    let (gate, up, down) = (stack(&mut rng, NF, NE), stack(&mut rng, NF, NE), stack(&mut rng, NE, NF));
    let (e, n, x) = (NE as u64, NF as u64, NEXP as u64);
    w.add_tensor("blk.0.ffn_gate_exps.weight", f.id(), &[e, n, x], gate).unwrap();
    w.add_tensor("blk.0.ffn_up_exps.weight", f.id(), &[e, n, x], up).unwrap();
    w.add_tensor("blk.0.ffn_down_exps.weight", f.id(), &[n, e, x], down).unwrap();
    w.add_tensor("blk.1.ffn_gate.weight", f.id(), &[e, n], quantized(&mut rng, f, NF, NE)).unwrap();
    w.add_tensor("blk.1.ffn_up.weight", f.id(), &[e, n], quantized(&mut rng, f, NF, NE)).unwrap();
    w.add_tensor("blk.1.ffn_down.weight", f.id(), &[n, e], quantized(&mut rng, f, NE, NF)).unwrap();
    w.write(path).unwrap();
    router
}

/// `rows` outputs of `x` against a `rows x cols` matrix of `f`, with ggml's own kernels.
fn ggml_matvec(f: Format, w: &[u8], rows: usize, cols: usize, x: &[f32]) -> Vec<f32> {
    let act = ggml::vec_dot_type(f).unwrap();
    let mut a = vec![0u8; act.row_bytes(cols).unwrap()];
    ggml::from_float(act, x, &mut a).unwrap();
    let rb = f.row_bytes(cols).unwrap();
    (0..rows).map(|r| ggml::vec_dot(f, cols, &w[r * rb..(r + 1) * rb], &a).unwrap()).collect()
}

/// The MoE layer computed token by token with ggml's kernels and the engine's documented
/// host arithmetic.
fn reference_moe(m: &LoadedModel, f: Format, router: &[f32], x: &[f32], norm: bool) -> Vec<f32> {
    let g = m.tensor("blk.0.ffn_gate_exps.weight").unwrap().1;
    let u = m.tensor("blk.0.ffn_up_exps.weight").unwrap().1;
    let d = m.tensor("blk.0.ffn_down_exps.weight").unwrap().1;
    let sz_gu = f.matrix_bytes(NF, NE).unwrap();
    let sz_d = f.matrix_bytes(NE, NF).unwrap();
    let mut out = Vec::new();
    for xt in x.chunks_exact(NE) {
        let mut p: Vec<f32> = router.chunks_exact(NE).map(|w| ffn::dot_f32(xt, w)).collect();
        ffn::softmax(&mut p);
        let mut sel = [0u32; TOPK];
        ffn::top_k(&p, &mut sel);
        let mut w: Vec<f32> = sel.iter().map(|&e| p[e as usize]).collect();
        if norm {
            let s: f32 = w.iter().fold(0.0, |a, b| a + b);
            w.iter_mut().for_each(|v| *v /= s);
        }
        let mut acc = vec![0f32; NE];
        for (s, &e) in sel.iter().enumerate() {
            let e = e as usize;
            let mut gv = ggml_matvec(f, &g[e * sz_gu..(e + 1) * sz_gu], NF, NE, xt);
            let uv = ggml_matvec(f, &u[e * sz_gu..(e + 1) * sz_gu], NF, NE, xt);
            ffn::silu_mul(&mut gv, &uv);
            let y = ggml_matvec(f, &d[e * sz_d..(e + 1) * sz_d], NE, NF, &gv);
            for (a, yi) in acc.iter_mut().zip(y) {
                *a = if s == 0 { yi * w[0] } else { *a + yi * w[s] };
            }
        }
        out.extend(acc);
    }
    out
}

fn reference_dense(m: &LoadedModel, f: Format, x: &[f32]) -> Vec<f32> {
    let g = m.tensor("blk.1.ffn_gate.weight").unwrap().1;
    let u = m.tensor("blk.1.ffn_up.weight").unwrap().1;
    let d = m.tensor("blk.1.ffn_down.weight").unwrap().1;
    let mut out = Vec::new();
    for xt in x.chunks_exact(NE) {
        let mut gv = ggml_matvec(f, g, NF, NE, xt);
        let uv = ggml_matvec(f, u, NF, NE, xt);
        ffn::silu_mul(&mut gv, &uv);
        out.extend(ggml_matvec(f, d, NE, NF, &gv));
    }
    out
}

fn run_layer(dev: &Device, m: &LoadedModel, layer: usize, x: &[f32]) -> Vec<f32> {
    let mut l = FfnLayer::from_model(dev, m, layer, &LayerOptions::default(), 64).expect("layer");
    let mut out = vec![0f32; x.len()];
    l.forward(dev, x, &mut out, &mut StageTimes::default()).expect("forward");
    out
}

#[track_caller]
fn assert_bits(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len());
    if let Some(i) = a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits()) {
        panic!("{what}: first difference at {i}: {} vs {}", a[i], b[i]);
    }
}

#[test]
fn ggml_written_layers_match_ggml_kernels_on_every_device() {
    let dir = tempfile::tempdir().unwrap();
    let devs = devices();
    for (i, f) in Format::WEIGHTS.into_iter().enumerate() {
        let path = dir.path().join(format!("{}.gguf", f.name()));
        let router = write_ggml_file(&path, f, i % 2 == 1, i as u64);
        let m = load::load(&path, &|_| true, &LoadOptions::default()).unwrap();
        for nt in [1usize, 5, 33] {
            let x = ffn::seeded_inputs(nt as u64 * 31 + i as u64, nt * NE);
            let want_moe = reference_moe(&m, f, &router, &x, i.is_multiple_of(2));
            let want_dense = reference_dense(&m, f, &x);
            for dev in &devs {
                let what = format!("{f} nt={nt} on {}", dev.name());
                if std::env::var_os("QKERN_TEST_TRACE").is_some() {
                    eprintln!("running {what}");
                }
                assert_bits(&run_layer(dev, &m, 0, &x), &want_moe, &format!("MoE {what}"));
                assert_bits(&run_layer(dev, &m, 1, &x), &want_dense, &format!("dense {what}"));
            }
        }
    }
}

#[test]
fn synth_files_run_identically_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let devs = devices();
    for (i, f) in Format::WEIGHTS.into_iter().enumerate() {
        let spec = SynthSpec {
            format: f,
            down_format: Format::WEIGHTS[(i + 3) % Format::WEIGHTS.len()],
            router: [Format::F32, Format::BF16, Format::F16][i % 3],
            n_embd: 512,
            n_ff: 256,
            n_expert: 6,
            top_k: 3,
            layers: 2,
            dense_layers: 1,
            seed: i as u64,
            ..SynthSpec::default()
        };
        let path = dir.path().join(format!("s{i}.gguf"));
        synth::write(&path, &spec).unwrap();
        let m = load::load(&path, &ffn::layer_tensors(1), &LoadOptions::default()).unwrap();
        let m0 = load::load(&path, &ffn::layer_tensors(0), &LoadOptions::default()).unwrap();
        let x = ffn::seeded_inputs(9, 17 * 512);
        let (mut moe, mut dense) = (None, None);
        for dev in &devs {
            let y = run_layer(dev, &m, 1, &x);
            assert!(y.iter().all(|v| v.is_finite()), "{f}: non-finite output");
            let h = ffn::hash_f32(&y);
            assert_eq!(*moe.get_or_insert(h), h, "MoE {f} on {}", dev.name());
            let y = run_layer(dev, &m0, 0, &x);
            let h = ffn::hash_f32(&y);
            assert_eq!(*dense.get_or_insert(h), h, "dense {f} on {}", dev.name());
        }
    }
}

#[test]
fn routing_options_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    synth::write(&path, &SynthSpec { n_expert: 8, top_k: 2, ..SynthSpec::default() }).unwrap();
    let m = load::load(&path, &|_| true, &LoadOptions::default()).unwrap();
    let dev = &devices()[0];
    let x = ffn::seeded_inputs(1, 40 * 256);
    let mut out = vec![0f32; x.len()];
    let mut hashes = std::collections::HashSet::new();
    for (k, gating, norm) in [(2, None, None), (3, None, None), (2, Some(Gating::Sigmoid), None), (2, None, Some(true))]
    {
        let o = LayerOptions { top_k: Some(k), gating, norm_topk: norm, n_expert: None, group: None };
        let mut l = FfnLayer::from_model(dev, &m, 0, &o, 40).unwrap();
        l.forward(dev, &x, &mut out, &mut StageTimes::default()).unwrap();
        if let FfnLayer::Moe(moe) = &l {
            let r = moe.routed();
            assert_eq!(r.iter().sum::<usize>(), 40 * k);
            assert!(r.iter().all(|&n| n <= 40));
        }
        assert!(hashes.insert(ffn::hash_f32(&out)), "options made no difference");
    }
    // Errors: too many tokens, a top-k above the expert count, a missing layer, wrong expert count.
    let mut l = FfnLayer::from_model(dev, &m, 0, &LayerOptions::default(), 8).unwrap();
    assert!(l.forward(dev, &x, &mut out, &mut StageTimes::default()).is_err());
    assert!(FfnLayer::from_model(dev, &m, 0, &LayerOptions { top_k: Some(9), ..Default::default() }, 8).is_err());
    assert!(FfnLayer::from_model(dev, &m, 5, &LayerOptions::default(), 8).is_err());
    assert!(FfnLayer::from_model(dev, &m, 0, &LayerOptions { n_expert: Some(4), ..Default::default() }, 8).is_err());
}

/// A group size set through [`LayerOptions::group`] (bigger than the default, 1, and past the
/// layer's expert count) gives the same bits on every device, with one grouped quantize call
/// for each group's down inputs; 0 and more than `MAX_GROUP` experts are refused.
#[test]
fn group_option_keeps_the_bits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.gguf");
    let spec = SynthSpec { n_expert: 40, top_k: 6, seed: 11, ..SynthSpec::default() };
    synth::write(&path, &spec).unwrap();
    let m = load::load(&path, &|_| true, &LoadOptions::default()).unwrap();
    let nt = 12;
    let x = ffn::seeded_inputs(5, nt * spec.n_embd);
    let mut want = None;
    for dev in &devices() {
        for (opt, group) in [(None, ffn::GROUP), (Some(1), 1), (Some(16), 16), (Some(32), 32), (Some(64), 40)] {
            let o = LayerOptions { group: opt, ..Default::default() };
            let mut l = FfnLayer::from_model(dev, &m, 0, &o, nt).unwrap();
            let FfnLayer::Moe(moe) = &mut l else { panic!("not an MoE layer") };
            assert_eq!(moe.group(), group, "{opt:?}");
            let mut out = vec![0f32; x.len()];
            let mut t = StageTimes::default();
            moe.forward(dev, &x, &mut out, &mut t).unwrap();
            let used = moe.routed().iter().filter(|&&n| n > 0).count();
            assert!(used > 16, "{used} experts routed to: too few for two groups of 16");
            let groups = used.div_ceil(group) as u64;
            // each group: its gathered inputs (no expert here takes all 12 tokens) and its down inputs
            assert_eq!(t.quantizes, 2 * groups, "group {group}, {used} experts");
            assert_bits(&out, want.get_or_insert_with(|| out.clone()), &format!("group {group} on {}", dev.name()));
        }
        for bad in [0, ffn::MAX_GROUP + 1] {
            let o = LayerOptions { group: Some(bad), ..Default::default() };
            assert!(FfnLayer::from_model(dev, &m, 0, &o, nt).is_err(), "a group of {bad}");
        }
    }
}

/// The expert pass's groups (up to `ffn::GROUP` experts a grouped call, fewer in a layer made for
/// many tokens), its gate and up matmuls in one grouped call or two (formats alike or not), and
/// the whole input quantized once for the experts every token goes to (at one token, all of
/// them) leave the bits as they are.
#[test]
fn expert_groups_keep_the_bits() {
    let dir = tempfile::tempdir().unwrap();
    let devs = devices();
    for (i, up) in [None, Some(Format::Q8_0)].into_iter().enumerate() {
        let path = dir.path().join(format!("g{i}.gguf"));
        let spec = SynthSpec { n_expert: 8, top_k: 3, up_format: up, seed: 7 + i as u64, ..SynthSpec::default() };
        synth::write(&path, &spec).unwrap();
        let m = load::load(&path, &|_| true, &LoadOptions::default()).unwrap();
        let per_input = u64::from(up.is_some()) + 1; // quantizes of one expert input (gate, up)
        for nt in [1usize, 20] {
            let x = ffn::seeded_inputs(3 + nt as u64, nt * 256);
            let mut want = None;
            for dev in &devs {
                for (max_tokens, group) in [(20, 8), (128, 4), (256, 2), (512, 1)] {
                    let mut l = FfnLayer::from_model(dev, &m, 0, &LayerOptions::default(), max_tokens).unwrap();
                    let FfnLayer::Moe(moe) = &mut l else { panic!("not an MoE layer") };
                    assert_eq!(moe.group(), group);
                    let mut out = vec![0f32; x.len()];
                    let mut t = StageTimes::default();
                    moe.forward(dev, &x, &mut out, &mut t).unwrap();
                    let routed = moe.routed();
                    let used = routed.iter().filter(|&&n| n > 0).count() as u64;
                    let whole = routed.iter().filter(|&&n| n == nt).count() as u64;
                    assert_eq!(t.matmuls, 3 * used, "a gate, up and down matmul per routed expert");
                    // a grouped quantize call per group of experts for the gathered inputs (where
                    // the group has an expert that does not take every token) and one for the
                    // down inputs; the whole input once
                    let with: Vec<usize> = routed.iter().copied().filter(|&n| n > 0).collect();
                    let groups = with.chunks(group).count() as u64;
                    let gathered = with.chunks(group).filter(|g| g.iter().any(|&n| n != nt)).count() as u64;
                    let calls = (gathered + u64::from(whole > 0)) * per_input + groups;
                    assert_eq!(t.quantizes, calls, "{nt} tokens: {whole} of {used} experts take them all");
                    if nt == 1 {
                        assert_eq!((used, whole), (3, 3));
                    } else {
                        assert!(used > 4, "{used} experts routed to: too few for two groups of 4");
                    }
                    let what = format!("up {up:?}, {nt} of {max_tokens} tokens, on {}", dev.name());
                    assert_bits(&out, want.get_or_insert_with(|| out.clone()), &what);
                }
            }
        }
    }
}
