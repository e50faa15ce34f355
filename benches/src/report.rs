//! Text table, CSV, Markdown and machine.txt renderings of a [`Report`].

use std::fmt::Write;

use crate::{Cell, Op, Record, Report, Shape, Summary};

/// 3-4 significant digits.
fn num(v: f64) -> String {
    if !v.is_finite() {
        "inf".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `median ±spread%` (half the interquartile range, relative to the median).
fn gbps_cell(r: &Record, c: &Cell) -> String {
    match (r.gbps(c), c) {
        (Some(s), _) => format!("{} ±{:.0}%", num(s.median), s.iqr_pct()),
        (None, Cell::Absent(a)) if a.starts_with("n/a") => "n/a".into(),
        (None, Cell::Absent(a)) => a.split(" (").next().unwrap_or(a).to_string(),
        (None, Cell::Measured(_)) => String::new(),
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_default()
}

fn ratio(v: Option<f64>) -> String {
    opt(v, |x| format!("{x:.2}x"))
}

fn bits(r: &Record) -> &'static str {
    match r.matches_ggml {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "",
    }
}

/// The sections of a report: (shape, op) in run order, with their records.
fn sections(rep: &Report) -> Vec<((Shape, Op), Vec<&Record>)> {
    let mut v: Vec<((Shape, Op), Vec<&Record>)> = Vec::new();
    for r in &rep.records {
        match v.iter_mut().find(|(k, _)| *k == (r.shape, r.op)) {
            Some((_, rs)) => rs.push(r),
            None => v.push(((r.shape, r.op), vec![r])),
        }
    }
    v.sort_by_key(|((s, o), _)| (*s, Op::ALL.iter().position(|x| x == o)));
    v
}

fn section_title(rep: &Report, shape: Shape, op: Op, rs: &[&Record]) -> String {
    let dims = match shape {
        Shape::OutOfCache => {
            format!("{} MiB of weights per format, {} columns", rep.config.weights_mib, rep.config.cols)
        }
        Shape::ExpertGateUp => "one MoE expert's gate/up, 640 rows x 2560 columns (in cache)".into(),
        Shape::ExpertDown => "one MoE expert's down, 2560 rows x 640 columns (in cache)".into(),
    };
    let what = match op {
        Op::Matmul => "matmul, GB/s of weights",
        Op::Dequant => "dequant, GB/s of weights, 16 rows per call",
        Op::Quantize => "activation quantize, GB/s of f32 input",
    };
    let nt = match (op, rs.first().and_then(|r| r.tokens)) {
        (Op::Quantize, Some(t)) => format!(", {t} tokens"),
        _ => String::new(),
    };
    format!("{what}: {} ({dims}{nt})", shape.name())
}

const HEAD: [&str; 11] = [
    "format",
    "backend",
    "NT",
    "threads",
    "ours GB/s",
    "ggml GB/s",
    "candle GB/s",
    "ours/ggml",
    "% bw",
    "= ggml",
    "note",
];

fn row_cells(r: &Record) -> Vec<String> {
    vec![
        r.format.name().to_string(),
        r.backend.clone(),
        r.tokens.map_or_else(|| "-".into(), |t| t.to_string()),
        r.threads.to_string(),
        gbps_cell(r, &r.ours),
        gbps_cell(r, &r.ggml),
        gbps_cell(r, &r.candle),
        ratio(r.ratio()),
        opt(r.pct_bandwidth(), |p| format!("{p:.0}%")),
        bits(r).to_string(),
        r.note.clone(),
    ]
}

/// "`label`: M GB/s`what` (min, max, n samples over B MiB)" of one bandwidth summary.
fn bw_line(label: String, what: &str, s: Option<Summary>, bytes: usize) -> Option<String> {
    let s = s?;
    Some(format!(
        "{label}: {} GB/s{what} (min {}, max {}, {} samples over {} MiB)",
        num(s.median),
        num(s.min),
        num(s.max),
        s.n,
        bytes >> 20
    ))
}

/// The GPU backends' copy bandwidth, one line each.
fn copy_lines(rep: &Report) -> Vec<String> {
    rep.copies.iter().filter_map(|c| bw_line(c.backend.clone(), " read + written", c.summary(), c.bytes)).collect()
}

fn bw_lines(rep: &Report) -> Vec<String> {
    rep.bandwidth.iter().filter_map(|b| bw_line(format!("{} thread(s)", b.threads), "", b.summary(), b.bytes)).collect()
}

/// The plain-text report: machine line, bandwidth, then one aligned table per section.
pub fn table(rep: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "qkern bench: {}", rep.machine.short());
    let _ = writeln!(o, "load average: {} at start, {} at end", rep.machine.load_start, rep.machine.load_end);
    for n in &rep.notes {
        let _ = writeln!(o, "note: {n}");
    }
    for l in bw_lines(rep) {
        let _ = writeln!(o, "streaming read bandwidth, {l}");
    }
    for l in copy_lines(rep) {
        let _ = writeln!(o, "device copy bandwidth, {l}");
    }
    for ((shape, op), rs) in sections(rep) {
        let _ = writeln!(o, "\n== {} ==", section_title(rep, shape, op, &rs));
        let rows: Vec<Vec<String>> = rs.iter().map(|r| row_cells(r)).collect();
        let mut w: Vec<usize> = HEAD.iter().map(|h| h.len()).collect();
        for row in &rows {
            for (i, c) in row.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                let pad = w[i] - c.chars().count();
                if (2..=8).contains(&i) {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    s.push_str(&" ".repeat(pad));
                }
                s.push_str("  ");
            }
            s.trim_end().to_string()
        };
        let head: Vec<String> = HEAD.iter().map(|h| h.to_string()).collect();
        let _ = writeln!(o, "{}", line(&head));
        for row in &rows {
            let _ = writeln!(o, "{}", line(row));
        }
    }
    let _ = writeln!(
        o,
        "\nGB/s: median ±half the interquartile range (relative); % bw: ours / streaming read bandwidth at the same \
         thread count (CPU), or / the device's copy bandwidth, read + written (CUDA); = ggml: ours' output equals \
         ggml's bit for bit. Took {:.0} s.",
        rep.elapsed_s
    );
    o
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

const CSV_HEAD: &str = "format,backend,op,tokens,threads,rows,cols,ours_gbps,ggml_gbps,ratio,bandwidth_gbps,pct_bandwidth,\
shape,candle_gbps,candle_ratio,ours_tok_rows_per_s,ggml_tok_rows_per_s,candle_tok_rows_per_s,\
ours_p25_gbps,ours_p75_gbps,ours_min_gbps,ours_max_gbps,ours_samples,\
ggml_p25_gbps,ggml_p75_gbps,ggml_min_gbps,ggml_max_gbps,ggml_samples,\
candle_p25_gbps,candle_p75_gbps,candle_min_gbps,candle_max_gbps,candle_samples,\
bytes,ours_matches_ggml,ggml_status,candle_status,note,machine,started";

fn f(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.4}")).unwrap_or_default()
}

fn spread(s: Option<Summary>) -> [String; 5] {
    match s {
        Some(s) => [f(Some(s.p25)), f(Some(s.p75)), f(Some(s.min)), f(Some(s.max)), s.n.to_string()],
        None => Default::default(),
    }
}

fn status(c: &Cell) -> String {
    match c {
        Cell::Measured(_) => "measured".into(),
        Cell::Absent(a) => a.clone(),
    }
}

/// CSV: one row per measurement and backend; empty cells where not measured.
pub fn csv(rep: &Report) -> String {
    let mut o = String::from(CSV_HEAD);
    o.push('\n');
    let machine = rep.machine.short();
    for r in &rep.records {
        let (go, gg, gc) = (r.gbps(&r.ours), r.gbps(&r.ggml), r.gbps(&r.candle));
        let mut cells: Vec<String> = vec![
            r.format.name().into(),
            r.backend.clone(),
            r.op.name().into(),
            r.tokens.map(|t| t.to_string()).unwrap_or_default(),
            r.threads.to_string(),
            r.rows.to_string(),
            r.cols.to_string(),
            f(go.map(|s| s.median)),
            f(gg.map(|s| s.median)),
            f(r.ratio()),
            f(r.bandwidth_gbps),
            f(r.pct_bandwidth()),
            r.shape.name().into(),
            f(gc.map(|s| s.median)),
            f(r.candle_ratio()),
            f(r.tok_rows_per_s(&r.ours)),
            f(r.tok_rows_per_s(&r.ggml)),
            f(r.tok_rows_per_s(&r.candle)),
        ];
        cells.extend(spread(go));
        cells.extend(spread(gg));
        cells.extend(spread(gc));
        cells.push(r.bytes.to_string());
        cells.push(r.matches_ggml.map(|b| b.to_string()).unwrap_or_default());
        cells.push(status(&r.ggml));
        cells.push(status(&r.candle));
        cells.push(r.note.clone());
        cells.push(machine.clone());
        cells.push(rep.machine.started.clone());
        let line: Vec<String> = cells.iter().map(|c| csv_field(c)).collect();
        o.push_str(&line.join(","));
        o.push('\n');
    }
    o
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The Markdown report.
pub fn markdown(rep: &Report, chart: Option<&str>) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# qkern bench: {}\n", md_escape(&rep.machine.cpu_model));
    let _ = writeln!(o, "Measured {} in {:.0} s.\n", rep.machine.started, rep.elapsed_s);
    for n in &rep.notes {
        let _ = writeln!(o, "> {}\n", md_escape(n));
    }
    let _ = writeln!(o, "## Machine\n\n| | |\n| --- | --- |");
    for (k, v) in rep.machine.lines() {
        let _ = writeln!(o, "| {k} | {} |", md_escape(&v));
    }
    let _ = writeln!(o, "\n## Configuration\n\n| | |\n| --- | --- |");
    for (k, v) in rep.config.lines() {
        let _ = writeln!(o, "| {k} | {} |", md_escape(&v));
    }
    let _ = writeln!(
        o,
        "\n## Streaming-read bandwidth\n\n| threads | median GB/s | min | max | samples |\n| ---: | ---: | ---: | ---: | ---: |"
    );
    for b in &rep.bandwidth {
        if let Some(s) = b.summary() {
            let _ = writeln!(o, "| {} | {} | {} | {} | {} |", b.threads, num(s.median), num(s.min), num(s.max), s.n);
        }
    }
    if !rep.copies.is_empty() {
        let _ = writeln!(
            o,
            "\n## Device copy bandwidth (read + written)\n\n| backend | median GB/s | min | max | samples | MiB |\n\
             | --- | ---: | ---: | ---: | ---: | ---: |"
        );
        for c in &rep.copies {
            if let Some(s) = c.summary() {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {} | {} |",
                    md_escape(&c.backend),
                    num(s.median),
                    num(s.min),
                    num(s.max),
                    s.n,
                    c.bytes >> 20
                );
            }
        }
    }
    if let Some(c) = chart {
        let _ = writeln!(o, "\n## Chart\n\n![GB/s per format for each token count]({c})");
    }
    for ((shape, op), rs) in sections(rep) {
        let _ = writeln!(o, "\n## {}\n", md_escape(&section_title(rep, shape, op, &rs)));
        let _ = writeln!(o, "| {} |", HEAD.join(" | "));
        let _ = writeln!(o, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: | --- |");
        for r in rs {
            let cells: Vec<String> = row_cells(r).iter().map(|c| md_escape(c)).collect();
            let _ = writeln!(o, "| {} |", cells.join(" | "));
        }
    }
    let _ = writeln!(o, "\n## How this was measured\n");
    for l in METHOD {
        let _ = writeln!(o, "- {l}");
    }
    o
}

/// The method notes repeated in every Markdown report.
const METHOD: [&str; 8] = [
    "Contenders of one measurement run interleaved (round-robin: ours, ggml, candle, ours, ...) over the same \
     weight bytes (one 64-byte-aligned buffer; qkern borrows it, ggml and candle read it in place).",
    "Each contender gets one untimed warm-up, then timed samples (batches of calls of at least a 25th of the \
     budget, 0.5-20 ms, for fast operations) until it has the minimum number of samples and the seconds asked for. \
     GB/s: median, ± half the interquartile range relative to the median; the CSV has quartiles, extremes and counts.",
    "ours: `qkern::Device::matmul` on resident weights; activations quantized once, outside the timed loop. GPU rows named \"(device out)\": `Device::matmul_into` a device buffer, then `Device::synchronize` (no copy back).",
    "ggml: ggml 0.26.0's `vec_dot` with `nrc = 1`, called per row and token exactly as `ggml_compute_forward_mul_mat` \
     calls it (its chunk plan and 16 x 16 tiling, minus llamafile sgemm and the tiled kernels); activations are the \
     same pre-quantized bytes. With N threads, ggml's chunk plan runs on N workers of a rayon pool.",
    "candle: candle-core 0.11.1's CPU `k_quants::matmul` on the same bytes (q8_0, q5_1, q4_K, q5_K, q6_K only); it \
     quantizes the f32 activations inside every call. With N threads the rows are split in N parts, one call each, \
     candle's own pool sized 1.",
    "dequant: 16 rows per call into one reused f32 buffer (qkern `Device::dequantize`, ggml `to_float`, candle \
     `to_float`); quantize: all tokens, ggml and candle per row (qkern `Device::quantize`, ggml `from_float`, candle \
     `from_float`). Both run on one thread.",
    "Streaming-read bandwidth: a wrapping sum of a buffer of the weights' size (at least 64 MiB), split in contiguous \
     parts over the threads, 5 samples at the start and 5 at the end of the run; % bw compares ours with it at the same \
     thread count (in-cache shapes can exceed 100 %). CUDA rows compare with the device's copy bandwidth instead: a \
     device-to-device copy of the same buffer size, at most 1 GiB (bytes read plus bytes written), 3 samples at the start and 3 at \
     the end.",
    "= ggml: ours' matmul output of the timed runs equals ggml's bit for bit (NaN = NaN). Weights are random blocks \
     with finite scales; activations standard normal.",
];

/// machine.txt: machine, configuration and bandwidth.
pub fn machine_txt(rep: &Report) -> String {
    let mut o = String::new();
    for (k, v) in rep.machine.lines() {
        let _ = writeln!(o, "{k}: {v}");
    }
    for (k, v) in rep.config.lines() {
        let _ = writeln!(o, "config {k}: {v}");
    }
    for l in bw_lines(rep) {
        let _ = writeln!(o, "streaming read bandwidth, {l}");
    }
    for l in copy_lines(rep) {
        let _ = writeln!(o, "device copy bandwidth, {l}");
    }
    for n in &rep.notes {
        let _ = writeln!(o, "note: {n}");
    }
    let _ = writeln!(o, "elapsed: {:.0} s", rep.elapsed_s);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_fields() {
        assert_eq!(num(123.4), "123");
        assert_eq!(num(12.34), "12.3");
        assert_eq!(num(1.234), "1.23");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("a\"b"), "\"a\"\"b\"");
        assert!(CSV_HEAD.starts_with(
            "format,backend,op,tokens,threads,rows,cols,ours_gbps,ggml_gbps,ratio,bandwidth_gbps,pct_bandwidth,"
        ));
    }
}
