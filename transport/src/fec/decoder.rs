//! The receiving side of the streaming code: incremental Gaussian elimination.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use super::{LEN_PREFIX, Limits, MAX_ID, Repair, coefs, gf, source_symbol};

/// How many windows of ids the decoder keeps below the newest it has seen (known symbols
/// and equations): one for the window itself, one for reordering between a repair and the
/// source symbols sent after it.
pub const HISTORY: u64 = 2;

/// What the decoder saw and did, for reports. Every dropped input is counted here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Source symbols received (new ones).
    pub sources: u64,
    /// Repair symbols accepted.
    pub repairs: u64,
    /// Source symbols recovered from repair symbols.
    pub recovered: u64,
    /// Repair symbols that brought no new information (everything they cover was known or
    /// already spanned).
    pub redundant: u64,
    /// Inputs rejected as malformed: empty or oversized windows, ids out of range, payloads
    /// too long or too short, recovered symbols whose length prefix is impossible.
    pub invalid: u64,
    /// Inputs older than the decoder's window (their symbols are no longer kept).
    pub stale: u64,
    /// Equations dropped to stay within `max_rows` or because they covered a symbol that
    /// left the window unknown.
    pub evicted: u64,
}

/// One equation `Σ coefs[i] · symbol[first + i] = payload`.
pub(super) struct Row {
    first: u64,
    pub(super) coefs: Vec<u8>,
    pub(super) payload: Vec<u8>,
    /// The column whose coefficient is 1 and is 0 in every other row.
    pivot: u64,
}

impl Row {
    fn end(&self) -> u64 {
        self.first + self.coefs.len() as u64
    }

    fn coef(&self, id: u64) -> u8 {
        if id < self.first || id >= self.end() { 0 } else { self.coefs[(id - self.first) as usize] }
    }

    /// `self += c · other` (extending the column range and the payload as needed).
    fn axpy(&mut self, c: u8, other: &Row) {
        if c == 0 || other.coefs.is_empty() {
            return;
        }
        let first = self.first.min(other.first);
        let end = self.end().max(other.end());
        if first != self.first || end != self.end() {
            let mut coefs = vec![0u8; (end - first) as usize];
            let off = (self.first - first) as usize;
            coefs[off..off + self.coefs.len()].copy_from_slice(&self.coefs);
            self.coefs = coefs;
            self.first = first;
        }
        let off = (other.first - self.first) as usize;
        gf::mul_add(&mut self.coefs[off..off + other.coefs.len()], c, &other.coefs);
        if self.payload.len() < other.payload.len() {
            self.payload.resize(other.payload.len(), 0);
        }
        gf::mul_add(&mut self.payload, c, &other.payload);
    }

    /// Removes the known symbol `id` (`symbol` zero-padded) from the equation.
    fn substitute(&mut self, id: u64, symbol: &[u8]) {
        let c = self.coef(id);
        if c == 0 {
            return;
        }
        if self.payload.len() < symbol.len() {
            self.payload.resize(symbol.len(), 0);
        }
        gf::mul_add(&mut self.payload, c, symbol);
        self.coefs[(id - self.first) as usize] = 0;
    }

    /// Drops zero coefficients at both ends.
    fn trim(&mut self) {
        let lead = self.coefs.iter().take_while(|&&c| c == 0).count();
        if lead == self.coefs.len() {
            self.coefs.clear();
            return;
        }
        self.coefs.drain(..lead);
        self.first += lead as u64;
        while self.coefs.last() == Some(&0) {
            self.coefs.pop();
        }
    }

    fn nonzero(&self) -> usize {
        self.coefs.iter().filter(|&&c| c != 0).count()
    }
}

/// The sliding-window decoder.
pub struct Decoder {
    limits: Limits,
    /// Source symbols held (received or recovered), with their length prefix, id ≥ floor.
    pub(super) known: BTreeMap<u64, Bytes>,
    pub(super) rows: Vec<Row>,
    recovered: VecDeque<(u64, Bytes)>,
    next_release: u64,
    floor: u64,
    stats: DecoderStats,
}

impl Decoder {
    /// A decoder bounded by `limits`.
    pub fn new(limits: Limits) -> Decoder {
        Decoder {
            limits: limits.clamped(),
            known: BTreeMap::new(),
            rows: Vec::new(),
            recovered: VecDeque::new(),
            next_release: 0,
            floor: 0,
            stats: DecoderStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    /// Undecoded equations held.
    pub fn pending_rows(&self) -> usize {
        self.rows.len()
    }

    /// Whether source symbol `id` is held.
    pub fn has(&self, id: u64) -> bool {
        self.known.contains_key(&id)
    }

    /// A source symbol `id` with `payload` arrived. Returns whether it was new.
    pub fn receive_source(&mut self, id: u64, payload: &[u8]) -> bool {
        if id > MAX_ID || payload.len() > self.limits.max_symbol {
            self.stats.invalid += 1;
            return false;
        }
        if id < self.floor {
            self.stats.stale += 1;
            return false;
        }
        if self.known.contains_key(&id) {
            return false;
        }
        let Some(symbol) = source_symbol(payload) else {
            self.stats.invalid += 1;
            return false;
        };
        self.stats.sources += 1;
        self.advance_to(id);
        self.learn(id, Bytes::from(symbol));
        self.collect_decoded();
        true
    }

    /// A repair symbol arrived. Returns whether it was accepted (see the counters if not).
    pub fn receive_repair(&mut self, r: &Repair) -> bool {
        let max_len = self.limits.max_symbol + LEN_PREFIX;
        if r.count == 0
            || r.count > self.limits.max_window
            || r.first > MAX_ID
            || r.first + u64::from(r.count) > MAX_ID
            || r.payload.len() < LEN_PREFIX
            || r.payload.len() > max_len
        {
            self.stats.invalid += 1;
            return false;
        }
        let last = r.first + u64::from(r.count) - 1;
        self.advance_to(last);
        if r.first < self.floor {
            self.stats.stale += 1;
            return false;
        }
        self.stats.repairs += 1;
        let mut row = Row {
            first: r.first,
            coefs: vec![0u8; r.count as usize],
            payload: r.payload.to_vec(),
            pivot: 0,
        };
        coefs::generate(r.seed, &mut row.coefs);
        for (&id, sym) in self.known.range(r.first..=last) {
            row.substitute(id, sym);
        }
        if !self.insert(row) {
            self.stats.redundant += 1;
        }
        self.collect_decoded();
        true
    }

    /// The next recovered source payload (in the order recovered; ascending within one
    /// arrival).
    pub fn poll_recovered(&mut self) -> Option<(u64, Bytes)> {
        self.recovered.pop_front()
    }

    /// The next source payload in id order, as soon as it is held (received or recovered).
    pub fn pop_in_order(&mut self) -> Option<(u64, Bytes)> {
        let sym = self.known.get(&self.next_release)?;
        let out = (self.next_release, sym.slice(LEN_PREFIX..));
        self.next_release += 1;
        Some(out)
    }

    /// Gives up on every source symbol below `id` (their deadline passed): equations that
    /// still need one of them are dropped, and in-order release skips to `id`.
    pub fn abandon_below(&mut self, id: u64) {
        self.next_release = self.next_release.max(id);
        if id > self.floor {
            self.floor = id.min(MAX_ID);
            self.prune();
        }
    }

    /// Moves the floor so that `id` fits in [`HISTORY`] windows of `max_window` symbols:
    /// a repair over a full window, overtaken on the way by up to `max_window` newer
    /// source symbols (sent on a faster path, or ahead of a queue), still finds its
    /// window above the floor.
    fn advance_to(&mut self, id: u64) {
        let keep = u64::from(self.limits.max_window) * HISTORY;
        let floor = (id + 1).saturating_sub(keep);
        if floor > self.floor {
            self.floor = floor;
            self.prune();
        }
    }

    fn prune(&mut self) {
        let floor = self.floor;
        self.known = self.known.split_off(&floor);
        let before = self.rows.len();
        self.rows.retain(|r| r.first >= floor);
        self.stats.evicted += (before - self.rows.len()) as u64;
        self.next_release = self.next_release.max(floor);
    }

    /// Adds `sym` as known and removes it from every equation.
    fn learn(&mut self, id: u64, sym: Bytes) {
        if let Some(i) = self.rows.iter().position(|r| r.pivot == id) {
            let mut row = self.rows.swap_remove(i);
            row.substitute(id, &sym);
            for r in &mut self.rows {
                r.substitute(id, &sym);
            }
            self.known.insert(id, sym);
            self.insert(row);
        } else {
            for r in &mut self.rows {
                r.substitute(id, &sym);
            }
            self.known.insert(id, sym);
        }
    }

    /// Reduces `row` against the equations and adds it; false when it reduced to nothing.
    fn insert(&mut self, mut row: Row) -> bool {
        for e in &self.rows {
            let c = row.coef(e.pivot);
            row.axpy(c, e);
        }
        row.trim();
        if row.coefs.is_empty() {
            return false;
        }
        let (pivot, c) = (row.first, row.coefs[0]);
        if let Some(ic) = gf::inv(c) {
            gf::scale(&mut row.coefs, ic);
            gf::scale(&mut row.payload, ic);
        }
        row.pivot = pivot;
        for e in &mut self.rows {
            let c = e.coef(pivot);
            e.axpy(c, &row);
            e.trim();
        }
        if self.rows.len() >= self.limits.max_rows {
            // The oldest equation goes: its symbols are the nearest to their deadline.
            if let Some(i) = (0..self.rows.len()).min_by_key(|&i| self.rows[i].first) {
                self.rows.swap_remove(i);
                self.stats.evicted += 1;
            }
        }
        self.rows.push(row);
        true
    }

    /// Moves every equation left with a single unknown into the known symbols.
    fn collect_decoded(&mut self) {
        let mut i = 0;
        let mut found = Vec::new();
        while i < self.rows.len() {
            if self.rows[i].nonzero() == 1 {
                let row = self.rows.swap_remove(i);
                found.push((row.pivot, row.payload));
            } else {
                i += 1;
            }
        }
        found.sort_by_key(|f| f.0);
        for (id, mut sym) in found {
            let len = if sym.len() >= LEN_PREFIX {
                usize::from(u16::from_be_bytes([sym[0], sym[1]]))
            } else {
                usize::MAX
            };
            if len > self.limits.max_symbol || LEN_PREFIX + len > sym.len() {
                self.stats.invalid += 1;
                continue;
            }
            sym.truncate(LEN_PREFIX + len);
            let sym = Bytes::from(sym);
            self.stats.recovered += 1;
            self.recovered.push_back((id, sym.slice(LEN_PREFIX..)));
            // Reduced form: no other equation mentions the pivot, nothing to substitute.
            self.known.insert(id, sym);
        }
    }
}
