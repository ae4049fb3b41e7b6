//! Packets: a header followed by frames.
//!
//! Header layout (every field a varint except the connection id):
//!
//! ```text
//! version (varint, = VERSION) | connection id (8 bytes) | path id (varint) | packet number (varint)
//! ```
//!
//! The connection id sits at a fixed position after the version so drivers can route a
//! datagram without parsing frames ([`peek_connection_id`]). Packet numbers are per path
//! and sent in full (no truncation), so decoding needs no state.

use super::frame::Frame;
use super::wire::{Reader, WireError, put_varint, varint_len};
use crate::path::PathId;

/// The only wire version this implementation speaks.
pub const VERSION: u64 = 1;

/// A packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Connection id (chosen by the client, used in both directions).
    pub connection_id: u64,
    /// The path the packet travels on.
    pub path: PathId,
    /// Packet number in that path's number space.
    pub number: u64,
}

impl Header {
    /// Appends the header.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        put_varint(buf, VERSION);
        buf.extend_from_slice(&self.connection_id.to_be_bytes());
        put_varint(buf, u64::from(self.path.0));
        put_varint(buf, self.number);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        varint_len(VERSION) + 8 + varint_len(u64::from(self.path.0)) + varint_len(self.number)
    }

    /// Reads a header. Never panics.
    pub fn decode(r: &mut Reader<'_>) -> Result<Header, WireError> {
        let version = r.varint()?;
        if version != VERSION {
            return Err(WireError::Version(version));
        }
        let connection_id = r.u64_fixed()?;
        let path = PathId(r.varint_u32("path")?);
        let number = r.varint()?;
        Ok(Header { connection_id, path, number })
    }
}

/// A fully decoded packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// The header.
    pub header: Header,
    /// Its frames, in order.
    pub frames: Vec<Frame>,
}

impl Packet {
    /// Decodes a whole datagram. A packet must carry at least one frame; any malformed
    /// frame rejects the whole packet. Never panics; memory is bounded by the input size.
    pub fn decode(datagram: &[u8]) -> Result<Packet, WireError> {
        let mut r = Reader::new(datagram);
        let header = Header::decode(&mut r)?;
        let mut frames = Vec::new();
        while !r.is_empty() {
            frames.push(Frame::decode(&mut r)?);
        }
        if frames.is_empty() {
            return Err(WireError::Invalid("empty packet"));
        }
        Ok(Packet { header, frames })
    }

    /// Encodes header and frames into `buf` (appending).
    pub fn encode(&self, buf: &mut Vec<u8>) {
        self.header.encode(buf);
        for f in &self.frames {
            f.encode(buf);
        }
    }
}

/// The connection id of a datagram, if it starts with a header of a supported version.
/// Drivers use this to route datagrams to connections; it does not validate the rest.
pub fn peek_connection_id(datagram: &[u8]) -> Option<u64> {
    let mut r = Reader::new(datagram);
    if r.varint().ok()? != VERSION {
        return None;
    }
    r.u64_fixed().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::frame::tests::frame_strategy;
    use proptest::collection::vec;
    use proptest::prelude::*;

    fn header_strategy() -> impl Strategy<Value = Header> {
        (any::<u64>(), any::<u32>(), 0..super::super::wire::VARINT_MAX).prop_map(
            |(connection_id, p, number)| Header { connection_id, path: PathId(p), number },
        )
    }

    proptest! {
        #[test]
        fn header_round_trips(h in header_strategy()) {
            let mut buf = Vec::new();
            h.encode(&mut buf);
            prop_assert_eq!(buf.len(), h.encoded_len());
            let mut r = Reader::new(&buf);
            prop_assert_eq!(Header::decode(&mut r), Ok(h));
            prop_assert!(r.is_empty());
            prop_assert_eq!(peek_connection_id(&buf), Some(h.connection_id));
        }

        #[test]
        fn packet_round_trips(h in header_strategy(), frames in vec(frame_strategy(), 1..6)) {
            let p = Packet { header: h, frames };
            let mut buf = Vec::new();
            p.encode(&mut buf);
            prop_assert_eq!(Packet::decode(&buf), Ok(p));
        }

        #[test]
        fn random_bytes_never_panic_the_packet_decoder(bytes in vec(any::<u8>(), 0..1500)) {
            let _ = Packet::decode(&bytes);
            let _ = peek_connection_id(&bytes);
        }

        #[test]
        fn truncated_packets_are_rejected(h in header_strategy(), frames in vec(frame_strategy(), 1..4), cut in 0usize..10_000) {
            let p = Packet { header: h, frames };
            let mut buf = Vec::new();
            p.encode(&mut buf);
            let cut = cut % buf.len();
            // A cut at a frame boundary still decodes (to fewer frames); anything else fails.
            if let Ok(q) = Packet::decode(&buf[..cut]) { prop_assert!(q.frames.len() < p.frames.len()) }
        }
    }

    #[test]
    fn wrong_version_is_rejected() {
        let mut buf = Vec::new();
        Header { connection_id: 7, path: PathId(0), number: 0 }.encode(&mut buf);
        buf[0] = 2;
        assert_eq!(Packet::decode(&buf), Err(WireError::Version(2)));
        assert_eq!(peek_connection_id(&buf), None);
    }
}
