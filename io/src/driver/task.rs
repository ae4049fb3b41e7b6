//! The per-connection task: one tokio task owns the connection and, on a client, its
//! path sockets and policy runner. It waits on socket readiness (or, on a server, the
//! endpoint's routed input), the connection's and the policy's timers, the application's
//! commands and messages and room in the delivery queue; after every input it lets the
//! policy look, moves messages in, drains what the connection has to send and hands the
//! application what it can read.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use braid_transport::policy::PolicyRunner;
use braid_transport::proto::{self, Delivery, Event, Reliability, SendError};
use braid_transport::time::Instant;

use super::clock::Clock;
use super::handle::{Command, ConnectionHandle, Shared, lock};
use super::paths::ClientPath;
use super::socket::{RECV_BUFFER, SocketFault, open_path_socket};
use super::udp::{GsoBatches, ServerSocket};
use super::{DriverError, UNREACHABLE_AFTER};

/// A connection issued or retired a connection id: the router routes it to the connection
/// whose handshake id is `primary`, or stops. Each connection issues a bounded number
/// ([`proto::MAX_CIDS`]), and an id that names another connection's
/// route is ignored.
#[derive(Debug, Clone, Copy)]
pub(super) struct CidUpdate {
    pub(super) primary: u64,
    pub(super) event: proto::CidEvent,
}

/// A datagram for one server connection.
pub(super) struct Incoming {
    pub(super) data: Vec<u8>,
    pub(super) remote: SocketAddr,
    /// The local address it was sent to (the endpoint may have several).
    pub(super) local: SocketAddr,
}

/// Datagrams handled before the connection gets a chance to answer.
const RECV_BATCH: usize = 64;
/// Datagrams sent before input (ACKs) is looked at again.
const SEND_BATCH: usize = 64;
/// Messages waiting for the application (per connection).
const DELIVERY_QUEUE: usize = 4;
/// Messages the application may hand over ahead of the connection taking them.
const SEND_QUEUE: usize = 4;

/// The task's sockets.
pub(super) enum Io {
    /// A client's paths, one connected socket each.
    Client { paths: Vec<ClientPath> },
    /// A server connection: the endpoint's shared socket for sending, its routed
    /// datagrams for receiving, and the router's inbox for the ids the connection issues.
    Server {
        sock: Arc<ServerSocket>,
        input: mpsc::Receiver<Incoming>,
        cids: mpsc::UnboundedSender<CidUpdate>,
    },
}

enum Wake {
    Command(Option<Command>),
    /// Client path `idx` has `len` bytes in the buffer: a datagram, or a GRO batch.
    Datagram {
        idx: usize,
        len: usize,
        /// GRO: the size of each coalesced datagram (the last may be shorter).
        stride: usize,
    },
    /// A client path's socket failed.
    SocketError {
        idx: usize,
        error: io::Error,
    },
    /// Server input.
    Incoming(Option<Incoming>),
    /// The connection's or the policy's timer, set for this deadline.
    Timer(tokio::time::Instant),
    DeliveryRoom,
    AppSend(Option<(Bytes, Reliability)>),
}

/// Starts the task of `conn` and returns the application's handle with the task (the
/// caller gives the task to the handle once the connection is the application's).
/// `policy` is the client's policy runner; `ready` learns when the handshake completed or
/// failed.
// Private, with one call per side (client, server): a struct would only rename the list.
#[allow(clippy::too_many_arguments)]
pub(super) fn spawn_task(
    conn: proto::Connection,
    clock: Clock,
    io: Io,
    policy: Option<PolicyRunner>,
    shared: Shared,
    ready: Option<oneshot::Sender<Result<(), DriverError>>>,
    remote: SocketAddr,
) -> (ConnectionHandle, JoinHandle<()>) {
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (send_tx, send_rx) = mpsc::channel(SEND_QUEUE);
    let (deliver_tx, deliver_rx) = mpsc::channel(DELIVERY_QUEUE);
    let connection_id = conn.original_connection_id();
    let task = Task {
        conn,
        clock,
        io,
        policy,
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
        gso: GsoBatches::default(),
        rbuf: vec![0u8; RECV_BUFFER],
        last_rx: tokio::time::Instant::now(),
        timer: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
        timer_at: None,
        added_paths: false,
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
    /// The client's radios, mode switch and ACK repeat.
    policy: Option<PolicyRunner>,
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
    /// The server's datagrams gathered for GSO sends, a batch per destination.
    gso: GsoBatches,
    /// Receive buffer.
    rbuf: Vec<u8>,
    last_rx: tokio::time::Instant,
    /// The connection's and the policy's timer: one timer entry, moved when the deadline
    /// moves (a new entry per wait would register and cancel one every few datagrams).
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// The deadline `timer` is set to (`None`: no deadline).
    timer_at: Option<tokio::time::Instant>,
    added_paths: bool,
}

impl Task {
    async fn run(mut self) {
        loop {
            let now = self.clock.now();
            if self.conn.poll_timeout().is_some_and(|t| t <= now) {
                self.conn.handle_timeout(now);
            }
            if let Some(p) = self.policy.as_mut() {
                p.poll(now, &mut self.conn);
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
                Wake::Datagram { idx, len, stride } => {
                    self.on_client_datagrams(now, idx, len, stride);
                    self.drain_client(now);
                }
                Wake::SocketError { idx, error } => self.on_socket_error(now, idx, error),
                Wake::Incoming(None) => {
                    // The endpoint stopped: nothing will arrive any more.
                    self.conn.close(now, 0, b"server stopped");
                }
                Wake::Incoming(Some(inc)) => {
                    self.on_server_datagram(now, inc);
                    self.drain_server(now, RECV_BATCH - 1);
                }
                Wake::Timer(due) => {
                    lock(&self.shared)
                        .record_timer(tokio::time::Instant::now().saturating_duration_since(due));
                    let now = self.clock.now();
                    self.conn.handle_timeout(now);
                }
                Wake::DeliveryRoom => {}
                Wake::AppSend(None) => self.sends_open = false,
                Wake::AppSend(Some(m)) => self.send_stash = Some(m),
            }
        }
    }

    fn energy(&mut self, now: Instant) -> Option<super::EnergySnapshot> {
        self.policy.as_mut().map(|p| p.snapshot(now))
    }

    fn on_command(&mut self, now: Instant, c: Command) {
        match c {
            Command::Stats(tx) => {
                let _ = tx.send(self.conn.stats());
            }
            Command::Energy(tx) => {
                let _ = tx.send(self.energy(now));
            }
            Command::Close { code, reason } => self.conn.close(now, code, &reason),
            Command::Trace(ev) => self.conn.trace_event(now, &ev),
            Command::Playout(f) => self.conn.set_playout_feedback(now, f),
            Command::PathStatus(path, status) => self.conn.set_path_status(now, path, status),
            Command::ReaderStarved => {
                // Starved only if nothing is on its way to the application: a message
                // the connection still holds (or one already queued) is handed over now.
                self.feed_deliveries(now);
                let queued = self.deliveries.capacity() < self.deliveries.max_capacity();
                if self.delivery_stash.is_none() && !queued {
                    self.conn.reader_starved(now);
                }
            }
            Command::Migrate { idx, reply } => {
                let _ = reply.send(self.migrate_path(now, idx));
            }
            #[cfg(test)]
            Command::BreakPath(idx) => {
                self.on_socket_error(now, idx, io::Error::other("injected: no such device"))
            }
        }
    }

    /// Moves client path `idx` to a new socket on its local IP address and interface
    /// ([`ConnectionHandle::migrate`]); the old socket closes once the connection took the
    /// move.
    fn migrate_path(&mut self, now: Instant, idx: usize) -> Result<SocketAddr, DriverError> {
        let Io::Client { paths } = &mut self.io else {
            return Err(DriverError::Migrate("only a client migrates".into()));
        };
        let Some(p) = paths.get_mut(idx).filter(|p| !p.failed) else {
            return Err(DriverError::Migrate(format!("no working path {idx}")));
        };
        let Some(id) = p.id else {
            return Err(DriverError::Migrate(format!("path {idx} was never opened")));
        };
        let iface = lock(&self.shared).paths.get(idx).and_then(|i| i.iface.clone());
        let any_port = SocketAddr::new(p.local.ip(), 0);
        let (sock, udp, local) = open_path_socket(any_port, iface.as_deref(), p.remote)?;
        self.conn.migrate(now, id, local).map_err(|e| DriverError::Migrate(e.to_string()))?;
        p.sock = sock;
        p.udp = udp;
        p.local = local;
        if let Some(info) = lock(&self.shared).paths.get_mut(idx) {
            info.local = local;
        }
        Ok(local)
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
            Io::Server { .. } => self.drain_server(now, RECV_BATCH),
        }
    }

    async fn wait(&mut self) -> Wake {
        let now = self.clock.now();
        let policy = self.policy.as_ref().and_then(PolicyRunner::poll_timeout);
        let deadline = match (self.conn.poll_timeout(), policy) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(|t| self.clock.at(t.max(now + Duration::from_micros(1))));
        if let Some(d) = deadline
            && self.timer_at != Some(d)
        {
            self.timer.as_mut().reset(d);
        }
        self.timer_at = deadline;
        let want_send = self.sends_open && self.send_stash.is_none();
        let want_room = self.delivery_stash.is_some();
        let commands_open = self.commands_open;
        let has_timer = deadline.is_some();
        let timer_due = deadline.unwrap_or_else(tokio::time::Instant::now);
        let Task { io, commands, sends, deliveries, rbuf, timer, .. } = self;
        tokio::select! {
            biased;
            c = commands.recv(), if commands_open => Wake::Command(c),
            w = recv_io(io, rbuf) => w,
            _ = timer.as_mut(), if has_timer => Wake::Timer(timer_due),
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
        let more = self.flush_datagrams(now).await;
        if let Io::Server { sock, .. } = &self.io {
            self.gso.send_all(sock).await;
        }
        more
    }

    /// [`Task::flush`] but for the server's open GSO batches.
    async fn flush_datagrams(&mut self, now: Instant) -> bool {
        for _ in 0..SEND_BATCH {
            let Some(t) = self.conn.poll_transmit(now, &mut self.buf) else {
                return false;
            };
            let len = t.len.min(self.buf.len());
            let data = &self.buf[..len];
            match &mut self.io {
                Io::Server { sock, .. } => {
                    // Each destination's datagrams leave in GSO sends. A full send buffer
                    // waits; other errors lose the datagrams, which the connection's
                    // recovery handles like a loss.
                    self.gso.push(sock, t.remote, t.local, data).await;
                }
                Io::Client { paths } => {
                    let Some(idx) = paths.iter().position(|p| p.id == Some(t.path) && !p.failed)
                    else {
                        continue;
                    };
                    let result = paths[idx].sock.send(data).await;
                    match result {
                        Ok(n) => {
                            if let Some(p) = self.policy.as_mut() {
                                p.on_sent(now, idx, n);
                            }
                        }
                        Err(e) => {
                            // The datagram did not leave (a refusal reports an earlier
                            // one's fate at the peer, not this one's).
                            if SocketFault::of(&e) != SocketFault::Refused
                                && let Some(p) = self.policy.as_mut()
                            {
                                p.on_transmit_failure(now, t.path, &mut self.conn);
                            }
                            self.on_socket_error(now, idx, e);
                        }
                    }
                }
            }
        }
        true
    }

    fn events(&mut self, now: Instant) {
        if let Some(token) = self.conn.take_new_token() {
            lock(&self.shared).new_token = Some(token);
        }
        while let Some(ev) = self.conn.poll_event() {
            match ev {
                Event::Connected => {
                    lock(&self.shared).established = true;
                    if let Some(r) = self.ready.take() {
                        let _ = r.send(Ok(()));
                    }
                    self.add_client_paths(now);
                }
                Event::Closed { reason } => {
                    let err = DriverError::closed(reason, self.conn.idle_timeout());
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

    /// Once connected, adds the client's other paths to the connection.
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

    /// `len` bytes arrived in the receive buffer on client path `idx`: one datagram, or
    /// several of `stride` bytes each (the last may be shorter) coalesced by GRO.
    fn on_client_datagrams(&mut self, now: Instant, idx: usize, len: usize, stride: usize) {
        let Io::Client { paths } = &mut self.io else {
            return;
        };
        let Some(p) = paths.get_mut(idx) else { return };
        self.last_rx = tokio::time::Instant::now();
        let data = self.rbuf.get(..len).unwrap_or(&[]);
        let stride = if stride == 0 { len.max(1) } else { stride };
        for d in data.chunks(stride) {
            self.conn.handle_datagram(now, p.local, p.remote, d);
            if let Some(p) = self.policy.as_mut() {
                p.on_received(now, idx, d.len());
            }
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
                match try_recv_path(p, &mut self.rbuf) {
                    Ok((len, stride)) => {
                        budget -= 1;
                        self.on_client_datagrams(now, idx, len, stride);
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

    /// Handles up to `budget` datagrams the endpoint already routed to this connection.
    fn drain_server(&mut self, now: Instant, budget: usize) {
        for _ in 0..budget {
            let Io::Server { input, .. } = &mut self.io else {
                return;
            };
            match input.try_recv() {
                Ok(inc) => self.on_server_datagram(now, inc),
                Err(_) => return,
            }
        }
    }

    fn on_server_datagram(&mut self, now: Instant, inc: Incoming) {
        let Io::Server { .. } = &self.io else {
            return;
        };
        self.last_rx = tokio::time::Instant::now();
        self.conn.handle_datagram(now, inc.local, inc.remote, &inc.data);
        // Ids the connection issued or retired: the router routes them (or stops).
        if let Io::Server { cids, .. } = &self.io {
            let primary = self.conn.connection_id();
            while let Some(event) = self.conn.poll_cid_event() {
                let _ = cids.send(CidUpdate { primary, event });
            }
        }
    }

    /// A client path's socket reported an error.
    fn on_socket_error(&mut self, now: Instant, idx: usize, error: io::Error) {
        let Io::Client { paths } = &mut self.io else {
            return;
        };
        let established = self.ready.is_none();
        match SocketFault::of(&error) {
            SocketFault::Refused => {
                // "Port unreachable" for an earlier datagram: the peer's process may be
                // gone.
                if !established && idx == 0 {
                    let remote = paths[0].remote;
                    self.fail(now, DriverError::Refused { remote });
                    return;
                }
                // Nothing arrives on any path and the peer's host says the port is closed:
                // the peer process is gone (a path that still worked would be receiving).
                if self.last_rx.elapsed() >= UNREACHABLE_AFTER {
                    self.fail(now, DriverError::PeerUnreachable { after: self.last_rx.elapsed() });
                }
                return;
            }
            SocketFault::Transient => return,
            SocketFault::Broken => {}
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
        let energy = self.energy(self.clock.now());
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
                        let _ = tx.send(self.policy.as_mut().map(|p| p.snapshot(now)));
                    }
                    Some(Command::ReaderStarved) => {}
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
                    // Ready, then read; a spurious readiness (would block) is cleared by
                    // `try_io` and polled again, which registers the waker.
                    loop {
                        match p.sock.poll_recv_ready(cx) {
                            Poll::Ready(Ok(())) => {}
                            Poll::Ready(Err(error)) => {
                                return Poll::Ready(Wake::SocketError { idx, error });
                            }
                            Poll::Pending => break,
                        }
                        match try_recv_path(p, rbuf) {
                            Ok((len, stride)) => {
                                return Poll::Ready(Wake::Datagram { idx, len, stride });
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                            Err(error) => return Poll::Ready(Wake::SocketError { idx, error }),
                        }
                    }
                }
                Poll::Pending
            })
            .await
        }
    }
}

/// Reads what is queued on a client path's socket: one datagram, or a GRO batch of
/// several; (bytes, stride).
fn try_recv_path(p: &ClientPath, rbuf: &mut [u8]) -> io::Result<(usize, usize)> {
    let mut meta = [quinn_udp::RecvMeta::default()];
    p.sock.try_io(tokio::io::Interest::READABLE, || {
        let mut bufs = [io::IoSliceMut::new(rbuf)];
        p.udp.recv((&p.sock).into(), &mut bufs, &mut meta)
    })?;
    Ok((meta[0].len, meta[0].stride))
}
