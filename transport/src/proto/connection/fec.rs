//! The streaming code in the connection (S-EDPF-τ; [`crate::fec`]), on when
//! [`super::Config::fec`] is set.
//!
//! Sender: every data packet's DATA frames are one source symbol, named by a FEC_SOURCE
//! frame at the packet's end. A CODED packet over the encoder's window is due τ source
//! symbols after the last one when there is spare capacity (no data waits to be sent), or,
//! while data waits, once the losses expected among the symbols sent since the last one
//! (the sum of their paths' measured loss rates) reach one half: the code then costs about
//! twice the measured loss rate and nothing without loss (the paper codes into spare
//! capacity; ALGORITHMS.md, Coding). It goes on the usable path with the highest measured
//! loss rate whose window and pacing let it send now, else the next lossiest (S-EDPF
//! paper, Theorem 4 \[source\]); the rate is estimated as (lost + 1) / (sent + 2), so an
//! unmeasured path is tried. While the send stream is idle and the window holds
//! unacknowledged symbols, extra CODED packets go out while the CODED packets in flight
//! are fewer than the losses expected among those symbols (aggregate loss rate ×
//! unacknowledged symbols, rounded up).
//!
//! The data of a lost packet is held back for the code while the CODED packets that
//! covered it when it was declared lost are in flight and not overdue (ACK expected by
//! sent + srtt + 4·rttvar + max ACK delay), and only as many lost symbols as those
//! packets can repair (one each; if none covers it, up to four more are sent at once): if
//! the receiver recovers the symbol it says so with FEC_ACK (sent with its ACKs, so it
//! arrives no later than the ACK of the CODED packet), and the data is acknowledged instead
//! of re-sent. A symbol the code will not repair is sent again as it was (same DATA frames,
//! same FEC_SOURCE id), so the receiver's decoder learns it and later CODED packets that
//! cover it stay useful. So the sender retransmits only what coding could not repair, and
//! no later than a CODED packet's round trip.
//!
//! Receiver: received source symbols and CODED frames feed the decoder; recovered DATA
//! frames go to the reassembly buffer as if received, and their ids are reported in the
//! next FEC_ACK (the ACK of the packet that completed them is sent at once).
//!
//! ACKs slide the encoder's window; symbols whose data was settled otherwise (acknowledged
//! through a retransmission, or abandoned at its deadline) leave it from its start.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use super::Connection;
use super::packetize::{Builder, Transmit};
use crate::fec::{Decoder, Encoder, Limits};
use crate::path::PathId;
use crate::proto::frame::{Frame, MAX_FEC_ACK_RANGES};
use crate::proto::recovery::SentPacket;
use crate::proto::wire::Reader;
use crate::sched::PathView;
use crate::time::Instant;

/// Room a protected data packet leaves free: its FEC_SOURCE frame and, since the CODED
/// packet carrying its symbol needs its header on top of the symbol, the CODED header.
const FEC_RESERVE: usize = 24;

/// The streaming code's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FecConfig {
    /// τ: data packets per CODED packet.
    pub tau: u32,
    /// The code's bounds (the symbol limit is raised to the datagram size).
    pub limits: Limits,
}

impl FecConfig {
    /// One CODED packet every `tau` (at least 1) data packets, default bounds.
    pub fn new(tau: u32) -> FecConfig {
        FecConfig { tau: tau.max(1), limits: Limits::default() }
    }
}

/// What the streaming code did on one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FecStats {
    /// CODED packets sent.
    pub coded_packets: u64,
    /// CODED frame bytes sent (the redundancy the code costs).
    pub coded_bytes: u64,
    /// Of those, the extra ones sent while the stream was idle.
    pub idle_coded_packets: u64,
    /// Lost data packets the peer recovered, so nothing was re-sent for them.
    pub repaired_at_peer: u64,
    /// Source packets this side recovered from CODED frames.
    pub recovered: u64,
    /// CODED frame bytes received (the peer's redundancy, as seen here).
    pub coded_bytes_received: u64,
    /// CODED frames and recovered symbols dropped as malformed or stale.
    pub dropped: u64,
}

/// Lost data held back for the code.
struct Deferred {
    /// The DATA frames of the lost symbol.
    frames: Vec<(u64, Range<u64>)>,
    /// The latest time its repair is waited for: the ACK deadline of the last CODED packet
    /// that covered it when it was declared lost, or of the CODED packet forced for it
    /// (`None` until that one is sent). CODED packets sent later extend nothing.
    until: Option<Instant>,
}

/// CODED packets forced at once for lost data at most; further losses are re-sent.
const MAX_FORCED: usize = 4;

/// While data waits to be sent, a CODED packet takes capacity from it: then one is due
/// (τ source symbols after the last) only once this many losses are expected among the
/// symbols sent since the last, so the code's rate is twice the measured loss rate.
const LOSSES_PER_REPAIR: f64 = 0.5;

/// A path's loss rate by Laplace's rule of succession, (lost + 1) / (sent + 2): a path that
/// carried nothing yet counts as lossy until measured.
fn loss_rate(p: &super::paths::Path) -> f64 {
    (p.counters.packets_lost() as f64 + 1.0) / (p.counters.packets_sent() as f64 + 2.0)
}

/// Per-connection state of the code.
pub(super) struct FecState {
    enc: Encoder,
    dec: Decoder,
    /// The DATA frames each source symbol still in the encoder's window carried.
    sources: BTreeMap<u64, Vec<(u64, Range<u64>)>>,
    /// CODED packets in flight, by (path, packet number): the last source id they cover
    /// and when their ACK is expected at the latest (sent + srtt + 4·rttvar + max ACK
    /// delay of their path); held-back data waits for them no longer than that.
    coded_in_flight: BTreeMap<(PathId, u64), (u64, Instant)>,
    /// Lost data held back for the CODED packets in flight that cover it.
    deferred: BTreeMap<u64, Deferred>,
    /// Lost symbols the code will not repair, to be sent again as they were (the same
    /// DATA frames under the same FEC_SOURCE id), oldest first.
    resend: BTreeSet<u64>,
    /// CODED packets that must go out now (lost data is waiting for them).
    force: usize,
    /// The losses expected among the source symbols sent since the last CODED packet: the
    /// sum of the measured loss rates of the paths they went on.
    expected_losses: f64,
    /// Recovered source ids not yet reported to the peer, ascending.
    ack_pending: Vec<u64>,
    stats: FecStats,
    dropped_base: u64,
}

impl FecState {
    pub(super) fn new(cfg: FecConfig, max_datagram: usize) -> FecState {
        let limits = Limits { max_symbol: cfg.limits.max_symbol.max(max_datagram), ..cfg.limits };
        FecState {
            enc: Encoder::new(cfg.tau, limits),
            dec: Decoder::new(limits),
            sources: BTreeMap::new(),
            coded_in_flight: BTreeMap::new(),
            deferred: BTreeMap::new(),
            resend: BTreeSet::new(),
            force: 0,
            expected_losses: 0.0,
            ack_pending: Vec::new(),
            stats: FecStats::default(),
            dropped_base: 0,
        }
    }

    /// CODED packets in flight.
    pub(super) fn coded_in_flight_count(&self) -> usize {
        self.coded_in_flight.len()
    }

    /// Source symbols in the encoder's window not yet acknowledged.
    pub(super) fn unacked_symbols(&self) -> usize {
        self.enc.unacked()
    }

    /// The next [`Connection::poll_coded`] sends a CODED packet whatever τ says.
    pub(super) fn force_repair(&mut self) {
        self.force = (self.force + 1).min(MAX_FORCED);
    }

    pub(super) fn stats(&self) -> FecStats {
        let d = self.dec.stats();
        FecStats {
            dropped: self.dropped_base + d.invalid + d.stale,
            recovered: d.recovered,
            ..self.stats
        }
    }

    /// The window lost its settled start; the sources map follows it.
    fn prune(&mut self) {
        match self.enc.window() {
            Some((first, _)) => {
                self.sources = self.sources.split_off(&first);
            }
            None => self.sources.clear(),
        }
    }

    /// Which held-back symbols the CODED packets in flight (not overdue) and those about to
    /// be forced can repair, one repair per unknown symbol: the receiver recovers the lost
    /// symbols of a window only when it holds as many repairs covering them as there are
    /// unknowns. A CODED packet covers every symbol of the window up to its last, and the
    /// window starts at or before every unknown symbol, so the sets are nested and a
    /// greedy match from the newest unknown down is a largest one. Returns the held-back
    /// ids left without a repair (the oldest).
    fn unrepairable(&self, now: Instant) -> Vec<u64> {
        if self.deferred.is_empty() {
            return Vec::new();
        }
        let mut lasts: Vec<u64> = self
            .coded_in_flight
            .values()
            .filter(|&&(_, by)| by > now)
            .map(|&(last, _)| last)
            .chain(std::iter::repeat_n(u64::MAX, self.force))
            .collect();
        lasts.sort_unstable_by(|a, b| b.cmp(a));
        let mut unknown: Vec<u64> = self.deferred.keys().copied().collect();
        unknown.sort_unstable_by(|a, b| b.cmp(a));
        let (mut covering, mut matched) = (0usize, 0usize);
        let mut left = Vec::new();
        for id in unknown {
            while covering < lasts.len() && lasts[covering] >= id {
                covering += 1;
            }
            if covering > matched {
                matched += 1;
            } else {
                left.push(id);
            }
        }
        left
    }
}

impl Connection {
    /// The code's counters (`None` when it is off).
    pub fn fec_stats(&self) -> Option<FecStats> {
        self.fec.as_ref().map(|f| f.stats())
    }

    /// Before DATA goes into `b`: keeps room for FEC_SOURCE and the CODED header. Returns
    /// where the DATA frames will start.
    pub(super) fn fec_reserve(&mut self, b: &mut Builder, buf: &[u8]) -> usize {
        if self.fec.is_some() {
            b.limit = b.limit.saturating_sub(FEC_RESERVE);
        }
        buf.len()
    }

    /// After DATA went into `b` from `start`: the DATA frames become a source symbol.
    pub(super) fn fec_mark_source(&mut self, b: &mut Builder, buf: &mut Vec<u8>, start: usize) {
        let rate = self.paths.get(&b.path).map_or(0.0, loss_rate);
        let Some(fec) = self.fec.as_mut() else { return };
        b.limit = self.config.max_datagram_size;
        // FEC_SOURCE is at most 9 bytes (type and a varint id); the reserve always leaves
        // room, and without it the packet simply goes unprotected.
        if b.chunks.is_empty() || start > buf.len() || !b.fits(buf, 9) {
            return;
        }
        let Ok(id) = fec.enc.push(&buf[start..], None) else { return };
        if b.push(buf, &Frame::FecSource { id }) {
            b.frames.fec_source = Some(id);
            fec.sources.insert(id, b.frames.data.to_vec());
            fec.expected_losses += rate;
        }
    }

    /// A CODED packet when one is due (τ data packets since the last, or lost data waits
    /// for one), or with `idle` an extra one when nothing else is sent.
    pub(super) fn poll_coded(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
        idle: bool,
    ) -> Option<Transmit> {
        let fec = self.fec.as_mut()?;
        if idle {
            if self.send.has_data() || fec.enc.unacked() == 0 {
                return None;
            }
            let (sent, lost) = self.paths.values().fold((0u64, 0u64), |(s, l), p| {
                (s + p.counters.packets_sent(), l + p.counters.packets_lost())
            });
            let rate = if sent == 0 { 0.0 } else { lost as f64 / sent as f64 };
            // The losses expected among the unacknowledged symbols, less the CODED packets
            // in flight that cover them.
            let budget = (rate * fec.enc.unacked() as f64).ceil() as usize;
            if fec.coded_in_flight.len() >= budget {
                return None;
            }
        } else {
            // τ source symbols since the last CODED packet, and either spare capacity (no
            // data waits to be sent) or enough losses expected to be worth the capacity.
            let due = fec.enc.repair_due()
                && (!self.send.has_data() || fec.expected_losses >= LOSSES_PER_REPAIR);
            if !(fec.force > 0 || due) {
                return None;
            }
        }
        let size = self.config.max_datagram_size;
        // The lossiest usable path that can send now; ties go to the lower id.
        let mut order: Vec<(f64, PathId)> = views
            .iter()
            .filter(|v| v.usable && v.has_room(size))
            .filter(|v| v.next_send_time.is_none_or(|t| t <= now))
            // Laplace's estimate: a path that carried nothing yet counts as lossy until
            // measured, so every path's loss rate gets measured.
            .filter_map(|v| Some((loss_rate(self.paths.get(&v.id)?), v.id)))
            .collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let pid = order.first()?.1;
        let mut b = self.start(pid, buf)?;
        let fec = self.fec.as_mut()?;
        let Some(repair) = fec.enc.repair() else {
            fec.force = 0;
            self.unstart(&b);
            buf.clear();
            return None;
        };
        let last = repair.first + u64::from(repair.count) - 1;
        let (first, count) = (repair.first, u64::from(repair.count));
        let frame = Frame::Coded(repair);
        let len = frame.encoded_len();
        if !b.push(buf, &frame) {
            self.unstart(&b);
            buf.clear();
            return None;
        }
        fec.force = fec.force.saturating_sub(1);
        fec.expected_losses = 0.0;
        fec.stats.coded_packets += 1;
        fec.stats.coded_bytes += len as u64;
        if idle {
            fec.stats.idle_coded_packets += 1;
        }
        self.emit(|_| crate::trace::TraceEvent::FecCodedSent { path: pid, first, count });
        let expect = self
            .paths
            .get(&pid)
            .map_or(now, |p| now + p.rtt.smoothed() + 4 * p.rtt.var() + self.config.max_ack_delay);
        let fec = self.fec.as_mut()?;
        fec.coded_in_flight.insert((pid, b.pn), (last, expect));
        // Held-back symbols still waiting for their first covering CODED packet wait for
        // this one (it covers the whole window).
        for d in fec.deferred.range_mut(..=last).map(|(_, d)| d) {
            if d.until.is_none() {
                d.until = Some(expect);
            }
        }
        b.frames.fec_coded = Some(last);
        self.add_acks(now, &mut b, buf, false, views);
        let t = self.finish(now, b, buf, true)?;
        self.note_redundant_sent(t.path, t.len as u64);
        Some(t)
    }

    /// Newly acknowledged packets of `pid`: their symbols leave the encoder's window,
    /// their CODED packets are settled.
    pub(super) fn fec_on_acked(&mut self, pid: PathId, acked: &[(u64, SentPacket)]) {
        let Some(fec) = self.fec.as_mut() else { return };
        for (pn, sp) in acked {
            if let Some(id) = sp.frames.fec_source {
                fec.enc.acknowledge(id);
                fec.deferred.remove(&id);
                fec.resend.remove(&id);
            }
            if sp.frames.fec_coded.is_some() {
                fec.coded_in_flight.remove(&(pid, *pn));
            }
        }
    }

    /// A packet of `pid` was declared lost: whether its data is held back for the code.
    pub(super) fn fec_defers(&mut self, pid: PathId, pn: u64, sp: &SentPacket) -> bool {
        let Some(fec) = self.fec.as_mut() else { return false };
        if sp.frames.fec_coded.is_some() {
            fec.coded_in_flight.remove(&(pid, pn));
        }
        let Some(id) = sp.frames.fec_source else { return false };
        if sp.frames.reinjected {
            // Its data was handed to the live paths already; nothing waits for the code.
            return false;
        }
        let in_window = fec.enc.window().is_some_and(|(f, n)| id >= f && id < f + u64::from(n));
        if !in_window {
            return false;
        }
        if sp.frames.data.is_empty() {
            return false;
        }
        let now = self.now;
        let until = fec
            .coded_in_flight
            .values()
            .filter(|&&(last, by)| last >= id && by > now)
            .map(|&(_, by)| by)
            .max();
        fec.deferred.insert(id, Deferred { frames: sp.frames.data.to_vec(), until });
        if fec.unrepairable(now).contains(&id) && fec.force < MAX_FORCED {
            // Not enough CODED packets in flight: one more goes out at once, and this
            // symbol waits for it.
            fec.force += 1;
            if let Some(d) = fec.deferred.get_mut(&id) {
                d.until = None;
            }
        }
        true
    }

    /// Gives up waiting for the code where it will not repair: held-back symbols whose
    /// CODED packets are settled or overdue without the peer reporting a recovery, and
    /// those beyond what the CODED packets in flight (and those about to be forced) can
    /// repair, are queued to be sent again as they were ([`Connection::poll_resend`]);
    /// symbols that left the encoder's window go back to the send stream.
    pub(super) fn fec_release(&mut self) {
        let now = self.now;
        let Some(fec) = self.fec.as_mut() else { return };
        if !fec.deferred.is_empty() {
            let front = fec.enc.window().map(|(f, _)| f);
            let mut out = Vec::new();
            let give_up: Vec<u64> = fec
                .deferred
                .iter()
                .filter(|(_, d)| d.until.is_some_and(|u| u <= now))
                .map(|(id, _)| *id)
                .chain(fec.unrepairable(now))
                .collect();
            for id in give_up {
                if fec.deferred.remove(&id).is_some() {
                    fec.resend.insert(id);
                }
            }
            if let Some(f) = front {
                let mut left = fec.deferred.split_off(&f);
                std::mem::swap(&mut left, &mut fec.deferred);
                out.extend(left.into_values().flat_map(|d| d.frames));
            } else {
                out.extend(std::mem::take(&mut fec.deferred).into_values().flat_map(|d| d.frames));
            }
            if !out.is_empty() {
                self.send.on_lost(&out);
            }
        }
        self.fec_slide();
    }

    /// A lost symbol the code will not repair, sent again as it was: the same DATA frames
    /// (copied from the send stream) under the same FEC_SOURCE id, so the peer's decoder
    /// learns that very symbol and the CODED packets that cover it stay useful. On the
    /// usable path with the lowest smoothed RTT that can send now. A symbol whose data
    /// cannot be copied as it was (part of it settled meanwhile) goes back to the send
    /// stream instead.
    pub(super) fn poll_resend(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
    ) -> Option<Transmit> {
        let size = self.config.max_datagram_size;
        let pid = views
            .iter()
            .filter(|v| v.usable && v.has_room(size))
            .filter(|v| v.next_send_time.is_none_or(|t| t <= now))
            .min_by_key(|v| (v.srtt, v.id))?
            .id;
        loop {
            let fec = self.fec.as_mut()?;
            let id = fec.resend.pop_first()?;
            let front = fec.enc.window().map_or(u64::MAX, |(f, _)| f);
            let Some(frames) = fec.sources.get(&id).filter(|_| id >= front).cloned() else {
                continue;
            };
            if frames.iter().all(|(m, r)| self.send.is_settled(*m, r.clone())) {
                continue;
            }
            let chunks: Option<Vec<_>> =
                frames.iter().map(|(m, r)| self.send.copy_of(*m, r.clone())).collect();
            let exact = chunks.as_ref().is_some_and(|c| {
                c.iter().zip(&frames).all(|(c, (m, r))| c.message_id == *m && c.range() == *r)
            });
            let (Some(chunks), true) = (chunks, exact) else {
                self.send.on_lost(&frames);
                continue;
            };
            let mut b = self.start(pid, buf)?;
            let mut ok = true;
            for c in &chunks {
                ok &= b.push(buf, &super::messages::data_frame(c));
            }
            ok = ok && b.push(buf, &Frame::FecSource { id });
            if !ok {
                self.unstart(&b);
                buf.clear();
                self.send.on_lost(&frames);
                continue;
            }
            for c in chunks {
                let n = c.data.len() as u64;
                b.data_bytes += n;
                b.retransmitted += n;
                b.chunks.push(c);
            }
            b.ack_eliciting = true;
            b.frames.data = frames.into();
            b.frames.fec_source = Some(id);
            return self.finish(now, b, buf, true);
        }
    }

    /// Symbols whose data is settled leave the encoder's window from its start.
    fn fec_slide(&mut self) {
        let Some(fec) = self.fec.as_mut() else { return };
        while let Some((first, _)) = fec.enc.window() {
            let settled = match fec.sources.get(&first) {
                Some(frames) => frames.iter().all(|(m, r)| self.send.is_settled(*m, r.clone())),
                None => true,
            };
            if !settled {
                break;
            }
            fec.enc.acknowledge(first);
            fec.deferred.remove(&first);
        }
        fec.prune();
    }

    /// A FEC_ACK arrived: the peer recovered these symbols, so their data is delivered.
    pub(super) fn on_fec_ack(&mut self, ranges: &[(u64, u64)]) {
        let Some(fec) = self.fec.as_mut() else { return };
        let mut acked = Vec::new();
        for &(lo, hi) in ranges.iter().filter(|r| r.0 <= r.1) {
            // Only ids this side holds are looked at: the ranges may be anything.
            let ids: Vec<u64> = fec.sources.range(lo..=hi).map(|(&id, _)| id).collect();
            for id in ids {
                fec.enc.acknowledge(id);
                fec.resend.remove(&id);
                if fec.deferred.remove(&id).is_some() {
                    fec.stats.repaired_at_peer += 1;
                }
                if let Some(frames) = fec.sources.remove(&id) {
                    acked.extend(frames);
                }
            }
        }
        for (m, r) in acked {
            self.send.on_acked(m, r);
        }
        self.fec_slide();
    }

    /// Receiver: the source symbol of a packet, if it names one (the DATA frames before its
    /// FEC_SOURCE, re-encoded: the sender encodes canonically).
    pub(super) fn fec_source_symbol(&self, frames: &[Frame]) -> Option<(u64, Vec<u8>)> {
        self.fec.as_ref()?;
        let mut sym = Vec::new();
        for f in frames {
            match f {
                Frame::Data(_) => f.encode(&mut sym),
                Frame::FecSource { id } => return Some((*id, sym)),
                _ => {}
            }
        }
        None
    }

    /// Receiver: a CODED frame arrived.
    pub(super) fn on_coded(&mut self, repair: &crate::fec::Repair) {
        if let Some(fec) = self.fec.as_mut() {
            fec.stats.coded_bytes_received += Frame::Coded(repair.clone()).encoded_len() as u64;
            fec.dec.receive_repair(repair);
        } else {
            // The code was not agreed (neither side's configuration, or not the peer's).
            self.close_on_error(
                crate::proto::PROTOCOL_VIOLATION,
                "a CODED frame without the streaming code agreed",
            );
        }
    }

    /// After a datagram of `pid` was handled: its source symbol goes to the decoder, what
    /// the decoder recovered goes to the reassembly buffer, held-back data is re-examined.
    pub(super) fn fec_after_datagram(&mut self, pid: PathId, source: Option<(u64, Vec<u8>)>) {
        let Some(fec) = self.fec.as_mut() else { return };
        if let Some((id, sym)) = source {
            fec.dec.receive_source(id, &sym);
        }
        let mut recovered = Vec::new();
        let mut symbols = 0u64;
        while let Some((id, sym)) = fec.dec.poll_recovered() {
            symbols += 1;
            let mut r = Reader::new(&sym);
            let mut frames = Vec::new();
            let mut ok = true;
            while !r.is_empty() {
                match Frame::decode(&mut r) {
                    Ok(Frame::Data(d)) => frames.push(d),
                    _ => {
                        ok = false;
                        break;
                    }
                }
            }
            if ok {
                if fec.ack_pending.len() < 4 * MAX_FEC_ACK_RANGES {
                    fec.ack_pending.push(id);
                }
                recovered.extend(frames);
            } else {
                fec.dropped_base += 1;
            }
        }
        if symbols > 0 {
            self.emit(|_| crate::trace::TraceEvent::FecRecovered { count: symbols });
        }
        if !recovered.is_empty() {
            for d in &recovered {
                match self.recv.on_data(d) {
                    crate::proto::assembly::Accept::OutOfWindow => self.dropped.out_of_window += 1,
                    crate::proto::assembly::Accept::Invalid => self.dropped.malformed += 1,
                    _ => {}
                }
            }
            if let Some(p) = self.paths.get_mut(&pid) {
                // The FEC_ACK rides on this ACK: send it now.
                p.ack_now();
            }
        }
        self.fec_release();
    }

    /// Adds the pending FEC_ACK (before the ACK frames of the packet).
    pub(super) fn add_fec_ack(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        let Some(fec) = self.fec.as_mut() else { return };
        if fec.ack_pending.is_empty() {
            return;
        }
        fec.ack_pending.sort_unstable();
        fec.ack_pending.dedup();
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        let mut used = 0;
        for &id in &fec.ack_pending {
            let n = ranges.len();
            match ranges.last_mut() {
                Some(r) if r.1 + 1 == id => r.1 = id,
                _ if n == MAX_FEC_ACK_RANGES => break,
                _ => ranges.push((id, id)),
            }
            used += 1;
        }
        if b.push(buf, &Frame::FecAck { ranges }) {
            fec.ack_pending.drain(..used);
        }
    }
}
