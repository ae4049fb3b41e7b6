//! The streaming code of S-EDPF-τ: a systematic sliding-window random linear code over
//! GF(2^8).
//!
//! Source packets travel as they are; every τ source packets the [`Encoder`] adds one repair
//! (coded) symbol `c = Σ w_j · u_j` over its window, the source symbols from the oldest
//! unacknowledged to the newest sent (S-EDPF paper §"coding" \[source\]; ALGORITHMS.md
//! §Coding). Acknowledgements slide the window's start; symbols past their deadline leave
//! it. A repair symbol names its window and its coefficients the way RFC 8681's Repair FEC
//! Payload ID does \[source\]: the first source symbol's id, the number of source symbols,
//! and a 16-bit repair key from which both ends regenerate the coefficients ([`coefs`]).
//!
//! The [`Decoder`] keeps its equations in reduced row-echelon form and eliminates
//! incrementally as source and repair symbols arrive, so a lost source symbol is recovered
//! as soon as the symbols received span it, and [`Decoder::pop_in_order`] releases symbols
//! in order as soon as the next one is known.
//!
//! A source symbol is its payload behind a 2-byte big-endian length (RFC 8681 §4.1's ADUI
//! carries the length the same way), zero-padded to the longest symbol of the window, so a
//! recovered symbol knows its own length.
//!
//! Everything a peer sends is checked against [`Limits`]: repairs with an empty or too large
//! window, ids past 2^62, oversized or truncated payloads are dropped and counted
//! ([`DecoderStats`]); memory stays below `max_rows × (HISTORY · max_window + max_symbol)`
//! plus the known symbols of [`HISTORY`] windows.

pub mod coefs;
mod decoder;
mod encoder;
pub mod gf;

pub use decoder::{Decoder, DecoderStats, HISTORY};
pub use encoder::{Encoder, EncoderStats};

use bytes::Bytes;

/// Largest encoding window, source symbols (RFC 8681's NSS field is 12 bits wide).
pub const MAX_WINDOW: u32 = 4095;

/// Largest source or repair id (ids travel as QUIC varints).
pub const MAX_ID: u64 = (1 << 62) - 1;

/// Bytes in front of each source payload inside a source symbol (its length).
pub const LEN_PREFIX: usize = 2;

/// Bounds on what the encoder keeps and the decoder accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest encoding window, source symbols (at most [`MAX_WINDOW`]).
    pub max_window: u32,
    /// Largest source payload, bytes (a symbol is `LEN_PREFIX` more).
    pub max_symbol: usize,
    /// Largest number of undecoded equations the decoder holds.
    pub max_rows: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_window: 1024, max_symbol: 1500, max_rows: 256 }
    }
}

impl Limits {
    /// The limits with every field clamped into range.
    pub fn clamped(self) -> Limits {
        Limits {
            max_window: self.max_window.clamp(1, MAX_WINDOW),
            max_symbol: self.max_symbol.clamp(1, usize::from(u16::MAX)),
            max_rows: self.max_rows.max(1),
        }
    }
}

/// One repair (coded) symbol and its RFC 8681-style payload id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// Id of the first source symbol of the encoding window.
    pub first: u64,
    /// Number of source symbols in the window (`first .. first + count`).
    pub count: u32,
    /// The repair key: the seed the coefficients are regenerated from.
    pub seed: u16,
    /// `Σ w_j · symbol_j`, as long as the window's longest symbol.
    pub payload: Bytes,
}

/// Why the encoder refused a source payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FecError {
    /// The payload is longer than the limit.
    #[error("source payload of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// The payload's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The source id space is exhausted.
    #[error("source ids exhausted")]
    IdsExhausted,
}

/// The source symbol of `payload`: its length, then its bytes.
pub fn source_symbol(payload: &[u8]) -> Option<Vec<u8>> {
    let len = u16::try_from(payload.len()).ok()?;
    let mut s = Vec::with_capacity(LEN_PREFIX + payload.len());
    s.extend_from_slice(&len.to_be_bytes());
    s.extend_from_slice(payload);
    Some(s)
}

#[cfg(test)]
mod tests;
