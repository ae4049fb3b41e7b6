//! The UDP driver: runs a sans-IO [`proto::Connection`] on real sockets (tokio).
//!
//! It is thin on purpose: every protocol decision is the connection's. The driver only
//!
//! - opens one UDP socket per path (client), bound to a local address and, on Linux,
//!   optionally to an interface (`SO_BINDTODEVICE`), or one shared socket for a server
//!   [`Endpoint`] that routes datagrams to connections by connection id
//!   ([`proto::peek_connection_id`]);
//! - owns each connection in one task that waits on socket readiness, the connection's
//!   timer ([`proto::Connection::poll_timeout`]) and the application's commands, and after
//!   every input drains [`proto::Connection::poll_transmit`] to the right socket;
//! - maps tokio's clock onto [`Instant`] (microseconds since the connection's task began);
//! - turns socket trouble into connection-level facts: a path whose socket fails (its
//!   interface or address disappeared) is removed and the connection continues on the
//!   others; "port unreachable" answers while nothing was received on any path for
//!   [`UNREACHABLE_AFTER`] close the connection (the peer process is gone).
//!
//! The application API is small and async: [`connect`], [`listen`] / [`Endpoint::accept`],
//! [`ConnectionHandle::send_message`] (waits for flow-control credit),
//! [`ConnectionHandle::read_message`] (waits for the next in-order message or gap),
//! [`ConnectionHandle::stats`], [`ConnectionHandle::close`].
//!
//! Reads are pulled: the task calls [`proto::Connection::read_message`] only when the small
//! delivery queue toward the application has room, so the connection's read-rate meter and
//! flow-control window follow what the application really consumes.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

pub use bytes::Bytes;
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use braid_transport::energy::{Radio, RadioParams};
use braid_transport::netem::IP_UDP_OVERHEAD;
use braid_transport::path::{PathId, PathRole};
use braid_transport::policy::{AeSumConfig, ModeSwitch, PathMode, PathPolicy};
use braid_transport::proto::{
    self, CloseReason, Config, ConnectionStats, Delivery, Event, Reliability, SendError,
};
use braid_transport::time::Instant;

/// With "port unreachable" answers and nothing received on any path for this long, the
/// peer is considered gone.
pub const UNREACHABLE_AFTER: Duration = Duration::from_secs(1);

/// Default for [`ConnectOptions::handshake_timeout`].
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);

/// Socket buffer sizes asked for (the OS may cap them).
const SOCKET_BUFFER_BYTES: usize = 4 << 20;
/// Largest datagram read.
const RECV_BUFFER: usize = 65_536;
/// Datagrams handled before the connection gets a chance to answer.
const RECV_BATCH: usize = 64;
/// Datagrams sent before input (ACKs) is looked at again.
const SEND_BATCH: usize = 64;
/// Messages waiting for the application (per connection).
const DELIVERY_QUEUE: usize = 4;
/// Messages the application may hand over ahead of the connection taking them.
const SEND_QUEUE: usize = 4;
/// Datagrams waiting for a server connection's task.
const SERVER_INPUT_QUEUE: usize = 4096;
/// Connections one endpoint holds at once (half-open ones included).
const MAX_CONNECTIONS: usize = 256;

/// What went wrong with a connection or a socket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// `connect` was given no path.
    #[error("no path to connect on")]
    NoPaths,
    /// A socket could not be created or bound.
    #[error("cannot bind a UDP socket to {addr}: {message}")]
    Bind {
        /// The local address.
        addr: SocketAddr,
        /// The OS error.
        message: String,
    },
    /// `SO_BINDTODEVICE` failed (unknown interface, missing privilege, not Linux).
    #[error("cannot bind a socket to interface `{iface}`: {message}")]
    BindDevice {
        /// The interface name.
        iface: String,
        /// The OS error.
        message: String,
    },
    /// Connecting the socket to the remote failed (e.g. no route).
    #[error("cannot reach {remote} from {local}: {message}")]
    Route {
        /// The local address.
        local: SocketAddr,
        /// The remote address.
        remote: SocketAddr,
        /// The OS error.
        message: String,
    },
    /// No handshake answer in time.
    #[error("no answer from {remote} within {} s (is a braid server running there?)", secs(*.after))]
    HandshakeTimeout {
        /// The server address.
        remote: SocketAddr,
        /// How long the client waited.
        after: Duration,
    },
    /// The server's host answered "port unreachable" to the handshake.
    #[error("{remote} refused the connection (nothing listens on that port)")]
    Refused {
        /// The server address.
        remote: SocketAddr,
    },
    /// "Port unreachable" answers and nothing arrived on any path for a while.
    #[error("the peer is gone: its port is unreachable and nothing arrived for {:.1} s", .after.as_secs_f64())]
    PeerUnreachable {
        /// How long nothing arrived.
        after: Duration,
    },
    /// Nothing was received for the idle timeout.
    #[error("connection timed out: nothing received for {} s", secs(*.after))]
    IdleTimeout {
        /// The idle timeout.
        after: Duration,
    },
    /// The peer closed the connection.
    #[error("the peer closed the connection (code {code}{})", if reason.is_empty() { String::new() } else { format!(": {reason}") })]
    PeerClosed {
        /// Its code.
        code: u64,
        /// Its reason.
        reason: String,
    },
    /// This side closed the connection.
    #[error("the connection was closed")]
    LocallyClosed,
    /// Every path's socket failed.
    #[error("every path failed; last error: {last}")]
    AllPathsFailed {
        /// The last socket error.
        last: String,
    },
    /// The driver task stopped unexpectedly.
    #[error("the connection's task stopped")]
    TaskGone,
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if (s - s.round()).abs() < 1e-9 { format!("{}", s.round() as u64) } else { format!("{s:.1}") }
}

/// One path a client opens: its socket's local address (port 0 = any) and optional
/// interface, the remote it talks to, and the access-network role announced to the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSpec {
    /// Local address to bind (an unspecified IP and/or port 0 let the OS choose).
    pub local: SocketAddr,
    /// Interface to bind to with `SO_BINDTODEVICE` (Linux only).
    pub iface: Option<String>,
    /// The server (or relay) address this path sends to.
    pub remote: SocketAddr,
    /// The access network, announced in the handshake / PATH_JOIN.
    pub role: PathRole,
}

impl PathSpec {
    /// A path from any local address of `remote`'s family to `remote`.
    pub fn to(remote: SocketAddr, role: PathRole) -> PathSpec {
        PathSpec { local: unspecified_for(remote), iface: None, remote, role }
    }
}

/// The unspecified address (port 0) of `remote`'s family.
pub fn unspecified_for(remote: SocketAddr) -> SocketAddr {
    match remote.ip() {
        IpAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        IpAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

/// Client options beyond the connection's [`Config`].
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Give up when the handshake has not completed after this long.
    pub handshake_timeout: Duration,
    /// The receiver-side path policy to run beside the connection (the profile's:
    /// aeSUM's Partial/Full mode switch for `mptcp-qe`, WiFi-first handover for
    /// `handover`); [`PathPolicy::None`] runs none.
    pub path_policy: PathPolicy,
    /// aeSUM's settings, when the policy runs it.
    pub aesum: AeSumConfig,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            path_policy: PathPolicy::None,
            aesum: AeSumConfig::default(),
        }
    }
}

impl ConnectOptions {
    /// The defaults, running `policy` beside the connection (a profile's `path_policy`).
    pub fn with_path_policy(policy: PathPolicy) -> ConnectOptions {
        ConnectOptions { path_policy: policy, ..ConnectOptions::default() }
    }
}

/// One client path's radio, from the energy model (ALGORITHMS.md §5) driven by the
/// datagrams the path's socket really sent and received.
#[derive(Debug, Clone, PartialEq)]
pub struct RadioSnapshot {
    /// The path's role (which radio parameters apply).
    pub role: PathRole,
    /// Energy so far, joules.
    pub energy_j: f64,
    /// Power now (the radio state's power), mW.
    pub power_mw: f64,
    /// Whether the radio is awake (promoting, active or in its tail).
    pub awake: bool,
    /// Time spent in the active state.
    pub active: Duration,
}

/// The client's energy and path mode.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnergySnapshot {
    /// Per client path, in path order; `None` for roles without a radio model (wired).
    pub radios: Vec<Option<RadioSnapshot>>,
    /// The path mode now, when the connection runs a mode switch.
    pub mode: Option<PathMode>,
    /// Every mode with the time since the connection started when it began, oldest first.
    pub timeline: Vec<(Duration, PathMode)>,
    /// Time spent in Partial mode.
    pub time_in_partial: Duration,
    /// aeSUM's latest forecast of the cheap path's rate, bits/s.
    pub forecast_bps: Option<f64>,
}

impl EnergySnapshot {
    /// Energy of every radio, joules.
    pub fn total_j(&self) -> f64 {
        self.radios.iter().flatten().map(|r| r.energy_j).sum()
    }

    /// Power of every radio now, mW.
    pub fn power_mw(&self) -> f64 {
        self.radios.iter().flatten().map(|r| r.power_mw).sum()
    }

    /// Mode changes so far.
    pub fn switches(&self) -> usize {
        self.timeline.len().saturating_sub(1)
    }
}

/// A client's radios and mode switch, fed from the driver's socket activity.
struct EnergyMeter {
    radios: Vec<Option<Radio>>,
    roles: Vec<PathRole>,
    mode_switch: Option<ModeSwitch>,
}

impl EnergyMeter {
    fn new(roles: Vec<PathRole>, options: &ConnectOptions, now: Instant) -> EnergyMeter {
        EnergyMeter {
            radios: roles
                .iter()
                .map(|&r| RadioParams::builtin(r).map(|p| Radio::new(p, now)))
                .collect(),
            roles,
            mode_switch: options.path_policy.mode_switch_with(&options.aesum, now),
        }
    }

    fn on_traffic(&mut self, idx: usize, now: Instant, up: usize, down: usize) {
        let wire = |n: usize| if n == 0 { 0 } else { n as u64 + u64::from(IP_UDP_OVERHEAD) };
        if let Some(Some(r)) = self.radios.get_mut(idx) {
            r.on_traffic(now, wire(up), wire(down));
        }
    }

    fn snapshot(&mut self, now: Instant) -> EnergySnapshot {
        let radios = self
            .radios
            .iter_mut()
            .zip(&self.roles)
            .map(|(r, &role)| {
                r.as_mut().map(|r| {
                    r.advance(now);
                    RadioSnapshot {
                        role,
                        energy_j: r.energy_j(),
                        power_mw: r.state_power_mw(now),
                        awake: r.is_awake(now),
                        active: r.active_time(),
                    }
                })
            })
            .collect();
        let ms = self.mode_switch.as_ref();
        EnergySnapshot {
            radios,
            mode: ms.map(ModeSwitch::mode),
            timeline: ms.map_or_else(Vec::new, |m| {
                m.timeline().iter().map(|&(t, mode)| (t.since_epoch(), mode)).collect()
            }),
            time_in_partial: ms.map_or(Duration::ZERO, |m| m.time_in_partial(now)),
            forecast_bps: ms.and_then(ModeSwitch::forecast_bps),
        }
    }
}

/// A client path as the driver sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathInfo {
    /// The connection's id for the path (`None` if it could not be added).
    pub id: Option<PathId>,
    /// The socket's local address.
    pub local: SocketAddr,
    /// The remote address.
    pub remote: SocketAddr,
    /// The interface it is bound to.
    pub iface: Option<String>,
    /// The role announced.
    pub role: PathRole,
    /// Why the path was given up (its socket failed), if it was.
    pub error: Option<String>,
}

/// Driver-level counters of a server endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Datagrams for no known connection that were not a valid handshake.
    pub dropped_unknown: u64,
    /// Datagrams dropped because a connection's input queue was full.
    pub dropped_overflow: u64,
    /// Handshakes refused because the endpoint holds too many connections or too many
    /// wait to be accepted.
    pub refused_full: u64,
}

/// Wall-clock mapping: [`Instant`] = microseconds since `origin`.
#[derive(Debug, Clone, Copy)]
struct Clock {
    origin: tokio::time::Instant,
}

impl Clock {
    fn start() -> Clock {
        Clock { origin: tokio::time::Instant::now() }
    }
    fn now(&self) -> Instant {
        Instant::from_duration(self.origin.elapsed())
    }
    fn at(&self, t: Instant) -> tokio::time::Instant {
        self.origin + t.since_epoch()
    }
}

enum Command {
    Stats(oneshot::Sender<ConnectionStats>),
    Energy(oneshot::Sender<Option<EnergySnapshot>>),
    Close {
        code: u64,
        reason: Vec<u8>,
    },
    /// Tests: act as if client path `idx`'s socket failed.
    #[cfg(test)]
    BreakPath(usize),
}

#[derive(Default)]
struct SharedState {
    error: Option<DriverError>,
    final_stats: Option<ConnectionStats>,
    final_energy: Option<EnergySnapshot>,
    paths: Vec<PathInfo>,
}

type Shared = Arc<Mutex<SharedState>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, SharedState> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running connection (client or server side). Cheap to share behind an `Arc`; every
/// method takes `&self`.
pub struct ConnectionHandle {
    commands: mpsc::UnboundedSender<Command>,
    sends: mpsc::Sender<(Bytes, Reliability)>,
    next_id: Mutex<u64>,
    deliveries: tokio::sync::Mutex<mpsc::Receiver<Delivery>>,
    shared: Shared,
    task: Mutex<Option<JoinHandle<()>>>,
    connection_id: u64,
    remote: SocketAddr,
    clock: Clock,
}

/// What [`connect`] returns.
pub type ClientConnection = ConnectionHandle;

impl std::fmt::Debug for ConnectionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionHandle")
            .field("connection_id", &self.connection_id)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl ConnectionHandle {
    /// The connection id.
    pub fn connection_id(&self) -> u64 {
        self.connection_id
    }

    /// The peer's address on the first path.
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// The connection's clock: what it calls `now`. Deadlines given to
    /// [`ConnectionHandle::send_message`] (`Reliability::Deadline { at, .. }`) are on it.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Queues one message, waiting while the connection has no flow-control credit for it.
    /// Returns its id (0, 1, 2, … in call order). A message larger than the peer's whole
    /// receive buffer never fits and waits forever: keep messages well below it.
    pub async fn send_message(
        &self,
        data: Bytes,
        reliability: Reliability,
    ) -> Result<u64, DriverError> {
        let permit = match self.sends.reserve().await {
            Ok(p) => p,
            Err(_) => return Err(self.error()),
        };
        let mut next = self.next_id.lock().unwrap_or_else(|e| e.into_inner());
        let id = *next;
        *next += 1;
        permit.send((data, reliability));
        Ok(id)
    }

    /// The next in-order message or gap; waits for it. After the connection closed (and
    /// what it had delivered was read), the reason.
    pub async fn read_message(&self) -> Result<Delivery, DriverError> {
        let mut rx = self.deliveries.lock().await;
        match rx.recv().await {
            Some(d) => Ok(d),
            None => Err(self.error()),
        }
    }

    /// Current statistics (the last ones once the connection ended).
    pub async fn stats(&self) -> Option<ConnectionStats> {
        let (tx, rx) = oneshot::channel();
        if self.commands.send(Command::Stats(tx)).is_ok()
            && let Ok(s) = rx.await
        {
            return Some(s);
        }
        lock(&self.shared).final_stats.clone()
    }

    /// The client's radio energy and path mode (the last ones once the connection ended);
    /// `None` on the server side.
    pub async fn energy(&self) -> Option<EnergySnapshot> {
        let (tx, rx) = oneshot::channel();
        if self.commands.send(Command::Energy(tx)).is_ok()
            && let Ok(s) = rx.await
        {
            return s;
        }
        lock(&self.shared).final_energy.clone()
    }

    /// The client's paths (empty on the server side).
    pub fn paths(&self) -> Vec<PathInfo> {
        lock(&self.shared).paths.clone()
    }

    /// Why the connection ended, once it has.
    pub fn close_reason(&self) -> Option<DriverError> {
        lock(&self.shared).error.clone()
    }

    /// Whether the connection's task has finished.
    pub fn is_finished(&self) -> bool {
        let g = self.task.lock().unwrap_or_else(|e| e.into_inner());
        g.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Closes the connection (CLOSE goes out on every validated path) and waits, at most
    /// one second, for the task to send it and stop.
    pub async fn close(&self, code: u64, reason: &[u8]) {
        let _ = self.commands.send(Command::Close { code, reason: reason.to_vec() });
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = task {
            // Past the limit the application stopped reading and the task is parked on
            // delivery; it ends when the handle is dropped.
            let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
        }
    }

    fn error(&self) -> DriverError {
        lock(&self.shared).error.clone().unwrap_or(DriverError::TaskGone)
    }
}

impl Drop for ConnectionHandle {
    fn drop(&mut self) {
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = task {
            // Say goodbye if still running, then let the task finish on its own.
            let _ = self.commands.send(Command::Close { code: 0, reason: Vec::new() });
            drop(t);
        }
    }
}

// ----- sockets -----

fn bind_socket(local: SocketAddr, iface: Option<&str>) -> Result<std::net::UdpSocket, DriverError> {
    use socket2::{Domain, Protocol, Socket, Type};
    let bind_err = |e: io::Error| DriverError::Bind { addr: local, message: e.to_string() };
    let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))
        .map_err(bind_err)?;
    if let Some(name) = iface {
        bind_device(&s, name)?;
    }
    // Larger buffers absorb bursts; the OS caps them at its maximum.
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER_BYTES);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER_BYTES);
    s.set_nonblocking(true).map_err(bind_err)?;
    s.bind(&local.into()).map_err(bind_err)?;
    Ok(s.into())
}

#[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
fn bind_device(s: &socket2::Socket, name: &str) -> Result<(), DriverError> {
    s.bind_device(Some(name.as_bytes()))
        .map_err(|e| DriverError::BindDevice { iface: name.to_string(), message: e.to_string() })
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "fuchsia")))]
fn bind_device(_s: &socket2::Socket, name: &str) -> Result<(), DriverError> {
    Err(DriverError::BindDevice {
        iface: name.to_string(),
        message: "only supported on Linux".into(),
    })
}

// ----- client -----

struct ClientPath {
    sock: UdpSocket,
    local: SocketAddr,
    remote: SocketAddr,
    id: Option<PathId>,
    role: PathRole,
    failed: bool,
}

/// Connects to a server over `paths` (the first carries the handshake; the others join
/// once it completes) with the default [`ConnectOptions`]. `seed` seeds the connection
/// (its id and tokens): give each connection a different one.
pub async fn connect(
    config: Arc<Config>,
    paths: Vec<PathSpec>,
    seed: u64,
) -> Result<ClientConnection, DriverError> {
    connect_with(config, paths, seed, ConnectOptions::default()).await
}

/// [`connect`] with explicit options.
pub async fn connect_with(
    config: Arc<Config>,
    specs: Vec<PathSpec>,
    seed: u64,
    options: ConnectOptions,
) -> Result<ClientConnection, DriverError> {
    let Some(first) = specs.first() else {
        return Err(DriverError::NoPaths);
    };
    let remote = first.remote;
    let mut paths = Vec::with_capacity(specs.len());
    for spec in &specs {
        let std_sock = bind_socket(spec.local, spec.iface.as_deref())?;
        let sock = UdpSocket::from_std(std_sock)
            .map_err(|e| DriverError::Bind { addr: spec.local, message: e.to_string() })?;
        let route_err = |e: io::Error| DriverError::Route {
            local: spec.local,
            remote: spec.remote,
            message: e.to_string(),
        };
        sock.connect(spec.remote).await.map_err(route_err)?;
        let local = sock.local_addr().map_err(route_err)?;
        paths.push(ClientPath {
            sock,
            local,
            remote: spec.remote,
            id: None,
            role: spec.role,
            failed: false,
        });
    }
    let shared: Shared = Arc::new(Mutex::new(SharedState {
        paths: paths
            .iter()
            .zip(&specs)
            .map(|(p, s)| PathInfo {
                id: None,
                local: p.local,
                remote: p.remote,
                iface: s.iface.clone(),
                role: p.role,
                error: None,
            })
            .collect(),
        ..SharedState::default()
    }));
    let clock = Clock::start();
    let p0 = &mut paths[0];
    p0.id = Some(PathId(0));
    let conn = proto::Connection::connect(
        Arc::clone(&config),
        clock.now(),
        seed,
        p0.local,
        p0.remote,
        p0.role,
    );
    lock(&shared).paths[0].id = Some(PathId(0));
    let meter = EnergyMeter::new(paths.iter().map(|p| p.role).collect(), &options, clock.now());
    let (ready_tx, ready_rx) = oneshot::channel();
    let (handle, task) = spawn_task(
        conn,
        clock,
        Io::Client { paths },
        Some(meter),
        Arc::clone(&shared),
        Some(ready_tx),
        remote,
        config.idle_timeout,
    );
    match tokio::time::timeout(options.handshake_timeout, ready_rx).await {
        Ok(Ok(Ok(()))) => {
            *handle.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
            Ok(handle)
        }
        Ok(Ok(Err(e))) => {
            task.abort();
            Err(e)
        }
        Ok(Err(_)) => {
            task.abort();
            Err(lock(&shared).error.clone().unwrap_or(DriverError::TaskGone))
        }
        Err(_) => {
            task.abort();
            Err(DriverError::HandshakeTimeout { remote, after: options.handshake_timeout })
        }
    }
}

// ----- server -----

struct Incoming {
    data: Vec<u8>,
    remote: SocketAddr,
}

#[derive(Default)]
struct EndpointShared {
    stats: EndpointStats,
}

/// A server socket that accepts connections.
pub struct Endpoint {
    local: SocketAddr,
    accepts: tokio::sync::Mutex<mpsc::Receiver<ConnectionHandle>>,
    shared: Arc<Mutex<EndpointShared>>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("local", &self.local).finish_non_exhaustive()
    }
}

/// Listens on `addr` with connection settings `config`; connections are seeded from the
/// OS's random hash keys (use [`listen_seeded`] for reproducible runs).
pub async fn listen(addr: SocketAddr, config: Arc<Config>) -> Result<Endpoint, DriverError> {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x0062_7261_6964);
    listen_seeded(addr, config, h.finish()).await
}

/// [`listen`] with connection `k` seeded `seed + k`.
pub async fn listen_seeded(
    addr: SocketAddr,
    config: Arc<Config>,
    seed: u64,
) -> Result<Endpoint, DriverError> {
    let std_sock = bind_socket(addr, None)?;
    let sock = UdpSocket::from_std(std_sock)
        .map_err(|e| DriverError::Bind { addr, message: e.to_string() })?;
    let local =
        sock.local_addr().map_err(|e| DriverError::Bind { addr, message: e.to_string() })?;
    let sock = Arc::new(sock);
    let shared = Arc::new(Mutex::new(EndpointShared::default()));
    let (accept_tx, accept_rx) = mpsc::channel(64);
    let task =
        tokio::spawn(endpoint_loop(sock, local, config, seed, accept_tx, Arc::clone(&shared)));
    Ok(Endpoint { local, accepts: tokio::sync::Mutex::new(accept_rx), shared, task })
}

impl Endpoint {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The next new connection (`None` once the endpoint stopped).
    pub async fn accept(&self) -> Option<ConnectionHandle> {
        self.accepts.lock().await.recv().await
    }

    /// Driver-level counters.
    pub fn stats(&self) -> EndpointStats {
        self.shared.lock().unwrap_or_else(|e| e.into_inner()).stats
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn endpoint_loop(
    sock: Arc<UdpSocket>,
    local: SocketAddr,
    config: Arc<Config>,
    seed: u64,
    accepts: mpsc::Sender<ConnectionHandle>,
    shared: Arc<Mutex<EndpointShared>>,
) {
    let mut routes: BTreeMap<u64, mpsc::Sender<Incoming>> = BTreeMap::new();
    let mut buf = vec![0u8; RECV_BUFFER];
    let mut accepted = 0u64;
    loop {
        let (n, remote) = match sock.recv_from(&mut buf).await {
            Ok(x) => x,
            // ICMP errors for earlier sends, or a transient failure: keep serving.
            Err(_) => continue,
        };
        let data = buf.get(..n).unwrap_or(&[]);
        let count = |f: fn(&mut EndpointStats)| {
            f(&mut shared.lock().unwrap_or_else(|e| e.into_inner()).stats)
        };
        let Some(cid) = proto::peek_connection_id(data) else {
            count(|s| s.dropped_unknown += 1);
            continue;
        };
        if let Some(tx) = routes.get(&cid) {
            if tx.is_closed() {
                routes.remove(&cid);
            } else {
                match tx.try_send(Incoming { data: data.to_vec(), remote }) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => count(|s| s.dropped_overflow += 1),
                    Err(mpsc::error::TrySendError::Closed(_)) => {
                        routes.remove(&cid);
                    }
                }
                continue;
            }
        }
        // A new connection, if this is a client hello.
        routes.retain(|_, tx| !tx.is_closed());
        if routes.len() >= MAX_CONNECTIONS {
            count(|s| s.refused_full += 1);
            continue;
        }
        let clock = Clock::start();
        let conn = match proto::Connection::accept(
            Arc::clone(&config),
            clock.now(),
            seed.wrapping_add(accepted),
            local,
            remote,
            data,
        ) {
            Ok(c) => c,
            Err(_) => {
                count(|s| s.dropped_unknown += 1);
                continue;
            }
        };
        accepted += 1;
        count(|s| s.accepted += 1);
        let (in_tx, in_rx) = mpsc::channel(SERVER_INPUT_QUEUE);
        routes.insert(cid, in_tx);
        let shared_conn: Shared = Arc::new(Mutex::new(SharedState::default()));
        let io = Io::Server { sock: Arc::clone(&sock), local, input: in_rx };
        let (handle, task) =
            spawn_task(conn, clock, io, None, shared_conn, None, remote, config.idle_timeout);
        *handle.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        // Never block routing on a slow acceptor: past the queue, new connections are
        // refused (dropping the handle closes them).
        match accepts.try_send(handle) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(h)) => {
                drop(h);
                count(|s| s.refused_full += 1);
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return,
        }
    }
}

// ----- the connection task -----

enum Io {
    Client { paths: Vec<ClientPath> },
    Server { sock: Arc<UdpSocket>, local: SocketAddr, input: mpsc::Receiver<Incoming> },
}

enum Wake {
    Command(Option<Command>),
    /// Client path `idx` has a datagram of `len` bytes in the buffer.
    Datagram {
        idx: usize,
        len: usize,
    },
    /// A client path's socket failed.
    SocketError {
        idx: usize,
        error: io::Error,
    },
    /// Server input.
    Incoming(Option<Incoming>),
    Timer,
    DeliveryRoom,
    AppSend(Option<(Bytes, Reliability)>),
}

// Private, with one call per side (client, server): a struct would only rename the list.
#[allow(clippy::too_many_arguments)]
fn spawn_task(
    conn: proto::Connection,
    clock: Clock,
    io: Io,
    meter: Option<EnergyMeter>,
    shared: Shared,
    ready: Option<oneshot::Sender<Result<(), DriverError>>>,
    remote: SocketAddr,
    idle_timeout: Duration,
) -> (ConnectionHandle, JoinHandle<()>) {
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (send_tx, send_rx) = mpsc::channel(SEND_QUEUE);
    let (deliver_tx, deliver_rx) = mpsc::channel(DELIVERY_QUEUE);
    let connection_id = conn.connection_id();
    let task = Task {
        conn,
        clock,
        io,
        meter,
        shared: Arc::clone(&shared),
        ready,
        commands: cmd_rx,
        commands_open: true,
        sends: send_rx,
        sends_open: true,
        send_stash: None,
        deliveries: deliver_tx,
        delivery_stash: None,
        buf: Vec::with_capacity(RECV_BUFFER),
        rbuf: vec![0u8; RECV_BUFFER],
        last_rx: tokio::time::Instant::now(),
        added_paths: false,
        idle_timeout,
    };
    let join = tokio::spawn(task.run());
    let handle = ConnectionHandle {
        commands: cmd_tx,
        sends: send_tx,
        next_id: Mutex::new(0),
        deliveries: tokio::sync::Mutex::new(deliver_rx),
        shared,
        task: Mutex::new(None),
        connection_id,
        remote,
        clock,
    };
    (handle, join)
}

struct Task {
    conn: proto::Connection,
    clock: Clock,
    io: Io,
    /// The client's radios and mode switch.
    meter: Option<EnergyMeter>,
    shared: Shared,
    ready: Option<oneshot::Sender<Result<(), DriverError>>>,
    commands: mpsc::UnboundedReceiver<Command>,
    commands_open: bool,
    sends: mpsc::Receiver<(Bytes, Reliability)>,
    sends_open: bool,
    send_stash: Option<(Bytes, Reliability)>,
    deliveries: mpsc::Sender<Delivery>,
    delivery_stash: Option<Delivery>,
    /// Transmit buffer.
    buf: Vec<u8>,
    /// Receive buffer.
    rbuf: Vec<u8>,
    last_rx: tokio::time::Instant,
    added_paths: bool,
    idle_timeout: Duration,
}

impl Task {
    async fn run(mut self) {
        loop {
            let now = self.clock.now();
            if self.conn.poll_timeout().is_some_and(|t| t <= now) {
                self.conn.handle_timeout(now);
            }
            if let Some(ms) = self.meter.as_mut().and_then(|m| m.mode_switch.as_mut()) {
                ms.poll(now, &mut self.conn);
            }
            self.feed_sends(now);
            let mut more = self.flush(now).await;
            self.events(now);
            self.feed_deliveries(now);
            if self.conn.is_closed() {
                // Send what it has left to say (CLOSE), hand over what is left to read,
                // then stop.
                while more {
                    more = self.flush(now).await;
                }
                self.finish().await;
                return;
            }
            if more {
                // A long burst: let input (ACKs) and commands in before sending on.
                tokio::task::yield_now().await;
                self.poll_ready_input();
                continue;
            }
            let wake = self.wait().await;
            let now = self.clock.now();
            match wake {
                Wake::Command(None) => self.commands_open = false,
                Wake::Command(Some(c)) => self.on_command(now, c),
                Wake::Datagram { idx, len } => {
                    self.on_client_datagram(now, idx, len);
                    self.drain_client(now);
                }
                Wake::SocketError { idx, error } => self.on_socket_error(now, idx, error),
                Wake::Incoming(None) => {
                    // The endpoint stopped: nothing will arrive any more.
                    self.conn.close(now, 0, b"server stopped");
                }
                Wake::Incoming(Some(inc)) => {
                    self.on_server_datagram(now, inc);
                    for _ in 1..RECV_BATCH {
                        let Io::Server { input, .. } = &mut self.io else {
                            break;
                        };
                        match input.try_recv() {
                            Ok(inc) => self.on_server_datagram(now, inc),
                            Err(_) => break,
                        }
                    }
                }
                Wake::Timer => {
                    let now = self.clock.now();
                    self.conn.handle_timeout(now);
                }
                Wake::DeliveryRoom => {}
                Wake::AppSend(None) => self.sends_open = false,
                Wake::AppSend(Some(m)) => self.send_stash = Some(m),
            }
        }
    }

    fn on_command(&mut self, now: Instant, c: Command) {
        match c {
            Command::Stats(tx) => {
                let _ = tx.send(self.conn.stats());
            }
            Command::Energy(tx) => {
                let _ = tx.send(self.meter.as_mut().map(|m| m.snapshot(now)));
            }
            Command::Close { code, reason } => self.conn.close(now, code, &reason),
            #[cfg(test)]
            Command::BreakPath(idx) => {
                self.on_socket_error(now, idx, io::Error::other("injected: no such device"))
            }
        }
    }

    /// Handles input that is already waiting, without blocking.
    fn poll_ready_input(&mut self) {
        let now = self.clock.now();
        while self.commands_open {
            match self.commands.try_recv() {
                Ok(c) => self.on_command(now, c),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => self.commands_open = false,
            }
        }
        match &self.io {
            Io::Client { .. } => self.drain_client(now),
            Io::Server { .. } => {
                for _ in 0..RECV_BATCH {
                    let Io::Server { input, .. } = &mut self.io else {
                        break;
                    };
                    match input.try_recv() {
                        Ok(inc) => self.on_server_datagram(now, inc),
                        Err(_) => break,
                    }
                }
            }
        }
    }

    async fn wait(&mut self) -> Wake {
        let now = self.clock.now();
        let policy =
            self.meter.as_ref().and_then(|m| m.mode_switch.as_ref()).map(ModeSwitch::next_poll);
        let deadline = match (self.conn.poll_timeout(), policy) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(|t| self.clock.at(t.max(now + Duration::from_micros(1))));
        let want_send = self.sends_open && self.send_stash.is_none();
        let want_room = self.delivery_stash.is_some();
        let commands_open = self.commands_open;
        let Task { io, commands, sends, deliveries, rbuf, .. } = self;
        tokio::select! {
            biased;
            c = commands.recv(), if commands_open => Wake::Command(c),
            w = recv_io(io, rbuf) => w,
            _ = sleep_until_opt(deadline) => Wake::Timer,
            r = deliveries.reserve(), if want_room => {
                drop(r);
                Wake::DeliveryRoom
            }
            m = sends.recv(), if want_send => Wake::AppSend(m),
        }
    }

    /// Moves application messages into the connection while it has credit.
    fn feed_sends(&mut self, now: Instant) {
        loop {
            if self.send_stash.is_none() {
                if !self.sends_open {
                    return;
                }
                match self.sends.try_recv() {
                    Ok(m) => self.send_stash = Some(m),
                    Err(mpsc::error::TryRecvError::Empty) => return,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        self.sends_open = false;
                        return;
                    }
                }
            }
            let Some((data, rel)) = self.send_stash.take() else {
                return;
            };
            if self.conn.send_capacity() < data.len() as u64 {
                self.send_stash = Some((data, rel));
                return;
            }
            match self.conn.send_message(now, data.clone(), rel) {
                Ok(_) => {}
                Err(SendError::Blocked) => {
                    self.send_stash = Some((data, rel));
                    return;
                }
                Err(SendError::Closed) => return,
            }
        }
    }

    /// Hands in-order messages to the application while its queue has room.
    fn feed_deliveries(&mut self, now: Instant) {
        loop {
            if self.delivery_stash.is_none() {
                self.delivery_stash = self.conn.read_message(now);
            }
            let Some(d) = self.delivery_stash.take() else {
                return;
            };
            match self.deliveries.try_reserve() {
                Ok(permit) => permit.send(d),
                Err(mpsc::error::TrySendError::Full(())) => {
                    self.delivery_stash = Some(d);
                    return;
                }
                Err(mpsc::error::TrySendError::Closed(())) => return, // nobody reads
            }
        }
    }

    /// Sends what the connection has to send now, up to [`SEND_BATCH`] datagrams; true
    /// when it stopped at that limit.
    async fn flush(&mut self, now: Instant) -> bool {
        for _ in 0..SEND_BATCH {
            let Some(t) = self.conn.poll_transmit(now, &mut self.buf) else {
                return false;
            };
            let len = t.len.min(self.buf.len());
            let data = &self.buf[..len];
            match &mut self.io {
                Io::Server { sock, .. } => {
                    // A full send buffer waits; other errors lose the datagram, which the
                    // connection's recovery handles like a loss.
                    let _ = sock.send_to(data, t.remote).await;
                }
                Io::Client { paths } => {
                    let Some(idx) = paths.iter().position(|p| p.id == Some(t.path) && !p.failed)
                    else {
                        continue;
                    };
                    let result = paths[idx].sock.send(data).await;
                    match result {
                        Ok(n) => {
                            if let Some(m) = self.meter.as_mut() {
                                m.on_traffic(idx, now, n, 0);
                            }
                        }
                        Err(e) => self.on_socket_error(now, idx, e),
                    }
                }
            }
        }
        true
    }

    fn events(&mut self, now: Instant) {
        while let Some(ev) = self.conn.poll_event() {
            match ev {
                Event::Connected => {
                    if let Some(r) = self.ready.take() {
                        let _ = r.send(Ok(()));
                    }
                    self.add_client_paths(now);
                }
                Event::Closed { reason } => {
                    let err = match reason {
                        CloseReason::Local => DriverError::LocallyClosed,
                        CloseReason::Peer { code, reason } => {
                            DriverError::PeerClosed { code, reason }
                        }
                        CloseReason::IdleTimeout => {
                            DriverError::IdleTimeout { after: self.idle_timeout }
                        }
                    };
                    let mut s = lock(&self.shared);
                    if s.error.is_none() {
                        s.error = Some(err);
                    }
                }
                Event::PathValidated(_)
                | Event::PathFailed(_)
                | Event::PathRecovered(_)
                | Event::PeerPathStatus { .. } => {}
            }
        }
    }

    fn add_client_paths(&mut self, now: Instant) {
        if self.added_paths {
            return;
        }
        self.added_paths = true;
        let Io::Client { paths } = &mut self.io else {
            return;
        };
        for (i, p) in paths.iter_mut().enumerate().skip(1) {
            if p.failed {
                continue;
            }
            match self.conn.add_path(now, p.local, p.remote, p.role) {
                Ok(id) => {
                    p.id = Some(id);
                    if let Some(info) = lock(&self.shared).paths.get_mut(i) {
                        info.id = Some(id);
                    }
                }
                Err(e) => {
                    p.failed = true;
                    if let Some(info) = lock(&self.shared).paths.get_mut(i) {
                        info.error = Some(e.to_string());
                    }
                }
            }
        }
    }

    fn on_client_datagram(&mut self, now: Instant, idx: usize, len: usize) {
        let Io::Client { paths } = &mut self.io else {
            return;
        };
        let Some(p) = paths.get_mut(idx) else { return };
        self.last_rx = tokio::time::Instant::now();
        let data = self.rbuf.get(..len).unwrap_or(&[]);
        self.conn.handle_datagram(now, p.local, p.remote, data);
        if let Some(m) = self.meter.as_mut() {
            m.on_traffic(idx, now, 0, len);
        }
    }

    /// Reads what else is already queued on the client's sockets (up to a batch).
    fn drain_client(&mut self, now: Instant) {
        let mut budget = RECV_BATCH;
        let n = match &self.io {
            Io::Client { paths } => paths.len(),
            Io::Server { .. } => return,
        };
        for idx in 0..n {
            while budget > 0 {
                let Io::Client { paths } = &self.io else {
                    return;
                };
                let Some(p) = paths.get(idx) else { break };
                if p.failed {
                    break;
                }
                match p.sock.try_recv(&mut self.rbuf) {
                    Ok(len) => {
                        budget -= 1;
                        self.on_client_datagram(now, idx, len);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        self.on_socket_error(now, idx, e);
                        break;
                    }
                }
            }
        }
    }

    fn on_server_datagram(&mut self, now: Instant, inc: Incoming) {
        let Io::Server { local, .. } = &self.io else {
            return;
        };
        let local = *local;
        self.last_rx = tokio::time::Instant::now();
        self.conn.handle_datagram(now, local, inc.remote, &inc.data);
    }

    /// A client path's socket reported an error.
    fn on_socket_error(&mut self, now: Instant, idx: usize, error: io::Error) {
        let Io::Client { paths } = &mut self.io else {
            return;
        };
        let established = self.ready.is_none();
        if error.kind() == io::ErrorKind::ConnectionRefused {
            // "Port unreachable" for an earlier datagram: the peer's process may be gone.
            if !established && idx == 0 {
                let remote = paths[0].remote;
                self.fail(now, DriverError::Refused { remote });
                return;
            }
            // Nothing arrives on any path and the peer's host says the port is closed: the
            // peer process is gone (a path that still worked would be receiving).
            if self.last_rx.elapsed() >= UNREACHABLE_AFTER {
                self.fail(now, DriverError::PeerUnreachable { after: self.last_rx.elapsed() });
            }
            return;
        }
        if matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) {
            return;
        }
        // The socket itself is broken (interface or address gone, permission, …): give
        // the path up; the connection moves its data to the others.
        let Some(p) = paths.get_mut(idx) else { return };
        if p.failed {
            return;
        }
        p.failed = true;
        let message = format!("{} -> {}: {error}", p.local, p.remote);
        tracing::warn!(path = idx, %message, "path socket failed; removing the path");
        if let Some(info) = lock(&self.shared).paths.get_mut(idx) {
            info.error = Some(message.clone());
        }
        if let Some(id) = p.id {
            self.conn.remove_path(now, id);
        }
        // Without path 0 the handshake cannot finish; without any path nothing can.
        if paths.iter().all(|p| p.failed) || (!established && idx == 0) {
            self.fail(now, DriverError::AllPathsFailed { last: message });
        }
    }

    /// Ends the connection with a driver-level reason.
    fn fail(&mut self, now: Instant, err: DriverError) {
        {
            let mut s = lock(&self.shared);
            if s.error.is_none() {
                s.error = Some(err.clone());
            }
        }
        if let Some(r) = self.ready.take() {
            let _ = r.send(Err(err));
        }
        self.conn.close(now, 1, b"unreachable");
    }

    async fn finish(mut self) {
        if let Some(r) = self.ready.take() {
            let e = lock(&self.shared).error.clone().unwrap_or(DriverError::LocallyClosed);
            let _ = r.send(Err(e));
        }
        let energy = self.meter.as_mut().map(|m| m.snapshot(self.clock.now()));
        {
            let mut s = lock(&self.shared);
            s.final_stats = Some(self.conn.stats());
            s.final_energy = energy;
        }
        // Deliver what was already readable, while the application keeps reading.
        loop {
            let now = self.clock.now();
            self.feed_deliveries(now);
            if self.delivery_stash.is_none() {
                return;
            }
            tokio::select! {
                r = self.deliveries.reserve() => if r.is_err() { return },
                c = self.commands.recv(), if self.commands_open => match c {
                    Some(Command::Stats(tx)) => { let _ = tx.send(self.conn.stats()); }
                    Some(Command::Energy(tx)) => {
                        let now = self.clock.now();
                        let _ = tx.send(self.meter.as_mut().map(|m| m.snapshot(now)));
                    }
                    Some(_) | None => return,
                },
            }
        }
    }
}

async fn recv_io(io: &mut Io, rbuf: &mut [u8]) -> Wake {
    match io {
        Io::Server { input, .. } => Wake::Incoming(input.recv().await),
        Io::Client { paths } => {
            std::future::poll_fn(|cx| {
                for (idx, p) in paths.iter().enumerate() {
                    if p.failed {
                        continue;
                    }
                    let mut rb = ReadBuf::new(rbuf);
                    match p.sock.poll_recv(cx, &mut rb) {
                        Poll::Ready(Ok(())) => {
                            let len = rb.filled().len();
                            return Poll::Ready(Wake::Datagram { idx, len });
                        }
                        Poll::Ready(Err(error)) => {
                            return Poll::Ready(Wake::SocketError { idx, error });
                        }
                        Poll::Pending => {}
                    }
                }
                Poll::Pending
            })
            .await
        }
    }
}

async fn sleep_until_opt(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_transport::cc::RenoConfig;
    use braid_transport::sched::MinRttConfig;

    const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    fn config() -> Arc<Config> {
        let mut c = Config::new(Arc::new(RenoConfig::default()), Arc::new(MinRttConfig::default()));
        c.idle_timeout = Duration::from_secs(3);
        c.keep_alive = Some(Duration::from_millis(200));
        Arc::new(c)
    }

    fn local_path(remote: SocketAddr) -> PathSpec {
        PathSpec { local: SocketAddr::new(LOOPBACK, 0), iface: None, remote, role: PathRole::Wired }
    }

    fn message(i: u64) -> Bytes {
        Bytes::from(
            (0..4096u64)
                .map(|k| (i.wrapping_mul(31).wrapping_add(k) % 251) as u8)
                .collect::<Vec<u8>>(),
        )
    }

    /// Server sends `n` messages on the first accepted connection.
    fn serve(ep: Arc<Endpoint>, n: u64) -> JoinHandle<Arc<ConnectionHandle>> {
        tokio::spawn(async move {
            let conn = Arc::new(ep.accept().await.expect("a connection"));
            for i in 0..n {
                conn.send_message(message(i), Reliability::Reliable).await.expect("send");
            }
            conn
        })
    }

    async fn read_all(client: &ConnectionHandle, n: u64) {
        for i in 0..n {
            let d = tokio::time::timeout(Duration::from_secs(10), client.read_message())
                .await
                .expect("message in time")
                .expect("open connection");
            match d {
                Delivery::Message { id, data } => {
                    assert_eq!(id, i);
                    assert_eq!(data, message(i), "message {i} corrupt");
                }
                Delivery::Gap { id } => panic!("gap {id}"),
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn messages_cross_two_loopback_paths_intact_and_in_order() {
        let ep = Arc::new(listen_seeded(SocketAddr::new(LOOPBACK, 0), config(), 7).await.unwrap());
        let addr = ep.local_addr();
        let server = serve(Arc::clone(&ep), 2000);
        let client = connect(config(), vec![local_path(addr), local_path(addr)], 1).await.unwrap();
        read_all(&client, 2000).await;
        let stats = client.stats().await.unwrap();
        assert_eq!(stats.bytes_delivered, 2000 * 4096);
        assert_eq!(stats.paths.len(), 2);
        assert!(stats.paths.iter().all(|p| p.validated), "{stats:?}");
        assert_eq!(
            client.paths().iter().map(|p| p.id).collect::<Vec<_>>(),
            vec![Some(PathId(0)), Some(PathId(1))]
        );
        let server = server.await.unwrap();
        client.close(0, b"done").await;
        // The server learns it.
        let end =
            tokio::time::timeout(Duration::from_secs(2), server.read_message()).await.unwrap();
        assert_eq!(end, Err(DriverError::PeerClosed { code: 0, reason: "done".into() }));
        assert_eq!(ep.stats().accepted, 1);
    }

    #[tokio::test]
    async fn connecting_to_a_closed_port_is_refused_quickly() {
        let probe = std::net::UdpSocket::bind((LOOPBACK, 0)).unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let t0 = tokio::time::Instant::now();
        let err = connect(config(), vec![local_path(addr)], 1).await.unwrap_err();
        assert_eq!(err, DriverError::Refused { remote: addr });
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    }

    #[tokio::test]
    async fn a_silent_server_is_a_handshake_timeout() {
        let silent = std::net::UdpSocket::bind((LOOPBACK, 0)).unwrap();
        let addr = silent.local_addr().unwrap();
        let opts = ConnectOptions {
            handshake_timeout: Duration::from_millis(400),
            ..ConnectOptions::default()
        };
        let err = connect_with(config(), vec![local_path(addr)], 1, opts).await.unwrap_err();
        assert_eq!(
            err,
            DriverError::HandshakeTimeout { remote: addr, after: Duration::from_millis(400) }
        );
        assert!(err.to_string().contains("no answer from"), "{err}");
    }

    #[tokio::test]
    async fn connect_without_paths_is_an_error() {
        assert_eq!(connect(config(), Vec::new(), 1).await.unwrap_err(), DriverError::NoPaths);
    }

    #[tokio::test]
    async fn binding_to_a_missing_interface_is_a_clear_error() {
        let mut p = local_path(SocketAddr::new(LOOPBACK, 9));
        p.iface = Some("braid-no-such-if0".into());
        match connect(config(), vec![p], 1).await.unwrap_err() {
            DriverError::BindDevice { iface, .. } => assert_eq!(iface, "braid-no-such-if0"),
            e => panic!("{e}"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn garbage_at_the_server_port_is_dropped_and_the_transfer_is_intact() {
        let ep = Arc::new(listen_seeded(SocketAddr::new(LOOPBACK, 0), config(), 7).await.unwrap());
        let addr = ep.local_addr();
        let server = serve(Arc::clone(&ep), 1000);
        let spray = tokio::spawn(async move {
            let s = UdpSocket::bind((LOOPBACK, 0)).await.unwrap();
            let mut x = 88172645463325252u64;
            for i in 0..3000u32 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let mut d = x.to_le_bytes().repeat(1 + (i % 100) as usize);
                if i % 3 == 0 {
                    d[0] = 1;
                }
                let _ = s.send_to(&d, addr).await;
                if i % 50 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        });
        let client = connect(config(), vec![local_path(addr)], 1).await.unwrap();
        read_all(&client, 1000).await;
        spray.await.unwrap();
        let _ = server.await.unwrap();
        assert!(ep.stats().dropped_unknown > 1000, "{:?}", ep.stats());
        assert_eq!(ep.stats().accepted, 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_path_whose_socket_fails_is_removed_and_the_others_carry_on() {
        let ep = Arc::new(listen_seeded(SocketAddr::new(LOOPBACK, 0), config(), 7).await.unwrap());
        let addr = ep.local_addr();
        let server = serve(Arc::clone(&ep), 3000);
        let client = connect(config(), vec![local_path(addr), local_path(addr)], 1).await.unwrap();
        read_all(&client, 200).await;
        client.commands.send(Command::BreakPath(0)).unwrap();
        for i in 200..3000 {
            match client.read_message().await.unwrap() {
                Delivery::Message { id, data } => {
                    assert_eq!(id, i);
                    assert_eq!(data, message(i));
                }
                Delivery::Gap { id } => panic!("gap {id}"),
            }
        }
        let info = client.paths();
        assert!(info[0].error.as_deref().is_some_and(|e| e.contains("no such device")), "{info:?}");
        assert!(info[1].error.is_none());
        let _ = server.await.unwrap();
        // Breaking the last path ends the connection.
        client.commands.send(Command::BreakPath(1)).unwrap();
        let err = tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                if let Err(e) = client.read_message().await {
                    return e;
                }
            }
        })
        .await
        .unwrap();
        // The server may close first (it is done sending): either way the connection ends.
        assert!(
            matches!(err, DriverError::AllPathsFailed { .. } | DriverError::PeerClosed { .. }),
            "{err}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_vanished_server_fails_the_pending_read() {
        let ep = listen_seeded(SocketAddr::new(LOOPBACK, 0), config(), 7).await.unwrap();
        let addr = ep.local_addr();
        let accept = tokio::spawn(async move {
            let c = ep.accept().await.unwrap();
            (ep, c)
        });
        let client = connect(config(), vec![local_path(addr)], 1).await.unwrap();
        let (ep, server_conn) = accept.await.unwrap();
        // The server disappears without a word: its task stops, its socket closes.
        let task = server_conn.task.lock().unwrap().take();
        if let Some(t) = task {
            t.abort();
            let _ = t.await;
        }
        drop(ep);
        drop(server_conn);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let t0 = tokio::time::Instant::now();
        let err = tokio::time::timeout(Duration::from_secs(5), client.read_message())
            .await
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(err, DriverError::PeerUnreachable { .. } | DriverError::IdleTimeout { .. }),
            "{err}"
        );
        assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    }
}
