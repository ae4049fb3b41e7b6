//! Packets: a protected header followed by frames.
//!
//! The header layouts, packet protection and connection-id routing are in
//! [`super::crypto`]; this module decodes the frames of an opened (decrypted) 1-RTT
//! payload.

use bytes::Bytes;

use super::frame::Frame;
use super::wire::{Reader, WireError};

/// Decodes the frames of a decrypted packet payload. PADDING (type 0x00, RFC 9000 §19.1)
/// is skipped wherever it appears, so a PADDING-only packet decodes to no frames (it is a
/// valid, non-ack-eliciting packet: noq 1.4 sends them); an empty payload, which holds no
/// frame at all, is an error (RFC 9000 §12.4), as is any malformed frame. Never panics;
/// memory is bounded by the input size.
pub fn decode_frames(payload: &[u8]) -> Result<Vec<Frame>, WireError> {
    let mut frames = Vec::new();
    decode_frames_into(payload, &mut frames)?;
    Ok(frames)
}

/// As [`decode_frames`], into `frames` (cleared first, so its capacity is reused); on an
/// error its contents are unspecified.
pub fn decode_frames_into(payload: &[u8], frames: &mut Vec<Frame>) -> Result<(), WireError> {
    frames.clear();
    let mut r = Reader::new(payload);
    while skip_padding(&mut r) {
        frames.push(Frame::decode(&mut r)?);
    }
    if payload.is_empty() {
        return Err(WireError::Invalid("empty packet"));
    }
    Ok(())
}

/// As [`decode_frames_into`], with DATA bytes as views of `payload` where
/// [`Frame::decode_shared`] allows.
pub fn decode_frames_shared(payload: &Bytes, frames: &mut Vec<Frame>) -> Result<(), WireError> {
    frames.clear();
    let mut r = Reader::new(payload);
    while skip_padding(&mut r) {
        frames.push(Frame::decode_shared(&mut r, payload)?);
    }
    if payload.is_empty() {
        return Err(WireError::Invalid("empty packet"));
    }
    Ok(())
}

/// Skips PADDING bytes; whether a frame follows.
fn skip_padding(r: &mut Reader<'_>) -> bool {
    while r.input().get(r.position()) == Some(&PADDING) {
        let _ = r.u8();
    }
    !r.is_empty()
}

/// The PADDING frame's type (RFC 9000 §19.1): one zero byte.
pub const PADDING: u8 = 0x00;

/// Encodes frames into `buf` (appending): the plaintext payload of a packet.
pub fn encode_frames(frames: &[Frame], buf: &mut Vec<u8>) {
    for f in frames {
        f.encode(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::frame::tests::frame_strategy;
    use proptest::collection::vec;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn payload_round_trips(frames in vec(frame_strategy(), 1..6)) {
            let mut buf = Vec::new();
            encode_frames(&frames, &mut buf);
            prop_assert_eq!(decode_frames(&buf), Ok(frames));
        }

        #[test]
        fn random_bytes_never_panic_the_decoders(bytes in vec(any::<u8>(), 0..1500)) {
            let _ = decode_frames(&bytes);
            let _ = crate::proto::crypto::PlainHeader::parse(&bytes);
            let _ = crate::proto::crypto::peek_connection_id(&bytes);
        }
    }

    #[test]
    fn an_empty_payload_is_rejected_and_padding_alone_is_a_packet_of_no_frames() {
        assert!(decode_frames(&[]).is_err());
        assert_eq!(decode_frames(&[PADDING; 5]), Ok(Vec::new()), "PADDING alone (RFC 9000 §19.1)");
        let mut shared = vec![Frame::Ping];
        assert_eq!(decode_frames_shared(&Bytes::from_static(&[PADDING; 3]), &mut shared), Ok(()));
        assert!(shared.is_empty());
    }

    #[test]
    fn padding_is_skipped_wherever_it_is() {
        let frames = vec![Frame::Ping, Frame::MaxData { max: 7 }];
        let mut buf = vec![PADDING, PADDING];
        Frame::Ping.encode(&mut buf);
        buf.push(PADDING);
        Frame::MaxData { max: 7 }.encode(&mut buf);
        buf.extend_from_slice(&[PADDING; 3]);
        assert_eq!(decode_frames(&buf), Ok(frames.clone()));
        let mut shared = Vec::new();
        decode_frames_shared(&Bytes::from(buf), &mut shared).expect("decodes");
        assert_eq!(shared, frames);
    }
}
