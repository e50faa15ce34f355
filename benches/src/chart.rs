//! The SVG chart: matmul GB/s per format, one panel per token count (rows) and thread count
//! (columns); in each panel ours (per backend) beside ggml's loop and candle, with the
//! streaming-read bandwidth at that thread count as a grey line. Drawn with `plotters`' SVG
//! backend (no fonts needed: text is left to the SVG viewer).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::{Cell, Error, Op, Record, Report, Shape};

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];
const GGML: RGBColor = RGBColor(255, 127, 14);
const CANDLE: RGBColor = RGBColor(44, 160, 44);

fn chart_err<E: std::fmt::Display>(e: E) -> Error {
    Error::Chart(e.to_string())
}

struct Series {
    label: String,
    color: RGBColor,
    backend: Option<String>,
    pick: fn(&Record) -> &Cell,
}

pub fn svg(rep: &Report) -> Result<String, Error> {
    let measured = |s: Shape| rep.records.iter().any(|r| r.op == Op::Matmul && r.shape == s && r.bytes > 0);
    let shape = [Shape::OutOfCache, Shape::ExpertGateUp, Shape::ExpertDown].into_iter().find(|&s| measured(s));
    let recs: Vec<&Record> = match shape {
        Some(s) => rep.records.iter().filter(|r| r.op == Op::Matmul && r.shape == s).collect(),
        None => Vec::new(),
    };
    let formats: Vec<qkern::Format> =
        rep.config.formats.iter().copied().filter(|f| recs.iter().any(|r| r.format == *f)).collect();
    let mut backends: Vec<String> = Vec::new();
    for r in &recs {
        if !backends.contains(&r.backend) {
            backends.push(r.backend.clone());
        }
    }
    let mut series: Vec<Series> = backends
        .iter()
        .enumerate()
        .map(|(i, b)| Series {
            label: format!("qkern {b}"),
            color: PALETTE[i % PALETTE.len()],
            backend: Some(b.clone()),
            pick: |r| &r.ours,
        })
        .collect();
    if recs.iter().any(|r| r.ggml.seconds().is_some()) {
        series.push(Series { label: "ggml vec_dot loop".into(), color: GGML, backend: None, pick: |r| &r.ggml });
    }
    if recs.iter().any(|r| r.candle.seconds().is_some()) {
        series.push(Series { label: "candle".into(), color: CANDLE, backend: None, pick: |r| &r.candle });
    }
    let tokens = &rep.config.tokens;
    let threads = &rep.config.threads;
    let find = |f: qkern::Format, nt: usize, t: usize, backend: Option<&str>| {
        recs.iter()
            .copied()
            .find(|r| r.format == f && r.tokens == Some(nt) && r.threads == t && backend.is_none_or(|b| r.backend == b))
    };
    let value = |s: &Series, f, nt, t| -> Option<f64> {
        let r = find(f, nt, t, s.backend.as_deref())?;
        r.gbps((s.pick)(r)).map(|g| g.median)
    };
    let bw = |t: usize| rep.bandwidth.iter().find(|b| b.threads == t).and_then(|b| b.gbps());
    let mut ymax: f64 = 1.0;
    for &nt in tokens {
        for &t in threads {
            for s in &series {
                for &f in &formats {
                    ymax = ymax.max(value(s, f, nt, t).unwrap_or(0.0));
                }
            }
            if shape == Some(Shape::OutOfCache) {
                ymax = ymax.max(bw(t).unwrap_or(0.0));
            }
        }
    }
    let ymax = ymax * 1.12;

    let (pcols, prows) = (threads.len().max(1), tokens.len().max(1));
    let pw = (formats.len() as u32 * 64).max(520);
    let ph = 250u32;
    let (w, h) = (pw * pcols as u32, ph * prows as u32 + 56);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let (head, body) = root.split_vertically(56);
        let dims = match shape {
            Some(Shape::OutOfCache) => {
                format!("out of cache, {} MiB of weights, {} columns", rep.config.weights_mib, rep.config.cols)
            }
            Some(s) => s.name().to_string(),
            None => "no matmul measured".into(),
        };
        head.draw(&Text::new(
            format!("qkern bench: matmul GB/s of weights per format ({dims})"),
            (10, 8),
            ("sans-serif", 18).into_font().color(&BLACK),
        ))
        .map_err(chart_err)?;
        head.draw(&Text::new(
            format!("{}; {}", rep.machine.short(), rep.machine.started),
            (10, 32),
            ("sans-serif", 12).into_font().color(&BLACK),
        ))
        .map_err(chart_err)?;
        let panels = body.split_evenly((prows, pcols));
        let nf = formats.len().max(1) as f64;
        let bar = 0.8 / series.len().max(1) as f64;
        for (i, area) in panels.iter().enumerate() {
            let (nt, t) = (tokens[i / pcols], threads[i % pcols]);
            let mut chart = ChartBuilder::on(area)
                .caption(format!("NT = {nt}, {t} thread{}", if t == 1 { "" } else { "s" }), ("sans-serif", 14))
                .margin(6)
                .margin_bottom(20)
                .x_label_area_size(4)
                .y_label_area_size(44)
                .build_cartesian_2d(0f64..nf, 0f64..ymax)
                .map_err(chart_err)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(0)
                .y_labels(6)
                .y_desc("GB/s")
                .label_style(("sans-serif", 11))
                .draw()
                .map_err(chart_err)?;
            for (j, s) in series.iter().enumerate() {
                let rects: Vec<Rectangle<(f64, f64)>> = formats
                    .iter()
                    .enumerate()
                    .filter_map(|(k, &f)| {
                        let v = value(s, f, nt, t)?;
                        let x0 = k as f64 + 0.1 + j as f64 * bar;
                        Some(Rectangle::new([(x0, 0.0), (x0 + bar * 0.92, v)], s.color.filled()))
                    })
                    .collect();
                let color = s.color;
                let drawn = chart.draw_series(rects).map_err(chart_err)?;
                if i == 0 {
                    drawn
                        .label(s.label.clone())
                        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
                }
            }
            if let (Some(Shape::OutOfCache), Some(b)) = (shape, bw(t)) {
                let grey = RGBColor(90, 90, 90);
                let line =
                    chart.draw_series(LineSeries::new([(0.0, b), (nf, b)], grey.stroke_width(1))).map_err(chart_err)?;
                if i == 0 {
                    line.label(format!("read bandwidth ({t} thr)"))
                        .legend(move |(x, y)| PathElement::new([(x, y), (x + 12, y)], grey));
                }
                let p = chart.backend_coord(&(0.0, b));
                root.draw(&Text::new(
                    format!("read {b:.1} GB/s"),
                    (p.0 + 4, p.1 - 3),
                    ("sans-serif", 10).into_font().color(&grey).pos(Pos::new(HPos::Left, VPos::Bottom)),
                ))
                .map_err(chart_err)?;
            }
            for (k, &f) in formats.iter().enumerate() {
                let p = chart.backend_coord(&(k as f64 + 0.5, 0.0));
                let style = ("sans-serif", 11).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
                root.draw(&Text::new(f.name().to_string(), (p.0, p.1 + 4), style.clone())).map_err(chart_err)?;
                if find(f, nt, t, None).is_some_and(|r| r.bytes == 0) {
                    let na = ("sans-serif", 10).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Bottom));
                    root.draw(&Text::new("n/a", (p.0, p.1 - 2), na)).map_err(chart_err)?;
                }
            }
            if i == 0 {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperRight)
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK.mix(0.4))
                    .label_font(("sans-serif", 11))
                    .draw()
                    .map_err(chart_err)?;
            }
        }
        root.present().map_err(chart_err)?;
    }
    Ok(out)
}
