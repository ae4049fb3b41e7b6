//! The cable emulator: one thread moves IP packets between the two TUN ends of every
//! path through the scenario's links ([`braid_netem::Link`], the same model as
//! the simulator and the UDP relay), applying the scenario's timed events on time.
//!
//! Packets are whole IP datagrams, so each link charges their length and no further
//! header bytes (`overhead_bytes` = 0: a UDP datagram of the built-in transport is
//! charged its IP and UDP headers, as in the relay).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use braid_netem::LinkConfig;
use braid_netem::scenario::Scenario;
use braid_transport::time::Instant;

use super::gso::{self, VNET_HDR_LEN};
use super::tun::{read_packet, write_packet};
use crate::emulated::Network;

/// Packets that leave a link within this long of the first one due are written together
/// (consecutive TCP segments as one super-packet, [`gso::coalesce`]): at most this much
/// later than the link model says.
pub const BATCH: Duration = Duration::from_micros(500);

/// Counters the emulator keeps, readable while it runs.
#[derive(Debug, Default)]
pub struct EmuCounters {
    /// Packets read from the TUN ends.
    pub packets_in: AtomicU64,
    /// Packets written to the far ends.
    pub packets_out: AtomicU64,
    /// Bytes written to the far ends.
    pub bytes_out: AtomicU64,
    /// `read`s from the TUN ends (a TCP super-packet is one).
    pub reads: AtomicU64,
    /// `write`s to the TUN ends (a coalesced super-packet is one).
    pub writes: AtomicU64,
}

/// The per-path TUN ends: (client end, server end).
pub type Ends = Vec<(OwnedFd, OwnedFd)>;

/// Starts the emulator thread; it runs until `stop` is set.
pub fn start(
    scenario: &Scenario,
    ends: Ends,
    seed: u64,
    stop: Arc<AtomicBool>,
    counters: Arc<EmuCounters>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let scenario = scenario.clone();
    std::thread::Builder::new().name("bed-emulator".into()).spawn(move || {
        run(scenario, ends, seed, &stop, &counters);
    })
}

fn link_config(c: &LinkConfig) -> LinkConfig {
    LinkConfig { overhead_bytes: 0, ..c.clone() }
}

fn run(scenario: Scenario, ends: Ends, seed: u64, stop: &AtomicBool, counters: &EmuCounters) {
    // Wake-ups are the cable's delay: ask the kernel for 1 µs of timer slack instead of the
    // default 50 µs (prctl(2), PR_SET_TIMERSLACK). Failing to is harmless.
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    let mut net = Network::new(&scenario, seed, link_config);
    let origin = std::time::Instant::now();
    let now = || Instant::from_duration(origin.elapsed());
    let mut buf = vec![0u8; VNET_HDR_LEN + 65_536];
    let mut pfds: Vec<libc::pollfd> = ends
        .iter()
        .flat_map(|(c, s)| [c.as_raw_fd(), s.as_raw_fd()])
        .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
        .collect();
    // Packets due, per path and direction (index 2·path + up), written together.
    let mut due: Vec<Vec<Vec<u8>>> = vec![Vec::new(); ends.len() * 2];
    let mut segments = Vec::new();
    let batch = if super::offloads_enabled() { BATCH } else { Duration::ZERO };
    let emit = |k: usize, pkts: Vec<Vec<u8>>| {
        let Some((c, s)) = ends.get(k / 2) else { return };
        let to = if k % 2 == 1 { s } else { c };
        let n = pkts.len() as u64;
        let bytes: usize = pkts.iter().map(Vec::len).sum();
        let writes: Vec<Vec<u8>> = if batch.is_zero() {
            pkts.iter()
                .map(|p| {
                    let mut w = gso::plain_header(p).to_vec();
                    w.extend_from_slice(p);
                    w
                })
                .collect()
        } else {
            gso::coalesce(pkts)
        };
        for w in writes {
            counters.writes.fetch_add(1, Ordering::Relaxed);
            write_packet(to, &w);
        }
        counters.packets_out.fetch_add(n, Ordering::Relaxed);
        counters.bytes_out.fetch_add(bytes as u64, Ordering::Relaxed);
    };
    let mut first_due: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        net.apply_due_events(now());
        let t = now();
        // Deliveries wait up to BATCH after the first one due, so that several leave in
        // one write.
        if net.next_wake().is_some_and(|w| w <= t) && first_due.is_none() {
            first_due = Some(t);
        }
        if first_due.is_some_and(|f| t >= f + batch) {
            first_due = None;
            while let Some(pkt) = net.poll_delivery(t) {
                if let Some(q) = due.get_mut(pkt.path * 2 + usize::from(pkt.up)) {
                    q.push(pkt.bytes);
                }
            }
            for (k, q) in due.iter_mut().enumerate() {
                if !q.is_empty() {
                    emit(k, std::mem::take(q));
                }
            }
        }
        // Sleep until a packet arrives, a batch or an event is due (at most 50 ms, to
        // see `stop`).
        let t = now();
        let mut wake = t + Duration::from_millis(50);
        match first_due {
            Some(f) => wake = wake.min(f + batch),
            None => {
                if let Some(n) = net.next_wake() {
                    wake = wake.min(n);
                }
            }
        }
        let wait = if wake > t { wake - t } else { Duration::ZERO };
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
        };
        for p in &mut pfds {
            p.revents = 0;
        }
        // SAFETY: `pfds` is a valid array of pollfds for its length.
        let rc = unsafe {
            libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, &ts, std::ptr::null())
        };
        if rc <= 0 {
            continue;
        }
        for (k, p) in pfds.iter().enumerate() {
            if p.revents & libc::POLLIN == 0 {
                continue;
            }
            let (path, up) = (k / 2, k % 2 == 0);
            let Some((c, s)) = ends.get(path) else { continue };
            let from = if up { c } else { s };
            // A bounded batch per wake-up, so one busy end cannot starve the others.
            for _ in 0..64 {
                let Ok(Some(n)) = read_packet(from, &mut buf) else { break };
                counters.reads.fetch_add(1, Ordering::Relaxed);
                segments.clear();
                gso::split(&buf[..n], &mut segments);
                for seg in segments.drain(..) {
                    counters.packets_in.fetch_add(1, Ordering::Relaxed);
                    if let Some(pkt) = net.send(now(), path, up, seg) {
                        emit(path * 2 + usize::from(up), vec![pkt.bytes]);
                    }
                }
            }
        }
    }
}
