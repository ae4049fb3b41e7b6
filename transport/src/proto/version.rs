//! Version negotiation (RFC 9000 §6, §17.2.1; RFC 8999 §6).
//!
//! A server that gets a long-header datagram of a version it does not speak answers with
//! a Version Negotiation packet listing [`super::crypto::VERSION`], so a client of another
//! protocol (a QUIC v1 stack, say) fails at once with "no compatible version" rather than
//! at its handshake timeout. The foreign header is read by the version-independent
//! invariants of RFC 8999 (first byte, version, then each connection id after its length
//! byte); the answer swaps the two ids, as §17.2.1 asks. Only datagrams of at least
//! 1 200 bytes (a client's first flight) are answered, never a Version Negotiation packet
//! (version 0), and the answer is smaller than what it answers.
//!
//! A client takes a Version Negotiation packet only as its connection's first packet,
//! from the server's address, echoing the connection ids it sent (Braid's long header
//! carries them as RFC 8999 lays them out, so any server can), and only when it does not
//! list the client's own version (§6.2); it then ends the attempt.

use super::crypto::{MIN_INITIAL_DATAGRAM, VERSION};
use super::wire::Reader;

/// Longest connection id RFC 8999 §5.1 allows in a long header.
const MAX_INVARIANT_CID: usize = 255;

/// The Version Negotiation packet answering `datagram`, if it is a long-header datagram
/// of at least 1 200 bytes of a version other than Braid's and other than 0; `unused`
/// fills the first byte's seven free bits.
pub fn answer(datagram: &[u8], unused: u8) -> Option<Vec<u8>> {
    if datagram.len() < MIN_INITIAL_DATAGRAM {
        return None;
    }
    let mut r = Reader::new(datagram);
    if r.u8().ok()? & 0x80 == 0 {
        return None;
    }
    let version = u32::from_be_bytes(r.bytes(4).ok()?.try_into().ok()?);
    if version == 0 || version == VERSION {
        return None;
    }
    let dcid_len = usize::from(r.u8().ok()?);
    let dcid = r.bytes(dcid_len.min(MAX_INVARIANT_CID)).ok()?;
    let scid_len = usize::from(r.u8().ok()?);
    let scid = r.bytes(scid_len.min(MAX_INVARIANT_CID)).ok()?;
    let mut out = Vec::with_capacity(7 + dcid.len() + scid.len() + 4);
    out.push(0x80 | unused);
    out.extend_from_slice(&0u32.to_be_bytes());
    // The client's source id becomes the destination, and the other way round.
    out.push(scid.len() as u8);
    out.extend_from_slice(scid);
    out.push(dcid.len() as u8);
    out.extend_from_slice(dcid);
    out.extend_from_slice(&VERSION.to_be_bytes());
    Some(out)
}

/// A Version Negotiation packet, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiation<'a> {
    /// Its destination connection id (the client's source id, echoed).
    pub dcid: &'a [u8],
    /// Its source connection id (the client's destination id, echoed).
    pub scid: &'a [u8],
    /// The versions the server offers.
    pub versions: Vec<u32>,
}

/// `datagram` read as a Version Negotiation packet; `None` when it is not one (or offers
/// no version, or is malformed).
pub fn offered(datagram: &[u8]) -> Option<Negotiation<'_>> {
    let mut r = Reader::new(datagram);
    if r.u8().ok()? & 0x80 == 0 {
        return None;
    }
    if r.bytes(4).ok()? != [0; 4] {
        return None;
    }
    let dcid_len = usize::from(r.u8().ok()?);
    let dcid = r.bytes(dcid_len).ok()?;
    let scid_len = usize::from(r.u8().ok()?);
    let scid = r.bytes(scid_len).ok()?;
    let rest = r.remaining();
    if rest == 0 || !rest.is_multiple_of(4) {
        return None;
    }
    let list = r.bytes(rest).ok()?;
    let versions =
        list.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect();
    Some(Negotiation { dcid, scid, versions })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A QUIC v1 Initial's invariant part: version 1, an 8-byte destination id, a 4-byte
    /// source id, padded to 1 200 bytes.
    /// An Initial of draft-29 (0xff00001d), a version Braid does not speak.
    fn foreign_initial() -> Vec<u8> {
        let mut d = vec![0xc0];
        d.extend_from_slice(&0xff00_001du32.to_be_bytes());
        d.push(8);
        d.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        d.push(4);
        d.extend_from_slice(&[9, 9, 9, 9]);
        d.resize(1200, 0);
        d
    }

    #[test]
    fn a_foreign_initial_gets_our_version_with_the_ids_swapped() {
        let vn = answer(&foreign_initial(), 0x2a).expect("answered");
        assert_eq!(vn[0], 0xaa);
        assert_eq!(&vn[1..5], &[0, 0, 0, 0]);
        assert_eq!(&vn[5..10], &[4, 9, 9, 9, 9]);
        assert_eq!(&vn[10..19], &[8, 1, 2, 3, 4, 5, 6, 7, 8]);
        let n = offered(&vn).expect("a negotiation");
        assert_eq!((n.dcid, n.scid), (&[9, 9, 9, 9][..], &[1, 2, 3, 4, 5, 6, 7, 8][..]));
        assert_eq!(n.versions, vec![VERSION]);
    }

    #[test]
    fn nothing_answers_a_short_datagram_our_version_a_negotiation_or_a_short_header() {
        let d = foreign_initial();
        assert!(answer(&d[..1199], 0).is_none());
        let mut ours = d.clone();
        ours[1..5].copy_from_slice(&VERSION.to_be_bytes());
        assert!(answer(&ours, 0).is_none());
        let mut zero = d.clone();
        zero[1..5].copy_from_slice(&[0; 4]);
        assert!(answer(&zero, 0).is_none());
        let mut short = d;
        short[0] = 0x40;
        assert!(answer(&short, 0).is_none());
    }

    #[test]
    fn malformed_negotiation_packets_offer_nothing() {
        let vn = answer(&foreign_initial(), 0).unwrap();
        assert!(offered(&vn[..vn.len() - 1]).is_none(), "a partial version");
        assert!(offered(&vn[..vn.len() - 4]).is_none(), "no version");
        assert!(offered(&vn[..3]).is_none());
        assert!(offered(&[]).is_none());
        let mut not_zero = vn.clone();
        not_zero[4] = 1;
        assert!(offered(&not_zero).is_none());
    }
}
