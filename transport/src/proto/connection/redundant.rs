//! The redundant copy queue. When the scheduler picks several paths for one packet, the
//! data goes out on the first and a copy of its chunks waits here for each of the others.
//! Copies go out ahead of new data, without the chunks acknowledged meanwhile; the copies
//! for a path are dropped when it fails or closes, and all of them when messages expire or
//! the connection closes.

use std::collections::VecDeque;

use super::Connection;
use super::packetize::Transmit;
use super::paths::Path;
use crate::path::PathId;
use crate::proto::send::Chunk;
use crate::sched::PathView;
use crate::time::Instant;

/// Chunks waiting to be sent again on another path, oldest first.
#[derive(Debug, Default)]
pub(super) struct RedundantQueue {
    copies: VecDeque<(PathId, Vec<Chunk>)>,
}

impl RedundantQueue {
    /// Queues a copy of `chunks` for `path`.
    pub(super) fn push(&mut self, path: PathId, chunks: Vec<Chunk>) {
        self.copies.push_back((path, chunks));
    }

    /// Drops the copies waiting for `path`.
    pub(super) fn drop_path(&mut self, path: PathId) {
        self.copies.retain(|(p, _)| *p != path);
    }

    /// Drops every copy.
    pub(super) fn clear(&mut self) {
        self.copies.clear();
    }
}

impl Connection {
    /// The oldest copy for a usable path, as a packet with the ACKs routed there; copies
    /// whose chunks were all settled meanwhile are skipped.
    pub(super) fn poll_redundant(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
    ) -> Option<Transmit> {
        while let Some((pid, chunks)) = self.redundant.copies.pop_front() {
            if !self.paths.get(&pid).is_some_and(Path::usable) {
                continue;
            }
            let mut b = self.start(pid, buf)?;
            self.add_acks(now, &mut b, buf, false, views);
            for c in chunks {
                if self.send.is_settled(c.message_id, c.range()) {
                    continue;
                }
                if b.push(buf, &self.chunk_frame(&c)) {
                    b.data_bytes += c.data.len() as u64;
                    b.frames.data.push((c.message_id, c.range()));
                }
            }
            if b.is_empty(buf) {
                // Everything was acknowledged meanwhile.
                self.unstart(&b);
                continue;
            }
            return self.finish(now, b, buf, true);
        }
        None
    }
}
