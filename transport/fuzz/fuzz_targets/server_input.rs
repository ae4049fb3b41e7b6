//! A server connection accepted from the first datagram (or a real hello), then fed any
//! datagrams from three addresses: no panic, the receive buffer bound holds, and nothing
//! but validation packets goes to an address that is not a validated path.
//!
//! The body is `braid_transport::fuzzing::server_input`,
//! which the ordinary tests also replay over the stored corpus (`corpus/server_input/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| braid_transport::fuzzing::server_input(data));
