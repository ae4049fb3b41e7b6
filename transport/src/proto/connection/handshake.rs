//! The handshake: TLS 1.3 through rustls's QUIC interface.
//!
//! The client ([`Connection::connect`]) sends its ClientHello in an Initial packet on path
//! 0, padded to [`MIN_INITIAL_DATAGRAM`]; the server is built from that datagram
//! ([`Connection::accept`]). The TLS bytes of each level (Initial, Handshake) form one
//! ordered stream carried in CRYPTO frames of that level's packets; ACK frames of the
//! level's packet numbers tell which bytes arrived, and those not acknowledged are sent
//! again when the handshake timer fires (the initial RTT, doubling). The transport parameters ride in the TLS
//! extension ([`TransportParams`]). The client is established once rustls finished the
//! handshake (the server's Finished was verified) and it holds the 1-RTT keys; the server
//! once the client's Finished arrived. Only then do 1-RTT packets (every frame of
//! [`crate::proto::frame`]) flow.
//!
//! Until the server received an authenticated Handshake packet from the client's address
//! (which proves the client got the server's Initial packet, RFC 9000 §8.1 \[source\]),
//! it sends that address at most three times what it received from it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rustls::quic::{self, KeyChange, PacketKey};

use super::config::{AeadLimits, Config};
use super::events::{CloseReason, Event};
use super::packetize::Transmit;
use super::{Connection, Side, State};
use crate::path::{PathId, PathRole};
use crate::proto::crypto::{
    self, ClientCrypto, DirectionKeys, HandshakeChunk, HandshakeIds, Level,
    MAX_HANDSHAKE_ACK_RANGES, MIN_INITIAL_DATAGRAM, PlainHeader, ServerCrypto, TAG_LEN,
    TransportParams, with_scope,
};
use crate::proto::wire::{LongCid, WireError};
use crate::time::Instant;

/// Anti-amplification factor before the peer's address is validated (RFC 9000 §8.1
/// \[source\]).
const AMPLIFICATION_FACTOR: u64 = 3;

/// Why [`Connection::accept`] refused a datagram.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcceptError {
    /// The datagram does not parse.
    #[error("malformed datagram: {0}")]
    Malformed(#[from] WireError),
    /// It parses but is not an authentic Initial packet in a full-size datagram.
    #[error("not a connection attempt")]
    NotHandshake,
    /// rustls refused the ClientHello or the transport parameters are unusable.
    #[error("handshake refused: {0}")]
    Refused(String),
    /// rustls refused the ClientHello with a TLS alert (no common application protocol,
    /// cipher suite or group): `close` is the Initial packet with CONNECTION_CLOSE
    /// (CRYPTO_ERROR, the alert) to send back, so the client learns why at once.
    #[error("handshake refused: {reason}")]
    RefusedWithClose {
        /// What rustls said.
        reason: String,
        /// The datagram to send to the client.
        close: Vec<u8>,
    },
}

/// The keys of one direction pair.
pub(super) struct KeyPair {
    local: DirectionKeys,
    remote: DirectionKeys,
}

impl From<quic::Keys> for KeyPair {
    fn from(k: quic::Keys) -> Self {
        KeyPair { local: k.local.into(), remote: k.remote.into() }
    }
}

/// The 1-RTT keys and their key updates (RFC 9001 §6): both directions move to the next
/// phase together, when this side initiates or when a packet of the next phase from the
/// peer authenticates. Header protection keys never change.
pub(super) struct OneRtt {
    local: DirectionKeys,
    remote: DirectionKeys,
    phase: bool,
    secrets: quic::Secrets,
    next_local: Box<dyn PacketKey>,
    next_remote: Box<dyn PacketKey>,
    /// The peer's previous-phase key, for its packets still in flight at an update.
    prev_remote: Option<Box<dyn PacketKey>>,
    sent_in_phase: u64,
    /// A packet of the current phase arrived from the peer (it has moved too).
    peer_in_phase: bool,
    /// The first packet number sealed in the current phase, per path.
    first_in_phase: std::collections::BTreeMap<PathId, u64>,
    /// The peer acknowledged a packet sealed in the current phase (RFC 9001 §6.1: the
    /// condition for the next update).
    acked_in_phase: bool,
    updates: u64,
}

impl OneRtt {
    fn new(keys: quic::Keys, mut secrets: quic::Secrets) -> OneRtt {
        let next = secrets.next_packet_keys();
        OneRtt {
            local: keys.local.into(),
            remote: keys.remote.into(),
            phase: false,
            secrets,
            next_local: next.local,
            next_remote: next.remote,
            prev_remote: None,
            sent_in_phase: 0,
            peer_in_phase: false,
            first_in_phase: std::collections::BTreeMap::new(),
            acked_in_phase: false,
            updates: 0,
        }
    }

    /// Moves both directions to the next phase.
    fn rotate(&mut self) {
        let next = self.secrets.next_packet_keys();
        let remote = std::mem::replace(&mut self.next_remote, next.remote);
        self.prev_remote = Some(std::mem::replace(&mut self.remote.packet, remote));
        self.local.packet = std::mem::replace(&mut self.next_local, next.local);
        self.phase = !self.phase;
        self.sent_in_phase = 0;
        self.peer_in_phase = false;
        self.first_in_phase.clear();
        self.acked_in_phase = false;
        self.updates += 1;
    }
}

/// Packets kept in hand below the confidentiality limit: the CONNECTION_CLOSE of a
/// connection that cannot update its keys still goes out under the old key.
pub(super) const AEAD_CLOSE_MARGIN: u64 = 16;

/// One handshake level's packet space and crypto stream.
#[derive(Default)]
struct Space {
    keys: Option<KeyPair>,
    /// Every TLS byte written at this level.
    send: Vec<u8>,
    /// The peer has everything below this offset (its ACKs of the packets that carried
    /// them, [`Space::on_ack`]).
    acked: usize,
    /// Byte ranges the peer acknowledged above `acked`, merged.
    acked_above: Vec<(usize, usize)>,
    /// Sent (since the last retransmission) up to this offset.
    sent: usize,
    /// The CRYPTO bytes each packet in flight carried: (packet number, start, end).
    in_flight: VecDeque<(u64, usize, usize)>,
    /// Next TLS byte expected from the peer.
    recv_offset: u64,
    /// Packet numbers received, as merged inclusive ranges, highest first: what an ACK
    /// reports.
    received: Vec<(u64, u64)>,
    /// An ACK should go out (an ack-eliciting packet arrived).
    ack_pending: bool,
    /// A PING should go out (a client's probe).
    ping_pending: bool,
    next_pn: u64,
    largest_pn: Option<u64>,
}

/// Most packets of a handshake level tracked in flight; past that the oldest is
/// forgotten (its bytes go again at the next timeout).
const MAX_IN_FLIGHT: usize = 64;

impl Space {
    /// Records a received packet number for the next ACK (the lowest ranges go first
    /// past [`MAX_HANDSHAKE_ACK_RANGES`]).
    fn on_received(&mut self, pn: u64) {
        let mut ranges = std::mem::take(&mut self.received);
        ranges.push((pn, pn));
        self.received = merge_desc(ranges, MAX_HANDSHAKE_ACK_RANGES);
    }

    /// The peer's ACK of `ranges`: the bytes of the packets it names count as arrived.
    /// False if it names a packet this side never sent (RFC 9000 §13.1: a protocol
    /// violation).
    fn on_ack(&mut self, ranges: &[(u64, u64)]) -> bool {
        if ranges.iter().any(|&(_, hi)| hi >= self.next_pn) {
            return false;
        }
        let acked = |pn: u64| ranges.iter().any(|&(lo, hi)| lo <= pn && pn <= hi);
        let mut got = Vec::new();
        self.in_flight.retain(|&(pn, a, b)| {
            if acked(pn) {
                got.push((a, b));
                false
            } else {
                true
            }
        });
        let mut all = std::mem::take(&mut self.acked_above);
        all.extend(got);
        all.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::new();
        for (a, b) in all {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        // The prefix from `acked` on that arrived whole moves `acked`.
        merged.retain(|&(a, b)| {
            if a <= self.acked {
                self.acked = self.acked.max(b);
                false
            } else {
                true
            }
        });
        self.acked_above = merged;
        self.sent = self.sent.max(self.acked);
        true
    }

    /// A packet with `pn` carrying the CRYPTO bytes `start..end` went out.
    fn on_sent(&mut self, pn: u64, start: usize, end: usize) {
        if self.in_flight.len() == MAX_IN_FLIGHT {
            self.in_flight.pop_front();
        }
        self.in_flight.push_back((pn, start, end));
    }
}

/// Sorts inclusive ranges highest first and merges overlapping or adjacent ones; keeps at
/// most `max` (the highest).
fn merge_desc(mut ranges: Vec<(u64, u64)>, max: usize) -> Vec<(u64, u64)> {
    ranges.sort_unstable_by_key(|r| std::cmp::Reverse(r.1));
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if hi.saturating_add(1) >= last.0 => last.0 = last.0.min(lo),
            _ => out.push((lo, hi)),
        }
    }
    out.truncate(max);
    out
}

/// The connection's TLS state.
pub(super) struct Tls {
    session: quic::Connection,
    /// What the deterministic provider draws from (see [`crypto::deterministic`]).
    rng: ChaCha8Rng,
    spaces: [Space; 2],
    one_rtt: Option<OneRtt>,
    /// Level of the bytes `write_hs` produces next.
    write_level: usize,
    retransmit_at: Option<Instant>,
    backoff: u32,
    /// Server: bytes received from and sent to the client's address before validation.
    amp_received: u64,
    amp_sent: u64,
    address_validated: bool,
    /// Every byte of both levels is known to have arrived at the peer.
    confirmed: bool,
    /// Client: the token of the Retry it took (in the header of each Initial after it).
    token: Option<Vec<u8>>,
    /// Client: a Retry was taken (at most one per connection).
    retried: bool,
    /// Levels (Initial, Handshake) a CONNECTION_CLOSE still goes out at: closing before
    /// the handshake completed, this side cannot tell which keys the peer has (RFC 9000
    /// §10.2.3), so it closes at each level it has keys for.
    close_at: [bool; 2],
    /// The 1-RTT level's TLS stream (post-handshake messages): the next offset rustls
    /// reads, and bytes that arrived above it, at most [`MAX_POST_HANDSHAKE_BUFFER`].
    post_offset: u64,
    post_above: std::collections::BTreeMap<u64, Vec<u8>>,
}

/// Most 1-RTT TLS bytes held above a gap (RFC 9000 §7.5 asks for at least 4 096); more
/// closes the connection with CRYPTO_BUFFER_EXCEEDED.
pub const MAX_POST_HANDSHAKE_BUFFER: usize = 4096;

impl Tls {
    fn new(session: quic::Connection, rng: ChaCha8Rng, cid: &[u8], side: rustls::Side) -> Tls {
        let initial = crypto::initial_suite().keys(cid, side, quic::Version::V1).into();
        let mut spaces: [Space; 2] = Default::default();
        spaces[0].keys = Some(initial);
        Tls {
            session,
            rng,
            spaces,
            one_rtt: None,
            write_level: 0,
            retransmit_at: None,
            backoff: 0,
            amp_received: 0,
            amp_sent: 0,
            address_validated: side == rustls::Side::Client,
            confirmed: false,
            token: None,
            retried: false,
            close_at: [false; 2],
            post_offset: 0,
            post_above: std::collections::BTreeMap::new(),
        }
    }

    /// The keys for 1-RTT packets of the current phase: (seal, open).
    pub(super) fn one_rtt(&self) -> Option<(&DirectionKeys, &DirectionKeys)> {
        self.one_rtt.as_ref().map(|k| (&k.local, &k.remote))
    }

    /// The current key phase bit.
    pub(super) fn key_phase(&self) -> bool {
        self.one_rtt.as_ref().is_some_and(|k| k.phase)
    }

    /// The peer acknowledged packets of `path` up to `largest`: if one was sealed in the
    /// current phase, the next key update may come.
    pub(super) fn on_one_rtt_acked(&mut self, path: PathId, largest: u64) {
        if let Some(k) = self.one_rtt.as_mut()
            && k.first_in_phase.get(&path).is_some_and(|&first| largest >= first)
        {
            k.acked_in_phase = true;
        }
    }

    /// Key updates so far.
    pub(super) fn key_updates(&self) -> u64 {
        self.one_rtt.as_ref().map_or(0, |k| k.updates)
    }

    /// Packet `pn` of `path` was sealed: after `update_after` packets in a phase (at most
    /// half the confidentiality limit), once the handshake is confirmed, the peer has moved
    /// to the phase too and has acknowledged a packet sealed in it (RFC 9001 §6.1's two
    /// MUSTs), the next packet starts a new phase. True when the phase has come within
    /// [`AEAD_CLOSE_MARGIN`] packets of the confidentiality limit without an update: the
    /// connection must stop (RFC 9001 §6.6).
    pub(super) fn on_one_rtt_sealed(
        &mut self,
        path: PathId,
        pn: u64,
        update_after: u64,
        confidentiality: u64,
    ) -> bool {
        let confirmed = self.confirmed;
        let Some(k) = self.one_rtt.as_mut() else { return false };
        k.sent_in_phase += 1;
        k.first_in_phase.entry(path).or_insert(pn);
        if k.sent_in_phase >= update_after.min(confidentiality / 2).max(1)
            && k.peer_in_phase
            && k.acked_in_phase
            && confirmed
        {
            k.rotate();
        }
        k.sent_in_phase.saturating_add(AEAD_CLOSE_MARGIN) >= confidentiality
    }

    /// The negotiated AEAD's limits (RFC 9001 §6.6, from rustls); before the 1-RTT keys,
    /// none.
    pub(super) fn aead_limits(&self) -> AeadLimits {
        self.one_rtt.as_ref().map_or(
            AeadLimits { confidentiality: u64::MAX, integrity: u64::MAX },
            |k| AeadLimits {
                confidentiality: k.local.packet.confidentiality_limit(),
                integrity: k.remote.packet.integrity_limit(),
            },
        )
    }

    /// Opens a 1-RTT packet (header protection removed by the caller, `phase` its key
    /// phase bit): with the current key, or, on a phase change, with the next key (the
    /// peer updated: so do we) or the previous one (a late packet).
    pub(super) fn open_one_rtt(
        &mut self,
        hdr: &PlainHeader,
        pn: u64,
        phase: bool,
        datagram: &mut [u8],
    ) -> Option<std::ops::Range<usize>> {
        let k = self.one_rtt.as_mut()?;
        if phase == k.phase {
            let r = crypto::decrypt(k.remote.packet.as_ref(), hdr, pn, datagram).ok()?;
            k.peer_in_phase = true;
            return Some(r);
        }
        let copy = datagram.to_vec();
        if let Ok(r) = crypto::decrypt(k.next_remote.as_ref(), hdr, pn, datagram) {
            k.rotate();
            k.peer_in_phase = true;
            return Some(r);
        }
        datagram.copy_from_slice(&copy);
        let prev = k.prev_remote.as_ref()?;
        crypto::decrypt(prev.as_ref(), hdr, pn, datagram).ok()
    }

    /// Every handshake byte is known to have reached the peer.
    pub(super) fn confirmed(&self) -> bool {
        self.confirmed
    }

    /// The handshake timer.
    pub(super) fn timer(&self) -> Option<Instant> {
        self.retransmit_at
    }

    /// Takes everything rustls has to send, level by level, and installs new keys.
    fn drain(&mut self, now: Instant) {
        loop {
            let mut out = Vec::new();
            let session = &mut self.session;
            let change = with_scope(&mut self.rng, now, || session.write_hs(&mut out));
            self.spaces[self.write_level].send.extend_from_slice(&out);
            match change {
                Some(KeyChange::Handshake { keys }) => {
                    self.spaces[1].keys = Some(keys.into());
                    self.write_level = 1;
                }
                Some(KeyChange::OneRtt { keys, next }) => {
                    self.one_rtt = Some(OneRtt::new(keys, next))
                }
                None if out.is_empty() => return,
                None => {}
            }
        }
    }

    /// Feeds the peer's TLS bytes of a level to rustls.
    fn read(&mut self, now: Instant, data: &[u8]) -> Result<(), rustls::Error> {
        let session = &mut self.session;
        with_scope(&mut self.rng, now, || session.read_hs(data))?;
        self.drain(now);
        Ok(())
    }

    /// Both levels' bytes all reached the peer: nothing is retransmitted any more, and the
    /// Initial and Handshake keys are discarded (RFC 9001 §4.9.2 \[source\]: an endpoint
    /// MUST discard its Handshake keys once the handshake is confirmed).
    fn confirm(&mut self) {
        self.confirmed = true;
        self.discard(0);
        self.discard(1);
        self.retransmit_at = None;
    }

    /// Discards a level's keys (RFC 9001 §4.9): its packets are neither sent nor accepted
    /// from now on (a packet of that level is dropped as `no_keys`), and nothing of it is
    /// retransmitted. Initial keys follow from the connection id anyone can see, so keeping
    /// them lets an off-path attacker inject TLS bytes that end the connection.
    fn discard(&mut self, idx: usize) {
        let s = &mut self.spaces[idx];
        s.keys = None;
        s.acked = s.send.len();
        s.acked_above.clear();
        s.sent = s.send.len();
        s.in_flight.clear();
        s.ack_pending = false;
        s.ping_pending = false;
    }
}

/// The seed of the TLS generator, kept apart from the connection's own.
fn tls_rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed.rotate_left(29) ^ 0x746c_735f_7365_6564)
}

impl Connection {
    /// Client: starts the handshake on path 0. The connection id comes from `seed`; the
    /// server is authenticated as `crypto` says. Fails only if rustls refuses the
    /// configuration.
    #[allow(clippy::too_many_arguments)]
    pub fn connect(
        config: Arc<Config>,
        crypto: &ClientCrypto,
        now: Instant,
        seed: u64,
        local: SocketAddr,
        remote: SocketAddr,
        role: PathRole,
    ) -> Result<Connection, rustls::Error> {
        let streams = crate::proto::mapping::announced(
            crate::proto::mapping::Mapping::new(config.request_streams),
            config.recv_buffer_bytes,
            true,
        );
        let params = TransportParams {
            max_data: config.recv_buffer_bytes,
            max_stream_data_bidi_local: streams.max_stream_data_bidi_local,
            max_stream_data_bidi_remote: streams.max_stream_data_bidi_remote,
            max_streams_bidi: streams.max_streams_bidi,
            max_stream_data_uni: streams.max_stream_data_uni,
            max_streams_uni: streams.max_streams_uni,
            path_role: role,
            wants_rate_feedback: config.wants_rate_feedback,
            max_idle_timeout_ms: config.idle_timeout.as_millis().try_into().unwrap_or(u64::MAX),
            streaming_code: config.fec.is_some(),
            ack_delay_exponent: crypto::ACK_DELAY_EXPONENT,
            initial_max_path_id: Some(config.initial_max_path_id()),
            initial_scid: Some(LongCid::from_u64(super::handshake_cid(seed))),
            original_dcid: None,
            retry_scid: None,
            stateless_reset_token: None,
            braid_frames: config.braid_frames,
            active_cid_limit: super::ACTIVE_CID_LIMIT,
            disable_active_migration: false,
            server_only: false,
        }
        .encode();
        let name = match &crypto.server_name {
            Some(n) => n.clone(),
            None => rustls::pki_types::ServerName::IpAddress(remote.ip().into()),
        };
        let mut rng = tls_rng(seed);
        let cfg = Arc::clone(&crypto.config);
        let session = with_scope(&mut rng, now, || {
            quic::ClientConnection::new(cfg, quic::Version::V1, name, params)
        })?;
        let mut c = Connection::new(config, Side::Client, now, seed, |cid| {
            Tls::new(session.into(), rng, &cid.to_be_bytes(), rustls::Side::Client)
        });
        c.insert_path(PathId(0), local, remote, role);
        c.next_path_id = 1;
        if let Some(p) = c.paths.get_mut(&PathId(0)) {
            p.validated = true;
        }
        c.tls.drain(now);
        Ok(c)
    }

    /// Server: the token in the header of a client's Initial packet (`None` when it has
    /// none, or the packet does not open with the Initial keys anyone derives from its
    /// connection id, which also authenticate the header). Stateless: an endpoint calls it
    /// before it holds anything for the client.
    pub fn initial_token(datagram: &[u8]) -> Option<Vec<u8>> {
        let (hdr, _) = open_client_initial(datagram)?;
        let token = hdr.token(datagram);
        (!token.is_empty()).then(|| token.to_vec())
    }

    /// Server: the token to send the client in a NEW_TOKEN frame once the handshake
    /// completed (RFC 9000 §8.1.3; an endpoint issues it,
    /// [`crate::proto::retry::RetryTokens::issue_new_token`]), so that its next connection
    /// skips address validation. Ignored at a client.
    pub fn set_new_token(&mut self, token: Vec<u8>) {
        if self.side == Side::Server && !token.is_empty() {
            self.new_token = Some(bytes::Bytes::from(token));
            self.new_token_pending = self.state == State::Established;
        }
    }

    /// Client: the newest NEW_TOKEN token the server sent, once (`None` if none came or it
    /// was taken). It belongs in the Initial of a later connection to the same server
    /// ([`Connection::set_initial_token`]), and only once (RFC 9000 §8.1.3).
    pub fn take_new_token(&mut self) -> Option<Vec<u8>> {
        if self.side == Side::Client { self.new_token.take().map(|t| t.to_vec()) } else { None }
    }

    /// Client: a NEW_TOKEN token from an earlier connection to this server, sent in the
    /// header of every Initial (RFC 9000 §8.1.3) until a Retry replaces it. Call before the
    /// first datagram goes out; a token longer than
    /// [`crate::proto::retry::MAX_TOKEN_LEN`], or at a server, is ignored.
    pub fn set_initial_token(&mut self, token: Vec<u8>) {
        let fits = !token.is_empty() && token.len() <= crate::proto::retry::MAX_TOKEN_LEN;
        if self.side == Side::Client && fits && !self.tls.retried {
            self.tls.token = Some(token);
        }
    }

    /// A NEW_TOKEN arrived (at a client: a server's is refused before this). The newest is
    /// kept, one at most, if it fits an Initial.
    pub(super) fn on_new_token(&mut self, token: bytes::Bytes) {
        if token.len() <= crate::proto::retry::MAX_TOKEN_LEN {
            self.new_token = Some(token);
        }
    }

    /// Server: the client's address is validated (its Initial carried a valid Retry
    /// token, RFC 9000 §8.1.2): the 3× anti-amplification limit no longer applies.
    pub fn set_address_validated(&mut self) {
        self.tls.address_validated = true;
        if let Some(p) = self.paths.get_mut(&PathId(0)) {
            p.validated = true;
        }
    }

    /// Client: a Retry packet arrived from `remote`. Taken once, while no Handshake keys
    /// exist, addressed to this side's id, from the server's address, with a Retry
    /// Integrity Tag that verifies against the destination id of this side's first Initial
    /// (its own id, RFC 9001 §5.8) and a source id other than that one (RFC 9000 §17.2.5.2):
    /// this side then sends to the Retry's source id, with Initial keys derived from it
    /// (RFC 9001 §5.2), and the Initial CRYPTO stream goes again from its start with the
    /// token. Anything else is counted and dropped.
    pub(super) fn on_retry(
        &mut self,
        remote: std::net::SocketAddr,
        retry: &crate::proto::retry::Retry<'_>,
    ) {
        let from_server = self.paths.get(&PathId(0)).is_some_and(|p| p.remote == remote);
        if self.side != Side::Client
            || self.state != State::Handshaking
            || self.tls.retried
            || retry.dcid != LongCid::from_u64(self.cid)
            || retry.scid == LongCid::from_u64(self.cid)
            || !from_server
            || self.tls.spaces[1].keys.is_some()
            || !retry.verify(&LongCid::from_u64(self.cid))
        {
            self.dropped.malformed += 1;
            return;
        }
        self.peer_cid = retry.scid;
        self.initial_dcid = retry.scid;
        self.tls.spaces[0].keys = Some(
            crypto::initial_suite()
                .keys(retry.scid.as_slice(), rustls::Side::Client, quic::Version::V1)
                .into(),
        );
        let token = retry.token;
        self.tls.retried = true;
        self.tls.token = Some(token.to_vec());
        let s = &mut self.tls.spaces[0];
        s.acked = 0;
        s.acked_above.clear();
        s.sent = 0;
        s.in_flight.clear();
        self.tls.backoff = 0;
        self.tls.retransmit_at = None;
    }

    /// A Version Negotiation packet arrived (RFC 9000 §6.2): taken only as the first
    /// packet of the attempt, from the server's address, echoing this side's connection
    /// id in both fields (§17.2.1), and only when it does not list Braid's version; the
    /// attempt then ends ([`CloseReason::Handshake`] naming the versions offered).
    /// Anything else is dropped and counted.
    pub(super) fn on_version_negotiation(
        &mut self,
        remote: SocketAddr,
        n: &crate::proto::version::Negotiation<'_>,
    ) {
        let versions = &n.versions;
        let first = self.state == State::Handshaking
            && !self.tls.retried
            && self.tls.spaces.iter().all(|s| s.largest_pn.is_none());
        let from_server = self.paths.get(&PathId(0)).is_some_and(|p| p.remote == remote);
        // §17.2.1: the client's source id as destination, its destination id as source.
        let echoed = n.dcid == self.cid.to_be_bytes() && n.scid == self.peer_cid.as_slice();
        if !first || !from_server || !echoed || versions.contains(&crypto::VERSION) {
            self.dropped.malformed += 1;
            return;
        }
        let list: Vec<String> = versions.iter().map(|v| format!("{v:#010x}")).collect();
        self.enter_closed(CloseReason::Handshake {
            error: format!(
                "the server does not speak QUIC version {:#010x}; it offers {}",
                crypto::VERSION,
                list.join(", ")
            ),
        });
    }

    /// Client: whether the server asked for address validation with a Retry.
    pub fn took_retry(&self) -> bool {
        self.tls.retried
    }

    /// Server: builds a connection from the client's first datagram (an Initial packet
    /// with the ClientHello, in a datagram of at least [`MIN_INITIAL_DATAGRAM`] bytes).
    /// Path 0 gets the radio the client announced in its transport parameters. A token in
    /// the Initial is not looked at: a connection whose client took a Retry is accepted
    /// with [`Connection::accept_retried`].
    pub fn accept(
        config: Arc<Config>,
        crypto: &ServerCrypto,
        now: Instant,
        seed: u64,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &[u8],
    ) -> Result<Connection, AcceptError> {
        Self::accept_inner(config, crypto, now, seed, (local, remote), datagram, None)
    }

    /// Server: [`Connection::accept`] as an endpoint calls it, `odcid` being what the
    /// Initial's token says ([`crate::proto::retry::RetryTokens::validate`]): with
    /// `Some(id)` the client took a Retry, `id` is the destination id of its first Initial,
    /// and the Initial's destination id is the Retry's source id; the transport parameters
    /// name both (RFC 9000 §7.3), and the client's address counts as validated (§8.1.2).
    /// `None` is [`Connection::accept`].
    #[allow(clippy::too_many_arguments)]
    pub fn accept_retried(
        config: Arc<Config>,
        crypto: &ServerCrypto,
        now: Instant,
        seed: u64,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &[u8],
        odcid: Option<LongCid>,
    ) -> Result<Connection, AcceptError> {
        let mut c =
            Self::accept_inner(config, crypto, now, seed, (local, remote), datagram, odcid)?;
        if odcid.is_some() {
            c.set_address_validated();
        }
        Ok(c)
    }

    fn accept_inner(
        config: Arc<Config>,
        crypto: &ServerCrypto,
        now: Instant,
        seed: u64,
        (local, remote): (SocketAddr, SocketAddr),
        datagram: &[u8],
        odcid: Option<LongCid>,
    ) -> Result<Connection, AcceptError> {
        if datagram.len() < MIN_INITIAL_DATAGRAM {
            return Err(AcceptError::NotHandshake);
        }
        let Some((hdr, plain)) = open_client_initial(datagram) else {
            return Err(AcceptError::NotHandshake);
        };
        let starts_stream = HandshakeChunk::decode_all(&plain)?
            .iter()
            .any(|c| matches!(c, HandshakeChunk::Crypto { offset: 0, .. }));
        if !starts_stream {
            return Err(AcceptError::NotHandshake);
        }
        // RFC 9000 §7.2 and §7.3: this side's id is one it draws (after a Retry, the Retry's
        // source id, which the Initial went to); the Initial keys derive from the Initial's
        // destination id; the original id is the one the client's first Initial went to.
        // TLS authenticates all three in the transport parameters.
        let initial_dcid = hdr.dcid;
        let cid = match odcid {
            Some(_) => hdr.connection_id,
            None => match super::handshake_cid(seed) {
                c if c == hdr.connection_id => !c,
                c => c,
            },
        };
        let original_dcid = odcid.unwrap_or(hdr.dcid);
        let Some(client_cid) = hdr.source_id else {
            return Err(AcceptError::NotHandshake);
        };
        let streams = crate::proto::mapping::announced(
            crate::proto::mapping::Mapping::new(config.request_streams),
            config.recv_buffer_bytes,
            false,
        );
        let params = TransportParams {
            max_data: config.recv_buffer_bytes,
            max_stream_data_bidi_local: streams.max_stream_data_bidi_local,
            max_stream_data_bidi_remote: streams.max_stream_data_bidi_remote,
            max_streams_bidi: streams.max_streams_bidi,
            max_stream_data_uni: streams.max_stream_data_uni,
            max_streams_uni: streams.max_streams_uni,
            path_role: PathRole::Wired,
            wants_rate_feedback: config.wants_rate_feedback,
            max_idle_timeout_ms: config.idle_timeout.as_millis().try_into().unwrap_or(u64::MAX),
            streaming_code: config.fec.is_some(),
            ack_delay_exponent: crypto::ACK_DELAY_EXPONENT,
            initial_max_path_id: Some(config.initial_max_path_id()),
            initial_scid: Some(LongCid::from_u64(cid)),
            original_dcid: Some(original_dcid),
            retry_scid: odcid.is_some().then_some(initial_dcid),
            // RFC 9000 §10.3: the token of the id the client sends to until it has one of
            // the ids this side issues, so a reset is recognised from the first 1-RTT packet.
            stateless_reset_token: Some(crypto.reset.token(cid)),
            braid_frames: config.braid_frames,
            active_cid_limit: super::ACTIVE_CID_LIMIT,
            disable_active_migration: false,
            server_only: false,
        }
        .encode();
        let session =
            quic::ServerConnection::new(Arc::clone(&crypto.config), quic::Version::V1, params)
                .map_err(|e| AcceptError::Refused(e.to_string()))?;
        let mut c = Connection::new(config, Side::Server, now, seed, |_| {
            Tls::new(session.into(), tls_rng(seed), hdr.dcid.as_slice(), rustls::Side::Server)
        });
        c.cid = cid;
        c.peer_cid = client_cid;
        c.peer_scid = Some(client_cid);
        c.initial_dcid = initial_dcid;
        c.original_dcid = original_dcid;
        c.reset_key = crypto.reset.clone();
        c.insert_path(PathId(0), local, remote, PathRole::Wired);
        c.handle_datagram(now, local, remote, datagram);
        if c.is_closed() {
            let reason = std::iter::from_fn(|| c.poll_event())
                .find_map(|e| match e {
                    Event::Closed { reason: CloseReason::Handshake { error } } => Some(error),
                    _ => None,
                })
                .unwrap_or_else(|| "the ClientHello was refused".into());
            return Err(c.refusal(now, reason));
        }
        let peer = c.tls.session.quic_transport_parameters().map(|b| {
            // A server checks only the client's id (the other two are its own to name).
            let ids = HandshakeIds {
                initial_scid: client_cid,
                original_dcid: LongCid::from_u64(cid),
                retry_scid: None,
            };
            TransportParams::from_peer(b, false, &ids)
        });
        match peer {
            Some(Ok(tp)) => {
                if let Some(p) = c.paths.get_mut(&PathId(0)) {
                    p.role = tp.path_role;
                }
            }
            bad => {
                let reason = match bad {
                    Some(Err(e)) => e.to_string(),
                    _ => "no transport parameters".into(),
                };
                // The client is told why (CONNECTION_CLOSE with TRANSPORT_PARAMETER_ERROR).
                c.fail_handshake(TRANSPORT_PARAMETER_ERROR, reason.clone());
                return Err(c.refusal(now, reason));
            }
        }
        Ok(c)
    }

    /// Server, refusing a connection it closed while accepting it: the refusal, with the
    /// CONNECTION_CLOSE datagram for the client when there is one to send.
    fn refusal(mut self, now: Instant, reason: String) -> AcceptError {
        let mut close = Vec::new();
        match self.poll_transmit(now, &mut close) {
            Some(t) => {
                close.truncate(t.len);
                AcceptError::RefusedWithClose { reason, close }
            }
            None => AcceptError::Refused(reason),
        }
    }

    /// A long-header (handshake) packet arrived on path 0's addresses: authenticate it,
    /// feed its CRYPTO bytes to rustls, note the peer's ACKs.
    pub(super) fn on_handshake_packet(
        &mut self,
        now: Instant,
        hdr: &PlainHeader,
        datagram: &mut [u8],
    ) {
        let idx = if hdr.level == Level::Initial { 0 } else { 1 };
        let len = datagram.len() as u64;
        let space = &mut self.tls.spaces[idx];
        let Some(keys) = &space.keys else {
            self.dropped.no_keys += 1;
            return;
        };
        let Ok((pn, range)) = crypto::open(&keys.remote, hdr, space.largest_pn, datagram) else {
            self.on_auth_failure();
            return;
        };
        if crypto::reserved_bits_set(hdr, datagram) {
            self.close_on_error(crate::proto::PROTOCOL_VIOLATION, "reserved header bits set");
            return;
        }
        let Ok(chunks) = HandshakeChunk::decode_all(&datagram[range]) else {
            self.dropped.malformed += 1;
            return;
        };
        space.largest_pn = Some(space.largest_pn.map_or(pn, |l| l.max(pn)));
        space.on_received(pn);
        // RFC 9000 §7.2: a client sends to the source id of the server's first Initial from
        // then on, and takes long headers only from that id. After a Retry this is the
        // second change ("once in response to a Retry packet and once in response to an
        // Initial packet from the server"): a server may leave the Retry's id, as quinn
        // does. (Before, a client kept the Retry's id; quinn then answered its 1-RTT
        // packets with a stateless reset.)
        if self.peer_scid.is_none()
            && let Some(scid) = hdr.source_id
        {
            self.peer_scid = Some(scid);
            self.peer_cid = scid;
        }
        self.on_activity_received(now);
        self.emit(|_| crate::trace::TraceEvent::PacketReceived {
            path: PathId(0),
            kind: trace_kind(hdr.level),
            pn,
            size: len as usize,
            frames: vec!["crypto"],
        });
        if let Some(p) = self.paths.get_mut(&PathId(0)) {
            p.counters.on_received(len);
        }
        if self.side == Side::Server {
            self.tls.amp_received += len;
            if idx == 1 && !self.tls.address_validated {
                self.tls.address_validated = true;
                if let Some(p) = self.paths.get_mut(&PathId(0)) {
                    p.validated = true;
                }
            }
            // RFC 9001 §4.9.1 [source]: a server MUST discard its Initial keys when it
            // first successfully processes a Handshake packet.
            if idx == 1 {
                self.tls.discard(0);
            }
        }
        for chunk in chunks {
            match chunk {
                HandshakeChunk::Close { code, reason } => {
                    self.on_close_frame(code, reason);
                    return;
                }
                HandshakeChunk::Ack { ranges } => {
                    let s = &mut self.tls.spaces[idx];
                    let before = s.acked;
                    if !s.on_ack(&ranges) {
                        self.close_on_error(
                            crate::proto::PROTOCOL_VIOLATION,
                            "ACK of a handshake packet never sent",
                        );
                        return;
                    }
                    if s.acked > before {
                        self.tls.backoff = 0;
                        self.tls.retransmit_at = None;
                    }
                }
                HandshakeChunk::Ping => self.tls.spaces[idx].ack_pending = true,
                HandshakeChunk::Crypto { offset, data } => {
                    let s = &mut self.tls.spaces[idx];
                    s.ack_pending = true;
                    let end = offset + data.len() as u64;
                    if offset > s.recv_offset || end <= s.recv_offset {
                        // A server established that gets the client's Finished again: its
                        // acknowledgements were lost, and the client is not confirmed:
                        // HANDSHAKE_DONE goes again.
                        if self.side == Side::Server
                            && self.state == State::Established
                            && end <= s.recv_offset
                        {
                            self.handshake_done_pending = true;
                        }
                        // A gap (the retransmission fills it) or old bytes: only the ACK.
                        continue;
                    }
                    let fresh = &data[(s.recv_offset - offset) as usize..];
                    s.recv_offset = end;
                    if let Err(e) = self.tls.read(now, fresh) {
                        // RFC 9001 §4.8: a TLS alert becomes CRYPTO_ERROR, 0x100 + its code.
                        let alert = self.tls.session.alert().map_or(INTERNAL_ERROR_ALERT, u8::from);
                        self.fail_handshake(CRYPTO_ERROR + u64::from(alert), e.to_string());
                        return;
                    }
                }
            }
        }
        self.check_handshake_done();
        // The client's Finished acknowledged: the server completed the handshake too.
        let all_acked = self.tls.spaces.iter().all(|s| s.keys.is_none() || s.acked == s.send.len());
        if self.side == Side::Client && self.state == State::Established && all_acked {
            self.tls.confirm();
        }
        let unacked = self.tls.spaces.iter().any(|s| s.keys.is_some() && s.acked < s.send.len());
        // A client still handshaking keeps the timer even with all its bytes acknowledged:
        // the server may be waiting at its anti-amplification limit for a datagram from it
        // (RFC 9002 §6.2.2.1), so its probe is what moves the handshake on.
        let probing = self.side == Side::Client && self.state == State::Handshaking;
        if (unacked || probing) && !self.tls.confirmed && self.tls.retransmit_at.is_none() {
            self.tls.retransmit_at = Some(now + self.handshake_pto());
        }
    }

    /// Once rustls finished and the 1-RTT keys are in: established, with the peer's
    /// transport parameters.
    fn check_handshake_done(&mut self) {
        if self.state != State::Handshaking
            || self.tls.session.is_handshaking()
            || self.tls.one_rtt.is_none()
        {
            return;
        }
        let from_server = self.side == Side::Client;
        // A client's first Initial went to its own id; the server's id is the source id of
        // its Initial, the one this side sends to (RFC 9000 §7.3), and after a Retry the
        // Initial keys came from the Retry's source id.
        let ids = HandshakeIds {
            initial_scid: self.peer_scid.unwrap_or(self.peer_cid),
            original_dcid: self.original_dcid,
            retry_scid: self.tls.retried.then_some(self.initial_dcid),
        };
        let params = self
            .tls
            .session
            .quic_transport_parameters()
            .map(|b| TransportParams::from_peer(b, from_server, &ids));
        let params = match params {
            Some(Ok(p)) => p,
            Some(Err(e)) => {
                self.fail_handshake(TRANSPORT_PARAMETER_ERROR, e.to_string());
                return;
            }
            None => {
                self.fail_handshake(TRANSPORT_PARAMETER_ERROR, "no transport parameters".into());
                return;
            }
        };
        self.send.set_max_data(params.max_data);
        self.peer_ack_delay_exponent = params.ack_delay_exponent;
        self.remote_max_path_id = Some(params.initial_max_path_id.unwrap_or(0));
        // RFC 10069: multipath is on when both sides announced `initial_max_path_id`;
        // Braid's frames when both announced `braid_frames`.
        self.multipath = params.initial_max_path_id.is_some();
        self.braid_frames = params.braid_frames && self.config.braid_frames;
        if !self.braid_frames {
            // Messages travel on v1 unidirectional streams (`streams`), within the peer's
            // stream count and per-stream limit.
            let mapping = self.stream_recv.mapping();
            let (streams, bytes) =
                crate::proto::mapping::peer_limits(mapping, self.side == Side::Client, &params);
            self.send.use_streams(streams, bytes);
        }
        self.negotiate_idle_timeout(params.max_idle_timeout_ms);
        self.cids.peer_limit = params.active_cid_limit;
        self.peer_disables_migration = params.disable_active_migration;
        if self.side == Side::Client {
            // The client has sent with the server's handshake id: its token counts.
            self.cids.handshake_token = params.stateless_reset_token;
        }
        if !params.streaming_code {
            // The peer does not run the streaming code: it is off here too, so the peer
            // never receives a CODED frame it was not offered, and one arriving here is a
            // protocol violation (`fec::on_coded`).
            self.fec = None;
        }
        if params.wants_rate_feedback {
            self.on_feedback_wanted();
        }
        if self.side == Side::Server {
            // The client's Finished arrived: the handshake is confirmed here (RFC 9001
            // §4.1.2), and the client learns of it from HANDSHAKE_DONE (RFC 9000 §19.20),
            // re-sent when lost.
            self.tls.confirm();
            self.handshake_done_pending = true;
            self.new_token_pending = self.new_token.is_some();
        }
        self.state = State::Established;
        self.events.push_back(Event::Connected);
        self.issue_cids();
    }

    /// Client: the server's HANDSHAKE_DONE, or an ACK of 1-RTT packets from it, arrived:
    /// the handshake is confirmed (RFC 9001 §4.1.2; in `on_handshake_packet` the server's
    /// acknowledgement of the client's Finished does it too). A 1-RTT packet alone does
    /// not: a server may send 1-RTT data before it has the client's Finished (RFC 9000's
    /// 0.5-RTT data, as quinn does with its first NEW_CONNECTION_ID), and confirming then
    /// would discard the Handshake keys before the Finished went out.
    pub(super) fn confirm_at_client(&mut self) {
        if !self.tls.confirmed && self.side == Side::Client && self.state == State::Established {
            self.tls.confirm();
        }
    }

    /// CRYPTO in a 1-RTT packet: TLS messages after the handshake (a NewSessionTicket),
    /// handed to rustls in stream order; bytes above a gap wait, within
    /// [`MAX_POST_HANDSHAKE_BUFFER`] (beyond: CRYPTO_BUFFER_EXCEEDED, RFC 9000 §7.5).
    pub(super) fn on_one_rtt_crypto(&mut self, now: Instant, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        if end <= self.tls.post_offset {
            return;
        }
        if offset > self.tls.post_offset {
            let held: usize = self.tls.post_above.values().map(Vec::len).sum();
            if held + data.len() > MAX_POST_HANDSHAKE_BUFFER {
                self.close_on_error(CRYPTO_BUFFER_EXCEEDED, "1-RTT CRYPTO data above a gap");
            } else {
                self.tls.post_above.insert(offset, data.to_vec());
            }
            return;
        }
        let mut fresh = data[(self.tls.post_offset - offset) as usize..].to_vec();
        loop {
            self.tls.post_offset += fresh.len() as u64;
            if let Err(e) = self.tls.read(now, &fresh) {
                let alert = self.tls.session.alert().map_or(INTERNAL_ERROR_ALERT, u8::from);
                self.close_on_error(CRYPTO_ERROR + u64::from(alert), &e.to_string());
                return;
            }
            let next = self.tls.post_offset;
            let Some((&at, _)) = self.tls.post_above.range(..=next).next() else {
                return;
            };
            let Some(held) = self.tls.post_above.remove(&at) else { return };
            let skip = (next - at) as usize;
            fresh = held.get(skip..).map(<[u8]>::to_vec).unwrap_or_default();
        }
    }

    /// The handshake timer fired: unacknowledged TLS bytes go again, and a client still
    /// handshaking sends a probe (its datagrams also renew the server's sending budget).
    pub(super) fn on_handshake_timer(&mut self, now: Instant) {
        if self.tls.retransmit_at.is_none_or(|t| t > now) {
            return;
        }
        self.tls.retransmit_at = None;
        self.tls.backoff = (self.tls.backoff + 1).min(16);
        let mut any = false;
        for s in self.tls.spaces.iter_mut().filter(|s| s.keys.is_some()) {
            if s.acked < s.send.len() {
                s.sent = s.acked;
                any = true;
            }
        }
        if !any && self.side == Side::Client && self.state == State::Handshaking {
            let top = if self.tls.spaces[1].keys.is_some() { 1 } else { 0 };
            self.tls.spaces[top].ping_pending = true;
        }
    }

    /// The handshake retransmission timeout: the initial RTT, doubled per expiry (the
    /// handshake takes no RTT samples of its own).
    fn handshake_pto(&self) -> Duration {
        self.config
            .initial_rtt
            .saturating_mul(1 << self.tls.backoff.min(16))
            .min(self.config.max_rto)
    }

    /// The next handshake packet, if a level has TLS bytes, an ACK or a PING to send (and,
    /// on a server before address validation, the budget allows it).
    pub(super) fn poll_handshake(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let idx = (0..2).find(|&i| {
            let s = &self.tls.spaces[i];
            s.keys.is_some() && (s.ack_pending || s.ping_pending || s.sent < s.send.len())
        })?;
        let max = self.config.max_datagram_size.max(MIN_INITIAL_DATAGRAM);
        // The client pads every handshake datagram: its first to the size RFC 9000 §14.1
        // asks for, the others so that a probe renews the server's budget.
        let pad = self.side == Side::Client;
        let mut size_limit = max;
        if let Some(budget) = self.amplification_budget() {
            size_limit = size_limit.min(usize::try_from(budget).unwrap_or(usize::MAX));
            if size_limit < 128 {
                return None;
            }
        }
        let level = level_of(idx);
        let pto = self.handshake_pto();
        let (cid, peer_cid) = (self.cid, self.peer_cid);
        let space = &mut self.tls.spaces[idx];
        buf.clear();
        // A Handshake header has no token field; `write_long_header` ignores it there.
        let token = self.tls.token.as_deref().unwrap_or(&[]);
        let pn_offset =
            crypto::write_long_header(buf, level, peer_cid.as_slice(), &cid.to_be_bytes(), token);
        let body_limit = size_limit - TAG_LEN;
        if space.ack_pending && !space.received.is_empty() {
            HandshakeChunk::Ack { ranges: space.received.clone() }.encode(buf);
        }
        space.ack_pending = false;
        if space.ping_pending {
            HandshakeChunk::Ping.encode(buf);
            space.ping_pending = false;
        }
        let crypto_start = space.sent;
        if space.sent < space.send.len() {
            // Chunk header: type, offset and length varints (at most 1 + 8 + 8 bytes).
            let room = body_limit.saturating_sub(buf.len() + 17);
            let end = space.send.len().min(space.sent + room);
            if end > space.sent {
                HandshakeChunk::Crypto {
                    offset: space.sent as u64,
                    data: &space.send[space.sent..end],
                }
                .encode(buf);
                space.sent = end;
            }
        }
        let (crypto_end, pn) = (space.sent, space.next_pn);
        if pad && buf.len() < body_limit {
            buf.resize(body_limit, 0);
        }
        let t = self.seal_handshake(idx, pn_offset, buf, "crypto")?;
        if crypto_end > crypto_start {
            self.tls.spaces[idx].on_sent(pn, crypto_start, crypto_end);
        }
        // RFC 9001 §4.9.1 [source]: a client MUST discard its Initial keys when it first
        // sends a Handshake packet.
        if self.side == Side::Client && level == Level::Handshake {
            self.tls.discard(0);
        }
        let unacked = self.tls.spaces.iter().any(|s| s.keys.is_some() && s.acked < s.send.len());
        let probing = self.side == Side::Client && self.state == State::Handshaking;
        if (unacked || probing) && self.tls.retransmit_at.is_none() {
            self.tls.retransmit_at = Some(now + pto);
        }
        Some(t)
    }

    /// What a server may still send before the client's address is validated (RFC 9000
    /// §8.1: three times what it received); `None` once validated.
    fn amplification_budget(&self) -> Option<u64> {
        (!self.tls.address_validated).then(|| {
            (AMPLIFICATION_FACTOR * self.tls.amp_received).saturating_sub(self.tls.amp_sent)
        })
    }

    /// Seals the handshake packet in `buf` (its header's packet number at `pn_offset`)
    /// with the next packet number of space `idx`, charges it to the anti-amplification
    /// budget and path 0's counters, and traces it as carrying `frames`.
    fn seal_handshake(
        &mut self,
        idx: usize,
        pn_offset: usize,
        buf: &mut Vec<u8>,
        frames: &'static str,
    ) -> Option<Transmit> {
        let (local, remote) = self.paths.get(&PathId(0)).map(|p| (p.local, p.remote))?;
        let level = level_of(idx);
        let space = &mut self.tls.spaces[idx];
        let keys = &space.keys.as_ref()?.local;
        let pn = space.next_pn;
        space.next_pn += 1;
        crypto::seal(keys, level, PathId(0), pn, pn_offset, buf, false).ok()?;
        let size = buf.len();
        if !self.tls.address_validated {
            self.tls.amp_sent += size as u64;
        }
        if let Some(p) = self.paths.get_mut(&PathId(0)) {
            p.counters.on_sent(size as u64, 0);
        }
        self.emit(|_| crate::trace::TraceEvent::PacketSent {
            path: PathId(0),
            kind: trace_kind(level),
            pn,
            size,
            frames: vec![frames],
        });
        Some(Transmit { path: PathId(0), local, remote, len: size })
    }
}

/// RFC 9000 §20.1: more CRYPTO data buffered above a gap than the receiver keeps.
const CRYPTO_BUFFER_EXCEEDED: u64 = 0x0d;
/// RFC 9000 §20.1: CRYPTO_ERROR, the base of the codes that carry a TLS alert.
const CRYPTO_ERROR: u64 = 0x100;
/// RFC 9000 §20.1: TRANSPORT_PARAMETER_ERROR.
const TRANSPORT_PARAMETER_ERROR: u64 = 0x08;
/// TLS's internal_error alert (RFC 8446 §6), for a failure rustls gave no alert for.
const INTERNAL_ERROR_ALERT: u8 = 80;

impl Connection {
    /// The handshake failed on this side: CONNECTION_CLOSE with `code` goes to the peer
    /// in handshake packets (no silent close: the peer learns why at once, and a server
    /// frees the connection's slot), and [`CloseReason::Handshake`] follows.
    fn fail_handshake(&mut self, code: u64, error: String) {
        self.send_close(code, error.as_bytes(), CloseReason::Handshake { error: error.clone() });
    }

    /// Marks the levels a CONNECTION_CLOSE goes out at before the handshake completed:
    /// each this side has keys for.
    pub(super) fn close_in_handshake_packets(&mut self) {
        for (at, s) in self.tls.close_at.iter_mut().zip(&self.tls.spaces) {
            *at = s.keys.is_some();
        }
    }

    /// After a close before the handshake completed: one handshake packet with the
    /// CONNECTION_CLOSE per level marked, within a server's anti-amplification budget.
    pub(super) fn poll_handshake_close(&mut self, buf: &mut Vec<u8>) -> Option<Transmit> {
        let (mut code, mut reason) = self.close_frame.clone()?;
        if self.close_by_application {
            // RFC 9000 §10.2.3: the application's code and reason stay out of handshake
            // packets, which an observer can open.
            (code, reason) = (crate::proto::APPLICATION_ERROR, bytes::Bytes::new());
        }
        while let Some(idx) = self.tls.close_at.iter().position(|&at| at) {
            self.tls.close_at[idx] = false;
            let level = level_of(idx);
            buf.clear();
            let (dcid, scid) = (self.peer_cid, self.cid.to_be_bytes());
            let pn_offset = crypto::write_long_header(buf, level, dcid.as_slice(), &scid, &[]);
            HandshakeChunk::Close { code, reason: &reason }.encode(buf);
            // A client's Initial datagrams are at least 1 200 bytes (RFC 9000 §14.1).
            if self.side == Side::Client && level == Level::Initial {
                buf.resize(buf.len().max(MIN_INITIAL_DATAGRAM - TAG_LEN), 0);
            }
            if self.amplification_budget().is_some_and(|b| (buf.len() + TAG_LEN) as u64 > b) {
                continue;
            }
            if let Some(t) = self.seal_handshake(idx, pn_offset, buf, "connection_close") {
                return Some(t);
            }
        }
        None
    }
}

/// The level of handshake packet-number space `idx` (0: Initial, 1: Handshake).
fn level_of(idx: usize) -> Level {
    if idx == 0 { Level::Initial } else { Level::Handshake }
}

/// A client's Initial packet opened with the keys anyone derives from its connection id
/// (RFC 9001 §5.2): its header and plaintext payload; `None` for anything else.
fn open_client_initial(datagram: &[u8]) -> Option<(PlainHeader, Vec<u8>)> {
    let hdr = PlainHeader::parse(datagram).ok()?;
    if hdr.level != Level::Initial {
        return None;
    }
    let initial: KeyPair = crypto::initial_suite()
        .keys(hdr.dcid.as_slice(), rustls::Side::Server, quic::Version::V1)
        .into();
    let mut probe = datagram.to_vec();
    let (_, range) = crypto::open(&initial.remote, &hdr, None, &mut probe).ok()?;
    probe.truncate(range.end);
    probe.drain(..range.start);
    Some((hdr, probe))
}

/// The trace's name for a packet level.
pub(super) fn trace_kind(level: Level) -> crate::trace::PacketKind {
    match level {
        Level::Initial => crate::trace::PacketKind::Initial,
        Level::Handshake => crate::trace::PacketKind::Handshake,
        Level::OneRtt => crate::trace::PacketKind::OneRtt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn received_packet_numbers_merge_into_descending_ranges() {
        let mut s = Space::default();
        for pn in [0, 1, 2, 5, 7, 6, 3, 10] {
            s.on_received(pn);
        }
        assert_eq!(s.received, vec![(10, 10), (5, 7), (0, 3)]);
        s.on_received(4);
        assert_eq!(s.received, vec![(10, 10), (0, 7)]);
        // Bounded: only the highest ranges are kept.
        for pn in (100..100 + 4 * MAX_HANDSHAKE_ACK_RANGES as u64).step_by(2) {
            s.on_received(pn);
        }
        assert_eq!(s.received.len(), MAX_HANDSHAKE_ACK_RANGES);
        assert_eq!(s.received[0].1, 100 + 4 * MAX_HANDSHAKE_ACK_RANGES as u64 - 2);
    }

    #[test]
    fn an_ack_moves_the_acknowledged_offset_by_the_bytes_its_packets_carried() {
        let mut s = Space { send: vec![0; 300], next_pn: 4, ..Space::default() };
        s.on_sent(0, 0, 100);
        s.on_sent(1, 100, 200);
        s.on_sent(2, 200, 300);
        // Packet 1 first: its bytes wait above the gap.
        assert!(s.on_ack(&[(1, 1)]));
        assert_eq!((s.acked, s.acked_above.clone()), (0, vec![(100, 200)]));
        assert!(s.on_ack(&[(2, 2), (0, 0)]));
        assert_eq!((s.acked, s.acked_above.len(), s.in_flight.len()), (300, 0, 0));
        // An ACK of a packet never sent is refused (and changes nothing).
        assert!(!s.on_ack(&[(4, 4)]));
        assert!(!s.on_ack(&[(0, 1 << 40)]));
        assert_eq!(s.acked, 300);
    }
}
