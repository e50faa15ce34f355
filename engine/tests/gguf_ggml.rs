//! The GGUF reader against files written by ggml 0.26.0's own writer (`gguf_write_to_file`):
//! every metadata value type (arrays of each, strings, string arrays), tensors of every
//! format qkern supports in 1 to 4 dimensions, v3 and v2 headers; the loader's bytes
//! against the data written; our writer byte-identical to ggml's.

use qkern::Format;
use qkern_engine::gguf::write::GgufWriter;
use qkern_engine::gguf::{Array, GString, GgmlType, Gguf, Value, ValueType};
use qkern_engine::load::{self, LoadOptions};
use qkern_parity::gguf_writer::{GgmlGgufWriter, KvValue, gguf_type, type_layout};
use qkern_parity::inputs::Rng;

#[test]
fn ggml_type_table_matches_ggml() {
    for id in 0..50u32 {
        let ours = GgmlType::from_id(id);
        match type_layout(id) {
            None => assert!(ours.is_none(), "id {id}"),
            Some((0, _, _)) => assert!(ours.is_none(), "removed id {id}"),
            Some((blck, size, name)) => {
                let t = ours.unwrap_or_else(|| panic!("id {id} ({name}) missing"));
                assert_eq!((t.block_elems(), t.block_bytes(), t.name()), (blck, size, name.as_str()), "id {id}");
                if let Some(f) = t.format() {
                    assert_eq!((f.block_elems() as u64, f.block_bytes() as u64, f.name()), (blck, size, name.as_str()));
                }
            }
        }
    }
    assert_eq!(GgmlType::all().count(), 35);
}

/// The same key/value as ggml's writer takes it and as our reader should return it.
fn kv_pairs(rng: &mut Rng) -> Vec<(String, KvValue, Value)> {
    let mut v: Vec<(String, KvValue, Value)> = vec![
        ("general.architecture".into(), KvValue::Str("qkern-test".into()), Value::Str("qkern-test".into())),
        ("t.u8".into(), KvValue::U8(200), Value::U8(200)),
        ("t.i8".into(), KvValue::I8(-100), Value::I8(-100)),
        ("t.u16".into(), KvValue::U16(65000), Value::U16(65000)),
        ("t.i16".into(), KvValue::I16(-32000), Value::I16(-32000)),
        ("t.u32".into(), KvValue::U32(4_000_000_000), Value::U32(4_000_000_000)),
        ("t.i32".into(), KvValue::I32(-2_000_000_000), Value::I32(-2_000_000_000)),
        ("t.f32".into(), KvValue::F32(-1.5e-3), Value::F32(-1.5e-3)),
        ("t.bool.t".into(), KvValue::Bool(true), Value::Bool(true)),
        ("t.bool.f".into(), KvValue::Bool(false), Value::Bool(false)),
        ("t.u64".into(), KvValue::U64(u64::MAX - 7), Value::U64(u64::MAX - 7)),
        ("t.i64".into(), KvValue::I64(i64::MIN + 3), Value::I64(i64::MIN + 3)),
        ("t.f64".into(), KvValue::F64(std::f64::consts::PI), Value::F64(std::f64::consts::PI)),
        ("t.str.empty".into(), KvValue::Str(String::new()), Value::Str(GString::default())),
        (
            "t.str.utf8".into(),
            KvValue::Str("h\u{e9}llo \u{2581}w\u{f6}rld".into()),
            Value::Str("h\u{e9}llo \u{2581}w\u{f6}rld".into()),
        ),
        ("general.alignment".into(), KvValue::U32(32), Value::U32(32)),
    ];
    let n = 37;
    let mut bytes = vec![0u8; 8 * n];
    rng.fill_bytes(&mut bytes);
    macro_rules! arr {
        ($key:literal, $t:expr, $ty:ty, $variant:ident) => {{
            const S: usize = std::mem::size_of::<$ty>();
            let b = bytes[..S * n].to_vec();
            let vals: Vec<$ty> = b.chunks_exact(S).map(|c| <$ty>::from_le_bytes(c.try_into().unwrap())).collect();
            v.push(($key.into(), KvValue::Arr($t, b), Value::Array(Array::$variant(vals))));
        }};
    }
    arr!("a.u8", gguf_type::U8, u8, U8);
    arr!("a.i8", gguf_type::I8, i8, I8);
    arr!("a.u16", gguf_type::U16, u16, U16);
    arr!("a.i16", gguf_type::I16, i16, I16);
    arr!("a.u32", gguf_type::U32, u32, U32);
    arr!("a.i32", gguf_type::I32, i32, I32);
    arr!("a.u64", gguf_type::U64, u64, U64);
    arr!("a.i64", gguf_type::I64, i64, I64);
    // Floats: finite values (NaN != NaN would fail the comparison, not the reader).
    let f: Vec<f32> = (0..n).map(|i| i as f32 * 0.37 - 3.0).collect();
    v.push((
        "a.f32".into(),
        KvValue::Arr(gguf_type::F32, f.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Value::Array(Array::F32(f)),
    ));
    let d: Vec<f64> = (0..n).map(|i| i as f64 * -1.25e10).collect();
    v.push((
        "a.f64".into(),
        KvValue::Arr(gguf_type::F64, d.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Value::Array(Array::F64(d)),
    ));
    let bools: Vec<bool> = (0..n).map(|i| i.is_multiple_of(3)).collect();
    v.push((
        "a.bool".into(),
        KvValue::Arr(gguf_type::BOOL, bools.iter().map(|&b| b as u8).collect()),
        Value::Array(Array::Bool(bools)),
    ));
    v.push(("a.empty".into(), KvValue::Arr(gguf_type::U32, vec![]), Value::Array(Array::U32(vec![]))));
    let strs: Vec<String> =
        (0..300usize).map(|i| if i.is_multiple_of(7) { String::new() } else { format!("tok{i}\u{2581}") }).collect();
    v.push((
        "tokenizer.ggml.tokens".into(),
        KvValue::StrArr(strs.clone()),
        Value::Array(Array::Str(strs.iter().map(|s| GString::from(s.as_str())).collect())),
    ));
    v
}

struct TestTensor {
    name: String,
    format: Format,
    dims: Vec<u64>,
    data: Vec<u8>,
}

/// Tensors of every supported format, 1 to 4 dimensions, random bytes.
fn tensors(rng: &mut Rng) -> Vec<TestTensor> {
    let mut v = Vec::new();
    for (i, f) in Format::ALL.into_iter().enumerate() {
        let be = f.block_elems() as u64;
        let cols = be * (1 + (i as u64 % 3)) * if be == 1 { 64 } else { 1 };
        let dims: Vec<u64> = match i % 4 {
            0 => vec![cols],
            1 => vec![cols, 3],
            2 => vec![cols, 2, 3],
            _ => vec![cols, 2, 1, 2],
        };
        let n: u64 = dims.iter().product::<u64>() / be * f.block_bytes() as u64;
        let mut data = vec![0u8; n as usize];
        rng.fill_bytes(&mut data);
        v.push(TestTensor { name: format!("t{i}.{}", f.name()), format: f, dims, data });
    }
    v
}

fn ggml_writer(kv: &[(String, KvValue, Value)], ts: &[TestTensor]) -> GgmlGgufWriter {
    let mut w = GgmlGgufWriter::new();
    for (k, kv, _) in kv {
        w.set(k, kv.clone()).unwrap();
    }
    for t in ts {
        w.add_tensor(&t.name, t.format.id(), &t.dims, t.data.clone()).unwrap();
    }
    w
}

fn check_parsed(g: &Gguf, kv: &[(String, KvValue, Value)], ts: &[TestTensor]) {
    assert_eq!(g.alignment, 32);
    assert_eq!(g.kv.len(), kv.len());
    for ((k, v), (ek, _, ev)) in g.kv.iter().zip(kv) {
        assert_eq!(k, ek);
        assert_eq!(v, ev, "{k}");
    }
    assert_eq!(g.tensors.len(), ts.len());
    for (t, e) in g.tensors.iter().zip(ts) {
        assert_eq!(t.name, e.name);
        assert_eq!(t.ggml_type, GgmlType::from(e.format));
        // ggml writes ggml_n_dims dimensions: trailing 1s dropped.
        let mut d = e.dims.clone();
        while d.len() > 1 && d[d.len() - 1] == 1 {
            d.pop();
        }
        assert_eq!(t.dims, d, "{}", t.name);
        assert_eq!(t.bytes, e.data.len() as u64);
        assert_eq!(t.file_offset % 32, 0);
    }
    assert_eq!(g.get("t.u32").and_then(Value::as_u64), Some(4_000_000_000));
    assert_eq!(g.get("t.i8").and_then(Value::as_u64), None);
    assert_eq!(g.architecture(), Some("qkern-test"));
    assert_eq!(g.get("a.u8").map(Value::value_type), Some(ValueType::Array));
}

#[test]
fn reads_files_written_by_ggml() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(7);
    let kv = kv_pairs(&mut rng);
    let ts = tensors(&mut rng);
    let w = ggml_writer(&kv, &ts);
    let path = dir.path().join("ggml.gguf");
    w.write(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();

    let g = Gguf::open(&path).unwrap();
    assert_eq!(g.version, 3);
    assert_eq!(g.data_offset, w.meta_size() as u64);
    assert_eq!(g.file_len, bytes.len() as u64);
    check_parsed(&g, &kv, &ts);
    assert_eq!(Gguf::parse(&bytes).unwrap(), g);

    // The loader's arena holds exactly the bytes ggml wrote, for every tensor and read mode.
    for (direct, threads, chunk) in [(false, 1, 8 << 20), (false, 3, 4096), (true, 2, 8192)] {
        let opts = LoadOptions { threads, chunk_bytes: chunk, direct, drop_cache: direct, huge_pages: true };
        let m = load::load(&path, &|_| true, &opts).unwrap();
        for t in &ts {
            assert_eq!(m.tensor(&t.name).unwrap().1, &t.data[..], "{} direct={direct}", t.name);
        }
        // Only the selected tensors when selecting.
        let m = load::load(&path, &|t| t.name.contains("q4_K"), &opts).unwrap();
        assert_eq!(m.loaded().count(), 1);
        assert!(m.tensor("t0.f32").is_none());
    }

    // v2 has the same layout: patch the version.
    let mut v2 = bytes.clone();
    v2[4..8].copy_from_slice(&2u32.to_le_bytes());
    let g2 = Gguf::parse(&v2).unwrap();
    assert_eq!(g2.version, 2);
    check_parsed(&g2, &kv, &ts);

    // Our streaming writer gives the same bytes as ggml's.
    let mut ours = GgufWriter::new();
    for (k, _, v) in &kv {
        ours.set(k, v.clone()).unwrap();
    }
    for t in &ts {
        ours.add_tensor(&t.name, &t.dims, GgmlType::from(t.format)).unwrap();
    }
    let mut out = Vec::new();
    ours.write(&mut out, |i, _, o| o.write_all(&ts[i].data)).unwrap();
    assert_eq!(out.len() as u64, ours.file_len());
    assert!(out == bytes, "our writer differs from ggml's");
}

#[test]
fn ggml_files_without_tensors_and_without_kv() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing at all.
    let p = dir.path().join("empty.gguf");
    GgmlGgufWriter::new().write(&p).unwrap();
    let g = Gguf::open(&p).unwrap();
    assert!(g.kv.is_empty() && g.tensors.is_empty());
    // ggml's reader puts the data section right after the header when there are no
    // tensors (no padding), although its writer pads the file to 32.
    assert_eq!(g.data_offset, 24);
    assert_eq!(g.file_len, 32);
    // Metadata only: likewise no padding after the KV pairs.
    let mut w = GgmlGgufWriter::new();
    w.set("k", KvValue::U8(1)).unwrap();
    let p = dir.path().join("kv.gguf");
    w.write(&p).unwrap();
    let g = Gguf::open(&p).unwrap();
    assert_eq!(g.kv, vec![("k".to_string(), Value::U8(1))]);
    assert_eq!(g.data_offset, 24 + 8 + 1 + 4 + 1);
    assert_eq!(g.file_len, w.meta_size() as u64);
}

#[test]
fn our_writer_other_alignments_round_trip() {
    for al in [1u32, 8, 64, 4096] {
        let mut w = GgufWriter::new();
        w.set("general.alignment", Value::U32(al)).unwrap();
        w.set("nested", Value::Array(Array::Array(vec![Array::U8(vec![1, 2]), Array::Str(vec!["x".into()])]))).unwrap();
        w.add_tensor("a", &[32, 3], GgmlType::from(Format::Q8_0)).unwrap();
        w.add_tensor("b", &[7], GgmlType::from(Format::F32)).unwrap();
        w.add_tensor("c", &[256], GgmlType::from(Format::Q4_K)).unwrap();
        let mut out = Vec::new();
        w.write(&mut out, |i, t, o| o.write_all(&vec![i as u8 + 1; t.bytes as usize])).unwrap();
        let g = Gguf::parse(&out).unwrap();
        assert_eq!(g.alignment, al as u64);
        assert_eq!(g.data_offset % al as u64, 0);
        for (i, t) in g.tensors.iter().enumerate() {
            assert_eq!(t.file_offset % al as u64, 0);
            assert!(out[t.file_range().start as usize..t.file_range().end as usize].iter().all(|&b| b == i as u8 + 1));
        }
        assert_eq!(g.get("nested"), w_nested().as_ref());
    }
}

fn w_nested() -> Option<Value> {
    Some(Value::Array(Array::Array(vec![Array::U8(vec![1, 2]), Array::Str(vec!["x".into()])])))
}

/// Every ggml 0.26.0 type (qkern runs some; the reader and loader take all), written by
/// ggml: types, shapes, offsets and sizes as ggml computes them, bytes through the loader.
#[test]
fn reads_every_ggml_type_written_by_ggml() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(11);
    let mut w = GgmlGgufWriter::new();
    let mut want = Vec::new();
    for (i, t) in GgmlType::all().enumerate() {
        let (blck, size, name) = type_layout(t.id()).unwrap();
        assert_eq!(name, t.name());
        let dims = [blck * (1 + i as u64 % 3), 1 + i as u64 % 2, 2];
        let n = dims.iter().product::<u64>() / blck * size;
        let mut data = vec![0u8; n as usize];
        rng.fill_bytes(&mut data);
        w.add_tensor(&format!("blk.{i}.{name}"), t.id(), &dims, data.clone()).unwrap();
        want.push((t, dims, data));
    }
    let path = dir.path().join("types.gguf");
    w.write(&path).unwrap();
    let g = Gguf::open(&path).unwrap();
    assert_eq!(g.data_offset, w.meta_size() as u64);
    assert_eq!(g.tensors.len(), want.len());
    let m =
        load::load(&path, &|_| true, &LoadOptions { threads: 3, chunk_bytes: 4096, ..LoadOptions::default() }).unwrap();
    let mut next = 0;
    for (t, (ty, dims, data)) in g.tensors.iter().zip(&want) {
        assert_eq!(t.ggml_type, *ty);
        assert_eq!(t.ne(0), dims[0]);
        assert_eq!(t.n_elements(), dims.iter().product::<u64>());
        assert_eq!(t.bytes, data.len() as u64, "{}", t.name);
        // ggml's layout: each tensor at the previous one's end padded to 32.
        assert_eq!(t.offset, next, "{}", t.name);
        next += t.bytes.div_ceil(32) * 32;
        assert_eq!(m.tensor(&t.name).unwrap().1, &data[..], "{}", t.name);
    }
}
