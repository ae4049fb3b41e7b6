//! QUIC v1 with a peer that is not Braid: extension frames only where both sides announced
//! them, v1's frames for the rest, and the errors RFC 9000 names for frames a side cannot
//! take. (Against a real other stack: `io/tests/interop_quinn.rs`.)

use std::time::Duration;

use bytes::Bytes;

use super::harness::*;
use crate::path::PathRole;
use crate::proto::frame::Frame;
use crate::proto::frame::StreamData;
use crate::proto::mapping::{MAX_STREAMS_WINDOW, stream_id};
use crate::proto::{
    CloseReason, Delivery, Event, FINAL_SIZE_ERROR, FLOW_CONTROL_ERROR, FRAME_ENCODING_ERROR,
    PROTOCOL_VIOLATION, Reliability, STREAM_LIMIT_ERROR, STREAM_STATE_ERROR,
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
fn toward_a_peer_without_braid_frames_messages_travel_on_v1_streams_both_ways() {
    let mut p = plain_client_pair();
    let now = p.now;
    for i in 0..3 {
        p.server().send_message(now, message(i, 3000), Reliability::Reliable).unwrap();
        p.client.send_message(now, message(100 + i, 500), Reliability::Reliable).unwrap();
    }
    // An empty message is a stream with FIN and no bytes.
    p.server().send_message(now, Bytes::new(), Reliability::Reliable).unwrap();
    let (mut at_client, mut at_server) = (Vec::new(), Vec::new());
    assert!(p.run_until(Duration::from_secs(5), |p| {
        let now = p.now;
        at_client.extend(std::iter::from_fn(|| p.client.read_message(now)));
        at_server.extend(std::iter::from_fn(|| p.server().read_message(now)));
        at_client.len() == 4 && at_server.len() == 3
    }));
    for i in 0..3 {
        let id = i as u64;
        assert_eq!(at_client[i], Delivery::Message { id, data: message(id, 3000) });
        assert_eq!(at_server[i], Delivery::Message { id, data: message(100 + id, 500) });
    }
    assert_eq!(at_client[3], Delivery::Message { id: 3, data: Bytes::new() });
    // Seconds of ACKs, keep-alives, ids and HANDSHAKE_DONE: the client would close with
    // FRAME_ENCODING_ERROR on any extension frame (PATH_ACK_TIMESTAMPS, READ_RATE …).
    p.run_until(Duration::from_secs(3), |_| false);
    assert!(p.client.is_established() && p.server().is_established());
    assert_eq!(close_code(&mut p.client), None);
    assert_eq!(p.client.stats().dropped.malformed, 0);
}

#[test]
fn with_request_streams_each_answer_goes_on_its_requests_bidirectional_stream() {
    // As HTTP/0.9 over QUIC: the client's message n opens bidirectional stream 4n, the
    // server's message n answers on it, and not before the stream is open.
    let mut cc = config();
    cc.braid_frames = false;
    cc.request_streams = true;
    let mut sc = config();
    sc.request_streams = true;
    let mut p = Pair::new(cc, sc, vec![Link::new(10, 10, 0.02)], 9);
    p.connect();
    let now = p.now;
    // An answer queued before any request waits for the client's stream.
    p.server().send_message(now, message(50, 20_000), Reliability::Reliable).unwrap();
    p.run_until(Duration::from_millis(300), |_| false);
    assert_eq!(p.client.read_message(p.now), None, "no answer before its request");
    for i in 0..3 {
        p.client
            .send_message(now, Bytes::from(format!("GET /{i}\r\n")), Reliability::Reliable)
            .unwrap();
    }
    let (mut requests, mut answers) = (Vec::new(), Vec::new());
    assert!(p.run_until(Duration::from_secs(10), |p| {
        let now = p.now;
        while let Some(d) = p.server().read_message(now) {
            requests.push(d);
            let n = requests.len() as u64;
            if n > 1 {
                p.server()
                    .send_message(now, message(50 + n - 1, 30_000), Reliability::Reliable)
                    .unwrap();
            }
        }
        answers.extend(std::iter::from_fn(|| p.client.read_message(now)));
        answers.len() == 3
    }));
    for (i, d) in requests.iter().enumerate() {
        let want = Bytes::from(format!("GET /{i}\r\n"));
        assert_eq!(*d, Delivery::Message { id: i as u64, data: want });
    }
    assert_eq!(answers[0], Delivery::Message { id: 0, data: message(50, 20_000) });
    assert_eq!(answers[2], Delivery::Message { id: 2, data: message(52, 30_000) });
    assert_eq!(close_code(&mut p.client), None);
    assert_eq!(close_code(p.server()), None);
}

#[test]
fn on_v1_streams_an_abandoned_message_is_reset_and_read_as_a_gap() {
    let mut p = plain_client_pair();
    let now = p.now;
    p.server().send_message(now, message(0, 1000), Reliability::Reliable).unwrap();
    p.run_until(Duration::from_millis(300), |_| false);
    for l in &mut p.links {
        l.up = false;
    }
    let now = p.now;
    let at = now + Duration::from_millis(100);
    let rel = Reliability::Deadline { at, max_retransmissions: 3 };
    p.server().send_message(now, message(1, 5000), rel).unwrap();
    p.run_until(Duration::from_millis(400), |_| false);
    for l in &mut p.links {
        l.up = true;
    }
    let now = p.now;
    p.server().send_message(now, message(2, 700), Reliability::Reliable).unwrap();
    let mut got = Vec::new();
    assert!(p.run_until(Duration::from_secs(10), |p| {
        let now = p.now;
        got.extend(std::iter::from_fn(|| p.client.read_message(now)));
        got.len() == 3
    }));
    assert_eq!(got[1], Delivery::Gap { id: 1 }, "{got:?}");
    assert_eq!(got[2], Delivery::Message { id: 2, data: message(2, 700) });
    assert_eq!(close_code(&mut p.client), None);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 8, .. Default::default() })]

    /// The delivery contract of `messages::random_transfers_keep_the_delivery_contract`,
    /// messages on v1 streams: every id once, in order; reliable ones intact; only
    /// deadline ones may become gaps (their streams reset).
    #[test]
    fn on_v1_streams_random_transfers_keep_the_delivery_contract(
        seed in 0u64..1_000_000,
        loss in 0.0f64..0.08,
        kinds in proptest::collection::vec(0u8..4, 50..120),
    ) {
        let mut cc = patient(config());
        cc.braid_frames = false;
        let links = vec![Link::new(15, 10, loss)];
        let mut p = Pair::new(cc, patient(config()), links, seed);
        p.connect();
        random_transfer(&mut p, &kinds)?;
        proptest::prop_assert_eq!(close_code(&mut p.client), None);
    }
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
fn stream_frames_against_rfc_9000s_rules_close_with_the_errors_it_names() {
    // The server carries messages on v1 streams toward the plain client; client-initiated
    // ids are even, unidirectional ones have bit 1 set (RFC 9000 §2.1).
    let bytes = |id, offset, n: usize, fin| {
        Frame::Stream(StreamData { id, offset, fin, data: Bytes::from(vec![7; n]) })
    };
    let window = config().recv_buffer_bytes;
    let cases: Vec<(Vec<Frame>, u64)> = vec![
        (vec![bytes(0, 0, 1, false)], STREAM_LIMIT_ERROR),
        (vec![bytes(1, 0, 1, false)], STREAM_STATE_ERROR),
        (vec![bytes(stream_id(0, false), 0, 1, false)], STREAM_STATE_ERROR),
        (vec![bytes(stream_id(MAX_STREAMS_WINDOW, true), 0, 1, false)], STREAM_LIMIT_ERROR),
        (vec![Frame::StopSending { id: stream_id(0, false), code: 0 }], STREAM_STATE_ERROR),
        (
            vec![Frame::StreamFrame { kind: 0x11, id: stream_id(0, true), value: 9 }],
            STREAM_STATE_ERROR,
        ),
        (vec![bytes(stream_id(0, true), window, 1, false)], FLOW_CONTROL_ERROR),
        (
            vec![bytes(stream_id(0, true), 5, 10, true), bytes(stream_id(0, true), 10, 10, false)],
            FINAL_SIZE_ERROR,
        ),
        (
            vec![
                bytes(stream_id(1, true), 0, 10, false),
                Frame::ResetStream { id: stream_id(1, true), code: 0, final_size: 4 },
            ],
            FINAL_SIZE_ERROR,
        ),
    ];
    for (frames, code) in cases {
        let mut p = plain_client_pair();
        let cid = p.server().connection_id();
        let what = format!("{frames:?}");
        p.inject_to_server(cid, 0, frames);
        assert_eq!(close_code(p.server()), Some(code), "{what}");
    }
    // Between two Braid sides messages travel in DATA: a stream frame is a violation.
    let mut p = established_pair();
    let cid = p.server().connection_id();
    p.inject_to_server(cid, 0, vec![bytes(stream_id(0, true), 0, 1, true)]);
    assert_eq!(close_code(p.server()), Some(PROTOCOL_VIOLATION));
}

#[test]
fn a_packet_of_padding_alone_is_taken_and_one_without_frames_is_a_protocol_violation() {
    // RFC 9000 §19.1, §12.4: PADDING frames alone make a (non-ack-eliciting) packet, as
    // noq 1.4 sends them; before, such a packet closed the connection with
    // FRAME_ENCODING_ERROR ("empty packet"). A payload with no frame at all is a
    // PROTOCOL_VIOLATION.
    let mut p = established_pair();
    let cid = p.server().connection_id();
    for payload in [&[0u8; 1][..], &[0u8; 40][..]] {
        let pn = p.client.take_packet_number(crate::path::PathId(0));
        let pkt = p.client.seal_payload_with(cid, crate::path::PathId(0), pn, payload, 0);
        let now = p.now;
        p.server().handle_datagram(now, server_addr(0), client_addr(0), &pkt);
        assert!(p.server().is_established(), "PADDING × {}", payload.len());
    }
    assert_eq!(close_code(p.server()), None);
    let pn = p.client.take_packet_number(crate::path::PathId(0));
    let pkt = p.client.seal_payload_with(cid, crate::path::PathId(0), pn, &[], 0);
    let now = p.now;
    p.server().handle_datagram(now, server_addr(0), client_addr(0), &pkt);
    assert_eq!(close_code(p.server()), Some(PROTOCOL_VIOLATION));
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
    // MAX_STREAMS, STREAMS_BLOCKED and DATA_BLOCKED change nothing here.
    let ignored = vec![
        Frame::StreamLimit { kind: 0x12, value: 100 },
        Frame::StreamLimit { kind: 0x16, value: 0 },
        Frame::StreamLimit { kind: 0x14, value: 5 },
    ];
    p.inject_to_server(cid, 0, ignored);
    let ccid = p.client.connection_id();
    let token = bytes::Bytes::from_static(b"a token");
    p.inject_to_client(ccid, 0, vec![Frame::NewToken { token: token.clone() }]);
    assert_eq!(p.client.take_new_token(), Some(token.to_vec()), "kept for the next connection");
    assert_eq!(p.client.take_new_token(), None, "once");
    // The server issued numbers 1 to 3 for path 0 (the client's limit is 4, the
    // handshake's id counted): retiring number 1 makes it issue number 4 in its place (ids
    // rotate); retiring number 5 (never issued) is a PROTOCOL_VIOLATION (RFC 9000 §19.16).
    let path0 = crate::path::PathId(0);
    let first = p.server().issued_cids(path0);
    assert_eq!(first.len(), 3, "{first:?}");
    p.inject_to_server(cid, 0, vec![Frame::RetireCid { path: path0, seq: 1 }]);
    assert!(p.server().is_established() && p.client.is_established());
    let replaced = p.server().issued_cids(path0);
    assert_eq!(replaced.len(), 3, "{replaced:?}");
    assert!(!replaced.contains(&first[0]), "a new id in place of the retired one");
    assert_eq!(p.server().routes(first[0]), None, "the retired id is not routed");
    p.inject_to_server(cid, 0, vec![Frame::RetireCid { path: path0, seq: 1 }]);
    assert!(p.server().is_established(), "a retirement repeated is ignored");
    p.inject_to_server(cid, 0, vec![Frame::RetireCid { path: path0, seq: 5 }]);
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
