//! Replays every stored fuzz corpus file (`fuzz/corpus/<target>/`) through the target's
//! body, as an ordinary test: what the fuzzer found interesting stays covered without a
//! sanitizer build.

use std::path::Path;

use braid_transport::fuzzing;

/// Runs `body` on every file of `fuzz/corpus/<target>`; returns how many there were.
fn replay(target: &str, body: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<_> = match std::fs::read_dir(&dir) {
        Ok(d) => d.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    files.sort();
    for f in &files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let outcome = std::panic::catch_unwind(|| body(&data));
        assert!(outcome.is_ok(), "{target}: {} fails", f.display());
    }
    files.len()
}

#[test]
fn parse_packet_corpus() {
    assert!(replay("parse_packet", fuzzing::parse_packet) > 0);
}

#[test]
fn frame_decoder_corpus() {
    assert!(replay("frame_decoder", fuzzing::frame_decoder) > 0);
}

#[test]
fn connection_input_corpus() {
    assert!(replay("connection_input", fuzzing::connection_input) > 0);
}

#[test]
fn server_input_corpus() {
    assert!(replay("server_input", fuzzing::server_input) > 0);
}
