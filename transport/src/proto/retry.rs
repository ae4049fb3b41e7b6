//! Address validation with Retry (RFC 9000 §8.1.2): a server that does not want to hold
//! state for a ClientHello from an address it has not seen answers with a Retry packet
//! carrying a token; the client sends its Initial packets again with the token in their
//! header's token field (§17.2.2), and the server, finding the token bound to that address
//! and connection id and still fresh, accepts the connection with the address validated (no
//! 3× anti-amplification limit).
//!
//! The packet has RFC 9000 §17.2.5's layout: first byte, version, destination id (the
//! client's source id) and source id (a new id the server chose, which the client sends to
//! from then on and derives its Initial keys from), each after a length byte, the token,
//! and the 16-byte Retry Integrity Tag of RFC 9001 §5.8 (AES-128-GCM under the version-1
//! key and nonce over the Retry pseudo-packet, which prefixes the destination id of the
//! client's first Initial). A client drops a Retry whose tag does not verify against that
//! id, whose token is empty, or whose source id is that id again (§17.2.5.2). It takes at
//! most one Retry, only while it has no Handshake keys, for its own id, from the server's
//! address.
//!
//! Retry tokens are stateless: `kind (1 byte) ‖ issued-at (8 bytes, ms) ‖ original id's length (1 byte) ‖
//! original id (20 bytes, zero-filled) ‖ HMAC-SHA256(key, those bytes ‖ address ‖ new id)`, valid for
//! [`TOKEN_LIFETIME`] from the address they were issued to, for an Initial sent to the new
//! id. The original id travels in the token so that the server can name it in its
//! `original_destination_connection_id` transport parameter (RFC 9000 §7.3) without
//! keeping anything.
//!
//! **NEW_TOKEN tokens** (RFC 9000 §8.1.3) let a client whose address this server saw before
//! skip the Retry round trip on a later connection. They are sealed, not merely signed: an
//! observer sees a client send one in a later connection's Initial, and must not learn from
//! it when, or on which connection, it was issued (§8.1.3: a token must not link the two).
//! Layout: `kind (1 byte) ‖ nonce (12 random bytes) ‖ AES-256-GCM(issued-at, ms)`, the client's
//! IP address (not its port, which a NAT may change between connections) as associated
//! data; valid for [`NEW_TOKEN_LIFETIME`], and once ([`TokenLog`]). Every token starts
//! with its kind, so the two are never confused (§8.1.1 asks a server to tell them apart).

use std::net::SocketAddr;
use std::time::Duration;

use ring::{aead, hmac};

pub use super::crypto::MAX_TOKEN_LEN;
use super::crypto::VERSION;
use super::wire::{LongCid, MAX_CID_LEN, Reader};
use crate::time::Instant;

/// How long a token is accepted after it was issued.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(10);
/// How long a NEW_TOKEN token is accepted after it was issued (a day: a viewer who comes
/// back the same day skips the Retry; quinn's default is two weeks).
pub const NEW_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// The first byte of a Retry token.
const KIND_RETRY: u8 = 0x52;
/// The first byte of a NEW_TOKEN token.
const KIND_NEW_TOKEN: u8 = 0x4e;
/// Bytes of a NEW_TOKEN token's nonce.
pub const NONCE_LEN: usize = 12;
/// Bytes of a NEW_TOKEN token: kind, nonce, the sealed issue time and its tag.
const NEW_TOKEN_LEN: usize = 1 + NONCE_LEN + STAMP_LEN + 16;
/// Most NEW_TOKEN tokens remembered as used (their nonces, until they expire): past that,
/// NEW_TOKEN tokens are not honoured until old entries expire (the client then takes a
/// Retry where one is due), so a client replaying tokens cannot grow the log.
pub const TOKEN_LOG_CAPACITY: usize = 16_384;
/// The first byte of a Retry packet: long header, fixed bit, type 3, four unused bits
/// (RFC 9000 §17.2.5; Braid sends them as zero and ignores them on receipt).
const RETRY_FIRST: u8 = 0xF0;
/// Bytes of a token's issue time.
const STAMP_LEN: usize = 8;
/// Bytes of a token before its MAC: issue time, the original id's length and the id (up
/// to 20 bytes, zero-filled).
const CLEAR_LEN: usize = STAMP_LEN + 1 + MAX_CID_LEN;
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

/// A Retry packet to `dcid` (the client's source id, 0 to 20 bytes) from `scid` (the id
/// the client is to send to next) carrying `token`, its tag over `odcid` (the destination
/// id of the client's Initial).
pub fn encode(dcid: &LongCid, scid: u64, odcid: &LongCid, token: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(47 + token.len() + TAG_LEN);
    out.push(RETRY_FIRST);
    out.extend_from_slice(&VERSION.to_be_bytes());
    // Destination and source ids after their lengths (RFC 8999 §5.1).
    for id in [dcid.as_slice(), &scid.to_be_bytes()] {
        out.push(id.len() as u8);
        out.extend_from_slice(id);
    }
    out.extend_from_slice(token);
    let tag = integrity_tag(odcid.as_slice(), &out);
    out.extend_from_slice(&tag);
    out
}

/// A Retry packet's fields, read but not yet verified ([`Retry::verify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry<'a> {
    /// Destination connection id (the client's own, 0 to 20 bytes).
    pub dcid: LongCid,
    /// Source connection id (the id the client is to send to: the server's choice, 0 to
    /// 20 bytes).
    pub scid: LongCid,
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
    pub fn verify(&self, odcid: &LongCid) -> bool {
        integrity_tag(odcid.as_slice(), self.signed)[..] == *self.tag
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
    let mut id = || -> Option<LongCid> {
        let len = usize::from(r.u8().ok()?);
        LongCid::from_slice(r.bytes(len).ok()?)
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
    /// Seals NEW_TOKEN tokens (its key derived from the same secret).
    sealer: aead::LessSafeKey,
}

/// What kind of token an Initial carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// From a Retry packet (RFC 9000 §8.1.2).
    Retry,
    /// From a NEW_TOKEN frame of an earlier connection (§8.1.3).
    NewToken,
    /// Neither: not one of this endpoint's.
    Unknown,
}

/// The kind of `token`, by its first byte (nothing is verified).
pub fn kind(token: &[u8]) -> TokenKind {
    match token.first() {
        Some(&KIND_RETRY) => TokenKind::Retry,
        Some(&KIND_NEW_TOKEN) => TokenKind::NewToken,
        _ => TokenKind::Unknown,
    }
}

/// Whether a token issued at `issued_ms` is still valid at `now` for `lifetime` (and was not
/// issued after it).
fn fresh(issued_ms: u64, now: Instant, lifetime: Duration) -> bool {
    let now_ms = now.as_micros() / 1000;
    issued_ms <= now_ms && now_ms - issued_ms <= lifetime.as_millis() as u64
}

/// The IP address as bytes (what both kinds of token are bound to).
fn ip_bytes(ip: std::net::IpAddr) -> Vec<u8> {
    match ip {
        std::net::IpAddr::V4(ip) => ip.octets().to_vec(),
        std::net::IpAddr::V6(ip) => ip.octets().to_vec(),
    }
}

/// The NEW_TOKEN tokens already used, by nonce, until they expire: each is honoured once
/// (RFC 9000 §8.1.4 asks servers to limit replay). Bounded by [`TOKEN_LOG_CAPACITY`].
#[derive(Debug, Default)]
pub struct TokenLog {
    used: std::collections::BTreeMap<[u8; NONCE_LEN], u64>,
}

impl TokenLog {
    /// Records the token of `nonce`, issued at `issued_ms`, as used at `now`: true the first
    /// time; false for a token seen before, or when the log is full of unexpired tokens.
    pub fn first_use(&mut self, nonce: [u8; NONCE_LEN], issued_ms: u64, now: Instant) -> bool {
        if self.used.contains_key(&nonce) {
            return false;
        }
        if self.used.len() >= TOKEN_LOG_CAPACITY {
            self.used.retain(|_, &mut t| fresh(t, now, NEW_TOKEN_LIFETIME));
            if self.used.len() >= TOKEN_LOG_CAPACITY {
                return false;
            }
        }
        self.used.insert(nonce, issued_ms);
        true
    }

    /// Tokens remembered.
    pub fn len(&self) -> usize {
        self.used.len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }
}

impl std::fmt::Debug for RetryTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RetryTokens")
    }
}

impl RetryTokens {
    /// Tokens under `secret` (32 random bytes, kept for the endpoint's life).
    pub fn new(secret: &[u8; 32]) -> RetryTokens {
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
        // A key of its own for sealing: HMAC-SHA256 of a label under the secret.
        let derived = hmac::sign(&key, b"braid new_token seal");
        // 32 bytes always make an AES-256 key.
        let unbound = aead::UnboundKey::new(&aead::AES_256_GCM, derived.as_ref())
            .expect("a 32-byte AES-256 key");
        RetryTokens { key, sealer: aead::LessSafeKey::new(unbound) }
    }

    /// A NEW_TOKEN token for a client at `ip`, issued at `now`; `nonce` must be random
    /// (never repeated under this key).
    pub fn issue_new_token(
        &self,
        now: Instant,
        ip: std::net::IpAddr,
        nonce: [u8; NONCE_LEN],
    ) -> Vec<u8> {
        let mut sealed = (now.as_micros() / 1000).to_be_bytes().to_vec();
        let aad = ip_bytes(ip);
        // Sealing 8 bytes in memory does not fail.
        self.sealer
            .seal_in_place_append_tag(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(&aad[..]),
                &mut sealed,
            )
            .expect("sealing a token");
        let mut out = Vec::with_capacity(NEW_TOKEN_LEN);
        out.push(KIND_NEW_TOKEN);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// If `token` is a NEW_TOKEN token this key issued to `ip`, at most
    /// [`NEW_TOKEN_LIFETIME`] before `now` (and not after it): its nonce and issue time (ms),
    /// for the [`TokenLog`]. `None` otherwise.
    pub fn validate_new_token(
        &self,
        token: &[u8],
        now: Instant,
        ip: std::net::IpAddr,
    ) -> Option<([u8; NONCE_LEN], u64)> {
        if token.len() != NEW_TOKEN_LEN || kind(token) != TokenKind::NewToken {
            return None;
        }
        let nonce: [u8; NONCE_LEN] = token[1..1 + NONCE_LEN].try_into().ok()?;
        let mut sealed = token[1 + NONCE_LEN..].to_vec();
        let aad = ip_bytes(ip);
        let clear = self
            .sealer
            .open_in_place(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(&aad[..]),
                &mut sealed,
            )
            .ok()?;
        let issued_ms = u64::from_be_bytes(clear.get(..STAMP_LEN)?.try_into().ok()?);
        fresh(issued_ms, now, NEW_TOKEN_LIFETIME).then_some((nonce, issued_ms))
    }

    /// What a token's MAC covers: issue time and original id, client address and port,
    /// the id the token's Initial goes to.
    fn signed(clear: &[u8], addr: SocketAddr, cid: u64) -> Vec<u8> {
        let mut msg = clear.to_vec();
        msg.extend_from_slice(&ip_bytes(addr.ip()));
        msg.extend_from_slice(&addr.port().to_be_bytes());
        msg.extend_from_slice(&cid.to_be_bytes());
        msg
    }

    /// A token for a client at `addr` whose first Initial went to `odcid`, to be sent with
    /// its next Initial to `cid` (the Retry's source id), issued at `now`.
    pub fn issue(&self, now: Instant, addr: SocketAddr, cid: u64, odcid: &LongCid) -> Vec<u8> {
        let mut out = vec![KIND_RETRY];
        out.extend_from_slice(&(now.as_micros() / 1000).to_be_bytes());
        out.push(odcid.as_slice().len() as u8);
        let mut id = [0; MAX_CID_LEN];
        id[..odcid.as_slice().len()].copy_from_slice(odcid.as_slice());
        out.extend_from_slice(&id);
        let mac = hmac::sign(&self.key, &Self::signed(&out, addr, cid));
        out.extend_from_slice(mac.as_ref());
        out
    }

    /// The original destination id of `token` if this key issued it to `addr` for an
    /// Initial to `cid`, at most [`TOKEN_LIFETIME`] before `now` (and not after it);
    /// `None` otherwise.
    pub fn validate(
        &self,
        token: &[u8],
        now: Instant,
        addr: SocketAddr,
        cid: u64,
    ) -> Option<LongCid> {
        if token.len() <= 1 + CLEAR_LEN || kind(token) != TokenKind::Retry {
            return None;
        }
        let (clear, mac) = token.split_at(1 + CLEAR_LEN);
        let body = &clear[1..];
        let issued_ms = u64::from_be_bytes(body[..STAMP_LEN].try_into().ok()?);
        let id_len = usize::from(body[STAMP_LEN]).min(MAX_CID_LEN);
        let odcid = LongCid::from_slice(&body[STAMP_LEN + 1..STAMP_LEN + 1 + id_len])?;
        if !fresh(issued_ms, now, TOKEN_LIFETIME) {
            return None;
        }
        hmac::verify(&self.key, &Self::signed(clear, addr, cid), mac).ok()?;
        Some(odcid)
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
        let odcid = LongCid::from_slice(&[17; 20]).unwrap();
        let tok = keys.issue(t0, addr(1000), 42, &odcid);
        assert_eq!(keys.validate(&tok, t0, addr(1000), 42), Some(odcid), "names the original id");
        assert_eq!(keys.validate(&tok, t0 + TOKEN_LIFETIME, addr(1000), 42), Some(odcid));
        let short = keys.issue(t0, addr(1000), 42, &LongCid::from_u64(17));
        assert_eq!(keys.validate(&short, t0, addr(1000), 42), Some(LongCid::from_u64(17)));
        let late = t0 + TOKEN_LIFETIME + Duration::from_millis(1);
        assert_eq!(keys.validate(&tok, late, addr(1000), 42), None);
        let early = Instant::from_micros(4_000_000);
        assert_eq!(keys.validate(&tok, early, addr(1000), 42), None, "from the future");
        assert_eq!(keys.validate(&tok, t0, addr(1001), 42), None, "from another address");
        assert_eq!(keys.validate(&tok, t0, addr(1000), 43), None, "another connection");
        let other = RetryTokens::new(&[8; 32]);
        assert_eq!(other.validate(&tok, t0, addr(1000), 42), None, "another key");
        for i in 0..tok.len() {
            let mut bad = tok.clone();
            bad[i] ^= 1;
            assert_eq!(keys.validate(&bad, t0, addr(1000), 42), None, "byte {i} flipped");
        }
        for junk in [&[][..], &[0; 16][..], &[0xff; 200][..]] {
            assert_eq!(keys.validate(junk, t0, addr(1000), 42), None);
        }
    }

    #[test]
    fn a_new_token_holds_for_its_ip_for_a_day_once_and_is_never_a_retry_token() {
        let keys = RetryTokens::new(&[7; 32]);
        let t0 = Instant::from_micros(5_000_000);
        let ip = addr(1000).ip();
        let tok = keys.issue_new_token(t0, ip, [9; NONCE_LEN]);
        assert_eq!(kind(&tok), TokenKind::NewToken);
        let later = t0 + NEW_TOKEN_LIFETIME;
        assert_eq!(keys.validate_new_token(&tok, later, ip), Some(([9; NONCE_LEN], 5000)));
        let late = later + Duration::from_millis(1);
        assert_eq!(keys.validate_new_token(&tok, late, ip), None, "expired");
        let early = Instant::from_micros(4_000_000);
        assert_eq!(keys.validate_new_token(&tok, early, ip), None, "from the future");
        let other_ip = SocketAddr::from(([192, 0, 2, 2], 1000)).ip();
        assert_eq!(keys.validate_new_token(&tok, t0, other_ip), None, "another address");
        assert_eq!(RetryTokens::new(&[8; 32]).validate_new_token(&tok, t0, ip), None);
        for i in 0..tok.len() {
            let mut bad = tok.clone();
            bad[i] ^= 1;
            assert_eq!(keys.validate_new_token(&bad, t0, ip), None, "byte {i} flipped");
        }
        // The issue time is sealed: two tokens issued a millisecond apart share no byte
        // pattern an observer could read a time from (different nonces, different bytes).
        let a = keys.issue_new_token(t0, ip, [1; NONCE_LEN]);
        let b = keys.issue_new_token(t0, ip, [2; NONCE_LEN]);
        assert_ne!(a[1 + NONCE_LEN..], b[1 + NONCE_LEN..]);
        // The kinds never pass for each other.
        let retry = keys.issue(t0, addr(1000), 42, &LongCid::from_u64(17));
        assert_eq!(kind(&retry), TokenKind::Retry);
        assert_eq!(keys.validate_new_token(&retry, t0, ip), None);
        assert_eq!(keys.validate(&tok, t0, addr(1000), 42), None);
        assert_eq!(kind(&[]), TokenKind::Unknown);
        // Once only.
        let mut log = TokenLog::default();
        assert!(log.first_use([9; NONCE_LEN], 5000, t0));
        assert!(!log.first_use([9; NONCE_LEN], 5000, t0), "a replay");
        assert_eq!(log.len(), 1);
    }

    #[test]
    fn the_token_log_is_bounded_and_forgets_expired_tokens() {
        let mut log = TokenLog::default();
        let t0 = Instant::from_micros(1_000_000);
        for i in 0..TOKEN_LOG_CAPACITY as u64 {
            let mut nonce = [0; NONCE_LEN];
            nonce[..8].copy_from_slice(&i.to_be_bytes());
            assert!(log.first_use(nonce, 1000, t0));
        }
        let fresh = [0xff; NONCE_LEN];
        assert!(!log.first_use(fresh, 1000, t0), "full of unexpired tokens");
        assert_eq!(log.len(), TOKEN_LOG_CAPACITY);
        let after = t0 + NEW_TOKEN_LIFETIME + Duration::from_secs(1);
        assert!(log.first_use(fresh, after.as_micros() / 1000, after), "the expired ones went");
        assert_eq!(log.len(), 1);
    }

    #[test]
    fn retry_packets_round_trip_and_junk_is_not_one() {
        let (dcid, scid) = (0x0102_0304_0506_0708, 0x1112_1314_1516_1718);
        let odcid = LongCid::from_u64(0x2122);
        let p = encode(&LongCid::from_u64(dcid), scid, &odcid, b"token bytes");
        let r = parse(&p).expect("a Retry");
        let (dcid, scid) = (LongCid::from_u64(dcid), LongCid::from_u64(scid));
        assert_eq!((r.dcid, r.scid, r.token), (dcid, scid, &b"token bytes"[..]));
        assert!(r.verify(&odcid));
        assert!(!r.verify(&LongCid::from_u64(0x2123)), "the tag covers the original id");
        let three = LongCid::from_u64(3);
        let one = LongCid::from_u64(1);
        assert_eq!(
            parse(&encode(&one, 2, &three, b"")),
            None,
            "an empty token (RFC 9000 17.2.5.2)"
        );
        assert_eq!(parse(&encode(&one, 2, &three, &[0; MAX_TOKEN_LEN + 1])), None);
        // A client's id of another length is answered to as it is.
        let long = LongCid::from_slice(&[9; 18]).expect("an id");
        let r = encode(&long, 2, &three, b"t");
        assert_eq!(parse(&r).map(|r| r.dcid), Some(long));
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&[RETRY_FIRST, 0, 0]), None);
        assert_eq!(parse(&p[..22 + TAG_LEN]), None, "no token");
        // Any changed byte (token, ids, tag, first byte's type bits) breaks the tag or
        // the parse.
        for i in 0..p.len() {
            let mut bad = p.clone();
            bad[i] ^= 0x01;
            let ok = parse(&bad).is_some_and(|r| r.verify(&odcid));
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
