//! `braid trace FILE.qlog [--png FILE]`: a per-path summary of a qlog trace (JSON-SEQ, as
//! `--qlog` writes it) and, with `--png`, a timeline of congestion window, RTT,
//! throughput, losses, FEC and the path mode.
//!
//! A file cut short (a run stopped with Ctrl-C) is read up to its last complete record;
//! the summary says where it stopped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use plotters::prelude::*;
use serde_json::Value;

/// Arguments of `braid trace`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The qlog file (JSON-SEQ).
    file: PathBuf,
    /// Write the timeline (PNG) here.
    #[arg(long, value_name = "FILE")]
    png: Option<PathBuf>,
}

/// What a trace holds about one path.
#[derive(Debug, Default)]
struct PathSummary {
    sent: u64,
    sent_bytes: u64,
    received: u64,
    received_bytes: u64,
    lost: u64,
    dropped: u64,
    coded: u64,
    srtt_ms: Vec<(f64, f64)>,
    cwnd: Vec<(f64, f64)>,
    /// (time s, bytes) of every packet sent or received (throughput by vantage).
    sent_at: Vec<(f64, u64)>,
    received_at: Vec<(f64, u64)>,
    lost_at: Vec<f64>,
    coded_at: Vec<f64>,
}

/// A parsed trace.
#[derive(Debug, Default)]
struct Trace {
    vantage: String,
    title: String,
    records: usize,
    /// Where reading stopped early: (byte offset, why).
    stopped: Option<(usize, String)>,
    end_s: f64,
    paths: BTreeMap<u64, PathSummary>,
    recovered: u64,
    /// (time s, mode) of every mode-switch decision.
    modes: Vec<(f64, String)>,
    /// (time s, event) of playout events.
    playout: Vec<(f64, String)>,
}

/// Reads the records of a JSON-SEQ qlog; stops at the first incomplete or unreadable one.
fn parse(bytes: &[u8]) -> anyhow::Result<Trace> {
    let mut t = Trace::default();
    let mut pos = 0;
    let mut first = true;
    while pos < bytes.len() {
        if bytes[pos] != 0x1e {
            t.stopped = Some((pos, "no record separator (0x1E)".into()));
            break;
        }
        let start = pos + 1;
        let next =
            bytes[start..].iter().position(|&b| b == 0x1e).map_or(bytes.len(), |i| start + i);
        let rec = &bytes[start..next];
        if rec.last() != Some(&b'\n') {
            t.stopped = Some((pos, "the last record is incomplete".into()));
            break;
        }
        let v: Value = match serde_json::from_slice(rec) {
            Ok(v) => v,
            Err(e) => {
                t.stopped = Some((pos, format!("record {} is not JSON: {e}", t.records + 1)));
                break;
            }
        };
        if first {
            if v.get("qlog_format").and_then(Value::as_str) != Some("JSON-SEQ") {
                bail!("not a JSON-SEQ qlog: its first record has no \"qlog_format\": \"JSON-SEQ\"");
            }
            t.vantage = v["trace"]["vantage_point"]["type"].as_str().unwrap_or("?").to_string();
            t.title = v["title"].as_str().unwrap_or("").to_string();
            first = false;
        } else {
            event(&mut t, &v);
        }
        t.records += 1;
        pos = next;
    }
    if first {
        bail!("empty trace: no complete header record");
    }
    Ok(t)
}

fn event(t: &mut Trace, v: &Value) {
    let time_s = v["time"].as_f64().unwrap_or(0.0) / 1000.0;
    t.end_s = t.end_s.max(time_s);
    let d = &v["data"];
    let path = d["path_id"].as_u64();
    let len = d["raw"]["length"].as_u64().unwrap_or(0);
    let name = v["name"].as_str().unwrap_or("");
    fn p(t: &mut Trace, path: Option<u64>) -> Option<&mut PathSummary> {
        path.map(|id| t.paths.entry(id).or_default())
    }
    match name {
        "transport:packet_sent" => {
            if let Some(p) = p(t, path) {
                p.sent += 1;
                p.sent_bytes += len;
                p.sent_at.push((time_s, len));
            }
        }
        "transport:packet_received" => {
            if let Some(p) = p(t, path) {
                p.received += 1;
                p.received_bytes += len;
                p.received_at.push((time_s, len));
            }
        }
        "recovery:packet_lost" => {
            if let Some(p) = p(t, path) {
                p.lost += 1;
                p.lost_at.push(time_s);
            }
        }
        "transport:packet_dropped" => {
            if let Some(p) = p(t, path) {
                p.dropped += 1;
            }
        }
        "recovery:metrics_updated" => {
            let (cwnd, srtt) = (d["congestion_window"].as_f64(), d["smoothed_rtt"].as_f64());
            if let Some(p) = p(t, path) {
                if let Some(c) = cwnd {
                    p.cwnd.push((time_s, c));
                }
                if let Some(s) = srtt {
                    p.srtt_ms.push((time_s, s));
                }
            }
        }
        "braid:fec_coded_sent" => {
            if let Some(p) = p(t, path) {
                p.coded += 1;
                p.coded_at.push(time_s);
            }
        }
        "braid:fec_recovered" => t.recovered += d["count"].as_u64().unwrap_or(0),
        "braid:mode_switch" => {
            let mode = d["mode"].as_str().unwrap_or("?").to_string();
            if t.modes.last().is_none_or(|(_, m)| *m != mode) {
                t.modes.push((time_s, mode));
            }
        }
        "braid:playout" => {
            t.playout.push((time_s, d["event"].as_str().unwrap_or("?").to_string()));
        }
        _ => {}
    }
}

fn mean(v: &[(f64, f64)]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().map(|x| x.1).sum::<f64>() / v.len() as f64)
}

/// The summary table.
fn table(t: &Trace) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{} ({} side), {} records, {:.3} s\n",
        if t.title.is_empty() { "trace" } else { &t.title },
        t.vantage,
        t.records,
        t.end_s
    ));
    s.push_str(&format!(
        "{:>4} {:>8} {:>11} {:>8} {:>11} {:>6} {:>6} {:>7} {:>9} {:>9} {:>9} {:>6}\n",
        "path",
        "sent",
        "sent_bytes",
        "recv",
        "recv_bytes",
        "lost",
        "loss%",
        "dropped",
        "srtt_ms",
        "cwnd_max",
        "goodput",
        "coded"
    ));
    let dur = t.end_s.max(1e-6);
    for (id, p) in &t.paths {
        let loss = if p.sent > 0 { 100.0 * p.lost as f64 / p.sent as f64 } else { 0.0 };
        let bytes = if t.vantage == "client" { p.received_bytes } else { p.sent_bytes };
        s.push_str(&format!(
            "{:>4} {:>8} {:>11} {:>8} {:>11} {:>6} {:>6.2} {:>7} {:>9} {:>9} {:>9} {:>6}\n",
            id,
            p.sent,
            p.sent_bytes,
            p.received,
            p.received_bytes,
            p.lost,
            loss,
            p.dropped,
            mean(&p.srtt_ms).map_or("-".into(), |m| format!("{m:.1}")),
            p.cwnd.iter().map(|c| c.1 as u64).max().map_or("-".into(), |c| c.to_string()),
            format!("{:.2}M", bytes as f64 * 8.0 / dur / 1e6),
            p.coded
        ));
    }
    s.push_str(
        "(goodput: bits/s over the trace, of what this side received (client) or sent (server))\n",
    );
    if t.recovered > 0 {
        s.push_str(&format!("FEC: {} source packets recovered\n", t.recovered));
    }
    if !t.modes.is_empty() {
        let changes: Vec<String> =
            t.modes.iter().map(|(at, m)| format!("{m} at {at:.1} s")).collect();
        s.push_str(&format!("mode: {}\n", changes.join(", ")));
    }
    let count = |e: &str| t.playout.iter().filter(|(_, x)| x == e).count();
    if !t.playout.is_empty() {
        let start = t.playout.iter().find(|(_, e)| e == "start").map(|(at, _)| *at);
        s.push_str(&format!(
            "playout: start {}, {} stalls, {} frames lost\n",
            start.map_or("never".into(), |s| format!("at {s:.2} s")),
            count("stall"),
            count("frame_lost")
        ));
    }
    if let Some((at, why)) = &t.stopped {
        s.push_str(&format!("stopped at byte {at} after {} complete records: {why}\n", t.records));
    }
    s
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e:?}")
}

/// Bytes per bin → Mbit/s series.
fn binned(events: &[(f64, u64)], bin: f64, end: f64) -> Vec<(f64, f64)> {
    let n = ((end / bin).ceil() as usize).max(1);
    let mut bins = vec![0u64; n];
    for &(t, b) in events {
        let i = ((t / bin) as usize).min(n - 1);
        bins[i] += b;
    }
    bins.iter()
        .enumerate()
        .map(|(i, &b)| ((i as f64 + 0.5) * bin, b as f64 * 8.0 / bin / 1e6))
        .collect()
}

/// The timeline: cwnd, RTT, throughput per path; losses and coded packets as marks; the
/// mode and playout events as a strip.
fn plot(t: &Trace, out: &Path) -> anyhow::Result<()> {
    if !crate::session::plot::font_available() {
        bail!("no TrueType font found for plot labels (install fonts-dejavu-core)");
    }
    let end = t.end_s.max(0.001);
    let root = BitMapBackend::new(out, (1100, 1200)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((4, 1));
    let ids: Vec<u64> = t.paths.keys().copied().collect();
    let color = |id: u64| {
        let i = ids.iter().position(|&x| x == id).unwrap_or(0);
        COLORS[i % COLORS.len()]
    };
    let title = if t.title.is_empty() { "trace".to_string() } else { t.title.clone() };

    // Panels 1–3: line series per path.
    type Series<'a> = Box<dyn Fn(&PathSummary) -> Vec<(f64, f64)> + 'a>;
    let panels: [(&str, &str, Series); 3] = [
        (
            "congestion window",
            "kB",
            Box::new(|p: &PathSummary| p.cwnd.iter().map(|&(x, c)| (x, c / 1000.0)).collect()),
        ),
        ("smoothed RTT", "ms", Box::new(|p: &PathSummary| p.srtt_ms.clone())),
        (
            if t.vantage == "client" { "throughput received" } else { "throughput sent" },
            "Mbit/s",
            Box::new(|p: &PathSummary| {
                let ev = if t.vantage == "client" { &p.received_at } else { &p.sent_at };
                binned(ev, (end / 200.0).max(0.1), end)
            }),
        ),
    ];
    for (k, (name, unit, f)) in panels.iter().enumerate() {
        let series: Vec<(u64, Vec<(f64, f64)>)> =
            t.paths.iter().map(|(id, p)| (*id, f(p))).collect();
        let y_max = series.iter().flat_map(|(_, s)| s.iter().map(|x| x.1)).fold(0.0, f64::max);
        let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
        let caption = if k == 0 { format!("{title}: {name}") } else { name.to_string() };
        let mut chart = ChartBuilder::on(&areas[k])
            .caption(caption, ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..end, 0.0..y_max)
            .map_err(err)?;
        chart.configure_mesh().x_desc("time (s)").y_desc(*unit).draw().map_err(err)?;
        for (id, s) in &series {
            let c = color(*id);
            chart
                .draw_series(LineSeries::new(s.iter().copied(), c.stroke_width(2)))
                .map_err(err)?
                .label(format!("path {id}"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
        }
        if k == 2 {
            // Losses (crosses) and coded packets (dots) along the bottom of the panel.
            for (id, p) in &t.paths {
                let c = color(*id);
                chart
                    .draw_series(
                        p.lost_at
                            .iter()
                            .map(|&x| Cross::new((x, y_max * 0.04), 4, RED.stroke_width(1))),
                    )
                    .map_err(err)?;
                chart
                    .draw_series(
                        p.coded_at.iter().map(|&x| Circle::new((x, y_max * 0.10), 2, c.filled())),
                    )
                    .map_err(err)?;
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }

    // Panel 4: mode and playout events.
    let mut chart = ChartBuilder::on(&areas[3])
        .caption(
            "losses ×, coded packets • (above); mode (1 = full, 0 = partial), stalls and lost frames",
            ("sans-serif", 16),
        )
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..end, -0.2..1.4)
        .map_err(err)?;
    chart.configure_mesh().x_desc("time (s)").y_desc("").draw().map_err(err)?;
    if !t.modes.is_empty() {
        let mut pts = Vec::new();
        for (i, (at, m)) in t.modes.iter().enumerate() {
            let y = if m == "full" { 1.0 } else { 0.0 };
            if i > 0 {
                pts.push((*at, pts.last().map_or(y, |p: &(f64, f64)| p.1)));
            }
            pts.push((*at, y));
        }
        if let Some(&(_, y)) = pts.last() {
            pts.push((end, y));
        }
        chart
            .draw_series(LineSeries::new(pts, COLORS[4].stroke_width(2)))
            .map_err(err)?
            .label("mode")
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], COLORS[4].stroke_width(2))
            });
    }
    fn marks<'a>(t: &'a Trace, e: &'a str) -> impl Iterator<Item = f64> + 'a {
        t.playout.iter().filter(move |(_, x)| x == e).map(|(at, _)| *at)
    }
    chart
        .draw_series(marks(t, "stall").map(|x| TriangleMarker::new((x, 1.25), 6, RED.filled())))
        .map_err(err)?
        .label("stall")
        .legend(|(x, y)| TriangleMarker::new((x + 10, y), 5, RED.filled()));
    chart
        .draw_series(marks(t, "frame_lost").map(|x| Cross::new((x, 1.1), 3, BLACK.stroke_width(1))))
        .map_err(err)?
        .label("frame lost")
        .legend(|(x, y)| Cross::new((x + 10, y), 3, BLACK.stroke_width(1)));
    chart
        .draw_series(marks(t, "start").map(|x| Circle::new((x, 1.25), 5, COLORS[2].filled())))
        .map_err(err)?
        .label("playout start")
        .legend(|(x, y)| Circle::new((x + 10, y), 4, COLORS[2].filled()));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let bytes =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let t = parse(&bytes).with_context(|| args.file.display().to_string())?;
    print!("{}", table(&t));
    if let Some(png) = &args.png {
        plot(&t, png)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(s: &str) -> Vec<u8> {
        let mut v = vec![0x1e];
        v.extend_from_slice(s.as_bytes());
        v.push(b'\n');
        v
    }

    #[test]
    fn a_trace_cut_short_is_read_up_to_its_last_complete_record() {
        let mut b = rec(
            r#"{"qlog_format":"JSON-SEQ","qlog_version":"0.3","trace":{"vantage_point":{"type":"server"}}}"#,
        );
        b.extend(rec(r#"{"time":1.0,"name":"transport:packet_sent","data":{"path_id":1,"raw":{"length":1200}}}"#));
        b.extend(rec(r#"{"time":2.0,"name":"recovery:packet_lost","data":{"path_id":1}}"#));
        let whole = b.len();
        b.extend_from_slice(b"\x1e{\"time\":3.0,\"name\":\"transport:pa");
        let t = parse(&b).expect("parses");
        assert_eq!(t.records, 3);
        assert_eq!(t.stopped.as_ref().map(|s| s.0), Some(whole));
        let p = &t.paths[&1];
        assert_eq!((p.sent, p.sent_bytes, p.lost), (1, 1200, 1));
        assert!(table(&t).contains(&format!("stopped at byte {whole}")));
    }

    #[test]
    fn a_file_without_a_qlog_header_is_refused() {
        assert!(parse(&rec(r#"{"hello":1}"#)).is_err());
        assert!(parse(b"").is_err());
    }
}
