//! A kernel connection behind the same application calls as the built-in transport's
//! [`crate::driver::ConnectionHandle`]: messages in and out, statistics, radio energy and
//! the path mode (`braid serve` / `braid play` with a kernel profile).
//!
//! One thread per connection pumps a [`MessageStream`] (TLS over the kernel socket) and
//! meets the application through two bounded queues; the receive queue is only filled
//! while the application reads, so the kernel's receive window follows the read rate.
//! The sending end reports its subflows to the receiver every
//! [`meter::REPORT_INTERVAL`] in a control frame ([`SenderReport`]); the receiving end
//! reads its own subflows every [`meter::SAMPLE_INTERVAL`], drives each path's radio
//! with its subflows' bytes and, for `kernel-mptcp-qe`, runs aeSUM on the read rate
//! measured where the application reads ([`KernelConnection::read_message`]) and flips
//! the costly paths' MPTCP endpoints to backup (MP_PRIO) in Partial mode
//! ([`super::endpoint`]: a switch whose change fails does not happen).

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_transport::energy::PowerModels;
use braid_transport::path::{PathId, PathRole, PathStatus};
use braid_transport::policy::{AeSumConfig, EnergySnapshot, PathMode};
use braid_transport::proto::rate::ReadRateMeter;
use braid_transport::proto::{
    ClientCrypto, ConnectionStats, Delivery, DropCounters, PathStats, ServerCrypto,
};
use braid_transport::time::Instant;
use bytes::Bytes;
use tokio::sync::mpsc;

use super::endpoint::CostlyEndpoints;
use super::info::{self, Subflow};
use super::meter::{self, Forecast, KernelMeter, KernelPath, SenderReport, SenderSampler, path_of};
use super::side::{ReportReceiver, ReportSender};
use super::stream::{Frame, MessageStream};
use super::{KernelError, KernelProfile, socket};

/// Framed bytes handed to TLS ahead of the socket at most.
const SEND_AHEAD: usize = 32 * 1024;
/// Unsent bytes the sender's kernel socket holds at most (`TCP_NOTSENT_LOWAT`), for a
/// bulk run.
pub const UNSENT_LIMIT: u32 = 128 * 1024;
/// The same for a media connection: the buffering between the player and the kernel is
/// kept small, so what queues is the kernel's (its windows), as in Braid's own transport
/// (whose sender holds what the receive window does not yet take).
const STREAM_UNSENT_LIMIT: u32 = 32 * 1024;
/// Plaintext read ahead of the player at most (the rest waits in the kernel).
const STREAM_READ_AHEAD: usize = 32 * 1024;
/// Messages queued between the application and the pump, each way.
const QUEUE: usize = 4;

/// How a client connection is set up.
#[derive(Clone, Debug)]
pub struct ClientSetup {
    /// Which kernel transport.
    pub profile: KernelProfile,
    /// The socket's congestion controller.
    pub cc: String,
    /// The client's paths (the first subflow leaves from the first one's address; the
    /// kernel's path manager opens the others from the endpoints configured on the host).
    pub paths: Vec<KernelPath>,
    /// Radio parameters per role.
    pub power: PowerModels,
    /// The receive buffer, bytes (`None`: the kernel's autotuning).
    pub recv_buffer: Option<usize>,
    /// aeSUM's settings (for the profiles that run it; the profile's by default).
    pub aesum: AeSumConfig,
    /// aeSUM's WiFi sample.
    pub forecast: Forecast,
    /// The network namespace whose MPTCP endpoints the mode switch changes (`None`: this
    /// process's).
    pub netns: Option<String>,
}

impl ClientSetup {
    /// `profile` with controller `cc` over `paths`, everything else by default.
    pub fn new(profile: KernelProfile, cc: &str, paths: Vec<KernelPath>) -> ClientSetup {
        ClientSetup {
            profile,
            cc: cc.to_string(),
            paths,
            power: PowerModels::default(),
            recv_buffer: None,
            aesum: profile.aesum().unwrap_or_default(),
            forecast: Forecast::default(),
            netns: None,
        }
    }
}

/// Path information as [`crate::driver::PathInfo`] gives it for the built-in transport.
pub type PathInfo = crate::driver::PathInfo;

/// What the application read from a connection that is not Braid's (a kernel socket,
/// noq): the read rate with starved time left out, and the totals.
#[derive(Default)]
pub(crate) struct AppReads {
    /// The read rate.
    pub(crate) read: ReadRateMeter,
    bytes: u64,
    messages: u64,
}

impl AppReads {
    /// A message of `len` bytes was read at `now`.
    pub(crate) fn record(&mut self, now: Instant, len: usize) {
        self.read.record(now, len as u64);
        self.bytes += len as u64;
        self.messages += 1;
    }

    /// `st` with what the application read.
    pub(crate) fn fill(&self, mut st: ConnectionStats) -> ConnectionStats {
        st.bytes_delivered = self.bytes;
        st.messages_delivered = self.messages;
        st.read_rate_bps = self.read.rate_bps();
        st
    }
}

/// Messages handed to the application in arrival order, numbered 0, 1, 2, …, by a
/// connection that is not Braid's (a kernel socket, noq).
pub(crate) struct Numbered<T> {
    rx: tokio::sync::Mutex<(mpsc::Receiver<T>, u64)>,
}

impl<T> Numbered<T> {
    pub(crate) fn new(rx: mpsc::Receiver<T>) -> Numbered<T> {
        Numbered { rx: tokio::sync::Mutex::new((rx, 0)) }
    }

    /// The next message and its number if one is here (and no reader is waiting).
    pub(crate) fn try_next(&self) -> Option<(u64, T)> {
        let mut rx = self.rx.try_lock().ok()?;
        let m = rx.0.try_recv().ok()?;
        let id = rx.1;
        rx.1 += 1;
        Some((id, m))
    }

    /// The next message and its number, waiting for it; `starved` is called when none is
    /// here yet. `None`: the sending side is gone.
    pub(crate) async fn next(&self, starved: impl FnOnce()) -> Option<(u64, T)> {
        let mut rx = self.rx.lock().await;
        let m = match rx.0.try_recv() {
            Ok(m) => Some(m),
            Err(mpsc::error::TryRecvError::Empty) => {
                starved();
                rx.0.recv().await
            }
            Err(mpsc::error::TryRecvError::Disconnected) => None,
        }?;
        let id = rx.1;
        rx.1 += 1;
        Some((id, m))
    }
}

#[derive(Default)]
struct Shared {
    error: Option<String>,
    stats: Option<ConnectionStats>,
    energy: Option<EnergySnapshot>,
    reads: AppReads,
}

/// A running kernel connection (client or server end).
pub struct KernelConnection {
    sends: mpsc::Sender<Bytes>,
    deliveries: Numbered<Vec<u8>>,
    next_id: Mutex<u64>,
    shared: Arc<Mutex<Shared>>,
    origin: std::time::Instant,
    remote: SocketAddr,
    paths: Vec<PathInfo>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for KernelConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelConnection").field("remote", &self.remote).finish_non_exhaustive()
    }
}

fn lock(s: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

enum Side {
    Client { setup: Box<ClientSetup> },
    Server,
}

impl KernelConnection {
    /// Connects to `remote` as `setup` says, authenticating the server with `crypto`
    /// (blocks for at most 5 s; call it off the async runtime).
    pub fn connect(
        remote: SocketAddr,
        setup: ClientSetup,
        crypto: &ClientCrypto,
    ) -> Result<KernelConnection, KernelError> {
        let local = setup.paths.first().and_then(|p| p.local).map(|ip| SocketAddr::new(ip, 0));
        let sock = socket::connect(
            setup.profile,
            remote,
            local,
            &setup.cc,
            Duration::from_secs(5),
            setup.recv_buffer,
        )?;
        let mut ms = MessageStream::client(sock, crypto, remote.ip())?;
        ms.set_read_ahead(STREAM_READ_AHEAD);
        let paths = setup
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| PathInfo {
                id: Some(PathId(i as u32)),
                local: SocketAddr::new(p.local.unwrap_or(IpAddr::from([0, 0, 0, 0])), 0),
                remote,
                iface: None,
                role: p.role,
                error: None,
            })
            .collect();
        Ok(KernelConnection::start(ms, remote, paths, Side::Client { setup: Box::new(setup) }))
    }

    /// The server end of an accepted `sock` (controller `cc`), proving its identity with
    /// `crypto`.
    pub fn accept(
        sock: TcpStream,
        cc: &str,
        crypto: &ServerCrypto,
    ) -> Result<KernelConnection, KernelError> {
        socket::accepted(&sock, cc)?;
        socket::limit_unsent(&sock, STREAM_UNSENT_LIMIT);
        let remote = sock.peer_addr().map_err(|e| KernelError::io("peer address", e))?;
        let local = sock.local_addr().map_err(|e| KernelError::io("local address", e))?;
        let ms = MessageStream::server(sock, crypto)?;
        let paths = vec![PathInfo {
            id: Some(PathId(0)),
            local,
            remote,
            iface: None,
            role: PathRole::Wired,
            error: None,
        }];
        Ok(KernelConnection::start(ms, remote, paths, Side::Server))
    }

    fn start(ms: MessageStream, remote: SocketAddr, paths: Vec<PathInfo>, side: Side) -> Self {
        let (send_tx, send_rx) = mpsc::channel(QUEUE);
        let (del_tx, del_rx) = mpsc::channel(QUEUE);
        let shared: Arc<Mutex<Shared>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let origin = std::time::Instant::now();
        let pump = Pump {
            ms,
            sends: send_rx,
            deliveries: del_tx,
            shared: Arc::clone(&shared),
            stop: Arc::clone(&stop),
            origin,
            side,
        };
        let thread =
            std::thread::Builder::new().name("braid-kernel".into()).spawn(move || pump.run()).ok();
        KernelConnection {
            sends: send_tx,
            deliveries: Numbered::new(del_rx),
            next_id: Mutex::new(0),
            shared,
            origin,
            remote,
            paths,
            stop,
            thread: Mutex::new(thread),
        }
    }

    /// Now on the connection's clock (zero when it started).
    pub fn now(&self) -> Instant {
        Instant::from_duration(self.origin.elapsed())
    }

    /// The peer's address.
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    fn error(&self) -> KernelError {
        match lock(&self.shared).error.clone() {
            Some(e) => KernelError::Ended(e),
            None => KernelError::Closed,
        }
    }

    /// Queues one message (waiting while the pump's queue is full); returns its id.
    pub async fn send_message(&self, data: Bytes) -> Result<u64, KernelError> {
        let permit = self.sends.reserve().await.map_err(|_| self.error())?;
        let mut next = self.next_id.lock().unwrap_or_else(|e| e.into_inner());
        let id = *next;
        *next += 1;
        permit.send(data);
        Ok(id)
    }

    /// A message that already arrived, without waiting (`None`: none yet, or the
    /// connection ended; [`read_message`](Self::read_message) then says which).
    pub fn try_read_message(&self) -> Option<Delivery> {
        let (id, m) = self.deliveries.try_next()?;
        Some(self.delivered(id, m))
    }

    /// The next message; waits for it (time spent waiting counts as the application
    /// starved for the read rate). After the connection ended, why.
    pub async fn read_message(&self) -> Result<Delivery, KernelError> {
        let starved = || lock(&self.shared).reads.read.starve(self.now());
        match self.deliveries.next(starved).await {
            Some((id, m)) => Ok(self.delivered(id, m)),
            None => Err(self.error()),
        }
    }

    fn delivered(&self, id: u64, m: Vec<u8>) -> Delivery {
        let now = self.now();
        lock(&self.shared).reads.record(now, m.len());
        Delivery::Message { id, data: m.into() }
    }

    /// The latest statistics (each path's subflows, the sender's RTT and retransmissions).
    pub fn stats(&self) -> Option<ConnectionStats> {
        let s = lock(&self.shared);
        s.stats.clone().map(|st| s.reads.fill(st))
    }

    /// The client's radio energy and path mode; `None` on the server end.
    pub fn energy(&self) -> Option<EnergySnapshot> {
        lock(&self.shared).energy.clone()
    }

    /// The paths the client opened, in order (the server end: its one connection).
    pub fn paths(&self) -> Vec<PathInfo> {
        self.paths.clone()
    }

    /// Whether the connection ended.
    pub fn is_finished(&self) -> bool {
        self.thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_none_or(std::thread::JoinHandle::is_finished)
    }

    /// Flushes what was queued (for at most a second), closes and waits for the pump.
    pub async fn close(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

impl Drop for KernelConnection {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

struct Pump {
    ms: MessageStream,
    sends: mpsc::Receiver<Bytes>,
    deliveries: mpsc::Sender<Vec<u8>>,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    origin: std::time::Instant,
    side: Side,
}

impl Pump {
    fn now(&self) -> Instant {
        Instant::from_duration(self.origin.elapsed())
    }

    fn run(mut self) {
        let result = self.pump();
        let mut s = lock(&self.shared);
        if let Err(e) = result {
            s.error = Some(e.to_string());
        }
    }

    fn pump(&mut self) -> Result<(), KernelError> {
        let is_client = matches!(self.side, Side::Client { .. });
        let (paths, power, qe, netns) = match &self.side {
            Side::Client { setup } => (
                setup.paths.clone(),
                setup.power.clone(),
                setup.profile.aesum().map(|_| (setup.aesum.clone(), setup.forecast)),
                setup.netns.clone(),
            ),
            Side::Server => (Vec::new(), PowerModels::default(), None, None),
        };
        let t0 = self.now();
        let mut meter = KernelMeter::new(&paths, &power, qe, t0);
        let mut endpoints = CostlyEndpoints::new(&paths, netns);
        if meter.mode().is_some() {
            endpoints.clear();
        }
        let mut sampler = SenderSampler::new();
        let mut latest: Option<(Instant, SenderReport)> = None;
        // aeSUM's WiFi figure comes from the side channel (see `side`).
        let mut side_rx = match meter.mode() {
            Some(_) => side_channel(&paths),
            None => None,
        };
        if let Some(rx) = &side_rx {
            self.ms.queue_control(&rx.request());
        }
        let mut side_tx: Option<ReportSender> = None;
        let mut side_latest: Option<(Instant, SenderReport)> = None;
        let mut next_tick = t0 + meter::SAMPLE_INTERVAL;
        let mut next_look = t0;
        let mut queued = 0u64;
        let mut last_tick = t0;
        let mut wifi_arrived = 0u64;
        let mut result = Ok(());
        while !self.stop.load(Ordering::SeqCst) {
            // Outgoing: take messages while TLS has room ahead of the socket.
            while self.ms.pending_out() < SEND_AHEAD {
                match self.sends.try_recv() {
                    Ok(b) => {
                        queued += b.len() as u64;
                        self.ms.queue(&b);
                    }
                    Err(_) => break,
                }
            }
            if let Err(e) = self.ms.poll(Duration::from_millis(2)) {
                result = Err(e);
                break;
            }
            // Incoming: only while the application has room.
            loop {
                let Ok(permit) = self.deliveries.try_reserve() else { break };
                match self.ms.try_recv() {
                    Ok(Some(Frame::Message(m))) => permit.send(m),
                    Ok(Some(Frame::Control(c))) => {
                        if let Some(r) = SenderReport::parse(&c) {
                            latest = Some((self.now(), r));
                        } else if !is_client && side_tx.is_none() {
                            let peers: Vec<SocketAddr> = info::subflows(self.ms.socket())
                                .unwrap_or_default()
                                .iter()
                                .filter_map(|s| s.remote)
                                .collect();
                            side_tx = ReportSender::for_peer(&c, &peers);
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            if result.is_err() {
                break;
            }
            if self.ms.at_eof() && self.ms.buffered_in() == 0 {
                break;
            }
            let now = self.now();
            if now >= next_look {
                next_look =
                    now + if is_client { meter::RADIO_INTERVAL } else { Duration::from_millis(5) };
                let subs = info::subflows(self.ms.socket()).unwrap_or_default();
                if is_client {
                    let (down, _) = meter.on_subflows(now, &paths, &subs);
                    wifi_arrived += paths
                        .iter()
                        .zip(&down)
                        .filter(|(p, _)| p.role == PathRole::Wifi)
                        .map(|(_, b)| *b)
                        .sum::<u64>();
                } else {
                    sampler.sample(&subs);
                }
            }
            if let Some(r) = side_rx.as_mut().and_then(ReportReceiver::poll) {
                side_latest = Some((now, r));
            }
            if now < next_tick {
                continue;
            }
            let secs = (now - last_tick).as_secs_f64().max(1e-3);
            last_tick = now;
            while next_tick <= now {
                next_tick += meter::SAMPLE_INTERVAL;
            }
            let subs = info::subflows(self.ms.socket()).unwrap_or_default();
            if is_client {
                let fresh = side_latest
                    .as_ref()
                    .filter(|(at, _)| now.saturating_duration_since(*at) <= meter::REPORT_FRESH)
                    .map(|(_, r)| r);
                let capacity = fresh.map(|r| {
                    subs.iter()
                        .filter(|s| {
                            path_of(&paths, s.local)
                                .and_then(|p| paths.get(p))
                                .is_some_and(|p| p.role == PathRole::Wifi)
                        })
                        .filter_map(|s| s.local.and_then(|a| r.subflow_to(&a)))
                        .map(|s| s.capacity_bps)
                        .sum::<f64>()
                });
                let read_bps = {
                    let mut s = lock(&self.shared);
                    s.reads.read.advance(now);
                    s.reads.read.rate_bps()
                };
                let arrived = std::mem::take(&mut wifi_arrived);
                if let Some(m) = meter.on_sample(now, secs, arrived, capacity, read_bps) {
                    endpoints.switch(&mut meter, now, m);
                }
                let stats =
                    client_stats(&paths, &subs, latest.as_ref().map(|l| &l.1), meter.mode());
                let energy = meter.snapshot(now);
                let mut s = lock(&self.shared);
                s.stats = Some(stats);
                s.energy = Some(energy);
            } else {
                let report = sampler.report(&subs, queued);
                if let Some(tx) = &side_tx {
                    tx.send(&report);
                }
                self.ms.queue_control(&report.to_bytes());
                lock(&self.shared).stats = Some(server_stats(&subs));
            }
        }
        if meter.mode() == Some(PathMode::Partial) {
            endpoints.clear();
        }
        if is_client {
            let now = self.now();
            let subs = info::subflows(self.ms.socket()).unwrap_or_default();
            meter.on_subflows(now, &paths, &subs);
            let stats = client_stats(&paths, &subs, latest.as_ref().map(|l| &l.1), meter.mode());
            let energy = meter.snapshot(now);
            let mut s = lock(&self.shared);
            s.stats = Some(stats);
            s.energy = Some(energy);
        }
        if result.is_ok() && !self.ms.at_eof() {
            self.ms.close(Duration::from_secs(1));
        }
        result
    }
}

/// The side channel's receiver on the first WiFi path's address (else the first path's).
pub fn side_channel(paths: &[KernelPath]) -> Option<ReportReceiver> {
    let ip = paths
        .iter()
        .find(|p| p.role == PathRole::Wifi)
        .or(paths.first())
        .and_then(|p| p.local)
        .unwrap_or(IpAddr::from([0, 0, 0, 0]));
    ReportReceiver::bind(ip).ok()
}

pub(crate) fn stats_of(paths: Vec<PathStats>) -> ConnectionStats {
    ConnectionStats {
        paths,
        bytes_delivered: 0,
        messages_delivered: 0,
        messages_abandoned: 0,
        messages_abandoned_sent: 0,
        retransmitted_bytes: 0,
        lost_packets: 0,
        spurious_losses: 0,
        failover_time: None,
        dropped: DropCounters::default(),
        redundant_bytes: 0,
        reinject: Default::default(),
        fec: None,
        paths_expired: 0,
        migrations: 0,
        migrations_failed: 0,
        key_updates: 0,
        rate_feedback_capped: 0,
        migrated: 0,
        cids_refused: 0,
        cids_retired: 0,
        in_order_delay_us: Vec::new(),
        untimed_messages: 0,
        read_rate_bps: 0.0,
    }
}

fn us(v: u32) -> Duration {
    Duration::from_micros(u64::from(v))
}

pub(crate) fn path_stats(id: u32, role: PathRole, status: PathStatus) -> PathStats {
    PathStats {
        id: PathId(id),
        role,
        status,
        failed: false,
        bytes_sent: 0,
        bytes_received: 0,
        packets_sent: 0,
        packets_lost: 0,
        spurious_losses: 0,
        srtt: Duration::ZERO,
        min_rtt: Duration::ZERO,
        latest_rtt: Duration::ZERO,
        cwnd: 0,
        in_flight: 0,
        owd_mean: Duration::ZERO,
        owd_var_us2: 0.0,
        data_bytes_sent: 0,
        data_bytes_received: 0,
        validated: true,
        redundant_bytes_sent: 0,
        failures: 0,
        mtu: 0,
        mtu_probes: (0, 0),
    }
}

/// The client's statistics: one row per path (its subflows summed; RTT, window and
/// retransmissions from the sender's latest report, else the client's own figures), one
/// more per subflow that belongs to no path.
fn client_stats(
    paths: &[KernelPath],
    subs: &[Subflow],
    report: Option<&SenderReport>,
    mode: Option<PathMode>,
) -> ConnectionStats {
    let mut rows: Vec<PathStats> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let status = if mode == Some(PathMode::Partial) && p.role.is_costly() {
                PathStatus::Backup
            } else {
                PathStatus::Active
            };
            path_stats(i as u32, p.role, status)
        })
        .collect();
    let mut extra = 0u32;
    let (mut retrans, mut lost) = (0u64, 0u64);
    for s in subs {
        let row = match path_of(paths, s.local) {
            Some(i) => i,
            None => {
                rows.push(path_stats(
                    paths.len() as u32 + extra,
                    PathRole::Wired,
                    PathStatus::Active,
                ));
                extra += 1;
                rows.len() - 1
            }
        };
        let Some(r) = rows.get_mut(row) else { continue };
        let theirs = s.local.and_then(|a| report.and_then(|rep| rep.subflow_to(&a)));
        r.bytes_received += s.bytes_received;
        r.data_bytes_received += s.bytes_received;
        r.bytes_sent += s.bytes_sent;
        r.data_bytes_sent += s.bytes_acked;
        match theirs {
            Some(t) => {
                r.srtt = r.srtt.max(us(t.rtt_us));
                r.latest_rtt = r.srtt;
                r.min_rtt = us(t.min_rtt_us);
                r.cwnd += t.cwnd_bytes;
                r.packets_lost += u64::from(t.total_retrans);
                r.packets_sent += t.bytes_sent / 1448;
                lost += u64::from(t.total_retrans);
                retrans += t.bytes_retrans;
            }
            None => {
                r.srtt = r.srtt.max(us(s.rtt_us));
                r.latest_rtt = r.srtt;
                r.min_rtt = us(s.min_rtt_us);
            }
        }
    }
    let mut st = stats_of(rows);
    st.lost_packets = lost;
    st.retransmitted_bytes = retrans;
    st
}

/// The server's statistics: one row per subflow.
fn server_stats(subs: &[Subflow]) -> ConnectionStats {
    let rows = subs
        .iter()
        .enumerate()
        .map(|(i, s)| PathStats {
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            data_bytes_sent: s.bytes_sent,
            data_bytes_received: s.bytes_received,
            srtt: us(s.rtt_us),
            latest_rtt: us(s.rtt_us),
            min_rtt: us(s.min_rtt_us),
            cwnd: u64::from(s.snd_cwnd) * u64::from(s.snd_mss),
            packets_lost: u64::from(s.total_retrans),
            ..path_stats(i as u32, PathRole::Wired, PathStatus::Active)
        })
        .collect();
    let mut st = stats_of(rows);
    st.lost_packets = subs.iter().map(|s| u64::from(s.total_retrans)).sum();
    st.retransmitted_bytes = subs.iter().map(|s| s.bytes_retrans).sum();
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In Partial mode only the LTE and 3G rows are backups; WiFi and wired stay active.
    #[test]
    fn partial_mode_shows_only_costly_paths_as_backups() {
        let roles = [PathRole::Wired, PathRole::Wifi, PathRole::Lte, PathRole::ThreeG];
        let paths: Vec<KernelPath> = roles
            .iter()
            .enumerate()
            .map(|(i, &role)| KernelPath {
                name: role.as_str().into(),
                local: Some(IpAddr::from([10, 0, i as u8, 1])),
                role,
                capacity_bps: None,
            })
            .collect();
        let status = |mode| -> Vec<PathStatus> {
            client_stats(&paths, &[], None, mode).paths.iter().map(|p| p.status).collect()
        };
        use PathStatus::{Active, Backup};
        assert_eq!(status(Some(PathMode::Partial)), [Active, Active, Backup, Backup]);
        assert_eq!(status(Some(PathMode::Full)), [Active; 4]);
        assert_eq!(status(None), [Active; 4]);
    }

    /// Messages much longer than the read-ahead still arrive whole, in order, and the
    /// client's statistics name its one path.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn long_messages_cross_a_loopback_kernel_connection() {
        let identity = crate::tls::self_signed().unwrap();
        let listener =
            socket::listen(KernelProfile::Tcp, "127.0.0.1:0".parse().unwrap(), "cubic").unwrap();
        let addr = listener.local_addr().unwrap();
        let crypto = identity.crypto.clone();
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            KernelConnection::accept(s, "cubic", &crypto).unwrap()
        });
        let path = KernelPath {
            name: "path0".into(),
            local: Some("127.0.0.1".parse().unwrap()),
            role: PathRole::Wifi,
            capacity_bps: None,
        };
        let setup = ClientSetup::new(KernelProfile::Tcp, "cubic", vec![path]);
        let pinned = identity.pinned_client();
        let client = tokio::task::spawn_blocking(move || {
            KernelConnection::connect(addr, setup, &pinned).unwrap()
        })
        .await
        .unwrap();
        let server = tokio::task::spawn_blocking(move || server.join().unwrap()).await.unwrap();
        let sizes = [200_000usize, 10, 70_000, 1];
        for (i, &n) in sizes.iter().enumerate() {
            server.send_message(Bytes::from(vec![i as u8; n])).await.unwrap();
        }
        for (i, &n) in sizes.iter().enumerate() {
            let d = tokio::time::timeout(Duration::from_secs(10), client.read_message())
                .await
                .expect("a message")
                .unwrap();
            let Delivery::Message { id, data } = d else { panic!("a gap") };
            assert_eq!((id, data.len()), (i as u64, n));
            assert!(data.iter().all(|&b| b == i as u8));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let st = client.stats().unwrap();
        assert_eq!(st.paths.len(), 1);
        assert!(st.paths[0].data_bytes_received > 270_000, "{:?}", st.paths[0]);
        assert!(client.energy().unwrap().total_j() > 0.0);
        server.close().await;
        assert!(client.read_message().await.is_err(), "the server closed");
        client.close().await;
    }
}
