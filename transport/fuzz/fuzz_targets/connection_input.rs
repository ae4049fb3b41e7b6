//! Any sequence of datagrams thrown at a client connection: no panic, and the receive
//! buffer never exceeds its configured size.
//!
//! The body is `braid_transport::fuzzing::connection_input`,
//! which the ordinary tests also replay over the stored corpus (`corpus/connection_input/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| braid_transport::fuzzing::connection_input(data));
