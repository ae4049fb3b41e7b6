//! Packet protection and address validation of `braid serve` / `braid play`, seen from the
//! network: a UDP relay in this test sits between the two processes, records what the
//! server sends and may corrupt it; a copy of a client's first datagram is replayed at the
//! server from another port. Real time on loopback; the cases run one at a time.

use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use braid_tests::{Guard, TempDir, braid, repo, run_braid, spawn_serving};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const CLIP: &str = "assets/clips/h263-qcif-15fps-64k.3gp";

/// A free loopback UDP port (bound, then released).
fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `braid serve` of the H.263 clip on a fresh port, with its certificate fingerprint.
fn serve() -> (Guard, SocketAddr, String) {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let (child, pin) = spawn_serving(
        braid()
            .args(["serve", repo(CLIP).to_str().unwrap(), "--listen", &addr.to_string()])
            .stdout(Stdio::null()),
    );
    assert_eq!(pin.len(), 64, "serve prints `certificate sha256 HEX`");
    std::thread::sleep(Duration::from_millis(400));
    (Guard(child), addr, pin)
}

/// A UDP relay: clients talk to `front`, the relay talks to the server from its own
/// socket. Every server datagram is recorded; with `corrupt_one_in = Some(n)` one byte of
/// every n-th server datagram is flipped on its way to the client.
struct Relay {
    front: SocketAddr,
    stop: Arc<AtomicBool>,
    captured: Arc<Mutex<Vec<Vec<u8>>>>,
    corrupted: Arc<Mutex<u64>>,
    threads: Vec<JoinHandle<()>>,
}

impl Relay {
    fn start(server: SocketAddr, corrupt_one_in: Option<u64>) -> Relay {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        for s in [&front, &back] {
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        }
        let front_addr = front.local_addr().unwrap();
        let (front, back) = (Arc::new(front), Arc::new(back));
        let client: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let captured: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let corrupted = Arc::new(Mutex::new(0u64));
        let up = {
            let (front, back, client, stop) =
                (Arc::clone(&front), Arc::clone(&back), Arc::clone(&client), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut buf = [0u8; 2048];
                while !stop.load(Ordering::SeqCst) {
                    if let Ok((n, from)) = front.recv_from(&mut buf) {
                        *client.lock().unwrap() = Some(from);
                        let _ = back.send_to(&buf[..n], server);
                    }
                }
            })
        };
        let down = {
            let (stop, captured, corrupted) =
                (Arc::clone(&stop), Arc::clone(&captured), Arc::clone(&corrupted));
            std::thread::spawn(move || {
                let mut buf = [0u8; 2048];
                let mut k = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let Ok((n, _)) = back.recv_from(&mut buf) else { continue };
                    let mut d = buf[..n].to_vec();
                    captured.lock().unwrap().push(d.clone());
                    k += 1;
                    if let Some(every) = corrupt_one_in
                        && k.is_multiple_of(every)
                    {
                        let at = (k as usize * 7919) % d.len();
                        d[at] ^= 0x5a;
                        *corrupted.lock().unwrap() += 1;
                    }
                    if let Some(c) = *client.lock().unwrap() {
                        let _ = front.send_to(&d, c);
                    }
                }
            })
        };
        Relay { front: front_addr, stop, captured, corrupted, threads: vec![up, down] }
    }

    fn stop(mut self) -> (Vec<Vec<u8>>, u64) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let captured = std::mem::take(&mut *self.captured.lock().unwrap());
        let corrupted = *self.corrupted.lock().unwrap();
        (captured, corrupted)
    }
}

/// Plays through `relay` with the H.263 clip as the reference; returns the report.
fn play_through(relay: &Relay, pin: &str, dir: &TempDir, seconds: &str) -> serde_json::Value {
    let report = dir.join("play.json");
    let out = run_braid(&[
        "play",
        &relay.front.to_string(),
        "--server-cert-sha256",
        pin,
        "--profile",
        "mptcp",
        "--headless",
        "--duration",
        seconds,
        "--reference",
        repo(CLIP).to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap()
}

/// What the server sends is ciphertext: no 32-byte run of the clip file (whose H.263
/// frames the stream carries verbatim) appears in any captured datagram. Before packet
/// protection every DATA frame carried the clip's bytes in clear.
#[test]
fn the_servers_datagrams_contain_no_run_of_the_clips_bytes() {
    let _s = serial();
    let dir = TempDir::new("sec-capture");
    let (_server, addr, pin) = serve();
    let relay = Relay::start(addr, None);
    let r = play_through(&relay, &pin, &dir, "4");
    let (captured, _) = relay.stop();
    assert!(r["stream"]["frames_total"].as_u64().unwrap() >= 30, "{r}");
    let bytes: usize = captured.iter().map(Vec::len).sum();
    assert!(bytes > 20_000, "only {bytes} bytes captured");
    let clip = std::fs::read(repo(CLIP)).unwrap();
    let windows: HashSet<&[u8]> = clip.windows(32).collect();
    for (i, d) in captured.iter().enumerate() {
        if let Some(at) = d.windows(32).position(|w| windows.contains(w)) {
            panic!("datagram {i} carries clip bytes in clear at offset {at}");
        }
    }
}

/// One byte flipped in 2 % of the server's datagrams: each such datagram fails
/// authentication and is dropped, the reliable profile resends what it carried, and every
/// frame arrives intact. (Before packet protection a flipped byte inside a DATA frame was
/// delivered as it was.)
#[test]
fn corrupting_two_percent_of_the_servers_datagrams_leaves_every_frame_intact() {
    let _s = serial();
    let dir = TempDir::new("sec-corrupt");
    let (_server, addr, pin) = serve();
    let relay = Relay::start(addr, Some(50));
    let r = play_through(&relay, &pin, &dir, "5");
    let (_, corrupted) = relay.stop();
    assert!(corrupted >= 5, "only {corrupted} datagrams corrupted");
    let st = &r["stream"];
    assert!(st["frames_total"].as_u64().unwrap() >= 50, "{r}");
    assert_eq!(st["frames_lost"], 0, "{r}");
    assert_eq!(st["psnr_avg_db"], 100.0, "{r}");
    // The client counted the corrupted datagrams it dropped.
    let dropped = r["unauthenticated_datagrams"].as_u64().unwrap_or(0);
    assert!(dropped >= corrupted / 2, "{dropped} of {corrupted} counted: {r}");
}

/// A copy of a client's first datagram sent from another port (a spoofed source) gets at
/// most three times its size back, retransmissions included. (Before address
/// validation, an unpadded hello made the server send its initial window and RTO resends.)
#[test]
fn a_copy_of_a_clients_first_datagram_gets_at_most_three_times_its_size_back() {
    let _s = serial();
    // Catch a real client's first datagram.
    let catcher = UdpSocket::bind("127.0.0.1:0").unwrap();
    catcher.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let pin = "ab".repeat(32);
    let play = braid()
        .args(["play", &catcher.local_addr().unwrap().to_string(), "--headless"])
        .args(["--duration", "3", "--server-cert-sha256", &pin])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let play = Guard(play);
    let mut buf = [0u8; 2048];
    let (n, _) = catcher.recv_from(&mut buf).expect("the client's first datagram");
    drop(play);
    let first = buf[..n].to_vec();
    assert!(first.len() >= 1200, "the first datagram is padded: {} bytes", first.len());

    let (_server, addr, _) = serve();
    let victim = UdpSocket::bind("127.0.0.1:0").unwrap();
    victim.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    victim.send_to(&first, addr).unwrap();
    let mut received = 0usize;
    let t0 = Instant::now();
    // Long enough for several handshake retransmission timeouts.
    while t0.elapsed() < Duration::from_secs(4) {
        if let Ok((m, from)) = victim.recv_from(&mut buf) {
            assert_eq!(from, addr);
            received += m;
        }
    }
    assert!(received > 0, "the server answered nothing");
    assert!(
        received <= 3 * first.len(),
        "{received} bytes answered to a {}-byte datagram",
        first.len()
    );
}
