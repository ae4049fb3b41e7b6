//! QUIC v1 with a peer that is not Braid: extension frames only where both sides announced
//! them, v1's frames for the rest, and the errors RFC 9000 names for frames a side cannot
//! take. (Against a real other stack: `io/tests/interop_quinn.rs`.)

use std::time::Duration;

use bytes::Bytes;

use super::harness::*;
use crate::path::PathRole;
use crate::proto::frame::Frame;
use crate::proto::{
    CloseReason, Event, FRAME_ENCODING_ERROR, PROTOCOL_VIOLATION, Reliability, STREAM_LIMIT_ERROR,
    STREAM_STATE_ERROR, SendError,
};

/// The code `c` closed with, if it closed on a protocol error.
fn close_code(c: &mut crate::proto::Connection) -> Option<u64> {
    std::iter::from_fn(|| c.poll_event()).find_map(|e| match e {
        Event::Closed { reason: CloseReason::ProtocolError { code, .. } } => Some(code),
        _ => None,
    })
}

/// A pair whose client does not announce Braid's frames (as another QUIC stack would not).
fn plain_client_pair() -> Pair {
    let mut cc = config();
    cc.braid_frames = false;
    let mut p = Pair::new(cc, config(), vec![Link::new(10, 10, 0.0), Link::new(10, 10, 0.0)], 5);
    p.connect();
    p
}

#[test]
fn a_peer_without_braid_frames_receives_none_and_the_connection_lives() {
    let mut p = plain_client_pair();
    let now = p.now;
    // Messages travel in Braid's DATA frame: refused at both ends, not queued and lost.
    let m = Bytes::from_static(b"frame");
    assert_eq!(
        p.server().send_message(now, m.clone(), Reliability::Reliable),
        Err(SendError::Unsupported)
    );
    assert_eq!(p.client.send_message(now, m, Reliability::Reliable), Err(SendError::Unsupported));
    // Seconds of ACKs, keep-alives, ids and HANDSHAKE_DONE: the client would close with
    // FRAME_ENCODING_ERROR on any extension frame (PATH_ACK_TIMESTAMPS, READ_RATE …).
    p.run_until(Duration::from_secs(3), |_| false);
    assert!(p.client.is_established() && p.server().is_established());
    assert_eq!(close_code(&mut p.client), None);
    assert_eq!(p.client.stats().dropped.malformed, 0);
}

#[test]
fn a_path_opens_the_rfc_10069_way_between_a_side_without_braid_frames_and_ours() {
    // No PATH_JOIN: the client opens path 1 with v1's PATH_CHALLENGE on the new path id,
    // the server answers it and challenges back, and both validate the path.
    let mut p = plain_client_pair();
    let id = p.add_path(1, PathRole::Lte);
    p.run_until(Duration::from_secs(1), |_| false);
    assert!(p.client.is_established() && p.server().is_established());
    let validated: Vec<bool> = p.server().stats().paths.iter().map(|s| s.validated).collect();
    assert_eq!(validated, [true, true], "path {id}");
    assert_eq!(close_code(&mut p.client), None);
}

#[test]
fn an_extension_frame_to_a_side_that_did_not_announce_it_is_a_frame_encoding_error() {
    let mut p = plain_client_pair();
    let cid = p.client.connection_id();
    p.inject_to_client(cid, 0, vec![Frame::ReadRate { bps: 1000 }]);
    assert!(p.client.is_closed());
    assert_eq!(close_code(&mut p.client), Some(FRAME_ENCODING_ERROR));
}

#[test]
fn stream_frames_close_with_the_stream_errors_of_rfc_9000() {
    // No stream is allowed: one of the peer's is over the limit (STREAM_LIMIT_ERROR), one
    // of this side's was never opened (STREAM_STATE_ERROR). Client-initiated ids are even.
    for (id, code) in [(0, STREAM_LIMIT_ERROR), (4, STREAM_LIMIT_ERROR), (1, STREAM_STATE_ERROR)] {
        for kind in [0x08, 0x04, 0x05, 0x11, 0x15] {
            let mut p = established_pair();
            let cid = p.server().connection_id();
            p.inject_to_server(cid, 0, vec![Frame::StreamFrame { kind, id }]);
            assert_eq!(close_code(p.server()), Some(code), "type {kind:#x}, stream {id}");
        }
    }
}

#[test]
fn handshake_done_from_a_client_is_a_protocol_violation() {
    let mut p = established_pair();
    let cid = p.server().connection_id();
    p.inject_to_server(cid, 0, vec![Frame::HandshakeDone]);
    assert_eq!(close_code(p.server()), Some(PROTOCOL_VIOLATION));
}

#[test]
fn limits_tokens_and_retirements_are_taken_and_an_unissued_retirement_is_refused() {
    let mut p = established_pair();
    let cid = p.server().connection_id();
    // MAX_STREAMS, STREAMS_BLOCKED, DATA_BLOCKED and NEW_TOKEN change nothing here.
    let ignored = vec![
        Frame::StreamLimit { kind: 0x12, value: 100 },
        Frame::StreamLimit { kind: 0x16, value: 0 },
        Frame::StreamLimit { kind: 0x14, value: 5 },
    ];
    p.inject_to_server(cid, 0, ignored);
    let ccid = p.client.connection_id();
    p.inject_to_client(ccid, 0, vec![Frame::NewToken]);
    // The id the server issued for path 0 is number 1: retiring it is counted, retiring
    // number 2 (never issued) is a PROTOCOL_VIOLATION (RFC 9000 §19.16).
    p.inject_to_server(cid, 0, vec![Frame::RetireCid { path: crate::path::PathId(0), seq: 1 }]);
    assert!(p.server().is_established() && p.client.is_established());
    p.inject_to_server(cid, 0, vec![Frame::RetireCid { path: crate::path::PathId(0), seq: 2 }]);
    assert_eq!(close_code(p.server()), Some(PROTOCOL_VIOLATION));
}

#[test]
fn a_v1_path_challenge_is_answered_on_its_path() {
    let mut p = established_pair();
    let cid = p.client.connection_id();
    p.inject_to_client(cid, 0, vec![Frame::PeerChallenge { token: 0x1234_5678 }]);
    let now = p.now;
    let mut buf = Vec::new();
    let mut answered = false;
    while let Some(t) = p.client.poll_transmit(now, &mut buf) {
        let frames = p.server().open_frames(&buf[..t.len]).unwrap_or_default();
        answered |= frames.contains(&Frame::PathResponse { token: 0x1234_5678 });
    }
    assert!(answered, "no PATH_RESPONSE with the challenge's data");
}

#[test]
fn tls_bytes_after_the_handshake_above_a_large_gap_exceed_the_buffer() {
    let mut p = established_pair();
    let cid = p.client.connection_id();
    let far = Frame::Crypto { offset: 100_000, data: Bytes::from(vec![0; 5000]) };
    p.inject_to_client(cid, 0, vec![far]);
    // RFC 9000 §20.1: CRYPTO_BUFFER_EXCEEDED.
    assert_eq!(close_code(&mut p.client), Some(0x0d));
}
