//! The server side: one shared socket per [`Endpoint`], datagrams routed to connections
//! by connection id, new connections from full-size Initial packets (a ClientHello).
//!
//! Half-open connections (a ClientHello was accepted, the handshake has not completed)
//! hold a route like any other; together with the established ones at most
//! [`MAX_CONNECTIONS`] are held, and past that new ones are refused. Until a client's
//! address is validated its connection sends it at most three times what it received
//! (`proto::Connection`'s anti-amplification). A connection's route is dropped once its
//! task has ended (a half-open one's at the latest at its idle timeout); the endpoint
//! notices when the next datagram for it, or the next ClientHello, arrives.
//!
//! A connection stays half-open until its handshake completed (a datagram that merely
//! carries its id does not count: anyone can send one). At most [`MAX_HALF_OPEN`] are
//! held, at most [`MAX_HALF_OPEN_PER_ADDRESS`] from one source address (past that
//! ClientHellos are refused), and one still half-open after [`HALF_OPEN_TIMEOUT`] is
//! dropped when the next ClientHello arrives, so a flood of ClientHellos holds a bounded,
//! short-lived share of the endpoint, and one from a single socket cannot crowd others out.
//!
//! A short-header datagram for an id no connection answers to (its connection ended, or
//! the server restarted) gets a stateless reset ([`proto::reset`]), at most
//! [`proto::reset::MAX_RESETS_PER_SECOND`], so the client ends at once rather than at its
//! idle timeout.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use braid_transport::proto::{self, Config, ServerCrypto};

use super::DriverError;
use super::clock::Clock;
use super::handle::{ConnectionHandle, Shared, SharedState};
use super::socket::bind_socket;
use super::task::{CidUpdate, Incoming, Io, spawn_task};
use super::udp::{RecvBuffers, ServerSocket};

/// Datagrams waiting for a server connection's task.
const SERVER_INPUT_QUEUE: usize = 4096;
/// Connections one endpoint holds at once (half-open ones included).
const MAX_CONNECTIONS: usize = 256;
/// New connections waiting to be accepted.
const ACCEPT_QUEUE: usize = 64;
/// Half-open connections one endpoint holds at once.
pub const MAX_HALF_OPEN: usize = 32;
/// Half-open connections from one source address (IP and port) at once.
pub const MAX_HALF_OPEN_PER_ADDRESS: usize = 2;
/// A connection whose handshake has not completed this long after its hello is dropped.
pub const HALF_OPEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Where an endpoint routes a connection's datagrams.
struct Route {
    tx: mpsc::Sender<Incoming>,
    /// When its hello arrived, while the handshake has not completed.
    half_open_since: Option<std::time::Instant>,
    /// Where the hello came from.
    from: SocketAddr,
    /// The connection's state, which says when the handshake completed.
    shared: Shared,
}

impl Route {
    /// Whether the handshake is still incomplete (checked on the connection, once it
    /// completed never again).
    fn half_open(&mut self) -> bool {
        if self.half_open_since.is_some() && super::handle::lock(&self.shared).established {
            self.half_open_since = None;
        }
        self.half_open_since.is_some()
    }
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
    /// Handshakes refused because [`MAX_HALF_OPEN`] connections are half-open, or
    /// [`MAX_HALF_OPEN_PER_ADDRESS`] from the same address.
    pub refused_half_open: u64,
    /// Half-open connections dropped after [`HALF_OPEN_TIMEOUT`].
    pub expired_half_open: u64,
    /// Retry packets sent instead of a connection (RFC 9000 §8.1.2).
    pub retries_sent: u64,
    /// Initial packets with a Retry token this endpoint did not issue to that address and
    /// connection id in the last [`proto::retry::TOKEN_LIFETIME`] (dropped).
    pub invalid_tokens: u64,
    /// Connections accepted with the client's address validated by a token (a Retry's or
    /// a NEW_TOKEN's).
    pub validated: u64,
    /// Connections whose client's address a NEW_TOKEN token from an earlier connection
    /// validated (no Retry needed, no anti-amplification limit; RFC 9000 §8.1.3).
    pub new_tokens_accepted: u64,
    /// NEW_TOKEN tokens not honoured (not issued here, for another address, expired, used
    /// before, or the replay log full), and tokens of no kind this endpoint issues: the
    /// Initial is taken as if it had none (§8.1.4).
    pub new_tokens_refused: u64,
    /// NEW_TOKEN tokens handed to connections, to be sent once their handshake completes.
    pub new_tokens_issued: u64,
    /// Stateless resets sent for datagrams with unknown connection ids.
    pub resets_sent: u64,
    /// Version Negotiation packets sent for connection attempts of other versions.
    pub version_negotiations: u64,
    /// Datagrams with unknown ids left unanswered by the reset rate limit.
    pub resets_limited: u64,
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

/// When an endpoint answers a ClientHello without a token with a Retry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RetryPolicy {
    /// Once [`RETRY_HALF_OPEN`] connections are half-open (a handshake flood).
    #[default]
    UnderLoad,
    /// Always (`braid serve --retry`).
    Always,
}

/// Half-open connections at which an endpoint of [`RetryPolicy::UnderLoad`] starts asking
/// for address validation: half of [`MAX_HALF_OPEN`].
pub const RETRY_HALF_OPEN: usize = MAX_HALF_OPEN / 2;

/// Listens on `addr` with connection settings `config`, proving its identity with
/// `crypto`; each connection is seeded from the OS's random source. Retry under load.
pub async fn listen(
    addr: SocketAddr,
    config: Arc<Config>,
    crypto: ServerCrypto,
) -> Result<Endpoint, DriverError> {
    listen_with(addr, config, crypto, RetryPolicy::UnderLoad).await
}

/// As [`listen`], with the Retry policy `retry`.
pub async fn listen_with(
    addr: SocketAddr,
    config: Arc<Config>,
    crypto: ServerCrypto,
    retry: RetryPolicy,
) -> Result<Endpoint, DriverError> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)
        .map_err(|e| DriverError::Bind { addr, message: format!("no random source: {e}") })?;
    let tokens = proto::retry::RetryTokens::new(&secret);
    let reset_seed = crate::tls::os_seed()
        .map_err(|e| DriverError::Bind { addr, message: format!("no random source: {e}") })?;
    let resetter = proto::reset::Resetter::new(crypto.reset.clone(), reset_seed);
    let std_sock = bind_socket(addr, None)?;
    let sock = ServerSocket::new(std_sock)
        .map_err(|e| DriverError::Bind { addr, message: e.to_string() })?;
    let local = sock.local_addr();
    let sock = Arc::new(sock);
    let shared = Arc::new(Mutex::new(EndpointShared::default()));
    let (accept_tx, accept_rx) = mpsc::channel(ACCEPT_QUEUE);
    let retry = RetryState {
        policy: retry,
        tokens,
        log: proto::retry::TokenLog::default(),
        clock: Clock::start(),
        resetter,
    };
    let task =
        tokio::spawn(endpoint_loop(sock, config, crypto, accept_tx, Arc::clone(&shared), retry));
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

/// Reads the shared socket and routes each datagram: to its connection's task, or, for
/// an Initial packet with a ClientHello, to a new connection.
async fn endpoint_loop(
    sock: Arc<ServerSocket>,
    config: Arc<Config>,
    crypto: ServerCrypto,
    accepts: mpsc::Sender<ConnectionHandle>,
    shared: Arc<Mutex<EndpointShared>>,
    retry: RetryState,
) {
    let (cid_tx, cid_rx) = mpsc::unbounded_channel();
    let mut router = Router {
        sock,
        config,
        crypto,
        accepts,
        shared,
        routes: BTreeMap::new(),
        aliases: BTreeMap::new(),
        cid_tx,
        cid_rx,
        retry,
    };
    let mut bufs = RecvBuffers::new();
    let mut batch = Vec::new();
    loop {
        let sock = Arc::clone(&router.sock);
        if sock.recv(&mut bufs, &mut batch).await.is_err() {
            // ICMP errors for earlier sends, or a transient failure: keep serving.
            continue;
        }
        for d in &batch {
            if router.on_datagram(bufs.get(d), d.remote, d.local) {
                return;
            }
        }
    }
}

/// The endpoint's routing state: connections by id, and what a new one needs.
struct Router {
    sock: Arc<ServerSocket>,
    config: Arc<Config>,
    crypto: ServerCrypto,
    accepts: mpsc::Sender<ConnectionHandle>,
    shared: Arc<Mutex<EndpointShared>>,
    routes: BTreeMap<u64, Route>,
    /// Ids a connection issued for its paths → its handshake id (the key in `routes`).
    aliases: BTreeMap<u64, u64>,
    /// Where connection tasks report the ids they issue and retire.
    cid_tx: mpsc::UnboundedSender<CidUpdate>,
    cid_rx: mpsc::UnboundedReceiver<CidUpdate>,
    retry: RetryState,
}

/// What an endpoint needs to answer without a connection: its Retry policy and token key,
/// its stateless resets, and a clock for token ages and the reset rate.
struct RetryState {
    policy: RetryPolicy,
    tokens: proto::retry::RetryTokens,
    /// NEW_TOKEN tokens already used (each is honoured once).
    log: proto::retry::TokenLog,
    clock: Clock,
    resetter: proto::reset::Resetter,
}

impl Router {
    /// Routes one datagram that arrived at `local` from `remote`; true when the acceptor
    /// has gone (the endpoint stops).
    fn on_datagram(&mut self, data: &[u8], remote: SocketAddr, local: SocketAddr) -> bool {
        let Router {
            sock,
            config,
            crypto,
            accepts,
            shared,
            routes,
            aliases,
            cid_tx,
            cid_rx,
            retry,
        } = self;
        let count = |f: fn(&mut EndpointStats)| {
            f(&mut shared.lock().unwrap_or_else(|e| e.into_inner()).stats)
        };
        while let Ok(u) = cid_rx.try_recv() {
            match u.event {
                proto::CidEvent::Issued(id) if routes.contains_key(&u.primary) => {
                    if !routes.contains_key(&id) {
                        aliases.entry(id).or_insert(u.primary);
                    }
                }
                proto::CidEvent::Issued(_) => {}
                proto::CidEvent::Retired(id) => {
                    if aliases.get(&id) == Some(&u.primary) {
                        aliases.remove(&id);
                    }
                }
            }
        }
        let Some(wire_cid) = proto::peek_connection_id(data) else {
            // Another protocol version (a QUIC v1 client, say): tell it ours (RFC 9000 §6).
            let unused = 0x40 | data.last().map_or(0, |b| b & 0x3f);
            if let Some(vn) = proto::version::answer(data, unused) {
                // Counted before it goes: a client may act on the answer (and its test
                // read the counter) before this thread would get past the send.
                count(|s| s.version_negotiations += 1);
                let _ = sock.try_send_one(&vn, remote, local);
            } else {
                count(|s| s.dropped_unknown += 1);
            }
            return false;
        };
        let cid = match aliases.get(&wire_cid) {
            Some(&primary) if !routes.contains_key(&wire_cid) => primary,
            _ => wire_cid,
        };
        if let Some(route) = routes.get_mut(&cid) {
            if route.tx.is_closed() {
                routes.remove(&cid);
            } else {
                match route.tx.try_send(Incoming { data: data.to_vec(), remote, local }) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => count(|s| s.dropped_overflow += 1),
                    Err(mpsc::error::TrySendError::Closed(_)) => {
                        routes.remove(&cid);
                    }
                }
                return false;
            }
        }
        // A short header for no connection: its state is gone here (RFC 9000 §10.3).
        if data.first().is_some_and(|b| b & 0x80 == 0) {
            count(|s| s.dropped_unknown += 1);
            let resetter = &mut retry.resetter;
            if let Some(reset) = resetter.answer(retry.clock.now(), wire_cid, data) {
                let _ = sock.try_send_one(&reset, remote, local);
            }
            let mut sh = shared.lock().unwrap_or_else(|e| e.into_inner());
            (sh.stats.resets_sent, sh.stats.resets_limited) = (resetter.sent, resetter.limited);
            return false;
        }
        // A new connection, if this is a ClientHello.
        let arrived = std::time::Instant::now();
        routes.retain(|_, r| !r.tx.is_closed());
        let before = routes.len();
        routes.retain(|_, r| {
            !r.half_open()
                || r.half_open_since.is_none_or(|t| arrived.duration_since(t) < HALF_OPEN_TIMEOUT)
        });
        aliases.retain(|_, primary| routes.contains_key(primary));
        let expired = before - routes.len();
        if expired > 0 {
            // Dropping a route closes its connection (its task sees the input end).
            shared.lock().unwrap_or_else(|e| e.into_inner()).stats.expired_half_open +=
                expired as u64;
        }
        if routes.len() >= MAX_CONNECTIONS {
            count(|s| s.refused_full += 1);
            return false;
        }
        let half_open: Vec<SocketAddr> =
            routes.values_mut().filter_map(|r| r.half_open().then_some(r.from)).collect();
        // Address validation (RFC 9000 §8.1.2): a ClientHello with a Retry token this
        // endpoint issued to this address for this id is validated (and names the id the
        // client first sent to); one with any other Retry token is dropped. A NEW_TOKEN token
        // this endpoint issued to this IP address within its lifetime, not used before,
        // validates the address too (§8.1.3); any other is as no token (§8.1.4). While Retry
        // is in force, a ClientHello without a validating token gets a Retry from a new id
        // and no state. Otherwise the Initial is not opened here (`accept` opens it), and is
        // taken as it comes.
        let retrying = retry.policy == RetryPolicy::Always || half_open.len() >= RETRY_HALF_OPEN;
        let mut odcid = None;
        let mut by_new_token = false;
        if proto::is_initial(data) && data.len() >= proto::crypto::MIN_INITIAL_DATAGRAM {
            let now = retry.clock.now();
            if let Some(t) = proto::Connection::initial_token(data) {
                match proto::retry::kind(&t) {
                    proto::retry::TokenKind::NewToken => {
                        by_new_token = retry
                            .tokens
                            .validate_new_token(&t, now, remote.ip())
                            .is_some_and(|(nonce, at)| retry.log.first_use(nonce, at, now));
                        if !by_new_token {
                            count(|s| s.new_tokens_refused += 1);
                        }
                    }
                    proto::retry::TokenKind::Retry => {
                        match retry.tokens.validate(&t, now, remote, cid) {
                            Some(o) => odcid = Some(o),
                            None => {
                                count(|s| s.invalid_tokens += 1);
                                return false;
                            }
                        }
                    }
                    // Not one of this endpoint's kinds (a token of another server at this
                    // address, say): as none.
                    proto::retry::TokenKind::Unknown => count(|s| s.new_tokens_refused += 1),
                }
            }
            if retrying && odcid.is_none() && !by_new_token {
                let hdr = proto::crypto::PlainHeader::parse(data).ok();
                let client_cid = hdr.and_then(|h| h.source_id);
                let new_cid = crate::tls::os_seed().ok().filter(|&c| c != cid);
                if let (Some(hdr), Some(client_cid), Some(new_cid)) = (hdr, client_cid, new_cid) {
                    let odcid = hdr.dcid;
                    let token = retry.tokens.issue(now, remote, new_cid, &odcid);
                    let packet = proto::retry::encode(&client_cid, new_cid, &odcid, &token);
                    let _ = sock.try_send_one(&packet, remote, local);
                    count(|s| s.retries_sent += 1);
                }
                return false;
            }
        }
        if half_open.len() >= MAX_HALF_OPEN
            || half_open.iter().filter(|&&a| a == remote).count() >= MAX_HALF_OPEN_PER_ADDRESS
        {
            count(|s| s.refused_half_open += 1);
            return false;
        }
        // Only a full-size Initial packet starts a connection (and costs a seed).
        if !proto::is_initial(data) {
            count(|s| s.dropped_unknown += 1);
            return false;
        }
        let Ok(seed) = crate::tls::os_seed() else {
            count(|s| s.dropped_unknown += 1);
            return false;
        };
        let clock = Clock::start();
        let accepted = proto::Connection::accept_retried(
            Arc::clone(config),
            crypto,
            clock.now(),
            seed,
            local,
            remote,
            data,
            odcid,
        );
        let mut conn = match accepted {
            Ok(c) => c,
            Err(proto::AcceptError::RefusedWithClose { close, .. }) => {
                // The client is told why (CONNECTION_CLOSE with the TLS alert).
                let _ = sock.try_send_one(&close, remote, local);
                count(|s| s.dropped_unknown += 1);
                return false;
            }
            Err(_) => {
                count(|s| s.dropped_unknown += 1);
                return false;
            }
        };
        count(|s| s.accepted += 1);
        if odcid.is_some() {
            count(|s| s.validated += 1);
        }
        if by_new_token {
            conn.set_address_validated();
            count(|s| {
                s.validated += 1;
                s.new_tokens_accepted += 1;
            });
        }
        // A token for this client's next connection (RFC 9000 §8.1.3), sent once the
        // handshake completed.
        let mut nonce = [0u8; proto::retry::NONCE_LEN];
        if getrandom::fill(&mut nonce).is_ok() {
            let token = retry.tokens.issue_new_token(retry.clock.now(), remote.ip(), nonce);
            conn.set_new_token(token);
            count(|s| s.new_tokens_issued += 1);
        }
        // Both ends name a connection's trace by the client's first destination id.
        if let Some(sink) = super::trace_sink(
            braid_transport::trace::Vantage::Server,
            conn.original_connection_id(),
        ) {
            conn.set_trace(Some(sink));
        }
        let (in_tx, in_rx) = mpsc::channel(SERVER_INPUT_QUEUE);
        let shared_conn: Shared = Arc::new(Mutex::new(SharedState::default()));
        // The connection answers to an id of its own (RFC 9000 §7.2); the client sends to
        // the one its Initial went to until the server's Initial reaches it.
        let own = conn.connection_id();
        if own != cid {
            aliases.insert(cid, own);
        }
        routes.insert(
            own,
            Route {
                tx: in_tx,
                half_open_since: Some(arrived),
                from: remote,
                shared: Arc::clone(&shared_conn),
            },
        );
        let io = Io::Server { sock: Arc::clone(sock), input: in_rx, cids: cid_tx.clone() };
        let (handle, task) = spawn_task(conn, clock, io, None, shared_conn, None, remote);
        handle.set_task(task);
        // Never block routing on a slow acceptor: past the queue, new connections are
        // refused (dropping the handle closes them).
        match accepts.try_send(handle) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(h)) => {
                drop(h);
                count(|s| s.refused_full += 1);
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return true,
        }
        false
    }
}
