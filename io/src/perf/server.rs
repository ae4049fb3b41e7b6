//! The perf server: sends the bulk stream to every client until it stops or leaves.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use braid_transport::proto::{Config, Delivery, Reliability, ServerCrypto};
use tokio::time::Instant;

use super::{MESSAGE_BYTES, PerfError, ServerCounters, control_message, source};
use crate::driver::{self, ConnectionHandle, DriverError, EndpointStats};

/// What the server reports as it runs.
#[derive(Clone, Debug, PartialEq)]
pub enum ServerEvent {
    /// It listens on this address.
    Listening(SocketAddr),
    /// A client connected.
    Accepted {
        /// The connection's id.
        connection_id: u64,
        /// The client's address.
        remote: SocketAddr,
    },
    /// A client's connection ended.
    Served(ServedConnection),
}

/// One served connection, once it ended.
#[derive(Clone, Debug, PartialEq)]
pub struct ServedConnection {
    /// The connection's id.
    pub connection_id: u64,
    /// Data bytes queued for the client.
    pub bytes_queued: u64,
    /// How long the connection lasted, s.
    pub seconds: f64,
    /// Packets the transport declared lost.
    pub lost_packets: u64,
    /// Why it ended.
    pub ended: DriverError,
}

/// Counters of one served connection.
#[derive(Default)]
pub(super) struct Served {
    messages: AtomicU64,
    stopped: AtomicBool,
}

impl Served {
    /// Stops the sender after the message it is sending.
    pub(super) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// Data bytes queued so far.
    pub(super) fn bytes_queued(&self) -> u64 {
        self.messages.load(Ordering::SeqCst) * MESSAGE_BYTES as u64
    }
}

/// Listens on `listen` with `config` (identity `crypto`) and serves every client that connects, until
/// `shutdown` completes (or, with `one_off`, after the first client). `events` hears about
/// each step (from the server's tasks too). Returns the endpoint's counters at the end.
pub async fn run_server(
    listen: SocketAddr,
    config: Arc<Config>,
    crypto: ServerCrypto,
    one_off: bool,
    shutdown: impl Future<Output = ()>,
    events: Arc<dyn Fn(ServerEvent) + Send + Sync>,
) -> Result<EndpointStats, PerfError> {
    let ep = driver::listen(listen, config, crypto)
        .await
        .map_err(|source| PerfError::Listen { addr: listen, source })?;
    events(ServerEvent::Listening(ep.local_addr()));
    tokio::pin!(shutdown);
    loop {
        let conn = tokio::select! {
            c = ep.accept() => c,
            _ = &mut shutdown => break,
        };
        let Some(conn) = conn else { break };
        events(ServerEvent::Accepted {
            connection_id: conn.connection_id(),
            remote: conn.remote(),
        });
        let task = tokio::spawn(serve(Arc::new(conn)));
        if one_off {
            let served = tokio::select! {
                r = task => r.ok(),
                _ = &mut shutdown => None,
            };
            if let Some(s) = served {
                events(ServerEvent::Served(s));
            }
            break;
        }
        let events = Arc::clone(&events);
        tokio::spawn(async move {
            if let Ok(s) = task.await {
                events(ServerEvent::Served(s));
            }
        });
    }
    Ok(ep.stats())
}

/// Sends the bulk stream on `conn` until the client stops or leaves.
async fn serve(conn: Arc<ConnectionHandle>) -> ServedConnection {
    let served = Arc::new(Served::default());
    let started = Instant::now();
    let sender = tokio::spawn(send_bulk(Arc::clone(&conn), Arc::clone(&served)));
    // Read control messages from the client.
    let ended = loop {
        match conn.read_message().await {
            Ok(Delivery::Message { .. }) => {
                served.stop();
                // Counters for the client, after the data already queued.
                let stats = conn.stats().await;
                let counters = ServerCounters::new(served.bytes_queued(), stats.as_ref());
                let _ = conn.send_message(control_message(&counters), Reliability::Reliable).await;
            }
            Ok(Delivery::Gap { .. }) => {}
            Err(e) => break e,
        }
    };
    sender.abort();
    let seconds = started.elapsed().as_secs_f64();
    let bytes_queued = served.bytes_queued();
    let stats = conn.stats().await;
    ServedConnection {
        connection_id: conn.connection_id(),
        bytes_queued,
        seconds,
        lost_packets: stats.as_ref().map_or(0, |s| s.lost_packets),
        ended,
    }
}

/// Queues the bulk stream on `conn` until `served` is stopped or the connection ends.
pub(super) async fn send_bulk(conn: Arc<ConnectionHandle>, served: Arc<Served>) {
    let source = source();
    let mut id = 0u64;
    while !served.stopped.load(Ordering::SeqCst) {
        let Some(message) = source.message(id) else { return };
        if conn.send_message(message, Reliability::Reliable).await.is_err() {
            return;
        }
        id += 1;
        served.messages.store(id, Ordering::SeqCst);
    }
}
