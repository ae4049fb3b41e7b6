//! Any bytes read as a run of frames: the frame decoder never panics, and each frame it
//! accepts re-encodes to its `encoded_len` and decodes back to itself.
//!
//! The body is `braid_transport::fuzzing::frame_decoder`,
//! which the ordinary tests also replay over the stored corpus (`corpus/frame_decoder/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| braid_transport::fuzzing::frame_decoder(data));
