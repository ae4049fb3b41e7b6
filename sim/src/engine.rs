//! The event loop. See the module docs of [`super`].

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::node::{self, NodePlan, RelayHandle};
use super::report::{
    DelayPercentiles, EnergyReport, PathReport, SeriesRow, SessionReport, TimeSeries, finite,
};
use super::workload::{Bulk, Workload};
use super::{CrossResult, LinkResult, RunOptions, SimError, SimResult, StreamStop};
use braid_netem::scenario::{CrossKind, CrossTarget, Scenario};
use braid_netem::{DropReason, Link, LinkConfig, dist};
use braid_transport::energy::Battery;
use braid_transport::path::{PathId, PathRole};
use braid_transport::policy::PolicyRunner;
use braid_transport::profile::{self, PathUse, Profile};
use braid_transport::proto::crypto::{Protection, deterministic};
use braid_transport::proto::{ClientCrypto, CloseReason, Config, Connection, Event, ServerCrypto};
use braid_transport::time::Instant;

/// Keep-alive of the endpoints a simulated `[[node]]` leaves waiting (the client, and the
/// node's upstream side): 2.5 s, half of the 5-s idle timeout the transport had when it was
/// added (kept so the proxy tables stay as pinned; the timeout is 30 s now).
const NODE_KEEP_ALIVE: Duration = Duration::from_millis(2500);
use braid_transport::trace::{CaptureSink, Direction, TraceSink, Vantage};

/// Most events processed at one instant before the run is declared stuck.
const SAME_INSTANT_LIMIT: u64 = 2_000_000;

/// Component tags for seed derivation.
const TAG_LINK: u64 = 1;
const TAG_ENDPOINT: u64 = 2;
const TAG_SOURCE: u64 = 3;
const TAG_FLASH: u64 = 4;
const TAG_TLS: u64 = 5;

/// SplitMix64 finalizer over (seed, tag, index): independent seeds per component.
pub(crate) fn derive_seed(seed: u64, tag: u64, index: u64) -> u64 {
    let mut z =
        seed ^ tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ index.wrapping_mul(0xd1b5_4a32_d192_ed69);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The most datagram buffers kept for reuse.
const POOL_MAX: usize = 4096;

struct Packet {
    route: u32,
    hop: u16,
    len: u32,
    data: Vec<u8>,
}

#[derive(Clone, Copy)]
enum Dest {
    Endpoint(usize),
    Sink(usize),
}

struct Route {
    hops: Vec<usize>,
    from: SocketAddr,
    to: SocketAddr,
    dest: Dest,
}

struct Endpoint {
    conn: Option<Connection>,
    config: Arc<Config>,
    /// The flow's TLS: the client pins the server's deterministic certificate.
    crypto: EndpointCrypto,
    flow: usize,
    client: bool,
    seed: u64,
    dead: bool,
}

enum EndpointCrypto {
    Client(ClientCrypto),
    Server(ServerCrypto),
}

struct Leg {
    client: SocketAddr,
    server: SocketAddr,
    role: PathRole,
    path_id: Option<PathId>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FlowKind {
    Main,
    /// The main flow's upstream leg, server → `[[node]]` (the main flow is then the
    /// downstream leg).
    Upstream,
    Cross(usize),
}

struct Flow {
    kind: FlowKind,
    workload: Box<dyn Workload>,
    client: usize,
    server: usize,
    legs: Vec<Leg>,
    close_when_done: bool,
    close_sent: bool,
    bytes_at_drop: u64,
    /// The endpoint to give a turn when this flow's workload asks
    /// ([`Workload::take_linked_wake`]): the node's endpoint on the other leg.
    linked: Option<usize>,
}

struct FlashCrowd {
    cross: usize,
    flow_bytes: u64,
    config: Arc<Config>,
    down: Vec<usize>,
    up: Vec<usize>,
}

struct Source {
    cross: usize,
    route: u32,
    packet_bytes: u32,
    interval_ns: u64,
    onoff: Option<(f64, f64, f64)>,
    on_until: Instant,
    stop: Instant,
    next_ns: u64,
    rng: ChaCha8Rng,
    received: u64,
    started: bool,
}

// Entity kinds, in the order they run at equal times.
const K_EVENT: u8 = 0;
const K_START: u8 = 1;
const K_LINK: u8 = 2;
const K_ENDPOINT: u8 = 3;
const K_WORKLOAD: u8 = 4;
const K_SOURCE: u8 = 5;
const K_STOP: u8 = 6;
const K_TICK: u8 = 7;
const K_FLASH: u8 = 8;
const K_POLICY: u8 = 9;

pub(crate) struct Sim<'a> {
    scenario: &'a Scenario,
    seed: u64,
    now: Instant,
    end: Instant,
    heap: BinaryHeap<Reverse<(Instant, u8, u32)>>,
    links: Vec<Link<Packet>>,
    link_names: Vec<String>,
    link_sched: Vec<Option<Instant>>,
    link_dirty: Vec<bool>,
    dirty_links: Vec<usize>,
    routes: Vec<Route>,
    by_addr: BTreeMap<SocketAddr, u32>,
    endpoints: Vec<Endpoint>,
    ep_sched: Vec<Option<Instant>>,
    ep_dirty: Vec<bool>,
    dirty_eps: Vec<usize>,
    flows: Vec<Flow>,
    wl_sched: Vec<Option<Instant>>,
    sources: Vec<Source>,
    flash: Vec<FlashCrowd>,
    /// Datagram buffers handed back after delivery, reused for the next datagrams sent (no
    /// allocation per simulated datagram in the steady state).
    pool: Vec<Vec<u8>>,
    /// The datagrams one endpoint service produced (kept for its capacity).
    out: Vec<(u32, usize, Vec<u8>, PathId)>,
    // Main flow bookkeeping.
    main_paths: Vec<Option<usize>>, // scenario path -> leg index of the main flow
    interval: Duration,
    series: TimeSeries,
    last_path_bytes: Vec<u64>,
    last_goodput_bytes: u64,
    active_bins: Vec<u64>,
    unroutable: u64,
    events: u64,
    /// The main flow's connection closed before its workload was done: the run ends there.
    stopped: Option<StreamStop>,
    /// The profile's path policy run for the main flow's client: its radios (one per
    /// scenario path, driven by the datagrams the client sends and receives), mode switch
    /// and ACK repeat.
    policy: PolicyRunner,
    /// When the policy is next woken apart from the ticks (which poll it too).
    policy_sched: Option<Instant>,
    /// When the next tick runs.
    next_tick: Instant,
    /// The main flow's client address on each path → scenario path.
    client_addr_path: BTreeMap<SocketAddr, usize>,
    main_client: Option<usize>,
    /// Captures by route (empty without them).
    captures: Vec<Option<Box<dyn CaptureSink>>>,
    /// Trace sinks waiting for their endpoint's connection to exist.
    pending_trace: BTreeMap<usize, Box<dyn TraceSink>>,
    /// How packets are protected (the null cipher unless `--protect`).
    protection: Protection,
    /// The `[[node]]` the main flow crosses: its relay, the upstream leg's flow, its name
    /// and what it had received by the end of each series bin.
    node: Option<(RelayHandle, usize, String, Vec<u64>)>,
}

fn v4(a: u32, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::from(a)), port)
}

impl<'a> Sim<'a> {
    pub(crate) fn new(
        scenario: &'a Scenario,
        profile: &Profile,
        opts: &RunOptions,
        workload: Box<dyn Workload>,
    ) -> Result<Sim<'a>, SimError> {
        let seed = opts.seed.unwrap_or(scenario.seed);
        let end = Instant::from_duration(scenario.duration);
        let mut sim = Sim {
            scenario,
            seed,
            now: Instant::ZERO,
            end,
            heap: BinaryHeap::new(),
            links: Vec::new(),
            link_names: Vec::new(),
            link_sched: Vec::new(),
            link_dirty: Vec::new(),
            dirty_links: Vec::new(),
            routes: Vec::new(),
            by_addr: BTreeMap::new(),
            endpoints: Vec::new(),
            ep_sched: Vec::new(),
            ep_dirty: Vec::new(),
            dirty_eps: Vec::new(),
            flows: Vec::new(),
            wl_sched: Vec::new(),
            sources: Vec::new(),
            flash: Vec::new(),
            pool: Vec::new(),
            out: Vec::new(),
            main_paths: vec![None; scenario.paths.len()],
            interval: if opts.series_interval.is_zero() {
                Duration::from_millis(100)
            } else {
                opts.series_interval
            },
            series: TimeSeries::default(),
            last_path_bytes: vec![0; scenario.paths.len()],
            last_goodput_bytes: 0,
            active_bins: vec![0; scenario.paths.len()],
            unroutable: 0,
            stopped: None,
            events: 0,
            policy: PolicyRunner::new(
                profile.path_policy,
                &profile.path_policy.aesum_config(),
                &scenario.paths.iter().map(|p| p.role).collect::<Vec<_>>(),
                Instant::ZERO,
            )
            .with_power(&opts.power, Instant::ZERO),
            policy_sched: None,
            next_tick: Instant::ZERO,
            client_addr_path: BTreeMap::new(),
            main_client: None,
            captures: Vec::new(),
            pending_trace: BTreeMap::new(),
            protection: if opts.protect { Protection::Aead } else { Protection::Null },
            node: None,
        };
        for (i, l) in scenario.links.iter().enumerate() {
            sim.add_link(l.name.clone(), l.config.clone(), derive_seed(seed, TAG_LINK, i as u64));
        }

        // The main flow: the chosen paths.
        let chosen: Vec<usize> = match profile.paths {
            PathUse::All => (0..scenario.paths.len()).collect(),
            PathUse::Single => match &opts.path {
                Some(name) => vec![
                    scenario.path_index(name).ok_or_else(|| SimError::UnknownPath(name.clone()))?,
                ],
                None => vec![0],
            },
        };
        if let (PathUse::All, Some(name)) = (profile.paths, &opts.path)
            && scenario.path_index(name).is_none()
        {
            return Err(SimError::UnknownPath(name.clone()));
        }
        let config = (
            Arc::new(main_flow_config(
                profile,
                profile::Side::Client,
                opts.recv_buffer_bytes,
                scenario.idle_timeout,
            )),
            Arc::new(main_flow_config(
                profile,
                profile::Side::Server,
                opts.recv_buffer_bytes,
                None,
            )),
        );
        let f = match node::plan(scenario, &chosen, profile)? {
            Some(plan) => sim.add_node(plan, workload, profile, config, opts, seed),
            None => {
                let mut legs = Vec::new();
                for (li, &p) in chosen.iter().enumerate() {
                    let path = &scenario.paths[p];
                    let pi = p as u32;
                    let client = v4(0x0a00_0002 | (pi << 8), 5000);
                    let server = v4(0x0a00_0001 | (pi << 8), 4433);
                    legs.push((client, server, path.role, path.down.clone(), path.up.clone()));
                    sim.main_paths[p] = Some(li);
                    sim.client_addr_path.insert(client, p);
                }
                sim.add_flow(FlowKind::Main, workload, config, seed, legs, false)
            }
        };
        sim.main_client = sim.flows.get(f).map(|fl| fl.client);
        if let (Some(hooks), Some(flow)) = (&opts.trace.0, sim.flows.get(f)) {
            // With a node, the server's trace is the upstream leg's server.
            let server = match sim.node.as_ref().and_then(|n| sim.flows.get(n.1)) {
                Some(up) => up.server,
                None => flow.server,
            };
            for (e, v) in [(flow.client, Vantage::Client), (server, Vantage::Server)] {
                if let Some(sink) = hooks.connection(&profile.name, seed, v) {
                    sim.pending_trace.insert(e, sink);
                }
            }
            if let Some(kl) = hooks.key_log()
                && let Some(ep) = sim.endpoints.get_mut(flow.client)
                && let EndpointCrypto::Client(c) = &mut ep.crypto
            {
                let mut config = (*c.config).clone();
                config.key_log = kl;
                c.config = Arc::new(config);
            }
            // The main flow's routes come first: leg i's down route is 2i, its up 2i+1.
            for &p in &chosen {
                let name = &scenario.paths[p].name;
                for d in [Direction::Down, Direction::Up] {
                    sim.captures.push(hooks.capture(&profile.name, seed, name, d));
                }
            }
        }
        sim.push(Instant::ZERO, K_START, f as u32);

        // Cross traffic.
        let mut tcp_config: Option<Arc<Config>> = None;
        for (ci, c) in scenario.cross.iter().enumerate() {
            let (down, up) = match c.target {
                CrossTarget::Path(p) => {
                    (scenario.paths[p].down.clone(), scenario.paths[p].up.clone())
                }
                CrossTarget::Link(l) => {
                    let delay = scenario.links[l].config.delay;
                    let rev = sim.add_link(
                        format!("{}.reverse{ci}", scenario.links[l].name),
                        LinkConfig { delay, ..LinkConfig::default() },
                        derive_seed(seed, TAG_LINK, 10_000 + ci as u64),
                    );
                    (vec![l], vec![rev])
                }
            };
            let start = Instant::from_duration(c.start);
            let stop = Instant::from_duration(c.stop);
            match &c.kind {
                CrossKind::Reno | CrossKind::Tfrc => {
                    let name = if c.kind == CrossKind::Reno { "tcp" } else { "tfrc" };
                    let cfg = match (&tcp_config, name) {
                        (Some(cfg), "tcp") => cfg.clone(),
                        _ => {
                            let p = profile::lookup(name)
                                .map_err(|e| SimError::Profile(name.to_string(), e.to_string()))?;
                            let cfg = Arc::new(cross_flow_config(&p));
                            if name == "tcp" {
                                tcp_config = Some(cfg.clone());
                            }
                            cfg
                        }
                    };
                    for k in 0..c.count {
                        let (client, server) = sim.cross_addrs();
                        let legs =
                            vec![(client, server, PathRole::Wired, down.clone(), up.clone())];
                        let f = sim.add_flow(
                            FlowKind::Cross(ci),
                            Box::new(Bulk::new(None, false)),
                            (cfg.clone(), cfg.clone()),
                            seed,
                            legs,
                            false,
                        );
                        // Stagger starts by 1 ms so that flows do not move in lockstep.
                        sim.push(start + Duration::from_millis(u64::from(k)), K_START, f as u32);
                        if stop < end {
                            sim.push(stop, K_STOP, f as u32);
                        }
                    }
                }
                CrossKind::Flash { flows, flow_bytes } => {
                    let cfg = match &tcp_config {
                        Some(cfg) => cfg.clone(),
                        None => {
                            let p = profile::lookup("tcp")
                                .map_err(|e| SimError::Profile("tcp".into(), e.to_string()))?;
                            let cfg = Arc::new(cross_flow_config(&p));
                            tcp_config = Some(cfg.clone());
                            cfg
                        }
                    };
                    // Flows are created when they arrive, so a large crowd costs memory only
                    // while its flows are alive.
                    let mut rng =
                        ChaCha8Rng::seed_from_u64(derive_seed(seed, TAG_FLASH, ci as u64));
                    let span = c.stop.saturating_sub(c.start).as_micros() as f64;
                    let fi = sim.flash.len() as u32;
                    sim.flash.push(FlashCrowd {
                        cross: ci,
                        flow_bytes: *flow_bytes,
                        config: cfg,
                        down,
                        up,
                    });
                    for _ in 0..*flows {
                        let at =
                            start + Duration::from_micros((dist::uniform(&mut rng) * span) as u64);
                        sim.push(at, K_FLASH, fi);
                    }
                }
                CrossKind::Cbr { rate_bps, packet_bytes }
                | CrossKind::OnOff { rate_bps, packet_bytes, .. } => {
                    let onoff = match c.kind {
                        CrossKind::OnOff { on_s, off_s, shape, .. } => Some((on_s, off_s, shape)),
                        _ => None,
                    };
                    for _ in 0..c.count {
                        let si = sim.sources.len();
                        let (from, to) = sim.cross_addrs();
                        let route = sim.routes.len() as u32;
                        sim.routes.push(Route {
                            hops: down.clone(),
                            from,
                            to,
                            dest: Dest::Sink(si),
                        });
                        let wire_bits = (u64::from(*packet_bytes) + 28) * 8;
                        let interval_ns = if *rate_bps == 0 {
                            u64::MAX / 4
                        } else {
                            (wire_bits * 1_000_000_000).div_ceil(*rate_bps)
                        };
                        sim.sources.push(Source {
                            cross: ci,
                            route,
                            packet_bytes: *packet_bytes,
                            interval_ns,
                            onoff,
                            on_until: start,
                            stop,
                            next_ns: start.as_micros() * 1000,
                            rng: ChaCha8Rng::seed_from_u64(derive_seed(
                                seed, TAG_SOURCE, si as u64,
                            )),
                            received: 0,
                            started: false,
                        });
                        sim.push(start, K_SOURCE, si as u32);
                    }
                }
            }
        }

        for (i, ev) in scenario.events.iter().enumerate() {
            sim.push(Instant::from_duration(ev.at), K_EVENT, i as u32);
        }
        sim.series.interval_s = sim.interval.as_secs_f64();
        sim.series.paths = scenario.paths.iter().map(|p| p.name.clone()).collect();
        sim.next_tick = Instant::ZERO + sim.interval;
        sim.push(sim.next_tick, K_TICK, 0);
        Ok(sim)
    }

    /// The main flow through a `[[node]]` (see [`node`]): the downstream leg (the main
    /// flow, returned) and the upstream leg, both started at 0, relayed by the node.
    fn add_node(
        &mut self,
        plan: NodePlan,
        workload: Box<dyn Workload>,
        profile: &Profile,
        (_, server_config): (Arc<Config>, Arc<Config>),
        opts: &RunOptions,
        seed: u64,
    ) -> usize {
        let p = plan.path;
        let pi = p as u32;
        let role = self.scenario.paths[p].role;
        let client = v4(0x0a00_0002 | (pi << 8), 5000);
        let server = v4(0x0a00_0001 | (pi << 8), 4433);
        let (node_up, node_down) =
            (v4(0x0a00_0003 | (pi << 8), 5000), v4(0x0a00_0003 | (pi << 8), 4433));
        let mut returns = |leg: &str, cfgs: &[LinkConfig]| -> Vec<usize> {
            cfgs.iter()
                .enumerate()
                .map(|(i, c)| {
                    let k = self.links.len() as u64;
                    self.add_link(
                        format!("{}.{leg}.return{i}", plan.name),
                        c.clone(),
                        derive_seed(seed, TAG_LINK, 20_000 + k),
                    )
                })
                .collect()
        };
        let down_ret = returns("downstream", &plan.downstream_return);
        let up_ret = returns("upstream", &plan.upstream_return);
        let (up_half, down_half, handle) = node::relay(workload, &plan, profile);
        // The client and the node's upstream side send keep-alive PINGs, as real-time
        // endpoints do: while the upstream leg delivers no whole message the node has
        // nothing to forward, and the client must not take that silence for a dead peer
        // (the idle timeout); the node's upstream side likewise while its sender backs off.
        let keep_alive = |mut c: Config| {
            c.keep_alive = Some(NODE_KEEP_ALIVE);
            c
        };
        let down_cfg = (
            Arc::new(keep_alive(main_flow_config(
                &plan.downstream,
                profile::Side::Client,
                opts.recv_buffer_bytes,
                self.scenario.idle_timeout,
            ))),
            Arc::new(main_flow_config(&plan.downstream, profile::Side::Server, None, None)),
        );
        let f = self.add_flow(
            FlowKind::Main,
            Box::new(down_half),
            down_cfg,
            seed,
            vec![(client, node_down, role, plan.downstream_down.clone(), down_ret)],
            false,
        );
        let up_cfg = (
            Arc::new(keep_alive(main_flow_config(
                profile,
                profile::Side::Client,
                None,
                self.scenario.idle_timeout,
            ))),
            server_config,
        );
        let g = self.add_flow(
            FlowKind::Upstream,
            Box::new(up_half),
            up_cfg,
            seed,
            vec![(node_up, server, PathRole::Wired, plan.upstream_down.clone(), up_ret)],
            false,
        );
        let (fc, fs) = (self.flows[f].client, self.flows[f].server);
        let gc = self.flows[g].client;
        self.flows[f].linked = Some(gc);
        self.flows[g].linked = Some(fs);
        let _ = fc;
        self.main_paths[p] = Some(0);
        self.client_addr_path.insert(client, p);
        self.node = Some((handle, g, plan.name.clone(), Vec::new()));
        self.push(Instant::ZERO, K_START, g as u32);
        f
    }

    fn add_link(&mut self, name: String, config: LinkConfig, seed: u64) -> usize {
        self.links.push(Link::new(config, seed));
        self.link_names.push(name);
        self.link_sched.push(None);
        self.link_dirty.push(false);
        self.links.len() - 1
    }

    fn cross_addrs(&self) -> (SocketAddr, SocketAddr) {
        // 11.0.0.0/8: four addresses per cross endpoint pair.
        let g = self.routes.len() as u32 + self.endpoints.len() as u32;
        (v4(0x0b00_0000 + g * 4 + 2, 5000), v4(0x0b00_0000 + g * 4 + 1, 4433))
    }

    #[allow(clippy::type_complexity)]
    fn add_flow(
        &mut self,
        kind: FlowKind,
        workload: Box<dyn Workload>,
        (client_config, server_config): (Arc<Config>, Arc<Config>),
        seed: u64,
        legs: Vec<(SocketAddr, SocketAddr, PathRole, Vec<usize>, Vec<usize>)>,
        close_when_done: bool,
    ) -> usize {
        let f = self.flows.len();
        let client = self.endpoints.len();
        let server = client + 1;
        let (client_crypto, server_crypto) =
            deterministic::pair_with(derive_seed(seed, TAG_TLS, client as u64), self.protection);
        let mut crypto = [
            Some(EndpointCrypto::Client(client_crypto)),
            Some(EndpointCrypto::Server(server_crypto)),
        ];
        for (k, (i, is_client)) in [(client, true), (server, false)].into_iter().enumerate() {
            let Some(crypto) = crypto[k].take() else { continue };
            self.endpoints.push(Endpoint {
                conn: None,
                config: if is_client { client_config.clone() } else { server_config.clone() },
                crypto,
                flow: f,
                client: is_client,
                seed: derive_seed(seed, TAG_ENDPOINT, i as u64),
                dead: false,
            });
            self.ep_sched.push(None);
            self.ep_dirty.push(false);
        }
        let mut out = Vec::new();
        for (c, s, role, down, up) in legs {
            let r = self.routes.len() as u32;
            self.routes.push(Route { hops: down, from: s, to: c, dest: Dest::Endpoint(client) });
            self.routes.push(Route { hops: up, from: c, to: s, dest: Dest::Endpoint(server) });
            self.by_addr.insert(c, r);
            self.by_addr.insert(s, r + 1);
            out.push(Leg { client: c, server: s, role, path_id: None });
        }
        self.flows.push(Flow {
            kind,
            workload,
            client,
            server,
            legs: out,
            close_when_done,
            close_sent: false,
            bytes_at_drop: 0,
            linked: None,
        });
        self.wl_sched.push(None);
        f
    }

    fn push(&mut self, at: Instant, kind: u8, idx: u32) {
        self.heap.push(Reverse((at, kind, idx)));
    }

    fn mark_link(&mut self, l: usize) {
        if let Some(d) = self.link_dirty.get_mut(l)
            && !*d
        {
            *d = true;
            self.dirty_links.push(l);
        }
    }

    fn mark_ep(&mut self, e: usize) {
        if let Some(d) = self.ep_dirty.get_mut(e)
            && !*d
        {
            *d = true;
            self.dirty_eps.push(e);
        }
    }

    pub(crate) fn run(mut self, profile_name: &str, seed: u64) -> Result<SimResult, SimError> {
        let mut same_instant = 0u64;
        while let Some(Reverse((t, kind, idx))) = self.heap.pop() {
            if t > self.end {
                break;
            }
            let i = idx as usize;
            let stale = match kind {
                K_LINK => self.link_sched.get(i).copied().flatten() != Some(t),
                K_ENDPOINT => self.ep_sched.get(i).copied().flatten() != Some(t),
                K_WORKLOAD => self.wl_sched.get(i).copied().flatten() != Some(t),
                K_POLICY => self.policy_sched != Some(t),
                _ => false,
            };
            if stale {
                continue;
            }
            match kind {
                K_LINK => self.link_sched[i] = None,
                K_ENDPOINT => self.ep_sched[i] = None,
                K_WORKLOAD => self.wl_sched[i] = None,
                K_POLICY => self.policy_sched = None,
                _ => {}
            }
            if t > self.now {
                self.now = t;
                same_instant = 0;
            } else {
                same_instant += 1;
                if same_instant > SAME_INSTANT_LIMIT {
                    return Err(SimError::Stalled(self.now));
                }
            }
            self.events += 1;
            match kind {
                K_EVENT => self.apply_event(i),
                K_START => self.start_flow(i),
                K_LINK => self.link_ready(i),
                K_ENDPOINT => {
                    if let Some(c) = self.endpoints.get_mut(i).and_then(|e| e.conn.as_mut()) {
                        c.handle_timeout(t);
                    }
                    self.mark_ep(i);
                }
                K_WORKLOAD => {
                    if let Some(f) = self.flows.get(i) {
                        let (c, s) = (f.client, f.server);
                        self.mark_ep(c);
                        self.mark_ep(s);
                    }
                }
                K_SOURCE => self.source_fire(i),
                K_STOP => self.stop_flow(i),
                K_FLASH => self.flash_arrival(i),
                K_POLICY => self.poll_policy(),
                _ => self.tick(),
            }
            self.flush();
            if self.stopped.is_some() {
                // The session ends where the viewer's would: at the close.
                self.end = self.now;
                break;
            }
        }
        self.now = self.end;
        self.sample(true);
        Ok(self.finish(profile_name, seed))
    }

    fn flush(&mut self) {
        while let Some(e) = self.dirty_eps.pop() {
            if let Some(d) = self.ep_dirty.get_mut(e) {
                *d = false;
            }
            self.service(e);
        }
        while let Some(l) = self.dirty_links.pop() {
            if let Some(d) = self.link_dirty.get_mut(l) {
                *d = false;
            }
            let next = self.links.get(l).and_then(|k| k.next_event_time()).map(|t| t.max(self.now));
            if next != self.link_sched[l] {
                self.link_sched[l] = next;
                if let Some(t) = next {
                    self.push(t, K_LINK, l as u32);
                }
            }
        }
    }

    fn start_flow(&mut self, f: usize) {
        let now = self.now;
        let Some(flow) = self.flows.get(f) else { return };
        let Some(leg) = flow.legs.first() else { return };
        let e = flow.client;
        let (local, remote, role) = (leg.client, leg.server, leg.role);
        let Some(ep) = self.endpoints.get_mut(e) else { return };
        let EndpointCrypto::Client(crypto) = &ep.crypto else { return };
        ep.conn =
            Connection::connect(ep.config.clone(), crypto, now, ep.seed, local, remote, role).ok();
        if let Some(c) = ep.conn.as_mut()
            && let Some(sink) = self.pending_trace.remove(&e)
        {
            c.set_trace(Some(sink));
        }
        if let Some(leg) = self.flows[f].legs.first_mut() {
            leg.path_id = Some(PathId(0));
        }
        self.mark_ep(e);
    }

    fn flash_arrival(&mut self, i: usize) {
        let Some(fc) = self.flash.get(i) else { return };
        let (ci, bytes, cfg, down, up) =
            (fc.cross, fc.flow_bytes, fc.config.clone(), fc.down.clone(), fc.up.clone());
        let seed = self.seed;
        let (client, server) = self.cross_addrs();
        let legs = vec![(client, server, PathRole::Wired, down, up)];
        let f = self.add_flow(
            FlowKind::Cross(ci),
            Box::new(Bulk::new(Some(bytes), false)),
            (cfg.clone(), cfg),
            seed,
            legs,
            true,
        );
        self.start_flow(f);
    }

    fn stop_flow(&mut self, f: usize) {
        let now = self.now;
        let Some(flow) = self.flows.get(f) else { return };
        for e in [flow.client, flow.server] {
            if let Some(c) = self.endpoints.get_mut(e).and_then(|ep| ep.conn.as_mut()) {
                c.close(now, 0, b"stop");
            }
            self.mark_ep(e);
        }
    }

    fn link_ready(&mut self, l: usize) {
        let now = self.now;
        self.mark_link(l);
        while let Some(mut pkt) = self.links.get_mut(l).and_then(|k| k.poll_delivery(now)) {
            let Some(route) = self.routes.get(pkt.route as usize) else { continue };
            let next_hop = usize::from(pkt.hop) + 1;
            if let Some(&next) = route.hops.get(next_hop) {
                pkt.hop += 1;
                let len = pkt.len as usize;
                if let Some(link) = self.links.get_mut(next) {
                    let _ = link.enqueue(now, len, pkt);
                }
                self.mark_link(next);
                continue;
            }
            let (from, to, dest) = (route.from, route.to, route.dest);
            match dest {
                Dest::Sink(s) => {
                    if let Some(src) = self.sources.get_mut(s) {
                        src.received += u64::from(pkt.len);
                    }
                }
                Dest::Endpoint(e) => {
                    if Some(e) == self.main_client
                        && let Some(&p) = self.client_addr_path.get(&to)
                    {
                        self.policy.on_received(now, p, pkt.len as usize);
                    }
                    let Some(ep) = self.endpoints.get_mut(e) else { continue };
                    if ep.dead {
                        continue;
                    }
                    match ep.conn.as_mut() {
                        Some(c) => {
                            c.handle_datagram(now, to, from, &pkt.data);
                            if self.pool.len() < POOL_MAX {
                                self.pool.push(std::mem::take(&mut pkt.data));
                            }
                        }
                        None if !ep.client => {
                            let EndpointCrypto::Server(crypto) = &ep.crypto else { continue };
                            if let Ok(c) = Connection::accept(
                                ep.config.clone(),
                                crypto,
                                now,
                                ep.seed,
                                to,
                                from,
                                &pkt.data,
                            ) {
                                let mut c = c;
                                if let Some(sink) = self.pending_trace.remove(&e) {
                                    c.set_trace(Some(sink));
                                }
                                ep.conn = Some(c);
                            }
                        }
                        None => {}
                    }
                    self.mark_ep(e);
                }
            }
        }
    }

    /// Puts a datagram on its route's first link. Returns whether that link reported a
    /// transmit failure (lost on the air or the link down; a full queue is not one).
    fn inject(&mut self, route: u32, len: usize, data: Vec<u8>) -> bool {
        let Some(&first) = self.routes.get(route as usize).and_then(|r| r.hops.first()) else {
            return false;
        };
        let now = self.now;
        if let Some(Some(cap)) = self.captures.get_mut(route as usize)
            && let Some(r) = self.routes.get(route as usize)
            && let (SocketAddr::V4(from), SocketAddr::V4(to)) = (r.from, r.to)
        {
            cap.datagram(now, from, to, &data);
        }
        let mut failed = false;
        if let Some(link) = self.links.get_mut(first) {
            let r = link.enqueue(now, len, Packet { route, hop: 0, len: len as u32, data });
            failed = matches!(r, Err(DropReason::Loss | DropReason::Down));
        }
        self.mark_link(first);
        failed
    }

    fn service(&mut self, e: usize) {
        let now = self.now;
        let Some(ep) = self.endpoints.get_mut(e) else { return };
        if ep.dead {
            return;
        }
        let Some(conn) = ep.conn.as_mut() else { return };
        let is_client = ep.client;
        let Some(flow) = self.flows.get_mut(ep.flow) else { return };
        let f = ep.flow;
        let linked_wake;
        while let Some(ev) = conn.poll_event() {
            if let Event::Closed { reason } = &ev
                && is_client
                && flow.kind == FlowKind::Main
                && *reason != CloseReason::Local
                && !flow.workload.is_done()
                && self.stopped.is_none()
            {
                let reason = match reason {
                    CloseReason::IdleTimeout => format!(
                        "connection timed out: nothing received on any path for {} s",
                        conn.idle_timeout().as_secs_f64()
                    ),
                    CloseReason::Peer { code, reason } => {
                        format!("the peer closed the connection (code {code}: {reason})")
                    }
                    CloseReason::Handshake { error } => format!("the handshake failed: {error}"),
                    CloseReason::StatelessReset => "the peer reset the connection".to_owned(),
                    CloseReason::ProtocolError { code, reason } => {
                        format!("the peer broke the protocol (closed with code {code}: {reason})")
                    }
                    CloseReason::Local => String::new(),
                };
                if flow.workload.on_stopped(now) {
                    self.stopped = Some(StreamStop { at_s: now.as_secs_f64(), reason });
                }
            }
            if let (Event::Connected, true) = (ev, is_client) {
                for leg in flow.legs.iter_mut().skip(1) {
                    if leg.path_id.is_none() {
                        leg.path_id = conn.add_path(now, leg.client, leg.server, leg.role).ok();
                    }
                }
            }
        }
        if is_client {
            flow.workload.on_client(now, conn);
            linked_wake = flow.workload.take_linked_wake();
            if Some(e) == self.main_client {
                self.policy.poll(now, conn);
            }
            if flow.close_when_done && !flow.close_sent && flow.workload.is_done() {
                flow.close_sent = true;
                conn.close(now, 0, b"done");
            }
        } else {
            flow.workload.on_server(now, conn);
            linked_wake = flow.workload.take_linked_wake();
        }
        let linked = flow.linked.filter(|_| linked_wake);
        let wl_next = flow.workload.poll_timeout();
        let mut out = std::mem::take(&mut self.out);
        let mut buf = self.pool.pop().unwrap_or_default();
        loop {
            buf.clear();
            let Some(t) = conn.poll_transmit(now, &mut buf) else { break };
            if is_client
                && Some(e) == self.main_client
                && let Some(&p) = self.client_addr_path.get(&t.local)
            {
                self.policy.on_sent(now, p, t.len);
            }
            match self.by_addr.get(&t.remote) {
                Some(&r) => {
                    buf.truncate(t.len);
                    let next = self.pool.pop().unwrap_or_default();
                    out.push((r, t.len, std::mem::replace(&mut buf, next), t.path));
                }
                None => self.unroutable += 1,
            }
        }
        self.pool.push(buf);
        // A timer at or before `now` is served 1 µs later: the connection has had its
        // chance at `now`, and a timer it cannot clear at `now` (e.g. a deadline rounded
        // down to the microsecond) must not stop virtual time.
        let timeout = conn.poll_timeout().map(|t| t.max(now + Duration::from_micros(1)));
        let finished = conn.is_closed() && timeout.is_none();
        let kind = flow.kind;
        if finished && matches!(kind, FlowKind::Cross(_)) {
            // A finished cross flow: keep its byte count, free the connection.
            if is_client {
                flow.bytes_at_drop = conn.stats().bytes_delivered;
            }
            ep.conn = None;
            ep.dead = true;
        }
        if timeout != self.ep_sched[e] {
            self.ep_sched[e] = timeout;
            if let Some(t) = timeout {
                self.push(t, K_ENDPOINT, e as u32);
            }
        }
        let wl_next = wl_next.map(|t| t.max(now));
        if wl_next != self.wl_sched[f] {
            self.wl_sched[f] = wl_next;
            if let Some(t) = wl_next {
                self.push(t, K_WORKLOAD, f as u32);
            }
        }
        let mut failed_on = None;
        for (r, len, data, path) in out.drain(..) {
            if self.inject(r, len, data) {
                failed_on = Some(path);
            }
        }
        self.out = out;
        if let Some(o) = linked {
            self.mark_ep(o);
        }
        if Some(e) == self.main_client {
            // weSACK: the main client's link reported a transmit failure → repeat the ACK.
            if let Some(path) = failed_on
                && let Some(c) = self.endpoints.get_mut(e).and_then(|ep| ep.conn.as_mut())
                && self.policy.on_transmit_failure(now, path, c)
            {
                self.mark_ep(e);
            }
            self.schedule_policy();
        }
    }

    fn source_fire(&mut self, s: usize) {
        let now = self.now;
        let Some(src) = self.sources.get_mut(s) else { return };
        if now >= src.stop {
            return;
        }
        if let Some((on_s, off_s, shape)) = src.onoff
            && now >= src.on_until
        {
            // An ON period ended (or the source starts ON): OFF for a Pareto time, then ON
            // for another.
            let off = if src.started { dist::pareto(&mut src.rng, off_s, shape) } else { 0.0 };
            let on = dist::pareto(&mut src.rng, on_s, shape);
            let on_at = now + Duration::from_secs_f64(off.min(1e9));
            src.on_until = on_at + Duration::from_secs_f64(on.min(1e9));
            src.next_ns = on_at.as_micros() * 1000;
            src.started = true;
            if on_at > now {
                self.heap.push(Reverse((on_at, K_SOURCE, s as u32)));
                return;
            }
        }
        let (route, len) = (src.route, src.packet_bytes as usize);
        src.next_ns = src.next_ns.max(now.as_micros() * 1000) + src.interval_ns;
        let next = Instant::from_micros(src.next_ns.div_ceil(1000));
        self.push(next, K_SOURCE, s as u32);
        self.inject(route, len, Vec::new());
    }

    fn apply_event(&mut self, i: usize) {
        let now = self.now;
        let Some(ev) = self.scenario.events.get(i) else { return };
        for l in self.scenario.event_links(ev) {
            let Some(link) = self.links.get_mut(l) else { continue };
            ev.action.apply(link, now);
            self.mark_link(l);
        }
    }

    fn tick(&mut self) {
        self.poll_policy();
        self.sample(false);
        self.next_tick = self.now + self.interval;
        self.push(self.next_tick, K_TICK, 0);
        self.schedule_policy();
    }

    /// Polls the main client's mode switch, if the policy runs one, and lets the client
    /// transmit.
    fn poll_policy(&mut self) {
        if self.policy.mode_switch().is_some()
            && let Some(e) = self.main_client
            && let Some(conn) = self.endpoints.get_mut(e).and_then(|ep| ep.conn.as_mut())
        {
            self.policy.poll(self.now, conn);
            self.mark_ep(e);
        }
    }

    /// Wakes the policy when it is due before the next tick (with the default 100 ms
    /// series interval the ticks alone serve it).
    fn schedule_policy(&mut self) {
        let next = self.policy.poll_timeout().map(|t| t.max(self.now + Duration::from_micros(1)));
        if let Some(t) = next
            && t < self.next_tick
            && self.policy_sched != Some(t)
        {
            self.policy_sched = Some(t);
            self.push(t, K_POLICY, 0);
        }
    }

    /// Per-path bytes the main flow's client received so far, by scenario path.
    fn main_path_bytes(&self) -> (Vec<u64>, u64) {
        let mut out = vec![0; self.scenario.paths.len()];
        let Some(flow) = self.flows.first() else { return (out, 0) };
        let Some(conn) = self.endpoints.get(flow.client).and_then(|e| e.conn.as_ref()) else {
            return (out, 0);
        };
        let stats = conn.stats();
        for (p, leg) in self.main_paths.iter().enumerate() {
            let Some(pid) = leg.and_then(|li| flow.legs.get(li)).and_then(|l| l.path_id) else {
                continue;
            };
            if let Some(ps) = stats.paths.iter().find(|s| s.id == pid) {
                out[p] = ps.data_bytes_received;
            }
        }
        (out, stats.bytes_delivered)
    }

    /// The main flow's sender's latest RTT sample per scenario path, ms; 0 for a path that
    /// delivered nothing new since the previous bin (`bytes`: this bin's per-path totals).
    fn main_path_rtts(&self, bytes: &[u64]) -> Vec<f64> {
        let mut out = vec![0.0; self.scenario.paths.len()];
        let Some(flow) = self.flows.first() else { return out };
        let Some(conn) = self.endpoints.get(flow.server).and_then(|e| e.conn.as_ref()) else {
            return out;
        };
        let stats = conn.stats();
        for (p, leg) in self.main_paths.iter().enumerate() {
            let Some(pid) = leg.and_then(|li| flow.legs.get(li)).and_then(|l| l.path_id) else {
                continue;
            };
            let fresh = bytes.get(p).copied().unwrap_or(0) > self.last_path_bytes[p];
            if let Some(ps) = stats.paths.iter().find(|s| s.id == pid)
                && fresh
            {
                out[p] = finite(ps.latest_rtt.as_secs_f64() * 1000.0);
            }
        }
        out
    }

    fn sample(&mut self, last: bool) {
        let t_s = self.now.as_secs_f64();
        let prev_t = self.series.rows.last().map_or(0.0, |r| r.t_s);
        let dt = t_s - prev_t;
        if dt <= 0.0 || (last && dt < 1e-9) {
            return;
        }
        let (bytes, goodput) = self.main_path_bytes();
        let mut row = SeriesRow {
            t_s,
            throughput_bps: Vec::with_capacity(bytes.len()),
            ..SeriesRow::default()
        };
        for (p, b) in bytes.iter().enumerate() {
            let d = b.saturating_sub(self.last_path_bytes[p]);
            if d > 0 {
                self.active_bins[p] += 1;
            }
            row.throughput_bps.push(finite(d as f64 * 8.0 / dt));
        }
        row.goodput_bps = finite(goodput.saturating_sub(self.last_goodput_bytes) as f64 * 8.0 / dt);
        row.rtt_ms = self.main_path_rtts(&bytes);
        self.last_path_bytes = bytes;
        self.last_goodput_bytes = goodput;
        self.series.rows.push(row);
        if let Some(n) = self.node.as_mut() {
            n.3.push(n.0.arrived_bytes());
        }
    }

    fn finish(mut self, profile_name: &str, seed: u64) -> SimResult {
        let sc = self.scenario;
        let end = self.end;
        let energy_now = self.policy.snapshot(end);
        let duration_s = end.as_secs_f64();
        let main = self.flows.first();
        let stats = main.map(|f| f.workload.stats()).unwrap_or_default();
        let conn_stats = |e: Option<usize>| {
            e.and_then(|e| self.endpoints.get(e)).and_then(|ep| ep.conn.as_ref()).map(|c| c.stats())
        };
        let cs = conn_stats(main.map(|f| f.client));
        let ss = conn_stats(main.map(|f| f.server));
        // With a node, the upstream leg's endpoints count too (the session paid for both
        // legs); per-path figures stay the client's leg.
        let upstream = self.node.as_ref().and_then(|n| self.flows.get(n.1));
        let us = conn_stats(upstream.map(|f| f.client));
        let uss = conn_stats(upstream.map(|f| f.server));
        let all = [&cs, &ss, &us, &uss];
        let sum = |f: fn(&braid_transport::proto::ConnectionStats) -> u64| -> u64 {
            all.iter().map(|s| s.as_ref().map_or(0, f)).sum()
        };
        let retransmitted = sum(|s| s.retransmitted_bytes);
        let redundant = sum(|s| s.redundant_bytes);
        let lost = sum(|s| s.lost_packets);
        let spurious_losses = sum(|s| s.spurious_losses);
        let radio = |p: usize| energy_now.radios.get(p).and_then(Option::as_ref);
        let mut paths = Vec::new();
        let mut redundancy_j = 0.0;
        for (p, path) in sc.paths.iter().enumerate() {
            let pid = self.main_paths[p]
                .and_then(|li| main.and_then(|f| f.legs.get(li)))
                .and_then(|l| l.path_id);
            let failures = pid
                .and_then(|id| ss.as_ref().and_then(|s| s.paths.iter().find(|x| x.id == id)))
                .map_or(0, |x| x.failures);
            let sent = |st: &Option<braid_transport::proto::ConnectionStats>| {
                pid.map(|id| {
                    st.as_ref()
                        .and_then(|s| s.paths.iter().find(|x| x.id == id))
                        .map_or(0, |x| x.packets_sent)
                })
            };
            let (packets_down, packets_up) = (sent(&ss), sent(&cs));
            // The path's radio energy, shared out by the bytes it carried.
            let bytes_of = |st: &Option<braid_transport::proto::ConnectionStats>| {
                pid.and_then(|id| {
                    st.as_ref()
                        .and_then(|s| s.paths.iter().find(|x| x.id == id))
                        .map(|x| (x.bytes_sent, x.redundant_bytes_sent))
                })
                .unwrap_or((0, 0))
            };
            let ((down, red_down), (up, red_up)) = (bytes_of(&ss), bytes_of(&cs));
            if down + up > 0 {
                let share = (red_down + red_up) as f64 / (down + up) as f64;
                redundancy_j += radio(p).map_or(0.0, |r| r.energy_j) * share;
            }
            let rtt_ms = pid
                .and_then(|id| ss.as_ref().and_then(|s| s.paths.iter().find(|x| x.id == id)))
                .filter(|x| x.bytes_sent > 0)
                .map_or(0.0, |x| x.srtt.as_secs_f64() * 1000.0);
            paths.push(PathReport {
                name: path.name.clone(),
                role: path.role.as_str().to_string(),
                throughput_bps: finite(self.last_path_bytes[p] as f64 * 8.0 / duration_s),
                rtt_ms: finite(rtt_ms),
                energy_j: finite(radio(p).map_or(0.0, |r| r.energy_j)),
                time_active_s: match radio(p) {
                    Some(r) => finite(r.active.as_secs_f64()).min(duration_s),
                    None => finite(self.active_bins[p] as f64 * self.interval.as_secs_f64())
                        .min(duration_s),
                },
                failures,
                packets_down,
                packets_up,
            });
        }
        let energy = energy_now.radios.iter().any(Option::is_some).then(|| {
            let total_j = energy_now.total_j();
            let bits = stats.bytes_delivered as f64 * 8.0;
            // The residual battery only where the scenario gives a capacity.
            let residual_j = sc
                .workload
                .battery_j
                .map(|capacity_j| finite(Battery { capacity_j }.residual_j(total_j)));
            EnergyReport {
                total_j: finite(total_j),
                avg_power_mw: finite(total_j / duration_s.max(1e-9) * 1000.0),
                efficiency_bits_per_j: if total_j > 0.0 { finite(bits / total_j) } else { 0.0 },
                battery_residual_j: residual_j,
                mode_switches: energy_now.switches() as u64,
                time_in_partial_s: finite(energy_now.time_in_partial.as_secs_f64()),
                shadow_all_paths_j: finite(energy_now.shadow_all_paths_j),
                baseline_mptcp_j: None,
                redundancy_j: finite(redundancy_j),
                failed_mode_switches: energy_now.failed_mode_switches,
            }
        });
        let report = SessionReport {
            scenario: sc.name.clone(),
            profile: profile_name.to_string(),
            seed,
            duration_s,
            goodput_bps: finite(stats.bytes_delivered as f64 * 8.0 / duration_s),
            bytes_delivered: stats.bytes_delivered,
            retransmitted_bytes: retransmitted,
            lost_packets: lost,
            redundant_bytes: redundant,
            delay_ms: DelayPercentiles::from_micros(&stats.delays_us),
            paths,
            stream: main.and_then(|f| f.workload.stream_report()),
            energy,
            failover_time_s: ss.as_ref().and_then(|s| s.failover_time).map(|d| d.as_secs_f64()),
            unauthenticated_datagrams: sum(|s| s.dropped.unauthenticated),
            loss_unmeasured: false,
            proxy_buffer_bytes: self.node.as_ref().map(|n| n.0.peak_bytes()),
        };
        let node = self.node.take().map(|(relay, _, name, arrived_bytes)| super::NodeResult {
            name,
            arrived_bytes,
            peak_buffer_bytes: relay.peak_bytes(),
            upstream_rtt_ms: uss
                .as_ref()
                .and_then(|s| s.paths.first())
                .map_or(0.0, |p| finite(p.srtt.as_secs_f64() * 1000.0)),
        });

        let mut cross: Vec<CrossResult> = sc
            .cross
            .iter()
            .map(|c| CrossResult {
                kind: match c.kind {
                    CrossKind::Reno => "reno",
                    CrossKind::Tfrc => "tfrc",
                    CrossKind::Cbr { .. } => "cbr",
                    CrossKind::OnOff { .. } => "onoff",
                    CrossKind::Flash { .. } => "flash",
                }
                .to_string(),
                target: match c.target {
                    CrossTarget::Link(l) => sc.links[l].name.clone(),
                    CrossTarget::Path(p) => sc.paths[p].name.clone(),
                },
                flows: 0,
                completed: 0,
                bytes_delivered: 0,
                throughput_bps: 0.0,
            })
            .collect();
        for f in &self.flows {
            let FlowKind::Cross(ci) = f.kind else { continue };
            let Some(r) = cross.get_mut(ci) else { continue };
            r.flows += 1;
            let live = self
                .endpoints
                .get(f.client)
                .and_then(|e| e.conn.as_ref())
                .map(|c| c.stats().bytes_delivered);
            r.bytes_delivered += live.unwrap_or(f.bytes_at_drop);
            if f.workload.is_done() {
                r.completed += 1;
            }
        }
        for s in &self.sources {
            if let Some(r) = cross.get_mut(s.cross) {
                r.flows += 1;
                r.bytes_delivered += s.received;
            }
        }
        for (r, c) in cross.iter_mut().zip(&sc.cross) {
            let span = c.stop.min(sc.duration).saturating_sub(c.start).as_secs_f64();
            r.throughput_bps =
                if span > 0.0 { finite(r.bytes_delivered as f64 * 8.0 / span) } else { 0.0 };
        }

        let links = self
            .link_names
            .iter()
            .zip(&self.links)
            .map(|(name, l)| LinkResult { name: name.clone(), counters: l.counters() })
            .collect();
        SimResult {
            report,
            spurious_losses,
            series: self.series,
            cross,
            check: stats.check,
            links,
            completed_s: stats.done_at.map(|t| t.as_secs_f64()),
            events: self.events,
            unroutable: self.unroutable,
            stopped: self.stopped,
            node,
        }
    }
}

/// The configuration of one end of the simulated connection under test:
/// [`Profile::connection_config`] on the virtual clock. The client gets the receive buffer
/// the front end asked for (the player's transport buffer); the server keeps the default,
/// as the real-time server does.
pub fn main_flow_config(
    profile: &Profile,
    side: profile::Side,
    recv_buffer_bytes: Option<u64>,
    idle_timeout: Option<Duration>,
) -> Config {
    let mut params = profile::ConfigParams::new(side, profile::Clock::Virtual);
    if side == profile::Side::Client {
        params.recv_buffer_bytes = recv_buffer_bytes;
        params.idle_timeout = idle_timeout;
    }
    profile.connection_config(params)
}

/// The configuration of a cross-traffic flow of profile `p` (`tcp` or `tfrc`).
fn cross_flow_config(p: &Profile) -> Config {
    p.connection_config(profile::ConfigParams::new(profile::Side::Client, profile::Clock::Virtual))
}
