//! `braid interop server|client` end to end (the QUIC interop runner's endpoints, speaking
//! hq-interop), and `braid serve`'s stream read by another QUIC stack (quinn 0.11) through
//! the documented mapping of messages onto QUIC v1 streams.

use std::net::{SocketAddr, UdpSocket};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use braid_media::framing::{self, MediaMessage};
use braid_tests::{
    Guard, TempDir, assert_clean_error, braid, repo, run_braid_within, spawn_serving,
};

const CLIP: &str = "assets/clips/h263-qcif-15fps-64k.3gp";

/// A free loopback UDP port (bound, then released).
fn free_addr() -> SocketAddr {
    UdpSocket::bind("127.0.0.1:0").expect("a socket").local_addr().expect("its address")
}

/// `len` bytes, different per `seed`.
fn contents(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed).collect()
}

#[test]
fn interop_client_fetches_from_interop_server_and_reports_what_is_missing() {
    let root = TempDir::new("interop-root");
    let out = TempDir::new("interop-out");
    let files = [("one", contents(1, 2_000_000)), ("two", contents(2, 100_000))];
    for (name, data) in &files {
        std::fs::write(root.join(name), data).expect("a file");
    }
    for retry in [false, true] {
        let addr = free_addr();
        let mut cmd = braid();
        cmd.args(["interop", "server", "--listen", &addr.to_string(), "--root"])
            .arg(root.join(""))
            .stdout(Stdio::null());
        if retry {
            cmd.arg("--retry");
        }
        let (child, pin) = spawn_serving(&mut cmd);
        let _server = Guard(child);
        std::thread::sleep(Duration::from_millis(300));
        let url = |n: &str| format!("https://{addr}/{n}");
        let output = out.join("").to_string_lossy().into_owned();
        let fetched = run_braid_within(
            &[
                "interop",
                "client",
                &url("one"),
                &url("two"),
                "--output",
                &output,
                "--server-cert-sha256",
                &pin,
            ],
            Duration::from_secs(30),
        )
        .expect("the client ends within 30 s");
        assert!(fetched.status.success(), "{}", String::from_utf8_lossy(&fetched.stderr));
        for (name, data) in &files {
            assert!(std::fs::read(out.join(name)).expect("fetched") == *data, "{name}");
        }
        // A missing file: exit 1 with one clean error line naming it.
        let missing = run_braid_within(
            &[
                "interop",
                "client",
                &url("two"),
                &url("three"),
                "--output",
                &output,
                "--insecure",
                "--chacha20",
                "--key-update",
            ],
            Duration::from_secs(30),
        )
        .expect("the client ends within 30 s");
        let line = assert_clean_error(&missing);
        assert!(line.contains("three"), "{line}");
    }
}

#[test]
fn interop_client_refuses_unauthenticated_servers_and_bad_urls() {
    let out = TempDir::new("interop-refusals");
    let output = out.join("").to_string_lossy().into_owned();
    let url = "https://127.0.0.1:9/a";
    let e = assert_clean_error(
        &braid().args(["interop", "client", url, "--output", &output]).output().expect("braid"),
    );
    assert!(e.contains("--insecure"), "{e}");
    let e = assert_clean_error(
        &braid()
            .args(["interop", "client", "http://x/a", "--output", &output, "--insecure"])
            .output()
            .expect("braid"),
    );
    assert!(e.contains("https://HOST:PORT/NAME"), "{e}");
    let e = assert_clean_error(
        &braid()
            .args([
                "interop",
                "client",
                url,
                "https://127.0.0.2:9/b",
                "--output",
                &output,
                "--insecure",
            ])
            .output()
            .expect("braid"),
    );
    assert!(e.contains("more than one server"), "{e}");
}

/// quinn's client trusting exactly the certificate with the fingerprint `pin` (hex).
fn quinn_client(pin: &str) -> quinn::Endpoint {
    let fingerprint = braid_io::tls::parse_fingerprint(pin).expect("a fingerprint");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(braid_transport::proto::crypto::PinnedCertVerifier::new(
        fingerprint,
        provider.signature_verification_algorithms,
    ));
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    tls.alpn_protocols = vec![braid_transport::proto::crypto::ALPN.to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("a QUIC config");
    let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().expect("an address"))
        .expect("a quinn endpoint");
    client.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    client
}

#[test]
fn a_quinn_client_reads_braid_serves_stream_on_v1_streams() {
    // quinn announces none of Braid's frames: `braid serve` sends each message on a
    // unidirectional stream of its own (docs/ALGORITHMS.md, "Messages on v1 streams") —
    // the stream header, the clip's 450 access units in order, the end — and quinn reads
    // them with nothing but QUIC v1.
    let addr = free_addr();
    let (child, pin) = spawn_serving(
        braid()
            .args(["serve", repo(CLIP).to_str().expect("a path"), "--listen", &addr.to_string()])
            .stdout(Stdio::null()),
    );
    let _server = Guard(child);
    std::thread::sleep(Duration::from_millis(400));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        let client = quinn_client(&pin);
        let conn = client.connect(addr, "braid").expect("connecting").await.expect("a handshake");
        let read = async {
            let mut units = Vec::new();
            let mut ids = Vec::new();
            loop {
                let mut s = conn.accept_uni().await.expect("a stream");
                ids.push(u64::from(s.id()));
                let msg = s.read_to_end(1 << 20).await.expect("the message to its FIN");
                match framing::decode(&msg).expect("a media message") {
                    MediaMessage::Header(h) => {
                        assert!(units.is_empty(), "the header first");
                        assert_eq!(h.plan.len(), 450);
                    }
                    MediaMessage::Unit(au) => units.push(au.index),
                    MediaMessage::End { frames } => return (units, ids, frames),
                    MediaMessage::Playout { .. } => panic!("a playout report from the server"),
                }
            }
        };
        let (units, ids, frames) = tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .expect("the stream within 60 s");
        assert_eq!(frames, 450);
        assert_eq!(units, (0..450).collect::<Vec<_>>(), "every access unit, in order");
        let want: Vec<u64> = (0..ids.len() as u64).map(|n| 4 * n + 3).collect();
        assert_eq!(ids, want, "message n on server unidirectional stream 4n + 3");
        conn.close(0u32.into(), b"");
        client.wait_idle().await;
    });
}
