//! `noq-multipath`: another multipath QUIC stack beside Braid's and the kernel's MPTCP —
//! n0's noq crate (a quinn fork implementing the IETF multipath extension), with its own
//! path scheduling and congestion control — running `braid perf`'s bulk run on real
//! sockets, so the three can be put on the same emulated links in one table.
//!
//! Both ends are noq: the server sends the bulk stream's messages (the same
//! [`BulkSource`] as Braid's perf, each after a 4-byte big-endian length) on a
//! bidirectional stream the client opens; the client verifies them in order, opens one
//! more path for each `--path` after the first (`Connection::open_path`, from that
//! path's local address to its remote one) and reports per path the UDP bytes noq
//! counted there, its RTT and the server's lost packets as the client sees them (none:
//! noq's loss counters are the sender's, which stay at the server). The ALPN is
//! `braid-perf-noq`, so neither end can be mistaken for a Braid endpoint.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use braid_transport::bulk::{BulkSource, BulkVerifier};
use braid_transport::proto::{ClientCrypto, ServerCrypto};
use tokio::time::Instant;

use crate::perf::{
    ClientOptions, ClientRun, End, EndPath, Event, HostPort, Interval, IntervalSum, MESSAGE_BYTES,
    PerfPath, PerfReport, Start, StartPath, Totals,
};

/// The profile's fixed name.
pub const NAME: &str = "noq-multipath";

/// One line for `braid profiles`.
pub const DESCRIPTION: &str = "n0's noq multipath QUIC (IETF multipath extension) with its own path scheduler and controller; real sockets: `braid perf`, `serve`, `play` and `compare --bed`";

/// The ALPN both ends require.
const ALPN: &[u8] = b"braid-perf-noq";

/// Paths a connection may have at once (each side's limit).
const MAX_PATHS: u32 = 8;

/// Longest message the client takes (the length prefix is the peer's word).
const MAX_MESSAGE: usize = 1 << 20;

/// Why a noq perf run failed.
#[derive(Debug, thiserror::Error)]
pub enum NoqPerfError {
    /// The TLS configuration does not suit QUIC.
    #[error("TLS configuration: {0}")]
    Tls(String),
    /// A socket failed.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// The connection could not be made or ended early.
    #[error("connection to {remote}: {reason}")]
    Connection {
        /// The server.
        remote: SocketAddr,
        /// Why.
        reason: String,
    },
    /// A path could not be opened.
    #[error("path {name}: {reason}")]
    Path {
        /// Its name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A message was not the bulk stream's.
    #[error(transparent)]
    Perf(#[from] Box<crate::perf::PerfError>),
    /// The stream ended or could not be read.
    #[error("message {id}: {reason}")]
    Stream {
        /// The message's id.
        id: u64,
        /// What was wrong.
        reason: String,
    },
}

/// noq's transport settings for a Braid run: multipath on, at most [`MAX_PATHS`] paths;
/// with `recv_window`, the stream's and the connection's receive windows (bytes); with
/// `peer_bidi`, the peer may open at most that many bidirectional streams and no
/// unidirectional one (a media session needs one stream, so a hostile peer cannot make
/// noq buffer for a hundred).
pub(crate) fn transport(
    recv_window: Option<u64>,
    peer_bidi: Option<u32>,
) -> Arc<noq::TransportConfig> {
    let mut t = noq::TransportConfig::default();
    t.max_concurrent_multipath_paths(MAX_PATHS);
    if let Some(w) = recv_window.and_then(|w| noq::VarInt::from_u64(w).ok()) {
        t.stream_receive_window(w);
        t.receive_window(w);
    }
    if let Some(n) = peer_bidi {
        t.max_concurrent_bidi_streams(n.into());
        t.max_concurrent_uni_streams(0u32.into());
    }
    Arc::new(t)
}

/// Serves bulk runs on `listen` until the task is dropped (or, with `one_off`, after one
/// client); `on_listening` hears the bound address, `on_accept` of each client.
pub async fn run_server(
    listen: SocketAddr,
    crypto: &ServerCrypto,
    one_off: bool,
    on_listening: impl FnOnce(SocketAddr),
    on_accept: impl FnMut(SocketAddr),
) -> Result<(), NoqPerfError> {
    let endpoint = server_endpoint(listen, crypto, ALPN, None)?;
    on_listening(endpoint.local_addr()?);
    serve_endpoint(endpoint, one_off, on_accept).await;
    Ok(())
}

/// A noq server endpoint on `listen` that requires `alpn` (`peer_bidi`: see
/// [`transport`]).
pub(crate) fn server_endpoint(
    listen: SocketAddr,
    crypto: &ServerCrypto,
    alpn: &[u8],
    peer_bidi: Option<u32>,
) -> Result<noq::Endpoint, NoqPerfError> {
    let mut tls = (*crypto.config).clone();
    tls.alpn_protocols = vec![alpn.to_vec()];
    let quic = noq::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| NoqPerfError::Tls(e.to_string()))?;
    let mut config = noq::ServerConfig::with_crypto(Arc::new(quic));
    config.transport_config(transport(None, peer_bidi));
    Ok(noq::Endpoint::server(config, listen)?)
}

/// A noq client connected to `remote` with `alpn` (one socket on the unspecified address:
/// each further path names its own local address and noq sends from it).
pub(crate) async fn connect(
    remote: SocketAddr,
    crypto: &ClientCrypto,
    alpn: &[u8],
    recv_window: Option<u64>,
    peer_bidi: Option<u32>,
) -> Result<(noq::Endpoint, noq::Connection), NoqPerfError> {
    let err = |reason: String| NoqPerfError::Connection { remote, reason };
    let mut tls = (*crypto.config).clone();
    tls.alpn_protocols = vec![alpn.to_vec()];
    let quic = noq::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| NoqPerfError::Tls(e.to_string()))?;
    let mut config = noq::ClientConfig::new(Arc::new(quic));
    config.transport_config(transport(recv_window, peer_bidi));
    let any = match remote {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    };
    let endpoint = noq::Endpoint::client(SocketAddr::new(any, 0))?;
    endpoint.set_default_client_config(config);
    let name = crypto
        .server_name
        .as_ref()
        .map_or_else(|| remote.ip().to_string(), |n| n.to_str().into_owned());
    let conn = endpoint
        .connect(remote, &name)
        .map_err(|e| err(e.to_string()))?
        .await
        .map_err(|e| err(e.to_string()))?;
    Ok((endpoint, conn))
}

/// Opens a path for each of `further` (name, remote, local address) on `conn`, after its
/// first; returns every path's id, the first's included.
pub(crate) async fn open_paths(
    conn: &noq::Connection,
    further: &[(String, SocketAddr, Option<IpAddr>)],
) -> Result<Vec<noq::PathId>, NoqPerfError> {
    let mut ids = vec![noq::PathId::ZERO];
    for (name, remote, local) in further {
        let id = open_path(conn, *remote, *local)
            .await
            .map_err(|e| NoqPerfError::Path { name: name.clone(), reason: e.to_string() })?;
        ids.push(id);
    }
    Ok(ids)
}

/// Opens one more path on `conn`, from `local` to `remote`. The server's connection ids
/// for further paths arrive just after the handshake, so an attempt refused for want of
/// them is tried again for up to 2 s.
pub(crate) async fn open_path(
    conn: &noq::Connection,
    remote: SocketAddr,
    local: Option<IpAddr>,
) -> Result<noq::PathId, noq::PathError> {
    let tuple = noq::FourTuple::new(remote, local);
    let mut tries = 0;
    loop {
        match conn.open_path(tuple, noq::PathStatus::Available).await {
            Ok(p) => return Ok(p.id()),
            Err(noq::PathError::RemoteCidsExhausted | noq::PathError::MaxPathIdReached)
                if tries < 40 =>
            {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Serves bulk runs on `endpoint` (see [`run_server`]).
async fn serve_endpoint(
    endpoint: noq::Endpoint,
    one_off: bool,
    mut on_accept: impl FnMut(SocketAddr),
) {
    while let Some(incoming) = endpoint.accept().await {
        let remote = incoming.remote_address();
        let Ok(conn) = incoming.await else { continue };
        on_accept(remote);
        let task = tokio::spawn(serve(conn));
        if one_off {
            let _ = task.await;
            break;
        }
    }
    endpoint.wait_idle().await;
}

/// Runs a noq server, the relay emulator for `scenario`'s paths and a noq client over
/// every path in this process, for `options.time` (default: the scenario's duration):
/// noq on the same emulated links as Braid's `perf client --scenario`.
pub async fn run_scenario(
    scenario: &braid_netem::scenario::Scenario,
    options: ClientOptions,
    on_event: &mut (dyn FnMut(Event<'_>) + Send),
) -> Result<ClientRun, NoqPerfError> {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let identity = crate::tls::self_signed().map_err(|e| NoqPerfError::Tls(e.to_string()))?;
    let endpoint = server_endpoint(SocketAddr::new(loopback, 0), &identity.crypto, ALPN, None)?;
    let server = endpoint.local_addr()?;
    let serving = tokio::spawn(serve_endpoint(endpoint, true, |_| {}));
    let relay = crate::relay::start(scenario, server, loopback, None, scenario.seed)
        .await
        .map_err(|e| NoqPerfError::Connection { remote: server, reason: e.to_string() })?;
    let paths = crate::perf::scenario_paths(scenario, &relay, loopback);
    let options = ClientOptions { time: options.time.or(Some(scenario.duration)), ..options };
    let run = run_client(&paths, &identity.pinned_client(), options, on_event).await;
    relay.stop().await;
    serving.abort();
    let mut run = run?;
    run.report.start.scenario = Some(scenario.name.clone());
    run.report.start.connecting_to = HostPort { host: loopback.to_string(), port: server.port() };
    let capacity: Option<f64> = paths.iter().map(|p| p.capacity_bps).sum();
    let end = &mut run.report.end;
    end.capacity_bps = capacity;
    end.share_of_capacity =
        capacity.map(|c| if c > 0.0 { end.sum_received.bits_per_second / c } else { 0.0 });
    Ok(run)
}

/// Sends the bulk stream on the client's first bidirectional stream until it goes.
async fn serve(conn: noq::Connection) {
    let Ok((mut send, _recv)) = conn.accept_bi().await else { return };
    let source = BulkSource::new(MESSAGE_BYTES, None);
    for id in 0.. {
        let Some(m) = source.message(id) else { return };
        let len = (m.len() as u32).to_be_bytes();
        if send.write_all(&len).await.is_err() || send.write_all(&m).await.is_err() {
            return;
        }
    }
}

/// Receives a bulk run from the server at `paths[0]`'s remote address, over every path,
/// for `options.time` (default 10 s).
pub async fn run_client(
    paths: &[PerfPath],
    crypto: &ClientCrypto,
    options: ClientOptions,
    on_event: &mut (dyn FnMut(Event<'_>) + Send),
) -> Result<ClientRun, NoqPerfError> {
    let first = paths.first().ok_or_else(|| NoqPerfError::Path {
        name: "none".into(),
        reason: "no path given".into(),
    })?;
    let remote = first.spec.remote;
    let err = |reason: String| NoqPerfError::Connection { remote, reason };
    let (endpoint, conn) = connect(remote, crypto, ALPN, None, None).await?;
    // The server's ids for the further paths arrive just after the handshake; a bulk run
    // measures from when every path is open, so it gives them that time first.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let further: Vec<(String, SocketAddr, Option<IpAddr>)> = paths[1..]
        .iter()
        .map(|p| {
            let local = Some(p.spec.local.ip()).filter(|ip| !ip.is_unspecified());
            (p.name.clone(), p.spec.remote, local)
        })
        .collect();
    let ids = open_paths(&conn, &further).await?;
    let time = options.time.unwrap_or(Duration::from_secs(10));
    let start = Start {
        connecting_to: HostPort { host: remote.ip().to_string(), port: remote.port() },
        scenario: None,
        profile: NAME.into(),
        time_s: time.as_secs_f64(),
        message_bytes: MESSAGE_BYTES,
        connection_id: format!("{:016x}", conn.stable_id()),
        paths: paths
            .iter()
            .map(|p| StartPath {
                name: p.name.clone(),
                local: p.spec.local.to_string(),
                remote: p.spec.remote.to_string(),
                role: p.spec.role.as_str().into(),
                iface: String::new(),
            })
            .collect(),
    };
    on_event(Event::Started(&start));
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| err(e.to_string()))?;
    send.write_all(b"G").await.map_err(|e| err(e.to_string()))?;
    let rx_bytes =
        |conn: &noq::Connection, id: noq::PathId| conn.path_stats(id).map_or(0, |s| s.udp_rx.bytes);
    let t0 = Instant::now();
    let end_at = t0 + time;
    let mut verifier = BulkVerifier::new(BulkSource::new(MESSAGE_BYTES, None), true);
    let (mut next_id, mut bytes, mut interval_bytes) = (0u64, 0u64, 0u64);
    let mut intervals = Vec::new();
    let mut last_rx: Vec<u64> = ids.iter().map(|&id| rx_bytes(&conn, id)).collect();
    let first_rx = last_rx.clone();
    let mut interval_start = t0;
    let mut next_report = t0 + options.interval;
    // Received bytes not yet taken as messages: reads are cut short by the interval
    // timer, so the stream is read in pieces (a cancelled `read` loses nothing) and the
    // messages are taken out of this buffer.
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let now = Instant::now();
        if now >= next_report || now >= end_at {
            let sum = IntervalSum::new(
                (interval_start - t0).as_secs_f64(),
                (now - t0).as_secs_f64(),
                interval_bytes,
            );
            let streams = ids
                .iter()
                .enumerate()
                .map(|(i, &id)| {
                    let rx = rx_bytes(&conn, id);
                    let delta = rx.saturating_sub(last_rx[i]);
                    last_rx[i] = rx;
                    sum.stream(i, paths[i].name.clone(), delta)
                })
                .collect();
            intervals.push(Interval { streams, sum });
            if let Some(i) = intervals.last() {
                on_event(Event::Interval(i));
            }
            interval_start = now;
            interval_bytes = 0;
            next_report = now + options.interval;
            if now >= end_at {
                break;
            }
        }
        let mut taken = 0;
        while let Some(head) = pending.get(taken..taken + 4) {
            let n = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
            if n > MAX_MESSAGE {
                let reason = format!("a {n}-byte message");
                return Err(NoqPerfError::Stream { id: next_id, reason });
            }
            let Some(m) = pending.get(taken + 4..taken + 4 + n) else { break };
            crate::perf::verify(&mut verifier, next_id, m).map_err(Box::new)?;
            next_id += 1;
            bytes += n as u64;
            interval_bytes += n as u64;
            taken += 4 + n;
        }
        pending.drain(..taken);
        let wait = next_report.min(end_at);
        match tokio::time::timeout_at(wait, recv.read(&mut chunk)).await {
            Err(_) => {}
            Ok(Ok(Some(n))) => pending.extend_from_slice(&chunk[..n]),
            Ok(Ok(None)) => {
                let reason = "the server ended the stream".to_string();
                return Err(NoqPerfError::Stream { id: next_id, reason });
            }
            Ok(Err(e)) => return Err(NoqPerfError::Stream { id: next_id, reason: e.to_string() }),
        }
    }
    let seconds = (Instant::now() - t0).as_secs_f64().max(1e-9);
    let rows = ids
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            let stats = conn.path_stats(id);
            let path_bytes = last_rx[i].saturating_sub(first_rx[i]);
            EndPath {
                name: paths[i].name.clone(),
                bytes: path_bytes,
                bits_per_second: path_bytes as f64 * 8.0 / seconds,
                rtt_ms: stats.map_or(0.0, |s| s.rtt.as_secs_f64() * 1e3),
                retransmits: 0,
                capacity_bps: paths[i].capacity_bps.unwrap_or(0.0),
                error: String::new(),
                energy_j: None,
            }
        })
        .collect();
    let local: Vec<SocketAddr> = paths.iter().map(|p| p.spec.local).collect();
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    let goodput = bytes as f64 * 8.0 / seconds;
    let totals = Totals { bytes, seconds, bits_per_second: goodput };
    let end = End {
        sum_received: totals.clone(),
        sum_sent: totals,
        paths: rows,
        verified: true,
        sender_counters: false,
        capacity_bps: None,
        share_of_capacity: None,
        energy_j: None,
        mode_timeline: Vec::new(),
        failed_mode_switches: None,
    };
    Ok(ClientRun {
        report: PerfReport { start, intervals, end },
        connection_id: conn.stable_id() as u64,
        local,
        messages: next_id,
    })
}
