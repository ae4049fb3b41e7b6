//! The shared harness: test strategies and a client/server [`Pair`] over simulated links.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cc::{Controller, ControllerFactory, RttSample};
use crate::path::{PathId, PathRole, PathStatus};
use crate::proto::frame::Frame;
use crate::proto::{
    AckPathPolicy, Config, Connection, Delivery, Event, FecConfig, Reliability, ServerCrypto,
    Transmit, crypto,
};
use crate::sched::{PathView, Scheduler, SchedulerFactory};
use crate::time::Instant;

// ---------- small private strategies ----------

/// Per-path AIMD: slow start, halve on loss, collapse to 2 MSS on RTO.
#[derive(Debug, Clone, Copy)]
pub(super) struct TestReno;

struct TestRenoCc {
    mss: u64,
    paths: BTreeMap<PathId, (u64, u64)>, // (cwnd, ssthresh)
}

impl ControllerFactory for TestReno {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(TestRenoCc { mss: 1200, paths: BTreeMap::new() })
    }
}

impl Controller for TestRenoCc {
    fn on_path_added(&mut self, _now: Instant, path: PathId, mss: usize) {
        self.mss = mss as u64;
        self.paths.insert(path, (10 * self.mss, u64::MAX));
    }
    fn on_path_removed(&mut self, path: PathId) {
        self.paths.remove(&path);
    }
    fn on_sent(&mut self, _: Instant, _: PathId, _: usize, _: u64) {}
    fn on_ack(&mut self, _: Instant, path: PathId, _: Instant, bytes: usize, _: &RttSample) {
        let mss = self.mss;
        if let Some((cwnd, ss)) = self.paths.get_mut(&path) {
            if *cwnd < *ss {
                *cwnd += bytes as u64;
            } else {
                *cwnd += (mss * bytes as u64 / *cwnd).max(1);
            }
        }
    }
    fn on_congestion_event(&mut self, _: Instant, path: PathId, _: Instant, persistent: bool) {
        let mss = self.mss;
        if let Some((cwnd, ss)) = self.paths.get_mut(&path) {
            *ss = (*cwnd / 2).max(2 * mss);
            *cwnd = if persistent { 2 * mss } else { *ss };
        }
    }
    fn window(&self, path: PathId) -> u64 {
        self.paths.get(&path).map_or(0, |p| p.0)
    }
    fn name(&self) -> &'static str {
        "test-reno"
    }
}

/// The same fixed window on every path; losses are ignored.
#[derive(Debug, Clone, Copy)]
pub(super) struct FixedWindow(pub(super) u64);

impl ControllerFactory for FixedWindow {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(*self)
    }
}

impl Controller for FixedWindow {
    fn on_path_added(&mut self, _: Instant, _: PathId, _: usize) {}
    fn on_path_removed(&mut self, _: PathId) {}
    fn on_sent(&mut self, _: Instant, _: PathId, _: usize, _: u64) {}
    fn on_ack(&mut self, _: Instant, _: PathId, _: Instant, _: usize, _: &RttSample) {}
    fn on_congestion_event(&mut self, _: Instant, _: PathId, _: Instant, _: bool) {}
    fn window(&self, _: PathId) -> u64 {
        self.0
    }
    fn name(&self) -> &'static str {
        "fixed"
    }
}

/// A fixed window with a pacing rate of 125 000 B/s.
#[derive(Debug, Clone, Copy)]
pub(super) struct Paced;

impl ControllerFactory for Paced {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(PacedCc)
    }
}

struct PacedCc;

impl Controller for PacedCc {
    fn on_path_added(&mut self, _: Instant, _: PathId, _: usize) {}
    fn on_path_removed(&mut self, _: PathId) {}
    fn on_sent(&mut self, _: Instant, _: PathId, _: usize, _: u64) {}
    fn on_ack(&mut self, _: Instant, _: PathId, _: Instant, _: usize, _: &RttSample) {}
    fn on_congestion_event(&mut self, _: Instant, _: PathId, _: Instant, _: bool) {}
    fn window(&self, _: PathId) -> u64 {
        1_000_000
    }
    fn pacing_rate(&self, _: PathId) -> Option<u64> {
        Some(125_000)
    }
    fn name(&self) -> &'static str {
        "paced"
    }
}

/// Lowest SRTT among usable paths with room; active before backup; ties by id.
#[derive(Debug, Clone, Copy)]
pub(super) struct LowestRtt;

impl SchedulerFactory for LowestRtt {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(LowestRtt)
    }
}

impl Scheduler for LowestRtt {
    fn select(&mut self, _now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        let any_active = paths.iter().any(|p| p.usable && p.status == PathStatus::Active);
        let pick = paths
            .iter()
            .filter(|p| p.usable && p.has_room(bytes))
            .filter(|p| !any_active || p.status == PathStatus::Active)
            .min_by_key(|p| (p.srtt, p.id));
        out.extend(pick.map(|p| p.id));
    }
    fn name(&self) -> &'static str {
        "lowest-rtt"
    }
}

/// Every usable path, the ones with room first.
#[derive(Debug, Clone, Copy)]
pub(super) struct AllPaths;

impl SchedulerFactory for AllPaths {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(AllPaths)
    }
}

impl Scheduler for AllPaths {
    fn select(&mut self, _now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        // Copies on every usable path as soon as one has room (stresses the copy queue).
        if paths.iter().any(|p| p.usable && p.has_room(bytes)) {
            let mut ids: Vec<&PathView> = paths.iter().filter(|p| p.usable).collect();
            ids.sort_by_key(|p| !p.has_room(bytes));
            out.extend(ids.iter().map(|p| p.id));
        }
    }
    fn name(&self) -> &'static str {
        "all"
    }
}

/// Every ACK on path 0 (the shape of an energy-aware "cheapest path" policy).
#[derive(Debug, Clone, Copy)]
pub(super) struct AcksOnPathZero;

impl AckPathPolicy for AcksOnPathZero {
    fn ack_path(&self, _received_on: PathId, paths: &[PathView]) -> Option<PathId> {
        paths.iter().find(|p| p.id == PathId(0) && p.usable).map(|p| p.id)
    }
}

pub(super) fn config() -> Config {
    Config::new(Arc::new(TestReno), Arc::new(LowestRtt))
}

// ---------- the pair ----------

#[derive(Debug, Clone)]
pub(super) struct Link {
    pub(super) delay: Duration,
    pub(super) loss: f64,
    pub(super) up: bool,
    rate_bps: u64,
    /// Per direction (0: client → server, 1: server → client), when the link is free.
    busy: [Instant; 2],
    /// Droptail: a datagram that would wait longer than this is dropped.
    pub(super) max_queue: Duration,
    /// Datagrams larger than this are dropped (a path MTU; none: any size passes).
    pub(super) mtu: Option<usize>,
}

impl Link {
    pub(super) fn new(delay_ms: u64, rate_mbps: u64, loss: f64) -> Link {
        Link {
            delay: Duration::from_millis(delay_ms),
            loss,
            up: true,
            rate_bps: rate_mbps * 1_000_000,
            busy: [Instant::ZERO; 2],
            max_queue: Duration::from_millis(100),
            mtu: None,
        }
    }
}

pub(super) fn client_addr(link: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, link, 2)), 5000)
}

pub(super) fn server_addr(link: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, link, 1)), 4433)
}

pub(super) struct InFlight {
    pub(super) to_server: bool,
    local: SocketAddr,
    remote: SocketAddr,
    pub(super) data: Vec<u8>,
}

/// A client and, once its first datagram arrives, a server over simulated links (latency,
/// rate, seeded loss, up/down), stepped to the next event in virtual time (quinn's `Pair`).
pub(super) struct Pair {
    pub(super) now: Instant,
    server_config: Arc<Config>,
    pub(super) client: Connection,
    pub(super) server: Option<Connection>,
    pub(super) server_crypto: ServerCrypto,
    pub(super) links: Vec<Link>,
    pub(super) queue: BTreeMap<(Instant, u64), InFlight>,
    pub(super) seq: u64,
    rng: ChaCha8Rng,
    pub(super) client_events: Vec<Event>,
    pub(super) server_events: Vec<Event>,
    /// Every datagram sent, for determinism checks (time, direction, bytes).
    pub(super) trace: Vec<(Instant, bool, Vec<u8>)>,
    /// The path each datagram of `trace` was sent on (the header does not say).
    pub(super) trace_paths: Vec<PathId>,
    pub(super) keep_trace: bool,
    /// How late the pair's "driver" wakes for a timer (a real timer's granularity; 0: at
    /// the deadline, as the simulator does).
    pub(super) timer_late: Duration,
    /// NAT mappings on the client's side, (inside, outside): the server sees the client's
    /// `inside` address as `outside`, and a datagram to `inside` itself (an old mapping)
    /// is dropped.
    pub(super) nat: Vec<(SocketAddr, SocketAddr)>,
    /// The largest datagram each side may send (client, server): its base size, or the
    /// ceiling of its path MTU discovery.
    max_datagram: [usize; 2],
}

/// The largest datagram a side with `c` may send.
fn max_datagram(c: &Config) -> usize {
    c.mtu_discovery_max.unwrap_or(0).max(c.max_datagram_size)
}

impl Pair {
    pub(super) fn new(
        client_config: Config,
        server_config: Config,
        links: Vec<Link>,
        seed: u64,
    ) -> Pair {
        let now = Instant::ZERO;
        let max_datagram = [max_datagram(&client_config), max_datagram(&server_config)];
        let (client_crypto, server_crypto) = crypto::deterministic::pair(seed);
        let client = Connection::connect(
            Arc::new(client_config),
            &client_crypto,
            now,
            seed,
            client_addr(0),
            server_addr(0),
            PathRole::Wifi,
        )
        .expect("a valid TLS configuration");
        Pair {
            now,
            server_config: Arc::new(server_config),
            server_crypto,
            client,
            server: None,
            links,
            queue: BTreeMap::new(),
            seq: 0,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5eed),
            client_events: Vec::new(),
            server_events: Vec::new(),
            trace: Vec::new(),
            trace_paths: Vec::new(),
            max_datagram,
            keep_trace: false,
            timer_late: Duration::ZERO,
            nat: Vec::new(),
        }
    }

    pub(super) fn default_pair(links: Vec<Link>) -> Pair {
        Pair::new(config(), config(), links, 1)
    }

    pub(super) fn server(&mut self) -> &mut Connection {
        self.server.as_mut().expect("server accepted")
    }

    fn enqueue(&mut self, to_server: bool, mut t: Transmit, data: &[u8]) {
        for &(inside, outside) in &self.nat {
            if to_server && t.local == inside {
                t.local = outside;
            } else if !to_server && t.remote == inside {
                return; // the NAT forgot this mapping
            } else if !to_server && t.remote == outside {
                t.remote = inside;
            }
        }
        let link_idx = match t.remote.ip() {
            IpAddr::V4(v4) => usize::from(v4.octets()[2]),
            IpAddr::V6(_) => 0,
        };
        if self.keep_trace {
            self.trace.push((self.now, to_server, data.to_vec()));
            self.trace_paths.push(t.path);
        }
        let Some(link) = self.links.get_mut(link_idx) else {
            return;
        };
        let lost = !link.up
            || link.mtu.is_some_and(|m| data.len() > m)
            || (link.loss > 0.0 && self.rng.random_bool(link.loss));
        let dir = usize::from(!to_server);
        let start = link.busy[dir].max(self.now);
        if start - self.now > link.max_queue {
            return; // droptail
        }
        let ser = Duration::from_nanos(data.len() as u64 * 8 * 1_000_000_000 / link.rate_bps);
        link.busy[dir] = start + ser;
        if lost {
            return;
        }
        let at = start + ser + link.delay;
        self.seq += 1;
        self.queue.insert(
            (at, self.seq),
            InFlight { to_server, local: t.remote, remote: t.local, data: data.to_vec() },
        );
    }

    pub(super) fn flush(&mut self) {
        let mut buf = Vec::new();
        while let Some(t) = self.client.poll_transmit(self.now, &mut buf) {
            assert!(t.len <= self.max_datagram[0] && t.len == buf.len());
            let data = buf.clone();
            self.enqueue(true, t, &data);
        }
        if let Some(s) = self.server.as_mut() {
            let mut out = Vec::new();
            while let Some(t) = s.poll_transmit(self.now, &mut buf) {
                assert!(t.len <= self.max_datagram[1] && t.len == buf.len());
                out.push((t, buf.clone()));
            }
            for (t, d) in out {
                self.enqueue(false, t, &d);
            }
        }
        while let Some(e) = self.client.poll_event() {
            self.client_events.push(e);
        }
        if let Some(s) = self.server.as_mut() {
            while let Some(e) = s.poll_event() {
                self.server_events.push(e);
            }
        }
    }

    /// Sends what is pending, then advances to the next event (never beyond `limit`) and
    /// processes it. Returns false when nothing will ever happen again.
    pub(super) fn step_until(&mut self, limit: Instant) -> bool {
        self.flush();
        let mut next = self.queue.keys().next().map(|k| k.0);
        for t in [self.client.poll_timeout(), self.server.as_ref().and_then(|s| s.poll_timeout())]
            .into_iter()
            .flatten()
        {
            let t = t + self.timer_late;
            next = Some(next.map_or(t, |n: Instant| n.min(t)));
        }
        let Some(next) = next else { return false };
        self.now = self.now.max(next.min(limit));
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let d = entry.remove();
            if d.to_server {
                match self.server.as_mut() {
                    Some(s) => s.handle_datagram(self.now, d.local, d.remote, &d.data),
                    None => {
                        let c = Connection::accept(
                            self.server_config.clone(),
                            &self.server_crypto,
                            self.now,
                            99,
                            d.local,
                            d.remote,
                            &d.data,
                        );
                        self.server = c.ok();
                    }
                }
            } else {
                self.client.handle_datagram(self.now, d.local, d.remote, &d.data);
            }
        }
        let late = self.timer_late;
        if self.client.poll_timeout().is_some_and(|t| t + late <= self.now) {
            self.client.handle_timeout(self.now);
        }
        if let Some(s) = self.server.as_mut()
            && s.poll_timeout().is_some_and(|t| t + late <= self.now)
        {
            s.handle_timeout(self.now);
        }
        self.flush();
        true
    }

    /// Steps until `done` or `limit` of virtual time passed. Returns whether `done` held.
    pub(super) fn run_until(
        &mut self,
        limit: Duration,
        mut done: impl FnMut(&mut Pair) -> bool,
    ) -> bool {
        let end = self.now + limit;
        let mut last = (self.now, 0u32);
        for _ in 0..10_000_000 {
            if done(self) {
                return true;
            }
            if last.0 == self.now {
                last.1 += 1;
                if last.1 > 10_000 {
                    panic!(
                        "stuck at {:?}\nclient {}\nserver {}",
                        self.now,
                        self.client.debug_timers(),
                        self.server.as_ref().map(|s| s.debug_timers()).unwrap_or_default()
                    );
                }
            } else {
                last = (self.now, 0);
            }
            if self.now >= end || !self.step_until(end) {
                return done(self);
            }
        }
        panic!("no progress");
    }

    /// Completes the handshake. Up to 30 s: on a lossy link lost handshake packets wait
    /// for backed-off probe timeouts (1 s, 2 s, 4 s …; RFC 9002 §6.2), and three in a row
    /// already take 7 s.
    pub(super) fn connect(&mut self) {
        assert!(self.run_until(Duration::from_secs(30), |p| p.client.is_established()
            && p.server.as_ref().is_some_and(Connection::is_established)));
    }

    pub(super) fn add_path(&mut self, link: u8, role: PathRole) -> PathId {
        let now = self.now;
        let id =
            self.client.add_path(now, client_addr(link), server_addr(link), role).expect("path");
        // As long as `connect` allows, for the same reason.
        assert!(
            self.run_until(Duration::from_secs(30), |p| {
                p.client_events.contains(&Event::PathValidated(id))
                    && p.server_events.contains(&Event::PathValidated(id))
            }),
            "path {id} did not validate\nclient {}\nserver {}",
            self.client.debug_timers(),
            self.server.as_ref().map(|s| s.debug_timers()).unwrap_or_default()
        );
        id
    }
}

/// `c` with an idle timeout of a minute. In the property tests nothing flows while the
/// second path validates; at 8–10 % loss its joins and challenges can be lost several times
/// in a row, and with the backed-off retransmissions (1, 2, 4 s …) the client hears nothing
/// for longer than the default 10 s and closes for idleness (RFC 9000 §10.1: sending
/// alone does not restart the idle timer). The properties are about delivery.
pub(super) fn patient(mut c: Config) -> Config {
    c.idle_timeout = Duration::from_secs(60);
    c
}

/// Message `id` of a bulk transfer: its length and a recognisable pattern.
pub(super) fn message(id: u64, len: usize) -> Bytes {
    Bytes::from((0..len).map(|i| (id as usize * 31 + i) as u8).collect::<Vec<u8>>())
}

/// Server → client bulk transfer of `total` bytes in `msg`-byte messages; returns the
/// client's deliveries after checking every byte arrived once, in order.
/// A 1-MB transfer over two paths (20 ms, 10 Mbit/s each) during which the client closes
/// path 1 300 ms in; `setup` runs on the pair first (a test installs a trace sink with it).
pub(super) fn transfer_closing_path_one(setup: impl FnOnce(&mut Pair)) -> Pair {
    let mut p = Pair::default_pair(vec![Link::new(20, 10, 0.0), Link::new(20, 10, 0.0)]);
    setup(&mut p);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let start = p.now;
    let mut removed = false;
    bulk(&mut p, 1_000_000, 10_000, Duration::from_secs(60), |p| {
        if !removed && p.now >= start + Duration::from_millis(300) {
            let now = p.now;
            p.client.remove_path(now, PathId(1));
            removed = true;
        }
    });
    assert!(removed, "the transfer ended before the path was closed");
    p
}

pub(super) fn bulk(
    p: &mut Pair,
    total: usize,
    msg: usize,
    limit: Duration,
    mut hook: impl FnMut(&mut Pair),
) -> Vec<Delivery> {
    let count = total.div_ceil(msg) as u64;
    let mut next = 0u64;
    let mut got = Vec::new();
    let done = p.run_until(limit, |p| {
        hook(p);
        let now = p.now;
        while next < count && p.server().send_capacity() >= msg as u64 {
            let id = p
                .server()
                .send_message(now, message(next, msg), Reliability::Reliable)
                .expect("send");
            assert_eq!(id, next);
            next += 1;
        }
        while let Some(d) = p.client.read_message(now) {
            got.push(d);
        }
        got.len() as u64 == count
    });
    assert!(done, "transfer incomplete: {} of {} messages by {:?}", got.len(), count, p.now);
    for (i, d) in got.iter().enumerate() {
        assert_eq!(
            d,
            &Delivery::Message { id: i as u64, data: message(i as u64, msg) },
            "message {i}"
        );
    }
    assert_eq!(p.client.stats().bytes_delivered, (count as usize * msg) as u64);
    got
}

// ---------- shared by several subjects ----------

/// Keeps the server's send buffer topped up with 1 000-byte reliable messages (at most
/// 50 000 in all, counted in `sent`) and the client reading, so every path has data.
pub(super) fn keep_busy(p: &mut Pair, sent: &mut u64) {
    let now = p.now;
    while p.server().send_capacity() > 100_000 && *sent < 50_000 {
        p.server().send_message(now, message(*sent, 1000), Reliability::Reliable).unwrap();
        *sent += 1;
    }
    while p.client.read_message(now).is_some() {}
}

/// Usable paths with room in turn (both paths carry data, so each sees the other live).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Alternate {
    last: Option<PathId>,
}

impl SchedulerFactory for Alternate {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(Alternate::default())
    }
}

impl Scheduler for Alternate {
    fn select(&mut self, _now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        let ready: Vec<PathId> =
            paths.iter().filter(|p| p.usable && p.has_room(bytes)).map(|p| p.id).collect();
        let pick = ready.iter().find(|&&id| Some(id) > self.last).or(ready.first()).copied();
        self.last = pick.or(self.last);
        out.extend(pick);
    }
    fn name(&self) -> &'static str {
        "alternate"
    }
}

pub(super) fn established_pair() -> Pair {
    let mut p = Pair::default_pair(vec![Link::new(10, 10, 0.0)]);
    p.connect();
    p
}

/// A packet sealed by `from` (so its peer authenticates it).
pub(super) fn raw_packet(
    from: &Connection,
    cid: u64,
    path: u32,
    pn: u64,
    frames: Vec<Frame>,
) -> Vec<u8> {
    from.seal_frames(cid, PathId(path), pn, &frames)
}

impl Pair {
    /// Hands the server a packet sealed in the client's name on path (and link) `path`,
    /// with `cid` and the client's next packet number on that path, which the client then
    /// never uses itself: nothing looks spoofed, and the server's ACK of it acknowledges a
    /// packet the client "sent".
    pub(super) fn inject_to_server(&mut self, cid: u64, path: u32, frames: Vec<Frame>) {
        let pn = self.client.take_packet_number(PathId(path));
        let pkt = raw_packet(&self.client, cid, path, pn, frames);
        let now = self.now;
        let unknown = self.server().stats().dropped.unknown_connection;
        self.server().handle_datagram(now, server_addr(path as u8), client_addr(path as u8), &pkt);
        let after = self.server().stats().dropped.unknown_connection;
        assert_eq!(after, unknown, "injected to {cid:#x}, an id the server does not answer to");
    }

    /// [`Pair::inject_to_server`] the other way: in the server's name, to the client.
    pub(super) fn inject_to_client(&mut self, cid: u64, path: u32, frames: Vec<Frame>) {
        let pn = self.server().take_packet_number(PathId(path));
        let pkt = raw_packet(self.server(), cid, path, pn, frames);
        let now = self.now;
        let unknown = self.client.stats().dropped.unknown_connection;
        self.client.handle_datagram(now, client_addr(path as u8), server_addr(path as u8), &pkt);
        let after = self.client.stats().dropped.unknown_connection;
        assert_eq!(after, unknown, "injected to {cid:#x}, an id the client does not answer to");
    }
}

pub(super) fn fec_config(tau: u32) -> Config {
    let mut c = config();
    c.fec = Some(FecConfig::new(tau));
    c
}

/// Sends one message per entry of `kinds` from the server (message `i` is
/// `message(i, 500 + i·7919 mod 15 000)`; kind 0: a 60-ms deadline with one retransmission,
/// 1: a 5-s deadline with none, else reliable) while the client reads, for at most 120 s
/// of simulated time; then checks the delivery contract: every id once, in order, reliable
/// messages intact, only deadline ones as gaps.
pub(super) fn random_transfer(
    p: &mut Pair,
    kinds: &[u8],
) -> Result<(), proptest::test_runner::TestCaseError> {
    use crate::proto::{Delivery, Reliability};
    let len = |i: usize| 500 + (i * 7919) % 15_000;
    let (mut next, mut got, n) = (0usize, Vec::new(), kinds.len());
    let done = p.run_until(Duration::from_secs(120), |p| {
        let now = p.now;
        while next < n && p.server().send_capacity() >= 20_000 {
            let rel = match kinds[next] {
                0 => Reliability::Deadline {
                    at: now + Duration::from_millis(60),
                    max_retransmissions: 1,
                },
                1 => Reliability::Deadline {
                    at: now + Duration::from_secs(5),
                    max_retransmissions: 0,
                },
                _ => Reliability::Reliable,
            };
            p.server().send_message(now, message(next as u64, len(next)), rel).expect("queued");
            next += 1;
        }
        got.extend(std::iter::from_fn(|| p.client.read_message(now)));
        got.len() == n
    });
    proptest::prop_assert!(done, "{} of {}", got.len(), n);
    for (i, d) in got.iter().enumerate() {
        match d {
            Delivery::Message { id, data } => {
                proptest::prop_assert_eq!(*id, i as u64);
                proptest::prop_assert!(data == &message(i as u64, len(i)));
            }
            Delivery::Gap { id } => {
                proptest::prop_assert_eq!(*id, i as u64);
                proptest::prop_assert!(kinds[i] < 2, "reliable message {} became a gap", i);
            }
        }
    }
    Ok(())
}
