//! PNG plots for reports (plotters): a run's time series — per-path throughput, buffer level
//! and PSNR sharing one time axis — and a Pantheon-style throughput-versus-delay scatter of
//! the profiles of a comparison.
//!
//! Text needs a TrueType font; the system's DejaVu Sans (Debian `fonts-dejavu-core`) is
//! used. Without it [`font_available`] is false and callers skip the PNGs with a note.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context as _, anyhow};
use braid_sim::TimeSeries;
use plotters::prelude::*;

use super::stream::ClientTrace;

const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers the plot font once; false when none is installed.
pub fn font_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        for path in FONT_CANDIDATES {
            if let Ok(bytes) = std::fs::read(path) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
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

/// One run's time series: throughput per path on top, then buffer level and PSNR when a
/// client trace exists.
pub fn plot_run(
    out: &Path,
    title: &str,
    series: &TimeSeries,
    trace: Option<&ClientTrace>,
) -> anyhow::Result<()> {
    if !font_available() {
        return Err(anyhow!("no TrueType font found for plot labels (install fonts-dejavu-core)"));
    }
    let panels = if trace.is_some() { 3 } else { 1 };
    let root = BitMapBackend::new(out, (1000, 300 * panels as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((panels, 1));
    let t_max = series.rows.last().map_or(1.0, |r| r.t_s).max(1.0);

    // Throughput per path.
    let y_max = series
        .rows
        .iter()
        .flat_map(|r| r.throughput_bps.iter().copied().chain([r.goodput_bps]))
        .fold(1.0, f64::max)
        / 1e6
        * 1.1;
    let mut chart = ChartBuilder::on(&areas[0])
        .caption(format!("{title}: throughput per path"), ("sans-serif", 18))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)
        .map_err(err)?;
    chart.configure_mesh().x_desc("time (s)").y_desc("Mbit/s").draw().map_err(err)?;
    for (i, name) in series.paths.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                series
                    .rows
                    .iter()
                    .map(|r| (r.t_s, r.throughput_bps.get(i).copied().unwrap_or(0.0) / 1e6)),
                color.stroke_width(2),
            ))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;

    if let Some(trace) = trace {
        let b_max = trace.samples.iter().map(|s| s.buffer_s).fold(1.0, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(&areas[1])
            .caption("buffer level", ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..t_max, 0.0..b_max)
            .map_err(err)?;
        chart.configure_mesh().x_desc("time (s)").y_desc("media s").draw().map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                trace.samples.iter().map(|s| (s.t_s, s.buffer_s)),
                COLORS[2].stroke_width(2),
            ))
            .map_err(err)?;
        let mut chart = ChartBuilder::on(&areas[2])
            .caption("PSNR of the displayed frames (100 = identical)", ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..t_max, 0.0..105.0)
            .map_err(err)?;
        chart.configure_mesh().x_desc("time (s)").y_desc("dB").draw().map_err(err)?;
        chart
            .draw_series(LineSeries::new(trace.psnr.iter().copied(), COLORS[3].stroke_width(1)))
            .map_err(err)?;
    }
    root.present().with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}

/// Pantheon-style summary: mean throughput against 95th-percentile delay, one point per
/// profile (better is up and to the left).
pub fn plot_scatter(out: &Path, title: &str, points: &[(String, f64, f64)]) -> anyhow::Result<()> {
    if !font_available() {
        return Err(anyhow!("no TrueType font found for plot labels (install fonts-dejavu-core)"));
    }
    let root = BitMapBackend::new(out, (800, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let x_max = points.iter().map(|p| p.2).fold(1.0, f64::max) * 1.2;
    let y_max = points.iter().map(|p| p.1).fold(0.1, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}: throughput vs 95th-percentile delay"), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("95th-percentile delay (ms)")
        .y_desc("throughput (Mbit/s)")
        .draw()
        .map_err(err)?;
    for (i, (name, thr, p95)) in points.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(std::iter::once(Circle::new((*p95, *thr), 6, color.filled())))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                name.clone(),
                (*p95, *thr),
                ("sans-serif", 15).into_font(),
            )))
            .map_err(err)?;
    }
    root.present().with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}
