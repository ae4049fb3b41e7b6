//! The UDP relay emulator: a scenario's paths in real time, unprivileged.
//!
//! Each path gets a client-facing UDP socket (where the client sends) and a server-facing
//! socket (from which the relay talks to the server). Datagrams cross the path's link chain
//! ([`braid_netem::Link`]: rate or trace, delay and jitter, loss, droptail queue) — `up`
//! from client to server, `down` back — with the scenario's timed events applied on time
//! and live commands ([`RelayCommand`]) for demos. Named links shared by several paths are
//! one link here too, so paths really compete for them.
//!
//! One task owns every link (so shared links need no locks); one small task per socket only
//! receives and hands datagrams over a channel.
//!
//! **Whose datagrams a path carries.** A path's front socket belongs to the first client
//! address that sends to it: datagrams from any other source are dropped and counted
//! ([`RelayStats::foreign_dropped`]), so a stranger who learns the port can neither inject
//! into the stream nor divert the replies to itself. The path is released to a new address
//! only after its client has sent nothing for [`CLIENT_IDLE`] (the transport's idle
//! timeout), so a later session can use the same relay. A NAT rebinding of a real client
//! shows up at the server as the relay's own back address; the relay models the network
//! between, not the client's NAT.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};

use braid_netem::scenario::{Action, Scenario};
use braid_netem::{LinkConfig, LinkCounters};
use braid_transport::time::Instant;
use braid_transport::trace::{CaptureSink, Direction, capture_addrs};

use crate::emulated::{Network, Packet};

/// A relay that could not start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// Binding a socket failed.
    #[error("cannot bind a relay socket on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The scenario has no path.
    #[error("the scenario has no path to emulate")]
    NoPaths,
    /// The scenario has a `[[node]]`: the relay emulates links, not proxies.
    #[error(
        "node \"{0}\": the real-time relay does not run a [[node]] proxy (the simulator does; in real time put `braid proxy` between two relays)"
    )]
    Node(String),
}

/// A live change to the emulated network.
#[derive(Clone, Debug, PartialEq)]
pub enum RelayCommand {
    /// Take path `path` (index) down in both directions.
    PathDown(usize),
    /// Bring it back.
    PathUp(usize),
    /// Set the rate (bit/s) of every link of the path, both directions.
    SetRate(usize, u64),
    /// Set the one-way delay of every link of the path, both directions.
    SetDelay(usize, Duration),
    /// Set Bernoulli loss on every link of the path, both directions.
    SetLoss(usize, f64),
    /// Stop the relay.
    Stop,
}

/// Where one emulated path listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayPath {
    /// The path's name.
    pub name: String,
    /// Clients send here.
    pub listen: SocketAddr,
    /// The relay forwards to this server address.
    pub server: SocketAddr,
}

/// A path's client address is kept while it sends at least this often; after this long of
/// silence another address may take the path over (RFC 9000's default idle timeout).
pub const CLIENT_IDLE: Duration = Duration::from_secs(30);

/// Per-link counters, by link name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RelayStats {
    /// (link name, counters), in the scenario's link order.
    pub links: Vec<(String, LinkCounters)>,
    /// Datagrams forwarded to the server / to the client, per path.
    pub forwarded: Vec<(u64, u64)>,
    /// Datagrams dropped per path because they came from another address than the path's
    /// client (or, on the back socket, than the server).
    pub foreign_dropped: Vec<u64>,
}

/// A running relay.
pub struct RelayHandle {
    paths: Vec<RelayPath>,
    commands: mpsc::UnboundedSender<RelayCommand>,
    stats: watch::Receiver<RelayStats>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl RelayHandle {
    /// The emulated paths.
    pub fn paths(&self) -> &[RelayPath] {
        &self.paths
    }

    /// Sends a live command (ignored once the relay stopped).
    pub fn command(&self, cmd: RelayCommand) {
        let _ = self.commands.send(cmd);
    }

    /// The latest counters (refreshed every 100 ms).
    pub fn stats(&self) -> RelayStats {
        self.stats.borrow().clone()
    }

    /// Stops the relay and waits for it.
    pub async fn stop(mut self) {
        let _ = self.commands.send(RelayCommand::Stop);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        let _ = self.commands.send(RelayCommand::Stop);
    }
}

enum Input {
    /// (socket index, datagram, source). Socket 2p is path p's front, 2p+1 its back.
    Datagram(usize, Vec<u8>, SocketAddr),
}

/// Makes the capture of one path (by name) and direction of a relay that starts.
pub type CaptureFactory = dyn Fn(&str, Direction) -> Option<Box<dyn CaptureSink>> + Send + Sync;

static CAPTURES: std::sync::OnceLock<Arc<CaptureFactory>> = std::sync::OnceLock::new();

/// Captures the datagrams of every relay this process starts from now on, per path and
/// direction, where they enter the path's first link (before loss), with the synthetic
/// addresses of [`braid_transport::trace::capture_addrs`]; a process sets it once
/// (`braid --pcap`). Returns false if one was set already.
pub fn set_capture_factory(factory: Arc<CaptureFactory>) -> bool {
    CAPTURES.set(factory).is_ok()
}

/// Starts the relay for `scenario`'s paths toward `server`. Path `i` listens on
/// `listen_ip:(base_port + i)` when `base_port` is given, else on an ephemeral port.
pub async fn start(
    scenario: &Scenario,
    server: SocketAddr,
    listen_ip: std::net::IpAddr,
    base_port: Option<u16>,
    seed: u64,
) -> Result<RelayHandle, RelayError> {
    if scenario.paths.is_empty() {
        return Err(RelayError::NoPaths);
    }
    if let Some(node) = scenario.nodes.first() {
        return Err(RelayError::Node(node.name.clone()));
    }
    let mut sockets = Vec::new();
    let mut paths = Vec::new();
    for (i, p) in scenario.paths.iter().enumerate() {
        let port = base_port.map_or(0, |b| b.saturating_add(i as u16));
        let front_addr = SocketAddr::new(listen_ip, port);
        let front = UdpSocket::bind(front_addr)
            .await
            .map_err(|source| RelayError::Bind { addr: front_addr, source })?;
        let back_addr = SocketAddr::new(listen_ip, 0);
        let back = UdpSocket::bind(back_addr)
            .await
            .map_err(|source| RelayError::Bind { addr: back_addr, source })?;
        let listen =
            front.local_addr().map_err(|source| RelayError::Bind { addr: front_addr, source })?;
        paths.push(RelayPath { name: p.name.clone(), listen, server });
        sockets.push(Arc::new(front));
        sockets.push(Arc::new(back));
    }
    let (in_tx, in_rx) = mpsc::channel::<Input>(4096);
    let mut readers = Vec::new();
    for (idx, sock) in sockets.iter().enumerate() {
        let sock = Arc::clone(sock);
        let tx = in_tx.clone();
        readers.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 65_536];
            loop {
                match sock.recv_from(&mut buf).await {
                    Ok((n, from)) => {
                        if tx.send(Input::Datagram(idx, buf[..n].to_vec(), from)).await.is_err() {
                            return;
                        }
                    }
                    // ICMP errors (e.g. the peer's port closed) surface here on Linux:
                    // they are not the relay's problem.
                    Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                }
            }
        }));
    }
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (stats_tx, stats_rx) = watch::channel(RelayStats::default());
    let net = Network::new(scenario, seed, LinkConfig::clone);
    let captures = match CAPTURES.get() {
        Some(f) => scenario
            .paths
            .iter()
            .flat_map(|p| [f(&p.name, Direction::Down), f(&p.name, Direction::Up)])
            .collect(),
        None => Vec::new(),
    };
    let state = RelayLoop {
        captures,
        server,
        sockets,
        net,
        clients: vec![None; scenario.paths.len()],
        forwarded: vec![(0, 0); scenario.paths.len()],
        foreign_dropped: vec![0; scenario.paths.len()],
        origin: tokio::time::Instant::now(),
    };
    let task = tokio::spawn(async move {
        state.run(in_rx, cmd_rx, stats_tx).await;
        for r in readers {
            r.abort();
        }
    });
    Ok(RelayHandle { paths, commands: cmd_tx, stats: stats_rx, task: Some(task) })
}

struct RelayLoop {
    /// Path p's down capture at 2p, its up capture at 2p+1 (empty without captures).
    captures: Vec<Option<Box<dyn CaptureSink>>>,
    server: SocketAddr,
    sockets: Vec<Arc<UdpSocket>>,
    net: Network,
    /// Each path's client and when it last sent.
    clients: Vec<Option<(SocketAddr, Instant)>>,
    forwarded: Vec<(u64, u64)>,
    foreign_dropped: Vec<u64>,
    origin: tokio::time::Instant,
}

impl RelayLoop {
    fn now(&self) -> Instant {
        Instant::from_duration(self.origin.elapsed())
    }

    fn to_tokio(&self, t: Instant) -> tokio::time::Instant {
        self.origin + t.since_epoch()
    }

    async fn run(
        mut self,
        mut input: mpsc::Receiver<Input>,
        mut commands: mpsc::UnboundedReceiver<RelayCommand>,
        stats: watch::Sender<RelayStats>,
    ) {
        let mut stats_tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            self.net.apply_due_events(self.now());
            self.deliver_due();
            let wake = self.net.next_wake().map(|t| self.to_tokio(t));
            tokio::select! {
                biased;
                cmd = commands.recv() => match cmd {
                    None | Some(RelayCommand::Stop) => return,
                    Some(c) => self.apply_command(c),
                },
                msg = input.recv() => match msg {
                    None => return,
                    Some(Input::Datagram(idx, bytes, from)) => self.on_datagram(idx, bytes, from),
                },
                _ = sleep_until_opt(wake) => {}
                _ = stats_tick.tick() => {
                    let _ = stats.send(self.stats());
                }
            }
        }
    }

    fn stats(&self) -> RelayStats {
        RelayStats {
            links: self
                .net
                .scenario()
                .links
                .iter()
                .zip(self.net.links())
                .map(|(d, l)| (d.name.clone(), l.counters()))
                .collect(),
            forwarded: self.forwarded.clone(),
            foreign_dropped: self.foreign_dropped.clone(),
        }
    }

    fn on_datagram(&mut self, idx: usize, bytes: Vec<u8>, from: SocketAddr) {
        let path = idx / 2;
        let front = idx.is_multiple_of(2);
        if path >= self.net.scenario().paths.len() {
            return;
        }
        let now = self.now();
        let known = if front {
            match self.clients[path] {
                Some((client, last)) if client != from && now - last < CLIENT_IDLE => false,
                _ => {
                    self.clients[path] = Some((from, now));
                    true
                }
            }
        } else {
            from == self.server
        };
        if !known {
            self.foreign_dropped[path] += 1;
            return;
        }
        if let Some(Some(cap)) = self.captures.get_mut(2 * path + usize::from(front)) {
            let (client, server) = capture_addrs(path);
            if front {
                cap.datagram(now, client, server, &bytes);
            } else {
                cap.datagram(now, server, client, &bytes);
            }
        }
        if let Some(pkt) = self.net.send(now, path, front, bytes) {
            self.emit(pkt);
        }
    }

    fn deliver_due(&mut self) {
        let now = self.now();
        while let Some(pkt) = self.net.poll_delivery(now) {
            self.emit(pkt);
        }
    }

    fn emit(&mut self, pkt: Packet) {
        let path = pkt.path;
        if pkt.up {
            if let Some(sock) = self.sockets.get(2 * path + 1) {
                let _ = sock.try_send_to(&pkt.bytes, self.server);
                self.forwarded[path].0 += 1;
            }
        } else if let (Some(sock), Some((client, _))) =
            (self.sockets.get(2 * path), self.clients[path])
        {
            let _ = sock.try_send_to(&pkt.bytes, client);
            self.forwarded[path].1 += 1;
        }
    }

    fn apply_command(&mut self, cmd: RelayCommand) {
        let now = self.now();
        let (path, action) = match cmd {
            RelayCommand::PathDown(p) => (p, Action::Down),
            RelayCommand::PathUp(p) => (p, Action::Up),
            RelayCommand::SetRate(p, r) => {
                (p, Action::Set { rate_bps: Some(r), delay: None, loss: None })
            }
            RelayCommand::SetDelay(p, d) => {
                (p, Action::Set { rate_bps: None, delay: Some(d), loss: None })
            }
            RelayCommand::SetLoss(p, l) => {
                (p, Action::Set { rate_bps: None, delay: None, loss: Some(l) })
            }
            RelayCommand::Stop => return,
        };
        for l in self.net.path_links(path) {
            if let Some(link) = self.net.link_mut(l) {
                action.apply(link, now);
            }
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
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use braid_netem::scenario::Scenario;

    const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    fn scenario(text: &str) -> Scenario {
        Scenario::parse(text, "test.toml", std::path::Path::new(".")).expect("valid scenario")
    }

    /// A server that echoes every datagram back to its sender.
    async fn echo_server() -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let sock = UdpSocket::bind((LOOPBACK, 0)).await.unwrap();
        let addr = sock.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            while let Ok((n, from)) = sock.recv_from(&mut buf).await {
                let _ = sock.send_to(&buf[..n], from).await;
            }
        });
        (addr, task)
    }

    #[tokio::test]
    async fn a_scenario_with_a_node_is_refused_not_run_without_it() {
        let s = scenario(
            r#"
            name = "node"
            duration_s = 5
            [[link]]
            name = "a"
            [[link]]
            name = "b"
            [[path]]
            name = "p"
            down = { via = ["a", "b"] }
            up = { delay_ms = 5 }
            [[node]]
            name = "proxy"
            after = "a"
            "#,
        );
        let e = start(&s, SocketAddr::new(LOOPBACK, 9), LOOPBACK, None, 1).await.err();
        assert!(matches!(&e, Some(RelayError::Node(n)) if n == "proxy"), "{e:?}");
    }

    #[tokio::test]
    async fn round_trip_time_is_the_sum_of_the_configured_delays() {
        let s = scenario(
            r#"
            name = "delay"
            duration_s = 5
            [[path]]
            name = "wifi"
            role = "wifi"
            down = { delay_ms = 15 }
            up = { delay_ms = 25 }
            "#,
        );
        let (server, echo) = echo_server().await;
        let relay = start(&s, server, LOOPBACK, None, 1).await.unwrap();
        let client = UdpSocket::bind((LOOPBACK, 0)).await.unwrap();
        let target = relay.paths()[0].listen;
        let mut rtts = Vec::new();
        let mut buf = [0u8; 64];
        for i in 0..20u8 {
            let t0 = tokio::time::Instant::now();
            client.send_to(&[i; 32], target).await.unwrap();
            let (n, _) = tokio::time::timeout(Duration::from_secs(2), client.recv_from(&mut buf))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(&buf[..n], &[i; 32]);
            rtts.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
        rtts.sort_by(f64::total_cmp);
        let median = rtts[rtts.len() / 2];
        // 40 ms configured; allow for timer granularity and a busy machine.
        assert!((39.0..46.0).contains(&median), "median RTT {median} ms: {rtts:?}");
        relay.stop().await;
        echo.abort();
    }

    #[tokio::test]
    async fn a_rate_limited_path_delivers_at_its_rate_and_a_down_path_delivers_nothing() {
        let s = scenario(
            r#"
            name = "rate"
            duration_s = 5
            [[path]]
            name = "lte"
            role = "lte"
            down = { rate = "4mbit", delay_ms = 5, queue_bytes = 20000 }
            up = { delay_ms = 5 }
            "#,
        );
        // The "server" blasts 1000-byte datagrams at ~8 Mbit/s to whoever said hello.
        let server_sock = UdpSocket::bind((LOOPBACK, 0)).await.unwrap();
        let server = server_sock.local_addr().unwrap();
        let relay = start(&s, server, LOOPBACK, None, 1).await.unwrap();
        let client = UdpSocket::bind((LOOPBACK, 0)).await.unwrap();
        client.send_to(b"hello", relay.paths()[0].listen).await.unwrap();
        let mut buf = [0u8; 2048];
        let (_, relay_back) = server_sock.recv_from(&mut buf).await.unwrap();
        let blaster = tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            let mut k = 0u64;
            while start.elapsed() < Duration::from_millis(2500) {
                let _ = server_sock.send_to(&[7u8; 1000], relay_back).await;
                k += 1;
                // 1000 datagrams/s·… ≈ 8 Mbit/s: one every 1 ms.
                tokio::time::sleep_until(start + Duration::from_micros(k * 1000)).await;
            }
        });
        // Measure between 0.5 s and 2.0 s (steady state).
        let mut got = 0u64;
        let t0 = tokio::time::Instant::now();
        let mut counted = 0u64;
        while t0.elapsed() < Duration::from_millis(2000) {
            if let Ok(Ok((n, _))) =
                tokio::time::timeout(Duration::from_millis(50), client.recv_from(&mut buf)).await
            {
                let e = t0.elapsed();
                if e >= Duration::from_millis(500) {
                    got += (n + 28) as u64;
                    counted += 1;
                }
            }
        }
        let rate = got as f64 * 8.0 / 1.5;
        assert!(counted > 100);
        assert!((rate / 4e6 - 1.0).abs() < 0.1, "achieved {rate} bit/s of 4 Mbit/s");
        // Cut the path: nothing arrives while it is down.
        relay.command(RelayCommand::PathDown(0));
        tokio::time::sleep(Duration::from_millis(50)).await;
        while let Ok(Ok(_)) =
            tokio::time::timeout(Duration::from_millis(20), client.recv_from(&mut buf)).await
        {
        }
        let quiet =
            tokio::time::timeout(Duration::from_millis(300), client.recv_from(&mut buf)).await;
        assert!(quiet.is_err(), "a down path delivered a datagram");
        let stats = relay.stats();
        assert!(stats.links.iter().any(|(_, c)| c.transmit_failures() > 0), "{stats:?}");
        blaster.abort();
        relay.stop().await;
    }

    #[tokio::test]
    async fn a_foreign_source_neither_reaches_the_server_nor_takes_the_replies() {
        let s = scenario(
            r#"
            name = "foreign"
            duration_s = 5
            [[path]]
            name = "wifi"
            role = "wifi"
            down = { delay_ms = 1 }
            up = { delay_ms = 1 }
            "#,
        );
        let server_sock = UdpSocket::bind((LOOPBACK, 0)).await.unwrap();
        let server = server_sock.local_addr().unwrap();
        let relay = start(&s, server, LOOPBACK, None, 1).await.unwrap();
        let front = relay.paths()[0].listen;
        let client = UdpSocket::bind((LOOPBACK, 0)).await.unwrap();
        let stranger = UdpSocket::bind((LOOPBACK, 0)).await.unwrap();
        let mut buf = [0u8; 2048];
        client.send_to(b"client", front).await.unwrap();
        let (n, relay_back) = server_sock.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"client");
        // The stranger sends every 10 ms, as the attack did; the client keeps talking.
        for _ in 0..20 {
            stranger.send_to(b"x", front).await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        client.send_to(b"again", front).await.unwrap();
        // Only the client's datagrams reach the server.
        let (n, _) = tokio::time::timeout(Duration::from_secs(2), server_sock.recv_from(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&buf[..n], b"again", "a stranger's datagram reached the server");
        // The server's reply goes to the client, not to the stranger.
        server_sock.send_to(b"reply", relay_back).await.unwrap();
        let (n, _) = tokio::time::timeout(Duration::from_secs(2), client.recv_from(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&buf[..n], b"reply");
        let to_stranger =
            tokio::time::timeout(Duration::from_millis(200), stranger.recv_from(&mut buf)).await;
        assert!(to_stranger.is_err(), "the stranger received the stream");
        // A datagram to the back socket from anyone but the server is dropped too.
        stranger.send_to(b"y", relay_back).await.unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        let stats = relay.stats();
        assert_eq!(stats.foreign_dropped, vec![21], "{stats:?}");
        assert_eq!(stats.forwarded[0], (2, 1), "{stats:?}");
        relay.stop().await;
    }
}
