//! `braid serve` under hostile input, as separate processes on loopback: junk datagrams at
//! the serving port while a real client plays. Real-time cases run one after another.

use std::net::UdpSocket;
use std::process::Stdio;
use std::time::Duration;

use braid_tests::{Guard, TempDir, braid, repo, run_braid_within, spawn_serving};

const CLIP: &str = "assets/clips/h263-qcif-15fps-64k.3gp";

/// Real-time tests in this file run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `braid serve` of the clip on `addr`, with the certificate fingerprint it printed.
fn serve(addr: &str, extra: &[&str]) -> (Guard, String) {
    let mut args = vec!["serve", CLIP, "--listen", addr];
    args.extend_from_slice(extra);
    let mut cmd = braid();
    cmd.args(&args).stdout(Stdio::null());
    let (child, pin) = spawn_serving(&mut cmd);
    assert_eq!(pin.len(), 64, "serve printed its certificate");
    std::thread::sleep(Duration::from_millis(300));
    (Guard(child), pin)
}

/// Plays `addr` headless for at most `seconds` with the clip as reference; returns the
/// report's `stream` object. The run is killed (and the test fails) if it hangs.
fn play(addr: &str, seconds: u32, extra: &[&str], dir: &TempDir) -> serde_json::Value {
    let report = dir.join("play.json");
    let secs = seconds.to_string();
    let reference = repo(CLIP);
    let mut args = vec![
        "play",
        addr,
        "--headless",
        "--duration",
        &secs,
        "--reference",
        reference.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run_braid_within(&args, Duration::from_secs(u64::from(seconds) + 30))
        .expect("braid play finished in time");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    r["stream"].clone()
}

/// A deterministic junk datagram of up to 1 500 random bytes; every third one starts
/// like a 1-RTT packet (then a random connection id), every third like an Initial of
/// the protocol's version.
fn junk(k: u64) -> Vec<u8> {
    let mut x = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let len = (next() % 1500) as usize;
    let mut d: Vec<u8> = (0..len).map(|_| next() as u8).collect();
    if d.len() > 10 {
        match k % 3 {
            0 => d[0] = 0x43,
            1 => {
                d[0] = 0xC3;
                // The version (braid_transport::proto::crypto::VERSION) and the length
                // bytes of the two connection ids, so the header parses.
                d[1..5].copy_from_slice(&1u32.to_be_bytes());
                if d.len() > 30 {
                    d[5] = 8;
                    d[14] = 8;
                    let cid: [u8; 8] = d[6..14].try_into().unwrap();
                    d[15..23].copy_from_slice(&cid);
                }
            }
            _ => {}
        }
    }
    d
}

#[test]
fn ten_thousand_junk_datagrams_at_the_serving_port_do_not_disturb_a_real_client() {
    let _serial = serial();
    let port = 45_000 + (std::process::id() % 1000) as u16;
    // 10 000 junk datagrams at the serving port while a real client plays the clip to
    // its end.
    let dir = TempDir::new("junk-e2e");
    let addr = format!("127.0.0.1:{port}");
    let (_server, pin) = serve(&addr, &[]);
    let target = addr.clone();
    let flood = std::thread::spawn(move || {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        for k in 0..10_000u64 {
            let _ = sock.send_to(&junk(k), &target);
            if k % 100 == 99 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    });
    let st = play(&addr, 40, &["--server-cert-sha256", &pin], &dir);
    flood.join().unwrap();
    assert_eq!(st["frames_total"], 450, "played to the end: {st}");
    assert_eq!(st["frames_lost"], 0, "{st}");
    assert_eq!(st["psnr_avg_db"], 100.0, "{st}");
}
