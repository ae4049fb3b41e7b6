//! Replays every stored media fuzz corpus file (`transport/fuzz/corpus/<target>/`, where
//! the fuzz project lives) through the target's body, as an ordinary test.

use std::path::Path;

use braid_media::fuzzing;

/// Runs `body` on every file of the target's corpus; returns how many there were.
fn replay(target: &str, body: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../transport/fuzz/corpus").join(target);
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
fn media_framing_corpus() {
    assert!(replay("media_framing", fuzzing::media_framing) > 0);
}

#[test]
fn y4m_reader_corpus() {
    assert!(replay("y4m_reader", fuzzing::y4m_reader) > 0);
}
