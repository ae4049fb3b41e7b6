//! `noq-multipath` carrying media: n0's noq (a quinn fork with the IETF multipath
//! extension, its own path scheduling and congestion control) at both ends of a media
//! session, behind the same application calls as Braid's transport and the kernel's, so
//! a stream can be compared across the three on the same links (`braid compare --bed`).
//!
//! **Mapping of media messages onto QUIC.** One bidirectional stream, opened by the
//! server; each message travels as a 4-byte big-endian length and its bytes, in order,
//! in both directions (the server's media, the client's reports). A QUIC stream is
//! reliable and ordered, so every message arrives and none is ever a gap: deadlines and
//! playout feedback have no meaning here, as on a kernel byte stream. The choice is the
//! kernel profiles' framing over TLS/TCP, so the two reliable stacks carry the same
//! bytes; Braid's own transport keeps its message-level deadlines.
//!
//! The server lets its client open no stream of its own, so a hostile client cannot make
//! it buffer for more than the one (noq's own limits bound handshakes and datagrams).
//!
//! **Flow control follows the reads.** The session's download-ahead (`max_buffer_s`, as
//! every front end sizes Braid's) is split between noq's stream and connection receive
//! windows (at most [`NOQ_WINDOW_MAX`]) and a queue in front of the application that a
//! task fills from the stream while it has room in its byte budget (the rest), so the
//! server sends no further ahead of the player than the download-ahead.
//!
//! **What is measured.** Each client path's radio is driven by the UDP bytes noq counted
//! on it each way (headers and acknowledgments included, as the radio sends and
//! receives them), read every [`RADIO_INTERVAL`] through the kernel connection's meter
//! ([`KernelMeter`]; no aeSUM: noq decides its paths alone). Path statistics are
//! noq's per-path figures: RTT, window, UDP bytes, and packets lost among those this end
//! sent. The ALPN is `braid-media-noq`.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_transport::energy::PowerModels;
use braid_transport::path::{PathId, PathRole, PathStatus};
use braid_transport::policy::EnergySnapshot;
use braid_transport::proto::{ClientCrypto, ConnectionStats, Delivery, PathStats, ServerCrypto};
use braid_transport::time::Instant;
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use crate::driver::PathInfo;
use crate::kernel::conn::{AppReads, Numbered};
use crate::kernel::meter::{KernelMeter, KernelPath, RADIO_INTERVAL, SAMPLE_INTERVAL};
use crate::noq_perf::{self, NoqPerfError};

/// The ALPN both ends require.
pub const ALPN: &[u8] = b"braid-media-noq";

/// Longest message either end takes (the length prefix is the peer's word).
pub const MAX_MESSAGE: usize = 16 << 20;

/// noq's receive windows at most, bytes. noq-proto 1.4 keeps at most 1 024 chunks of a
/// stream's received data (its assembler's `MAX_CHUNKS`) and ends the connection with
/// INTERNAL_ERROR "too many gaps in stream buffer" beyond that: with the demo's 60-s
/// download-ahead (15 MB) as noq's window, the stream ended after 417 frames. A window of
/// 1 MiB, in frames of a kilobyte and more, stays under it; the rest of the download-ahead
/// waits here, read off noq's stream.
pub const NOQ_WINDOW_MAX: u64 = 1 << 20;

/// The queue between the stream and the application holds at least this many bytes.
const QUEUE_MIN: u64 = 64 * 1024;

/// Each queued message is charged at least this many bytes of the queue's budget (so
/// empty messages cannot pile up for free).
const PER_MESSAGE: u64 = 64;

/// Messages the queue holds at most, whatever their size.
const QUEUE_MESSAGES: usize = 4096;

/// How long the server waits for a client to connect.
const ACCEPT_WAIT: Duration = Duration::from_secs(10);

/// Why a noq media connection failed.
#[derive(Debug, thiserror::Error)]
pub enum NoqMediaError {
    /// The connection or a path could not be set up.
    #[error(transparent)]
    Setup(#[from] NoqPerfError),
    /// The connection ended (the peer closed it, it timed out, or it sent a message
    /// longer than [`MAX_MESSAGE`]).
    #[error("the connection ended: {0}")]
    Ended(String),
    /// This end closed it.
    #[error("the connection was closed")]
    Closed,
}

#[derive(Default)]
struct Shared {
    error: Option<String>,
    stats: Option<ConnectionStats>,
    energy: Option<EnergySnapshot>,
    reads: AppReads,
    /// noq's id of each path, in path order, once it is open.
    path_ids: Vec<Option<noq::PathId>>,
    /// Why each path could not be opened, in path order.
    path_errors: Vec<Option<String>>,
}

fn lock(s: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running noq media connection (client or server end).
pub struct NoqMediaConnection {
    conn: noq::Connection,
    endpoint: noq::Endpoint,
    send: tokio::sync::Mutex<SendSlot>,
    deliveries: Numbered<(Bytes, u32)>,
    /// The queue's byte budget: the reading task takes what a message is charged, the
    /// application gives it back when it reads the message.
    budget: Arc<tokio::sync::Semaphore>,
    shared: Arc<Mutex<Shared>>,
    origin: std::time::Instant,
    paths: Vec<PathInfo>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// This end's half of the media stream: at hand (the server opened it), or still to come
/// from the stream the server opens (the client).
struct SendSlot {
    stream: Option<noq::SendStream>,
    pending: Option<oneshot::Receiver<noq::SendStream>>,
    next_id: u64,
}

/// Where the reading task finds its half of the media stream.
enum Source {
    /// Opened by this end.
    Ready(noq::RecvStream),
    /// The peer opens it: accept it and hand the sending half over.
    Accept(noq::Connection, oneshot::Sender<noq::SendStream>),
}

impl std::fmt::Debug for NoqMediaConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoqMediaConnection")
            .field("id", &self.conn.stable_id())
            .finish_non_exhaustive()
    }
}

/// A server endpoint taking noq media clients.
pub struct NoqMediaListener {
    endpoint: noq::Endpoint,
}

impl NoqMediaListener {
    /// Listens on `addr`, proving its identity with `crypto`.
    pub fn bind(
        addr: SocketAddr,
        crypto: &ServerCrypto,
    ) -> Result<NoqMediaListener, NoqMediaError> {
        Ok(NoqMediaListener { endpoint: noq_perf::server_endpoint(addr, crypto, ALPN, Some(0))? })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Result<SocketAddr, NoqMediaError> {
        self.endpoint.local_addr().map_err(|e| NoqMediaError::Setup(e.into()))
    }

    /// The next client trying to connect (`None`: the endpoint closed); its handshake
    /// runs in [`NoqIncoming::accept`], so a slow one holds up no other.
    pub async fn incoming(&self) -> Option<NoqIncoming> {
        let incoming = self.endpoint.accept().await?;
        Some(NoqIncoming { endpoint: self.endpoint.clone(), incoming })
    }

    /// The next client within 10 s, connected, with the media stream opened towards it.
    pub async fn accept(&self) -> Result<NoqMediaConnection, NoqMediaError> {
        let next = tokio::time::timeout(ACCEPT_WAIT, self.incoming())
            .await
            .map_err(|_| NoqMediaError::Ended("no client connected within 10 s".into()))?
            .ok_or_else(|| NoqMediaError::Ended("the endpoint closed".into()))?;
        next.accept().await
    }
}

/// A client whose connection attempt arrived ([`NoqMediaListener::incoming`]).
pub struct NoqIncoming {
    endpoint: noq::Endpoint,
    incoming: noq::Incoming,
}

impl NoqIncoming {
    /// Where it comes from.
    pub fn remote(&self) -> SocketAddr {
        self.incoming.remote_address()
    }

    /// Completes the handshake and opens the media stream towards the client.
    pub async fn accept(self) -> Result<NoqMediaConnection, NoqMediaError> {
        let ended = |e: String| NoqMediaError::Ended(e);
        let remote = self.incoming.remote_address();
        let conn = self.incoming.await.map_err(|e| ended(e.to_string()))?;
        let (send, recv) = conn.open_bi().await.map_err(|e| ended(e.to_string()))?;
        let local = self.endpoint.local_addr().map_err(|e| NoqMediaError::Setup(e.into()))?;
        let paths = vec![PathInfo {
            id: Some(PathId(0)),
            local,
            remote,
            iface: None,
            role: PathRole::Wired,
            error: None,
        }];
        let slot = SendSlot { stream: Some(send), pending: None, next_id: 0 };
        // The client sends only reports: the smallest queue.
        Ok(NoqMediaConnection::start(
            self.endpoint,
            conn,
            slot,
            Source::Ready(recv),
            paths,
            None,
            QUEUE_MIN,
        ))
    }
}

/// One client path of a noq media connection.
#[derive(Clone, Debug, PartialEq)]
pub struct NoqPath {
    /// Name in reports.
    pub name: String,
    /// Where it leaves from (`None`: where routing sends it; the first path always
    /// leaves so, from the connection's one socket).
    pub local: Option<IpAddr>,
    /// Where it goes (the first path's is the server's address).
    pub remote: SocketAddr,
    /// Its radio.
    pub role: PathRole,
}

/// Connects over `paths` (the first is the connection's own, to the server; one more noq
/// path for each further one, from its local address to its remote one), authenticating
/// the server with `crypto`; `recv_window` is the download-ahead in bytes, `power` the
/// radios' models.
pub async fn connect(
    paths: &[NoqPath],
    crypto: &ClientCrypto,
    recv_window: Option<u64>,
    power: &PowerModels,
) -> Result<NoqMediaConnection, NoqMediaError> {
    let first = paths.first().ok_or_else(|| {
        NoqMediaError::Setup(NoqPerfError::Path {
            name: "none".into(),
            reason: "no path given".into(),
        })
    })?;
    // noq holds at most NOQ_WINDOW_MAX of the download-ahead, the queue the rest.
    let window = recv_window.map(|w| w.min(NOQ_WINDOW_MAX));
    let queue = recv_window.map_or(QUEUE_MIN, |w| w.saturating_sub(NOQ_WINDOW_MAX));
    let (endpoint, conn) =
        noq_perf::connect(first.remote, crypto, ALPN, window.or(Some(NOQ_WINDOW_MAX)), Some(1))
            .await?;
    let local = endpoint.local_addr().map_err(|e| NoqMediaError::Setup(e.into()))?;
    let infos = paths
        .iter()
        .enumerate()
        .map(|(i, p)| PathInfo {
            id: Some(PathId(i as u32)),
            local: SocketAddr::new(p.local.unwrap_or(local.ip()), local.port()),
            remote: p.remote,
            iface: None,
            role: p.role,
            error: None,
        })
        .collect();
    let radios: Vec<KernelPath> = paths
        .iter()
        .map(|p| KernelPath {
            name: p.name.clone(),
            local: p.local,
            role: p.role,
            capacity_bps: None,
        })
        .collect();
    let opener_conn = conn.clone();
    let meter = KernelMeter::new(&radios, power, None, Instant::ZERO);
    let (tx, rx) = oneshot::channel();
    let slot = SendSlot { stream: None, pending: Some(rx), next_id: 0 };
    let mut c = NoqMediaConnection::start(
        endpoint,
        conn.clone(),
        slot,
        Source::Accept(conn, tx),
        infos,
        Some(meter),
        queue,
    );
    // The further paths open while the stream starts, as Braid's paths join after its
    // handshake: the player's clock starts here for every stack.
    let opener = {
        let shared = Arc::clone(&c.shared);
        let further: Vec<(SocketAddr, Option<IpAddr>)> =
            paths.iter().skip(1).map(|p| (p.remote, p.local)).collect();
        tokio::spawn(async move {
            for (i, &(remote, local)) in further.iter().enumerate() {
                let opened = noq_perf::open_path(&opener_conn, remote, local).await;
                let mut s = lock(&shared);
                match opened {
                    Ok(id) => s.path_ids[i + 1] = Some(id),
                    Err(e) => s.path_errors[i + 1] = Some(e.to_string()),
                }
            }
        })
    };
    c.tasks.push(opener);
    Ok(c)
}

impl NoqMediaConnection {
    fn start(
        endpoint: noq::Endpoint,
        conn: noq::Connection,
        send: SendSlot,
        source: Source,
        paths: Vec<PathInfo>,
        meter: Option<KernelMeter>,
        queue_bytes: u64,
    ) -> NoqMediaConnection {
        // The first path is the connection's own; the others open later (the client).
        let mut path_ids = vec![None; paths.len().max(1)];
        path_ids[0] = Some(noq::PathId::ZERO);
        let shared = Arc::new(Mutex::new(Shared {
            path_errors: vec![None; path_ids.len()],
            path_ids,
            ..Shared::default()
        }));
        let origin = std::time::Instant::now();
        let (tx, rx) = mpsc::channel(QUEUE_MESSAGES);
        let queue = u32::try_from(queue_bytes.max(QUEUE_MIN)).unwrap_or(u32::MAX);
        let budget = Arc::new(tokio::sync::Semaphore::new(queue as usize));
        let reader =
            tokio::spawn(read_stream(source, tx, Arc::clone(&budget), queue, Arc::clone(&shared)));
        let sampler =
            tokio::spawn(sample(conn.clone(), paths.clone(), meter, Arc::clone(&shared), origin));
        NoqMediaConnection {
            conn,
            endpoint,
            send: tokio::sync::Mutex::new(send),
            deliveries: Numbered::new(rx),
            budget,
            shared,
            origin,
            paths,
            tasks: vec![reader, sampler],
        }
    }

    /// Now on the connection's clock (zero when it started).
    pub fn now(&self) -> Instant {
        Instant::from_duration(self.origin.elapsed())
    }

    fn error(&self) -> NoqMediaError {
        match lock(&self.shared).error.clone() {
            Some(e) => NoqMediaError::Ended(e),
            None => NoqMediaError::Closed,
        }
    }

    /// Sends one message (waiting for the stream's credit); returns its id.
    pub async fn send_message(&self, data: Bytes) -> Result<u64, NoqMediaError> {
        let len = u32::try_from(data.len())
            .ok()
            .filter(|&n| n as usize <= MAX_MESSAGE)
            .ok_or_else(|| NoqMediaError::Ended(format!("a {}-byte message", data.len())))?;
        let mut slot = self.send.lock().await;
        if slot.stream.is_none()
            && let Some(rx) = slot.pending.take()
        {
            slot.stream = rx.await.ok();
        }
        let Some(stream) = slot.stream.as_mut() else { return Err(self.error()) };
        let ended = |e: noq::WriteError| NoqMediaError::Ended(e.to_string());
        stream.write_all(&len.to_be_bytes()).await.map_err(ended)?;
        stream.write_all(&data).await.map_err(ended)?;
        let id = slot.next_id;
        slot.next_id += 1;
        Ok(id)
    }

    fn delivered(&self, id: u64, (m, charge): (Bytes, u32)) -> Delivery {
        self.budget.add_permits(charge as usize);
        let now = self.now();
        lock(&self.shared).reads.record(now, m.len());
        Delivery::Message { id, data: m }
    }

    /// A message that already arrived, without waiting.
    pub fn try_read_message(&self) -> Option<Delivery> {
        let (id, m) = self.deliveries.try_next()?;
        Some(self.delivered(id, m))
    }

    /// The next message; waits for it (time spent waiting counts as the application
    /// starved for the read rate). After the connection ended, why.
    pub async fn read_message(&self) -> Result<Delivery, NoqMediaError> {
        let starved = || lock(&self.shared).reads.read.starve(self.now());
        match self.deliveries.next(starved).await {
            Some((id, m)) => Ok(self.delivered(id, m)),
            None => Err(self.error()),
        }
    }

    /// The latest statistics (noq's per-path figures, this end's reads).
    pub fn stats(&self) -> Option<ConnectionStats> {
        let s = lock(&self.shared);
        s.stats.clone().map(|st| s.reads.fill(st))
    }

    /// The client's radio energy; `None` on the server end.
    pub fn energy(&self) -> Option<EnergySnapshot> {
        lock(&self.shared).energy.clone()
    }

    /// The client's paths in the order given (the server end: the connection's first); a
    /// path noq could not open says why.
    pub fn paths(&self) -> Vec<PathInfo> {
        let failed = lock(&self.shared).path_errors.clone();
        let mut paths = self.paths.clone();
        for (p, e) in paths.iter_mut().zip(failed) {
            p.error = p.error.take().or(e);
        }
        paths
    }

    /// Closes the connection with `code` and `reason` and waits (at most a second) for
    /// the peer to hear it.
    pub async fn close(&self, code: u32, reason: &[u8]) {
        if let Some(stream) = self.send.lock().await.stream.as_mut() {
            let _ = stream.finish();
        }
        self.conn.close(code.into(), reason);
        for t in &self.tasks {
            t.abort();
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), self.endpoint.wait_idle()).await;
    }
}

impl Drop for NoqMediaConnection {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Moves messages off the stream while the application's queue has room in its byte
/// budget (`queue` bytes); records why the stream ended.
async fn read_stream(
    source: Source,
    tx: mpsc::Sender<(Bytes, u32)>,
    budget: Arc<tokio::sync::Semaphore>,
    queue: u32,
    shared: Arc<Mutex<Shared>>,
) {
    let mut recv = match source {
        Source::Ready(recv) => recv,
        Source::Accept(conn, sending) => match conn.accept_bi().await {
            Ok((send, recv)) => {
                let _ = sending.send(send);
                recv
            }
            Err(e) => {
                lock(&shared).error.get_or_insert(e.to_string());
                return;
            }
        },
    };
    let why = loop {
        let mut head = [0u8; 4];
        if let Err(e) = recv.read_exact(&mut head).await {
            break e.to_string();
        }
        let n = u32::from_be_bytes(head) as usize;
        if n > MAX_MESSAGE {
            break format!("the peer announced a {n}-byte message (at most {MAX_MESSAGE})");
        }
        let mut body = vec![0u8; n];
        if let Err(e) = recv.read_exact(&mut body).await {
            break e.to_string();
        }
        // Wait for room in the budget (a message larger than the whole budget takes all
        // of it): what the player has not read stays in noq's window meanwhile.
        let charge = u32::try_from((n as u64).max(PER_MESSAGE)).unwrap_or(u32::MAX).min(queue);
        let Ok(permit) = budget.acquire_many(charge).await else { return };
        permit.forget();
        if tx.send((Bytes::from(body), charge)).await.is_err() {
            return;
        }
    };
    lock(&shared).error.get_or_insert(why);
}

/// Every [`RADIO_INTERVAL`], on the client, the radios driven by each path's UDP bytes
/// (under WiFi's 20-ms active gap, so a steady stream keeps the radio active as
/// per-packet accounting would; at [`SAMPLE_INTERVAL`] a WiFi carrying a steady stream
/// read as active 4 s in 20 and its energy came out low); every [`SAMPLE_INTERVAL`]
/// noq's per-path figures into the statistics and the radios' energy.
async fn sample(
    conn: noq::Connection,
    infos: Vec<PathInfo>,
    mut meter: Option<KernelMeter>,
    shared: Arc<Mutex<Shared>>,
    origin: std::time::Instant,
) {
    let mut tick = tokio::time::interval(RADIO_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next_sample = tokio::time::Instant::now();
    loop {
        tick.tick().await;
        let now = Instant::from_duration(origin.elapsed());
        let ids = lock(&shared).path_ids.clone();
        let figures: Vec<Option<noq::PathStats>> =
            ids.iter().map(|id| id.and_then(|id| conn.path_stats(id))).collect();
        if let Some(m) = meter.as_mut() {
            let rx: Vec<u64> = figures.iter().map(|f| f.map_or(0, |f| f.udp_rx.bytes)).collect();
            let tx: Vec<u64> = figures.iter().map(|f| f.map_or(0, |f| f.udp_tx.bytes)).collect();
            m.on_path_totals(now, &rx, &tx);
        }
        if tokio::time::Instant::now() < next_sample {
            continue;
        }
        next_sample = tokio::time::Instant::now() + SAMPLE_INTERVAL;
        let rows = figures
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let role = infos.get(i).map_or(PathRole::Wired, |p| p.role);
                row(i, role, f.as_ref())
            })
            .collect();
        let energy = meter.as_mut().map(|m| m.snapshot(now));
        let mut s = lock(&shared);
        let mut st = crate::kernel::conn::stats_of(rows);
        // This end's view: the packets it sent that noq declared lost.
        st.lost_packets = st.paths.iter().map(|p| p.packets_lost).sum();
        s.stats = Some(st);
        if energy.is_some() {
            s.energy = energy;
        }
        if let Some(reason) = conn.close_reason() {
            s.error.get_or_insert(reason.to_string());
            return;
        }
    }
}

/// Path `i`'s row from noq's figures (UDP bytes for bytes; what this end sent and lost).
fn row(i: usize, role: PathRole, f: Option<&noq::PathStats>) -> PathStats {
    let base = crate::kernel::conn::path_stats(i as u32, role, PathStatus::Active);
    let Some(f) = f else { return base };
    PathStats {
        bytes_sent: f.udp_tx.bytes,
        bytes_received: f.udp_rx.bytes,
        data_bytes_sent: f.udp_tx.bytes,
        data_bytes_received: f.udp_rx.bytes,
        packets_sent: f.sent_packets,
        packets_lost: f.lost_packets,
        srtt: f.rtt,
        latest_rtt: f.rtt,
        cwnd: f.cwnd,
        ..base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    }

    /// A media server on a loopback port: its identity, listener and address.
    fn listening() -> (crate::tls::ServerIdentity, NoqMediaListener, SocketAddr) {
        let id = crate::tls::self_signed().unwrap();
        let any = SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);
        let listener = NoqMediaListener::bind(any, &id.crypto).unwrap();
        let addr = listener.local_addr().unwrap();
        (id, listener, addr)
    }

    #[test]
    fn messages_go_both_ways_in_order_with_their_ids() {
        runtime().block_on(async {
            let (id, listener, addr) = listening();
            let server = tokio::spawn(async move {
                let c = listener.accept().await.unwrap();
                for i in 0..20u8 {
                    assert_eq!(
                        c.send_message(Bytes::from(vec![i; 1000 * i as usize])).await.unwrap(),
                        u64::from(i)
                    );
                }
                let Delivery::Message { id, data } = c.read_message().await.unwrap() else {
                    panic!()
                };
                assert_eq!((id, &data[..]), (0, &b"report"[..]));
                c.close(0, b"done").await;
            });
            let path =
                NoqPath { name: "wifi".into(), local: None, remote: addr, role: PathRole::Wifi };
            let c = connect(&[path], &id.pinned_client(), Some(64 * 1024), &PowerModels::default())
                .await
                .unwrap();
            for i in 0..20u8 {
                let Delivery::Message { id, data } = c.read_message().await.unwrap() else {
                    panic!()
                };
                assert_eq!(id, u64::from(i));
                assert_eq!(data.len(), 1000 * i as usize);
                assert!(data.iter().all(|&b| b == i));
            }
            c.send_message(Bytes::from_static(b"report")).await.unwrap();
            server.await.unwrap();
            // The server closed: the client learns it, with a reason, and nothing panics.
            assert!(matches!(c.read_message().await, Err(NoqMediaError::Ended(_))));
            tokio::time::sleep(SAMPLE_INTERVAL * 2).await;
            let st = c.stats().unwrap();
            assert_eq!(st.messages_delivered, 20);
            assert!(st.paths[0].bytes_received > 190_000, "{:?}", st.paths[0]);
            assert!(c.energy().unwrap().total_j() > 0.0);
        });
    }

    #[test]
    fn a_peer_announcing_an_oversized_message_ends_the_connection_with_a_reason() {
        runtime().block_on(async {
            let (id, listener, addr) = listening();
            let server = tokio::spawn(async move {
                let c = listener.accept().await.unwrap();
                // The stream reaches the client with its first bytes.
                c.send_message(Bytes::from_static(b"header")).await.unwrap();
                let r = c.read_message().await;
                c.close(0, b"done").await;
                r
            });
            // A raw noq client on the media ALPN: it takes the server's stream and
            // announces a 4 GB message.
            let (_ep, conn) =
                noq_perf::connect(addr, &id.pinned_client(), ALPN, None, Some(1)).await.unwrap();
            let (mut send, _recv) = conn.accept_bi().await.unwrap();
            // Nor may it open streams of its own for the server to buffer.
            let more = tokio::time::timeout(Duration::from_millis(300), conn.open_bi()).await;
            assert!(more.is_err(), "the server let its client open a stream");
            send.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
            let r = tokio::time::timeout(Duration::from_secs(5), server).await.unwrap().unwrap();
            match r {
                Err(NoqMediaError::Ended(why)) => assert!(why.contains("announced"), "{why}"),
                other => panic!("{other:?}"),
            }
        });
    }
}
