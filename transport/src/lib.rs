//! Braid's multipath transport.
//!
//! The protocol only, and all of it sans-IO: state machines that are handed `now` and input
//! events and are polled for output. No sockets, threads, clocks, global randomness or file
//! formats; seeded RNGs are passed in. The same code runs on real sockets (`braid-io`), over
//! emulated links in real time and in virtual time in the simulator (`braid-sim`); link
//! models and scenario files are `braid-netem`'s.
//!
//! - [`proto`]: wire format and the multipath [`proto::Connection`].
//! - [`bulk`]: the bulk byte stream and its verification (simulator and `braid perf`).
//! - [`cc`]: congestion controllers (Reno, LIA, OLIA).
//! - [`energy`]: radio power state machines (energy estimates per path).
//! - [`fec`]: the streaming random linear code (sliding-window, GF(2^8)).
//! - [`sched`]: packet schedulers (minRTT, round robin, redundant).
//! - [`policy`]: path-mode policies (aeSUM mode switch, eMTCP offload).
//! - [`profile`]: named bundles of the above that users compare.
//! - [`trace`]: typed connection events and their qlog (JSON-SEQ) writer.
#![warn(missing_docs)]

pub mod bulk;
pub mod cc;
pub mod energy;
pub mod fec;
pub mod fuzzing;
pub mod path;
pub mod policy;
pub mod profile;
pub mod proto;
pub mod sched;
pub mod time;
pub mod trace;

pub use path::{PathId, PathRole, PathStatus};
pub use time::Instant;
