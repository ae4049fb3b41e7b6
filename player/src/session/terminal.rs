//! A session in the terminal: a progress line while it plays, a summary at the end.

use std::future::Future;
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use anyhow::Context as _;

use super::live::PaneUpdate;
use super::realtime::PlayOutcome;
use super::report::{self, ReportLabel};

/// Runs the session `run` starts with a progress line (for `total`, when known) on its
/// updates until it ends.
pub async fn with_progress<F, Fut>(total: Option<Duration>, run: F) -> anyhow::Result<PlayOutcome>
where
    F: FnOnce(Sender<PaneUpdate>) -> Fut,
    Fut: Future<Output = anyhow::Result<PlayOutcome>>,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let progress = terminal_progress(rx, total);
    let result = run(tx).await;
    let _ = progress.join();
    result
}

/// Where a finished session's results go.
pub struct Results<'a> {
    /// The displayed pictures, as YUV4MPEG2.
    pub save_frames: Option<&'a Path>,
    /// The session report.
    pub report: Option<&'a Path>,
    /// What the report is labelled with.
    pub label: ReportLabel,
    /// The profile played.
    pub profile: &'a str,
}

/// Prints the summary of a session and writes its results; `None`: the window was closed
/// before it ended.
pub fn finish(outcome: Option<&PlayOutcome>, results: &Results<'_>) -> anyhow::Result<()> {
    let Some(o) = outcome else {
        println!("window closed before the session ended");
        return Ok(());
    };
    print_summary(o);
    if let Some(path) = results.save_frames {
        let n = o
            .client
            .write_displayed(path)
            .with_context(|| format!("writing the displayed frames to {}", path.display()))?;
        println!("  displayed frames       {n} written to {}", path.display());
    }
    if let Some(path) = results.report {
        report::write(path, &report::of_outcome(&results.label, results.profile, o))?;
    }
    match &o.stopped {
        Some(why) => Err(anyhow::anyhow!("{why}")),
        None => Ok(()),
    }
}

/// Shows the session's live statistics as a progress line until it ends.
pub fn terminal_progress(
    rx: Receiver<PaneUpdate>,
    total: Option<Duration>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let bar = match total {
            Some(t) => indicatif::ProgressBar::new(t.as_millis() as u64),
            None => indicatif::ProgressBar::new_spinner(),
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:25} {elapsed} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        while let Ok(u) = rx.recv() {
            match u {
                PaneUpdate::Stats(s) => {
                    bar.set_position((s.t_s * 1000.0) as u64);
                    let quality = match (s.psnr_now_db, s.eq13_db) {
                        (Some(p), _) => format!(
                            "PSNR {}",
                            if p >= 100.0 { "∞".into() } else { format!("{p:.1}") }
                        ),
                        (None, Some(e)) => format!("PSNR est. {e:.1}"),
                        _ => String::new(),
                    };
                    let rates: Vec<String> =
                        s.paths.iter().map(|p| format!("{} {:.1}", p.name, p.bps / 1e6)).collect();
                    bar.set_message(format!(
                        "frames {} lost {}  stalls {}  buffer {:.1} s  {quality}  Mbit/s: {}",
                        s.frames_shown,
                        s.frames_lost,
                        s.stalls,
                        s.buffer_s,
                        rates.join(" ")
                    ));
                }
                PaneUpdate::Caption(c) => say(&bar, format!("  {c}")),
                // The command ends with the error as its one `error:` line.
                PaneUpdate::Error(_)
                | PaneUpdate::Ended
                | PaneUpdate::Frame(_)
                | PaneUpdate::NetworkReset
                | PaneUpdate::PathChanged(_) => {}
            }
        }
        bar.finish_and_clear();
    })
}

/// A line above the progress bar, or plainly when there is no terminal to draw it on.
fn say(bar: &indicatif::ProgressBar, line: String) {
    if bar.is_hidden() {
        println!("{line}");
    } else {
        bar.println(line);
    }
}

/// The end-of-session summary.
pub fn print_summary(o: &PlayOutcome) {
    let s = &o.stream;
    println!("summary ({:.1} s):", o.elapsed.as_secs_f64());
    if let Some(at) = o.first_frame_at {
        println!(
            "  launch to first frame  {:.0} ms",
            at.saturating_duration_since(crate::launched()).as_secs_f64() * 1000.0
        );
    }
    if let Some(t) = o.first_frame {
        println!("  first packet to frame  {:.0} ms", t.as_secs_f64() * 1000.0);
    }
    println!("  start-up delay         {:.2} s", s.startup_delay_s);
    println!("  stalls                 {} ({:.2} s)", s.stalls, s.stall_time_s);
    println!("  frames                 {} due, {} lost", s.frames_total, s.frames_lost);
    if s.mos > 0 {
        println!(
            "  PSNR                   {:.2} dB (sd {:.2}), MOS {}",
            s.psnr_avg_db, s.psnr_sd_db, s.mos
        );
    }
    println!("  PSNR estimate (eq. 13) {:.1} dB", s.psnr_eq13_db);
    println!("  read rate              {:.0} kbit/s", s.read_rate_bps / 1000.0);
    if let Some(st) = &o.stats {
        for (i, p) in st.paths.iter().enumerate() {
            let name = o.paths.get(i).map_or_else(|| p.id.to_string(), |k| k.name.clone());
            println!(
                "  path {:<6} {:<5} {:>9.0} kbit/s  rtt {:>6.1} ms  lost {}",
                name,
                p.role.to_string(),
                p.data_bytes_received as f64 * 8.0 / o.elapsed.as_secs_f64().max(1e-9) / 1000.0,
                p.srtt.as_secs_f64() * 1000.0,
                p.packets_lost
            );
        }
    }
    if let Some(e) = o.energy.as_ref().filter(|e| e.radios.iter().any(Option::is_some)) {
        let per: Vec<String> =
            e.radios.iter().flatten().map(|r| format!("{} {:.1} J", r.role, r.energy_j)).collect();
        println!("  radio energy           {:.1} J ({})", e.total_j(), per.join(", "));
        let ratio =
            if e.shadow_all_paths_j > 0.0 { e.total_j() / e.shadow_all_paths_j } else { 0.0 };
        if let Some(base) = o.baseline_energy_j.filter(|j| *j > 0.0) {
            println!(
                "  mptcp beside, measured {base:.1} J on its own copy of the network (spent {:.2}×)",
                e.total_j() / base
            );
        }
        println!(
            "  all radios kept up     {:.1} J on the same traffic, a model (spent {:.2}×)",
            e.shadow_all_paths_j, ratio
        );
    }
    if let Some(e) = o.energy.as_ref().filter(|e| e.mode.is_some()) {
        let mut timeline: Vec<String> = e
            .timeline
            .iter()
            .take(TIMELINE_SHOWN)
            .map(|(t, m)| format!("{m:?} at {:.1} s", t.as_secs_f64()))
            .collect();
        if e.timeline.len() > TIMELINE_SHOWN {
            timeline.push(format!("… ({} switches in all)", e.switches()));
        }
        let failed = match e.failed_mode_switches {
            0 => String::new(),
            n => format!(", {n} switches not put in force"),
        };
        println!(
            "  path mode              {} ({:.1} s in Partial{failed})",
            timeline.join(" → "),
            e.time_in_partial.as_secs_f64()
        );
    }
    if let Some(l) = o.timer_lateness {
        println!(
            "  driver timers late     p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms ({} wake-ups)",
            l.p50.as_secs_f64() * 1e3,
            l.p99.as_secs_f64() * 1e3,
            l.max.as_secs_f64() * 1e3,
            l.wakes
        );
    }
}

/// Mode changes the summary lists before it only counts the rest.
const TIMELINE_SHOWN: usize = 12;
