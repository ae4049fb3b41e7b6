//! The client side: [`connect`], one socket per path.

use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use braid_transport::path::{PathId, PathRole};
use braid_transport::proto::{self, ClientCrypto, Config};

use super::DriverError;
use super::clock::Clock;
use super::energy::client_policy;
use super::handle::{ConnectionHandle, Shared, SharedState, lock};
use super::paths::{ClientPath, ConnectOptions, PathInfo, PathSpec};
use super::socket::open_path_socket;
use super::task::{Io, spawn_task};

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
    let seed = crate::tls::os_seed().map_err(|e| DriverError::Tls(e.to_string()))?;
    let Some(first) = specs.first() else {
        return Err(DriverError::NoPaths);
    };
    let remote = first.remote;
    let mut paths = Vec::with_capacity(specs.len());
    for spec in &specs {
        let (sock, udp, local) = open_path_socket(spec.local, spec.iface.as_deref(), spec.remote)?;
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
    if let Some(token) = options.token.clone() {
        conn.set_initial_token(token);
    }
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
