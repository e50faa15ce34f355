//! Malformed GGUF files: every truncation, the targeted cases (counts and lengths of 2^60,
//! offsets outside the file, overlaps, unknown types, misaligned data, bad headers), and a
//! bounded proptest over mutated valid files (bit flips, truncations, inserted bytes,
//! overwritten words). Each parse must return a typed error or a valid parse, never panic,
//! and allocate no more than a small multiple of the file's size (measured per thread by a
//! counting allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use proptest::prelude::*;
use qkern::Format;
use qkern_engine::gguf::write::GgufWriter;
use qkern_engine::gguf::{Array, ErrorKind, GString, GgmlType, Gguf, GgufError, Value};
use qkern_parity::inputs::Rng;

struct Counting;

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn note(delta: i64) {
    let _ = LIVE.try_with(|l| {
        let v = l.get() + delta;
        l.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size() as i64);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        note(-(l.size() as i64));
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        note(n as i64 - l.size() as i64);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Parse, returning the result and the peak bytes this thread allocated above its start.
fn parse_counted(b: &[u8]) -> (Result<Gguf, GgufError>, i64) {
    let start = LIVE.with(|l| l.get());
    PEAK.with(|p| p.set(start));
    let r = Gguf::parse(b);
    let peak = PEAK.with(|p| p.get()) - start;
    (r, peak)
}

/// The valid file the mutations start from.
fn base() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", Value::Str("qkern-fuzz".into())).unwrap();
    w.set("general.alignment", Value::U32(64)).unwrap();
    w.set("a.u32", Value::Array(Array::U32(vec![1, 2, 3, 4]))).unwrap();
    w.set("a.str", Value::Array(Array::Str(vec!["x".into(), GString::default(), "yz".into()]))).unwrap();
    w.set("a.nested", Value::Array(Array::Array(vec![Array::Bool(vec![true]), Array::F64(vec![1.0])]))).unwrap();
    w.set("s.f32", Value::F32(0.5)).unwrap();
    w.set("s.bool", Value::Bool(true)).unwrap();
    w.add_tensor("blk.0.ffn_gate_inp.weight", &[64, 4], GgmlType::from(Format::F32)).unwrap();
    w.add_tensor("blk.0.ffn_up_exps.weight", &[256, 2, 4], GgmlType::from(Format::Q4_K)).unwrap();
    w.add_tensor("q8", &[32, 3], GgmlType::from(Format::Q8_0)).unwrap();
    w.add_tensor("b", &[16], GgmlType::from(Format::BF16)).unwrap();
    let mut out = Vec::new();
    w.write(&mut out, |i, t, o| o.write_all(&vec![0x11 * (i as u8 + 1); t.bytes as usize])).unwrap();
    out
}

/// What a valid parse must satisfy.
fn check_valid(g: &Gguf, len: u64) {
    assert!(g.data_offset <= len);
    let mut ranges: Vec<_> = g.tensors.iter().filter(|t| t.bytes > 0).map(|t| t.file_range()).collect();
    for t in &g.tensors {
        assert!(t.file_range().end <= len, "{t:?}");
        assert_eq!(t.file_offset % g.alignment, 0);
        assert!(t.dims.len() <= 4);
    }
    ranges.sort_by_key(|r| r.start);
    for w in ranges.windows(2) {
        assert!(w[0].end <= w[1].start);
    }
}

/// A parse of `b`: a valid one or a typed error that names a field and an offset within or
/// at the end of the file; allocation bounded by the file's size.
fn check(b: &[u8]) -> Option<GgufError> {
    let (r, peak) = parse_counted(b);
    let bound = 16 * b.len() as i64 + (1 << 20);
    assert!(peak <= bound, "parse of {} bytes allocated {peak} at peak", b.len());
    match r {
        Ok(g) => {
            check_valid(&g, b.len() as u64);
            None
        }
        Err(e) => {
            assert!(!e.field.is_empty());
            assert!(e.offset <= b.len() as u64, "{e}");
            assert!(e.to_string().contains(&format!("at byte {}", e.offset)));
            Some(e)
        }
    }
}

#[test]
fn base_file_is_valid() {
    let b = base();
    let g = Gguf::parse(&b).unwrap();
    assert_eq!(g.alignment, 64);
    assert_eq!(g.tensors.len(), 4);
    check_valid(&g, b.len() as u64);
}

#[test]
fn every_truncation_is_a_typed_error() {
    let b = base();
    let g = Gguf::parse(&b).unwrap();
    let data_end = g.tensors.iter().map(|t| t.file_range().end).max().unwrap() as usize;
    for n in 0..b.len() {
        let e = check(&b[..n]);
        if n < data_end {
            let e = e.unwrap_or_else(|| panic!("prefix of {n} bytes parsed"));
            assert!(
                matches!(
                    e.kind,
                    ErrorKind::Truncated { .. } | ErrorKind::TooLarge { .. } | ErrorKind::OutOfFile { .. }
                ),
                "prefix {n}: {e}"
            );
        }
    }
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn find(b: &[u8], needle: &[u8]) -> usize {
    b.windows(needle.len()).position(|w| w == needle).unwrap()
}

#[test]
fn huge_counts_and_lengths_are_refused_without_allocating() {
    let b = base();
    let g = Gguf::parse(&b).unwrap();
    let big = 1u64 << 60;
    let key_at = 24; // kv[0]'s key length
    let str_arr = find(&b, b"a.str") + 5 + 4 + 4; // after key, value type (arr), elem type
    let t0 = g.tensors[0].info_offset as usize;
    let cases: Vec<(usize, &str)> = vec![
        (8, "header.tensor_count"),
        (16, "header.kv_count"),
        (key_at, "kv[0] key length"),
        (str_arr, "kv[3] \"a.str\" array length"),
        (str_arr + 8, "kv[3] \"a.str\"[0] string length"),
        (t0, "tensor[0] name length"),
    ];
    for (at, field) in cases {
        for v in [big, u64::MAX, 1 << 40, b.len() as u64] {
            let mut m = b.clone();
            put_u64(&mut m, at, v);
            let e = check(&m).unwrap_or_else(|| panic!("{field} = {v} parsed"));
            assert_eq!(e.field, field, "{e}");
            assert_eq!(e.offset, at as u64, "{e}");
            assert!(matches!(e.kind, ErrorKind::TooLarge { value, .. } if value == v), "{e}");
        }
    }
}

/// Offsets of tensor `i`'s type and offset fields.
fn tensor_fields(b: &[u8], g: &Gguf, i: usize) -> (usize, usize) {
    let t = &g.tensors[i];
    let at = t.info_offset as usize + 8 + t.name.len();
    assert_eq!(u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize, t.dims.len());
    let ty = at + 4 + 8 * t.dims.len();
    (ty, ty + 4)
}

#[test]
fn targeted_malformations() {
    let b = base();
    let g = Gguf::parse(&b).unwrap();
    let mutate = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut m = b.clone();
        f(&mut m);
        check(&m).expect("should be refused")
    };
    let (ty1, off1) = tensor_fields(&b, &g, 1);
    let (_, off2) = tensor_fields(&b, &g, 2);
    let nd0 = g.tensors[0].info_offset as usize + 8 + g.tensors[0].name.len();

    let e = mutate(&|m| m[0] = b'X');
    assert!(matches!(e.kind, ErrorKind::Magic(_)) && e.offset == 0, "{e}");
    for v in [0u32, 1, 4, 0x0300_0000] {
        let e = mutate(&|m| m[4..8].copy_from_slice(&v.to_le_bytes()));
        assert!(matches!(e.kind, ErrorKind::Version { version, .. } if version == v), "{e}");
    }
    // Offsets outside the file.
    for v in [1u64 << 40, u64::MAX - 63, (b.len() as u64).div_ceil(64) * 64] {
        let e = mutate(&|m| put_u64(m, off1, v));
        assert!(matches!(e.kind, ErrorKind::OutOfFile { .. }), "{e}");
        assert_eq!((e.offset, e.field.as_str()), (off1 as u64, "tensor[1] \"blk.0.ffn_up_exps.weight\" offset"));
    }
    // Misaligned.
    let e = mutate(&|m| put_u64(m, off1, g.tensors[1].offset + 32));
    assert!(matches!(e.kind, ErrorKind::Misaligned { alignment: 64, .. }), "{e}");
    // Overlapping: tensor 2 placed onto tensor 1.
    let e = mutate(&|m| put_u64(m, off2, g.tensors[1].offset));
    assert!(matches!(&e.kind, ErrorKind::Overlap { other, .. } if other == "blk.0.ffn_up_exps.weight"), "{e}");
    // Unknown and removed types, and a type whose block does not divide the row.
    for id in [4u32, 31, 43, 1000, u32::MAX] {
        let e = mutate(&|m| m[ty1..ty1 + 4].copy_from_slice(&id.to_le_bytes()));
        assert!(matches!(e.kind, ErrorKind::UnknownType(x) if x == id), "{e}");
    }
    // A bigger type: f32 for the q4_K tensor runs into the next tensor.
    let e = mutate(&|m| m[ty1..ty1 + 4].copy_from_slice(&0u32.to_le_bytes()));
    assert!(matches!(e.kind, ErrorKind::Overlap { .. } | ErrorKind::OutOfFile { .. }), "{e}");
    // q4_K for the 32-wide q8_0 tensor: the block of 256 does not divide the row.
    let (ty2, _) = tensor_fields(&b, &g, 2);
    let e = mutate(&|m| m[ty2..ty2 + 4].copy_from_slice(&12u32.to_le_bytes()));
    assert!(matches!(e.kind, ErrorKind::RowNotBlockMultiple { ne0: 32, block: 256, .. }), "{e}");
    // Too many dimensions, negative dimension.
    let e = mutate(&|m| m[nd0..nd0 + 4].copy_from_slice(&5u32.to_le_bytes()));
    assert!(matches!(e.kind, ErrorKind::Dims(5)), "{e}");
    let e = mutate(&|m| put_u64(m, nd0 + 4, (-3i64) as u64));
    assert!(matches!(e.kind, ErrorKind::NegativeDim(-3)), "{e}");
    // Element count overflow.
    let e = mutate(&|m| {
        put_u64(m, nd0 + 4, 1 << 40);
        put_u64(m, nd0 + 12, 1 << 40);
    });
    assert!(matches!(e.kind, ErrorKind::Overflow(_)), "{e}");
    // Alignment of the wrong type or not a power of two.
    let al = find(&b, b"general.alignment") + 17;
    let e = mutate(&|m| m[al..al + 4].copy_from_slice(&5u32.to_le_bytes())); // i32
    assert!(matches!(e.kind, ErrorKind::AlignmentType(_)), "{e}");
    let e = mutate(&|m| m[al + 4..al + 8].copy_from_slice(&48u32.to_le_bytes()));
    assert!(matches!(e.kind, ErrorKind::Alignment(48)), "{e}");
    // Unknown value type; duplicate key.
    let e = mutate(&|m| m[al..al + 4].copy_from_slice(&13u32.to_le_bytes()));
    assert!(matches!(e.kind, ErrorKind::ValueType(13)), "{e}");
    let _ = off2;
}

#[test]
fn duplicate_keys_and_tensors() {
    let mut w = GgufWriter::new();
    w.set("k1", Value::U8(1)).unwrap();
    w.set("k2", Value::U8(2)).unwrap();
    w.add_tensor("ta", &[32], GgmlType::from(Format::F32)).unwrap();
    w.add_tensor("tb", &[32], GgmlType::from(Format::F32)).unwrap();
    let mut b = Vec::new();
    w.write(&mut b, |_, t, o| o.write_all(&vec![0; t.bytes as usize])).unwrap();
    let mut m = b.clone();
    let k2 = find(&m, b"k2");
    m[k2 + 1] = b'1';
    let e = check(&m).unwrap();
    assert!(matches!(&e.kind, ErrorKind::DuplicateKey(k) if k == "k1"), "{e}");
    assert_eq!(e.offset, k2 as u64 - 8);
    let mut m = b.clone();
    let tb = find(&m, b"tb");
    m[tb + 1] = b'a';
    let e = check(&m).unwrap();
    assert!(matches!(&e.kind, ErrorKind::DuplicateTensor(n) if n == "ta"), "{e}");
    // Empty key.
    let mut m = b.clone();
    put_u64(&mut m, 24, 0);
    let e = check(&m).unwrap();
    assert!(matches!(e.kind, ErrorKind::EmptyKey), "{e}");
}

/// A mutation at position `p`: within the metadata (header, KV pairs, tensor infos) when
/// `meta`, else anywhere in the file.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(bool, usize, u8),
    Truncate(usize),
    Insert(bool, usize, Vec<u8>),
    Word(bool, usize, u64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let meta = proptest::bool::weighted(0.8);
    prop_oneof![
        4 => (meta, any::<usize>(), 0u8..8).prop_map(|(m, p, b)| Mutation::Flip(m, p, b)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        2 => (meta, any::<usize>(), proptest::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(m, p, v)| Mutation::Insert(m, p, v)),
        3 => (meta, any::<usize>(), prop_oneof![Just(1u64 << 60), Just(u64::MAX), Just(0u64), any::<u64>(), 0u64..5000])
            .prop_map(|(m, p, v)| Mutation::Word(m, p, v)),
    ]
}

fn apply(b: &mut Vec<u8>, meta_len: usize, m: &Mutation) {
    if b.is_empty() {
        return;
    }
    let at = |meta: bool, p: usize, n: usize| if meta { p % n.min(meta_len).max(1) } else { p % n };
    match m {
        Mutation::Flip(meta, p, bit) => {
            let i = at(*meta, *p, b.len());
            b[i] ^= 1 << bit;
        }
        Mutation::Truncate(p) => b.truncate(p % b.len()),
        Mutation::Insert(meta, p, v) => {
            let i = at(*meta, *p, b.len() + 1);
            b.splice(i..i, v.iter().copied());
        }
        Mutation::Word(meta, p, v) => {
            if b.len() >= 8 {
                let i = at(*meta, *p, b.len() - 7);
                b[i..i + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 2000, timeout: 10_000, ..ProptestConfig::default() })]

    /// Mutated valid files: a typed error or a valid parse, never a panic, bounded allocation.
    #[test]
    fn mutated_files_parse_or_fail_typed(muts in proptest::collection::vec(mutation(), 1..5)) {
        let mut b = base();
        let meta_len = Gguf::parse(&b).map(|g| g.data_offset as usize).unwrap_or(b.len());
        for m in &muts {
            apply(&mut b, meta_len, m);
        }
        check(&b);
    }
}

/// A file written by ggml's own writer (`gguf_write_to_file`): metadata of every kind and a
/// tensor of every ggml type, 1 to 4 dimensions.
fn ggml_base() -> Vec<u8> {
    use qkern_parity::gguf_writer::{GgmlGgufWriter, KvValue, gguf_type};
    let mut w = GgmlGgufWriter::new();
    w.set("general.architecture", KvValue::Str("qkern-fuzz".into())).unwrap();
    w.set("s.u64", KvValue::U64(1 << 40)).unwrap();
    w.set("s.i16", KvValue::I16(-7)).unwrap();
    w.set("s.bool", KvValue::Bool(true)).unwrap();
    w.set("a.f32", KvValue::Arr(gguf_type::F32, 1.5f32.to_le_bytes().repeat(5))).unwrap();
    w.set("a.str", KvValue::StrArr(vec!["a".into(), String::new(), "\u{2581}bc".into()])).unwrap();
    for (i, t) in GgmlType::all().enumerate() {
        let be = t.block_elems();
        let dims: Vec<u64> = match i % 4 {
            0 => vec![be * 2],
            1 => vec![be, 2],
            2 => vec![be, 1, 2],
            _ => vec![be, 2, 1, 2],
        };
        let n = dims.iter().product::<u64>() / be * t.block_bytes();
        w.add_tensor(&format!("t{i}.{}", t.name()), t.id(), &dims, vec![i as u8; n as usize]).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ggml.gguf");
    w.write(&p).unwrap();
    std::fs::read(p).unwrap()
}

/// The fuzz target, run for a bounded time (`QKERN_FUZZ_SECS`, default 3 s; seed
/// `QKERN_FUZZ_SEED`): mutations (bit flips, truncations, insertions, deletions, words
/// overwritten with boundary values, one field's bytes copied over another's) of a file
/// written by ggml's writer (every ggml type) and of our writer's base file, each parse a
/// typed error or a valid parse, with bounded allocation. Prints the iterations run.
#[test]
fn fuzz_for_a_bounded_time() {
    let secs: f64 = std::env::var("QKERN_FUZZ_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(3.0);
    let seed: u64 = std::env::var("QKERN_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5EED);
    let bases: Vec<(Vec<u8>, usize)> = [ggml_base(), base()]
        .into_iter()
        .map(|b| {
            let g = Gguf::parse(&b).expect("base files are valid");
            check_valid(&g, b.len() as u64);
            let meta = g.data_offset as usize;
            (b, meta)
        })
        .collect();
    assert_eq!(Gguf::parse(&bases[0].0).unwrap().tensors.len(), GgmlType::all().count());
    let words = [0u64, 1, 31, 32, 63, 64, 4096, 1 << 30, (1 << 30) + 1, 1 << 60, i64::MAX as u64, u64::MAX];
    let mut rng = Rng::new(seed);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    let (mut iters, mut valid) = (0u64, 0u64);
    while std::time::Instant::now() < deadline {
        let (b0, meta) = &bases[(iters % 2) as usize];
        let mut b = b0.clone();
        for _ in 0..1 + rng.below(4) {
            if b.len() < 8 {
                break;
            }
            // 80 % of the mutations hit the metadata (where the parser's decisions are).
            let span = if rng.below(5) < 4 { (*meta).min(b.len()) } else { b.len() };
            let at = rng.below(span as u64) as usize;
            match rng.below(7) {
                0 => b[at] ^= 1 << rng.below(8),
                1 => b.truncate(at),
                2 => {
                    let n = 1 + rng.below(16) as usize;
                    let ins: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                    b.splice(at..at, ins);
                }
                3 => {
                    let n = (1 + rng.below(16) as usize).min(b.len() - at);
                    b.drain(at..at + n);
                }
                4 | 5 => {
                    let at = at.min(b.len() - 8);
                    let v =
                        if rng.below(2) == 0 { words[rng.below(words.len() as u64) as usize] } else { rng.next_u64() };
                    let v = if rng.below(4) == 0 { v as u32 as u64 } else { v };
                    let n = if v >> 32 == 0 && rng.below(2) == 0 { 4 } else { 8 };
                    b[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
                }
                _ => {
                    let from = rng.below(span as u64) as usize;
                    let n = (1 + rng.below(24) as usize).min(b.len() - at).min(b.len() - from);
                    let src = b[from..from + n].to_vec();
                    b[at..at + n].copy_from_slice(&src);
                }
            }
        }
        if check(&b).is_none() {
            valid += 1;
        }
        iters += 1;
    }
    eprintln!("fuzz: {iters} mutated files in {secs} s ({valid} still valid), seed {seed:#x}");
    assert!(iters > 100, "only {iters} iterations");
}
