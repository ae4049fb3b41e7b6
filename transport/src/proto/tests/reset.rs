//! Stateless reset (RFC 9000 §10.3) at the connection: a reset for an id the client sends
//! with ends it at once and silently; anything else that merely looks like one is dropped.

use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::harness::*;
use crate::proto::crypto::{Level, PlainHeader};
use crate::proto::reset;
use crate::proto::{CidEvent, CloseReason, Delivery, Event, Reliability};

/// The id of the client's latest 1-RTT packet to the server on path 0.
fn client_id_on_path_0(p: &Pair) -> u64 {
    p.trace
        .iter()
        .zip(&p.trace_paths)
        .rev()
        .filter(|((_, to_server, _), path)| *to_server && path.0 == 0)
        .filter_map(|((_, _, d), _)| PlainHeader::parse(d).ok())
        .find(|h| h.level == Level::OneRtt)
        .map(|h| h.connection_id)
        .expect("the client sent 1-RTT packets")
}

/// A pair after a short transfer, tracing, with the ids the server issued.
fn transferred() -> (Pair, Vec<u64>) {
    let mut p = Pair::default_pair(vec![Link::new(10, 10, 0.0)]);
    p.keep_trace = true;
    p.connect();
    bulk(&mut p, 50_000, 5_000, Duration::from_secs(5), |_| {});
    let mut issued = Vec::new();
    while let Some(e) = p.server().poll_cid_event() {
        if let CidEvent::Issued(c) = e {
            issued.push(c);
        }
    }
    (p, issued)
}

/// A reset under the server's key for `cid`, answering a full-size datagram.
fn reset_for(p: &Pair, cid: u64, seed: u64) -> Vec<u8> {
    let trigger = vec![0x43; 1200];
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    reset::encode(&p.server_crypto.reset, cid, &trigger, &mut rng).expect("a long trigger")
}

fn deliver_to_client(p: &mut Pair, data: &[u8]) {
    let now = p.now;
    p.client.handle_datagram(now, client_addr(0), server_addr(0), data);
}

#[test]
fn a_reset_for_an_id_the_client_sends_with_ends_it_silently() {
    let (mut p, issued) = transferred();
    let used = client_id_on_path_0(&p);
    assert_ne!(used, p.client.connection_id(), "path 0 moved to the server's id");
    assert!(issued.contains(&used), "{used:#x} not in {issued:x?}");
    // Tokens of ids the client never sent with change nothing.
    for (k, &cid) in issued.iter().filter(|&&c| c != used).enumerate() {
        let r = reset_for(&p, cid, k as u64);
        deliver_to_client(&mut p, &r);
        assert!(!p.client.is_closed(), "a reset for unused id {cid:#x} was taken");
    }
    let r = reset_for(&p, used, 99);
    deliver_to_client(&mut p, &r);
    assert!(p.client.is_closed());
    let mut events = Vec::new();
    while let Some(e) = p.client.poll_event() {
        events.push(e);
    }
    assert!(events.contains(&Event::Closed { reason: CloseReason::StatelessReset }), "{events:?}");
    // Draining: nothing more is sent, not even a CLOSE.
    let mut buf = Vec::new();
    let now = p.now + Duration::from_secs(1);
    p.client.handle_timeout(now);
    assert!(p.client.poll_transmit(now, &mut buf).is_none());
}

/// The server's handshake id, which the client sends with until it has one of the ids the
/// server issues, comes with its token in the `stateless_reset_token` transport parameter
/// (RFC 9000 §18.2): a reset is recognised from the handshake on. A token under another
/// key is not.
#[test]
fn a_reset_for_the_servers_handshake_id_ends_the_client_from_the_start() {
    let mut p = Pair::default_pair(vec![Link::new(10, 10, 0.0)]);
    p.connect();
    assert!(p.client.is_established());
    let handshake = p.server().connection_id();
    let other_key = reset::ResetKey::new(&[9; 32]);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let forged = reset::encode(&other_key, handshake, &[0x43; 1200], &mut rng).expect("a reset");
    deliver_to_client(&mut p, &forged);
    assert!(!p.client.is_closed(), "a token under another key was taken");
    let r = reset_for(&p, handshake, 4);
    deliver_to_client(&mut p, &r);
    assert!(p.client.is_closed(), "the server's handshake id's reset was not recognised");
    let mut events = Vec::new();
    while let Some(e) = p.client.poll_event() {
        events.push(e);
    }
    assert!(events.contains(&Event::Closed { reason: CloseReason::StatelessReset }), "{events:?}");
}

/// An attacker off the path who knows the id (or guesses it) but not the token: 10 000
/// datagrams shaped like resets, with random tails, are dropped and counted, and the
/// connection goes on.
#[test]
fn a_guessed_reset_is_dropped_and_counted() {
    let (mut p, _) = transferred();
    let used = client_id_on_path_0(&p);
    let before = p.client.stats().dropped;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for _ in 0..10_000 {
        let len = rng.random_range(reset::MIN_RESET_LEN..200);
        let mut d = vec![0u8; len];
        rng.fill(&mut d[..]);
        d[0] = (d[0] & 0x3f) | 0x40;
        if rng.random_bool(0.5) {
            d[1..9].copy_from_slice(&used.to_be_bytes());
        }
        deliver_to_client(&mut p, &d);
    }
    assert!(!p.client.is_closed());
    let after = p.client.stats().dropped;
    assert_eq!(after.unusable() - before.unusable(), 10_000, "{after:?}");
    // Still working: the next message arrives.
    let now = p.now;
    let id = p.server().send_message(now, message(10, 1000), Reliability::Reliable).expect("send");
    let mut got = None;
    let done = p.run_until(Duration::from_secs(2), |p| {
        got = p.client.read_message(p.now);
        got.is_some()
    });
    assert!(done, "nothing arrived after the flood");
    assert_eq!(got, Some(Delivery::Message { id, data: message(10, 1000) }));
}
