//! Braid's media side: demuxing ([`source`]), decoding ([`decode`]) and quality
//! measurement ([`quality`]).
//!
//! Media knows nothing of sockets: the player composes it with the transport.
#![warn(missing_docs)]

pub mod decode;
pub mod error;
pub mod framing;
pub mod fuzzing;
pub mod oracle;
pub mod playout;
pub mod quality;
pub mod schedule;
pub mod source;
pub mod yuv4mpeg;

pub use error::{MediaError, Result};
pub use source::{AccessUnit, Clip, Codec, OpenOptions, StreamInfo};
