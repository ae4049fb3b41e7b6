//! The bodies of the fuzz targets in `fuzz/` (cargo-fuzz, libFuzzer). They live here so
//! that the ordinary tests replay every stored corpus file through exactly the code the
//! fuzzer ran (`tests/fuzz_corpus.rs`), without a sanitizer build. Each function takes any
//! bytes and panics only on a broken property.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use crate::cc::RenoConfig;
use crate::path::PathRole;
use crate::proto::crypto::{HandshakeChunk, PlainHeader, deterministic};
use crate::proto::frame::Frame;
use crate::proto::packet::{decode_frames, encode_frames};
use crate::proto::wire::Reader;
use crate::proto::{Config, Connection, peek_connection_id};
use crate::sched::MinRttConfig;
use crate::time::Instant;

/// The receive buffer of the fuzzed connections.
const BUFFER: u64 = 16 * 1024;

/// `parse_packet`: the header parser and the frame decoder never panic, and whatever
/// frames decode re-encode to bytes that decode back to the same frames.
pub fn parse_packet(data: &[u8]) {
    let _ = peek_connection_id(data);
    // A header that parses lies inside the datagram, its token inside the header, and
    // leaves room for the header-protection sample (4 bytes past the packet number's
    // offset, 16 long).
    if let Ok(h) = PlainHeader::parse(data) {
        assert!(h.end <= data.len() && h.pn_offset + 20 <= h.end, "packet bounds {h:?}");
        assert!(h.token.0 + h.token.1 <= h.pn_offset, "token outside the header {h:?}");
    }
    if let Some(r) = crate::proto::retry::parse(data) {
        let _ = r.verify(&r.dcid);
    }
    let _ = crate::proto::version::offered(data);
    // A Version Negotiation answer is smaller than what it answers, and reads back.
    if let Some(vn) = crate::proto::version::answer(data, 0x40) {
        assert!(vn.len() < data.len(), "a negotiation as large as its trigger");
        assert!(crate::proto::version::offered(&vn).is_some(), "our negotiation does not read");
    }
    // Handshake payloads: whatever decodes re-encodes to chunks that decode the same.
    if let Ok(chunks) = HandshakeChunk::decode_all(data) {
        let mut buf = Vec::new();
        for c in &chunks {
            c.encode(&mut buf);
        }
        assert_eq!(HandshakeChunk::decode_all(&buf).ok(), Some(chunks), "chunks differ");
    }
    // A PADDING-only payload decodes to no frames, which re-encode to nothing.
    if let Ok(frames) = decode_frames(data)
        && !frames.is_empty()
    {
        let mut buf = Vec::new();
        encode_frames(&frames, &mut buf);
        assert_eq!(decode_frames(&buf).as_ref(), Ok(&frames), "re-encoded frames differ");
    }
}

/// `frame_decoder`: frames read one after another from any bytes never panic the decoder;
/// each decoded frame re-encodes to exactly `encoded_len` bytes that decode to it again.
pub fn frame_decoder(data: &[u8]) {
    let mut r = Reader::new(data);
    while !r.is_empty() {
        let Ok(f) = Frame::decode(&mut r) else { return };
        let mut buf = Vec::new();
        f.encode(&mut buf);
        assert_eq!(buf.len(), f.encoded_len(), "encoded_len of {f:?}");
        let back = Frame::decode(&mut Reader::new(&buf));
        assert_eq!(back.as_ref(), Ok(&f), "re-encoded frame differs");
    }
}

fn config() -> Arc<Config> {
    let mut c = Config::new(Arc::new(RenoConfig::default()), Arc::new(MinRttConfig::default()));
    c.recv_buffer_bytes = BUFFER;
    Arc::new(c)
}

fn addr(a: u8, b: u8, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, a, b)), port)
}

/// Splits the input into datagrams at 0xFF 0xFF-free runs (`0xFF` separates them); the
/// first byte is the time step (16 µs units) between datagrams.
fn datagrams(data: &[u8]) -> Option<(u8, impl Iterator<Item = &[u8]>)> {
    let (&step, rest) = data.split_first()?;
    Some((step, rest.split(|&b| b == 0xff).filter(|c| !c.is_empty())))
}

/// Feeds one datagram and drains everything the connection has to say; checks the
/// receive buffer bound.
fn feed(c: &mut Connection, now: Instant, local: SocketAddr, from: SocketAddr, d: &[u8]) {
    let mut buf = Vec::new();
    c.handle_datagram(now, local, from, d);
    let mut sent = 0;
    while c.poll_transmit(now, &mut buf).is_some() && sent < 10_000 {
        sent += 1;
    }
    while c.read_message(now).is_some() {}
    while c.poll_event().is_some() {}
    assert!(c.recv_buffered() <= BUFFER, "receive buffer over its bound");
}

fn tick(c: &mut Connection, now: &mut Instant, step: u8) {
    *now += Duration::from_micros(u64::from(step) * 16);
    if c.poll_timeout().is_some_and(|t| t <= *now) {
        c.handle_timeout(*now);
    }
}

/// `connection_input`: a client connection fed any datagram sequence (the connection id
/// patched in for odd lengths, so frames past the header are reached; two source
/// addresses) never panics and never buffers more than its receive buffer.
pub fn connection_input(data: &[u8]) {
    let Some((step, chunks)) = datagrams(data) else { return };
    let (local, remote, other) = (addr(0, 2, 5000), addr(0, 1, 4433), addr(1, 1, 4433));
    let mut now = Instant::ZERO;
    let (crypto, _) = deterministic::pair(1);
    let Ok(mut c) = Connection::connect(config(), &crypto, now, 1, local, remote, PathRole::Wifi)
    else {
        return;
    };
    let cid = c.connection_id().to_be_bytes();
    for chunk in chunks {
        let mut d = chunk.to_vec();
        if d.len() % 2 == 1 && d.len() > 9 {
            // A short header with this connection's id (packet protection still applies).
            d[1..9].copy_from_slice(&cid);
            d[0] = 0x43;
        }
        let from = if chunk[0] & 0x80 == 0 { remote } else { other };
        feed(&mut c, now, local, from, &d);
        tick(&mut c, &mut now, step);
    }
}

/// `server_input`: the first datagram is offered to [`Connection::accept`] (with a real
/// client's first datagram when it is not a ClientHello); the rest are fed to the
/// accepted server connection from three source addresses, with the connection id
/// patched in for odd lengths. No panic, the receive buffer bound holds, and the server
/// sends nothing to any address but the client's: no forged datagram authenticates.
pub fn server_input(data: &[u8]) {
    let Some((step, mut chunks)) = datagrams(data) else { return };
    let (local, client, stranger) = (addr(0, 1, 4433), addr(0, 2, 5000), addr(2, 9, 9));
    let mut now = Instant::ZERO;
    let first = chunks.next().unwrap_or(&[]);
    let (client_crypto, server_crypto) = deterministic::pair(7);
    let accepted = Connection::accept(config(), &server_crypto, now, 7, local, client, first);
    let mut s = match accepted {
        Ok(s) => s,
        Err(_) => {
            // Not a hello: start from a real one (seeded by the first bytes).
            let seed = first.iter().fold(0u64, |h, &b| h.rotate_left(5) ^ u64::from(b));
            let Ok(mut c) = Connection::connect(
                config(),
                &client_crypto,
                now,
                seed,
                client,
                local,
                PathRole::Lte,
            ) else {
                return;
            };
            let mut hello = Vec::new();
            if c.poll_transmit(now, &mut hello).is_none() {
                return;
            }
            match Connection::accept(config(), &server_crypto, now, 7, local, client, &hello) {
                Ok(s) => s,
                Err(_) => return,
            }
        }
    };
    let cid = s.connection_id().to_be_bytes();
    let mut buf = Vec::new();
    for chunk in chunks {
        let mut d = chunk.to_vec();
        if d.len() % 2 == 1 && d.len() > 9 {
            d[1..9].copy_from_slice(&cid);
            d[0] = 0x43;
        }
        let from = match chunk[0] >> 6 {
            0 | 1 => client,
            2 => stranger,
            _ => addr(3, chunk[0], 7),
        };
        s.handle_datagram(now, local, from, &d);
        let mut sent = 0;
        while let Some(t) = s.poll_transmit(now, &mut buf) {
            assert_eq!(t.remote, client, "sent {} bytes to an unvalidated address", t.len);
            sent += 1;
            if sent > 10_000 {
                break;
            }
        }
        while s.read_message(now).is_some() {}
        while s.poll_event().is_some() {}
        assert!(s.recv_buffered() <= BUFFER, "receive buffer over its bound");
        tick(&mut s, &mut now, step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bodies_take_empty_and_tiny_inputs() {
        for f in [parse_packet, frame_decoder, connection_input, server_input] {
            f(&[]);
            f(&[0]);
            f(&[1, 2, 3, 0xff, 4, 5]);
        }
    }
}
