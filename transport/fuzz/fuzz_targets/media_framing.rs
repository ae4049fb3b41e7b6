//! Any bytes as a media stream message: the decoder never panics, and a decoded message
//! re-encodes to bytes that decode to the same message.
//!
//! The body is `braid_media::fuzzing::media_framing`,
//! which the ordinary tests also replay over the stored corpus (`corpus/media_framing/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| braid_media::fuzzing::media_framing(data));
