//! Link models: one direction of a network link, sans-IO.
//!
//! A [`Link`] is a droptail byte queue in front of a serializer (fixed rate, a mahimahi
//! [`Trace`], or a schedule of rates), followed by a propagation delay (fixed plus normal or
//! Pareto jitter) and a loss process (Bernoulli or Gilbert–Elliott). It is generic over
//! the payload it carries: the simulator moves ids or small structs through it, the
//! real-time UDP relay moves datagram bytes. The driver supplies time:
//!
//! 1. [`Link::enqueue`] when a datagram enters the link (it may be dropped at once);
//! 2. [`Link::next_event_time`] says when to come back;
//! 3. [`Link::poll_delivery`] hands out, in FIFO order, every datagram whose delivery time
//!    has passed.
//!
//! Timed changes ([`Link::set_down`], [`Link::set_up`], [`Link::set_rate`],
//! [`Link::set_delay`], [`Link::set_loss`]) take effect at the `now` they are given.
//!
//! Accounting: the serializer charges each datagram its length plus
//! [`LinkConfig::overhead_bytes`] (28 = IPv4 + UDP headers by default); the queue limit is in
//! the same bytes. Loss is decided when a datagram is enqueued (a lost datagram uses no
//! capacity), delay when it leaves the serializer. By default a datagram never overtakes an
//! earlier one (FIFO is kept under jitter: its delivery time is at least that of the previous
//! one), which under large jitter makes delays a correlated running maximum. With
//! [`LinkConfig::jitter_reorder`] each datagram gets its own independent delay and may
//! overtake (tc/netem's behaviour with `delay … jitter` and no rate limit, the emulation
//! the S-EDPF paper's controlled experiments used).
//! All times are kept in nanoseconds inside, so rates do not drift by rounding.

pub mod dist;
pub mod markov;
pub mod power;
pub mod scenario;
mod trace;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use braid_transport::time::Instant;

pub use trace::{OPPORTUNITY_BYTES, Trace, TraceError};

/// Bytes of IPv4 + UDP header charged per datagram by default (the radio meters of
/// [`braid_transport::policy`] charge the same).
pub use braid_transport::path::IP_UDP_OVERHEAD;
/// The smallest default queue, bytes.
pub const MIN_DEFAULT_QUEUE_BYTES: u64 = 15_000;
/// Default queue length in time at the link's rate.
pub const DEFAULT_QUEUE_TIME: Duration = Duration::from_millis(150);
/// Shape α of the Pareto jitter distribution (\[approx\]: heavy tailed with finite
/// variance; netem's own Pareto table is not reproduced).
pub const PARETO_JITTER_SHAPE: f64 = 2.5;

/// How fast the serializer drains the queue.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Rate {
    /// No serialization delay.
    #[default]
    Unlimited,
    /// A constant rate in bits per second (0 = nothing ever leaves).
    Fixed(u64),
    /// A mahimahi trace: each line is [`OPPORTUNITY_BYTES`] bytes of capacity in that
    /// millisecond, byte-accounted (a datagram smaller than an opportunity leaves the rest
    /// to the next queued one; a datagram larger spans several opportunities). Time 0 of the
    /// trace is `Instant::ZERO`.
    Trace {
        /// The trace.
        trace: Arc<Trace>,
        /// Stop after one pass (the link then delivers nothing) instead of looping.
        once: bool,
    },
    /// Piecewise-constant rates; the first step's rate also applies before its time.
    Schedule(Vec<RateStep>),
}

/// One step of a [`Rate::Schedule`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateStep {
    /// When this rate starts (since `Instant::ZERO`).
    pub at: Duration,
    /// Bits per second from then on.
    pub bps: u64,
}

impl Rate {
    /// A representative rate, bits per second: the fixed rate, the trace mean or the
    /// schedule's largest step. `None` when unlimited.
    pub fn nominal_bps(&self) -> Option<f64> {
        match self {
            Rate::Unlimited => None,
            Rate::Fixed(bps) => Some(*bps as f64),
            Rate::Trace { trace, .. } => Some(trace.mean_rate_bps()),
            Rate::Schedule(steps) => steps.iter().map(|s| s.bps).max().map(|b| b as f64),
        }
    }
}

/// The distribution of the jitter added to the base delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DelayDist {
    /// `delay + jitter·N(0, 1)`, clamped at 0.
    #[default]
    Normal,
    /// `delay + X`, X Pareto-distributed (shape [`PARETO_JITTER_SHAPE`]) shifted to start at
    /// 0, with mean `jitter`.
    Pareto,
}

/// The loss process, decided per datagram at enqueue time.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Loss {
    /// No random loss.
    #[default]
    None,
    /// Independent loss with this probability.
    Bernoulli(f64),
    /// Gilbert–Elliott two-state Markov chain, stepped once per datagram: in state Good a
    /// datagram is lost with probability `k`, in Bad with probability `h`; then Good→Bad
    /// with probability `p` and Bad→Good with probability `r`. Here `h` is the loss
    /// probability in the Bad state (netem's `gemodel` calls it `1-h`). The stationary
    /// probability of Bad is `p/(p+r)`, so the mean loss rate is
    /// `p/(p+r)·h + r/(p+r)·k` (Gilbert 1960, Elliott 1963; parameter names as in
    /// netem's `gemodel`, Salsano et al. 2012 \[recalled\]).
    GilbertElliott {
        /// Good→Bad transition probability.
        p: f64,
        /// Bad→Good transition probability.
        r: f64,
        /// Loss probability in Bad.
        h: f64,
        /// Loss probability in Good (scenario files default it to 0).
        k: f64,
    },
}

impl Loss {
    /// The long-run mean loss probability.
    pub fn mean(&self) -> f64 {
        match *self {
            Loss::None => 0.0,
            Loss::Bernoulli(p) => p,
            Loss::GilbertElliott { p, r, h, k } => {
                if p + r <= 0.0 {
                    k
                } else {
                    (p * h + r * k) / (p + r)
                }
            }
        }
    }
}

/// Everything that describes one direction of a link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Serialization rate.
    pub rate: Rate,
    /// Base one-way propagation delay.
    pub delay: Duration,
    /// Jitter scale (standard deviation for [`DelayDist::Normal`], mean for Pareto).
    pub jitter: Duration,
    /// Jitter distribution.
    pub delay_dist: DelayDist,
    /// Random loss.
    pub loss: Loss,
    /// Droptail limit in bytes; `None` = [`DEFAULT_QUEUE_TIME`] at the nominal rate, at
    /// least [`MIN_DEFAULT_QUEUE_BYTES`].
    pub queue_bytes: Option<u64>,
    /// Header bytes charged per datagram on top of its length.
    pub overhead_bytes: u32,
    /// Each datagram's delay is drawn independently and datagrams may overtake each other
    /// (scenario key `jitter_reorder = true`); `false` keeps FIFO order.
    pub jitter_reorder: bool,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate: Rate::Unlimited,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            delay_dist: DelayDist::Normal,
            loss: Loss::None,
            queue_bytes: None,
            overhead_bytes: IP_UDP_OVERHEAD,
            jitter_reorder: false,
        }
    }
}

impl LinkConfig {
    /// A fixed-rate link with a fixed delay and the defaults otherwise.
    pub fn fixed(bps: u64, delay: Duration) -> Self {
        LinkConfig { rate: Rate::Fixed(bps), delay, ..LinkConfig::default() }
    }

    /// The queue limit this config resolves to, bytes.
    pub fn queue_limit(&self) -> u64 {
        self.queue_bytes.unwrap_or_else(|| match self.rate.nominal_bps() {
            Some(bps) => {
                ((bps * DEFAULT_QUEUE_TIME.as_secs_f64() / 8.0) as u64).max(MIN_DEFAULT_QUEUE_BYTES)
            }
            None => MIN_DEFAULT_QUEUE_BYTES,
        })
    }
}

/// Why [`Link::enqueue`] dropped a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DropReason {
    /// The droptail queue was full.
    #[error("queue full")]
    Queue,
    /// The loss process chose it.
    #[error("random loss")]
    Loss,
    /// The link is down (a transmit failure).
    #[error("link down")]
    Down,
}

/// Running totals of one link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Datagrams accepted into the queue.
    pub enqueued: u64,
    /// Datagrams handed out by [`Link::poll_delivery`].
    pub delivered: u64,
    /// Datagrams dropped because the queue was full.
    pub dropped_queue: u64,
    /// Datagrams dropped by the loss process.
    pub dropped_loss: u64,
    /// Datagrams dropped because the link was or went down: the transmit failures.
    pub dropped_down: u64,
    /// Bytes (datagram lengths, without overhead) accepted into the queue.
    pub bytes_enqueued: u64,
    /// Bytes (datagram lengths, without overhead) delivered.
    pub bytes_delivered: u64,
}

impl LinkCounters {
    /// Datagrams that could not be sent because the link was down.
    pub fn transmit_failures(&self) -> u64 {
        self.dropped_down
    }
}

struct Queued<T> {
    payload: T,
    len: u64,
    wire: u64,
    arrival_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Completion {
    fin_ns: u64,
    trace_next: u64,
    trace_left: u64,
}

/// One direction of a link carrying payloads of type `T`. See the module docs.
pub struct Link<T> {
    cfg: LinkConfig,
    limit: u64,
    queue: VecDeque<Queued<T>>,
    queued_bytes: u64,
    flight: VecDeque<(u64, u64, T)>,
    last_deliver_ns: u64,
    /// The serializer is idle from this time on (end of the last service or a resume point).
    free_ns: u64,
    /// Bytes of the head datagram already served before a rate change.
    head_done: u64,
    trace_next: u64,
    trace_left: u64,
    head_fin: Option<Completion>,
    down: bool,
    ge_bad: bool,
    loss_rng: ChaCha8Rng,
    delay_rng: ChaCha8Rng,
    now_ns: u64,
    counters: LinkCounters,
}

impl<T> std::fmt::Debug for Link<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("config", &self.cfg)
            .field("queued_bytes", &self.queued_bytes)
            .field("in_flight", &self.flight.len())
            .field("down", &self.down)
            .field("counters", &self.counters)
            .finish()
    }
}

fn ns(t: Instant) -> u64 {
    t.as_micros().saturating_mul(1000)
}

fn dur_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl<T> Link<T> {
    /// A link in the up state with an empty queue. `seed` drives its loss and jitter
    /// (two independent ChaCha8 streams derived from it).
    pub fn new(config: LinkConfig, seed: u64) -> Link<T> {
        let limit = config.queue_limit();
        Link {
            cfg: config,
            limit,
            queue: VecDeque::new(),
            queued_bytes: 0,
            flight: VecDeque::new(),
            last_deliver_ns: 0,
            free_ns: 0,
            head_done: 0,
            trace_next: 0,
            trace_left: 0,
            head_fin: None,
            down: false,
            ge_bad: false,
            loss_rng: ChaCha8Rng::seed_from_u64(seed),
            delay_rng: ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15),
            now_ns: 0,
            counters: LinkCounters::default(),
        }
    }

    /// The current configuration (after any `set_*` changes).
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Running totals.
    pub fn counters(&self) -> LinkCounters {
        self.counters
    }

    /// Bytes (with overhead) waiting in or being served by the serializer.
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// Datagrams waiting in or being served by the serializer.
    pub fn queued_len(&self) -> usize {
        self.queue.len()
    }

    /// The droptail limit, bytes (with overhead).
    pub fn queue_limit(&self) -> u64 {
        self.limit
    }

    /// Datagrams past the serializer, not yet delivered.
    pub fn in_flight(&self) -> usize {
        self.flight.len()
    }

    /// Offers a datagram of `len` bytes at `now`. On `Err` the payload is dropped and the
    /// matching counter incremented.
    pub fn enqueue(&mut self, now: Instant, len: usize, payload: T) -> Result<(), DropReason> {
        self.advance(now);
        if self.down {
            self.counters.dropped_down += 1;
            return Err(DropReason::Down);
        }
        if self.draw_loss() {
            self.counters.dropped_loss += 1;
            return Err(DropReason::Loss);
        }
        let len = len as u64;
        let wire = len + u64::from(self.cfg.overhead_bytes);
        if self.queued_bytes + wire > self.limit {
            self.counters.dropped_queue += 1;
            return Err(DropReason::Queue);
        }
        self.queued_bytes += wire;
        self.counters.enqueued += 1;
        self.counters.bytes_enqueued += len;
        self.queue.push_back(Queued { payload, len, wire, arrival_ns: self.now_ns });
        if self.queue.len() == 1 {
            self.refresh_head();
        }
        Ok(())
    }

    /// The next datagram whose delivery time is at or before `now`: in FIFO order, or in
    /// delivery-time order with [`LinkConfig::jitter_reorder`].
    pub fn poll_delivery(&mut self, now: Instant) -> Option<T> {
        self.advance(now);
        match self.flight.front() {
            Some(&(at, _, _)) if at <= self.now_ns => {
                let (_, len, payload) = self.flight.pop_front()?;
                self.counters.delivered += 1;
                self.counters.bytes_delivered += len;
                Some(payload)
            }
            _ => None,
        }
    }

    /// When something next happens inside the link (a delivery, or the serializer finishing
    /// a datagram), rounded up to the microsecond. `None` when idle.
    pub fn next_event_time(&self) -> Option<Instant> {
        let a = self.flight.front().map(|f| f.0);
        let b = if self.down { None } else { self.head_fin.map(|c| c.fin_ns) };
        let t = match (a, b) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(Instant::from_micros(t.div_ceil(1000)))
    }

    /// The link fails at `now`: everything queued or propagating is dropped and counted in
    /// `dropped_down`, and datagrams offered while down are dropped too.
    pub fn set_down(&mut self, now: Instant) {
        self.advance(now);
        let now_ns = self.now_ns;
        let dropped_q = self.queue.len() as u64;
        self.queue.clear();
        self.queued_bytes = 0;
        self.head_done = 0;
        self.head_fin = None;
        let before = self.flight.len();
        self.flight.retain(|f| f.0 <= now_ns);
        let dropped_f = (before - self.flight.len()) as u64;
        self.counters.dropped_down += dropped_q + dropped_f;
        self.down = true;
    }

    /// The link recovers at `now`.
    pub fn set_up(&mut self, now: Instant) {
        self.advance(now);
        if self.down {
            self.down = false;
            self.free_ns = self.free_ns.max(self.now_ns);
            self.refresh_head();
        }
    }

    /// Changes the rate at `now`. A datagram being serialized keeps the bytes already
    /// served at a fixed or scheduled rate (under a trace it restarts). The queue limit
    /// does not change.
    pub fn set_rate(&mut self, now: Instant, rate: Rate) {
        self.advance(now);
        if !self.down
            && let Some(head) = self.queue.front()
        {
            let start = head.arrival_ns.max(self.free_ns);
            if start < self.now_ns {
                let served = self.served_bytes(start, self.now_ns);
                self.head_done = (self.head_done + served).min(head.wire.saturating_sub(1));
                self.free_ns = self.now_ns;
            }
        }
        if matches!(rate, Rate::Trace { .. }) {
            self.trace_next = 0;
            self.trace_left = 0;
        }
        self.cfg.rate = rate;
        self.refresh_head();
    }

    /// Changes the base delay and jitter for datagrams leaving the serializer from `now` on
    /// (the ordering rule, FIFO or [`LinkConfig::jitter_reorder`], is kept).
    pub fn set_delay(&mut self, now: Instant, delay: Duration, jitter: Duration) {
        self.advance(now);
        self.cfg.delay = delay;
        self.cfg.jitter = jitter;
    }

    /// Changes the loss process for datagrams offered from `now` on.
    pub fn set_loss(&mut self, now: Instant, loss: Loss) {
        self.advance(now);
        self.cfg.loss = loss;
        self.ge_bad = false;
    }

    fn draw_loss(&mut self) -> bool {
        match self.cfg.loss {
            Loss::None => false,
            Loss::Bernoulli(p) => dist::bernoulli(&mut self.loss_rng, p),
            Loss::GilbertElliott { p, r, h, k } => {
                let lost = dist::bernoulli(&mut self.loss_rng, if self.ge_bad { h } else { k });
                let flip = dist::bernoulli(&mut self.loss_rng, if self.ge_bad { r } else { p });
                if flip {
                    self.ge_bad = !self.ge_bad;
                }
                lost
            }
        }
    }

    fn draw_delay_ns(&mut self) -> u64 {
        let base = dur_ns(self.cfg.delay);
        let jitter = self.cfg.jitter.as_secs_f64() * 1e9;
        if jitter <= 0.0 {
            return base;
        }
        let extra = match self.cfg.delay_dist {
            DelayDist::Normal => jitter * dist::standard_normal(&mut self.delay_rng),
            DelayDist::Pareto => {
                let a = PARETO_JITTER_SHAPE;
                dist::pareto(&mut self.delay_rng, a * jitter, a) - jitter * (a - 1.0)
            }
        };
        let d = base as f64 + extra;
        if d <= 0.0 { 0 } else { d as u64 }
    }

    /// Moves every datagram whose serialization ended by `now` into propagation.
    fn advance(&mut self, now: Instant) {
        self.now_ns = self.now_ns.max(ns(now));
        if self.down {
            return;
        }
        while let Some(c) = self.head_fin {
            if c.fin_ns > self.now_ns {
                break;
            }
            let Some(head) = self.queue.pop_front() else {
                self.head_fin = None;
                break;
            };
            self.queued_bytes -= head.wire;
            self.free_ns = c.fin_ns;
            self.head_done = 0;
            self.trace_next = c.trace_next;
            self.trace_left = c.trace_left;
            let d = self.draw_delay_ns();
            if self.cfg.jitter_reorder {
                // Independent delay: insert by delivery time (after equal times, so ties
                // keep their order).
                let at = c.fin_ns.saturating_add(d);
                let i = self.flight.partition_point(|f| f.0 <= at);
                self.flight.insert(i, (at, head.len, head.payload));
            } else {
                let at = c.fin_ns.saturating_add(d).max(self.last_deliver_ns);
                self.last_deliver_ns = at;
                self.flight.push_back((at, head.len, head.payload));
            }
            self.refresh_head();
        }
    }

    fn refresh_head(&mut self) {
        self.head_fin = match self.queue.front() {
            Some(h) => {
                let start = h.arrival_ns.max(self.free_ns);
                self.completion(start, h.wire.saturating_sub(self.head_done))
            }
            None => None,
        };
    }

    /// When a datagram needing `bytes` more of service, starting no earlier than
    /// `start_ns`, leaves the serializer.
    fn completion(&self, start_ns: u64, bytes: u64) -> Option<Completion> {
        let keep = |fin_ns| Completion {
            fin_ns,
            trace_next: self.trace_next,
            trace_left: self.trace_left,
        };
        match &self.cfg.rate {
            Rate::Unlimited => Some(keep(start_ns)),
            Rate::Fixed(bps) => fixed_finish(*bps, start_ns, bytes).map(keep),
            Rate::Schedule(steps) => schedule_finish(steps, start_ns, bytes).map(keep),
            Rate::Trace { trace, once } => {
                let mut need = bytes;
                if self.trace_left > 0 && self.trace_next > 0 {
                    let prev_ms = trace.time_ms(self.trace_next - 1, *once)?;
                    if prev_ms.saturating_mul(1_000_000) >= start_ns {
                        if need <= self.trace_left {
                            return Some(Completion {
                                fin_ns: prev_ms * 1_000_000,
                                trace_next: self.trace_next,
                                trace_left: self.trace_left - need,
                            });
                        }
                        need -= self.trace_left;
                    }
                }
                let first = trace.first_at_or_after(start_ns.div_ceil(1_000_000), *once)?;
                let mut k = first.max(self.trace_next);
                loop {
                    let t = trace.time_ms(k, *once)?;
                    if need <= OPPORTUNITY_BYTES {
                        return Some(Completion {
                            fin_ns: t.saturating_mul(1_000_000),
                            trace_next: k + 1,
                            trace_left: OPPORTUNITY_BYTES - need,
                        });
                    }
                    need -= OPPORTUNITY_BYTES;
                    k += 1;
                }
            }
        }
    }

    /// Bytes a fixed or scheduled rate serves in `[a, b)` (0 under a trace, unbounded when
    /// unlimited).
    fn served_bytes(&self, a: u64, b: u64) -> u64 {
        match &self.cfg.rate {
            Rate::Unlimited => u64::MAX,
            Rate::Fixed(bps) => ((*bps as u128 * (b - a) as u128) / 8_000_000_000) as u64,
            Rate::Schedule(steps) => {
                let mut total: u128 = 0;
                let mut t = a;
                while t < b {
                    let (bps, end) = schedule_segment(steps, t);
                    let e = end.min(b);
                    total += bps as u128 * (e - t) as u128;
                    t = e;
                }
                (total / 8_000_000_000) as u64
            }
            Rate::Trace { .. } => 0,
        }
    }
}

fn fixed_finish(bps: u64, start_ns: u64, bytes: u64) -> Option<u64> {
    if bps == 0 {
        return None;
    }
    let t = (bytes as u128 * 8_000_000_000).div_ceil(bps as u128);
    start_ns.checked_add(u64::try_from(t).ok()?)
}

/// The rate in effect at `t_ns` and when it ends.
fn schedule_segment(steps: &[RateStep], t_ns: u64) -> (u64, u64) {
    let idx = steps.partition_point(|s| dur_ns(s.at) <= t_ns).saturating_sub(1);
    let bps = steps.get(idx).map_or(0, |s| s.bps);
    let end =
        steps.iter().skip(idx + 1).map(|s| dur_ns(s.at)).find(|&at| at > t_ns).unwrap_or(u64::MAX);
    (bps, end)
}

fn schedule_finish(steps: &[RateStep], start_ns: u64, bytes: u64) -> Option<u64> {
    let mut need: u128 = bytes as u128 * 8_000_000_000; // bit·ns/s
    let mut t = start_ns;
    loop {
        let (bps, end) = schedule_segment(steps, t);
        if bps > 0 {
            let cap = if end == u64::MAX { u128::MAX } else { bps as u128 * (end - t) as u128 };
            if need <= cap {
                return t.checked_add(u64::try_from(need.div_ceil(bps as u128)).ok()?);
            }
            need -= cap;
        }
        if end == u64::MAX {
            return None;
        }
        t = end;
    }
}

#[cfg(test)]
mod tests;
