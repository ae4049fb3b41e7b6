//! Stateless reset (RFC 9000 §10.3): a server that lost a connection's state (its task
//! ended, the process restarted) answers a packet for it with a datagram the client
//! recognises as the end of the connection, rather than leaving the client to its idle
//! timeout.
//!
//! Every connection id a side issues travels with a 16-byte reset token
//! (PATH_NEW_CONNECTION_ID). A server's tokens are `HMAC-SHA256(key, label ‖ id)[..16]`
//! under the endpoint's [`ResetKey`] (§10.3.2's stateless design), so after losing state
//! it can still compute the token of any id it issued. The handshake's id is the client's
//! choice, so no token is ever given for it (a client could otherwise pick the id of
//! another connection and learn its token); a reset is recognised once path 0 carries a
//! server-issued id, which the handshake's first round trip provides.
//!
//! A reset looks like a short-header packet: the short-header form bits, unpredictable
//! bytes, the token last. It is always shorter than the datagram that triggered it (§10.3:
//! no reset loops, no amplification), and none is sent for a datagram too short to hold
//! a smaller one. A receiver compares a datagram it could not use with the tokens of the
//! ids it has sent with, in constant time (§10.3.1).

use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ring::hmac;

use crate::time::Instant;

/// Bytes of a reset token.
pub const TOKEN_LEN: usize = 16;

/// Smallest reset sent or recognised: RFC 9000 §10.3's floor (5 bytes of form bits and
/// unpredictable bits, then the token). Shorter datagrams are never answered.
pub const MIN_RESET_LEN: usize = 5 + TOKEN_LEN;

/// The shortest short-header packet Braid sends: first byte, connection id, packet number
/// and payload of 4 bytes together (RFC 9001 §5.4.2's sample needs them) and the AEAD
/// tag. A reset is at least this long when its trigger allows, so it cannot be told from
/// a packet by its size; a shorter trigger gets a reset one byte shorter than itself
/// (§10.3's advice for triggers of 43 bytes or less).
pub const SHORTEST_PACKET: usize = 1 + 8 + 4 + TOKEN_LEN;

/// Unpredictable bytes a reset may carry beyond [`MIN_RESET_LEN`] (its length varies so
/// that it does not stand out by a fixed size).
const MAX_EXTRA: usize = 40;

/// Label mixed into every token, so the key is never used for anything else.
const LABEL: &[u8] = b"braid stateless reset v1";

/// The key a server's reset tokens are derived from; kept for the endpoint's life (and,
/// derived from the TLS key, across restarts).
#[derive(Clone)]
pub struct ResetKey {
    key: hmac::Key,
}

impl std::fmt::Debug for ResetKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResetKey")
    }
}

impl ResetKey {
    /// A key from 32 secret bytes.
    pub fn new(secret: &[u8; 32]) -> ResetKey {
        ResetKey { key: hmac::Key::new(hmac::HMAC_SHA256, secret) }
    }

    /// A key derived from other secret material (a server's TLS private key): the same
    /// material gives the same key, so tokens survive a restart of the server.
    pub fn derive(material: &[u8]) -> ResetKey {
        let outer = hmac::Key::new(hmac::HMAC_SHA256, LABEL);
        let tag = hmac::sign(&outer, material);
        let mut secret = [0u8; 32];
        secret.copy_from_slice(&tag.as_ref()[..32]);
        ResetKey::new(&secret)
    }

    /// The token of connection id `cid`.
    pub fn token(&self, cid: u64) -> [u8; TOKEN_LEN] {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(LABEL);
        ctx.update(&cid.to_be_bytes());
        let tag = ctx.sign();
        let mut t = [0u8; TOKEN_LEN];
        t.copy_from_slice(&tag.as_ref()[..TOKEN_LEN]);
        t
    }
}

/// A stateless reset answering a datagram of `trigger_len` bytes that carried connection
/// id `cid`: `None` when the trigger is too short to answer with a smaller datagram, or is
/// itself not a short-header packet (a long header is a handshake, never reset).
pub fn encode(key: &ResetKey, cid: u64, trigger: &[u8], rng: &mut impl RngExt) -> Option<Vec<u8>> {
    let first = *trigger.first()?;
    if first & 0x80 != 0 || trigger.len() <= MIN_RESET_LEN {
        return None;
    }
    let most = (trigger.len() - 1).min(SHORTEST_PACKET + MAX_EXTRA);
    let least = SHORTEST_PACKET.min(most);
    let len = rng.random_range(least..=most);
    let mut out = vec![0u8; len];
    rng.fill(&mut out[..len - TOKEN_LEN]);
    // Short-header form: form bit clear, fixed bit set (RFC 9000 §10.3).
    out[0] = (out[0] & 0x3f) | 0x40;
    out[len - TOKEN_LEN..].copy_from_slice(&key.token(cid));
    Some(out)
}

/// Most resets an endpoint sends per second; past that, datagrams for unknown ids are
/// dropped unanswered (a flood of them costs one HMAC each, and the answers go to
/// addresses the endpoint cannot validate).
pub const MAX_RESETS_PER_SECOND: u32 = 100;

/// What an endpoint answers datagrams for connection ids it does not know with: resets
/// under its key, at most [`MAX_RESETS_PER_SECOND`]. Sans-IO: the caller passes `now`
/// and sends what it gets.
#[derive(Debug)]
pub struct Resetter {
    key: ResetKey,
    rng: ChaCha8Rng,
    /// The start of the current one-second window and the resets sent in it.
    window: Option<(Instant, u32)>,
    /// Resets produced.
    pub sent: u64,
    /// Datagrams left unanswered by the rate limit.
    pub limited: u64,
}

impl Resetter {
    /// Resets under `key`, their padding drawn from `seed`.
    pub fn new(key: ResetKey, seed: u64) -> Resetter {
        Resetter { key, rng: ChaCha8Rng::seed_from_u64(seed), window: None, sent: 0, limited: 0 }
    }

    /// The reset answering `trigger`, a datagram for unknown id `cid` at `now`, if one is
    /// due (see [`encode`] and the rate limit).
    pub fn answer(&mut self, now: Instant, cid: u64, trigger: &[u8]) -> Option<Vec<u8>> {
        let (start, count) = match self.window {
            Some((s, c)) if now.saturating_duration_since(s) < Duration::from_secs(1) => (s, c),
            _ => (now, 0),
        };
        if count >= MAX_RESETS_PER_SECOND {
            self.limited += 1;
            return None;
        }
        let out = encode(&self.key, cid, trigger, &mut self.rng)?;
        self.window = Some((start, count + 1));
        self.sent += 1;
        Some(out)
    }
}

/// Whether `datagram` ends in `token`, compared without leaking where they differ.
pub fn ends_with_token(datagram: &[u8], token: &[u8; TOKEN_LEN]) -> bool {
    if datagram.len() < MIN_RESET_LEN {
        return false;
    }
    let tail = &datagram[datagram.len() - TOKEN_LEN..];
    tail.iter().zip(token).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn tokens_depend_on_key_and_id_and_survive_a_rederivation() {
        let a = ResetKey::derive(b"tls key one");
        let b = ResetKey::derive(b"tls key two");
        assert_eq!(a.token(7), ResetKey::derive(b"tls key one").token(7));
        assert_ne!(a.token(7), a.token(8));
        assert_ne!(a.token(7), b.token(7));
    }

    #[test]
    fn a_reset_is_shorter_than_its_trigger_and_ends_in_the_token() {
        let key = ResetKey::new(&[9; 32]);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for len in [MIN_RESET_LEN + 1, SHORTEST_PACKET, 40, 100, 1200, 1500] {
            let trigger = vec![0x43; len];
            let r = encode(&key, 5, &trigger, &mut rng).expect("long enough");
            assert!(r.len() < len && r.len() >= MIN_RESET_LEN, "{} for {len}", r.len());
            // As long as a packet whenever the trigger allows it.
            assert!(r.len() >= SHORTEST_PACKET.min(len - 1), "{} for {len}", r.len());
            assert_eq!(r[0] & 0xc0, 0x40);
            assert!(ends_with_token(&r, &key.token(5)));
            assert!(!ends_with_token(&r, &key.token(6)));
        }
    }

    #[test]
    fn resets_are_rate_limited_per_second() {
        let mut r = Resetter::new(ResetKey::new(&[1; 32]), 3);
        let t0 = Instant::ZERO;
        let d = [0x41u8; 100];
        let n = (0..300).filter(|_| r.answer(t0, 9, &d).is_some()).count();
        assert_eq!(n, MAX_RESETS_PER_SECOND as usize);
        assert_eq!((r.sent, r.limited), (100, 200));
        let later = t0 + Duration::from_millis(1000);
        assert!(r.answer(later, 9, &d).is_some());
        // Too short to answer: neither sent nor limited.
        assert!(r.answer(later, 9, &d[..MIN_RESET_LEN]).is_none());
        assert_eq!((r.sent, r.limited), (101, 200));
    }

    #[test]
    fn no_reset_for_a_short_trigger_or_a_long_header() {
        let key = ResetKey::new(&[9; 32]);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert!(encode(&key, 5, &[0x43; MIN_RESET_LEN], &mut rng).is_none());
        assert!(encode(&key, 5, &[], &mut rng).is_none());
        assert!(encode(&key, 5, &[0xc3; 1200], &mut rng).is_none());
        // A chain of resets answering resets ends: each is shorter than the last.
        let mut d = vec![0x43; 1200];
        let mut n = 0;
        while let Some(r) = encode(&key, 5, &d, &mut rng) {
            d = r;
            n += 1;
            assert!(n < 1200);
        }
        assert!(d.len() <= MIN_RESET_LEN + 1);
    }
}
