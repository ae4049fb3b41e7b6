//! Address validation with Retry (RFC 9000 §8.1.2): a server that does not want to hold
//! state for a ClientHello from an address it has not seen answers with a Retry packet
//! carrying a token; the client sends its Initial packets again with the token in their
//! header's token field (§17.2.2), and the server, finding the token bound to that address
//! and connection id and still fresh, accepts the connection with the address validated (no
//! 3× anti-amplification limit).
//!
//! The packet has RFC 9000 §17.2.5's layout: first byte, version, destination and source
//! ids each after a length byte, the token, and the 16-byte Retry Integrity Tag of RFC 9001
//! §5.8 (AES-128-GCM under the version-1 key and nonce over the Retry pseudo-packet, which
//! prefixes the id of the client's first Initial). A client drops a Retry whose tag does not
//! verify against its own id, or whose token is empty (§17.2.5.2).
//!
//! Deviation: Braid's handshake has one connection id, chosen by the client, so the Retry's
//! source id is that id again rather than a new one the server chose (the client goes on
//! with the id it has, and the Initial keys stay the same). A client takes at most one
//! Retry, only while it has no Handshake keys, and only with its own connection id, from
//! the server's address (§17.2.5.2: at most one Retry per connection attempt).
//!
//! Tokens are stateless: `issued-at (8 bytes, ms) ‖ HMAC-SHA256(key, issued-at ‖ address ‖
//! connection id)`, valid for [`TOKEN_LIFETIME`] from the address they were issued to.

use std::net::SocketAddr;
use std::time::Duration;

use ring::{aead, hmac};

pub use super::crypto::MAX_TOKEN_LEN;
use super::crypto::VERSION;
use super::wire::Reader;
use crate::time::Instant;

/// How long a token is accepted after it was issued.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(10);
/// The first byte of a Retry packet: long header, fixed bit, type 3, four unused bits
/// (RFC 9000 §17.2.5; Braid sends them as zero and ignores them on receipt).
const RETRY_FIRST: u8 = 0xF0;
/// Bytes of a token's issue time.
const STAMP_LEN: usize = 8;
/// Bytes of the Retry Integrity Tag (RFC 9001 §5.8).
pub const TAG_LEN: usize = 16;
/// The AES-128-GCM key of the version-1 Retry Integrity Tag (RFC 9001 §5.8).
const TAG_KEY: [u8; 16] = [
    0xbe, 0x0c, 0x69, 0x0b, 0x9f, 0x66, 0x57, 0x5a, 0x1d, 0x76, 0x6b, 0x54, 0xe3, 0x68, 0xc8, 0x4e,
];
/// Its nonce (RFC 9001 §5.8).
const TAG_NONCE: [u8; 12] =
    [0x46, 0x15, 0x99, 0xd3, 0x5d, 0x63, 0x2b, 0xf2, 0x23, 0x98, 0x25, 0xbb];

/// The Retry Integrity Tag of `packet` (a Retry packet without its tag) answering a client
/// whose first Initial went to `odcid`: AES-128-GCM of nothing, with the pseudo-packet
/// `len(odcid) ‖ odcid ‖ packet` as associated data (RFC 9001 §5.8).
pub fn integrity_tag(odcid: &[u8], packet: &[u8]) -> [u8; TAG_LEN] {
    let mut pseudo = Vec::with_capacity(1 + odcid.len() + packet.len());
    pseudo.push(odcid.len().min(255) as u8);
    pseudo.extend_from_slice(odcid);
    pseudo.extend_from_slice(packet);
    // A fixed 16-byte key always builds; an AES-GCM seal of an empty input cannot fail.
    let key = aead::LessSafeKey::new(
        aead::UnboundKey::new(&aead::AES_128_GCM, &TAG_KEY).expect("a 16-byte AES-128 key"),
    );
    let nonce = aead::Nonce::assume_unique_for_key(TAG_NONCE);
    let tag = key
        .seal_in_place_separate_tag(nonce, aead::Aad::from(&pseudo[..]), &mut [])
        .expect("sealing nothing");
    let mut out = [0; TAG_LEN];
    out.copy_from_slice(tag.as_ref());
    out
}

/// A Retry packet for connection `cid` carrying `token`, its tag over `cid` as the
/// client's original destination id.
pub fn encode(cid: u64, token: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(23 + token.len() + TAG_LEN);
    out.push(RETRY_FIRST);
    out.extend_from_slice(&VERSION.to_be_bytes());
    // Destination and source ids after their lengths (RFC 8999 §5.1): the client's id.
    for _ in 0..2 {
        out.push(8);
        out.extend_from_slice(&cid.to_be_bytes());
    }
    out.extend_from_slice(token);
    let tag = integrity_tag(&cid.to_be_bytes(), &out);
    out.extend_from_slice(&tag);
    out
}

/// A Retry packet's fields, read but not yet verified ([`Retry::verify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry<'a> {
    /// Destination connection id.
    pub dcid: u64,
    /// Source connection id (the id the client is to send to).
    pub scid: u64,
    /// The address-validation token (1 to [`MAX_TOKEN_LEN`] bytes).
    pub token: &'a [u8],
    /// The packet up to its tag, and the tag.
    signed: &'a [u8],
    tag: &'a [u8],
}

impl Retry<'_> {
    /// Whether the tag is the one RFC 9001 §5.8 gives for a client whose first Initial went
    /// to `odcid`. (The tag is no secret: anyone who saw the Initial can compute it, so it
    /// protects against corruption and blind injection, not against an on-path attacker.)
    pub fn verify(&self, odcid: u64) -> bool {
        integrity_tag(&odcid.to_be_bytes(), self.signed)[..] == *self.tag
    }
}

/// The fields of a Retry packet of Braid's version with 8-byte ids and a token of 1 to
/// [`MAX_TOKEN_LEN`] bytes; `None` for anything else (never panics).
pub fn parse(datagram: &[u8]) -> Option<Retry<'_>> {
    let signed_len = datagram.len().checked_sub(TAG_LEN)?;
    let (signed, tag) = datagram.split_at(signed_len);
    let mut r = Reader::new(signed);
    if r.u8().ok()? & 0xF0 != RETRY_FIRST {
        return None;
    }
    if r.bytes(4).ok()? != VERSION.to_be_bytes() {
        return None;
    }
    let mut id = || -> Option<u64> {
        if r.u8().ok()? != 8 {
            return None;
        }
        Some(u64::from_be_bytes(r.bytes(8).ok()?.try_into().ok()?))
    };
    let (dcid, scid) = (id()?, id()?);
    let token = r.bytes(r.remaining()).ok()?;
    if token.is_empty() || token.len() > MAX_TOKEN_LEN {
        return None;
    }
    Some(Retry { dcid, scid, token, signed, tag })
}

/// Issues and checks address-validation tokens under one secret key.
pub struct RetryTokens {
    key: hmac::Key,
}

impl std::fmt::Debug for RetryTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RetryTokens")
    }
}

impl RetryTokens {
    /// Tokens under `secret` (32 random bytes, kept for the endpoint's life).
    pub fn new(secret: &[u8; 32]) -> RetryTokens {
        RetryTokens { key: hmac::Key::new(hmac::HMAC_SHA256, secret) }
    }

    /// What a token's MAC covers: issue time, client address and port, connection id.
    fn signed(stamp: &[u8], addr: SocketAddr, cid: u64) -> Vec<u8> {
        let mut msg = stamp.to_vec();
        match addr.ip() {
            std::net::IpAddr::V4(ip) => msg.extend_from_slice(&ip.octets()),
            std::net::IpAddr::V6(ip) => msg.extend_from_slice(&ip.octets()),
        }
        msg.extend_from_slice(&addr.port().to_be_bytes());
        msg.extend_from_slice(&cid.to_be_bytes());
        msg
    }

    /// A token for a client at `addr` opening connection `cid`, issued at `now`.
    pub fn issue(&self, now: Instant, addr: SocketAddr, cid: u64) -> Vec<u8> {
        let stamp = (now.as_micros() / 1000).to_be_bytes();
        let mut out = stamp.to_vec();
        out.extend_from_slice(hmac::sign(&self.key, &Self::signed(&stamp, addr, cid)).as_ref());
        out
    }

    /// Whether `token` was issued by this key to `addr` for `cid`, at most
    /// [`TOKEN_LIFETIME`] before `now` (and not after it).
    pub fn validate(&self, token: &[u8], now: Instant, addr: SocketAddr, cid: u64) -> bool {
        if token.len() <= STAMP_LEN {
            return false;
        }
        let (stamp, mac) = token.split_at(STAMP_LEN);
        let Ok(bytes) = <[u8; STAMP_LEN]>::try_from(stamp) else { return false };
        let issued_ms = u64::from_be_bytes(bytes);
        let now_ms = now.as_micros() / 1000;
        let lifetime_ms = TOKEN_LIFETIME.as_millis() as u64;
        if issued_ms > now_ms || now_ms - issued_ms > lifetime_ms {
            return false;
        }
        hmac::verify(&self.key, &Self::signed(stamp, addr, cid), mac).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, 1], port))
    }

    #[test]
    fn a_token_holds_only_for_its_address_and_id_and_for_its_lifetime() {
        let keys = RetryTokens::new(&[7; 32]);
        let t0 = Instant::from_micros(5_000_000);
        let tok = keys.issue(t0, addr(1000), 42);
        assert!(keys.validate(&tok, t0, addr(1000), 42));
        assert!(keys.validate(&tok, t0 + TOKEN_LIFETIME, addr(1000), 42));
        assert!(!keys.validate(
            &tok,
            t0 + TOKEN_LIFETIME + Duration::from_millis(1),
            addr(1000),
            42
        ));
        assert!(
            !keys.validate(&tok, Instant::from_micros(4_000_000), addr(1000), 42),
            "from the future"
        );
        assert!(!keys.validate(&tok, t0, addr(1001), 42), "replayed from another address");
        assert!(!keys.validate(&tok, t0, addr(1000), 43), "another connection");
        assert!(!RetryTokens::new(&[8; 32]).validate(&tok, t0, addr(1000), 42), "another key");
        for i in 0..tok.len() {
            let mut bad = tok.clone();
            bad[i] ^= 1;
            assert!(!keys.validate(&bad, t0, addr(1000), 42), "byte {i} flipped");
        }
        for junk in [&[][..], &[0; 8][..], &[0xff; 200][..]] {
            assert!(!keys.validate(junk, t0, addr(1000), 42));
        }
    }

    #[test]
    fn retry_packets_round_trip_and_junk_is_not_one() {
        let p = encode(0x0102_0304_0506_0708, b"token bytes");
        let r = parse(&p).expect("a Retry");
        assert_eq!(
            (r.dcid, r.scid, r.token),
            (0x0102_0304_0506_0708, 0x0102_0304_0506_0708, &b"token bytes"[..])
        );
        assert!(r.verify(0x0102_0304_0506_0708));
        assert!(!r.verify(0x0102_0304_0506_0709), "the tag covers the original id");
        assert_eq!(parse(&encode(1, b"")), None, "an empty token (RFC 9000 17.2.5.2)");
        assert_eq!(parse(&encode(1, &[0; MAX_TOKEN_LEN + 1])), None);
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&[RETRY_FIRST, 0, 0]), None);
        assert_eq!(parse(&p[..22 + TAG_LEN]), None, "no token");
        // Any changed byte (token, ids, tag, first byte's type bits) breaks the tag or
        // the parse.
        for i in 0..p.len() {
            let mut bad = p.clone();
            bad[i] ^= 0x01;
            let ok = parse(&bad).is_some_and(|r| r.verify(0x0102_0304_0506_0708));
            assert!(!ok, "byte {i} flipped still verifies");
        }
    }

    #[test]
    fn the_integrity_tag_is_rfc_9001s() {
        // RFC 9001 Appendix A.4: the Retry answering the client Initial to 8394c8f03e515708.
        let hex = |s: &str| -> Vec<u8> {
            (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
        };
        let packet = hex("ff000000010008f067a5502a4262b5746f6b656e");
        let odcid = hex("8394c8f03e515708");
        assert_eq!(
            integrity_tag(&odcid, &packet).to_vec(),
            hex("04a265ba2eff4d829058fb3f0f2496ba")
        );
    }
}
