//! The sending side of the streaming code.

use std::collections::VecDeque;

use bytes::Bytes;

use super::{FecError, Limits, MAX_ID, Repair, coefs, gf, source_symbol};
use crate::Instant;

struct Source {
    id: u64,
    symbol: Bytes,
    deadline: Option<Instant>,
    acked: bool,
}

/// What the encoder did, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncoderStats {
    /// Source symbols added.
    pub sources: u64,
    /// Repair symbols produced.
    pub repairs: u64,
    /// Repair payload bytes produced.
    pub repair_bytes: u64,
    /// Source symbols that left the window unacknowledged: past their deadline, or pushed
    /// out by a full window.
    pub expired: u64,
}

/// The systematic sliding-window encoder: one repair symbol every `tau` source symbols over
/// the window [oldest unacknowledged, newest].
pub struct Encoder {
    tau: u32,
    limits: Limits,
    window: VecDeque<Source>,
    next_id: u64,
    since_repair: u32,
    next_seed: u16,
    stats: EncoderStats,
}

impl Encoder {
    /// An encoder adding a repair symbol every `tau` (at least 1) source symbols.
    pub fn new(tau: u32, limits: Limits) -> Encoder {
        Encoder {
            tau: tau.max(1),
            limits: limits.clamped(),
            window: VecDeque::new(),
            next_id: 0,
            since_repair: 0,
            next_seed: 0,
            stats: EncoderStats::default(),
        }
    }

    /// τ: source symbols per repair symbol.
    pub fn tau(&self) -> u32 {
        self.tau
    }

    /// Adds a source payload; returns its id. `deadline` is when it stops being useful.
    pub fn push(&mut self, payload: &[u8], deadline: Option<Instant>) -> Result<u64, FecError> {
        if payload.len() > self.limits.max_symbol {
            return Err(FecError::TooLarge { len: payload.len(), max: self.limits.max_symbol });
        }
        if self.next_id > MAX_ID {
            return Err(FecError::IdsExhausted);
        }
        let symbol = source_symbol(payload)
            .ok_or(FecError::TooLarge { len: payload.len(), max: usize::from(u16::MAX) })?;
        let id = self.next_id;
        self.next_id += 1;
        if self.window.len() >= self.limits.max_window as usize
            && let Some(old) = self.window.pop_front()
            && !old.acked
        {
            self.stats.expired += 1;
        }
        self.window.push_back(Source { id, symbol: Bytes::from(symbol), deadline, acked: false });
        self.since_repair = self.since_repair.saturating_add(1);
        self.stats.sources += 1;
        self.slide();
        Ok(id)
    }

    /// The peer holds source symbol `id` (received or recovered).
    pub fn acknowledge(&mut self, id: u64) {
        let Some(front) = self.window.front() else { return };
        if id < front.id {
            return;
        }
        if let Some(s) = self.window.get_mut((id - front.id) as usize) {
            s.acked = true;
        }
        self.slide();
    }

    /// The peer holds every source symbol below `id`.
    pub fn acknowledge_below(&mut self, id: u64) {
        while self.window.front().is_some_and(|s| s.id < id) {
            self.window.pop_front();
        }
        self.slide();
    }

    /// Symbols whose deadline is before `now` leave the window (from its start: deadlines
    /// grow with the id).
    pub fn expire(&mut self, now: Instant) {
        while let Some(s) = self.window.front() {
            if s.acked {
                self.window.pop_front();
            } else if s.deadline.is_some_and(|d| d < now) {
                self.window.pop_front();
                self.stats.expired += 1;
            } else {
                break;
            }
        }
    }

    fn slide(&mut self) {
        while self.window.front().is_some_and(|s| s.acked) {
            self.window.pop_front();
        }
    }

    /// Unacknowledged source symbols in the window.
    pub fn unacked(&self) -> usize {
        self.window.iter().filter(|s| !s.acked).count()
    }

    /// The window as `(first id, count)`; `None` when empty.
    pub fn window(&self) -> Option<(u64, u32)> {
        let f = self.window.front()?;
        Some((f.id, self.window.len() as u32))
    }

    /// Whether τ source symbols were added since the last repair and the window holds
    /// unacknowledged data.
    pub fn repair_due(&self) -> bool {
        self.since_repair >= self.tau && self.unacked() > 0
    }

    /// A repair symbol over the current window (`None` when it holds nothing unacknowledged).
    /// Resets the count towards the next due repair.
    pub fn repair(&mut self) -> Option<Repair> {
        if self.unacked() == 0 {
            return None;
        }
        let first = self.window.front()?.id;
        let count = self.window.len() as u32;
        let seed = self.next_seed;
        self.next_seed = self.next_seed.wrapping_add(1);
        let mut w = vec![0u8; count as usize];
        coefs::generate(seed, &mut w);
        let len = self.window.iter().map(|s| s.symbol.len()).max().unwrap_or(0);
        let mut payload = vec![0u8; len];
        // Acknowledged symbols inside the window stay in the sum: the window is contiguous
        // on the wire, and the receiver, which holds them, subtracts them.
        for (s, &c) in self.window.iter().zip(&w) {
            gf::mul_add(&mut payload, c, &s.symbol);
        }
        self.since_repair = 0;
        self.stats.repairs += 1;
        self.stats.repair_bytes += len as u64;
        Some(Repair { first, count, seed, payload: Bytes::from(payload) })
    }

    /// The counters.
    pub fn stats(&self) -> EncoderStats {
        self.stats
    }
}
