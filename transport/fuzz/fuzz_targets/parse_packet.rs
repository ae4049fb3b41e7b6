//! Any bytes: the packet parser never panics, and whatever it accepts re-encodes to
//! bytes that parse back to the same packet.
//!
//! The body is `braid_transport::fuzzing::parse_packet`,
//! which the ordinary tests also replay over the stored corpus (`corpus/parse_packet/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| braid_transport::fuzzing::parse_packet(data));
