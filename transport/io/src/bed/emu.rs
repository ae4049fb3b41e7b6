//! The cable emulator: one thread moves IP packets between the two TUN ends of every
//! path through the scenario's links ([`braid_transport::netem::Link`], the same model as
//! the simulator and the UDP relay), applying the scenario's timed events on time.
//!
//! Packets are whole IP datagrams, so each link charges their length and no further
//! header bytes (`overhead_bytes` = 0: a UDP datagram of the built-in transport is
//! charged its IP and UDP headers, as in the relay).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use braid_transport::netem::LinkConfig;
use braid_transport::scenario::Scenario;
use braid_transport::time::Instant;

use super::tun::{read_packet, write_packet};
use crate::emulated::{Network, Packet};

/// Counters the emulator keeps, readable while it runs.
#[derive(Debug, Default)]
pub struct EmuCounters {
    /// Packets read from the TUN ends.
    pub packets_in: AtomicU64,
    /// Packets written to the far ends.
    pub packets_out: AtomicU64,
    /// Bytes written to the far ends.
    pub bytes_out: AtomicU64,
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
    let mut net = Network::new(&scenario, seed, link_config);
    let origin = std::time::Instant::now();
    let now = || Instant::from_duration(origin.elapsed());
    let mut buf = vec![0u8; 65_536];
    let mut pfds: Vec<libc::pollfd> = ends
        .iter()
        .flat_map(|(c, s)| [c.as_raw_fd(), s.as_raw_fd()])
        .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
        .collect();
    let emit = |pkt: &Packet| {
        let Some((c, s)) = ends.get(pkt.path) else { return };
        let to = if pkt.up { s } else { c };
        if write_packet(to, &pkt.bytes) {
            counters.packets_out.fetch_add(1, Ordering::Relaxed);
            counters.bytes_out.fetch_add(pkt.bytes.len() as u64, Ordering::Relaxed);
        }
    };
    while !stop.load(Ordering::Relaxed) {
        net.apply_due_events(now());
        let t = now();
        while let Some(pkt) = net.poll_delivery(t) {
            emit(&pkt);
        }
        // Sleep until a packet arrives, a delivery or an event is due (at most 50 ms, to
        // see `stop`).
        let t = now();
        let mut wake = t + Duration::from_millis(50);
        if let Some(n) = net.next_wake() {
            wake = wake.min(n);
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
                counters.packets_in.fetch_add(1, Ordering::Relaxed);
                if let Some(pkt) = net.send(now(), path, up, buf[..n].to_vec()) {
                    emit(&pkt);
                }
            }
        }
    }
}
