//! Minimum start-up delay and buffer sizes for a clip under a capacity curve: the proxy
//! paper's schedules (S_late, S_early) in the form of ALGORITHMS.md §7.
//!
//! Time is slotted (10 ms by default). Conventions, as in the smoothing literature
//! (Salehi, Zhang, Kurose, Towsley, "Supporting stored video", SIGMETRICS 1996):
//! - the server may send from t = 0; slot t's capacity `c_t` is what crosses the link in
//!   (t−1, t], so nothing has arrived at t = 0;
//! - the decoder consumes frame k at the **end** of its display interval, media time
//!   `dts_k + Δ` (Δ = one frame interval), rounded up to a slot. The playout vector
//!   `D_j` is the bytes consumed by media time j, and a playback started with delay w
//!   needs `D_{t−w}` bytes at the client by time t.
//!
//! With these conventions a clip sent at exactly its constant bit rate needs no start-up
//! delay (w* = 0) and almost no buffer, and halving the rate of a CBR clip of duration T
//! needs w* = T and a buffer of half the clip.

use crate::error::{MediaError, Result};

/// Default slot length.
pub const DEFAULT_SLOT_US: i64 = 10_000;

/// The cumulative consumption curve of a clip on a slot grid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlayoutCurve {
    /// Slot length in µs.
    pub slot_us: i64,
    /// `d[j]` = bytes consumed by the end of slot j (j = 0 ..= last).
    pub d: Vec<u64>,
}

impl PlayoutCurve {
    /// Builds the curve from `(dts_us, bytes)` per access unit in decode order and the
    /// frame interval. Each unit is consumed at the end of its interval, rounded up to a slot.
    pub fn from_units(
        units: &[(i64, u64)],
        frame_interval_us: i64,
        slot_us: i64,
    ) -> Result<PlayoutCurve> {
        if slot_us <= 0 || frame_interval_us <= 0 {
            return Err(MediaError::Mismatch("slot and frame interval must be positive".into()));
        }
        if units.is_empty() {
            return Err(MediaError::Mismatch("a schedule needs at least one frame".into()));
        }
        let needed: Vec<(usize, u64)> = units
            .iter()
            .map(|&(dts, bytes)| {
                let t = dts.max(0) + frame_interval_us;
                (((t + slot_us - 1) / slot_us) as usize, bytes)
            })
            .collect();
        let last = needed.iter().map(|&(j, _)| j).max().unwrap_or(0);
        let mut d = vec![0u64; last + 1];
        for &(j, bytes) in &needed {
            d[j] += bytes;
        }
        for j in 1..d.len() {
            d[j] += d[j - 1];
        }
        Ok(PlayoutCurve { slot_us, d })
    }

    /// `D_j`, with `D_j = 0` before the start and `D_N` after the end.
    pub fn at(&self, j: i64) -> u64 {
        if j < 0 { 0 } else { self.d.get(j as usize).copied().unwrap_or_else(|| self.total()) }
    }

    /// `D_N`: the clip's size.
    pub fn total(&self) -> u64 {
        self.d.last().copied().unwrap_or(0)
    }

    /// Index of the last slot (N).
    pub fn last_slot(&self) -> usize {
        self.d.len().saturating_sub(1)
    }
}

/// Link capacity per slot, bytes; slot t (1-based in the formulas) is `bytes[t-1]`.
/// Past its end the capacity repeats from the start (traces loop), unless empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Bytes per slot, one period.
    pub bytes: Vec<u64>,
}

impl Capacity {
    /// A constant rate in bit/s on a grid of `slot_us` slots. Fractional bytes carry over,
    /// so the long-run rate is exact.
    pub fn constant(rate_bps: f64, slot_us: i64, slots: usize) -> Capacity {
        let per_slot = rate_bps / 8.0 * slot_us as f64 / 1e6;
        let mut bytes = Vec::with_capacity(slots);
        let mut acc = 0.0f64;
        let mut given = 0u64;
        for _ in 0..slots {
            acc += per_slot;
            let total = acc.floor() as u64;
            bytes.push(total - given);
            given = total;
        }
        Capacity { bytes }
    }

    /// From delivery opportunities: `(time_us, bytes)` events, e.g. a mahimahi trace's
    /// 1500-byte opportunities, binned into slots over `[0, period_us)`.
    pub fn from_events(
        events: impl IntoIterator<Item = (i64, u64)>,
        period_us: i64,
        slot_us: i64,
    ) -> Capacity {
        let n = ((period_us + slot_us - 1) / slot_us).max(1) as usize;
        let mut bytes = vec![0u64; n];
        for (t, b) in events {
            // An opportunity at time t (µs) falls in the slot covering (t_prev, t]: 0-based
            // index ceil(t / slot) − 1.
            let slot = ((t.max(1) + slot_us - 1) / slot_us - 1).clamp(0, n as i64 - 1) as usize;
            bytes[slot] += b;
        }
        Capacity { bytes }
    }

    /// `c_t` for t ≥ 1.
    pub fn at(&self, t: usize) -> u64 {
        if t == 0 || self.bytes.is_empty() { 0 } else { self.bytes[(t - 1) % self.bytes.len()] }
    }

    /// Mean rate in bit/s.
    pub fn mean_bps(&self, slot_us: i64) -> f64 {
        if self.bytes.is_empty() {
            return 0.0;
        }
        self.bytes.iter().sum::<u64>() as f64 * 8.0
            / (self.bytes.len() as f64 * slot_us as f64 / 1e6)
    }
}

/// The result of a schedule computation.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Minimum start-up delay, in slots.
    pub w_slots: usize,
    /// Minimum start-up delay, seconds.
    pub startup_delay_s: f64,
    /// Minimum client buffer at that delay, bytes (x*).
    pub client_buffer_bytes: u64,
    /// Proxy buffer (y), when a proxy is modelled.
    pub proxy_buffer_bytes: Option<u64>,
    /// Earliest possible arrival curve at the client, per slot from 0.
    pub earliest: Vec<u64>,
}

/// Gives up when the capacity cannot deliver the clip within this many slots.
const MAX_SLOTS: usize = 50_000_000;

/// Cumulative arrival curve `min(D_N, Σ c)` until everything has arrived.
fn cumulative(cap: &Capacity, total: u64) -> Result<Vec<u64>> {
    if cap.bytes.iter().all(|&b| b == 0) {
        return Err(MediaError::Mismatch("the capacity is zero: the clip never arrives".into()));
    }
    let mut e = vec![0u64];
    let mut acc = 0u64;
    let mut t = 0usize;
    while acc < total {
        t += 1;
        if t > MAX_SLOTS {
            return Err(MediaError::Mismatch("the clip would take too long to arrive".into()));
        }
        acc = (acc + cap.at(t)).min(total);
        e.push(acc);
    }
    Ok(e)
}

/// Smallest w such that `e[t] ≥ D_{t−w}` for all t (e beyond its end stays at D_N).
fn min_delay(d: &PlayoutCurve, e: &[u64]) -> usize {
    let mut w = 0usize;
    let mut t = 0usize; // earliest slot with e[t] ≥ D_j, non-decreasing in j
    for j in 0..d.d.len() {
        let need = d.d[j];
        while t < e.len() && e[t] < need {
            t += 1;
        }
        // `e` ends once everything arrived, so t < e.len() always holds here.
        w = w.max(t.saturating_sub(j));
    }
    w
}

/// The latest schedule for delay w under capacity `c` (the slot t capacity is `c(t)`),
/// optionally bounded above by what has reached a proxy (`upper`). Returns `L_t` for
/// t = 0 ..= N + w.
fn latest(d: &PlayoutCurve, w: usize, c: impl Fn(usize) -> u64, upper: Option<&[u64]>) -> Vec<u64> {
    let end = d.last_slot() + w;
    let mut l = vec![0u64; end + 1];
    l[end] = d.total();
    for t in (0..end).rev() {
        let need = d.at(t as i64 - w as i64);
        let mut v = need.max(l[t + 1].saturating_sub(c(t + 1)));
        if let Some(a) = upper {
            let cap = a.get(t).copied().unwrap_or(d.total());
            v = v.min(cap).max(need);
        }
        l[t] = v;
    }
    l
}

/// End to end: the server has the whole clip at t = 0 and sends over `cap`.
pub fn end_to_end(d: &PlayoutCurve, cap: &Capacity) -> Result<Schedule> {
    let e = cumulative(cap, d.total())?;
    let w = min_delay(d, &e);
    let l = latest(d, w, |t| cap.at(t), None);
    let x = (0..l.len()).map(|t| l[t].saturating_sub(d.at(t as i64 - w as i64))).max().unwrap_or(0);
    Ok(Schedule {
        w_slots: w,
        startup_delay_s: w as f64 * d.slot_us as f64 / 1e6,
        client_buffer_bytes: x,
        proxy_buffer_bytes: None,
        earliest: e,
    })
}

/// With a proxy: server →[`upstream`]→ proxy →[`wireless`]→ client.
pub fn with_proxy(d: &PlayoutCurve, upstream: &Capacity, wireless: &Capacity) -> Result<Schedule> {
    let total = d.total();
    let a = cumulative(upstream, total)?;
    if wireless.bytes.iter().all(|&b| b == 0) {
        return Err(MediaError::Mismatch("the proxy's downstream capacity is zero".into()));
    }
    // E_t = min(A_t, E_{t-1} + c_w_t)
    let mut e = vec![0u64];
    let mut t = 0usize;
    while *e.last().unwrap_or(&0) < total {
        t += 1;
        if t > MAX_SLOTS {
            return Err(MediaError::Mismatch("the clip would take too long to arrive".into()));
        }
        let a_t = a.get(t).copied().unwrap_or(total);
        let prev = e[t - 1];
        e.push(a_t.min(prev + wireless.at(t)));
    }
    let w = min_delay(d, &e);
    let l = latest(d, w, |t| wireless.at(t), Some(&a));
    let x = (0..l.len()).map(|t| l[t].saturating_sub(d.at(t as i64 - w as i64))).max().unwrap_or(0);
    let y = (0..l.len())
        .map(|t| a.get(t).copied().unwrap_or(total).saturating_sub(l[t]))
        .max()
        .unwrap_or(0);
    Ok(Schedule {
        w_slots: w,
        startup_delay_s: w as f64 * d.slot_us as f64 / 1e6,
        client_buffer_bytes: x,
        proxy_buffer_bytes: Some(y),
        earliest: e,
    })
}

/// With a proxy whose two legs were measured in series: `client` is what the client
/// received downstream of the proxy, so it already carries the upstream's constraint
/// (the proxy forwarded what had arrived). w* and x* come from the late schedule under
/// `client` (composing it with `upstream` again, as [`with_proxy`] does for an
/// independent downstream rate, would count the upstream's variability twice); y from
/// that schedule bounded above by what had reached the proxy (`upstream`).
pub fn through_proxy(d: &PlayoutCurve, upstream: &Capacity, client: &Capacity) -> Result<Schedule> {
    let total = d.total();
    let a = cumulative(upstream, total)?;
    let e = cumulative(client, total)?;
    let w = min_delay(d, &e);
    let l = latest(d, w, |t| client.at(t), Some(&a));
    let x = (0..l.len()).map(|t| l[t].saturating_sub(d.at(t as i64 - w as i64))).max().unwrap_or(0);
    let y = (0..l.len())
        .map(|t| a.get(t).copied().unwrap_or(total).saturating_sub(l[t]))
        .max()
        .unwrap_or(0);
    Ok(Schedule {
        w_slots: w,
        startup_delay_s: w as f64 * d.slot_us as f64 / 1e6,
        client_buffer_bytes: x,
        proxy_buffer_bytes: Some(y),
        earliest: e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CBR clip: `frames` frames of `bytes` each at `fps`.
    fn cbr(frames: usize, bytes: u64, fps: i64) -> PlayoutCurve {
        let dt = 1_000_000 / fps;
        let units: Vec<(i64, u64)> = (0..frames).map(|k| (k as i64 * dt, bytes)).collect();
        PlayoutCurve::from_units(&units, dt, DEFAULT_SLOT_US).unwrap()
    }

    #[test]
    fn cbr_clip_at_exactly_its_rate_needs_no_startup_delay() {
        // 25 fps, 1000-byte frames = 200 kbit/s; 10 s.
        let d = cbr(250, 1000, 25);
        let cap = Capacity::constant(200_000.0, DEFAULT_SLOT_US, 1);
        let s = end_to_end(&d, &cap).unwrap();
        assert_eq!(s.w_slots, 0);
        // A frame is consumed at the end of its interval, so at most one frame waits.
        assert!(s.client_buffer_bytes <= 1000, "{}", s.client_buffer_bytes);
    }

    #[test]
    fn half_the_rate_needs_the_clip_duration_and_half_the_clip_buffered() {
        let d = cbr(250, 1000, 25); // 10 s, 250 kB
        let cap = Capacity::constant(100_000.0, DEFAULT_SLOT_US, 1);
        let s = end_to_end(&d, &cap).unwrap();
        // Everything arrives at 20 s; the last frame is consumed at w + 10 s.
        assert_eq!(s.w_slots, 1000, "w* = {} s", s.startup_delay_s);
        assert_eq!(s.startup_delay_s, 10.0);
        // At w* the link has delivered 10 s · 12.5 kB/s = 125 kB, none consumed yet.
        assert!((124_000..=126_000).contains(&s.client_buffer_bytes), "{}", s.client_buffer_bytes);
    }

    #[test]
    fn w_star_is_the_minimum_feasible_delay() {
        let units: Vec<(i64, u64)> =
            (0..100).map(|k| (k * 40_000, if k % 10 == 0 { 9000 } else { 800 })).collect();
        let d = PlayoutCurve::from_units(&units, 40_000, DEFAULT_SLOT_US).unwrap();
        let cap = Capacity::constant(300_000.0, DEFAULT_SLOT_US, 1);
        let s = end_to_end(&d, &cap).unwrap();
        let feasible = |w: usize| {
            (0..s.earliest.len() + w + 1).all(|t| {
                let e = s.earliest.get(t).copied().unwrap_or(d.total());
                e >= d.at(t as i64 - w as i64)
            })
        };
        assert!(feasible(s.w_slots));
        assert!(s.w_slots == 0 || !feasible(s.w_slots - 1));
    }

    #[test]
    fn a_proxy_with_a_fast_wireless_hop_changes_nothing_end_to_end() {
        let d = cbr(100, 1000, 25);
        let up = Capacity::constant(150_000.0, DEFAULT_SLOT_US, 1);
        let fast = Capacity::constant(100_000_000.0, DEFAULT_SLOT_US, 1);
        let e2e = end_to_end(&d, &up).unwrap();
        let p = with_proxy(&d, &up, &fast).unwrap();
        assert_eq!(p.w_slots, e2e.w_slots);
        assert!(p.proxy_buffer_bytes.is_some());
    }

    #[test]
    fn a_slow_wireless_hop_bounds_the_delay_and_the_proxy_holds_the_difference() {
        let d = cbr(250, 1000, 25); // 200 kbit/s, 10 s
        let up = Capacity::constant(2_000_000.0, DEFAULT_SLOT_US, 1);
        let wireless = Capacity::constant(100_000.0, DEFAULT_SLOT_US, 1);
        let p = with_proxy(&d, &up, &wireless).unwrap();
        assert_eq!(p.startup_delay_s, 10.0);
        // The server's fast link fills the proxy, which then drains slowly.
        assert!(p.proxy_buffer_bytes.unwrap() > 100_000);
    }

    #[test]
    fn zero_capacity_is_an_error_not_a_hang() {
        let d = cbr(10, 1000, 25);
        assert!(end_to_end(&d, &Capacity { bytes: vec![0; 10] }).is_err());
        assert!(end_to_end(&d, &Capacity { bytes: vec![] }).is_err());
    }

    #[test]
    fn trace_events_bin_into_slots() {
        // Opportunities at 1, 5, 10, 11 ms: slots (0,10] and (10,20].
        let c = Capacity::from_events(
            [(1_000, 1500), (5_000, 1500), (10_000, 1500), (11_000, 1500)],
            20_000,
            10_000,
        );
        assert_eq!(c.bytes, vec![4500, 1500]);
        assert_eq!(c.at(3), 4500, "loops");
    }

    #[test]
    fn through_a_proxy_measured_in_series_the_client_curve_sets_the_start() {
        // A bursty upstream (on 1 slot in 2) and the client receiving the same bytes one
        // slot later: the start is the client curve's own, and composing the two as
        // independent constraints (with_proxy) can only need more.
        let d = cbr(150, 1_000, 15);
        let up = Capacity { bytes: vec![2_400, 0] };
        let client = Capacity { bytes: vec![0, 2_400] };
        let s = through_proxy(&d, &up, &client).unwrap();
        let alone = end_to_end(&d, &client).unwrap();
        assert_eq!(s.w_slots, alone.w_slots);
        assert_eq!(s.client_buffer_bytes, alone.client_buffer_bytes);
        assert!(s.proxy_buffer_bytes.is_some());
        let composed = with_proxy(&d, &up, &client).unwrap();
        assert!(composed.w_slots >= s.w_slots, "{} < {}", composed.w_slots, s.w_slots);
    }
}
