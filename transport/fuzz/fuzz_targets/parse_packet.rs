//! Any bytes: the packet parser must not panic, and whatever it accepts must re-encode to
//! bytes that parse back to the same packet.
#![no_main]

use braid_transport::proto::packet::Packet;
use braid_transport::proto::peek_connection_id;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = peek_connection_id(data);
    if let Ok(p) = Packet::decode(data) {
        let mut buf = Vec::new();
        p.encode(&mut buf);
        assert_eq!(
            Packet::decode(&buf).as_ref(),
            Ok(&p),
            "re-encoded packet differs"
        );
    }
});
