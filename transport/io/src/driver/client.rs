//! The client side: its paths (one socket each) and [`connect`].

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::oneshot;

use braid_transport::energy::PowerModels;
use braid_transport::path::{PathId, PathRole};
use braid_transport::policy::{AeSumConfig, PathPolicy};
use braid_transport::proto::{self, ClientCrypto, Config};

use super::clock::Clock;
use super::energy::client_policy;
use super::handle::{ConnectionHandle, Shared, SharedState, lock};
use super::socket::bind_socket;
use super::task::{Io, spawn_task};
use super::{DEFAULT_HANDSHAKE_TIMEOUT, DriverError};

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
    /// The client's radio parameters per role (the built-in ones unless replaced).
    pub power: PowerModels,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            path_policy: PathPolicy::None,
            aesum: AeSumConfig::default(),
            power: PowerModels::default(),
        }
    }
}

impl ConnectOptions {
    /// The defaults, running `policy` beside the connection (a profile's `path_policy`).
    pub fn with_path_policy(policy: PathPolicy) -> ConnectOptions {
        ConnectOptions {
            path_policy: policy,
            aesum: policy.aesum_config(),
            ..ConnectOptions::default()
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

/// One client path's socket, as the connection's task holds it.
pub(super) struct ClientPath {
    pub(super) sock: UdpSocket,
    /// Batched receives (GRO) on `sock`.
    pub(super) udp: quinn_udp::UdpSocketState,
    pub(super) local: SocketAddr,
    pub(super) remote: SocketAddr,
    /// The connection's id for it, once added.
    pub(super) id: Option<PathId>,
    pub(super) role: PathRole,
    /// Given up (its socket failed, or the connection refused to add it).
    pub(super) failed: bool,
}

/// What [`connect`] returns.
pub type ClientConnection = ConnectionHandle;

/// Connects to a server over `paths` (the first carries the handshake; the others join
/// once it completes) with the default [`ConnectOptions`]; the server is authenticated as
/// `crypto` says. The connection is seeded from the OS's random source (its id, tokens and
/// TLS keys are unpredictable).
pub async fn connect(
    config: Arc<Config>,
    crypto: ClientCrypto,
    paths: Vec<PathSpec>,
) -> Result<ClientConnection, DriverError> {
    connect_with(config, crypto, paths, ConnectOptions::default()).await
}

/// [`connect`] with explicit options.
pub async fn connect_with(
    config: Arc<Config>,
    crypto: ClientCrypto,
    specs: Vec<PathSpec>,
    options: ConnectOptions,
) -> Result<ClientConnection, DriverError> {
    let seed = crate::tls::os_seed()?;
    let Some(first) = specs.first() else {
        return Err(DriverError::NoPaths);
    };
    let remote = first.remote;
    let mut paths = Vec::with_capacity(specs.len());
    for spec in &specs {
        let std_sock = bind_socket(spec.local, spec.iface.as_deref())?;
        let bind_err =
            |e: io::Error| DriverError::Bind { addr: spec.local, message: e.to_string() };
        let udp = quinn_udp::UdpSocketState::new((&std_sock).into()).map_err(bind_err)?;
        let sock = UdpSocket::from_std(std_sock).map_err(bind_err)?;
        let route_err = |e: io::Error| DriverError::Route {
            local: spec.local,
            remote: spec.remote,
            message: e.to_string(),
        };
        sock.connect(spec.remote).await.map_err(route_err)?;
        let local = sock.local_addr().map_err(route_err)?;
        paths.push(ClientPath {
            sock,
            udp,
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
    let mut conn = proto::Connection::connect(
        Arc::clone(&config),
        &crypto,
        clock.now(),
        seed,
        p0.local,
        p0.remote,
        p0.role,
    )
    .map_err(|e| DriverError::Tls(e.to_string()))?;
    if let Some(sink) =
        super::trace_sink(braid_transport::trace::Vantage::Client, conn.connection_id())
    {
        conn.set_trace(Some(sink));
    }
    lock(&shared).paths[0].id = Some(PathId(0));
    let roles: Vec<PathRole> = paths.iter().map(|p| p.role).collect();
    let policy = client_policy(&roles, &options, clock.now());
    let (ready_tx, ready_rx) = oneshot::channel();
    let (handle, task) = spawn_task(
        conn,
        clock,
        Io::Client { paths },
        Some(policy),
        Arc::clone(&shared),
        Some(ready_tx),
        remote,
        config.idle_timeout,
    );
    match tokio::time::timeout(options.handshake_timeout, ready_rx).await {
        Ok(Ok(Ok(()))) => {
            handle.set_task(task);
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
