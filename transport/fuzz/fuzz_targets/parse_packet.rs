//! Any bytes: the header parser and the frame decoder must not panic, and whatever frames
//! decode must re-encode to bytes that decode back to the same frames.
#![no_main]

use braid_transport::proto::crypto::PlainHeader;
use braid_transport::proto::packet::{decode_frames, encode_frames};
use braid_transport::proto::peek_connection_id;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = peek_connection_id(data);
    let _ = PlainHeader::parse(data);
    if let Ok(frames) = decode_frames(data) {
        let mut buf = Vec::new();
        encode_frames(&frames, &mut buf);
        assert_eq!(decode_frames(&buf).as_ref(), Ok(&frames), "re-encoded frames differ");
    }
});
