//! WGSL sources: assembled from `src/wgsl/*.wgsl` per kernel (format, NT, subgroups or not).
//!
//! Every kernel is bit-identical to the scalar reference (`qkern_formats::reference`); each
//! WGSL file says which ggml function it follows and why each float operation cannot be
//! changed by a driver (see the crate documentation, "Bits").

use qkern_formats::Format;

const COMMON: &str = include_str!("wgsl/common.wgsl");
const FLOATOPS: &str = include_str!("wgsl/floatops.wgsl");
const REDUCE_SUBGROUP: &str = include_str!("wgsl/reduce_subgroup.wgsl");
const REDUCE_SHARED: &str = include_str!("wgsl/reduce_shared.wgsl");
const MATMUL_HEAD: &str = include_str!("wgsl/matmul_head.wgsl");
const MATMUL_MAIN: &str = include_str!("wgsl/matmul_main.wgsl");
const PAIR_HEAD: &str = include_str!("wgsl/pair_head.wgsl");
const PAIR_MAIN: &str = include_str!("wgsl/pair_main.wgsl");
const KPAIR_HEAD: &str = include_str!("wgsl/kpair_head.wgsl");
const KPAIR_MAIN: &str = include_str!("wgsl/kpair_main.wgsl");
const KPAIR2_HEAD: &str = include_str!("wgsl/kpair2_head.wgsl");
const KPAIR_MAIN2: &str = include_str!("wgsl/kpair_main2.wgsl");
const PAIR_MAIN2: &str = include_str!("wgsl/pair_main2.wgsl");
const PAIR_STAGE: &str = include_str!("wgsl/pair_stage.wgsl");
const ACT_Q8K_STAGE: &str = include_str!("wgsl/act_q8k_stage.wgsl");
const LANES4: &str = include_str!("wgsl/lanes4.wgsl");
const KC_COMMON: &str = include_str!("wgsl/kc_common.wgsl");
const KC_KQUANT: &str = include_str!("wgsl/kc_kquant.wgsl");
const KC_TILE_COOP: &str = include_str!("wgsl/kc_tile_coop.wgsl");
const KC_TILE_EMULATED: &str = include_str!("wgsl/kc_tile_emulated.wgsl");
const KC_STAGE_U32: &str = include_str!("wgsl/kc_stage_u32.wgsl");
const KC_STAGE_F16: &str = include_str!("wgsl/kc_stage_f16.wgsl");
const KC_MAIN: &str = include_str!("wgsl/kc_main.wgsl");
const PARAMS: &str = include_str!("wgsl/params.wgsl");
const ACT_Q8K: &str = include_str!("wgsl/act_q8k.wgsl");
const ACT_Q8K_SPLIT: &str = include_str!("wgsl/act_q8k_split.wgsl");

/// The q8_K activation accessors of a layout (`act_q8k.wgsl` / `act_q8k_split.wgsl`; with
/// `both`, the split copy in the second half of each row, `Q8kLayout::Both`).
fn act_q8k(split: bool, both: bool) -> String {
    if split {
        let off = if both { "P.act_words >> 1u" } else { "0u" };
        format!("fn soff() -> u32 {{\n    return {off};\n}}\n{ACT_Q8K_SPLIT}")
    } else {
        ACT_Q8K.to_string()
    }
}
const DEQUANT: &str = include_str!("wgsl/dequant.wgsl");
const QUANT: &str = include_str!("wgsl/quant.wgsl");
const FMA: &str = include_str!("wgsl/fma.wgsl");
const FMA_NATIVE: &str = include_str!("wgsl/fma_native.wgsl");
const FMA_EMULATED: &str = include_str!("wgsl/fma_emulated.wgsl");

/// fma.wgsl with `fmx` bound to the native `fma()` or the emulation.
fn fma_src(native: bool) -> String {
    format!("{FMA}{}", if native { FMA_NATIVE } else { FMA_EMULATED })
}

/// Word offsets of the lookup tables in the tables buffer (`T`), in the order
/// [`tables_words`] writes them.
const OFF_IQ2XXS: usize = 0;
const OFF_IQ2XS: usize = OFF_IQ2XXS + 2 * 256;
const OFF_IQ2S: usize = OFF_IQ2XS + 2 * 512;
const OFF_IQ3XXS: usize = OFF_IQ2S + 2 * 1024;
const OFF_IQ3S: usize = OFF_IQ3XXS + 256;
const OFF_KVNL: usize = OFF_IQ3S + 512;
const OFF_FP4: usize = OFF_KVNL + 4;
const TABLE_WORDS: usize = OFF_FP4 + 4;

fn table_consts() -> String {
    format!(
        "const OFF_IQ2XXS: u32 = {OFF_IQ2XXS}u;\nconst OFF_IQ2XS: u32 = {OFF_IQ2XS}u;\nconst OFF_IQ2S: u32 = {OFF_IQ2S}u;\n\
         const OFF_IQ3XXS: u32 = {OFF_IQ3XXS}u;\nconst OFF_IQ3S: u32 = {OFF_IQ3S}u;\nconst OFF_KVNL: u32 = {OFF_KVNL}u;\n\
         const OFF_FP4: u32 = {OFF_FP4}u;\n"
    )
}

/// The lookup tables every kernel reads (ggml-common.h's grids, `kvalues_iq4nl`,
/// `kvalues_fp4`), as little-endian u32 words.
pub(crate) fn tables_words() -> Vec<u32> {
    use qkern_formats::tables::*;
    let mut v = Vec::with_capacity(TABLE_WORDS);
    for g in IQ2XXS_GRID.iter().chain(IQ2XS_GRID.iter()).chain(IQ2S_GRID.iter()) {
        v.push(*g as u32);
        v.push((*g >> 32) as u32);
    }
    v.extend(IQ3XXS_GRID.iter().chain(IQ3S_GRID.iter()).copied());
    for t in [&KVALUES_IQ4NL, &KVALUES_FP4] {
        for c in t.chunks_exact(4) {
            v.push(u32::from_le_bytes([c[0] as u8, c[1] as u8, c[2] as u8, c[3] as u8]));
        }
    }
    debug_assert_eq!(v.len(), TABLE_WORDS);
    v
}

/// The WGSL file of a weight format's matmul kernel (the pair formats': `pair_main.wgsl`'s
/// `step` and `finish`; the others': `matmul_main.wgsl`'s).
fn matmul_body(f: Format) -> Option<&'static str> {
    Some(match f {
        Format::Q8_0 => include_str!("wgsl/mp_q8_0.wgsl"),
        Format::Q5_1 => include_str!("wgsl/mp_q5_1.wgsl"),
        Format::Q4_K => include_str!("wgsl/kp_q4_k.wgsl"),
        Format::Q5_K => include_str!("wgsl/kp_q5_k.wgsl"),
        Format::Q6_K => include_str!("wgsl/kp_q6_k.wgsl"),
        Format::IQ2_XXS => include_str!("wgsl/mm_iq2_xxs.wgsl"),
        Format::IQ2_XS => include_str!("wgsl/mm_iq2_xs.wgsl"),
        Format::IQ2_S => include_str!("wgsl/mm_iq2_s.wgsl"),
        Format::IQ3_XXS => include_str!("wgsl/mm_iq3_xxs.wgsl"),
        Format::IQ3_S => include_str!("wgsl/mm_iq3_s.wgsl"),
        Format::IQ4_NL => include_str!("wgsl/mp_iq4_nl.wgsl"),
        Format::IQ4_XS => include_str!("wgsl/kp_iq4_xs.wgsl"),
        Format::NVFP4 => include_str!("wgsl/mp_nvfp4.wgsl"),
        _ => return None,
    })
}

/// `body` with its `IQ8_TAIL(scale)` line (the IQ2/IQ3 8-invocation kernels) replaced by
/// `iq8_tail.wgsl` with that final scale (e.g. `0.125 *`, or nothing); other bodies as they are.
fn with_iq8_tail(body: &str) -> String {
    const TAIL: &str = include_str!("wgsl/iq8_tail.wgsl");
    match body.find("IQ8_TAIL(") {
        Some(i) => {
            let args = &body[i + "IQ8_TAIL(".len()..];
            let end = args.find(')').expect("IQ8_TAIL(scale)");
            let scale = args[..end].trim();
            let scale = if scale.is_empty() { String::new() } else { format!("{scale} ") };
            // (its header comment dropped: the kernel reads as before the split)
            let tail: String = TAIL.lines().filter(|l| !l.starts_with("//")).map(|l| format!("{l}\n")).collect();
            format!("{}{}{}", &body[..i], tail.replace("SCALE", &scale), &args[end + 1..].trim_start_matches('\n'))
        }
        None => body.to_string(),
    }
}

/// The thread-pair body of an IQ2/IQ3 format: its `sub` and `res` (kpi_*.wgsl), then the
/// shared `step` and `finish` (kp_iq_sub.wgsl, kp_iq.wgsl).
fn iq_pair_body(f: Format, elem: u32) -> Option<String> {
    Some(format!("{}{}", iq_sub(f, elem)?, include_str!("wgsl/kp_iq.wgsl")))
}

/// An IQ2/IQ3 format's sub-block decoder for the thread pairs (kpi_*.wgsl, kp_iq_sub.wgsl);
/// `elem`: the words of the weights' elements the decoder reads ([`iq_elem`]; 1: words).
fn iq_sub(f: Format, elem: u32) -> Option<String> {
    // iq2_xxs, iq2_xs and iq2_s: the words' loader (from words, or from the wider elements
    // of `iq_elem`), then the decode.
    let (load, sub) = match f {
        Format::IQ2_XXS if elem == 4 => {
            (include_str!("wgsl/kpi_iq2_xxs_v4.wgsl"), include_str!("wgsl/kpi_iq2_xxs.wgsl"))
        }
        Format::IQ2_XXS => (include_str!("wgsl/kpi_iq2_xxs_words.wgsl"), include_str!("wgsl/kpi_iq2_xxs.wgsl")),
        Format::IQ2_XS if elem == 2 => (include_str!("wgsl/kpi_iq2_xs_v2.wgsl"), include_str!("wgsl/kpi_iq2_xs.wgsl")),
        Format::IQ2_XS => (include_str!("wgsl/kpi_iq2_xs_words.wgsl"), include_str!("wgsl/kpi_iq2_xs.wgsl")),
        Format::IQ2_S if elem == 4 => (include_str!("wgsl/kpi_iq2_s_v4.wgsl"), include_str!("wgsl/kpi_iq2_s.wgsl")),
        Format::IQ2_S => (include_str!("wgsl/kpi_iq2_s_words.wgsl"), include_str!("wgsl/kpi_iq2_s.wgsl")),
        Format::IQ3_XXS => ("", include_str!("wgsl/kpi_iq3_xxs.wgsl")),
        Format::IQ3_S => ("", include_str!("wgsl/kpi_iq3_s.wgsl")),
        _ => return None,
    };
    Some(format!("{load}{sub}{}", include_str!("wgsl/kp_iq_sub.wgsl")))
}

/// The words of the elements (1, 2 or 4) in which the thread-pair kernel of IQ2/IQ3 format `f`
/// under `c` reads its weights, tiled and split ([`MmSrc::ktile`]; untiled blocks are only
/// 2-byte aligned: words).
///
/// - iq2_xxs: 16-byte elements (`kpi_iq2_xxs_v4.wgsl`, `WV = vec4<u32>`): its 64-byte bodies
///   are 16-byte aligned, and both invocations of a pair read all of a block's words, so 4
///   loads instead of 16, no more bytes. H100 (driver 580.159.04),
///   benches/results/2026-12-07-session38 run1, kernel-only GB/s, fastest of 2 rounds, twice,
///   words / elements: NT 1 1038, 1039 / 1596, 1586; NT 2 989, 990 / 1247, 1245; NT 4 799, 800
///   / 916, 918; NT 8 572, 572 / 623, 620.
/// - iq2_s: 16-byte elements too (`kpi_iq2_s_v4.wgsl`: 80-byte bodies, 5 loads instead of 32
///   word loads, no more bytes: the pair read every word before but its own grid and sign
///   halves). Bit-equal on lavapipe; not yet timed on a GPU.
/// - iq2_xs: 8-byte elements (`kpi_iq2_xs_v2.wgsl`, `WV = vec2<u32>`: 72-byte bodies, 8-byte
///   aligned): its own qs word of each sub-block alone, the 8 scale bytes in one load, 9 loads
///   instead of 16, no more bytes. Bit-equal on lavapipe; not yet timed on a GPU.
/// - iq3_xxs keeps its words: its 96-byte bodies as 6 elements (an invocation reads only its
///   own grid word a sub-block, so the elements doubled its bytes) lost 3-5 % at every NT in
///   the same run (NT 1 1831, 1832 / 1754, 1761; NT 8 865, 872 / 840, 842); iq3_s's 108-byte
///   bodies are only 4-byte aligned.
fn iq_elem(f: Format, c: &MmSrc) -> u32 {
    match f {
        Format::IQ2_XXS | Format::IQ2_S if c.ktile => 4,
        Format::IQ2_XS if c.ktile => 2,
        _ => 1,
    }
}

/// Whether `f` is a K-quant or iq4_xs, run by the thread-pair kernels (`kpair_head.wgsl`: 2
/// invocations per row; the IQ2/IQ3 formats run 8, `matmul_head.wgsl`).
fn is_kpair(f: Format) -> bool {
    matches!(f, Format::Q4_K | Format::Q5_K | Format::Q6_K | Format::IQ4_XS)
}

/// Whether `f`'s matmul kernel is a `kpair_head.wgsl` thread-pair kernel: the K-quants and
/// iq4_xs always, the IQ2/IQ3 formats with [`crate::Tuning::iq_pairs`].
pub(crate) fn on_kpair(f: Format, iq_pairs: bool) -> bool {
    is_kpair(f) || (iq_pairs && f.is_iq_grid())
}

/// The lookup table a format's matmul kernel copies into workgroup memory: (word offset in
/// `T`, words); (0, 0) for none.
fn table_of(f: Format) -> (usize, usize) {
    match f {
        Format::IQ2_XXS => (OFF_IQ2XXS, 512),
        Format::IQ2_XS => (OFF_IQ2XS, 1024),
        Format::IQ2_S => (OFF_IQ2S, 2048),
        Format::IQ3_XXS => (OFF_IQ3XXS, 256),
        Format::IQ3_S => (OFF_IQ3S, 512),
        Format::IQ4_NL | Format::IQ4_XS => (OFF_KVNL, 4),
        Format::NVFP4 => (OFF_FP4, 4),
        _ => (0, 0),
    }
}

/// Words of the lookup table `f`'s matmul kernel keeps in workgroup memory (0: none).
pub(crate) fn table_words(f: Format) -> usize {
    table_of(f).1
}

/// The workgroup-memory copy of a format's table: `load_tab` (every invocation, then a
/// barrier; called before any other work), `tab(i)` (word i of the format's table) and
/// `lut4t(n)` (lut4 through it). The IQ2/IQ3 formats also get `sgn(k)`: the 0/1 bytes of the
/// low and high nibble of sign byte `ksigns(k)` (iq2_xxs, iq2_xs, iq3_xxs) or `k` (iq2_s,
/// iq3_s), which `sign_bytes` applies to grid words; and `tab2(e)`, the two words of 8-byte grid
/// entry `e`, and `tabh(e, h)`, its word `h` (`tab(2e + h)`). (Two opt-in variants were
/// removed after an H100 run, 1 GiB of weights, measured them slower than this one copy for
/// iq2_xxs, iq2_xs and iq2_s at NT 1, 2, 4 and 8: several copies of the IQ2/IQ3 grids and of a
/// sign table against bank conflicts, NT 1 iq2_xs 652 GB/s against 1713, and the IQ2 grids as
/// 2-bit codes, a quarter of the words, 1032.)
fn table_src(f: Format, wg: u32) -> String {
    let (off, n) = table_of(f);
    if n == 0 {
        return "fn load_tab(lid: u32) {}\n".into();
    }
    let sign_byte = match f {
        Format::IQ2_XXS | Format::IQ2_XS | Format::IQ3_XXS => Some("ksigns(k)"),
        Format::IQ2_S | Format::IQ3_S => Some("k"),
        _ => None,
    };
    let sdecl = sign_byte.map_or(String::new(), |sb| {
        format!(
            "fn sgn(k: u32) -> vec2<u32> {{\n    let s = {sb};\n    return vec2<u32>(spread4(s & 15u), spread4(s >> 4u));\n}}\n"
        )
    });
    let tab2 = if f.is_iq_grid() {
        "fn tab2(e: u32) -> vec2<u32> {\n    return vec2<u32>(tab(2u * e), tab(2u * e + 1u));\n}\n\
         fn tabh(e: u32, h: u32) -> u32 {\n    return tab(2u * e + h);\n}\n"
    } else {
        ""
    };
    format!(
        "{sdecl}var<workgroup> TS: array<u32, {n}>;\n\
         fn load_tab(lid: u32) {{\n    for (var i = lid; i < {n}u; i += {wg}u) {{\n        TS[i] = T[{off}u + i];\n    }}\n    workgroupBarrier();\n}}\n\
         fn tab(i: u32) -> u32 {{\n    return TS[i];\n}}\n{tab2}\
         fn lut4t(n: u32) -> u32 {{\n    var r = 0u;\n    for (var k = 0u; k < 4u; k++) {{\n        let i = (n >> (8u * k)) & 0xfu;\n        r |= ((TS[i >> 2u] >> (8u * (i & 3u))) & 0xffu) << (8u * k);\n    }}\n    return r;\n}}\n"
    )
}

/// The pair kernels' table source: [`table_src`] plus `lut8(w)`, both nibbles of each byte of
/// `w` through the 16-byte table (`.x`: the low nibbles' values, `.y`: the high nibbles'). With
/// `lut2` a 256-entry workgroup table of byte -> (value of its low nibble, value of its high
/// nibble) serves a byte per lookup (4 per word instead of 8); else two `lut4t`. The table is
/// kept twice, `TP` (the values in bytes 0 and 2) and `TQ` (bytes 1 and 3), so that bytes 0, 1
/// of `w` give `TP | TQ` = (lo0, lo1, hi0, hi1) with one OR and the two halves of the word end
/// in two more operations each, where placing each looked-up byte took a mask, a shift and an
/// OR. (Copies of the tables against bank conflicts measured slower: see [`iq4xs_table_src`].)
fn pair_table_src(f: Format, wg: u32, lut2: bool) -> String {
    let (off, n) = table_of(f);
    if n == 0 {
        return table_src(f, wg);
    }
    if !lut2 {
        return format!(
            "{}fn lut8(w: u32) -> vec2<u32> {{\n    return vec2<u32>(lut4t(w & 0x0f0f0f0fu), lut4t((w >> 4u) & 0x0f0f0f0fu));\n}}\n",
            table_src(f, wg)
        );
    }
    format!(
        "var<workgroup> TS: array<u32, {n}>;\n\
         var<workgroup> TP: array<u32, 256>;\n\
         var<workgroup> TQ: array<u32, 256>;\n\
         {tb}\
         fn load_tab(lid: u32) {{\n    for (var i = lid; i < {n}u; i += {wg}u) {{\n        TS[i] = T[{off}u + i];\n    }}\n    for (var i = lid; i < 256u; i += {wg}u) {{\n        let e = tbyte(i & 15u) | (tbyte(i >> 4u) << 16u);\n        TP[i] = e;\n        TQ[i] = e << 8u;\n    }}\n    workgroupBarrier();\n}}\n\
         fn lut4t(n: u32) -> u32 {{\n    var r = 0u;\n    for (var k = 0u; k < 4u; k++) {{\n        let i = (n >> (8u * k)) & 0xfu;\n        r |= ((TS[i >> 2u] >> (8u * (i & 3u))) & 0xffu) << (8u * k);\n    }}\n    return r;\n}}\n\
         fn lut8(w: u32) -> vec2<u32> {{\n    let t01 = TP[w & 0xffu] | TQ[(w >> 8u) & 0xffu];\n    let t23 = TP[(w >> 16u) & 0xffu] | TQ[w >> 24u];\n    return vec2<u32>((t01 & 0xffffu) | (t23 << 16u), (t01 >> 16u) | (t23 & 0xffff0000u));\n}}\n",
        tb = tbyte_src(off)
    )
}

/// `tbyte(i)`: byte i of the 16-byte kvalue table at word `off` of `T` (the byte-pair tables'
/// fill).
fn tbyte_src(off: usize) -> String {
    format!("fn tbyte(i: u32) -> u32 {{\n    return (T[{off}u + (i >> 2u)] >> (8u * (i & 3u))) & 0xffu;\n}}\n")
}

/// iq4_xs's table source: [`table_src`] plus `lute(w)`, the kvalues of the 8 nibbles of `w` in
/// element order (layout.rs: its nibbles are stored as `nibble_seq` makes them, byte m holding
/// elements 2m, 2m + 1): `.x` the values of bytes 0, 1 (one AVX2 lane), `.y` of bytes 2, 3. With
/// `lut2` from two 256-entry workgroup tables, `TE[b]` = (value of b's low nibble, of its high
/// nibble) in bytes 0, 1 and `TF[b]` = the same in bytes 2, 3: a lane in 2 lookups and one OR.
/// Else `lut4t` of the nibbles spread to bytes. Copies of the tables against the banks' conflicts
/// (invocation i reading copy i % N) measured slower: 32 copies of the two tables (32 KiB a
/// workgroup) 3-11x slower on the H200 (session 23); one table in 2, 4 or 8 copies (1 KiB
/// each) on an H100 (benches/results/2026-12-07-session39 run1, kernel-only GB/s, default / 2 /
/// 4 / 8 copies) iq4_xs NT 1 1863 / 1804 / 1829 / 1770, NT 8 1018 / 984 / 975 / 834; iq4_nl
/// NT 1 2301 / 2210 / 2185 / 1870; nvfp4 NT 1 2356 / 2255 / 2228 / 1906. Both were removed.
fn iq4xs_table_src(wg: u32, lut2: bool) -> String {
    let (off, _) = table_of(Format::IQ4_XS);
    if !lut2 {
        return format!(
            "{}fn spread_nib(w: u32) -> u32 {{\n    return (w & 0xfu) | ((w & 0xf0u) << 4u) | ((w & 0xf00u) << 8u) | ((w & 0xf000u) << 12u);\n}}\n\
             fn lute(w: u32) -> vec2<u32> {{\n    return vec2<u32>(lut4t(spread_nib(w & 0xffffu)), lut4t(spread_nib(w >> 16u)));\n}}\n",
            table_src(Format::IQ4_XS, wg)
        );
    }
    format!(
        "var<workgroup> TE: array<u32, 256>;\n\
         var<workgroup> TF: array<u32, 256>;\n\
         {tb}\
         fn load_tab(lid: u32) {{\n    for (var i = lid; i < 256u; i += {wg}u) {{\n        let e = tbyte(i & 15u) | (tbyte(i >> 4u) << 8u);\n        TE[i] = e;\n        TF[i] = e << 16u;\n    }}\n    workgroupBarrier();\n}}\n\
         fn lute(w: u32) -> vec2<u32> {{\n    return vec2<u32>(TE[w & 0xffu] | TF[(w >> 8u) & 0xffu], TE[(w >> 16u) & 0xffu] | TF[w >> 24u]);\n}}\n",
        tb = tbyte_src(off)
    )
}

/// The block loop of a matmul kernel's `main`: `step` for blocks `0..bound` in order, `unroll`
/// (1, 2, 4) blocks per iteration, then the remainder one by one; `call(b)` is the step's
/// statement for the block expression `b`. The order of the steps, hence the bits, is the same
/// for every `unroll`.
fn block_loop(bound: &str, unroll: u32, call: impl Fn(&str) -> String) -> String {
    block_loop_from("0u", bound, unroll, call)
}

/// [`block_loop`] over blocks `start..bound`.
fn block_loop_from(start: &str, bound: &str, unroll: u32, call: impl Fn(&str) -> String) -> String {
    match unroll {
        0 | 1 => format!("for (var b = {start}; b < {bound}; b++) {{\n        {}\n    }}", call("b")),
        u => {
            let steps: String = (0..u).map(|k| format!("        {}\n", call(&format!("b + {k}u")))).collect();
            format!(
                "var b = {start};\n    for (; b + {}u < {bound}; b += {u}u) {{\n{steps}    }}\n    for (; b < {bound}; b++) {{\n        {}\n    }}",
                u - 1,
                call("b")
            )
        }
    }
}

/// The matmul kernel of `f` (`o.nt` tokens per dispatch, `o.rows` weight rows per workgroup:
/// 8 invocations each; 2 for the pair formats and the thread pairs).
pub(crate) fn matmul_source(f: Format, o: &MmSrc) -> Option<String> {
    if on_kpair(f, o.iq_pairs) {
        let body = if f.is_iq_grid() { iq_pair_body(f, iq_elem(f, o))? } else { matmul_body(f)?.to_string() };
        return Some(kpair_source(f, &body, o));
    }
    let body = &ktile_blocks(f, o, &with_iq8_tail(matmul_body(f)?));
    if crate::layout::is_pair(f) {
        return Some(pair_source(f, body, o));
    }
    let wg = 8 * o.rows;
    let mut s = String::with_capacity(24 * 1024);
    // No `enable subgroups;`: naga 30 rejects it and gates subgroup operations by the
    // device's SUBGROUP feature instead.
    s.push_str(&o.head(8));
    s.push_str(&table_consts());
    s.push_str(PARAMS);
    s.push_str(MATMUL_HEAD);
    s.push_str(&act_q8k(o.q8k_split, o.q8k_both));
    s.push_str(&table_src(f, wg));
    s.push_str(COMMON);
    if tiled_rows(f, o) {
        s.push_str(include_str!("wgsl/tiled_base.wgsl"));
        s.push_str(&iq_split_src(f, o.ktile, "P.rows", "P.nb", 1));
    }
    s.push_str(&fma_src(o.native_fma));
    s.push_str(if o.subgroups { REDUCE_SUBGROUP } else { REDUCE_SHARED });
    s.push_str(body);
    let lp = block_loop("P.nb", o.unroll, |b| format!("step(base, {b}, l, &st);"));
    s.push_str(
        &row_bases(tiled_rows(f, o), MATMUL_MAIN).replace("UNROLL_LOOP", &lp).replace("WG_SIZE", &wg.to_string()),
    );
    Some(s)
}

/// The options of a matmul kernel's source.
#[derive(Clone, Copy)]
pub(crate) struct MmSrc {
    pub nt: u32,
    pub subgroups: bool,
    pub native_fma: bool,
    pub unroll: u32,
    pub rows: u32,
    pub lut2: bool,
    /// The IQ2/IQ3 formats on thread pairs.
    pub iq_pairs: bool,
    /// The kernel reads q8_K activations in the split device layout (`act_q8k_split.wgsl`).
    pub q8k_split: bool,
    /// q8_K rows hold both layouts, ggml's blocks first (`Q8kLayout::Both`).
    pub q8k_both: bool,
    /// Rows per thread pair of the pair-layout and thread-pair kernels (1, or 2:
    /// `pair_main2.wgsl`, `kpair_main2.wgsl`; q4_K and q5_K with their own two-row bodies,
    /// `kpair2_head.wgsl`, unless `pair_generic`).
    pub pair_rows: u32,
    /// Two rows per pair through `kpair_main2.wgsl` for q4_K and q5_K too.
    pub pair_generic: bool,
    /// The activations staged in workgroup memory, this many steps a chunk (the pair
    /// formats, `pair_stage.wgsl`) or blocks (the thread pairs, `act_q8k_stage.wgsl`); 0: read
    /// from the buffer.
    pub stage: u32,
    /// q4_K's and q5_K's blocks tiled (`crate::Tuning::ktile`, layout.rs `pack_whole`), the
    /// IQ2/IQ3 formats' tiled and split (`pack_split`): the rows' `base` from `tiled_base` and
    /// the blocks by `tiled_block` ([`ktile_blocks`]).
    pub ktile: bool,
}

impl MmSrc {
    /// A kernel's first lines: token count, rows and invocations per workgroup (`per_row`
    /// invocations per row).
    fn head(&self, per_row: u32) -> String {
        format!(
            "const NT: u32 = {}u;\nconst ROWS: u32 = {}u;\nconst WG: u32 = {}u;\n",
            self.nt,
            self.rows,
            per_row * self.rows
        )
    }

    /// The float helpers, the lane reductions and the 4-lane chain, then the format's `body`.
    fn tail(&self, s: &mut String, body: &str) {
        s.push_str(&fma_src(self.native_fma));
        s.push_str(if self.subgroups { REDUCE_SUBGROUP } else { REDUCE_SHARED });
        s.push_str(LANES4);
        s.push_str(body);
    }
}

/// Whether `c` asks for two rows per pair and its workgroups can have them (an even number of
/// rows).
fn two_rows(c: &MmSrc) -> bool {
    c.pair_rows == 2 && c.rows >= 2 && c.rows.is_multiple_of(2)
}

/// The matmul kernel of a pair format (`layout.rs`): 2 invocations per row (with [`two_rows`]:
/// per 2 rows).
fn pair_source(f: Format, body: &str, c: &MmSrc) -> String {
    let two = two_rows(c);
    let wg = if two { c.rows } else { 2 * c.rows };
    let mut s = String::with_capacity(16 * 1024);
    s.push_str(&c.head(if two { 1 } else { 2 }));
    // Region A's words per block, and the weights' element: an invocation's share of a block
    // (half of region A: 16 bytes, vec4, or 8, vec2), from the layout.
    let (a_bytes, _) = crate::layout::tiled_regions(f).expect("a pair format");
    let (wv, wsh) = if a_bytes / 2 == 16 { ("vec4", 2) } else { ("vec2", 1) };
    s.push_str(&format!("const AW: u32 = {}u;\nalias WV = {wv}<u32>;\nconst WSH: u32 = {wsh}u;\n", a_bytes / 4));
    // q8_0 / q8_1 activation blocks (32 elements) per weight block.
    s.push_str(&format!("const ABPB: u32 = {}u;\n", f.block_elems() / 32));
    s.push_str(&table_consts());
    s.push_str(PARAMS);
    s.push_str(PAIR_HEAD);
    s.push_str(&pair_table_src(f, wg, c.lut2));
    s.push_str(&common_without_buffers());
    let call = |b: &str| {
        if two {
            format!("step(ka, Ga, {b}, h, &st0);\n        step(kb, Gb, {b}, h, &st1);")
        } else {
            format!("step(k0, G, {b}, h, &st);")
        }
    };
    let lp = if c.stage > 0 {
        s.push_str(&stage_consts(f, c.nt, c.stage));
        s.push_str(PAIR_STAGE);
        c.tail(&mut s, &staged_steps(body));
        format!("let ns = nsteps();\n    {}", chunked_loop("ns", c.stage, "c0 * ABPS", c.unroll, call))
    } else {
        c.tail(&mut s, body);
        format!("let ns = nsteps();\n    {}", block_loop("ns", c.unroll, call))
    };
    let main = if two { PAIR_MAIN2 } else { PAIR_MAIN };
    s.push_str(&main.replace("UNROLL_LOOP", &lp).replace("WG_SIZE", &wg.to_string()));
    s
}

/// Activation blocks (32 elements, q8_0 / q8_1) a step of pair format `f` reads: its weight
/// block's (nvfp4: 2), times the blocks of a step (iq4_nl: a pair).
pub(crate) fn pair_act_blocks_per_step(f: Format) -> u32 {
    let per_block = f.block_elems() as u32 / 32;
    if f == Format::IQ4_NL { 2 * per_block } else { per_block }
}

/// Whether the pair kernel of `f` reads q8_1 activations, whose s (`as1`) `pair_stage.wgsl`
/// then stages too (q5_1).
pub(crate) fn stages_s(f: Format) -> bool {
    f.vec_dot_type() == Some(Format::Q8_1)
}

/// Workgroup bytes of `pair_stage.wgsl`'s arrays for `nt` tokens and `steps` steps a chunk of
/// pair format `f`.
pub(crate) fn stage_bytes(f: Format, nt: u32, steps: u32) -> u32 {
    let n = nt * steps * pair_act_blocks_per_step(f);
    n * (32 + 4) + if stages_s(f) { 4 * n } else { 4 }
}

/// `pair_stage.wgsl`'s consts.
fn stage_consts(f: Format, nt: u32, steps: u32) -> String {
    let with_s = stages_s(f);
    let abps = pair_act_blocks_per_step(f);
    let cha = steps * abps;
    format!(
        "const CHA: u32 = {cha}u;\nconst ABPS: u32 = {abps}u;\nconst SQN: u32 = {}u;\nconst SDN: u32 = {}u;\n\
         const SSN: u32 = {}u;\nconst HAS_S: bool = {with_s};\n",
        2 * nt * cha,
        nt * cha,
        if with_s { nt * cha } else { 1 }
    )
}

/// A pair body's `step` with its activation reads (`aq`, `ad`, `as1`) renamed to the staged
/// accessors of `pair_stage.wgsl`; the rest (`finish`, which reads iq4_nl's odd last block
/// outside the steps' chunks) keeps reading the buffer.
fn staged_steps(body: &str) -> String {
    let at = body.find("fn finish(").unwrap_or(body.len());
    let (steps, rest) = body.split_at(at);
    let mut steps = steps.to_string();
    for name in ["aq", "ad", "as1"] {
        steps = rename_calls(&steps, name, &format!("s{name}"));
    }
    steps + rest
}

/// `src` with every call of function `from` (the name followed by `(`, not preceded by an
/// identifier character) calling `to` instead.
fn rename_calls(src: &str, from: &str, to: &str) -> String {
    let pat = format!("{from}(");
    let mut out = String::with_capacity(src.len() + 64);
    let mut rest = src;
    while let Some(i) = rest.find(&pat) {
        let ident_before = rest[..i].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        out.push_str(&rest[..i]);
        out.push_str(if ident_before { from } else { to });
        out.push('(');
        rest = &rest[i + pat.len()..];
    }
    out.push_str(rest);
    out
}

/// A thread-pair matmul kernel (kpair_head.wgsl) of the K-quants, iq4_xs and (with
/// `Tuning::iq_pairs`) the IQ2/IQ3 formats: 2 invocations per row, ggml's blocks read as
/// `vec4<u32>` (q4_K, q5_K: multiples of 16 bytes) or words (the IQ2/IQ3 formats: 2-byte
/// aligned); iq4_xs and q6_K (and with [`MmSrc::ktile`] q4_K and q5_K, and the IQ2/IQ3 formats
/// split, their words aligned) in their tiled layout (layout.rs), their rows' `base` from
/// `tiled_base` ([`row_bases`]).
fn kpair_source(f: Format, body: &str, c: &MmSrc) -> String {
    let mut s = String::with_capacity(16 * 1024);
    let body = &ktile_blocks(f, c, body);
    if two_rows(c) {
        // Two rows per pair: ROWS invocations a workgroup; q4_K and q5_K with their own body.
        kpair_prelude(&mut s, f, c, 1, iq_elem(f, c));
        let (state, call, finish) = match kpair2_body(f, c) {
            Some(body2) => {
                c.tail(&mut s, KPAIR2_HEAD);
                s.push_str(&ktile_blocks(f, c, body2));
                ("var st: St2;", "step2(base0, base1, {b}, h, &st);", "finish2(&st, lid)")
            }
            None => {
                c.tail(&mut s, body);
                (
                    "var st0: St;\n    var st1: St;",
                    "step(base0, {b}, h, &st0);\n        step(base1, {b}, h, &st1);",
                    "array<array<f32, NT>, 2>(finish(&st0, h, lid), finish(&st1, h, lid))",
                )
            }
        };
        let lp = kpair_loop(c, |b| call.replace("{b}", b));
        s.push_str(
            &row_bases(tiled_rows(f, c), KPAIR_MAIN2)
                .replace("STATE", state)
                .replace("UNROLL_LOOP", &lp)
                .replace("FINISH", finish)
                .replace("WG_SIZE", &c.rows.to_string()),
        );
        return s;
    }
    let wg = 2 * c.rows;
    kpair_prelude(&mut s, f, c, 2, iq_elem(f, c));
    c.tail(&mut s, body);
    let lp = kpair_loop(c, |b| format!("step(base, {b}, h, &st);"));
    s.push_str(
        &row_bases(tiled_rows(f, c), KPAIR_MAIN).replace("UNROLL_LOOP", &lp).replace("WG_SIZE", &wg.to_string()),
    );
    s
}

/// The thread pairs' block loop: over every block, or (staged) over chunks of `c.stage`
/// blocks, each first copied (`stage_acts`).
fn kpair_loop(c: &MmSrc, call: impl Fn(&str) -> String) -> String {
    if c.stage == 0 {
        return block_loop("P.nb", c.unroll, call);
    }
    chunked_loop("P.nb", c.stage, "c0", c.unroll, call)
}

/// The staged kernels' loop (`pair_stage.wgsl`, `act_q8k_stage.wgsl`): [`block_loop`] over
/// `0..bound` in chunks `c0..c1` of `chunk`, each first copied by `stage_acts(first, lid)`
/// (`first`: the chunk's first activation block, an expression of `c0`).
fn chunked_loop(bound: &str, chunk: u32, first: &str, unroll: u32, call: impl Fn(&str) -> String) -> String {
    format!(
        "for (var c0 = 0u; c0 < {bound}; c0 += {chunk}u) {{\n    stage_acts({first}, lid);\n    \
         let c1 = min(c0 + {chunk}u, {bound});\n    {}\n    }}",
        block_loop_from("c0", "c1", unroll, call)
    )
}

/// Whether the thread-pair kernel of `f` reads the q8_K bsums (the K-quants' mins and q6_K's
/// bias), which `act_q8k_stage.wgsl` then stages too.
pub(crate) fn reads_bsums(f: Format) -> bool {
    matches!(f, Format::Q4_K | Format::Q5_K | Format::Q6_K)
}

/// Workgroup bytes of `act_q8k_stage.wgsl`'s arrays for `nt` tokens and `blocks` blocks a
/// chunk of thread-pair format `f`.
pub(crate) fn kstage_bytes(f: Format, nt: u32, blocks: u32) -> u32 {
    let n = nt * blocks;
    n * (256 + 4) + if reads_bsums(f) { 32 * n } else { 16 }
}

/// The staged q8_K accessors of a thread-pair kernel (`act_q8k_stage.wgsl`), after the
/// buffer layout's own (`act_q8k`) renamed `g_*`, which the copy reads.
fn staged_act_q8k(f: Format, c: &MmSrc) -> String {
    let mut g = act_q8k(c.q8k_split, c.q8k_both);
    for name in ["aq", "aq4", "ab4", "ad"] {
        g = rename_calls(&g, name, &format!("g_{name}"));
    }
    let n = c.nt * c.stage;
    let bs = reads_bsums(f);
    format!(
        "{g}const KCB: u32 = {}u;\nconst SQN: u32 = {}u;\nconst SBN: u32 = {}u;\nconst SDN: u32 = {n}u;\n\
         const HAS_BS: bool = {bs};\n{ACT_Q8K_STAGE}",
        c.stage,
        16 * n,
        if bs { 2 * n } else { 1 }
    )
}

/// The thread-pair, cooperative-matrix or (the IQ2/IQ3 formats tiled) 8-invocation main
/// `text`: the rows' `base` is `row *
/// P.row_bytes` (ggml's blocks, row-major), where `tiled` ([`tiled_rows`]) `tiled_base(row)`
/// (the tiled layout, layout.rs: tiled_base.wgsl). The other kernels' text stays byte for byte
/// what was measured.
fn row_bases(tiled: bool, text: &str) -> String {
    if !tiled {
        return text.to_string();
    }
    ["row", "row0", "row1"].iter().fold(text.to_string(), |t, r| {
        t.replace(&format!("min({r}, P.rows - 1u) * P.row_bytes"), &format!("tiled_base(min({r}, P.rows - 1u))"))
    })
}

/// Whether `f`'s weights are tiled in the kernels of `c`: iq4_xs and q6_K always, q4_K, q5_K
/// and the IQ2/IQ3 formats with [`MmSrc::ktile`].
fn tiled_rows(f: Format, c: &MmSrc) -> bool {
    crate::layout::is_tiled(f) || (c.ktile && crate::layout::ktiles(f))
}

/// `text` (a q4_K or q5_K body: kp_*, kp2_*, kc_*) with its block address `(base + b * BB) >>
/// 4u` (ggml's row-major blocks of BB bytes) replaced, where `c` asks for the tiled blocks
/// ([`MmSrc::ktile`]), by `tiled_block(base, b) * BB / 16` (its tiled number, tiled_base.wgsl,
/// times its 16-byte words); every other text unchanged.
///
/// An IQ2/IQ3 body (kpi_* with kp_iq or kc_iq, mm_*) gets the split tiled layout
/// (layout.rs `pack_split`, [`iq_split_src`]): its block's byte `B = base + b * BB` becomes
/// `tiled_block(base, b) * BODY - 2` (body byte i of block k, ggml's byte i + 2 of the block,
/// at `B + 2 + i`, so that every offset in the text keeps its meaning), its `d` is read from
/// the `d` region (`w16(iq_d(B))`), and its words, all at 4-byte aligned body offsets, with one
/// load each (`wa32`).
fn ktile_blocks(f: Format, c: &MmSrc, text: &str) -> String {
    if !c.ktile {
        return text.to_string();
    }
    if let Some(bb) = crate::layout::ktile_bytes(f) {
        let row_major = format!("(base + b * {bb}u) >> 4u");
        debug_assert!(text.contains(&row_major), "{f}: no block address to tile");
        return text.replace(&row_major, &format!("tiled_block(base, b) * {}u", bb / 16));
    }
    let Some(body) = crate::layout::iq_body_bytes(f) else { return text.to_string() };
    let tiled = format!("tiled_block(base, b) * {body}u - 2u");
    let t = text.replace(&format!("base + b * {}u", f.block_bytes()), &tiled).replace("base + b * BB", &tiled);
    debug_assert!(t != text && t.contains("f16f(w16(B))"), "{f}: no block address to tile");
    rename_calls(&t.replace("f16f(w16(B))", "f16f(w16(iq_d(B)))"), "w32", "wa32")
}

/// The helpers of the IQ2/IQ3 formats' split tiled layout (iq_split.wgsl) for format `f` where
/// `ktile` asks for it ([`MmSrc::ktile`]); empty otherwise. `rows`: the part's rows (`P.rows`;
/// the dequantize kernel's `DP.part_rows`), `nb` its blocks per row.
///
/// `elem`: the words of the weights' elements ([`iq_elem`]); above 1 (`W: array<vec2<u32>>` or
/// `array<vec4<u32>>`) `wa32` picks its word from an element, and `w16` (the `d` region's
/// halves) is defined here.
fn iq_split_src(f: Format, ktile: bool, rows: &str, nb: &str, elem: u32) -> String {
    match crate::layout::iq_body_bytes(f) {
        Some(body) if ktile => {
            let s = include_str!("wgsl/iq_split.wgsl")
                .replace("BODY_BYTES", &body.to_string())
                .replace("PART_ROWS", rows)
                .replace("PART_NB", nb);
            let word_at = match elem {
                4 => "W[byte >> 4u][(byte >> 2u) & 3u]",
                2 => "W[byte >> 3u][(byte >> 2u) & 1u]",
                _ => return s,
            };
            let word = "return W[byte >> 2u];";
            debug_assert!(s.contains(word));
            s.replace(word, &format!("return {word_at};"))
                + &format!(
                    "// The u16 at an even byte offset of the elements.\n\
                     fn w16(byte: u32) -> u32 {{\n    return ({word_at} >> (8u * (byte & 2u))) & 0xffffu;\n}}\n"
                )
        }
        _ => String::new(),
    }
}

/// The two-rows-per-pair body of `f` where `c` asks for it ([`two_rows`], not `pair_generic`)
/// and `f` has one (q4_K, q5_K; q6_K's and iq4_xs's measured slower than one row on the H200,
/// benches/results/2026-12-05-h200-session16 run7, and were removed).
fn kpair2_body(f: Format, c: &MmSrc) -> Option<&'static str> {
    if !two_rows(c) || c.pair_generic {
        return None;
    }
    match f {
        Format::Q4_K => Some(include_str!("wgsl/kp2_q4_k.wgsl")),
        Format::Q5_K => Some(include_str!("wgsl/kp2_q5_k.wgsl")),
        _ => None,
    }
}

/// What the thread-pair kernels (and the cooperative-matrix ones, which keep their layout) put
/// before their body: constants, bindings (kpair_head.wgsl), the q8_K accessors, the format's
/// table and the common helpers.
fn kpair_prelude(s: &mut String, f: Format, c: &MmSrc, per_row: u32, iq_elem: u32) {
    let wg = per_row * c.rows;
    let wv = match f {
        Format::Q4_K | Format::Q5_K | Format::IQ4_XS | Format::Q6_K => "vec4<u32>",
        _ if iq_elem == 4 => "vec4<u32>",
        _ if iq_elem == 2 => "vec2<u32>",
        _ => "u32",
    };
    s.push_str(&c.head(per_row));
    s.push_str(&format!("alias WV = {wv};\n"));
    s.push_str(&table_consts());
    s.push_str(PARAMS);
    s.push_str(KPAIR_HEAD);
    if tiled_rows(f, c) {
        s.push_str(include_str!("wgsl/tiled_base.wgsl"));
        s.push_str(&iq_split_src(f, c.ktile, "P.rows", "P.nb", iq_elem));
    }
    if c.stage > 0 {
        s.push_str(&staged_act_q8k(f, c));
    } else {
        s.push_str(&act_q8k(c.q8k_split, c.q8k_both));
    }
    // iq4_xs's kvalues through `lut8`; the grids of the IQ2/IQ3 formats through `tab`.
    s.push_str(&if f == Format::IQ4_XS { iq4xs_table_src(wg, c.lut2) } else { table_src(f, wg) });
    // The word-addressed helpers (w32, w16, w8) only where the weights are words.
    if wv == "u32" {
        s.push_str(&common_without(&["fn lut4("]));
    } else {
        s.push_str(&common_without_buffers());
    }
}

/// The formats with a cooperative-matrix matmul kernel (`wgsl/kc_*.wgsl`).
pub(crate) fn has_coop(f: Format) -> bool {
    coop_body(f).is_some()
}

/// A format's part of its cooperative-matrix kernel (`wgsl/kc_common.wgsl` has the rest).
fn coop_body(f: Format) -> Option<String> {
    match f {
        Format::Q4_K => Some(format!("{}{KC_KQUANT}", include_str!("wgsl/kc_q4_k.wgsl"))),
        Format::Q5_K => Some(format!("{}{KC_KQUANT}", include_str!("wgsl/kc_q5_k.wgsl"))),
        f if f.is_iq_grid() => Some(format!("{}{}", iq_sub(f, 1)?, include_str!("wgsl/kc_iq.wgsl"))),
        _ => None,
    }
}

/// How a cooperative-matrix kernel forms its tile products.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CoopTiles {
    /// Plain invocations (`kc_tile_emulated.wgsl`), any adapter.
    Emulated,
    /// The adapter's cooperative matrices, loaded from u32 workgroup arrays (two f16 a word).
    Words,
    /// The adapter's cooperative matrices, loaded from f16 workgroup arrays.
    Halves,
}

/// Rows per workgroup of the cooperative-matrix kernels (two tile halves of 16).
pub(crate) const COOP_ROWS: u32 = 32;

/// The cooperative-matrix matmul kernel of `f` (`wgsl/kc_common.wgsl`: 64 invocations, 32 rows,
/// the thread pairs' float chains on integer lane sums from 16 x 16 x 16 tile products), on
/// the adapter's cooperative matrices or with the products emulated by plain invocations
/// (`tiles`). The constant-count loops are unrolled in the source (`flatten_loops`), so that
/// the lane-pair index of the vector components is a constant.
pub(crate) fn coop_source(f: Format, c: &MmSrc, tiles: CoopTiles) -> Option<String> {
    let body = ktile_blocks(f, c, &coop_body(f)?);
    let o = MmSrc { rows: COOP_ROWS, ..*c };
    let mut s = String::with_capacity(24 * 1024);
    let native = tiles != CoopTiles::Emulated;
    if native {
        s.push_str("enable f16;\nenable wgpu_cooperative_matrix;\n");
    }
    kpair_prelude(&mut s, f, &o, 2, 1);
    s.push_str(if tiles == CoopTiles::Halves { KC_STAGE_F16 } else { KC_STAGE_U32 });
    o.tail(&mut s, &body);
    s.push_str(KC_COMMON);
    s.push_str(if native { KC_TILE_COOP } else { KC_TILE_EMULATED });
    s.push_str(&row_bases(tiled_rows(f, &o), KC_MAIN).replace("WG_SIZE", &(2 * COOP_ROWS).to_string()));
    Some(flatten_loops(&s, o.nt, 8))
}

/// The dequantize kernel of `f` (`ktile`: q4_K's and q5_K's blocks tiled, the IQ2/IQ3 formats'
/// tiled and split, [`MmSrc::ktile`]).
pub(crate) fn dequant_source(f: Format, ktile: bool) -> Option<String> {
    let name = match f {
        Format::Q8_0 => "q8_0",
        Format::Q5_1 => "q5_1",
        Format::Q4_K => "q4_k",
        Format::Q5_K => "q5_k",
        Format::Q6_K => "q6_k",
        Format::IQ2_XXS => "iq2_xxs",
        Format::IQ2_XS => "iq2_xs",
        Format::IQ2_S => "iq2_s",
        Format::IQ3_XXS => "iq3_xxs",
        Format::IQ3_S => "iq3_s",
        Format::IQ4_NL => "iq4_nl",
        Format::IQ4_XS => "iq4_xs",
        Format::NVFP4 => "nvfp4",
        _ => return None,
    };
    let mut s = table_consts();
    let region_a = crate::layout::tiled_regions(f).map(|(a, _)| a);
    let whole = crate::layout::ktile_bytes(f).filter(|_| ktile);
    let split = crate::layout::iq_body_bytes(f).is_some() && ktile;
    let (paw, addr, prefix) = match region_a.or(whole) {
        Some(a) => (a / 4, "ptiled(DP.row_first + rr, c / BE)", "deqp"),
        // The IQ2/IQ3 formats split and tiled: ggml's functions on the block byte that keeps
        // their offsets (iq_split.wgsl), their d from the d region.
        None if split => (0, "ptiled(DP.row_first + rr, c / BE) * IQBODY - 2u", "deq"),
        None => (0, "(DP.row_first + rr) * DP.row_bytes + (c / BE) * BB", "deq"),
    };
    s.push_str(&format!(
        "const BE: u32 = {}u;\nconst BB: u32 = {}u;\nconst PAW: u32 = {paw}u;\n",
        f.block_elems(),
        f.block_bytes()
    ));
    let fun = format!("{prefix}_{name}(");
    let mut text = DEQUANT.replace("DEQ(", &fun).replace("BLOCK_ADDR", addr);
    if split {
        // Only the format's own function reads d from the d region (the others are not called).
        let at = text.find(&format!("fn {fun}")).expect("the format's dequantize function");
        let end = at + text[at..].find("\n}\n").expect("its end");
        let own = text[at..end].replace("f16f(w16(B))", "f16f(w16(iq_d(B)))");
        debug_assert!(own.contains("iq_d(B)"), "{f}: no d to move");
        text.replace_range(at..end, &own);
        s.push_str(&iq_split_src(f, true, "DP.part_rows", "DP.nb", 1));
    }
    s.push_str(&text);
    s.push_str(COMMON);
    Some(s)
}

/// The activation quantizer of `act` (q8_0, q8_1, q8_K).
pub(crate) fn quant_source(act: Format, native_fma: bool, q8k: crate::Q8kLayout) -> Option<String> {
    let call = match act {
        Format::Q8_0 => "quant_q8_01(g, false)",
        Format::Q8_1 => "quant_q8_01(g, true)",
        Format::Q8_K => "quant_q8_k(g)",
        _ => return None,
    };
    // The quantizer binds neither the weights `W` nor the tables `T`: common.wgsl goes in
    // without the functions that read them.
    let mut s = table_consts();
    s.push_str(&format!(
        "const Q8K_SPLIT: bool = {};\nconst Q8K_BOTH: bool = {};\n",
        q8k == crate::Q8kLayout::Split,
        q8k == crate::Q8kLayout::Both
    ));
    s.push_str(&QUANT.replace("QUANT;", &format!("{call};")));
    s.push_str(&common_without_buffers());
    s.push_str(&fma_src(native_fma));
    s.push_str(FLOATOPS);
    Some(s)
}

/// The probe kernel: float behaviour of the adapter (see [`crate::probe`]).
pub(crate) fn probe_source(native_fma: bool) -> String {
    let mut s = table_consts();
    s.push_str(crate::probe::PROBE_WGSL);
    s.push_str(&common_without_buffers());
    s.push_str(&fma_src(native_fma));
    s.push_str(FLOATOPS);
    s
}

/// common.wgsl without the functions that read the weight buffer `W` or the tables `T`.
fn common_without_buffers() -> String {
    common_without(&["fn w32(", "fn w16(", "fn w8(", "fn lut4("])
}

/// common.wgsl without the functions whose first line starts with one of `drop`.
fn common_without(drop: &[&str]) -> String {
    let mut out = String::new();
    let mut skip = false;
    for line in COMMON.lines() {
        if line.starts_with("fn ") {
            skip = drop.iter().any(|p| line.starts_with(p));
        }
        if !skip {
            out.push_str(line);
            out.push('\n');
        }
        if line == "}" {
            skip = false;
        }
    }
    out
}

/// Unrolls, in WGSL source text, every loop of the form
/// `for (var i = 0u; i < N; i++) { BODY }` with `N` a literal of at most `max` or `NT`
/// (`nt`), innermost first: each copy of `BODY` becomes a block `{ BODY[i := k] }` (its
/// `let`s stay local to the copy), so that every index of a per-token array is a constant.
/// A loop whose body has `break`, `continue` or a nested declaration of its variable is kept.
/// The statements and their order are unchanged, hence the bits.
pub(crate) fn flatten_loops(src: &str, nt: u32, max: u32) -> String {
    // Comments go first: a brace inside one would unbalance the scan.
    let mut s: String = src.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut from = 0;
    while let Some(rel) = s[from..].find("for (var ") {
        let start = from + rel;
        match flatten_one(&s, start, nt, max) {
            Some((end, text)) => {
                // Scanned again: the copies may hold loops that were kept (each is then
                // skipped, so this ends).
                s.replace_range(start..end, &text);
                from = start;
            }
            None => from = start + "for (var ".len(),
        }
    }
    s
}

/// The loop at `start` unrolled (its end offset and replacement), or `None` if it is not of
/// the flattened form.
fn flatten_one(s: &str, start: usize, nt: u32, max: u32) -> Option<(usize, String)> {
    let head_end = start + s[start..].find('{')?;
    let head = &s[start..head_end];
    // `for (var i = 0u; i < N; i++) `
    let inner = head.strip_prefix("for (var ")?.trim_end().strip_suffix(')')?;
    let mut parts = inner.split(';').map(str::trim);
    let (init, cond, step) = (parts.next()?, parts.next()?, parts.next()?);
    let (var, zero) = init.split_once('=')?;
    let var = var.trim();
    if zero.trim() != "0u" || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let (cv, bound) = cond.split_once('<')?;
    if cv.trim() != var || step != format!("{var}++") {
        return None;
    }
    let bound = bound.trim();
    let n = match bound {
        "NT" => nt,
        // kpair_head.wgsl's token slots per invocation
        "NTH" => nt.div_ceil(2),
        _ => bound.strip_suffix('u')?.parse::<u32>().ok()?,
    };
    if n > max.max(nt) {
        return None;
    }
    // The body: from the `{` to its matching `}`.
    let mut depth = 0usize;
    let mut end = None;
    for (i, c) in s[head_end..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = Some(head_end + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let end = end?;
    let body = &s[head_end + 1..end];
    // Inner loops first.
    let body = flatten_loops(body, nt, max);
    let words: Vec<&str> = split_words(&body);
    if words.iter().any(|w| *w == "break" || *w == "continue")
        || words.windows(2).any(|w| (w[0] == "var" || w[0] == "let") && w[1] == var)
    {
        return None;
    }
    let mut out = String::new();
    for k in 0..n {
        out.push_str("{ ");
        for w in &words {
            if *w == var {
                out.push_str(&format!("{k}u"));
            } else {
                out.push_str(w);
            }
        }
        out.push_str(" }\n");
    }
    Some((end + 1, out))
}

/// `s` cut into identifier-like words and everything between them (concatenating the parts
/// gives `s` back).
fn split_words(s: &str) -> Vec<&str> {
    let mut v = Vec::new();
    let mut i = 0;
    let b = s.as_bytes();
    while i < b.len() {
        let word = b[i].is_ascii_alphanumeric() || b[i] == b'_';
        let mut j = i + 1;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') == word {
            j += 1;
        }
        v.push(&s[i..j]);
        i = j;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Q8kLayout;

    /// Two-token kernel options on 32 rows, subgroups, native fma, one block an iteration, both
    /// q8_K layouts, not staged, ggml's row order; `pair_rows` rows per pair.
    fn plain_src(pair_rows: u32) -> MmSrc {
        MmSrc {
            nt: 2,
            subgroups: true,
            native_fma: true,
            unroll: 1,
            rows: 32,
            lut2: true,
            iq_pairs: false,
            q8k_split: false,
            q8k_both: true,
            pair_rows,
            pair_generic: false,
            stage: 0,
            ktile: false,
        }
    }

    /// Every kernel source parses, validates and translates to SPIR-V with naga (no adapter
    /// needed).
    #[test]
    fn every_source_validates() {
        let mut sources = Vec::new();
        for f in Format::WEIGHTS {
            for nt in [1, 3, 8] {
                for sg in [false, true] {
                    for nf in [false, true] {
                        let rows = if nf { 32 } else { 8 };
                        // The IQ2/IQ3 formats' thread pairs and the split q8_K layout with the
                        // native-fma variant; q4_K's and q5_K's two rows per pair with both
                        // reductions and both q8_K layouts.
                        let o = MmSrc {
                            nt,
                            subgroups: sg,
                            native_fma: nf,
                            unroll: if nf { 4 } else { 1 },
                            rows,
                            lut2: nf,
                            iq_pairs: nf,
                            q8k_split: nf,
                            q8k_both: nf && nt == 3,
                            pair_rows: if nf == sg { 2 } else { 1 },
                            pair_generic: nt == 3,
                            // Staged activations (the pair formats and the thread pairs; the
                            // other kernels ignore it), chunks of 1 and 8 steps or blocks.
                            stage: if nt == 3 { 0 } else { nt },
                            // q4_K's, q5_K's and (on thread pairs) the IQ2/IQ3 formats' tiled
                            // blocks with the native-fma variant
                            ktile: nf,
                        };
                        let src = matmul_source(f, &o).unwrap();
                        let flat = flatten_loops(&src, nt, 8);
                        sources.push((
                            format!(
                                "matmul {f} nt={nt} sg={sg} native_fma/unroll/lut2={nf} rows={rows} pair_rows={} \
                                 stage={}",
                                o.pair_rows, o.stage
                            ),
                            src,
                        ));
                        sources.push((
                            format!("flat matmul {f} nt={nt} sg={sg} native_fma/unroll={nf} rows={rows}"),
                            flat,
                        ));
                    }
                }
            }
            if has_coop(f) {
                for nt in [1, 2, 5, 8] {
                    for tiles in [CoopTiles::Emulated, CoopTiles::Words, CoopTiles::Halves] {
                        let native = tiles != CoopTiles::Emulated;
                        let o = MmSrc {
                            nt,
                            subgroups: native,
                            native_fma: native,
                            unroll: 1,
                            rows: 32,
                            lut2: true,
                            iq_pairs: false,
                            q8k_split: !native,
                            q8k_both: false,
                            pair_rows: 2,
                            pair_generic: false,
                            stage: 0,
                            ktile: nt == 5,
                        };
                        sources.push((format!("coop {f} nt={nt} {tiles:?}"), coop_source(f, &o, tiles).unwrap()));
                    }
                }
            }
            sources.push((format!("dequant {f}"), dequant_source(f, false).unwrap()));
            if crate::layout::ktiles(f) {
                sources.push((format!("dequant {f} tiled"), dequant_source(f, true).unwrap()));
            }
            // The IQ2/IQ3 formats' 8-invocation kernels on their tiled and split blocks (the
            // loop above tiles them on thread pairs only).
            if f.is_iq_grid() {
                for sg in [false, true] {
                    let o = MmSrc { subgroups: sg, native_fma: sg, unroll: 2, ktile: true, ..plain_src(1) };
                    sources.push((format!("tiled 8-invocation matmul {f} sg={sg}"), matmul_source(f, &o).unwrap()));
                }
            }
        }
        for a in Format::ACTIVATIONS {
            for (nf, q8k) in [(false, Q8kLayout::Ggml), (true, Q8kLayout::Split), (false, Q8kLayout::Both)] {
                sources.push((format!("quant {a} {q8k:?}"), quant_source(a, nf, q8k).unwrap()));
            }
        }
        sources.push(("probe".into(), probe_source(false)));
        for (name, src) in sources {
            let module = match wgpu::naga::front::wgsl::parse_str(&src) {
                Ok(m) => m,
                Err(e) => panic!("{name}: {}", e.emit_to_string(&src)),
            };
            let mut v = wgpu::naga::valid::Validator::new(
                wgpu::naga::valid::ValidationFlags::all(),
                wgpu::naga::valid::Capabilities::all(),
            );
            let info = match v.validate(&module) {
                Ok(i) => i,
                Err(e) => panic!("{name}: {}", e.emit_to_string(&src)),
            };
            // Also through naga's SPIR-V writer, which the Vulkan path runs and which can
            // reject (panic on) a valid module: a pointer to a struct member passed to a
            // function did, in naga 30.
            if let Err(e) = wgpu::naga::back::spv::write_vec(&module, &info, &Default::default(), None) {
                panic!("{name}: SPIR-V: {e}");
            }
        }
    }

    /// iq4_xs's and q6_K's thread-pair kernels, one row and two per pair, find their rows'
    /// blocks through `tiled_base` (their tiled layout), never as `row * P.row_bytes` (ggml's
    /// row-major blocks), which the other formats' kernels keep unless `ktile` tiles them
    /// (q4_K, q5_K and the IQ2/IQ3 formats).
    #[test]
    fn tiled_rows() {
        for pair_rows in [1, 2] {
            let o = plain_src(pair_rows);
            for f in [Format::IQ4_XS, Format::Q6_K] {
                let src = matmul_source(f, &o).unwrap();
                assert!(!src.contains("1u) * P.row_bytes"), "{f} pair_rows {pair_rows}");
                let calls = src.matches("= tiled_base(min(").count();
                assert_eq!(calls, pair_rows as usize, "{f} pair_rows {pair_rows}");
            }
            let q4 = matmul_source(Format::Q4_K, &o).unwrap();
            assert!(q4.contains("1u) * P.row_bytes") && !q4.contains("= tiled_base("), "pair_rows {pair_rows}");
            // q4_K and q5_K with their blocks tiled (`ktile`): every kernel of theirs, one row or
            // two a pair (their own two-row body and the generic one), and the cooperative
            // matrices, takes its rows' bases from tiled_base and its blocks from tiled_block;
            // the other formats' sources do not change
            for f in [Format::Q4_K, Format::Q5_K] {
                let bb = crate::layout::ktile_bytes(f).unwrap();
                for generic in [false, true] {
                    let k = MmSrc { ktile: true, pair_generic: generic, ..o };
                    let coop = coop_source(f, &k, CoopTiles::Emulated).unwrap();
                    for src in [matmul_source(f, &k).unwrap(), coop] {
                        assert!(!src.contains("1u) * P.row_bytes"), "{f} pair_rows {pair_rows}");
                        assert!(src.contains("= tiled_base(min(") && src.contains("tiled_block(base, b)"), "{f}");
                        assert!(!src.contains(&format!("b * {bb}u")), "{f}: a row-major block address left");
                    }
                }
                assert_ne!(dequant_source(f, true), dequant_source(f, false));
            }
            // The IQ2/IQ3 formats tiled and split (`ktile`): their 8-invocation, thread-pair
            // (one row or two a pair) and cooperative-matrix kernels take their rows' bases from
            // tiled_base, their blocks from tiled_block, their d from the d region and every
            // body word with one aligned load; no call of `w32` is left.
            for f in Format::WEIGHTS.into_iter().filter(|&f| f.is_iq_grid()) {
                let bb = f.block_bytes();
                for iq_pairs in [false, true] {
                    let k = MmSrc { ktile: true, iq_pairs, ..o };
                    let coop = coop_source(f, &k, CoopTiles::Emulated).unwrap();
                    let mm = matmul_source(f, &k).unwrap();
                    // iq2_xxs's and iq2_s's thread pairs read 16-byte elements of their
                    // 16-byte aligned bodies, iq2_xs's 8-byte ones (`iq_elem`), their `d`
                    // through the elements too; the others' (and their untiled) words.
                    let elem = if iq_pairs { iq_elem(f, &k) } else { 1 };
                    let want = match f {
                        Format::IQ2_XXS | Format::IQ2_S if iq_pairs => 4,
                        Format::IQ2_XS if iq_pairs => 2,
                        _ => 1,
                    };
                    assert_eq!(elem, want, "{f}");
                    assert_eq!(iq_elem(f, &MmSrc { ktile: false, ..k }), 1, "{f}");
                    let wv = ["u32", "vec2<u32>", "", "vec4<u32>"][elem as usize - 1];
                    assert!(
                        mm.contains(&format!("alias WV = {wv};")) || (!iq_pairs && !mm.contains("alias WV")),
                        "{f}"
                    );
                    let wide_loads = ["W[((B + 2u) >> 4u) + (ib >> 1u)]", "W[e + 2u + (ib >> 2u)]", "W[e + 8u]"];
                    assert_eq!(wide_loads.iter().any(|l| mm.contains(l)), elem > 1, "{f}");
                    // (iq2_s's thread pairs read half-words and bytes only)
                    assert!(mm.contains("wa32(B + ") || elem > 1, "{f}");
                    for src in [mm, coop] {
                        assert!(!src.contains("1u) * P.row_bytes"), "{f} pair_rows {pair_rows}");
                        assert!(src.contains("= tiled_base(min(") && src.contains("tiled_block(base, b)"), "{f}");
                        assert!(!src.contains(&format!("b * {bb}u")) && !src.contains("b * BB"), "{f}");
                        assert!(src.contains("f16f(w16(iq_d(B)))") && !src.contains("f16f(w16(B))"), "{f}");
                        let calls = rename_calls(&src, "w32", "W32_CALL").matches("W32_CALL(").count();
                        let defined = usize::from(src.contains("fn w32("));
                        assert_eq!(calls, defined, "{f}: a call of w32 left (besides its definition)");
                        assert_wa32_aligned(&src, f);
                    }
                }
                let (tiled, plain) = (dequant_source(f, true).unwrap(), dequant_source(f, false).unwrap());
                assert!(tiled.contains("ptiled(") && tiled.contains("w16(iq_d(B))") && !plain.contains("iq_d"), "{f}");
            }
            for f in Format::WEIGHTS.into_iter().filter(|&f| !crate::layout::ktiles(f)) {
                assert_eq!(matmul_source(f, &MmSrc { ktile: true, ..o }), matmul_source(f, &o), "{f}");
                assert_eq!(dequant_source(f, true), dequant_source(f, false), "{f}");
            }
        }
    }

    /// Every `wa32` (one aligned load) of a tiled IQ2/IQ3 kernel reads a 4-byte aligned body
    /// word: its address `B + C + m1 * x1 + ...` (B = body - 2, iq_split.wgsl) has C = 2 (mod 4)
    /// and every multiplier a multiple of 4.
    fn assert_wa32_aligned(src: &str, f: Format) {
        let mut n = 0;
        for call in src.split("wa32(B + ").skip(1) {
            let args = &call[..call.find(')').expect("wa32(...)")];
            let mut terms = args.split(" + ");
            let c: u32 = terms.next().and_then(|t| t.strip_suffix('u')).and_then(|t| t.parse().ok()).expect(args);
            assert_eq!(c % 4, 2, "{f}: wa32(B + {args})");
            for t in terms {
                let m: u32 =
                    t.split(" * ").next().and_then(|m| m.strip_suffix('u')).and_then(|m| m.parse().ok()).expect(args);
                assert_eq!(m % 4, 0, "{f}: wa32(B + {args})");
            }
            n += 1;
        }
        assert_eq!(n, src.matches("wa32(").count() - 1, "{f}: a wa32 call not of the form wa32(B + ...)");
    }

    /// The staged pair kernels' steps read every activation word from workgroup memory; only
    /// iq4_nl's `finish` (its odd last block) reads the buffer. The kernels stage in chunks.
    #[test]
    fn staged_steps_read_workgroup_memory() {
        for f in [Format::Q8_0, Format::Q5_1, Format::IQ4_NL, Format::NVFP4] {
            let body = matmul_body(f).unwrap();
            let staged = staged_steps(body);
            let at = staged.find("fn finish(").unwrap();
            let (steps, finish) = staged.split_at(at);
            for name in ["aq", "ad", "as1"] {
                assert_eq!(rename_calls(steps, name, "X"), steps, "{f}: {name} left in step");
            }
            assert!(steps.contains("saq(") && steps.contains("sad("), "{f}");
            assert_eq!(steps.contains("sas1("), f == Format::Q5_1, "{f}");
            assert_eq!(finish, &body[body.find("fn finish(").unwrap()..], "{f}: finish changed");
            let o = MmSrc {
                nt: 4,
                subgroups: true,
                native_fma: true,
                unroll: 2,
                rows: 32,
                lut2: true,
                iq_pairs: false,
                q8k_split: false,
                q8k_both: false,
                pair_rows: 1,
                pair_generic: false,
                stage: 16,
                ktile: false,
            };
            let src = matmul_source(f, &o).unwrap();
            assert!(src.contains("stage_acts(c0 * ABPS, lid);") && src.contains("c0 += 16u"), "{f}");
            let n = 4 * 16 * pair_act_blocks_per_step(f);
            assert!(src.contains(&format!("const SQN: u32 = {}u;", 2 * n)), "{f}");
            assert_eq!(stage_bytes(f, 4, 16), n * 36 + if f == Format::Q5_1 { 4 * n } else { 4 });
            assert_eq!(stages_s(f), steps.contains("sas1("), "{f}");
        }
        assert_eq!(rename_calls("load(t, x) + ad(t, 1) + bad(2)", "ad", "sad"), "load(t, x) + sad(t, 1) + bad(2)");
    }

    /// `flatten_loops` unrolls the constant loops it should and keeps the others.
    #[test]
    fn flatten_loops_unrolls_constant_loops() {
        let src = "fn f() {\n    for (var t = 0u; t < NT; t++) {\n        a[t] += tt * t; // {\n        for (var j = 0u; j < 2u; j++) {\n            let x = j + t;\n        }\n    }\n    for (var b = 0u; b < P.nb; b++) {\n        g(b);\n    }\n    for (var k = 0u; k < 9u; k++) {\n        h(k);\n    }\n}";
        let out = flatten_loops(src, 2, 8);
        let squash: String = out.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(
            squash,
            "fn f() { { a[0u] += tt * 0u; { let x = 0u + 0u; } { let x = 1u + 0u; } } \
             { a[1u] += tt * 1u; { let x = 0u + 1u; } { let x = 1u + 1u; } } \
             for (var b = 0u; b < P.nb; b++) { g(b); } for (var k = 0u; k < 9u; k++) { h(k); } }"
        );
        // A loop with `break` stays a loop.
        let kept = "for (var t = 0u; t < 4u; t++) { if (t == 1u) { break; } }";
        assert_eq!(flatten_loops(kept, 1, 8), kept);
    }

    /// `neg_bytes` relies on no grid byte being 0 (then `(g ^ 0xff) + 1` carries into the
    /// next byte).
    #[test]
    fn no_grid_byte_is_zero() {
        let t = tables_words();
        for (i, w) in t[..OFF_KVNL].iter().enumerate() {
            assert!(w.to_le_bytes().iter().all(|&b| b != 0 && b < 128), "table word {i}: {w:#010x}");
        }
    }
}
