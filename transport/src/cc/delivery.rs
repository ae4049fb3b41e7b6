//! Delivery-rate estimation per path, for model-based controllers (BBR).
//!
//! The algorithm of draft-cheng-iccrg-delivery-rate-estimation-02 \[source\]: the connection
//! keeps, per path, the bytes delivered so far (`delivered`), when the latest delivery
//! happened (`delivered_time`) and when the packet that started the current sampling
//! interval was sent (`first_sent_time`). Each packet sent is stamped with those three and
//! whether the sender was application-limited ([`DeliveryStamp`]). When an ACK arrives,
//! the most recently sent packet it newly acknowledges gives the sample:
//!
//! - `delivered = C.delivered − P.delivered` (bytes delivered in the interval, §3.3),
//! - `interval = max(send_elapsed, ack_elapsed)` with `send_elapsed = P.sent_time −
//!   P.first_sent_time` and `ack_elapsed = C.delivered_time − P.delivered_time` (§3.3:
//!   the larger of the two keeps ACK compression from inflating the rate),
//! - `rate = delivered / interval`; a sample whose interval is shorter than the path's
//!   minimum RTT is discarded (§3.3), as is one with nothing delivered.
//!
//! App-limited marking (§3.4): when the sender has nothing to send while the window has
//! room, `app_limited = delivered + in_flight` (at least 1); packets sent while it is set
//! are stamped app-limited, and it is cleared once `delivered` passes it. A controller may
//! use an app-limited sample only when it raises its estimate.
//!
//! Sizes are bytes, times [`Instant`]; nothing here reads a clock.

use std::time::Duration;

use crate::time::Instant;

/// What the connection records with each packet it sends (draft §3.2 `P.delivered`,
/// `P.delivered_time`, `P.first_sent_time`, `P.is_app_limited`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DeliveryStamp {
    /// Bytes delivered on the path when the packet was sent.
    pub delivered: u64,
    /// When the latest of those bytes was acknowledged (or the interval began).
    pub delivered_time: Instant,
    /// Send time of the packet that began the sampling interval.
    pub first_sent_time: Instant,
    /// The sender was application-limited when it sent this packet.
    pub app_limited: bool,
}

/// One delivery-rate sample, handed to [`super::Controller::on_delivery_sample`] once per
/// ACK that newly acknowledged in-flight packets.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct DeliverySample {
    /// Bytes delivered over [`DeliverySample::interval`].
    pub delivered: u64,
    /// The sampling interval; `None` when the sample is not valid for a rate (too short,
    /// or nothing delivered): the ACK still counts for round trips and acknowledged bytes.
    pub interval: Option<Duration>,
    /// `P.delivered` of the newest packet acknowledged (starts BBR's round trips).
    pub prior_delivered: u64,
    /// Bytes delivered on the path in total, after this ACK.
    pub total_delivered: u64,
    /// The newest packet acknowledged was sent while application-limited.
    pub app_limited: bool,
    /// Bytes newly acknowledged by this ACK.
    pub newly_acked: u64,
    /// The RTT of the newest packet acknowledged (now − its send time).
    pub rtt: Duration,
    /// Bytes in flight on the path after this ACK was processed.
    pub in_flight: u64,
}

impl DeliverySample {
    /// The delivery rate in bytes per second, when the sample is valid.
    pub fn rate(&self) -> Option<f64> {
        let i = self.interval?.as_secs_f64();
        (i > 0.0 && self.delivered > 0).then(|| self.delivered as f64 / i)
    }
}

/// The connection's per-path delivery state (draft §3.1).
#[derive(Clone, Debug)]
pub struct DeliveryRate {
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    /// `C.app_limited`: 0 = not application-limited, else the `delivered` mark that ends it.
    app_limited: u64,
    /// The sample being assembled from one ACK's packets.
    pending: Option<Pending>,
}

#[derive(Clone, Debug)]
struct Pending {
    prior: DeliveryStamp,
    sent: Instant,
    newly_acked: u64,
}

impl DeliveryRate {
    /// A path with nothing delivered, opened at `now`.
    pub fn new(now: Instant) -> Self {
        DeliveryRate {
            delivered: 0,
            delivered_time: now,
            first_sent_time: now,
            app_limited: 0,
            pending: None,
        }
    }

    /// Bytes delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// A packet is about to be sent at `now` with `in_flight` bytes already in flight
    /// (before it): its stamp (draft §3.2, `OnPacketSent`).
    pub fn on_sent(&mut self, now: Instant, in_flight: u64) -> DeliveryStamp {
        if in_flight == 0 {
            // Nothing in flight: a new sampling interval starts with this packet.
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        DeliveryStamp {
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            app_limited: self.app_limited != 0,
        }
    }

    /// The sender found nothing to send while `in_flight` left room in the window (draft
    /// §3.4).
    pub fn mark_app_limited(&mut self, in_flight: u64) {
        self.app_limited = self.delivered.saturating_add(in_flight).max(1);
    }

    /// A packet of `size` bytes sent at `sent` with `stamp` was newly acknowledged at `now`
    /// (draft §3.3, `UpdateRateSample` per packet).
    pub fn on_acked(&mut self, now: Instant, sent: Instant, size: u64, stamp: DeliveryStamp) {
        self.delivered = self.delivered.saturating_add(size);
        self.delivered_time = now;
        let newly_acked = self.pending.as_ref().map_or(0, |p| p.newly_acked) + size;
        let newer = self.pending.as_ref().is_none_or(|p| {
            stamp.delivered > p.prior.delivered
                || (stamp.delivered == p.prior.delivered && sent >= p.sent)
        });
        if newer {
            // The newest packet acknowledged defines the interval; the next interval
            // starts at its send time.
            self.first_sent_time = sent;
            self.pending = Some(Pending { prior: stamp, sent, newly_acked });
        } else if let Some(p) = &mut self.pending {
            p.newly_acked = newly_acked;
        }
    }

    /// Ends the ACK: the sample of the packets passed to [`DeliveryRate::on_acked`] since
    /// the previous call, if any. `min_rtt` is the path's minimum RTT; `in_flight` the
    /// bytes still in flight.
    pub fn finish(
        &mut self,
        now: Instant,
        min_rtt: Duration,
        in_flight: u64,
    ) -> Option<DeliverySample> {
        let p = self.pending.take()?;
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        let delivered = self.delivered.saturating_sub(p.prior.delivered);
        let send_elapsed = p.sent.saturating_duration_since(p.prior.first_sent_time);
        let ack_elapsed = self.delivered_time.saturating_duration_since(p.prior.delivered_time);
        let interval = send_elapsed.max(ack_elapsed);
        let valid = delivered > 0 && !interval.is_zero() && interval >= min_rtt;
        Some(DeliverySample {
            delivered,
            interval: valid.then_some(interval),
            prior_delivered: p.prior.delivered,
            total_delivered: self.delivered,
            app_limited: p.prior.app_limited,
            newly_acked: p.newly_acked,
            rtt: now.saturating_duration_since(p.sent),
            in_flight,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    #[test]
    fn a_steady_flight_measures_its_rate() {
        // 10 packets of 1 000 bytes sent 1 ms apart, each acknowledged 50 ms later.
        let mut d = DeliveryRate::new(t(0));
        let mut stamps = Vec::new();
        for i in 0..10 {
            stamps.push((t(i), d.on_sent(t(i), i * 1000)));
        }
        let mut last = None;
        for (i, (sent, s)) in stamps.into_iter().enumerate() {
            d.on_acked(t(50 + i as u64), sent, 1000, s);
            last = d.finish(t(50 + i as u64), Duration::from_millis(40), 0);
        }
        let s = last.expect("a sample");
        // The last packet: 10 000 bytes over max(9 ms, 59 ms) = 59 ms.
        assert_eq!(s.delivered, 10_000);
        assert_eq!(s.interval, Some(Duration::from_millis(59)));
        assert!(!s.app_limited);
    }

    #[test]
    fn short_intervals_are_not_rate_samples() {
        let mut d = DeliveryRate::new(t(0));
        let s0 = d.on_sent(t(0), 0);
        d.on_acked(t(5), t(0), 1000, s0);
        let s = d.finish(t(5), Duration::from_millis(10), 0).expect("a sample");
        assert_eq!(s.interval, None);
        assert_eq!(s.rate(), None);
        assert_eq!(s.newly_acked, 1000);
        assert_eq!(d.finish(t(6), Duration::ZERO, 0), None, "one sample per ACK");
    }

    #[test]
    fn app_limited_marks_packets_until_delivered_passes_the_mark() {
        let mut d = DeliveryRate::new(t(0));
        d.mark_app_limited(0);
        let s0 = d.on_sent(t(0), 0);
        assert!(s0.app_limited);
        d.on_acked(t(20), t(0), 1000, s0);
        let s = d.finish(t(20), Duration::ZERO, 0).expect("a sample");
        assert!(s.app_limited);
        assert!(!d.on_sent(t(21), 0).app_limited, "cleared once delivered passed the mark");
    }
}
