//! Byte-level primitives: QUIC variable-length integers and a bounds-checked reader.
//!
//! Varints follow RFC 9000 §16 \[source\]: the two most significant bits of the first byte
//! give the length (1, 2, 4 or 8 bytes), the rest is the value in network byte order, so
//! values up to 2^62 − 1 are representable.

/// Length of every connection id Braid issues and routes, bytes.
pub(crate) const CID_LEN: usize = 8;

/// Longest connection id QUIC v1 allows (RFC 9000 §17.2).
pub const MAX_CID_LEN: usize = 20;

/// A connection id as a long header carries it: 0 to [`MAX_CID_LEN`] bytes. Braid's own ids
/// are 8 bytes ([`LongCid::from_u64`]); a client of another stack may send its first
/// Initial to a longer one (RFC 9000 §7.2: at least 8 bytes, unpredictable), from which the
/// Initial keys and the `original_destination_connection_id` follow.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LongCid {
    len: u8,
    bytes: [u8; MAX_CID_LEN],
}

impl LongCid {
    /// An 8-byte id.
    pub fn from_u64(id: u64) -> LongCid {
        let mut bytes = [0; MAX_CID_LEN];
        bytes[..CID_LEN].copy_from_slice(&id.to_be_bytes());
        LongCid { len: CID_LEN as u8, bytes }
    }

    /// The id of `b`; `None` above [`MAX_CID_LEN`] bytes.
    pub fn from_slice(b: &[u8]) -> Option<LongCid> {
        if b.len() > MAX_CID_LEN {
            return None;
        }
        let mut bytes = [0; MAX_CID_LEN];
        bytes[..b.len()].copy_from_slice(b);
        Some(LongCid { len: b.len() as u8, bytes })
    }

    /// The id's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The 64-bit key drivers route on: the id itself for an 8-byte id, else its first 8
    /// bytes (zero-filled). Two long ids with one prefix route alike; the Initial keys
    /// derive from the whole id, so a packet routed to the wrong connection fails
    /// authentication there and is dropped.
    pub fn route_key(&self) -> u64 {
        let mut b = [0; CID_LEN];
        b.copy_from_slice(&self.bytes[..CID_LEN]);
        u64::from_be_bytes(b)
    }
}

impl std::fmt::Debug for LongCid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in self.as_slice() {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The largest value a varint can carry (2^62 − 1).
pub const VARINT_MAX: u64 = (1 << 62) - 1;

/// Why bytes could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The input ended in the middle of a field.
    #[error("truncated input")]
    Truncated,
    /// A frame type this version does not know.
    #[error("unknown frame type {0:#x}")]
    UnknownFrame(u64),
    /// A field holds a value that is not allowed (e.g. an out-of-range enum tag).
    #[error("invalid value in field `{0}`")]
    Invalid(&'static str),
    /// The packet's version is not supported.
    #[error("unsupported version {0}")]
    Version(u64),
}

/// Encoded length of `v` as a varint (values above [`VARINT_MAX`] are clamped).
pub fn varint_len(v: u64) -> usize {
    if v < (1 << 6) {
        1
    } else if v < (1 << 14) {
        2
    } else if v < (1 << 30) {
        4
    } else {
        8
    }
}

/// Appends `v` as a varint. Values above [`VARINT_MAX`] are clamped to it; callers keep
/// their values in range (every encoder in this module does).
pub fn put_varint(buf: &mut Vec<u8>, v: u64) {
    let v = v.min(VARINT_MAX);
    match varint_len(v) {
        1 => buf.push(v as u8),
        2 => buf.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes()),
        4 => buf.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes()),
        _ => buf.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// A cursor over untrusted bytes. Every read is bounds checked and returns
/// [`WireError::Truncated`] instead of panicking.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    /// The whole input (read or not).
    pub fn input(&self) -> &'a [u8] {
        self.data
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    /// Whether everything was read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Reads `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Truncated)?;
        let out = self.data.get(self.pos..end).ok_or(WireError::Truncated)?;
        self.pos = end;
        Ok(out)
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.bytes(1)?.first().copied().unwrap_or(0))
    }

    /// Reads a big-endian u64 (8 bytes).
    pub fn u64_fixed(&mut self) -> Result<u64, WireError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    /// Reads a varint (RFC 9000 §16).
    pub fn varint(&mut self) -> Result<u64, WireError> {
        let first = self.u8()?;
        let len = 1usize << (first >> 6);
        let mut v = u64::from(first & 0x3f);
        for _ in 1..len {
            v = (v << 8) | u64::from(self.u8()?);
        }
        Ok(v)
    }

    /// Reads a varint that must fit a `u32`.
    pub fn varint_u32(&mut self, field: &'static str) -> Result<u32, WireError> {
        u32::try_from(self.varint()?).map_err(|_| WireError::Invalid(field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc9000_sample_varints_decode() {
        // RFC 9000 Appendix A.1 examples.
        let cases: &[(&[u8], u64)] = &[
            (&[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c], 151_288_809_941_952_652),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
            (&[0x40, 0x25], 37),
        ];
        for (bytes, v) in cases {
            assert_eq!(Reader::new(bytes).varint(), Ok(*v));
        }
    }

    #[test]
    fn truncated_varint_is_an_error() {
        assert_eq!(Reader::new(&[0xc2, 0x19]).varint(), Err(WireError::Truncated));
        assert_eq!(Reader::new(&[]).varint(), Err(WireError::Truncated));
    }

    proptest! {
        #[test]
        fn varint_round_trips(v in 0..=VARINT_MAX) {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            prop_assert_eq!(buf.len(), varint_len(v));
            let mut r = Reader::new(&buf);
            prop_assert_eq!(r.varint(), Ok(v));
            prop_assert!(r.is_empty());
        }
    }
}
