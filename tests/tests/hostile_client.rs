//! One hostile client against `braid serve`: a real handshake, then, every few
//! milliseconds, frames meant to make the server hold state — ABANDON with `next_message`
//! raised a round (the attack that once took the server from 48 MB to 1.3 GB in 30 s; the
//! connection now takes at most its message window beyond what was read), ids for ever new path ids, status and probe requests for paths that do not
//! exist, and messages with gaps — while it grants no credit and reads nothing. The
//! server's resident set must stay within 64 MB of its level before the attack.

use std::net::{SocketAddr, UdpSocket};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use braid_tests::{Guard, braid, repo};
use braid_transport::cc::RenoConfig;
use braid_transport::path::{PathId, PathRole, PathStatus};
use braid_transport::proto::frame::{DataFrame, Frame};
use braid_transport::proto::{Config, Connection};
use braid_transport::sched::MinRttConfig;
use braid_transport::time::Instant;

/// Resident set of process `pid`, kB (Linux).
fn rss_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The frames of attack round `k`.
fn attack(k: u64) -> Vec<Frame> {
    let mut frames = vec![
        // Inside the server's windows (at most its message window beyond what it read),
        // so each is taken: 1 024 more gaps for the server's application every round.
        Frame::Abandon { offset: 0, next_message: k * 1_024 },
        Frame::PathNewCid {
            // Within the server's maximum path id (ids 0 to 7): one above it would close
            // the connection at once (RFC 10069), and the attack would stop.
            path: PathId(1 + (k % 7) as u32),
            seq: 0,
            retire_prior_to: 0,
            cid: braid_transport::proto::wire::LongCid::from_u64(
                k.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            ),
            reset_token: [k as u8; 16],
        },
        Frame::PathStatus {
            path: PathId((k % 64) as u32),
            seq: k,
            status: if k.is_multiple_of(2) { PathStatus::Backup } else { PathStatus::Active },
        },
        Frame::PathProbe { path: PathId((k % 64) as u32) },
    ];
    // Messages with every other id missing: the reassembly waits for the gaps.
    let id = k * 2 + 1;
    frames.push(Frame::Data(DataFrame {
        message_id: id,
        message_start: id * 200,
        message_len: 200,
        offset: 0,
        fin: false,
        data: bytes::Bytes::from(vec![0x55; 200]),
    }));
    frames
}

#[test]
fn one_hostile_client_costs_the_server_a_bounded_amount_of_memory() {
    let port = {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let mut serve = braid();
    serve
        .args(["serve", repo("assets/clips/h263-qcif-15fps-64k.3gp").to_str().unwrap()])
        .args(["--listen", &addr, "--profile", "mptcp", "--loop", "120"])
        .stdout(Stdio::null());
    let (server, pin) = braid_tests::spawn_serving(&mut serve);
    let server = Guard(server);
    let pid = server.0.id();
    std::thread::sleep(Duration::from_millis(500));

    let fp = braid_io::tls::parse_fingerprint(&pin).expect("the printed fingerprint");
    let crypto = braid_io::tls::pinned(fp);
    let mut cfg = Config::new(Arc::new(RenoConfig::default()), Arc::new(MinRttConfig::default()));
    cfg.recv_buffer_bytes = 16 * 1024;
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    let local = sock.local_addr().unwrap();
    let remote: SocketAddr = addr.parse().unwrap();
    let start = std::time::Instant::now();
    let now = || Instant::from_micros(start.elapsed().as_micros() as u64);
    let mut conn =
        Connection::connect(Arc::new(cfg), &crypto, now(), 42, local, remote, PathRole::Wifi)
            .expect("a client");
    let mut buf = Vec::new();
    let mut rx = vec![0u8; 65_536];
    let mut baseline = None;
    let mut peak = 0;
    let mut rounds = 0u64;
    let mut last_round = start;
    let mut last_sample = start;
    let attack_for = Duration::from_secs(20);
    let mut attack_start = None;
    while attack_start.is_none_or(|t: std::time::Instant| t.elapsed() < attack_for) {
        assert!(start.elapsed() < Duration::from_secs(40), "the attack did not get going");
        assert!(
            !conn.is_closed(),
            "the server closed the hostile connection after {rounds} rounds"
        );
        while let Some(t) = conn.poll_transmit(now(), &mut buf) {
            let _ = sock.send_to(&buf[..t.len], t.remote);
        }
        if let Ok((n, from)) = sock.recv_from(&mut rx) {
            conn.handle_datagram(now(), local, from, &rx[..n]);
        }
        if conn.poll_timeout().is_some_and(|t| t <= now()) {
            conn.handle_timeout(now());
        }
        if !conn.is_established() {
            continue;
        }
        if attack_start.is_none() {
            // Let the stream start, then take the server's level.
            std::thread::sleep(Duration::from_millis(500));
            baseline = rss_kb(pid);
            attack_start = Some(std::time::Instant::now());
        }
        if last_round.elapsed() >= Duration::from_millis(2) {
            last_round = std::time::Instant::now();
            rounds += 1;
            if let Some(pkt) = conn.forge_packet(PathId(0), &attack(rounds)) {
                let _ = sock.send_to(&pkt, remote);
            }
        }
        if last_sample.elapsed() >= Duration::from_millis(250) {
            last_sample = std::time::Instant::now();
            peak = peak.max(rss_kb(pid).unwrap_or(0));
        }
    }
    let baseline = baseline.expect("a baseline");
    peak = peak.max(rss_kb(pid).unwrap_or(0));
    eprintln!(
        "{rounds} attack rounds in {:?}: server resident {} kB before, peak {} kB (+{:.1} MB)",
        attack_for,
        baseline,
        peak,
        peak.saturating_sub(baseline) as f64 / 1024.0
    );
    assert!(rounds > 500, "{rounds} rounds");
    assert!(
        peak.saturating_sub(baseline) <= 64 * 1024,
        "server grew from {baseline} kB to {peak} kB"
    );
    let mut server = server;
    assert!(server.0.try_wait().unwrap().is_none(), "the server died");
}
