//! `[[node]]` in the simulator: a split proxy on the main flow's path (the proxy paper's
//! scenario B).
//!
//! The node terminates the connection that comes from the server and re-originates one
//! toward the client, as `braid proxy` does in real time:
//! - **upstream leg**, server → node: the profile under test (`--profile`), over the
//!   path's down links up to and including the node's `after` link;
//! - **downstream leg**, node → client: the node's `downstream_profile` (default: the same
//!   profile), over the links after the node;
//! - **return paths**: each leg returns over a private copy of the path's up chain whose
//!   delays are split in proportion to the down chain's delay before and after the node
//!   (the up chain models the whole client → server return; proxy-wireless-proxy.toml's
//!   277 ms become 77 ms for the upstream leg and 200 ms for the downstream one).
//!
//! The relay ([`Relay`]) reads what the upstream leg delivers in order while it holds less
//! than its buffer (`buffer_bytes`, default [`NodeDef::DEFAULT_BUFFER_BYTES`]), and queues
//! it on the downstream connection as that connection's flow control allows; the client's
//! messages (playout reports) go the other way. Message ids survive the relay: a gap the
//! upstream sender left (a deadline message it abandoned) is re-sent downstream as an
//! already-expired message, so the client sees a gap with the same id. The node holds the
//! relay queue plus what its downstream connection has not released (queued, in flight or
//! awaiting retransmission); the peak of that is the report's `proxy_buffer_bytes`.
//!
//! The node forwards whole messages, so while the upstream leg completes none (a 16-KiB
//! bulk message from a slow TFRC leg) the downstream leg is silent. The client and the
//! node's upstream side therefore send keep-alive PINGs every 2.5 s, as real-time
//! endpoints do; without them the client's idle timeout (5 s then, 30 s now) ended such
//! runs.
//!
//! The engine's hook is small: it builds the two legs from a [`NodePlan`], the downstream
//! leg being the main flow (its client is the player, whose radios and reports the session
//! report shows), and after each call into a relay half it gives the node's endpoint on the
//! other leg a turn when the half asks ([`super::Workload::take_linked_wake`]).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use super::SimError;
use super::report::StreamReport;
use super::workload::{Workload, WorkloadStats};
use braid_netem::LinkConfig;
use braid_netem::scenario::{NodeDef, Scenario};
use braid_transport::profile::{self, MediaReliability, PathUse, Profile};
use braid_transport::proto::{Connection, Delivery, Reliability, SendError};
use braid_transport::time::Instant;

/// Where the main flow crosses a node, and how its two legs run.
#[derive(Clone)]
pub(crate) struct NodePlan {
    /// The node's name.
    pub name: String,
    /// The scenario path the node sits on.
    pub path: usize,
    /// Links server → node (the path's down chain up to the node).
    pub upstream_down: Vec<usize>,
    /// Links node → client.
    pub downstream_down: Vec<usize>,
    /// The upstream leg's return links (node → server).
    pub upstream_return: Vec<LinkConfig>,
    /// The downstream leg's return links (client → node).
    pub downstream_return: Vec<LinkConfig>,
    /// The downstream leg's profile.
    pub downstream: Profile,
    /// The node's buffer, bytes.
    pub buffer_bytes: u64,
}

/// The node the main flow crosses on `chosen` paths, if any.
///
/// Refused (clearly, never ignored): a node in an up chain of a used path, more than one
/// node on the route, a node with a multipath profile, and a node whose `upstream_profile`
/// names another profile than the one under test (`--profile` runs the upstream leg;
/// `upstream_profile` only pins it).
pub(crate) fn plan(
    scenario: &Scenario,
    chosen: &[usize],
    profile: &Profile,
) -> Result<Option<NodePlan>, SimError> {
    let mut found: Vec<(&NodeDef, usize, usize)> = Vec::new();
    for node in &scenario.nodes {
        for &p in chosen {
            let Some(path) = scenario.paths.get(p) else { continue };
            if let Some(pos) = path.down.iter().position(|&l| l == node.after)
                && pos + 1 < path.down.len()
            {
                found.push((node, p, pos));
            } else if path.up.contains(&node.after) {
                return Err(SimError::Unsupported(format!(
                    "node \"{}\" sits in path \"{}\"'s up chain: the simulator runs nodes on \
                     down chains only",
                    node.name, path.name
                )));
            }
        }
    }
    let Some(&(node, p, pos)) = found.first() else { return Ok(None) };
    if found.len() > 1 {
        return Err(SimError::Unsupported(
            "more than one [[node]] on the main flow's route: the simulator splits the \
             connection once"
                .into(),
        ));
    }
    if profile.paths == PathUse::All && chosen.len() > 1 {
        return Err(SimError::Unsupported(format!(
            "node \"{}\" with the multipath profile {}: the simulator splits a one-path \
             connection (use a one-path profile or a one-path scenario)",
            node.name, profile.name
        )));
    }
    if let Some(up) = &node.upstream_profile
        && *up != profile.name
    {
        return Err(SimError::Unsupported(format!(
            "node \"{}\" pins its upstream leg to profile {up}, and the run's profile is {} \
             (--profile runs the upstream leg)",
            node.name, profile.name
        )));
    }
    let downstream = match &node.downstream_profile {
        Some(name) => profile::resolve(name, None)
            .map_err(|e| SimError::Profile(name.clone(), e.to_string()))?,
        None => profile.clone(),
    };
    if downstream.paths == PathUse::All && scenario.paths.len() > 1 {
        return Err(SimError::Unsupported(format!(
            "node \"{}\": downstream profile {} is multipath; the node re-sends on its own path",
            node.name, downstream.name
        )));
    }
    let path = &scenario.paths[p];
    let delay = |links: &[usize]| -> Duration {
        links.iter().filter_map(|&l| scenario.links.get(l)).map(|l| l.config.delay).sum()
    };
    let (before, after) = path.down.split_at(pos + 1);
    let total = delay(&path.down).as_secs_f64();
    let share = if total > 0.0 { delay(before).as_secs_f64() / total } else { 0.5 };
    let scaled = |f: f64| -> Vec<LinkConfig> {
        path.up
            .iter()
            .filter_map(|&l| scenario.links.get(l))
            .map(|l| LinkConfig { delay: l.config.delay.mul_f64(f), ..l.config.clone() })
            .collect()
    };
    Ok(Some(NodePlan {
        name: node.name.clone(),
        path: p,
        upstream_down: before.to_vec(),
        downstream_down: after.to_vec(),
        upstream_return: scaled(share),
        downstream_return: scaled(1.0 - share),
        downstream,
        buffer_bytes: node.buffer_bytes.unwrap_or(NodeDef::DEFAULT_BUFFER_BYTES),
    }))
}

/// How the node re-sends on a connection of profile `p` (as `braid proxy` does): a
/// deadline profile keeps its retransmission budget; the node has no playout clock.
fn reliability(p: &Profile) -> Reliability {
    match p.media {
        MediaReliability::Reliable => Reliability::Reliable,
        MediaReliability::Deadline { max_retransmissions } => Reliability::Deadline {
            at: Instant::from_micros(1 << 60),
            max_retransmissions: max_retransmissions.unwrap_or(u32::MAX),
        },
    }
}

enum Item {
    Message(Bytes),
    /// The upstream sender abandoned this message.
    Gap,
}

/// The node's relay, shared by its two halves.
pub(crate) struct Relay {
    /// The session's own workload: its server side runs at the server, its client side at
    /// the client.
    main: Box<dyn Workload>,
    /// Toward the client: read from the upstream leg, not yet queued downstream.
    down: VecDeque<Item>,
    down_bytes: u64,
    /// Toward the server: the client's messages.
    up: VecDeque<Bytes>,
    capacity: u64,
    down_reliability: Reliability,
    up_reliability: Reliability,
    /// The downstream connection's unreleased bytes, as of its last turn.
    in_downstream: u64,
    /// Message bytes read from the upstream leg so far.
    arrived: u64,
    peak: u64,
    /// The relay stopped reading upstream because it was full.
    blocked: bool,
    wake_downstream: bool,
    wake_upstream: bool,
}

impl Relay {
    fn occupancy(&self) -> u64 {
        self.down_bytes + self.in_downstream
    }

    fn note_peak(&mut self) {
        self.peak = self.peak.max(self.occupancy());
    }
}

/// The relay's state seen from the engine (for the report).
#[derive(Clone)]
pub(crate) struct RelayHandle(Rc<RefCell<Relay>>);

impl RelayHandle {
    /// The most the node held at once, bytes.
    pub fn peak_bytes(&self) -> u64 {
        self.0.borrow().peak
    }

    /// Message bytes the node has read from the upstream leg so far.
    pub fn arrived_bytes(&self) -> u64 {
        self.0.borrow().arrived
    }
}

/// The relay for `plan` around the session's workload: (upstream half, downstream half,
/// handle). The upstream half is the upstream leg's workload (server: the session's
/// sender; client: the node reading), the downstream half the downstream leg's (server: the
/// node sending; client: the session's player).
pub(crate) fn relay(
    main: Box<dyn Workload>,
    plan: &NodePlan,
    upstream: &Profile,
) -> (UpstreamHalf, DownstreamHalf, RelayHandle) {
    let r = Rc::new(RefCell::new(Relay {
        main,
        down: VecDeque::new(),
        down_bytes: 0,
        up: VecDeque::new(),
        capacity: plan.buffer_bytes,
        down_reliability: reliability(&plan.downstream),
        up_reliability: reliability(upstream),
        in_downstream: 0,
        arrived: 0,
        peak: 0,
        blocked: false,
        wake_downstream: false,
        wake_upstream: false,
    }));
    (UpstreamHalf(Rc::clone(&r)), DownstreamHalf(Rc::clone(&r)), RelayHandle(r))
}

/// The upstream leg's workload.
pub(crate) struct UpstreamHalf(Rc<RefCell<Relay>>);

impl Workload for UpstreamHalf {
    fn on_server(&mut self, now: Instant, conn: &mut Connection) {
        self.0.borrow_mut().main.on_server(now, conn);
    }

    fn on_client(&mut self, now: Instant, conn: &mut Connection) {
        let mut r = self.0.borrow_mut();
        let mut moved = false;
        while r.occupancy() < r.capacity {
            match conn.read_message(now) {
                Some(Delivery::Message { data, .. }) => {
                    r.down_bytes += data.len() as u64;
                    r.arrived += data.len() as u64;
                    r.down.push_back(Item::Message(data));
                }
                Some(Delivery::Gap { .. }) => r.down.push_back(Item::Gap),
                None => break,
            }
            moved = true;
        }
        r.blocked = r.occupancy() >= r.capacity;
        r.note_peak();
        let rel = r.up_reliability;
        while let Some(m) = r.up.front().cloned() {
            match conn.send_message(now, m, rel) {
                Ok(_) => {
                    r.up.pop_front();
                }
                Err(SendError::Blocked) => break,
                Err(SendError::Closed) => {
                    r.up.clear();
                    break;
                }
            }
        }
        r.wake_downstream |= moved;
    }

    fn stats(&self) -> WorkloadStats {
        WorkloadStats::default()
    }

    fn take_linked_wake(&mut self) -> bool {
        std::mem::take(&mut self.0.borrow_mut().wake_downstream)
    }
}

/// The downstream leg's workload.
pub(crate) struct DownstreamHalf(Rc<RefCell<Relay>>);

impl Workload for DownstreamHalf {
    fn on_server(&mut self, now: Instant, conn: &mut Connection) {
        let mut r = self.0.borrow_mut();
        while let Some(d) = conn.read_message(now) {
            if let Delivery::Message { data, .. } = d {
                r.up.push_back(data);
                r.wake_upstream = true;
            }
        }
        let mut gaps = false;
        loop {
            let len = match r.down.front() {
                Some(Item::Message(data)) => data.len() as u64,
                Some(Item::Gap) => 1,
                None => break,
            };
            if conn.send_capacity() < len {
                break;
            }
            let (data, rel) = match r.down.pop_front() {
                Some(Item::Message(data)) => {
                    r.down_bytes -= len;
                    (data, r.down_reliability)
                }
                // Abandoned upstream: queued already expired, so the downstream sender
                // abandons it before sending and the client sees a gap with this id.
                Some(Item::Gap) => {
                    gaps = true;
                    (
                        Bytes::from_static(&[0]),
                        Reliability::Deadline { at: now, max_retransmissions: 0 },
                    )
                }
                None => break,
            };
            if conn.send_message(now, data, rel).is_err() {
                r.down.clear();
                r.down_bytes = 0;
                break;
            }
        }
        if gaps {
            conn.handle_timeout(now);
        }
        r.in_downstream = conn.send_buffered();
        r.note_peak();
        if r.blocked && r.occupancy() < r.capacity {
            r.blocked = false;
            r.wake_upstream = true;
        }
    }

    fn on_client(&mut self, now: Instant, conn: &mut Connection) {
        self.0.borrow_mut().main.on_client(now, conn);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.0.borrow().main.poll_timeout()
    }

    fn is_done(&self) -> bool {
        self.0.borrow().main.is_done()
    }

    fn stats(&self) -> WorkloadStats {
        self.0.borrow().main.stats()
    }

    fn stream_report(&self) -> Option<StreamReport> {
        self.0.borrow().main.stream_report()
    }

    fn on_stopped(&mut self, now: Instant) -> bool {
        self.0.borrow_mut().main.on_stopped(now)
    }

    fn take_linked_wake(&mut self) -> bool {
        std::mem::take(&mut self.0.borrow_mut().wake_upstream)
    }
}
