//! A session in one process: server, emulated paths and client.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use anyhow::Context as _;
use braid_io::driver::{self, PathSpec};
use braid_io::noq_media::{self, NoqMediaListener, NoqPath};
use braid_io::relay::{self, RelayCommand};
use braid_media::playout::PlayoutPolicy;
use braid_netem::scenario::Scenario;
use braid_transport::energy::PowerModels;
use braid_transport::profile::{MediaReliability, PathUse, Profile, Side};

use super::config;
use super::live::Wake;
use super::live::{NetCommand, PaneUpdate, event_changes};
use super::realtime::{self, PlayOptions, PlayOutcome};
use super::stream::ClientConfig;

/// What one row or pane of a real-time comparison runs: one of Braid's profiles, or n0's
/// noq (`noq-multipath`: its own path scheduler and controller, the stream carried
/// reliably on every path, [`braid_io::noq_media`]).
#[derive(Clone, Debug)]
pub enum Contender {
    /// Braid's transport with this profile.
    Braid(Profile),
    /// noq.
    Noq,
}

impl Contender {
    /// The name in tables, panes and reports.
    pub fn name(&self) -> String {
        match self {
            Contender::Braid(p) => p.name.to_string(),
            Contender::Noq => braid_io::noq_perf::NAME.to_string(),
        }
    }

    /// Whether it is noq.
    pub fn is_noq(&self) -> bool {
        matches!(self, Contender::Noq)
    }

    /// The Braid profile a session takes its media and path use from: its own, or for
    /// noq `mptcp`'s (reliable, every path), as `braid play --profile noq-multipath` does.
    pub fn profile(&self) -> Profile {
        match self {
            Contender::Braid(p) => p.clone(),
            Contender::Noq => {
                braid_transport::profile::lookup("mptcp").expect("mptcp is a built-in profile")
            }
        }
    }
}

/// One session in this process: a server streaming a clip, the relay emulating a
/// scenario's paths in real time, and the client playing it (`braid demo`; one per pane in
/// a real-time comparison and for a file opened in the window).
#[derive(Clone)]
pub struct InProcess {
    /// The emulated conditions (its seed seeds the relay and the connection).
    pub scenario: Scenario,
    /// The transport profile of both ends. With [`InProcess::noq`] it names the pane only:
    /// the stream is reliable and takes every path.
    pub profile: Profile,
    /// Both ends speak n0's noq (`noq-multipath`, [`braid_io::noq_media`]: its own
    /// scheduler and controller) instead of Braid's transport, across the same relay.
    pub noq: bool,
    /// The clip the server streams.
    pub clip: Arc<braid_media::Clip>,
    /// Its decoded frames, for measured PSNR.
    pub reference: Arc<Vec<braid_media::quality::Frame>>,
    /// The clip's name in reports.
    pub clip_name: String,
    /// Loop the clip for this long.
    pub loop_for: Option<Duration>,
    /// Client buffer, media seconds.
    pub buffer_s: f64,
    /// The transport's receive buffer, bytes ([`super::stream_buffer_bytes`]).
    pub transport_buffer_bytes: u64,
    /// Session length (one cycle of the booth loop).
    pub duration: Duration,
    /// Replay the whole session, events and captions included, until stopped.
    pub booth_loop: bool,
    /// The client keeps every frame ([`ClientConfig::keep_history`]), e.g. to write
    /// what was displayed.
    pub keep_history: bool,
    /// The client's radio parameters per role.
    pub power: PowerModels,
}

/// Where the in-process server, relay and client meet.
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Aborts a spawned task when dropped (so an aborted session leaves no server behind).
pub(super) struct AbortOnDrop<T>(pub(super) tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The relay the window's controls act on (replaced each booth-loop cycle).
type RelaySlot = Arc<std::sync::Mutex<Option<Arc<relay::RelayHandle>>>>;

impl InProcess {
    /// Server, relay and client in this process; returns what the client played. With
    /// `booth_loop` it starts again after each session — a fresh relay replays the
    /// scenario's events from the start — and only returns on an error.
    pub async fn run(
        self,
        tx: Sender<PaneUpdate>,
        wake: Wake,
        commands: Option<Receiver<NetCommand>>,
    ) -> anyhow::Result<PlayOutcome> {
        let slot: RelaySlot = Arc::default();
        // Network controls from the window.
        if let Some(rx) = commands {
            let slot = Arc::clone(&slot);
            std::thread::Builder::new()
                .name("braid-controls".into())
                .spawn(move || {
                    while let Ok(c) = rx.recv() {
                        let relay = slot.lock().ok().and_then(|g| g.clone());
                        let Some(relay) = relay else { continue };
                        relay.command(match c {
                            NetCommand::Cut(p) => RelayCommand::PathDown(p),
                            NetCommand::Restore(p) => RelayCommand::PathUp(p),
                            NetCommand::SetRate(p, r) => RelayCommand::SetRate(p, r),
                            NetCommand::SetDelayMs(p, d) => {
                                RelayCommand::SetDelay(p, Duration::from_millis(d))
                            }
                            NetCommand::SetLoss(p, l) => RelayCommand::SetLoss(p, l),
                        });
                    }
                })
                .context("starting the controls thread")?;
        }
        if !self.booth_loop {
            return self.run_once(tx, wake, &slot).await;
        }
        let mut offset_s = 0.0;
        let mut cycle = 0u64;
        loop {
            cycle += 1;
            // Each cycle's updates go to the same pane: time keeps counting across cycles,
            // captions say which cycle this is, and a cycle's end does not end the pane.
            // The relay restarts from the scenario: the window's controls follow.
            if cycle > 1 && tx.send(PaneUpdate::NetworkReset).is_ok() {
                wake();
            }
            let (inner_tx, inner_rx) = std::sync::mpsc::channel::<PaneUpdate>();
            let outer = tx.clone();
            std::thread::Builder::new()
                .name("braid-loop".into())
                .spawn(move || {
                    for u in inner_rx {
                        let u = match u {
                            PaneUpdate::Stats(mut s) => {
                                s.t_s += offset_s;
                                PaneUpdate::Stats(s)
                            }
                            PaneUpdate::Caption(c) => {
                                PaneUpdate::Caption(format!("{c}  · loop {cycle}"))
                            }
                            PaneUpdate::Ended => continue,
                            other => other,
                        };
                        if outer.send(u).is_err() {
                            return;
                        }
                    }
                })
                .context("starting the loop thread")?;
            let outcome = self.clone().run_once(inner_tx, Arc::clone(&wake), &slot).await?;
            offset_s += outcome.elapsed.as_secs_f64();
        }
    }

    /// The relay emulating the scenario's paths in front of `server`, published in `slot`
    /// for the window's controls.
    async fn start_relay(
        &self,
        server: SocketAddr,
        slot: &RelaySlot,
    ) -> anyhow::Result<Arc<relay::RelayHandle>> {
        let relay = Arc::new(
            relay::start(&self.scenario, server, LOOPBACK, None, self.scenario.seed).await?,
        );
        if let Ok(mut g) = slot.lock() {
            *g = Some(Arc::clone(&relay));
        }
        Ok(relay)
    }

    /// Captions of the scenario's events and what they set on the network controls, on
    /// time (the task ends when dropped).
    fn captions(&self, tx: &Sender<PaneUpdate>, wake: &Wake) -> AbortOnDrop<()> {
        let tx = tx.clone();
        let wake = Arc::clone(wake);
        let mut events: Vec<(Duration, Vec<PaneUpdate>)> = self
            .scenario
            .events
            .iter()
            .map(|e| {
                let mut u: Vec<PaneUpdate> = event_changes(&self.scenario, e)
                    .into_iter()
                    .map(PaneUpdate::PathChanged)
                    .collect();
                u.extend(e.caption.clone().map(PaneUpdate::Caption));
                (e.at, u)
            })
            .filter(|(_, u)| !u.is_empty())
            .collect();
        events.sort_by_key(|e| e.0);
        AbortOnDrop(tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            for (at, updates) in events {
                tokio::time::sleep_until(start + at).await;
                for u in updates {
                    if tx.send(u).is_err() {
                        return;
                    }
                }
                wake();
            }
        }))
    }

    /// The client's paths: one per relay path (its front port), named as the scenario
    /// names them; only the first for a one-path profile.
    fn client_paths(&self, relay: &relay::RelayHandle) -> Vec<(String, PathSpec)> {
        let mut paths: Vec<(String, PathSpec)> = relay
            .paths()
            .iter()
            .zip(&self.scenario.paths)
            .map(|(rp, sp)| (sp.name.clone(), PathSpec::to(rp.listen, sp.role)))
            .collect();
        if self.profile.paths == PathUse::Single && !self.noq {
            paths.truncate(1);
        }
        paths
    }

    /// How the client plays: the adaptive policy, showing on `tx`.
    fn play_options(
        self,
        path_names: Vec<String>,
        tx: Sender<PaneUpdate>,
        wake: Wake,
        send_log: realtime::SendLog,
    ) -> PlayOptions {
        PlayOptions {
            client: ClientConfig {
                policy: PlayoutPolicy::adaptive(),
                buffer_s: self.buffer_s,
                keep_history: self.keep_history,
                ..ClientConfig::default()
            },
            limit: Some(self.duration),
            reference: Some(self.reference),
            clip_name: self.clip_name,
            display: Some(tx),
            wake,
            path_names,
            send_log: Some(send_log),
        }
    }

    /// One session over noq: a noq server on loopback behind the same relay, a noq client
    /// with one noq path per relay path, the download-ahead as its receive window.
    async fn run_once_noq(
        self,
        tx: Sender<PaneUpdate>,
        wake: Wake,
        slot: &RelaySlot,
    ) -> anyhow::Result<PlayOutcome> {
        let identity = braid_io::tls::self_signed().context("making the server certificate")?;
        let listener = NoqMediaListener::bind(SocketAddr::new(LOOPBACK, 0), &identity.crypto)
            .context("starting the noq server")?;
        let relay = self.start_relay(listener.local_addr()?, slot).await?;
        let send_log = realtime::SendLog::default();
        let server_log = send_log.clone();
        let (clip, loop_for) = (Arc::clone(&self.clip), self.loop_for);
        let mut server = AbortOnDrop(tokio::spawn(async move {
            let conn = Arc::new(listener.accept().await?);
            let served = realtime::serve(
                Arc::clone(&conn),
                clip,
                MediaReliability::Reliable,
                loop_for,
                Some(server_log),
            )
            .await;
            conn.close(0, b"done").await;
            served
        }));
        let _captions = self.captions(&tx, &wake);
        let paths = self.client_paths(&relay);
        let names = paths.iter().map(|p| p.0.clone()).collect();
        let noq_paths: Vec<NoqPath> = paths
            .into_iter()
            .map(|(name, spec)| NoqPath { name, local: None, remote: spec.remote, role: spec.role })
            .collect();
        let conn = noq_media::connect(
            &noq_paths,
            &identity.pinned_client(),
            Some(self.transport_buffer_bytes),
            &self.power,
        )
        .await
        .context("connecting over noq through the emulated paths")?;
        let conn = Arc::new(conn);
        let opts = self.play_options(names, tx, wake, send_log);
        let result = realtime::play(Arc::clone(&conn), opts).await;
        conn.close(0, b"done").await;
        let result = with_server_error(result, &mut server).await;
        release(slot);
        result
    }

    /// One session.
    async fn run_once(
        self,
        tx: Sender<PaneUpdate>,
        wake: Wake,
        slot: &RelaySlot,
    ) -> anyhow::Result<PlayOutcome> {
        if self.noq {
            return self.run_once_noq(tx, wake, slot).await;
        }
        let server_cfg = config::real_time(&self.profile, Side::Server, None);
        // In process: a fresh self-signed identity that the client pins.
        let identity = braid_io::tls::self_signed().context("making the server certificate")?;
        let ep = driver::listen(SocketAddr::new(LOOPBACK, 0), server_cfg, identity.crypto.clone())
            .await
            .context("starting the server")?;
        let relay = self.start_relay(ep.local_addr(), slot).await?;
        let (clip, media, loop_for) = (Arc::clone(&self.clip), self.profile.media, self.loop_for);
        let send_log = realtime::SendLog::default();
        let server_log = send_log.clone();
        // The server's end of the connection, for the sender-side figures of the report.
        let server_conn: Arc<std::sync::Mutex<Option<Arc<driver::ConnectionHandle>>>> =
            Arc::default();
        let mut server = {
            let server_conn = Arc::clone(&server_conn);
            AbortOnDrop(tokio::spawn(async move {
                match ep.accept().await {
                    Some(conn) => {
                        let conn = Arc::new(conn);
                        if let Ok(mut g) = server_conn.lock() {
                            *g = Some(Arc::clone(&conn));
                        }
                        realtime::serve(conn, clip, media, loop_for, Some(server_log)).await
                    }
                    None => Ok(()),
                }
            }))
        };
        let _captions = self.captions(&tx, &wake);
        let paths = self.client_paths(&relay);
        let names = paths.iter().map(|p| p.0.clone()).collect();
        // As in the simulator: the transport holds about a second of media (or the
        // scenario's `transport_buffer_s`), the player's buffer decides how far ahead the
        // server gets beyond it (and deadlines stay meaningful).
        let recv = self.transport_buffer_bytes;
        let client_cfg = config::real_time_with(
            &self.profile,
            Side::Client,
            Some(recv),
            self.scenario.idle_timeout,
        );
        // The profile's receiver-side path policy (aeSUM for mptcp-qe) runs beside the client.
        let options = driver::ConnectOptions {
            power: self.power.clone(),
            ..driver::ConnectOptions::with_path_policy(self.profile.path_policy)
        };
        let conn = driver::connect_with(
            client_cfg,
            identity.pinned_client(),
            paths.into_iter().map(|p| p.1).collect(),
            options,
        )
        .await
        .context("connecting through the emulated paths")?;
        let opts = self.play_options(names, tx, wake, send_log);
        let result = realtime::play(Arc::new(conn), opts).await;
        let result = with_server_error(result, &mut server).await;
        let server_conn = server_conn.lock().ok().and_then(|g| g.clone());
        let result = match (result, server_conn) {
            (Ok(mut o), Some(h)) => {
                o.failover_time = h.stats().await.and_then(|st| st.failover_time);
                Ok(o)
            }
            (r, _) => r,
        };
        release(slot);
        result
    }
}

/// The client's result, with the server's error added when both failed. The server's own
/// error only matters then: at the end of a session the client closing is what stops it.
async fn with_server_error(
    result: anyhow::Result<PlayOutcome>,
    server: &mut AbortOnDrop<anyhow::Result<()>>,
) -> anyhow::Result<PlayOutcome> {
    match result {
        Err(e) if server.0.is_finished() => match (&mut server.0).await {
            Ok(Err(se)) => Err(e.context(format!("server: {se:#}"))),
            _ => Err(e),
        },
        r => r,
    }
}

/// The session's relay is gone: the window's controls no longer reach it.
fn release(slot: &RelaySlot) {
    if let Ok(mut g) = slot.lock() {
        *g = None;
    }
}
