//! A client's memory in a long stream, and hostile stream messages.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use braid_media::Codec;
use braid_media::framing::{StreamHeader, encode_header, encode_unit};
use braid_media::playout::PlayoutPolicy;
use braid_netem::scenario::Scenario;
use braid_sim::{self as sim, RunOptions, StreamReport, Workload, WorkloadStats};
use braid_transport::Instant;
use braid_transport::profile;
use braid_transport::proto::{Connection, Delivery};
use bytes::Bytes;

use super::stream::{ClientConfig, MediaClient, Retained, SimStream};
use super::*;

const CLIP: &str = "assets/clips/h263-qcif-15fps-64k.3gp";
/// A link well above the clip's rate.
const FAST: &str = r#"{ rate = "1mbit", delay_ms = 20 }"#;
/// A link near the clip's rate that loses packets.
const LOSSY: &str = r#"{ rate = "90kbit", delay_ms = 40, loss = 0.1 }"#;

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn header(frames: u32) -> StreamHeader {
    StreamHeader {
        codec: Codec::H263,
        width: 176,
        height: 144,
        fps: 15.0,
        frames,
        codec_config: Vec::new(),
        plan: (0..frames).map(|k| (i64::from(k) * 66_667, 100)).collect(),
    }
}

fn unit(index: usize) -> Bytes {
    let au = braid_media::AccessUnit {
        index,
        pts_us: index as i64 * 66_667,
        dts_us: index as i64 * 66_667,
        keyframe: false,
        data: vec![0; 100],
    };
    Bytes::from(encode_unit(&au, &[]))
}

#[test]
fn an_access_unit_index_of_0xffffffff_is_refused() {
    let mut c = MediaClient::new(ClientConfig::default(), Instant::ZERO);
    let t = Instant::from_micros(1000);
    c.on_delivery(t, Delivery::Message { id: 0, data: Bytes::from(encode_header(&header(10))) });
    c.on_delivery(t, Delivery::Message { id: 1, data: unit(0) });
    // Before the check this pushed 2^32 playout slots (~100 GB).
    c.on_delivery(t, Delivery::Message { id: 2, data: unit(0xFFFF_FFFF) });
    // A gap naming a frame far ahead is refused by the playout buffer.
    c.on_delivery(t, Delivery::Gap { id: 0xFFFF_FFFF });
    assert_eq!(c.bad_messages(), 1);
    let r = c.retained();
    assert_eq!(r.units, 1);
    assert!(r.playout_frames <= 10, "{r:?}");
    // A unit whose index does not match its message, or one before the header, is refused.
    let mut c = MediaClient::new(ClientConfig::default(), Instant::ZERO);
    c.on_delivery(t, Delivery::Message { id: 0, data: unit(0) });
    c.on_delivery(t, Delivery::Message { id: 1, data: Bytes::from(encode_header(&header(10))) });
    assert_eq!(c.bad_messages(), 2);
}

/// Records the client's retained state while a simulated stream runs.
struct Probe {
    inner: SimStream,
    samples: Rc<RefCell<Vec<(Instant, Retained)>>>,
    next: Instant,
}

impl Workload for Probe {
    fn on_server(&mut self, now: Instant, conn: &mut Connection) {
        self.inner.on_server(now, conn);
    }
    fn on_client(&mut self, now: Instant, conn: &mut Connection) {
        self.inner.on_client(now, conn);
        if now >= self.next
            && let Some(c) = self.inner.client()
        {
            self.samples.borrow_mut().push((now, c.retained()));
            self.next = now + Duration::from_secs(10);
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }
    fn is_done(&self) -> bool {
        self.inner.is_done()
    }
    fn stats(&self) -> WorkloadStats {
        self.inner.stats()
    }
    fn stream_report(&self) -> Option<StreamReport> {
        self.inner.stream_report()
    }
    fn on_stopped(&mut self, now: Instant) -> bool {
        self.inner.on_stopped(now)
    }
}

fn looped_scenario(seconds: u64, down: &str) -> Scenario {
    let text = format!(
        r#"
        name = "long-stream"
        duration_s = {seconds}
        [[path]]
        name = "wired"
        role = "wired"
        down = {down}
        up = {{ rate = "1mbit", delay_ms = 20 }}
        [workload]
        kind = "stream"
        clip = "{CLIP}"
        loop = true
        "#
    );
    Scenario::parse(&text, "long-stream.toml", &root()).expect("scenario")
}

/// Streams the looped clip for `seconds` with or without the client's history; returns
/// the report and the retained state sampled every 10 s.
fn long_stream(
    media: &MediaSetup,
    seconds: u64,
    keep_history: bool,
    profile: &str,
    down: &str,
) -> (StreamReport, Vec<(Instant, Retained)>) {
    let s = looped_scenario(seconds, down);
    let p = profile::lookup(profile).unwrap();
    let opts = RunOptions {
        recv_buffer_bytes: Some(transport_buffer_bytes(&media.clip)),
        ..RunOptions::default()
    };
    let stream = SimStream::new(
        Arc::clone(&media.clip),
        media.name.clone(),
        Arc::clone(&media.reference),
        p.media,
        Some(s.duration),
        ClientConfig {
            policy: PlayoutPolicy::adaptive(),
            buffer_s: 30.0,
            buffer_bytes: 8_000_000,
            keep_history,
        },
    )
    .ending_at(Instant::from_duration(s.duration));
    let samples = Rc::new(RefCell::new(Vec::new()));
    let probe = Probe { inner: stream, samples: Rc::clone(&samples), next: Instant::ZERO };
    let r = sim::run_with_workload(&s, &p, &opts, Box::new(probe)).unwrap();
    let out = samples.borrow().clone();
    (r.report.stream.expect("stream report"), out)
}

#[test]
fn measuring_as_frames_come_due_gives_the_report_of_the_whole_history() {
    let media = MediaSetup::load(&root().join(CLIP)).unwrap();
    let (with_history, _) = long_stream(&media, 45, true, "tcp", FAST);
    let (running, _) = long_stream(&media, 45, false, "tcp", FAST);
    assert!(with_history.frames_total > 450, "{with_history:?}");
    assert_eq!(running, with_history);
    // Lost frames leave the previous picture on screen: the same figures either way.
    let (with_history, _) = long_stream(&media, 45, true, "marc", LOSSY);
    let (running, _) = long_stream(&media, 45, false, "marc", LOSSY);
    assert!(with_history.frames_lost > 0, "{with_history:?}");
    assert!(with_history.psnr_sd_db > 0.0, "{with_history:?}");
    assert_eq!(running.frames_lost, with_history.frames_lost);
    assert_eq!(running.frames_total, with_history.frames_total);
    assert!((running.psnr_avg_db - with_history.psnr_avg_db).abs() < 1e-9, "{running:?}");
    assert!((running.psnr_sd_db - with_history.psnr_sd_db).abs() < 1e-9, "{running:?}");
}

#[test]
fn a_ten_minute_stream_keeps_the_clients_state_bounded() {
    let media = MediaSetup::load(&root().join(CLIP)).unwrap();
    let (report, samples) = long_stream(&media, 600, false, "tcp", FAST);
    // 15 fps for 10 minutes, played to the end of the run.
    assert!(report.frames_total > 8_500, "{report:?}");
    assert_eq!(report.frames_lost, 0);
    assert_eq!(report.psnr_avg_db, 100.0, "{report:?}");
    let after = |s: u64| {
        samples.iter().filter(move |(t, _)| *t >= Instant::from_duration(Duration::from_secs(s)))
    };
    // Bounds: the 30 s buffer (450 frames of ≈ 530 B) ahead, nothing behind but the
    // playout's 1024 slots; no per-frame history at all.
    for (t, r) in after(0) {
        assert!(r.units <= 600, "{t:?}: {r:?}");
        assert!(r.unit_bytes <= 600_000, "{t:?}: {r:?}");
        assert!(r.due <= 16, "{t:?}: {r:?}");
        assert_eq!((r.arrivals, r.samples), (0, 0), "{t:?}: {r:?}");
        assert!(r.playout_frames <= 1024 + 600, "{t:?}: {r:?}");
    }
    // Flat: the second five minutes hold no more than the first.
    let most = |from: u64, to: u64| {
        after(from)
            .filter(|(t, _)| *t < Instant::from_duration(Duration::from_secs(to)))
            .map(|(_, r)| r.units + r.due + r.playout_frames)
            .max()
            .unwrap_or(0)
    };
    let (first, second) = (most(60, 300), most(300, 600));
    assert!(first > 0 && second <= first + first / 20, "first {first}, second {second}");
}

/// Peak resident memory (VmHWM, kB) since the start or the last [`reset_peak_rss`].
fn peak_rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Starts a new peak-RSS measurement (Linux: `5` to clear_refs resets VmHWM).
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Records the peak resident memory of each hour of a simulated stream.
struct HourlyPeak {
    inner: SimStream,
    next_hour: Instant,
    peaks: Rc<RefCell<Vec<(u64, Retained)>>>,
}

impl Workload for HourlyPeak {
    fn on_server(&mut self, now: Instant, conn: &mut Connection) {
        self.inner.on_server(now, conn);
    }
    fn on_client(&mut self, now: Instant, conn: &mut Connection) {
        self.inner.on_client(now, conn);
        if now >= self.next_hour {
            let r = self.inner.client().map(|c| c.retained()).unwrap_or_default();
            self.peaks.borrow_mut().push((peak_rss_kb().unwrap_or(0), r));
            reset_peak_rss();
            self.next_hour = now + Duration::from_secs(3600);
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }
    fn is_done(&self) -> bool {
        self.inner.is_done()
    }
    fn stats(&self) -> WorkloadStats {
        self.inner.stats()
    }
    fn stream_report(&self) -> Option<StreamReport> {
        self.inner.stream_report()
    }
    fn on_stopped(&mut self, now: Instant) -> bool {
        self.inner.on_stopped(now)
    }
}

/// The benchmark in BENCHMARKS.md ("Client memory in a long stream"): a 2-hour simulated
/// stream of the looped H.263 clip; prints the peak resident memory of the first and of
/// the second hour. Release build, alone:
/// `cargo test --release -p braid-player --bin braid two_hour_stream -- --ignored --nocapture`
#[test]
#[ignore = "benchmark: two simulated hours, run in a release build"]
fn two_hour_stream_peak_memory_per_hour() {
    two_hour_stream(false);
}

/// The same with the client's whole history kept (what every client did before), for
/// comparison: `… two_hour_stream_with_history -- --ignored --nocapture`.
#[test]
#[ignore = "benchmark: two simulated hours, run in a release build"]
fn two_hour_stream_with_history_peak_memory_per_hour() {
    two_hour_stream(true);
}

fn two_hour_stream(keep_history: bool) {
    assert!(reset_peak_rss(), "needs Linux's /proc/self/clear_refs");
    let media = MediaSetup::load(&root().join(CLIP)).unwrap();
    let s = looped_scenario(7200, FAST);
    let p = profile::lookup("tcp").unwrap();
    // The simulator's own time series (one row per bin, 72 000 rows of 100 ms in two
    // hours) is the simulator's report, not the client's state: one-minute bins.
    let opts = RunOptions {
        recv_buffer_bytes: Some(transport_buffer_bytes(&media.clip)),
        series_interval: Duration::from_secs(60),
        ..RunOptions::default()
    };
    let stream = SimStream::new(
        Arc::clone(&media.clip),
        media.name.clone(),
        Arc::clone(&media.reference),
        p.media,
        Some(s.duration),
        ClientConfig {
            policy: PlayoutPolicy::adaptive(),
            buffer_s: 30.0,
            buffer_bytes: 8_000_000,
            keep_history,
        },
    )
    .ending_at(Instant::from_duration(s.duration));
    let peaks = Rc::new(RefCell::new(Vec::new()));
    // The first hour is measured from the first frame read (after the clip's decode).
    let probe = HourlyPeak {
        inner: stream,
        next_hour: Instant::from_duration(Duration::from_secs(3600)),
        peaks: Rc::clone(&peaks),
    };
    reset_peak_rss();
    let started = std::time::Instant::now();
    let r = sim::run_with_workload(&s, &p, &opts, Box::new(probe)).unwrap();
    let end_peak = peak_rss_kb().unwrap_or(0);
    let st = r.report.stream.expect("stream report");
    let peaks = peaks.borrow();
    let (first, at_hour) = peaks.first().copied().expect("an hour passed");
    println!(
        "two-hour stream (history kept: {keep_history}): {} frames due, {} lost, PSNR {:.1} dB, {:.0} s wall",
        st.frames_total,
        st.frames_lost,
        st.psnr_avg_db,
        started.elapsed().as_secs_f64()
    );
    println!("retained at 1 h: {at_hour:?}");
    println!(
        "peak RSS: first hour {first} kB, second hour {end_peak} kB, ratio {:.3}",
        end_peak as f64 / first as f64
    );
    assert!(st.frames_total > 100_000, "{st:?}");
}
