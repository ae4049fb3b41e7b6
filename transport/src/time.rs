//! Time as the sans-IO cores see it: a plain number handed in by the driver.
//!
//! The protocol, policy and simulator code never read a clock. Real-time drivers map the
//! OS monotonic clock onto [`Instant`]; the simulator advances it in virtual time. Only
//! differences between instants carry meaning.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time, in microseconds since an epoch chosen by the driver.
#[derive(Copy, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The driver's epoch.
    pub const ZERO: Instant = Instant(0);

    /// An instant `micros` microseconds after the epoch.
    pub const fn from_micros(micros: u64) -> Self {
        Instant(micros)
    }

    /// An instant `d` after the epoch (saturating).
    pub fn from_duration(d: Duration) -> Self {
        Instant(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Seconds since the epoch, as a float (for reports).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// Time elapsed since the epoch.
    pub const fn since_epoch(self) -> Duration {
        Duration::from_micros(self.0)
    }

    /// `self - earlier`, or zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, or `None` on overflow.
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        u64::try_from(d.as_micros()).ok().and_then(|m| self.0.checked_add(m)).map(Instant)
    }

    /// `self - d`, saturating at the epoch.
    pub fn saturating_sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(u64::try_from(d.as_micros()).unwrap_or(u64::MAX)))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: an earlier minus a later instant is zero.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}s", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        let a = Instant::from_micros(5);
        let b = Instant::from_micros(10);
        assert_eq!(a - b, Duration::ZERO);
        assert_eq!(b - a, Duration::from_micros(5));
        assert_eq!(
            Instant::from_micros(u64::MAX) + Duration::from_secs(1),
            Instant::from_micros(u64::MAX)
        );
        assert_eq!(a.saturating_sub(Duration::from_secs(1)), Instant::ZERO);
    }
}
