//! Any bytes as a YUV4MPEG2 file: the reader never panics, and every picture it returns
//! has the plane sizes its header announces.
//!
//! The body is `braid_media::fuzzing::y4m_reader`,
//! which the ordinary tests also replay over the stored corpus (`corpus/y4m_reader/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| braid_media::fuzzing::y4m_reader(data));
