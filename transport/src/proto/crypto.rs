//! TLS 1.3 and packet protection.
//!
//! The handshake is TLS 1.3 through rustls's QUIC interface ([`rustls::quic`]): rustls
//! produces and consumes the handshake bytes, which Braid carries reliably and in order in
//! CRYPTO chunks of handshake packets (`connection/handshake.rs`), and hands out the
//! Initial, Handshake and 1-RTT packet keys. Every packet is protected with the keys of its
//! level: an AEAD over the payload with the plain header as associated data, and header
//! protection over the first byte and the packet number (RFC 9001 §5). 1-RTT packets build
//! their nonce from the path id and the per-path packet number, as
//! draft-ietf-quic-multipath (§2.4 "nonce calculation") does \[source\].
//!
//! This module holds what does not depend on the connection's state: the packet layouts,
//! sealing and opening, the handshake payload (QUIC v1's CRYPTO, ACK, PING, PADDING and
//! CONNECTION_CLOSE frames), the transport parameters, the certificate-pinning verifier
//! and the deterministic crypto provider the simulator and the tests use
//! ([`deterministic`]).
//!
//! Layouts (one packet per datagram, so no length field):
//!
//! ```text
//! long  (Initial / Handshake): 0xC0 | level<<4 | 0x03 | version (u32) | 8 | cid (8) | 8 | cid (8) | pn (4) | AEAD payload
//! short (1-RTT):                0x40 | 0x03             | cid (8) | path id (varint) | pn (4) | AEAD payload
//! ```
//!
//! The packet number is sent as its low 32 bits and expanded against the largest received
//! (RFC 9000 §A.3 \[source\]); the low two bits of the first byte (the packet number length
//! minus one) and the packet number are masked by header protection.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{
    ActiveKeyExchange, CryptoProvider, SecureRandom, SharedSecret, SupportedKxGroup,
    WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature,
};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::quic::{HeaderProtectionKey, PacketKey};
use rustls::{DigitallySignedStruct, NamedGroup, SignatureScheme};

use super::frame::{role_code, role_from};
use super::wire::{CID_LEN, LongCid, MAX_CID_LEN, Reader, WireError, put_varint};
use crate::path::{PathId, PathRole};
use crate::time::Instant;

/// The wire version carried by long-header packets: QUIC version 1 (RFC 9000 §15).
pub const VERSION: u32 = 0x0000_0001;
/// The ALPN protocol both ends require.
pub const ALPN: &[u8] = b"braid/1";
/// AEAD tag length of every supported suite.
pub const TAG_LEN: usize = 16;
/// Smallest datagram carrying a client's Initial packet (RFC 9000 §14.1 \[source\]).
pub const MIN_INITIAL_DATAGRAM: usize = 1200;
/// Bytes of the packet number field of handshake packets (RFC 9000 §17.1 allows 1–4; a
/// handshake's spaces are small, and a fixed length keeps their sizes simple).
pub const HANDSHAKE_PN_LEN: usize = 4;
/// Most bytes of a packet number field (RFC 9000 §17.1).
const MAX_PN_LEN: usize = 4;
/// Largest Length a long header's 2-byte varint holds (RFC 9000 §16).
const MAX_LONG_LENGTH: usize = (1 << 14) - 1;
/// Header-protection sample length (RFC 9001 §5.4.2 \[source\]).
const SAMPLE_LEN: usize = 16;
/// The key phase bit of a short header (RFC 9001 §6.1).
const KEY_PHASE: u8 = 0x04;
/// The reserved bits of a short header (RFC 9000 §17.3.1).
const SHORT_RESERVED: u8 = 0x18;
/// The reserved bits of a long header (RFC 9000 §17.2).
const LONG_RESERVED: u8 = 0x0c;
/// Long-header packet types (RFC 9000 §17.2, Table 5).
const TYPE_INITIAL: u8 = 0x0;
const TYPE_HANDSHAKE: u8 = 0x2;

/// The encryption level of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Keys derived from the connection id (RFC 9001 §5.2): integrity against off-path
    /// corruption only.
    Initial,
    /// Keys from the TLS handshake secrets.
    Handshake,
    /// Keys from the TLS application secrets.
    OneRtt,
}

/// The readable part of a received packet's header (before header protection is removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlainHeader {
    /// The packet's level.
    pub level: Level,
    /// Destination connection id as drivers route on it ([`LongCid::route_key`]: the id
    /// itself, Braid's ids being 8 bytes).
    pub connection_id: u64,
    /// The destination id's bytes: what a client's first Initial keys derive from.
    pub dcid: LongCid,
    /// Source connection id of a long header (`None` for a short one): the sender's
    /// choice, 0 to [`MAX_CID_LEN`] bytes (Braid's are 8, other stacks' may differ).
    pub source_id: Option<LongCid>,
    /// Path. The header does not carry it (RFC 10069 §2: a 1-RTT packet's path follows
    /// from its destination id), so [`PlainHeader::parse`] gives path 0 and a receiver sets
    /// the path the id was issued for with [`PlainHeader::on_path`]. Long headers are
    /// always path 0.
    pub path: PathId,
    /// Offset of the packet number field.
    pub pn_offset: usize,
    /// End of this packet in the datagram: where a long header's Length field says it
    /// ends (RFC 9000 §17.2; any bytes after it are coalesced packets, §12.2), or the
    /// datagram's end for a short header.
    pub end: usize,
    /// Offset and length of an Initial packet's token (RFC 9000 §17.2.2; empty for other
    /// packets): [`PlainHeader::token`].
    pub token: (usize, usize),
}

impl PlainHeader {
    /// Reads the unprotected fields of a datagram's header. Never panics.
    ///
    /// Layouts (RFC 9000 §17.2 and §17.3.1; a destination id is 8 bytes, one Braid issued,
    /// but an Initial's, which may have 8 to 20; a source id, the sender's, 0 to 20):
    /// - Initial: `1 1 0 0 R R P P`, version, 8, destination id, length, source id, token
    ///   length (varint), token, Length (varint), packet number, payload;
    /// - Handshake: `1 1 1 0 R R P P`, version, 8, destination id, length, source id,
    ///   Length, packet number, payload;
    /// - short: `0 1 S R R K P P`, destination id, packet number, payload to the end;
    ///
    /// with `P P` the packet number's length minus one, under header protection like `R R`
    /// (reserved) and `K` (key phase), and Length the bytes of packet number and payload.
    /// A datagram may hold several long-header packets, and a short one last (§12.2): this
    /// reads the first, which ends at [`PlainHeader::end`].
    pub fn parse(datagram: &[u8]) -> Result<PlainHeader, WireError> {
        let mut r = Reader::new(datagram);
        let first = r.u8()?;
        if first & 0x40 == 0 {
            return Err(WireError::Invalid("fixed bit"));
        }
        let long = first & 0x80 != 0;
        let level = if long {
            let level = match (first >> 4) & 0x03 {
                TYPE_INITIAL => Level::Initial,
                TYPE_HANDSHAKE => Level::Handshake,
                _ => return Err(WireError::Invalid("packet type")),
            };
            let version = u32::from_be_bytes(fixed(r.bytes(4)?));
            if version != VERSION {
                return Err(WireError::Version(u64::from(version)));
            }
            level
        } else {
            Level::OneRtt
        };
        // RFC 8999's invariant fields: a long header's destination id after its length
        // (up to 20 bytes in v1: another stack's client may send its first Initial to a
        // longer id than Braid's 8 bytes), a short header's of the length its receiver
        // issued (Braid's 8); then a long header's source id after its length, below.
        let dcid_len = if long { usize::from(r.u8()?) } else { CID_LEN };
        // An Initial may go to 8 to 20 bytes (RFC 9000 §7.2: a client's first destination
        // id has at least 8); every other packet goes to an id Braid issued (8 bytes).
        let ok = match level {
            Level::Initial => (CID_LEN..=MAX_CID_LEN).contains(&dcid_len),
            _ => dcid_len == CID_LEN,
        };
        if !ok {
            return Err(WireError::Invalid("connection id length"));
        }
        let dcid = LongCid::from_slice(r.bytes(dcid_len)?).ok_or(WireError::Truncated)?;
        let connection_id = dcid.route_key();
        let mut source_id = None;
        if long {
            let len = usize::from(r.u8()?);
            if len > MAX_CID_LEN {
                return Err(WireError::Invalid("source connection id length"));
            }
            source_id = Some(LongCid::from_slice(r.bytes(len)?).ok_or(WireError::Truncated)?);
        }
        let mut token = (0, 0);
        if level == Level::Initial {
            let len = usize::try_from(r.varint()?).map_err(|_| WireError::Truncated)?;
            if len > MAX_TOKEN_LEN {
                return Err(WireError::Invalid("token length"));
            }
            token = (r.position(), len);
            r.bytes(len)?;
        }
        let length = if long {
            Some(usize::try_from(r.varint()?).map_err(|_| WireError::Truncated)?)
        } else {
            None
        };
        let pn_offset = r.position();
        let end = match length {
            Some(n) => pn_offset.checked_add(n).ok_or(WireError::Truncated)?,
            None => datagram.len(),
        };
        // The header-protection sample starts 4 bytes past the packet number's offset
        // whatever its length (RFC 9001 §5.4.2), and lies inside the packet.
        if end > datagram.len() || end < pn_offset + MAX_PN_LEN + SAMPLE_LEN {
            return Err(WireError::Truncated);
        }
        Ok(PlainHeader {
            level,
            connection_id,
            dcid,
            source_id,
            path: PathId(0),
            pn_offset,
            end,
            token,
        })
    }

    /// An Initial packet's token (empty for any other packet, or none sent), from the
    /// datagram the header was read from.
    pub fn token<'a>(&self, datagram: &'a [u8]) -> &'a [u8] {
        datagram.get(self.token.0..self.token.0 + self.token.1).unwrap_or(&[])
    }

    /// The same header on `path` (the path its destination id was issued for).
    pub fn on_path(self, path: PathId) -> PlainHeader {
        PlainHeader { path, ..self }
    }
}

fn fixed<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&b[..N]);
    out
}

/// The connection id of a datagram whose header has a supported layout. Drivers route on
/// it; it proves nothing (the packet is not yet authenticated).
pub fn peek_connection_id(datagram: &[u8]) -> Option<u64> {
    PlainHeader::parse(datagram).ok().map(|h| h.connection_id)
}

/// Whether a datagram starts with an Initial packet (a connection attempt).
pub fn is_initial(datagram: &[u8]) -> bool {
    PlainHeader::parse(datagram).is_ok_and(|h| h.level == Level::Initial)
}

/// Bytes needed to send packet number `pn` when the largest acknowledged of its space is
/// `largest_acked` (RFC 9000 §17.1 and §A.2 \[source\]): enough to represent more than
/// twice the distance to it, so the receiver's expansion ([`expand_pn`]) is unambiguous.
pub fn pn_len(pn: u64, largest_acked: Option<u64>) -> usize {
    let unacked = match largest_acked {
        Some(l) => pn.saturating_sub(l),
        None => pn.saturating_add(1),
    };
    let range = unacked.saturating_mul(2);
    (1..MAX_PN_LEN).find(|&n| range < 1u64 << (8 * n)).unwrap_or(MAX_PN_LEN)
}

/// Appends a header whose packet number field takes `pn_len` bytes (1–4; handshake
/// packets always use 4) with a zero placeholder (and a long header's Length as a 2-byte
/// placeholder); returns the packet number's offset. [`seal`] fills them in. `dcid` is the
/// peer's id (0 to [`MAX_CID_LEN`] bytes); a long header gets it as its source id too, and
/// an Initial packet an empty token ([`write_long_header`] sets them apart).
pub fn write_header(buf: &mut Vec<u8>, level: Level, dcid: &[u8], pn_len: usize) -> usize {
    match level {
        Level::OneRtt => {
            let pn_len = pn_len.clamp(1, MAX_PN_LEN);
            // The spin bit is never used (RFC 9000 §17.4 lets an endpoint disable it)
            // and is sent as 0.
            buf.push(0x40 | (pn_len - 1) as u8);
            buf.extend_from_slice(dcid);
            let at = buf.len();
            buf.resize(at + pn_len, 0);
            at
        }
        _ => write_long_header(buf, level, dcid, dcid, &[]),
    }
}

/// Appends an Initial or Handshake header (RFC 9000 §17.2.2, §17.2.4) sent to `dcid` from
/// `scid` (each 0 to [`MAX_CID_LEN`] bytes), an Initial's carrying `token` (at most
/// [`MAX_TOKEN_LEN`] bytes; a longer one is sent empty, which a server treats as no token;
/// a Handshake header has none), with [`HANDSHAKE_PN_LEN`]-byte packet number and Length
/// placeholders; returns the packet number's offset. A 1-RTT level writes
/// [`write_header`]'s short header to `dcid`.
pub fn write_long_header(
    buf: &mut Vec<u8>,
    level: Level,
    dcid: &[u8],
    scid: &[u8],
    token: &[u8],
) -> usize {
    let t = match level {
        Level::Initial => TYPE_INITIAL,
        Level::Handshake => TYPE_HANDSHAKE,
        Level::OneRtt => return write_header(buf, level, dcid, HANDSHAKE_PN_LEN),
    };
    buf.push(0xC0 | (t << 4) | (HANDSHAKE_PN_LEN - 1) as u8);
    buf.extend_from_slice(&VERSION.to_be_bytes());
    // Destination and source ids, each after its length (RFC 8999 §5.1).
    for id in [dcid, scid] {
        buf.push(id.len().min(MAX_CID_LEN) as u8);
        buf.extend_from_slice(&id[..id.len().min(MAX_CID_LEN)]);
    }
    if level == Level::Initial {
        let token = if token.len() <= MAX_TOKEN_LEN { token } else { &[] };
        put_varint(buf, token.len() as u64);
        buf.extend_from_slice(token);
    }
    // Length: a 2-byte varint [`seal`] fills in.
    buf.extend_from_slice(&[0x40, 0x00]);
    let at = buf.len();
    buf.resize(at + HANDSHAKE_PN_LEN, 0);
    at
}

/// Bytes a header with a `pn_len`-byte packet number takes, with the AEAD tag: what a
/// packet costs beyond its frames.
pub fn overhead(level: Level, pn_len: usize) -> usize {
    let mut b = Vec::with_capacity(32);
    write_header(&mut b, level, &[0; CID_LEN], pn_len);
    b.len() + TAG_LEN
}

/// One direction's keys of one level.
pub struct DirectionKeys {
    /// Payload AEAD.
    pub packet: Box<dyn PacketKey>,
    /// Header protection.
    pub header: Box<dyn HeaderProtectionKey>,
}

impl fmt::Debug for DirectionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DirectionKeys")
    }
}

impl From<rustls::quic::DirectionalKeys> for DirectionKeys {
    fn from(k: rustls::quic::DirectionalKeys) -> Self {
        DirectionKeys { packet: k.packet, header: k.header }
    }
}

/// Why a packet could not be sealed or opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProtectionError {
    /// Too short, or the header does not fit.
    #[error("malformed protected packet")]
    Malformed,
    /// Authentication failed.
    #[error("packet failed authentication")]
    Unauthenticated,
}

/// The packet number field's length, from a first byte without header protection.
fn pn_len_of(first: u8) -> usize {
    usize::from(first & 0x03) + 1
}

/// Seals the packet in `buf` (header written by [`write_header`] at `pn_offset`, then the
/// plaintext payload): writes the packet number's low bytes into the field, pads the
/// payload with PADDING (0x00) if it is too short for the header-protection sample
/// (RFC 9001 §5.4.2: packet number and payload together at least 4 bytes), encrypts it
/// with the header as associated data, appends the tag and applies header protection.
/// 1-RTT packets use the multipath nonce of (`path`, `pn`) (RFC 10069) and carry
/// `key_phase` in the key phase bit (RFC 9001 §6).
#[allow(clippy::too_many_arguments)]
pub fn seal(
    keys: &DirectionKeys,
    level: Level,
    path: PathId,
    pn: u64,
    pn_offset: usize,
    buf: &mut Vec<u8>,
    key_phase: bool,
) -> Result<(), ProtectionError> {
    let Some(&first) = buf.first() else {
        return Err(ProtectionError::Malformed);
    };
    let pn_len = pn_len_of(first);
    let hdr_end = pn_offset + pn_len;
    if buf.len() < hdr_end {
        return Err(ProtectionError::Malformed);
    }
    if buf.len() < pn_offset + MAX_PN_LEN {
        buf.resize(pn_offset + MAX_PN_LEN, 0);
    }
    if level == Level::OneRtt && key_phase {
        buf[0] |= KEY_PHASE;
    }
    if level != Level::OneRtt {
        // Length: packet number, payload and tag, in the 2-byte varint `write_header` left.
        let length = buf.len() - pn_offset + TAG_LEN;
        if pn_offset < 2 || length > MAX_LONG_LENGTH {
            return Err(ProtectionError::Malformed);
        }
        buf[pn_offset - 2..pn_offset].copy_from_slice(&(length as u16 | 0x4000).to_be_bytes());
    }
    let pn_bytes = pn.to_be_bytes();
    buf[pn_offset..hdr_end].copy_from_slice(&pn_bytes[8 - pn_len..]);
    let (header, payload) = buf.split_at_mut(hdr_end);
    let tag = match level {
        Level::OneRtt => keys.packet.encrypt_in_place_for_path(path.0, pn, header, payload),
        _ => keys.packet.encrypt_in_place(pn, header, payload),
    }
    .map_err(|_| ProtectionError::Malformed)?;
    buf.extend_from_slice(tag.as_ref());
    let sample_at = pn_offset + MAX_PN_LEN;
    if buf.len() < sample_at + SAMPLE_LEN {
        return Err(ProtectionError::Malformed);
    }
    let sample = fixed::<SAMPLE_LEN>(&buf[sample_at..sample_at + SAMPLE_LEN]);
    let (first, rest) = buf.split_at_mut(1);
    keys.header
        .encrypt_in_place(&sample, &mut first[0], &mut rest[pn_offset - 1..hdr_end - 1])
        .map_err(|_| ProtectionError::Malformed)
}

/// Expands a truncated packet number against the largest received on its space (RFC 9000
/// §A.3 \[source\]).
pub fn expand_pn(largest: Option<u64>, truncated: u64, bits: u32) -> u64 {
    let expected = largest.map_or(0, |l| l + 1);
    let win = 1u64 << bits;
    let hwin = win / 2;
    let mask = win - 1;
    let candidate = (expected & !mask) | truncated;
    if candidate + hwin <= expected && candidate < (1u64 << 62) - win {
        candidate + win
    } else if candidate > expected + hwin && candidate >= win {
        candidate - win
    } else {
        candidate
    }
}

/// Opens the protected packet in `datagram` (modified in place): removes header protection,
/// expands the packet number against `largest` and decrypts. Returns the full packet number
/// and the plaintext payload's range in `datagram`. The key phase bit is not looked at
/// (see [`unprotect`] and [`decrypt`] for 1-RTT packets across key updates); nor are the
/// reserved bits ([`reserved_bits_set`], for after authentication).
pub fn open(
    keys: &DirectionKeys,
    header: &PlainHeader,
    largest: Option<u64>,
    datagram: &mut [u8],
) -> Result<(u64, std::ops::Range<usize>), ProtectionError> {
    let (pn, _) = unprotect(keys.header.as_ref(), header, largest, datagram)?;
    let range = decrypt(keys.packet.as_ref(), header, pn, datagram)?;
    Ok((pn, range))
}

/// Removes header protection in place and expands the packet number (1–4 bytes, as the
/// unmasked first byte says) against `largest`; returns it and the key phase bit (always
/// false for long headers).
pub fn unprotect(
    hp: &dyn HeaderProtectionKey,
    header: &PlainHeader,
    largest: Option<u64>,
    datagram: &mut [u8],
) -> Result<(u64, bool), ProtectionError> {
    let datagram = datagram.get_mut(..header.end).ok_or(ProtectionError::Malformed)?;
    let pn_offset = header.pn_offset;
    let sample_at = pn_offset + MAX_PN_LEN;
    if datagram.len() < sample_at + SAMPLE_LEN {
        return Err(ProtectionError::Malformed);
    }
    let sample = fixed::<SAMPLE_LEN>(&datagram[sample_at..sample_at + SAMPLE_LEN]);
    {
        // The mask covers as many packet number bytes as the unmasked first byte says.
        let (first, rest) = datagram.split_at_mut(1);
        hp.decrypt_in_place(&sample, &mut first[0], &mut rest[pn_offset - 1..sample_at - 1])
            .map_err(|_| ProtectionError::Malformed)?;
    }
    let pn_len = pn_len_of(datagram[0]);
    let phase = header.level == Level::OneRtt && datagram[0] & KEY_PHASE != 0;
    let mut truncated = 0u64;
    for &b in &datagram[pn_offset..pn_offset + pn_len] {
        truncated = (truncated << 8) | u64::from(b);
    }
    Ok((expand_pn(largest, truncated, 8 * pn_len as u32), phase))
}

/// Whether a packet whose header protection [`unprotect`] removed has a reserved bit set:
/// once the packet authenticated, a connection error of type PROTOCOL_VIOLATION (RFC 9000
/// §17.2 and §17.3.1).
pub fn reserved_bits_set(header: &PlainHeader, datagram: &[u8]) -> bool {
    let mask = if header.level == Level::OneRtt { SHORT_RESERVED } else { LONG_RESERVED };
    datagram.first().is_some_and(|b| b & mask != 0)
}

/// Decrypts the payload of a packet whose header protection [`unprotect`] removed; returns
/// the plaintext's range in `datagram`. On failure the payload bytes are unspecified.
pub fn decrypt(
    key: &dyn PacketKey,
    header: &PlainHeader,
    pn: u64,
    datagram: &mut [u8],
) -> Result<std::ops::Range<usize>, ProtectionError> {
    let datagram = datagram.get_mut(..header.end).ok_or(ProtectionError::Malformed)?;
    let Some(&first) = datagram.first() else {
        return Err(ProtectionError::Malformed);
    };
    let hdr_end = header.pn_offset + pn_len_of(first);
    if datagram.len() < hdr_end {
        return Err(ProtectionError::Malformed);
    }
    let (hdr, payload) = datagram.split_at_mut(hdr_end);
    let plain_len = match header.level {
        Level::OneRtt => key.decrypt_in_place_for_path(header.path.0, pn, hdr, payload),
        _ => key.decrypt_in_place(pn, hdr, payload),
    }
    .map_err(|_| ProtectionError::Unauthenticated)?
    .len();
    Ok(hdr_end..hdr_end + plain_len)
}

/// One chunk of a handshake packet's payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeChunk<'a> {
    /// TLS handshake bytes at `offset` of this level's stream.
    Crypto {
        /// Stream offset.
        offset: u64,
        /// The bytes.
        data: &'a [u8],
    },
    /// RFC 9000 §19.2's ACK: the packet numbers of this level's space that arrived, as
    /// inclusive ranges from the highest down (at most [`MAX_HANDSHAKE_ACK_RANGES`]). The
    /// ACK Delay is sent as 0 and ignored on receipt (the handshake takes no RTT samples);
    /// an ACK with ECN counts (0x03) is read as one without.
    Ack {
        /// `(smallest, largest)` ranges, descending and disjoint.
        ranges: Vec<(u64, u64)>,
    },
    /// RFC 9000 §19.2's PING: asks for an ACK (a client's probe).
    Ping,
    /// The sender closes the connection before it has 1-RTT keys (RFC 9000 §10.2.3's
    /// CONNECTION_CLOSE in a handshake packet, in §19.19's transport layout: code, frame
    /// type (sent as 0, ignored on receipt), reason): a failed TLS handshake (code `0x100 +`
    /// the TLS alert, §20.1 CRYPTO_ERROR), unusable transport parameters, or the
    /// application.
    Close {
        /// The error code.
        code: u64,
        /// Reason, at most [`super::frame::MAX_CLOSE_REASON`] bytes.
        reason: &'a [u8],
    },
}

const C_PADDING: u8 = 0x00;
const C_CRYPTO: u8 = 0x06;
const C_PING: u8 = 0x01;
const C_ACK: u8 = 0x02;
const C_ACK_ECN: u8 = 0x03;
const C_CLOSE: u8 = 0x1c;

/// Reads an ACK frame's body after its type (RFC 9000 §19.3): ranges, descending.
fn read_ack_ranges(r: &mut Reader<'_>) -> Result<Vec<(u64, u64)>, WireError> {
    let largest = r.varint()?;
    let _delay = r.varint()?;
    let count = r.varint()?;
    if count >= MAX_HANDSHAKE_ACK_RANGES as u64 {
        return Err(WireError::Invalid("ack range count"));
    }
    let first = r.varint()?;
    let mut lo = largest.checked_sub(first).ok_or(WireError::Invalid("ack range"))?;
    let mut ranges = vec![(lo, largest)];
    for _ in 0..count {
        let gap = r.varint()?;
        let len = r.varint()?;
        let hi = lo.checked_sub(gap + 2).ok_or(WireError::Invalid("ack gap"))?;
        lo = hi.checked_sub(len).ok_or(WireError::Invalid("ack range"))?;
        ranges.push((lo, hi));
    }
    Ok(ranges)
}

/// Most ACK ranges a handshake ACK carries or is read with (the handshake is a few packets
/// a side; more is a peer to refuse).
pub const MAX_HANDSHAKE_ACK_RANGES: usize = 32;

/// Longest address-validation token a client takes from a Retry, or an Initial header
/// may carry (Braid's own are 40 bytes; `super::retry`).
pub const MAX_TOKEN_LEN: usize = 256;

impl HandshakeChunk<'_> {
    /// Appends the chunk.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        match self {
            HandshakeChunk::Crypto { offset, data } => {
                buf.push(C_CRYPTO);
                put_varint(buf, *offset);
                put_varint(buf, data.len() as u64);
                buf.extend_from_slice(data);
            }
            HandshakeChunk::Ack { ranges } => {
                let ranges = &ranges[..ranges.len().min(MAX_HANDSHAKE_ACK_RANGES)];
                let Some(&(first_lo, largest)) = ranges.first() else { return };
                buf.push(C_ACK);
                put_varint(buf, largest);
                put_varint(buf, 0);
                // Ranges must descend with a gap between each (the callers' sets merge
                // adjacent ones); the count says how many follow, so they are checked
                // first and a bad list is sent as its first range alone.
                let ok =
                    ranges.windows(2).all(|w| w[1].1.checked_add(2).is_some_and(|h| h <= w[0].0))
                        && ranges.iter().all(|&(lo, hi)| lo <= hi);
                let rest = if ok { &ranges[1..] } else { &[] };
                put_varint(buf, rest.len() as u64);
                put_varint(buf, largest.saturating_sub(first_lo));
                let mut prev_lo = first_lo;
                for &(lo, hi) in rest {
                    // Gap: unacknowledged packets between, minus one (§19.3.1).
                    put_varint(buf, prev_lo - hi - 2);
                    put_varint(buf, hi - lo);
                    prev_lo = lo;
                }
            }
            HandshakeChunk::Ping => buf.push(C_PING),
            HandshakeChunk::Close { code, reason } => {
                let reason = &reason[..reason.len().min(super::frame::MAX_CLOSE_REASON)];
                buf.push(C_CLOSE);
                put_varint(buf, *code);
                put_varint(buf, 0);
                put_varint(buf, reason.len() as u64);
                buf.extend_from_slice(reason);
            }
        }
    }

    /// Decodes a handshake payload (padding bytes are skipped). Never panics.
    pub fn decode_all(payload: &[u8]) -> Result<Vec<HandshakeChunk<'_>>, WireError> {
        let mut r = Reader::new(payload);
        let mut out = Vec::new();
        while !r.is_empty() {
            match r.u8()? {
                C_PADDING => {}
                C_CRYPTO => {
                    let offset = r.varint()?;
                    let len = r.varint()?;
                    let len = usize::try_from(len).map_err(|_| WireError::Truncated)?;
                    let data = r.bytes(len)?;
                    if offset.checked_add(len as u64).is_none_or(|e| e > MAX_CRYPTO_STREAM) {
                        return Err(WireError::Invalid("crypto offset"));
                    }
                    out.push(HandshakeChunk::Crypto { offset, data });
                }
                C_PING => out.push(HandshakeChunk::Ping),
                t @ (C_ACK | C_ACK_ECN) => {
                    out.push(HandshakeChunk::Ack { ranges: read_ack_ranges(&mut r)? });
                    if t == C_ACK_ECN {
                        for _ in 0..3 {
                            r.varint()?;
                        }
                    }
                }
                C_CLOSE => {
                    let code = r.varint()?;
                    let _frame_type = r.varint()?;
                    let len = usize::try_from(r.varint()?).map_err(|_| WireError::Truncated)?;
                    if len > super::frame::MAX_CLOSE_REASON {
                        return Err(WireError::Invalid("close reason length"));
                    }
                    out.push(HandshakeChunk::Close { code, reason: r.bytes(len)? });
                }
                _ => return Err(WireError::Invalid("handshake chunk type")),
            }
        }
        Ok(out)
    }
}

/// Longest handshake stream per level accepted: a TLS flight with a certificate chain fits
/// well within it; more is an attack on memory.
pub const MAX_CRYPTO_STREAM: u64 = 64 * 1024;

/// The connection ids of a handshake as one side saw them, which the peer's transport
/// parameters must repeat (RFC 9000 §7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeIds {
    /// The source id of the peer's first Initial (`initial_source_connection_id`).
    pub initial_scid: LongCid,
    /// The destination id of the client's first Initial
    /// (`original_destination_connection_id`; a server's parameters only).
    pub original_dcid: LongCid,
    /// The source id of the Retry the client took, if it took one
    /// (`retry_source_connection_id`; a server's parameters only).
    pub retry_scid: Option<LongCid>,
}

/// The transport parameters Braid exchanges in the TLS handshake (RFC 9000 §18), on QUIC
/// v1's codepoints where v1 has the parameter, Braid's extensions on codepoints of their
/// own (`0x6272_00xx`, in the range RFC 9000 §22.3 leaves to first come, first served):
/// a peer that does not know them skips them, and one that does not send them gets
/// their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportParams {
    /// Initial receive window (absolute stream offset limit): v1's `initial_max_data`.
    /// Absent means 0.
    pub max_data: u64,
    /// `initial_max_stream_data_uni` (RFC 9000 §18.2): bytes the peer may send on each
    /// unidirectional stream it opens. Absent means 0. A message toward a peer without
    /// Braid's frames travels on one such stream ([`super::mapping`]), so none may be larger.
    pub max_stream_data_uni: u64,
    /// `initial_max_stream_data_bidi_local` (RFC 9000 §18.2): bytes the peer may send on
    /// each bidirectional stream the sender of the parameter opens. Absent means 0.
    pub max_stream_data_bidi_local: u64,
    /// `initial_max_stream_data_bidi_remote`: bytes the peer may send on each
    /// bidirectional stream the peer opens. Absent means 0.
    pub max_stream_data_bidi_remote: u64,
    /// `initial_max_streams_bidi`: bidirectional streams the peer may open (requests, with
    /// [`super::mapping::Mapping::Requests`]). Absent means 0; above 2^60 is invalid.
    pub max_streams_bidi: u64,
    /// `initial_max_streams_uni`: unidirectional streams the peer may open (messages it
    /// may send toward this side without Braid's frames). Absent means 0; above 2^60 is
    /// invalid.
    pub max_streams_uni: u64,
    /// The radio of the sender's path 0 (meaningful from the client). Absent means the
    /// default role.
    pub path_role: PathRole,
    /// The sender paces by the peer's RATE_FEEDBACK, so the peer reports it whatever its
    /// own profile ([`super::Config::wants_rate_feedback`]); absent means no.
    pub wants_rate_feedback: bool,
    /// The sender's idle timeout in milliseconds, 0 for none: RFC 9000 §18.2's
    /// `max_idle_timeout`; the connection uses the smaller of the two non-zero values
    /// (§10.1). Absent means 0.
    pub max_idle_timeout_ms: u64,
    /// The sender runs the streaming code (CODED, FEC_SOURCE and FEC_ACK frames, Braid's
    /// extension): the code is on only when both sides announce it. Absent means no.
    pub streaming_code: bool,
    /// `ack_delay_exponent` (RFC 9000 §18.2): the sender's ACK Delay fields count units of
    /// 2^this µs. Absent means 3; above 20 is invalid. Braid sends [`ACK_DELAY_EXPONENT`].
    pub ack_delay_exponent: u8,
    /// `initial_max_path_id` (RFC 10069): the largest path id the sender accepts at first;
    /// multipath is on when both sides send it. Absent means none (one path).
    pub initial_max_path_id: Option<u32>,
    /// `initial_source_connection_id`: the source id of the sender's Initial packets
    /// (both sides must send it, RFC 9000 §7.3).
    pub initial_scid: Option<LongCid>,
    /// `original_destination_connection_id`: the destination id of the client's first
    /// Initial (a server's only; 8 to 20 bytes).
    pub original_dcid: Option<LongCid>,
    /// `retry_source_connection_id`: the source id of the Retry the client took (a
    /// server's only, and only after a Retry).
    pub retry_scid: Option<LongCid>,
    /// `stateless_reset_token`: the token of the server's handshake id (RFC 9000 §10.3, a
    /// server's only), 16 bytes.
    pub stateless_reset_token: Option<[u8; super::reset::TOKEN_LEN]>,
    /// The sender speaks Braid's extension frames (DATA, READ_RATE, PLAYOUT, PATH_JOIN
    /// …, [`super::frame`]): they go only to a peer that announced it, so a QUIC stack
    /// without them never receives one. Absent means no.
    pub braid_frames: bool,
    /// `active_connection_id_limit` (RFC 9000 §18.2): most ids of the peer's the sender
    /// keeps (per path with multipath). Absent means 2, below 2 is invalid; Braid sends
    /// [`super::ACTIVE_CID_LIMIT`].
    pub active_cid_limit: u64,
    /// `disable_active_migration` (RFC 9000 §18.2, empty): the peer must not migrate away
    /// from the address used in the handshake. Braid never sends it.
    pub disable_active_migration: bool,
    /// A parameter only a server may send (the three ids above but the first,
    /// `stateless_reset_token`, `preferred_address`) was present.
    pub server_only: bool,
}

/// Why a peer's transport parameters are refused (TRANSPORT_PARAMETER_ERROR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransportParamsError {
    /// They do not parse, or a parameter is sent twice.
    #[error("malformed transport parameters: {0}")]
    Malformed(WireError),
    /// The connection ids they name are not the ones the handshake used (RFC 9000 §7.3:
    /// what authenticates the ids of the Initial and Retry packets).
    #[error("transport parameters name other connection ids than the handshake's ({0})")]
    ConnectionIds(&'static str),
    /// A client sent a parameter only a server may send.
    #[error("a client sent a server-only transport parameter")]
    ServerOnly,
}

/// The `ack_delay_exponent` Braid announces: its ACK Delay fields are in µs, as its
/// estimators keep them.
pub const ACK_DELAY_EXPONENT: u8 = 0;
/// A peer that does not announce an `ack_delay_exponent` uses 3 (RFC 9000 §18.2).
pub const DEFAULT_ACK_DELAY_EXPONENT: u8 = 3;
/// The largest `ack_delay_exponent` RFC 9000 §18.2 allows.
const MAX_ACK_DELAY_EXPONENT: u8 = 20;

const TP_ORIGINAL_DCID: u64 = 0x00;
const TP_MAX_IDLE_TIMEOUT: u64 = 0x01;
const TP_STATELESS_RESET_TOKEN: u64 = 0x02;
const TP_MAX_DATA: u64 = 0x04;
const TP_MAX_STREAM_DATA_BIDI_LOCAL: u64 = 0x05;
const TP_MAX_STREAM_DATA_BIDI_REMOTE: u64 = 0x06;
const TP_MAX_STREAM_DATA_UNI: u64 = 0x07;
const TP_MAX_STREAMS_BIDI: u64 = 0x08;
const TP_MAX_STREAMS_UNI: u64 = 0x09;
/// The most streams of one type a peer may allow (RFC 9000 §18.2).
const MAX_STREAMS_LIMIT: u64 = 1 << 60;
const TP_ACK_DELAY_EXPONENT: u64 = 0x0a;
const TP_DISABLE_ACTIVE_MIGRATION: u64 = 0x0c;
const TP_ACTIVE_CID_LIMIT: u64 = 0x0e;
/// `active_connection_id_limit` when absent, and its least valid value (RFC 9000 §18.2).
pub const DEFAULT_ACTIVE_CID_LIMIT: u64 = 2;
/// RFC 10069's `initial_max_path_id` (the codepoint noq 1.4 speaks).
const TP_INITIAL_MAX_PATH_ID: u64 = 0x3e;
const TP_PREFERRED_ADDRESS: u64 = 0x0d;
const TP_INITIAL_SCID: u64 = 0x0f;
const TP_RETRY_SCID: u64 = 0x10;
/// Braid's extension parameters: the path's radio, "report RATE_FEEDBACK", "runs the
/// streaming code".
const TP_PATH_ROLE: u64 = 0x6272_0001;
const TP_WANTS_RATE_FEEDBACK: u64 = 0x6272_0002;
const TP_STREAMING_CODE: u64 = 0x6272_0003;
/// "Speaks Braid's extension frames" (empty value).
const TP_BRAID_FRAMES: u64 = 0x6272_0004;

impl TransportParams {
    /// Encodes as (id, length, value) triples, as RFC 9000 §18 lays them out.
    pub fn encode(&self) -> Vec<u8> {
        fn put(out: &mut Vec<u8>, id: u64, value: &[u8]) {
            put_varint(out, id);
            put_varint(out, value.len() as u64);
            out.extend_from_slice(value);
        }
        let varint = |v: u64| {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            b
        };
        let mut out = Vec::new();
        if let Some(c) = self.original_dcid {
            put(&mut out, TP_ORIGINAL_DCID, c.as_slice());
        }
        if self.max_idle_timeout_ms > 0 {
            put(&mut out, TP_MAX_IDLE_TIMEOUT, &varint(self.max_idle_timeout_ms));
        }
        if let Some(t) = &self.stateless_reset_token {
            put(&mut out, TP_STATELESS_RESET_TOKEN, t);
        }
        put(&mut out, TP_MAX_DATA, &varint(self.max_data));
        if self.max_stream_data_bidi_local > 0 {
            put(&mut out, TP_MAX_STREAM_DATA_BIDI_LOCAL, &varint(self.max_stream_data_bidi_local));
        }
        if self.max_stream_data_bidi_remote > 0 {
            put(
                &mut out,
                TP_MAX_STREAM_DATA_BIDI_REMOTE,
                &varint(self.max_stream_data_bidi_remote),
            );
        }
        if self.max_streams_bidi > 0 {
            put(&mut out, TP_MAX_STREAMS_BIDI, &varint(self.max_streams_bidi));
        }
        if self.max_stream_data_uni > 0 {
            put(&mut out, TP_MAX_STREAM_DATA_UNI, &varint(self.max_stream_data_uni));
        }
        if self.max_streams_uni > 0 {
            put(&mut out, TP_MAX_STREAMS_UNI, &varint(self.max_streams_uni));
        }
        if self.ack_delay_exponent != DEFAULT_ACK_DELAY_EXPONENT {
            put(&mut out, TP_ACK_DELAY_EXPONENT, &varint(u64::from(self.ack_delay_exponent)));
        }
        if self.disable_active_migration {
            put(&mut out, TP_DISABLE_ACTIVE_MIGRATION, &[]);
        }
        if self.active_cid_limit != DEFAULT_ACTIVE_CID_LIMIT {
            put(&mut out, TP_ACTIVE_CID_LIMIT, &varint(self.active_cid_limit));
        }
        if let Some(c) = self.initial_scid {
            put(&mut out, TP_INITIAL_SCID, c.as_slice());
        }
        if let Some(c) = self.retry_scid {
            put(&mut out, TP_RETRY_SCID, c.as_slice());
        }
        if let Some(m) = self.initial_max_path_id {
            put(&mut out, TP_INITIAL_MAX_PATH_ID, &varint(u64::from(m)));
        }
        put(&mut out, TP_PATH_ROLE, &[role_code(self.path_role)]);
        if self.wants_rate_feedback {
            put(&mut out, TP_WANTS_RATE_FEEDBACK, &[]);
        }
        if self.streaming_code {
            put(&mut out, TP_STREAMING_CODE, &[]);
        }
        if self.braid_frames {
            put(&mut out, TP_BRAID_FRAMES, &[]);
        }
        out
    }

    /// Decodes; unknown parameters are skipped, absent ones take their defaults, a known
    /// one sent twice is an error (RFC 9000 §7.4), as is a connection id that is not 8
    /// bytes (Braid's ids all are).
    pub fn decode(bytes: &[u8]) -> Result<TransportParams, WireError> {
        let mut r = Reader::new(bytes);
        let mut tp = TransportParams {
            max_data: 0,
            max_stream_data_bidi_local: 0,
            max_stream_data_bidi_remote: 0,
            max_streams_bidi: 0,
            max_stream_data_uni: 0,
            max_streams_uni: 0,
            path_role: PathRole::default(),
            wants_rate_feedback: false,
            max_idle_timeout_ms: 0,
            streaming_code: false,
            ack_delay_exponent: DEFAULT_ACK_DELAY_EXPONENT,
            initial_max_path_id: None,
            initial_scid: None,
            original_dcid: None,
            retry_scid: None,
            stateless_reset_token: None,
            braid_frames: false,
            active_cid_limit: DEFAULT_ACTIVE_CID_LIMIT,
            disable_active_migration: false,
            server_only: false,
        };
        let mut seen: Vec<u64> = Vec::new();
        let cid = |v: &[u8]| LongCid::from_slice(v).ok_or(WireError::Invalid("connection id"));
        while !r.is_empty() {
            let id = r.varint()?;
            let len = usize::try_from(r.varint()?).map_err(|_| WireError::Truncated)?;
            let value = r.bytes(len)?;
            let mut vr = Reader::new(value);
            let known = matches!(
                id,
                TP_ORIGINAL_DCID
                    | TP_MAX_IDLE_TIMEOUT
                    | TP_STATELESS_RESET_TOKEN
                    | TP_MAX_DATA
                    | TP_MAX_STREAM_DATA_BIDI_LOCAL
                    | TP_MAX_STREAM_DATA_BIDI_REMOTE
                    | TP_MAX_STREAMS_BIDI
                    | TP_MAX_STREAM_DATA_UNI
                    | TP_MAX_STREAMS_UNI
                    | TP_ACK_DELAY_EXPONENT
                    | TP_DISABLE_ACTIVE_MIGRATION
                    | TP_ACTIVE_CID_LIMIT
                    | TP_INITIAL_MAX_PATH_ID
                    | TP_PREFERRED_ADDRESS
                    | TP_INITIAL_SCID
                    | TP_RETRY_SCID
                    | TP_PATH_ROLE
                    | TP_WANTS_RATE_FEEDBACK
                    | TP_STREAMING_CODE
                    | TP_BRAID_FRAMES
            );
            if known {
                if seen.contains(&id) {
                    return Err(WireError::Invalid("transport parameter sent twice"));
                }
                seen.push(id);
            }
            match id {
                TP_ORIGINAL_DCID => {
                    tp.original_dcid = Some(
                        LongCid::from_slice(value).ok_or(WireError::Invalid("connection id"))?,
                    );
                    tp.server_only = true;
                }
                TP_MAX_IDLE_TIMEOUT => tp.max_idle_timeout_ms = vr.varint()?,
                TP_STATELESS_RESET_TOKEN => {
                    let token = value.try_into().map_err(|_| WireError::Invalid("reset token"))?;
                    tp.stateless_reset_token = Some(token);
                    tp.server_only = true;
                }
                TP_PREFERRED_ADDRESS => tp.server_only = true,
                TP_MAX_DATA => tp.max_data = vr.varint()?,
                TP_MAX_STREAM_DATA_BIDI_LOCAL => tp.max_stream_data_bidi_local = vr.varint()?,
                TP_MAX_STREAM_DATA_BIDI_REMOTE => tp.max_stream_data_bidi_remote = vr.varint()?,
                TP_MAX_STREAMS_BIDI => {
                    tp.max_streams_bidi = vr.varint()?;
                    if tp.max_streams_bidi > MAX_STREAMS_LIMIT {
                        return Err(WireError::Invalid("initial_max_streams_bidi"));
                    }
                }
                TP_MAX_STREAM_DATA_UNI => tp.max_stream_data_uni = vr.varint()?,
                TP_MAX_STREAMS_UNI => {
                    tp.max_streams_uni = vr.varint()?;
                    if tp.max_streams_uni > MAX_STREAMS_LIMIT {
                        return Err(WireError::Invalid("initial_max_streams_uni"));
                    }
                }
                TP_INITIAL_MAX_PATH_ID => {
                    let m = u32::try_from(vr.varint()?)
                        .map_err(|_| WireError::Invalid("initial_max_path_id"))?;
                    tp.initial_max_path_id = Some(m);
                }
                TP_ACK_DELAY_EXPONENT => {
                    tp.ack_delay_exponent = u8::try_from(vr.varint()?)
                        .ok()
                        .filter(|&e| e <= MAX_ACK_DELAY_EXPONENT)
                        .ok_or(WireError::Invalid("ack_delay_exponent"))?;
                }
                TP_DISABLE_ACTIVE_MIGRATION => {
                    if !value.is_empty() {
                        return Err(WireError::Invalid("disable_active_migration"));
                    }
                    tp.disable_active_migration = true;
                }
                TP_ACTIVE_CID_LIMIT => {
                    tp.active_cid_limit = vr.varint()?;
                    if tp.active_cid_limit < DEFAULT_ACTIVE_CID_LIMIT {
                        return Err(WireError::Invalid("active_connection_id_limit"));
                    }
                }
                TP_INITIAL_SCID => tp.initial_scid = Some(cid(value)?),
                TP_RETRY_SCID => {
                    tp.retry_scid = Some(cid(value)?);
                    tp.server_only = true;
                }
                TP_PATH_ROLE => tp.path_role = role_from(vr.u8()?)?,
                TP_WANTS_RATE_FEEDBACK => tp.wants_rate_feedback = true,
                TP_STREAMING_CODE => tp.streaming_code = true,
                TP_BRAID_FRAMES => tp.braid_frames = true,
                _ => {}
            }
        }
        Ok(tp)
    }

    /// Checks a peer's parameters against the handshake (RFC 9000 §7.3 and §18.2):
    /// `from_server` says who sent them, `ids` what this side saw of the handshake (a
    /// server's parameters name all three ids, a client's only its own).
    pub fn check(&self, from_server: bool, ids: &HandshakeIds) -> Result<(), TransportParamsError> {
        if self.initial_scid != Some(ids.initial_scid) {
            return Err(TransportParamsError::ConnectionIds("initial_source_connection_id"));
        }
        if !from_server {
            return if self.server_only { Err(TransportParamsError::ServerOnly) } else { Ok(()) };
        }
        if self.original_dcid != Some(ids.original_dcid) {
            return Err(TransportParamsError::ConnectionIds("original_destination_connection_id"));
        }
        if self.retry_scid != ids.retry_scid {
            return Err(TransportParamsError::ConnectionIds("retry_source_connection_id"));
        }
        Ok(())
    }

    /// Parses and checks a peer's parameters ([`TransportParams::decode`], then
    /// [`TransportParams::check`]).
    pub fn from_peer(
        bytes: &[u8],
        from_server: bool,
        ids: &HandshakeIds,
    ) -> Result<TransportParams, TransportParamsError> {
        let tp = TransportParams::decode(bytes).map_err(TransportParamsError::Malformed)?;
        tp.check(from_server, ids)?;
        Ok(tp)
    }
}

/// What a client needs to authenticate a server.
#[derive(Clone)]
pub struct ClientCrypto {
    /// The rustls client configuration (TLS 1.3, QUIC-capable suites, ALPN [`ALPN`]).
    pub config: Arc<rustls::ClientConfig>,
    /// The name the certificate is checked against; `None`: the server's IP address.
    pub server_name: Option<ServerName<'static>>,
}

impl fmt::Debug for ClientCrypto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCrypto").field("server_name", &self.server_name).finish()
    }
}

/// What a server needs to prove its identity.
#[derive(Clone)]
pub struct ServerCrypto {
    /// The rustls server configuration (certificate and key, ALPN [`ALPN`]).
    pub config: Arc<rustls::ServerConfig>,
    /// The key of the endpoint's stateless reset tokens ([`super::reset`]).
    pub reset: super::reset::ResetKey,
}

impl fmt::Debug for ServerCrypto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServerCrypto")
    }
}

/// SHA-256 of a DER certificate: what `--server-cert-sha256` pins.
pub fn cert_fingerprint(cert: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, cert);
    fixed(d.as_ref())
}

/// Lower-case hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Accepts exactly the server certificate whose SHA-256 is `pin`, and checks the
/// handshake signatures against its key.
#[derive(Debug)]
pub struct PinnedCertVerifier {
    pin: [u8; 32],
    algorithms: WebPkiSupportedAlgorithms,
}

impl PinnedCertVerifier {
    /// A verifier for `pin`, checking signatures with `algorithms` (the provider's).
    pub fn new(pin: [u8; 32], algorithms: WebPkiSupportedAlgorithms) -> PinnedCertVerifier {
        PinnedCertVerifier { pin, algorithms }
    }
}

impl ServerCertVerifier for PinnedCertVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The pin is the identity: a byte-identical certificate, so name and validity
        // period were fixed by whoever gave the fingerprint.
        let fp = cert_fingerprint(end_entity.as_ref());
        if fp == self.pin {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "the server's certificate (sha256 {}) is not the pinned one (--server-cert-sha256)",
                to_hex(&fp)
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

// The randomness and time the deterministic provider hands rustls: the connection's own
// seeded generator and its `now`, installed around each call into rustls
// ([`with_scope`]). rustls wants `'static` providers, so the per-connection state cannot
// live in the provider itself.
thread_local! {
    static SCOPE: RefCell<Option<(ChaCha8Rng, Instant)>> = const { RefCell::new(None) };
}

/// Runs `f` (a call into rustls) with `rng` and `now` as what [`deterministic`] providers
/// draw from; `rng` advances by what was drawn. Providers drawing from the OS ignore it.
pub(crate) fn with_scope<R>(rng: &mut ChaCha8Rng, now: Instant, f: impl FnOnce() -> R) -> R {
    let prev = SCOPE.with(|s| s.replace(Some((rng.clone(), now))));
    let r = f();
    if let Some((used, _)) = SCOPE.with(|s| s.replace(prev)) {
        *rng = used;
    }
    r
}

/// Providers whose every draw comes from the connection's seeded generator and whose time
/// is the connection's virtual clock: the simulator's (and the tests') TLS, so that a run
/// is a pure function of its scenario and seed, handshakes included. Not for real networks:
/// a seed is not a secret.
pub mod deterministic {
    use super::*;

    /// Unix time of virtual instant zero (2026-01-01T00:00:00Z).
    const EPOCH_SECS: u64 = 1_767_225_600;

    #[derive(Debug)]
    struct ScopedRandom;

    impl SecureRandom for ScopedRandom {
        fn fill(&self, buf: &mut [u8]) -> Result<(), rustls::crypto::GetRandomFailed> {
            SCOPE.with(|s| match s.borrow_mut().as_mut() {
                Some((rng, _)) => {
                    rng.fill_bytes(buf);
                    Ok(())
                }
                None => Err(rustls::crypto::GetRandomFailed),
            })
        }
    }

    #[derive(Debug)]
    struct ScopedTime;

    impl rustls::time_provider::TimeProvider for ScopedTime {
        fn current_time(&self) -> Option<UnixTime> {
            let now = SCOPE.with(|s| s.borrow().as_ref().map(|(_, now)| *now))?;
            Some(UnixTime::since_unix_epoch(
                std::time::Duration::from_secs(EPOCH_SECS) + now.since_epoch(),
            ))
        }
    }

    /// X25519 with the private key drawn from the scoped generator.
    #[derive(Debug)]
    struct ScopedX25519;

    struct X25519Exchange {
        secret: x25519_dalek::StaticSecret,
        public: x25519_dalek::PublicKey,
    }

    impl SupportedKxGroup for ScopedX25519 {
        fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, rustls::Error> {
            let mut sk = [0u8; 32];
            ScopedRandom.fill(&mut sk)?;
            let secret = x25519_dalek::StaticSecret::from(sk);
            let public = x25519_dalek::PublicKey::from(&secret);
            Ok(Box::new(X25519Exchange { secret, public }))
        }

        fn name(&self) -> NamedGroup {
            NamedGroup::X25519
        }
    }

    impl ActiveKeyExchange for X25519Exchange {
        fn complete(self: Box<Self>, peer: &[u8]) -> Result<SharedSecret, rustls::Error> {
            let peer: [u8; 32] = peer
                .try_into()
                .map_err(|_| rustls::Error::from(rustls::PeerMisbehaved::InvalidKeyShare))?;
            let shared = self.secret.diffie_hellman(&x25519_dalek::PublicKey::from(peer));
            if !shared.was_contributory() {
                return Err(rustls::PeerMisbehaved::InvalidKeyShare.into());
            }
            Ok(SharedSecret::from(&shared.as_bytes()[..]))
        }

        fn pub_key(&self) -> &[u8] {
            self.public.as_bytes()
        }

        fn group(&self) -> NamedGroup {
            NamedGroup::X25519
        }
    }

    static RANDOM: ScopedRandom = ScopedRandom;
    static KX: ScopedX25519 = ScopedX25519;

    /// The provider: ring's AES-128-GCM suite and signature algorithms, the scoped
    /// generator and X25519 key exchange.
    pub fn provider() -> CryptoProvider {
        provider_with(Protection::Aead)
    }

    /// As [`provider`], with the packet protection `protection` asks for.
    pub fn provider_with(protection: Protection) -> CryptoProvider {
        let ring = rustls::crypto::ring::default_provider();
        let suite = match protection {
            Protection::Aead => rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256,
            Protection::Null => super::null::suite(),
        };
        CryptoProvider {
            cipher_suites: vec![suite],
            kx_groups: vec![&KX],
            signature_verification_algorithms: ring.signature_verification_algorithms,
            secure_random: &RANDOM,
            key_provider: ring.key_provider,
        }
    }

    /// PKCS#8 v1 of an Ed25519 private key (RFC 8410 §7 \[source\]: a fixed prefix and the
    /// 32-byte seed).
    fn ed25519_pkcs8(seed: &[u8; 32]) -> Vec<u8> {
        let mut der = vec![
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20,
        ];
        der.extend_from_slice(seed);
        der
    }

    /// A deterministic server identity: an Ed25519 self-signed certificate for "braid"
    /// made from `seed` (Ed25519 signatures are deterministic), and its fingerprint.
    pub fn server(seed: u64) -> (ServerCrypto, [u8; 32]) {
        server_with(seed, Protection::Aead)
    }

    /// As [`server`], with the packet protection `protection` asks for.
    pub fn server_with(seed: u64, protection: Protection) -> (ServerCrypto, [u8; 32]) {
        let mut rng = <ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed ^ 0x6365_7274);
        let mut key_seed = [0u8; 32];
        rng.fill_bytes(&mut key_seed);
        let pkcs8 = ed25519_pkcs8(&key_seed);
        let key_der = rustls::pki_types::PrivatePkcs8KeyDer::from(pkcs8.clone());
        let key = rcgen::KeyPair::from_pkcs8_der_and_sign_algo(&key_der, &rcgen::PKCS_ED25519)
            .expect("a well-formed Ed25519 key");
        let params = rcgen::CertificateParams::new(vec!["braid".to_owned()]).expect("a valid name");
        let cert = params.self_signed(&key).expect("self-signing with a valid key");
        let der = cert.der().clone();
        let fp = cert_fingerprint(der.as_ref());
        let mut config =
            rustls::ServerConfig::builder_with_provider(Arc::new(provider_with(protection)))
                .with_protocol_versions(&[&rustls::version::TLS13])
                .expect("TLS 1.3 is supported")
                .with_no_client_auth()
                .with_single_cert(vec![der], rustls::pki_types::PrivateKeyDer::Pkcs8(key_der))
                .expect("the certificate matches its key");
        config.alpn_protocols = vec![ALPN.to_vec()];
        config.send_tls13_tickets = 0;
        let reset = crate::proto::reset::ResetKey::derive(&seed.to_be_bytes());
        (ServerCrypto { config: Arc::new(config), reset }, fp)
    }

    /// A client that pins the certificate `fingerprint` (from [`server`]).
    pub fn client(fingerprint: [u8; 32]) -> ClientCrypto {
        client_with(fingerprint, Protection::Aead)
    }

    /// As [`client`], with the packet protection `protection` asks for.
    pub fn client_with(fingerprint: [u8; 32], protection: Protection) -> ClientCrypto {
        let p = Arc::new(provider_with(protection));
        let verifier =
            Arc::new(PinnedCertVerifier::new(fingerprint, p.signature_verification_algorithms));
        let mut config = rustls::ClientConfig::builder_with_details(p, Arc::new(ScopedTime))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3 is supported")
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        config.alpn_protocols = vec![ALPN.to_vec()];
        config.resumption = rustls::client::Resumption::disabled();
        ClientCrypto {
            config: Arc::new(config),
            server_name: Some(ServerName::try_from("braid").expect("a valid name")),
        }
    }

    /// A matching pair for tests and the simulator.
    pub fn pair(seed: u64) -> (ClientCrypto, ServerCrypto) {
        pair_with(seed, Protection::Aead)
    }

    /// As [`pair`], with the packet protection `protection` asks for.
    pub fn pair_with(seed: u64, protection: Protection) -> (ClientCrypto, ServerCrypto) {
        let (server, fp) = server_with(seed, protection);
        (client_with(fp, protection), server)
    }
}

/// How the deterministic providers protect Handshake and 1-RTT packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protection {
    /// AES-128-GCM and AES header protection, as on a real network.
    #[default]
    Aead,
    /// The [`null`] cipher: the same handshake, key schedule, packet sizes and code paths,
    /// without the cipher work.
    Null,
}

/// A null packet cipher for the simulator (`braid sim` without `--protect`).
///
/// The TLS 1.3 handshake runs unchanged (same suite id, HKDF and key schedule, so the same
/// handshake bytes and key updates); only the QUIC packet protection it hands out differs:
/// the payload stays plaintext, the 16 tag bytes are present and zero (a packet whose tag
/// is not zero fails authentication, so junk is still counted and dropped), header
/// protection is the identity mask, and the confidentiality and integrity limits are
/// AES-128-GCM's. Packet sizes, and so every simulated result, are those of the real
/// cipher; the bytes on a simulated wire are not. Initial packets keep their real
/// protection (they are derived from the version's fixed salt, not from this suite).
/// Never for a real network: it protects nothing.
pub mod null {
    use std::sync::OnceLock;

    use rustls::crypto::cipher::{AeadKey, Iv};
    use rustls::quic::{Algorithm, HeaderProtectionKey, PacketKey, Tag};
    use rustls::{SupportedCipherSuite, Tls13CipherSuite};

    use super::{SAMPLE_LEN, TAG_LEN};

    /// AES-128-GCM's QUIC packet limits (RFC 9001 §6.6 \[source\]).
    const CONFIDENTIALITY_LIMIT: u64 = 1 << 23;
    const INTEGRITY_LIMIT: u64 = 1 << 52;

    struct NullAlgorithm;
    struct NullPacketKey;
    struct NullHeaderKey;

    impl Algorithm for NullAlgorithm {
        fn packet_key(&self, _key: AeadKey, _iv: Iv) -> Box<dyn PacketKey> {
            Box::new(NullPacketKey)
        }

        fn header_protection_key(&self, _key: AeadKey) -> Box<dyn HeaderProtectionKey> {
            Box::new(NullHeaderKey)
        }

        fn aead_key_len(&self) -> usize {
            16
        }
    }

    impl NullPacketKey {
        fn open(payload: &mut [u8]) -> Result<&[u8], rustls::Error> {
            let Some(plain) = payload.len().checked_sub(TAG_LEN) else {
                return Err(rustls::Error::DecryptError);
            };
            if payload[plain..].iter().any(|&b| b != 0) {
                return Err(rustls::Error::DecryptError);
            }
            Ok(&payload[..plain])
        }
    }

    impl PacketKey for NullPacketKey {
        fn encrypt_in_place(
            &self,
            _pn: u64,
            _h: &[u8],
            _p: &mut [u8],
        ) -> Result<Tag, rustls::Error> {
            Ok(Tag::from(&[0u8; TAG_LEN][..]))
        }

        fn encrypt_in_place_for_path(
            &self,
            _path: u32,
            _pn: u64,
            _h: &[u8],
            _p: &mut [u8],
        ) -> Result<Tag, rustls::Error> {
            Ok(Tag::from(&[0u8; TAG_LEN][..]))
        }

        fn decrypt_in_place<'a>(
            &self,
            _pn: u64,
            _h: &[u8],
            payload: &'a mut [u8],
        ) -> Result<&'a [u8], rustls::Error> {
            Self::open(payload)
        }

        fn decrypt_in_place_for_path<'a>(
            &self,
            _path: u32,
            _pn: u64,
            _h: &[u8],
            payload: &'a mut [u8],
        ) -> Result<&'a [u8], rustls::Error> {
            Self::open(payload)
        }

        fn tag_len(&self) -> usize {
            TAG_LEN
        }

        fn confidentiality_limit(&self) -> u64 {
            CONFIDENTIALITY_LIMIT
        }

        fn integrity_limit(&self) -> u64 {
            INTEGRITY_LIMIT
        }
    }

    impl HeaderProtectionKey for NullHeaderKey {
        fn encrypt_in_place(
            &self,
            _s: &[u8],
            _first: &mut u8,
            _pn: &mut [u8],
        ) -> Result<(), rustls::Error> {
            Ok(())
        }

        fn decrypt_in_place(
            &self,
            _s: &[u8],
            _first: &mut u8,
            _pn: &mut [u8],
        ) -> Result<(), rustls::Error> {
            Ok(())
        }

        fn sample_len(&self) -> usize {
            SAMPLE_LEN
        }
    }

    static ALGORITHM: NullAlgorithm = NullAlgorithm;

    /// TLS_AES_128_GCM_SHA256 with the null QUIC packet protection.
    pub fn suite() -> SupportedCipherSuite {
        static SUITE: OnceLock<Tls13CipherSuite> = OnceLock::new();
        let suite = SUITE.get_or_init(|| {
            let real = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
                .tls13()
                .expect("a TLS 1.3 suite");
            Tls13CipherSuite {
                common: rustls::CipherSuiteCommon {
                    suite: real.common.suite,
                    hash_provider: real.common.hash_provider,
                    confidentiality_limit: real.common.confidentiality_limit,
                },
                hkdf_provider: real.hkdf_provider,
                aead_alg: real.aead_alg,
                quic: Some(&ALGORITHM),
            }
        });
        SupportedCipherSuite::Tls13(suite)
    }
}

/// The quic suite used for Initial keys (AES-128-GCM, RFC 9001 §5.2 \[source\]).
pub(crate) fn initial_suite() -> rustls::quic::Suite {
    let s = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256;
    let tls13 = s.tls13().expect("a TLS 1.3 suite");
    rustls::quic::Suite { suite: tls13, quic: tls13.quic.expect("the suite supports QUIC") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(cid: u64) -> (DirectionKeys, DirectionKeys) {
        let k = initial_suite().keys(
            &cid.to_be_bytes(),
            rustls::Side::Client,
            rustls::quic::Version::V1,
        );
        (k.local.into(), k.remote.into())
    }

    /// The keys a server opens a client's Initial packets of connection `cid` with.
    fn server_opens(cid: u64) -> DirectionKeys {
        initial_suite()
            .keys(&cid.to_be_bytes(), rustls::Side::Server, rustls::quic::Version::V1)
            .remote
            .into()
    }

    #[test]
    fn handshake_chunks_round_trip_and_a_long_close_reason_is_refused() {
        let chunks = [
            HandshakeChunk::Crypto { offset: 5, data: b"hello" },
            HandshakeChunk::Ack { ranges: vec![(7, 9), (2, 4), (0, 0)] },
            HandshakeChunk::Close { code: 0x12a, reason: b"bad certificate" },
        ];
        let mut buf = Vec::new();
        for c in &chunks {
            c.encode(&mut buf);
        }
        buf.extend_from_slice(&[0; 7]);
        assert_eq!(HandshakeChunk::decode_all(&buf).unwrap(), chunks);
        // The encoder cuts a long reason; a decoder refuses one longer than the bound.
        let long = vec![b'x'; 1000];
        let mut buf = Vec::new();
        HandshakeChunk::Close { code: 1, reason: &long }.encode(&mut buf);
        let back = HandshakeChunk::decode_all(&buf).unwrap();
        assert!(
            matches!(back[0], HandshakeChunk::Close { code: 1, reason } if reason.len() == 256)
        );
        // RFC 9000 §19.19's layout: type, code, frame type, reason length, reason.
        assert_eq!(&buf[..4], &[0x1c, 0x01, 0x00, 0x41]);
        let mut forged = vec![0x1c, 0x01, 0x00];
        put_varint(&mut forged, 1000);
        forged.extend_from_slice(&long);
        assert!(HandshakeChunk::decode_all(&forged).is_err());
    }

    #[test]
    fn handshake_acks_are_rfc9000_ack_frames() {
        let mut buf = Vec::new();
        HandshakeChunk::Ack { ranges: vec![(7, 9), (2, 4), (0, 0)] }.encode(&mut buf);
        // Type, largest 9, delay 0, 2 more ranges, first range 2; gap 1, length 2; gap 0,
        // length 0 (RFC 9000 §19.3).
        assert_eq!(buf, [0x02, 9, 0, 2, 2, 1, 2, 0, 0]);
        // With ECN counts (0x03), read as without.
        let mut ecn = buf.clone();
        ecn[0] = 0x03;
        ecn.extend_from_slice(&[1, 2, 3]);
        assert_eq!(HandshakeChunk::decode_all(&ecn), HandshakeChunk::decode_all(&buf));
        // A range below packet 0, a gap past it, or too many ranges: refused.
        assert!(HandshakeChunk::decode_all(&[0x02, 3, 0, 0, 4]).is_err());
        assert!(HandshakeChunk::decode_all(&[0x02, 3, 0, 1, 0, 2, 0]).is_err());
        let mut many = vec![0x02, 0x44, 0x00, 0, 0x40, MAX_HANDSHAKE_ACK_RANGES as u8, 0];
        many.extend(std::iter::repeat_n(0, 2 * MAX_HANDSHAKE_ACK_RANGES));
        assert!(HandshakeChunk::decode_all(&many).is_err());
        // Adjacent or unordered ranges are never encoded as a bad gap: the first alone goes.
        let mut buf = Vec::new();
        HandshakeChunk::Ack { ranges: vec![(5, 9), (3, 4)] }.encode(&mut buf);
        assert_eq!(
            HandshakeChunk::decode_all(&buf).unwrap(),
            vec![HandshakeChunk::Ack { ranges: vec![(5, 9)] }]
        );
        assert_eq!(HandshakeChunk::decode_all(&[0x01]).unwrap(), vec![HandshakeChunk::Ping]);
    }

    #[test]
    fn pn_expansion_follows_rfc9000_example() {
        // RFC 9000 §A.3: largest 0xa82f30ea, truncated 0x9b32 (16 bits) → 0xa82f9b32.
        assert_eq!(expand_pn(Some(0xa82f_30ea), 0x9b32, 16), 0xa82f_9b32);
        assert_eq!(expand_pn(None, 0, 32), 0);
        assert_eq!(expand_pn(Some((1 << 32) + 5), 3, 32), (1 << 32) + 3);
        assert_eq!(expand_pn(Some((1 << 32) - 2), 1, 32), (1 << 32) + 1);
    }

    #[test]
    fn pn_length_follows_rfc9000_examples() {
        // RFC 9000 §A.2: 0xac5c02 after an ACK of 0xabe8b3 needs 16 bits; 0xace8fe, 24.
        assert_eq!(pn_len(0xac_5c02, Some(0xab_e8b3)), 2);
        assert_eq!(pn_len(0xac_e8fe, Some(0xab_e8b3)), 3);
        assert_eq!(pn_len(0, None), 1);
        assert_eq!(pn_len(127, None), 2, "128 unacknowledged need more than 8 bits");
        assert_eq!(pn_len(126, None), 1);
        assert_eq!(pn_len(1 << 40, Some(0)), 4, "never more than 4 bytes");
    }

    #[test]
    fn every_packet_number_length_opens_and_expands() {
        let (client, _) = keys(42);
        let server_remote = server_opens(42);
        // (largest acknowledged by the receiver, packet number sent)
        for (largest, pn) in [
            (None, 0),
            (Some(5), 9),
            (Some(0x1234), 0x1300),
            (Some(1 << 20), (1 << 20) + 70_000),
            (Some(1 << 33), (1 << 33) + (1 << 22)),
        ] {
            let len = pn_len(pn, largest);
            let mut buf = Vec::new();
            let at = write_header(&mut buf, Level::OneRtt, &42u64.to_be_bytes(), len);
            assert_eq!(buf.len(), 1 + CID_LEN + len);
            // A one-byte payload: sealing pads it for the header-protection sample.
            buf.push(0x01);
            seal(&client, Level::OneRtt, PathId(2), pn, at, &mut buf, false).unwrap();
            assert!(buf.len() >= at + 4 + SAMPLE_LEN);
            let h = PlainHeader::parse(&buf).unwrap().on_path(PathId(2));
            let (got, range) = open(&server_remote, &h, largest, &mut buf).unwrap();
            assert_eq!(got, pn, "length {len}");
            assert_eq!(buf[range.start], 0x01);
            assert!(buf[range].iter().skip(1).all(|&b| b == 0), "padding is PADDING");
        }
    }

    #[test]
    fn sealed_packets_open_and_any_flipped_bit_fails() {
        let (client, _) = keys(42);
        let server_remote = server_opens(42);
        for (level, len) in [(Level::Initial, 4), (Level::OneRtt, 1), (Level::OneRtt, 4)] {
            let mut buf = Vec::new();
            let at = write_header(&mut buf, level, &42u64.to_be_bytes(), len);
            buf.extend_from_slice(b"payload bytes");
            seal(&client, level, PathId(3), 7, at, &mut buf, false).unwrap();
            let mut copy = buf.clone();
            let h = PlainHeader::parse(&copy).unwrap();
            assert_eq!((h.level, h.connection_id), (level, 42));
            let path = if level == Level::OneRtt { PathId(3) } else { PathId(0) };
            let h = h.on_path(path);
            let (pn, range) = open(&server_remote, &h, None, &mut copy).unwrap();
            assert_eq!(pn, 7);
            assert_eq!(&copy[range], b"payload bytes");
            assert!(!reserved_bits_set(&h, &copy));
            for i in 0..buf.len() {
                let mut bad = buf.clone();
                bad[i] ^= 0x01;
                let ok = PlainHeader::parse(&bad)
                    .ok()
                    .and_then(|h| open(&server_remote, &h.on_path(path), None, &mut bad).ok());
                assert!(ok.is_none(), "byte {i} flipped still opened");
            }
            // The nonce of another path does not open it.
            let mut other = buf.clone();
            if level == Level::OneRtt {
                let h = PlainHeader::parse(&other).unwrap().on_path(PathId(4));
                assert!(open(&server_remote, &h, None, &mut other).is_err());
            }
        }
    }

    #[test]
    fn long_headers_carry_token_and_length_and_coalesce() {
        let (client, _) = keys(42);
        let server_remote = server_opens(42);
        // An Initial with a token, a Handshake packet and a 1-RTT packet in one datagram
        // (RFC 9000 §12.2): each header ends where its Length says.
        let mut datagram = Vec::new();
        let mut packet = Vec::new();
        let at = write_long_header(&mut packet, Level::Initial, &[42; 8], &[42; 8], b"a token");
        packet.extend_from_slice(b"initial payload");
        seal(&client, Level::Initial, PathId(0), 0, at, &mut packet, false).unwrap();
        let first_len = packet.len();
        datagram.extend_from_slice(&packet);
        packet.clear();
        let at = write_header(&mut packet, Level::Handshake, &42u64.to_be_bytes(), 4);
        packet.extend_from_slice(b"handshake payload");
        seal(&client, Level::Handshake, PathId(0), 1, at, &mut packet, false).unwrap();
        let second_len = packet.len();
        datagram.extend_from_slice(&packet);
        packet.clear();
        let at = write_header(&mut packet, Level::OneRtt, &42u64.to_be_bytes(), 1);
        packet.extend_from_slice(b"1-rtt payload");
        seal(&client, Level::OneRtt, PathId(0), 2, at, &mut packet, false).unwrap();
        datagram.extend_from_slice(&packet);

        let h = PlainHeader::parse(&datagram).unwrap();
        assert_eq!((h.level, h.end), (Level::Initial, first_len));
        assert_eq!(h.token(&datagram), b"a token");
        let mut d = datagram.clone();
        let (pn, range) = open(&server_remote, &h, None, &mut d).unwrap();
        assert_eq!((pn, &d[range]), (0, &b"initial payload"[..]));

        let rest = &datagram[first_len..];
        let h = PlainHeader::parse(rest).unwrap();
        assert_eq!((h.level, h.end, h.token(rest)), (Level::Handshake, second_len, &b""[..]));
        let mut d = rest.to_vec();
        let (pn, range) = open(&server_remote, &h, None, &mut d).unwrap();
        assert_eq!((pn, &d[range]), (1, &b"handshake payload"[..]));

        let rest = &rest[second_len..];
        let h = PlainHeader::parse(rest).unwrap();
        assert_eq!((h.level, h.end), (Level::OneRtt, rest.len()));
        let mut d = rest.to_vec();
        let (pn, range) = open(&server_remote, &h, None, &mut d).unwrap();
        assert_eq!((pn, &d[range]), (2, &b"1-rtt payload"[..]));

        // A Length past the datagram's end, or too short for the sample, is refused.
        let mut bad = datagram[..first_len].to_vec();
        bad.truncate(first_len - 1);
        assert_eq!(PlainHeader::parse(&bad), Err(WireError::Truncated));
        // A token longer than any Braid issues is refused.
        let mut long = Vec::new();
        long.push(0xC3);
        long.extend_from_slice(&VERSION.to_be_bytes());
        for _ in 0..2 {
            long.push(8);
            long.extend_from_slice(&42u64.to_be_bytes());
        }
        put_varint(&mut long, MAX_TOKEN_LEN as u64 + 1);
        long.resize(1200, 0);
        assert_eq!(PlainHeader::parse(&long), Err(WireError::Invalid("token length")));
    }

    #[test]
    fn a_reserved_bit_is_seen_once_protection_is_removed() {
        let (client, _) = keys(42);
        let server_remote = server_opens(42);
        for (level, bit) in [(Level::OneRtt, 0x08), (Level::OneRtt, 0x10), (Level::Handshake, 0x04)]
        {
            let mut buf = Vec::new();
            let at = write_header(&mut buf, level, &42u64.to_be_bytes(), 2);
            buf[0] |= bit;
            buf.extend_from_slice(b"payload");
            seal(&client, level, PathId(0), 3, at, &mut buf, false).unwrap();
            let h = PlainHeader::parse(&buf).unwrap();
            let (pn, _) = open(&server_remote, &h, None, &mut buf).unwrap();
            assert_eq!(pn, 3);
            assert!(reserved_bits_set(&h, &buf), "level {level:?} bit {bit:#x}");
        }
    }

    #[test]
    fn transport_params_round_trip_and_reject_garbage() {
        let p = TransportParams {
            max_data: 1 << 40,
            max_stream_data_bidi_local: 5,
            max_stream_data_bidi_remote: 6,
            max_streams_bidi: 8,
            max_stream_data_uni: 1 << 20,
            max_streams_uni: 1 << 60,
            path_role: PathRole::Lte,
            wants_rate_feedback: true,
            max_idle_timeout_ms: 30_000,
            streaming_code: true,
            ack_delay_exponent: 0,
            initial_max_path_id: Some(7),
            initial_scid: LongCid::from_slice(&[7; 16]),
            original_dcid: LongCid::from_slice(&[7; 20]),
            retry_scid: LongCid::from_slice(&[7; 4]),
            stateless_reset_token: Some([0xa5; 16]),
            braid_frames: true,
            active_cid_limit: 6,
            disable_active_migration: true,
            server_only: true,
        };
        assert_eq!(TransportParams::decode(&p.encode()), Ok(p));
        // A token of another length than 16 bytes (RFC 9000 §18.2).
        assert!(TransportParams::decode(&[0x02, 0x0f]).is_err());
        let mut short = vec![0x02, 0x0f];
        short.extend_from_slice(&[0; 15]);
        assert!(TransportParams::decode(&short).is_err());
        let none = TransportParams {
            max_idle_timeout_ms: 0,
            streaming_code: false,
            initial_scid: Some(LongCid::from_u64(7)),
            original_dcid: None,
            retry_scid: None,
            stateless_reset_token: None,
            braid_frames: false,
            server_only: false,
            ..p
        };
        assert_eq!(TransportParams::decode(&none.encode()), Ok(none));
        assert!(TransportParams::decode(&[0x01, 0x05, 0x01]).is_err());
        // ack_delay_exponent: absent is 3, 20 is the largest (RFC 9000 §18.2).
        assert_eq!(
            TransportParams::decode(&[0x0a, 0x01, 20]).map(|t| t.ack_delay_exponent),
            Ok(20)
        );
        assert!(TransportParams::decode(&[0x0a, 0x01, 21]).is_err());
        // active_connection_id_limit: absent is 2, below 2 is invalid; disable_active_migration
        // is empty (RFC 9000 §18.2).
        assert_eq!(TransportParams::decode(&[]).map(|t| t.active_cid_limit), Ok(2));
        assert!(TransportParams::decode(&[0x0e, 0x01, 1]).is_err());
        assert_eq!(TransportParams::decode(&[0x0e, 0x01, 8]).map(|t| t.active_cid_limit), Ok(8));
        assert!(TransportParams::decode(&[0x0c, 0x01, 0]).is_err());
        // initial_max_path_id: a path id, at most 2^32 - 1.
        let max = |v: u64| {
            let mut b = vec![0x3e];
            let mut val = Vec::new();
            put_varint(&mut val, v);
            put_varint(&mut b, val.len() as u64);
            b.extend(val);
            TransportParams::decode(&b).map(|t| t.initial_max_path_id)
        };
        assert_eq!(max(u64::from(u32::MAX)), Ok(Some(u32::MAX)));
        assert!(max(1 << 32).is_err());
        // initial_max_streams_uni above 2^60 (RFC 9000 §18.2).
        let mut streams = vec![0x09, 0x08];
        put_varint(&mut streams, (1 << 60) + 1);
        assert!(TransportParams::decode(&streams).is_err());
        // Nothing sent: v1's defaults (RFC 9000 §18.2), Braid's extensions off.
        let empty = TransportParams::decode(&[]).unwrap();
        assert_eq!(
            (empty.max_data, empty.path_role, empty.initial_scid),
            (0, PathRole::Wired, None)
        );
        // v1's codepoints: initial_max_data is 0x04, max_idle_timeout 0x01,
        // initial_source_connection_id 0x0f.
        let idle = TransportParams { max_idle_timeout_ms: 30_000, ..none };
        let b = idle.encode();
        assert_eq!(&b[..2], &[0x01, 0x04], "max_idle_timeout first: {b:02x?}");
        assert!(b.windows(2).any(|w| w == [0x0f, 0x08]), "initial_scid: {b:02x?}");
        // A parameter twice is refused; an unknown one is skipped.
        let mut twice = b.clone();
        twice.extend_from_slice(&[0x04, 0x01, 0x05]);
        assert!(TransportParams::decode(&twice).is_err());
        let mut unknown = b.clone();
        unknown.extend_from_slice(&[0x1b, 0x02, 0xab, 0xcd]);
        assert_eq!(TransportParams::decode(&unknown), Ok(idle));
    }

    #[test]
    fn transport_params_must_name_the_handshakes_ids() {
        let client = TransportParams {
            max_data: 1,
            max_stream_data_bidi_local: 0,
            max_stream_data_bidi_remote: 0,
            max_streams_bidi: 0,
            max_stream_data_uni: 0,
            max_streams_uni: 0,
            path_role: PathRole::Wifi,
            wants_rate_feedback: false,
            max_idle_timeout_ms: 0,
            streaming_code: false,
            ack_delay_exponent: DEFAULT_ACK_DELAY_EXPONENT,
            initial_max_path_id: None,
            initial_scid: Some(LongCid::from_u64(5)),
            original_dcid: None,
            retry_scid: None,
            stateless_reset_token: None,
            braid_frames: false,
            active_cid_limit: DEFAULT_ACTIVE_CID_LIMIT,
            disable_active_migration: false,
            server_only: false,
        };
        let id = LongCid::from_u64;
        // Without a Retry every id is the client's 5; after one, the server's is 9.
        let plain = HandshakeIds { initial_scid: id(5), original_dcid: id(5), retry_scid: None };
        let server = TransportParams { original_dcid: Some(id(5)), ..client };
        assert_eq!(client.check(false, &plain), Ok(()));
        assert_eq!(server.check(true, &plain), Ok(()));
        // Another id, or none, where the handshake's belongs.
        assert!(client.check(false, &HandshakeIds { initial_scid: id(6), ..plain }).is_err());
        assert!(TransportParams { initial_scid: None, ..client }.check(false, &plain).is_err());
        let moved = TransportParams { original_dcid: Some(id(6)), ..server };
        assert!(moved.check(true, &plain).is_err());
        assert!(client.check(true, &plain).is_err(), "a server must name the original id");
        // retry_source_connection_id exactly when the client took a Retry, naming its id.
        let after =
            HandshakeIds { initial_scid: id(9), original_dcid: id(5), retry_scid: Some(id(9)) };
        let retried =
            TransportParams { initial_scid: Some(id(9)), retry_scid: Some(id(9)), ..server };
        assert_eq!(retried.check(true, &after), Ok(()));
        assert!(retried.check(true, &HandshakeIds { retry_scid: None, ..after }).is_err());
        assert!(retried.check(true, &HandshakeIds { retry_scid: Some(id(8)), ..after }).is_err());
        let unnamed = TransportParams { initial_scid: Some(id(9)), ..server };
        assert!(unnamed.check(true, &after).is_err(), "a Retry the server does not name");
        let stale = TransportParams { original_dcid: Some(id(9)), ..retried };
        assert!(stale.check(true, &after).is_err(), "the original id is the first Initial's");
        // A client sending a server's parameter.
        let bad = TransportParams::decode(
            &TransportParams { initial_scid: Some(id(5)), ..retried }.encode(),
        )
        .unwrap();
        assert_eq!(bad.check(false, &plain), Err(TransportParamsError::ServerOnly));
        let mut token = client.encode();
        token.extend_from_slice(&[0x02, 0x10]);
        token.extend_from_slice(&[0; 16]);
        let with_token = TransportParams::decode(&token).unwrap();
        assert_eq!(with_token.check(false, &plain), Err(TransportParamsError::ServerOnly));
    }

    #[test]
    fn handshake_chunks_round_trip() {
        let mut buf = Vec::new();
        HandshakeChunk::Crypto { offset: 5, data: b"abc" }.encode(&mut buf);
        HandshakeChunk::Ack { ranges: vec![(7, 9), (2, 4), (0, 0)] }.encode(&mut buf);
        buf.extend_from_slice(&[0; 10]);
        let c = HandshakeChunk::decode_all(&buf).unwrap();
        assert_eq!(
            c,
            vec![
                HandshakeChunk::Crypto { offset: 5, data: b"abc" },
                HandshakeChunk::Ack { ranges: vec![(7, 9), (2, 4), (0, 0)] }
            ]
        );
        assert!(HandshakeChunk::decode_all(&[0x06, 0x40]).is_err());
    }

    #[test]
    fn deterministic_identity_is_reproducible() {
        let (_, a) = deterministic::server(3);
        let (_, b) = deterministic::server(3);
        let (_, c) = deterministic::server(4);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
