//! Media sessions on real sockets: the same [`MediaSender`] and [`MediaClient`] as in the
//! simulator, driven by the tokio transport driver in real time.
//!
//! The client shows what it plays: every frame that comes due is handed to a thread of its
//! own ([`super::present`]) that decodes it through the GStreamer pipeline (and, with a
//! reference, compares it with it for live PSNR) and passes it to the display over a
//! channel; live statistics go there every 250 ms.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;

use anyhow::Context as _;
use braid_io::driver::{self, PathInfo};
use braid_media::quality::{Frame, cap_psnr, mos_from_psnr, psnr_eq13_estimate};
use braid_media::{Clip, StreamInfo};
use braid_transport::Instant;
use std::collections::BTreeMap;

use braid_sim::StreamReport;
use braid_transport::policy::{FullCause, PathMode, SwitchReason};
use braid_transport::profile::{MediaReliability, Profile, Side};
use braid_transport::proto::{ConnectionStats, Delivery, Reliability, ServerCrypto};

use super::config;
use super::live::{LiveStats, PaneUpdate, PathLive, RadioLive};
use super::present::{PresentOptions, Presenter};
use super::stream::{ClientConfig, MediaClient, MediaSender};
use super::transport::MediaConnection;

/// When an in-process server handed each message to its connection (message id → wall
/// time), so that the client in the same process can measure in-order delay. A remote
/// server's send times are unknown to the client; its reports then carry no delay.
#[derive(Clone, Debug, Default)]
pub struct SendLog(Arc<std::sync::Mutex<BTreeMap<u64, std::time::Instant>>>);

impl SendLog {
    fn record(&self, id: u64, at: std::time::Instant) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(id, at);
        }
    }

    /// The send time of `id`, forgetting it and every earlier message (delivery is in
    /// order, so they were delivered or abandoned).
    fn take(&self, id: u64) -> Option<std::time::Instant> {
        let mut m = self.0.lock().ok()?;
        let at = m.remove(&id);
        *m = m.split_off(&id);
        at
    }
}

/// Client messages a server keeps waiting for its sending loop, at most.
const CONTROL_QUEUE: usize = 64;

/// Streams `clip` to the client at the other end of `handle` until everything was sent
/// and the client closed (or `linger` passed after the last frame). With `log`, records
/// when each message was sent.
pub async fn serve<C: MediaConnection>(
    handle: Arc<C>,
    clip: Arc<Clip>,
    media: MediaReliability,
    loop_for: Option<Duration>,
    log: Option<SendLog>,
) -> anyhow::Result<()> {
    let mut sender = MediaSender::new(clip, media, loop_for);
    // Bounded: while the sender waits for credit the client's messages stay in the
    // connection (bounded by its receive window) instead of piling up here. Gaps carry
    // nothing for the sender and are not forwarded: one ABANDON frame can announce
    // 65 536 of them, and a client that granted no credit once made this queue grow by
    // that much per round (1.2 GB in 30 s).
    let (tx, mut rx) = tokio::sync::mpsc::channel(CONTROL_QUEUE);
    let reader = {
        let h = Arc::clone(&handle);
        tokio::spawn(async move {
            while let Ok(d) = h.read_message().await {
                if matches!(d, Delivery::Gap { .. }) {
                    continue;
                }
                if tx.send(d).await.is_err() {
                    break;
                }
            }
        })
    };
    let mut next_rtt = handle.now();
    loop {
        let now = handle.now();
        while let Ok(d) = rx.try_recv() {
            sender.on_control(now, d);
        }
        if sender.uses_deadlines() && now >= next_rtt {
            if let Some(st) = handle.stats().await
                && let Some(srtt) =
                    st.paths.iter().filter(|p| !p.srtt.is_zero()).map(|p| p.srtt).min()
            {
                sender.set_srtt(srtt);
            }
            next_rtt = now + Duration::from_millis(200);
        }
        let Some((bytes, reliability)) = sender.next_message(now) else { break };
        let id = handle.send_message(bytes, reliability).await.context("sending to the client")?;
        if let Some(log) = &log {
            log.record(id, std::time::Instant::now());
        }
        sender.sent(id, now);
    }
    // Everything is queued: wait for the client to read it and leave.
    let _ = tokio::time::timeout(Duration::from_secs(600), reader).await;
    Ok(())
}

/// Listens on `listen` and streams `clip` (from `file`) to every client that connects
/// with `profile` (proving its identity with `crypto`), until interrupted.
pub async fn serve_clients(
    listen: SocketAddr,
    file: &Path,
    clip: Arc<Clip>,
    profile: &Profile,
    loop_for: Option<Duration>,
    crypto: ServerCrypto,
    retry: driver::RetryPolicy,
) -> anyhow::Result<()> {
    let config = config::real_time(profile, Side::Server, None);
    let ep = driver::listen_with(listen, config, crypto, retry)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    println!(
        "serving {} ({} frames, {:.1} kbit/s) on {} with profile {}",
        file.display(),
        clip.info.frames,
        clip.info.bitrate_bps / 1000.0,
        ep.local_addr(),
        profile.name
    );
    loop {
        tokio::select! {
            conn = ep.accept() => {
                let Some(conn) = conn else { break };
                let clip = Arc::clone(&clip);
                let media = profile.media;
                println!("client {} connected", conn.remote());
                tokio::spawn(async move {
                    let conn = Arc::new(conn);
                    if let Err(e) = serve(Arc::clone(&conn), clip, media, loop_for, None).await {
                        eprintln!("client {}: {e:#}", conn.remote());
                    }
                });
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    Ok(())
}

/// Listens on `listen` with kernel profile `profile` (controller `cc`) and streams `clip`
/// (from `file`) to every client that connects, until interrupted.
pub async fn serve_kernel_clients(
    listen: SocketAddr,
    file: &Path,
    clip: Arc<Clip>,
    profile: braid_io::kernel::KernelProfile,
    cc: &str,
    loop_for: Option<Duration>,
    crypto: ServerCrypto,
) -> anyhow::Result<()> {
    use braid_io::kernel::conn::KernelConnection;
    let listener = braid_io::kernel::socket::listen(profile, listen, cc)?;
    listener.set_nonblocking(true).context("listening")?;
    let listener = tokio::net::TcpListener::from_std(listener).context("listening")?;
    let local = listener.local_addr().context("listening address")?;
    println!(
        "serving {} ({} frames, {:.1} kbit/s) on {} with profile {} (congestion control {cc})",
        file.display(),
        clip.info.frames,
        clip.info.bitrate_bps / 1000.0,
        local,
        profile.name()
    );
    loop {
        tokio::select! {
            r = listener.accept() => {
                let (sock, peer) = r.context("accepting")?;
                let sock = sock.into_std().context("accepting")?;
                let conn = match KernelConnection::accept(sock, cc, &crypto) {
                    Ok(c) => Arc::new(c),
                    Err(e) => {
                        eprintln!("client {peer}: {e}");
                        continue;
                    }
                };
                let clip = Arc::clone(&clip);
                println!("client {peer} connected");
                tokio::spawn(async move {
                    if let Err(e) = serve(conn, clip, MediaReliability::Reliable, loop_for, None).await {
                        eprintln!("client {peer}: {e:#}");
                    }
                });
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    Ok(())
}

/// Listens on `listen` with `noq-multipath` (n0's noq, [`braid_io::noq_media`]) and streams
/// `clip` (from `file`) to every client that connects, until interrupted.
pub async fn serve_noq_clients(
    listen: SocketAddr,
    file: &Path,
    clip: Arc<Clip>,
    loop_for: Option<Duration>,
    crypto: ServerCrypto,
) -> anyhow::Result<()> {
    use braid_io::noq_media::NoqMediaListener;
    let listener = NoqMediaListener::bind(listen, &crypto).context("listening")?;
    let local = listener.local_addr().context("listening address")?;
    println!(
        "serving {} ({} frames, {:.1} kbit/s) on {} with profile {} (noq's own congestion control)",
        file.display(),
        clip.info.frames,
        clip.info.bitrate_bps / 1000.0,
        local,
        braid_io::noq_perf::NAME
    );
    loop {
        tokio::select! {
            next = listener.incoming() => {
                let Some(incoming) = next else { break };
                let peer = incoming.remote();
                let clip = Arc::clone(&clip);
                // The handshake runs in the client's own task: a slow one holds up no other.
                tokio::spawn(async move {
                    let conn = match incoming.accept().await {
                        Ok(c) => Arc::new(c),
                        Err(e) => {
                            eprintln!("client {peer}: {e}");
                            return;
                        }
                    };
                    println!("client {peer} connected");
                    let served =
                        serve(Arc::clone(&conn), clip, MediaReliability::Reliable, loop_for, None).await;
                    if let Err(e) = served {
                        eprintln!("client {peer}: {e:#}");
                    }
                    conn.close(0, b"done").await;
                });
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    Ok(())
}

/// How the client runs.
pub struct PlayOptions {
    /// Playout policy and buffer.
    pub client: ClientConfig,
    /// Stop after this long.
    pub limit: Option<Duration>,
    /// Reference frames (for measured PSNR); `None`: eq. 13 estimate only.
    pub reference: Option<Arc<Vec<Frame>>>,
    /// The reference clip's name for the report.
    pub clip_name: String,
    /// Where pictures and statistics go (a window or the terminal).
    pub display: Option<Sender<PaneUpdate>>,
    /// Called after each display update (e.g. to repaint a window).
    pub wake: Arc<dyn Fn() + Send + Sync>,
    /// Path names, in path order, for live statistics.
    pub path_names: Vec<String>,
    /// The in-process server's send times, to measure in-order delay; `None` for a
    /// remote server.
    pub send_log: Option<SendLog>,
}

/// What a played session produced.
pub struct PlayOutcome {
    /// The stream figures.
    pub stream: StreamReport,
    /// Transport statistics at the end.
    pub stats: Option<braid_transport::proto::ConnectionStats>,
    /// Radio energy and path mode at the end (client side).
    pub energy: Option<braid_io::driver::EnergySnapshot>,
    /// Wall time from the first packet to the first frame shown.
    pub first_frame: Option<Duration>,
    /// When the first frame was shown.
    pub first_frame_at: Option<std::time::Instant>,
    /// Session length.
    pub elapsed: Duration,
    /// The client's media state at the end (what arrived and what was shown).
    pub client: MediaClient,
    /// The paths of `stats`, in the same order, as the client named them.
    pub paths: Vec<ClientPath>,
    /// Why the stream stopped before its end (the connection was lost), if it did: the
    /// outcome then holds what played until then.
    pub stopped: Option<String>,
    /// The sender's longest failover ([`braid_transport::proto::ConnectionStats::failover_time`]),
    /// when the server ran in this process; `None` otherwise or when no path failed.
    pub failover_time: Option<Duration>,
    /// In-order delivery delay per message (server's send → handed to the player), µs;
    /// empty without a [`PlayOptions::send_log`].
    pub delays_us: Vec<u64>,
    /// How late the client's transport driver woke for its timers.
    pub timer_lateness: Option<braid_io::driver::TimerLateness>,
    /// The radio energy of an all-paths `mptcp` session run beside this one on its own
    /// copy of the emulated network, J (`braid demo`), when one ran.
    pub baseline_energy_j: Option<f64>,
}

impl PlayOutcome {
    /// The outcome of a session that played to its end, or the error that stopped it.
    pub fn finished(self) -> anyhow::Result<PlayOutcome> {
        match self.stopped {
            Some(why) => Err(anyhow::anyhow!(why)),
            None => Ok(self),
        }
    }
}

/// A path of a connection's statistics as the client knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientPath {
    /// Its name ([`PlayOptions::path_names`]; else its id, `path1`).
    pub name: String,
    /// Its index among the paths the client opened (its radio's in
    /// [`PlayOutcome::energy`]); `None` if the driver does not know it.
    pub index: Option<usize>,
}

/// The paths of `stats` as the client opened and named them (`infos` from the driver, in
/// the order the paths were given; `names` in that order too).
fn client_paths(names: &[String], infos: &[PathInfo], stats: &ConnectionStats) -> Vec<ClientPath> {
    stats
        .paths
        .iter()
        .map(|p| {
            let index = infos.iter().position(|i| i.id == Some(p.id));
            let name =
                index.and_then(|k| names.get(k).cloned()).unwrap_or_else(|| p.id.to_string());
            ClientPath { name, index }
        })
        .collect()
}

/// Plays the stream arriving on `handle`.
pub async fn play<C: MediaConnection>(
    handle: Arc<C>,
    opts: PlayOptions,
) -> anyhow::Result<PlayOutcome> {
    let start = handle.now();
    let start_wall = std::time::Instant::now();
    let mut client = MediaClient::new(opts.client.clone(), Instant::ZERO);
    client.set_tracing(braid_io::driver::tracing_enabled());
    if let Some(r) = &opts.reference {
        client = client.with_reference(Arc::clone(r));
    }
    // Decoding, live PSNR and handing pictures to the display run on a thread of their
    // own: this loop reads the connection and keeps the playout clock, never waiting for
    // a picture.
    let mut presenter = Presenter::start(PresentOptions {
        reference: opts.reference.clone(),
        display: opts.display.clone(),
        wake: Arc::clone(&opts.wake),
    })?;
    let mut streaming = false;
    let mut next_stats = start;
    let mut last_bytes: Vec<u64> = Vec::new();
    let mut last_stats_at = start;
    let mut path_rates: Vec<f64> = Vec::new();
    let mut app_read = ReadMeter::new(start);
    let mut rate_names: Vec<ClientPath> = Vec::new();
    let display = |u: PaneUpdate| {
        if let Some(tx) = &opts.display {
            let _ = tx.send(u);
            (opts.wake)();
        }
    };
    let mut stream_done = false;
    let mut stopped = None;
    let mut delays_us: Vec<u64> = Vec::new();
    let mut captioned_switch = None;
    loop {
        let now = handle.now();
        if opts.limit.is_some_and(|l| now - start >= l) || client.ended() {
            break;
        }
        // Every message that already arrived goes to the playout model before it judges
        // what came due: a loop held up elsewhere (decoding, a starved thread) must not
        // count a frame whose message was waiting as a stall.
        while !stream_done && client.wants_read(now) {
            let Some(d) = handle.try_read_message() else { break };
            take_delivery(
                &mut client,
                &mut app_read,
                &mut delays_us,
                opts.send_log.as_ref(),
                handle.now(),
                d,
            );
        }
        let now = handle.now();
        client.advance(now);
        for ev in client.take_trace_events() {
            handle.trace_event(ev);
        }
        // Hand what came due to the presenting thread.
        if !streaming && let Some(h) = client.header() {
            presenter.stream(StreamInfo {
                codec: h.codec,
                width: h.width,
                height: h.height,
                fps: h.fps,
                frames: h.plan.len(),
                duration_s: h.plan.len() as f64 / h.fps.max(1e-9),
                bitrate_bps: 0.0,
                codec_config: h.codec_config.clone(),
            });
            streaming = true;
        }
        for (g, shown) in client.take_due() {
            if shown && let Some(au) = client.unit(g).cloned() {
                presenter.show(au);
            }
        }
        if let Some(why) = presenter.failed() {
            return Err(anyhow::anyhow!(why));
        }
        if let Some(msg) = client.take_report(now) {
            if let Some(fb) = client.playout_feedback(now) {
                handle.set_playout_feedback(fb);
            }
            let _ = tokio::time::timeout(
                Duration::from_millis(50),
                handle.send_message(msg, Reliability::Reliable),
            )
            .await;
        }
        if now >= next_stats {
            next_stats = now + Duration::from_millis(250);
            let st = handle.stats().await;
            let energy = handle.energy().await;
            if let Some(r) = energy.as_ref().and_then(|e| e.last_switch)
                && captioned_switch != Some(r.at)
            {
                captioned_switch = Some(r.at);
                display(PaneUpdate::Caption(switch_caption(&r)));
            }
            if let Some(st) = &st {
                let secs = (now - last_stats_at).as_secs_f64().max(1e-3);
                path_rates = st
                    .paths
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let prev = last_bytes.get(i).copied().unwrap_or(0);
                        (p.data_bytes_received.saturating_sub(prev)) as f64 * 8.0 / secs
                    })
                    .collect();
                last_bytes = st.paths.iter().map(|p| p.data_bytes_received).collect();
                rate_names = client_paths(&opts.path_names, &handle.paths(), st);
                last_stats_at = now;
            }
            let read_rate_bps = app_read.sample(now);
            if let Some((ps, buffer_s, _)) = client.playout_stats(now) {
                let (_, bitrate) = client.header_rates();
                let shown = presenter.presented();
                let measured = opts.reference.is_some() && shown.psnr_avg_db.is_some();
                let live = LiveStats {
                    t_s: (now - start).as_secs_f64(),
                    psnr_now_db: shown.psnr_now_db.filter(|_| measured).map(cap_psnr),
                    psnr_avg_db: shown.psnr_avg_db.filter(|_| measured).map(cap_psnr),
                    eq13_db: (!measured)
                        .then(|| psnr_eq13_estimate(bitrate, bitrate, read_rate_bps)),
                    mos: shown.psnr_avg_db.filter(|_| measured).map(mos_from_psnr),
                    stalls: ps.stalls,
                    stall_time_s: ps.stall_time_us as f64 / 1e6,
                    startup_s: ps.startup_delay_us.map(|u| u as f64 / 1e6),
                    buffer_s,
                    frames_shown: ps.frames_shown as u64,
                    frames_lost: ps.frames_lost as u64,
                    paths: path_rates
                        .iter()
                        .enumerate()
                        .map(|(i, &bps)| PathLive {
                            name: rate_names
                                .get(i)
                                .map_or_else(|| path_name(&opts.path_names, i), |p| p.name.clone()),
                            bps,
                        })
                        .collect(),
                    energy_j: energy.as_ref().map_or(0.0, |e| e.total_j()),
                    power_mw: energy.as_ref().map_or(0.0, |e| e.power_mw()),
                    shadow_energy_j: energy
                        .as_ref()
                        .filter(|e| e.radios.iter().any(Option::is_some))
                        .map(|e| e.shadow_all_paths_j),
                    baseline_energy_j: None,
                    radios: energy
                        .iter()
                        .flat_map(|e| e.radios.iter().enumerate())
                        .filter_map(|(i, r)| {
                            r.as_ref().map(|r| RadioLive {
                                name: path_name(&opts.path_names, i),
                                energy_j: r.energy_j,
                                power_mw: r.power_mw,
                            })
                        })
                        .collect(),
                    mode: energy.as_ref().and_then(|e| e.mode).map(|m| format!("{m:?}")),
                    timer_lateness: handle.timer_lateness(),
                };
                display(PaneUpdate::Stats(live));
            }
        }
        let wake_at = client
            .poll_timeout()
            .unwrap_or(now + Duration::from_millis(20))
            .min(now + Duration::from_millis(20))
            .max(now);
        let sleep = tokio::time::sleep(wake_at - now);
        if client.wants_read(now) && !stream_done {
            tokio::select! {
                d = handle.read_message() => match d {
                    Ok(d) => {
                        take_delivery(&mut client, &mut app_read, &mut delays_us, opts.send_log.as_ref(), handle.now(), d);
                    }
                    Err(e) => {
                        if client.header().is_none() {
                            return Err(anyhow::anyhow!(e)).context("the server closed before sending a stream");
                        }
                        stream_done = true;
                        if !client.ended() {
                            display(PaneUpdate::Error(format!("connection lost: {e}")));
                            let shown_total = presenter.finish().shown;
                            stopped = Some(format!("the stream stopped after {shown_total} frames: {e}"));
                            break;
                        }
                    }
                },
                _ = sleep => {}
            }
        } else {
            sleep.await;
        }
    }
    let end = handle.now();
    // The pictures already handed over are still shown (and measured).
    let shown = presenter.finish();
    let first_frame_at = shown.first_frame_at;
    let first_frame = first_frame_at.map(|t| t.saturating_duration_since(start_wall));
    let timer_lateness = handle.timer_lateness();
    let stats = handle.stats().await;
    let energy = handle.energy().await;
    let reference = opts.reference.as_deref().map(|v| v.as_slice());
    let stream = client.report(&opts.clip_name, reference, end);
    let paths = stats
        .as_ref()
        .map_or_else(Vec::new, |st| client_paths(&opts.path_names, &handle.paths(), st));
    display(PaneUpdate::Ended);
    handle.close(0, b"done").await;
    Ok(PlayOutcome {
        stream,
        stats,
        energy,
        first_frame,
        first_frame_at,
        elapsed: end - start,
        client,
        paths,
        stopped,
        failover_time: None,
        delays_us,
        timer_lateness,
        baseline_energy_j: None,
    })
}

/// The caption of a mode switch: what aeSUM compared, and what it means for the radios.
pub fn switch_caption(r: &SwitchReason) -> String {
    let (f, read) = (r.forecast_bps / 1e6, r.read_rate_bps / 1e6);
    let pct = if r.read_rate_bps > 0.0 { r.forecast_bps / r.read_rate_bps * 100.0 } else { 0.0 };
    match r.mode {
        PathMode::Partial => format!(
            "Partial mode: the WiFi forecast ({f:.1} Mbit/s) covers the read rate ({read:.1} Mbit/s, {pct:.0} %) — LTE becomes a backup and its radio falls idle after the tail"
        ),
        PathMode::Full => match r.cause {
            Some(FullCause::BufferFell { from_s, to_s }) => format!(
                "Full mode: in WiFi alone the player's buffer fell from {from_s:.1} s to {to_s:.1} s — LTE carries data again"
            ),
            Some(FullCause::Behind { s }) => format!(
                "Full mode: WiFi left the stream {s:.1} s of media behind the read rate ({read:.1} Mbit/s) — LTE carries data again"
            ),
            _ => format!(
                "Full mode: the WiFi forecast ({f:.1} Mbit/s) falls short of the read rate ({read:.1} Mbit/s, {pct:.0} %) — LTE carries data again"
            ),
        },
    }
}

fn path_name(names: &[String], i: usize) -> String {
    names.get(i).cloned().unwrap_or_else(|| format!("path{i}"))
}

/// Hands one delivery to the playout model (arrived at `now`); returns the message id
/// when it was a message. With the in-process server's `log`, records its in-order delay.
fn take_delivery(
    client: &mut MediaClient,
    read: &mut ReadMeter,
    delays_us: &mut Vec<u64>,
    log: Option<&SendLog>,
    now: Instant,
    d: Delivery,
) -> Option<u64> {
    read.on_read(&d);
    let id = client.on_delivery(now, d)?;
    if let Some(sent) = log.and_then(|l| l.take(id)) {
        delays_us.push(sent.elapsed().as_micros() as u64);
    }
    Some(id)
}

/// The application's read rate: the stream bytes the player took from the connection
/// between two samples (what eq. 13's current throughput is, as opposed to what the
/// network delivered into the receive buffer).
struct ReadMeter {
    bytes: u64,
    since: Instant,
}

impl ReadMeter {
    fn new(now: Instant) -> ReadMeter {
        ReadMeter { bytes: 0, since: now }
    }

    /// The player read `d`.
    fn on_read(&mut self, d: &Delivery) {
        if let Delivery::Message { data, .. } = d {
            self.bytes += data.len() as u64;
        }
    }

    /// Bits per second read since the last sample; starts the next one.
    fn sample(&mut self, now: Instant) -> f64 {
        let secs = (now - self.since).as_secs_f64().max(1e-3);
        let bps = self.bytes as f64 * 8.0 / secs;
        self.bytes = 0;
        self.since = now;
        bps
    }
}

/// Opens `path`'s clip for serving.
pub fn load_clip(path: &std::path::Path) -> anyhow::Result<Arc<Clip>> {
    Ok(Arc::new(
        Clip::open(path, &braid_media::OpenOptions::default())
            .with_context(|| format!("opening {}", path.display()))?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_rate_is_what_the_player_read_between_samples() {
        let t0 = Instant::from_micros(1_000_000);
        let mut m = ReadMeter::new(t0);
        // 25 messages of 10 kB read in half a second: 4 Mbit/s. A gap carries nothing.
        for id in 0..25 {
            m.on_read(&Delivery::Message { id, data: vec![0u8; 10_000].into() });
        }
        m.on_read(&Delivery::Gap { id: 25 });
        let r = m.sample(t0 + Duration::from_millis(500));
        assert!((r - 4e6).abs() < 1.0, "{r}");
        // Nothing read in the next quarter second (however much the network delivered
        // into the receive buffer meanwhile): 0, and eq. 13 says so.
        let r = m.sample(t0 + Duration::from_millis(750));
        assert_eq!(r, 0.0);
        let stalled = psnr_eq13_estimate(2e6, 2e6, r);
        let following = psnr_eq13_estimate(2e6, 2e6, 1.9e6);
        assert!(stalled < following, "{stalled} vs {following}");
    }
}

#[cfg(test)]
mod send_log_tests {
    use super::SendLog;

    #[test]
    fn a_delivered_message_takes_its_send_time_and_forgets_earlier_ones() {
        let log = SendLog::default();
        let t0 = std::time::Instant::now();
        for id in 0..5 {
            log.record(id, t0 + std::time::Duration::from_millis(id));
        }
        assert_eq!(log.take(2), Some(t0 + std::time::Duration::from_millis(2)));
        // 0 and 1 were delivered or abandoned before 2: gone.
        assert_eq!(log.take(1), None);
        assert_eq!(log.take(4), Some(t0 + std::time::Duration::from_millis(4)));
        assert_eq!(log.take(3), None);
        assert_eq!(log.take(9), None);
    }
}

#[cfg(test)]
mod serve_tests {
    use std::future::Future;
    use std::sync::atomic::{AtomicU64, Ordering};

    use braid_io::driver::{EnergySnapshot, TimerLateness};
    use braid_transport::trace::TraceEvent;
    use bytes::Bytes;

    use super::*;

    /// A client that never grants credit (every send waits forever) and sends an endless
    /// run of control messages — or, with `gaps`, of abandoned-message gaps.
    struct Stuck {
        t0: Instant,
        gaps: bool,
        read: AtomicU64,
    }

    impl MediaConnection for Stuck {
        type Error = std::io::Error;

        fn now(&self) -> Instant {
            self.t0
        }

        fn send_message(
            &self,
            _data: Bytes,
            _reliability: Reliability,
        ) -> impl Future<Output = Result<u64, std::io::Error>> + Send {
            std::future::pending()
        }

        async fn read_message(&self) -> Result<Delivery, std::io::Error> {
            // Yield so the runtime can run the sender too, as a real connection would.
            tokio::task::yield_now().await;
            let id = self.read.fetch_add(1, Ordering::Relaxed);
            Ok(if self.gaps {
                Delivery::Gap { id }
            } else {
                Delivery::Message { id, data: Bytes::from_static(b"\x07junk") }
            })
        }

        fn try_read_message(&self) -> Option<Delivery> {
            None
        }

        fn timer_lateness(&self) -> Option<TimerLateness> {
            None
        }

        async fn stats(&self) -> Option<ConnectionStats> {
            None
        }

        async fn energy(&self) -> Option<EnergySnapshot> {
            None
        }

        fn paths(&self) -> Vec<PathInfo> {
            Vec::new()
        }

        fn trace_event(&self, _ev: TraceEvent) {}

        fn set_playout_feedback(&self, _feedback: braid_transport::proto::PlayoutFeedback) {}

        async fn close(&self, _code: u64, _reason: &[u8]) {}
    }

    fn clip() -> Arc<Clip> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../assets/clips/h264-cif-25fps-2m.mp4");
        load_clip(&path).expect("the bundled clip")
    }

    /// Runs `serve` against `conn` for a while and returns how many deliveries it read.
    fn reads_while_stuck(gaps: bool) -> u64 {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let conn = Arc::new(Stuck { t0: Instant::from_micros(0), gaps, read: AtomicU64::new(0) });
        let c = Arc::clone(&conn);
        rt.block_on(async move {
            let serving = serve(c, clip(), MediaReliability::Reliable, None, None);
            let r = tokio::time::timeout(Duration::from_millis(300), serving).await;
            assert!(r.is_err(), "the sender waits for credit forever");
        });
        conn.read.load(Ordering::Relaxed)
    }

    #[test]
    fn a_client_that_grants_no_credit_cannot_make_the_server_queue_its_messages() {
        // While the sender waits for credit, the messages the client keeps sending stay
        // in the connection (its receive window bounds them): the server reads a queue's
        // worth and stops.
        let read = reads_while_stuck(false);
        assert!(read <= CONTROL_QUEUE as u64 + 2, "read {read} messages while stuck");
        // Gaps carry nothing for the sender: they are read and dropped, never queued, so
        // announcing millions of them costs the server no memory.
        let gaps = reads_while_stuck(true);
        assert!(gaps > 10 * CONTROL_QUEUE as u64, "only {gaps} gaps read");
    }
}
