//! Packets: a protected header followed by frames.
//!
//! The header layouts, packet protection and connection-id routing are in
//! [`super::crypto`]; this module decodes the frames of an opened (decrypted) 1-RTT
//! payload.

use bytes::Bytes;

use super::frame::Frame;
use super::wire::{Reader, WireError};

/// Decodes the frames of a decrypted packet payload. A packet must carry at least one
/// frame; any malformed frame rejects the whole packet. Never panics; memory is bounded by
/// the input size.
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
    while !r.is_empty() {
        frames.push(Frame::decode(&mut r)?);
    }
    if frames.is_empty() {
        return Err(WireError::Invalid("empty packet"));
    }
    Ok(())
}

/// As [`decode_frames_into`], with DATA bytes as views of `payload` where
/// [`Frame::decode_shared`] allows.
pub fn decode_frames_shared(payload: &Bytes, frames: &mut Vec<Frame>) -> Result<(), WireError> {
    frames.clear();
    let mut r = Reader::new(payload);
    while !r.is_empty() {
        frames.push(Frame::decode_shared(&mut r, payload)?);
    }
    if frames.is_empty() {
        return Err(WireError::Invalid("empty packet"));
    }
    Ok(())
}

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
    fn empty_payload_is_rejected() {
        assert!(decode_frames(&[]).is_err());
    }
}
