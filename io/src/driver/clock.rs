//! The connection's clock on tokio's.

use braid_transport::time::Instant;

/// Wall-clock mapping: [`Instant`] = microseconds since `origin`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    origin: tokio::time::Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub(super) fn start() -> Clock {
        Clock { origin: tokio::time::Instant::now() }
    }

    /// Now on the connection's clock.
    pub(super) fn now(&self) -> Instant {
        Instant::from_duration(self.origin.elapsed())
    }

    /// The tokio instant of `t`.
    pub(super) fn at(&self, t: Instant) -> tokio::time::Instant {
        self.origin + t.since_epoch()
    }
}
