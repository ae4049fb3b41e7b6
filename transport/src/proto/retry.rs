//! Address validation with Retry (RFC 9000 §8.1.2): a server that does not want to hold
//! state for a ClientHello from an address it has not seen answers with a Retry packet
//! carrying a token; the client sends its Initial packets again with the token, and the
//! server, finding the token bound to that address and connection id and still fresh,
//! accepts the connection with the address validated (no 3× anti-amplification limit).
//!
//! Braid's wire (see [`super::crypto`]) has one connection id chosen by the client, so the
//! Retry carries that id, not a new one, and the token travels in a TOKEN chunk of the
//! client's Initial packets rather than in a header field. A client takes at most one
//! Retry, only while it has no Handshake keys, and only with its own connection id, from
//! the server's address (§17.2.5.2: at most one Retry per connection attempt). An attacker
//! off the path does not know the connection id, so it cannot make a client restart.
//!
//! Tokens are stateless: `issued-at (8 bytes, ms) ‖ HMAC-SHA256(key, issued-at ‖ address ‖
//! connection id)`, valid for [`TOKEN_LIFETIME`] from the address they were issued to.

use std::net::SocketAddr;
use std::time::Duration;

use ring::hmac;

pub use super::crypto::MAX_TOKEN_LEN;
use super::crypto::VERSION;
use super::wire::{Reader, put_varint};
use crate::time::Instant;

/// How long a token is accepted after it was issued.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(10);
/// The first byte of a Retry packet: long header, fixed bit, type 3 (RFC 9000 §17.2.5).
const RETRY_FIRST: u8 = 0xF0;
/// Bytes of a token's issue time.
const STAMP_LEN: usize = 8;

/// A Retry packet for connection `cid` carrying `token`.
pub fn encode(cid: u64, token: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + token.len());
    out.push(RETRY_FIRST);
    out.extend_from_slice(&VERSION.to_be_bytes());
    // Destination and source ids after their lengths (RFC 8999 §5.1): the client's id.
    for _ in 0..2 {
        out.push(8);
        out.extend_from_slice(&cid.to_be_bytes());
    }
    put_varint(&mut out, token.len() as u64);
    out.extend_from_slice(token);
    out
}

/// The connection id and token of a Retry packet; `None` for anything else (never panics).
pub fn parse(datagram: &[u8]) -> Option<(u64, &[u8])> {
    let mut r = Reader::new(datagram);
    if r.u8().ok()? != RETRY_FIRST {
        return None;
    }
    let version = r.bytes(4).ok()?;
    if version != VERSION.to_be_bytes() {
        return None;
    }
    if r.u8().ok()? != 8 {
        return None;
    }
    let cid = u64::from_be_bytes(r.bytes(8).ok()?.try_into().ok()?);
    if r.u8().ok()? != 8 || r.bytes(8).ok()? != cid.to_be_bytes() {
        return None;
    }
    let len = usize::try_from(r.varint().ok()?).ok()?;
    if len == 0 || len > MAX_TOKEN_LEN {
        return None;
    }
    let token = r.bytes(len).ok()?;
    r.is_empty().then_some((cid, token))
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
        assert_eq!(parse(&p), Some((0x0102_0304_0506_0708, &b"token bytes"[..])));
        assert_eq!(parse(&p[..p.len() - 1]), None);
        let mut longer = p.clone();
        longer.push(0);
        assert_eq!(parse(&longer), None);
        assert_eq!(parse(&encode(1, b"")), None);
        assert_eq!(parse(&encode(1, &[0; MAX_TOKEN_LEN + 1])), None);
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&[RETRY_FIRST, 0, 0]), None);
    }
}
