//! The QUIC interop runner's cases with quinn 0.11 and with noq 1.4 (QUIC v1, multipath
//! off), both ways, on `hq-interop` (HTTP/0.9 over QUIC: `GET /NAME\r\n` on a client
//! bidirectional stream, the file back, FIN), real loopback sockets: handshake, transfer
//! (1 MB + 5 × 100 kB, SHA-256 checked), retry, keyupdate, chacha20, rebind-port (a NAT
//! moves the client's port) and connectionmigration (the client moves to a new socket on
//! purpose, with a connection id never used before); and NEW_TOKEN with quinn. Braid's
//! side is `braid_io::hq`, what `braid interop server|client` run; the other stack's is
//! written here as the runner's quinn endpoints behave
//! (`interop_common/runner_cases.rs`).
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use braid_io::driver::{self, RetryPolicy};
use braid_io::hq;

mod interop_common;
use interop_common::{LOOPBACK, client_tls, config, server_tls};

/// The transfer case's files: 1 MB and five of 100 kB.
const FILES: [(&str, usize); 6] = [
    ("big", 1_000_000),
    ("a", 100_000),
    ("b", 100_000),
    ("c", 100_000),
    ("d", 100_000),
    ("e", 100_000),
];

/// The bytes of file `name`: `len` of them, different per file.
fn contents(name: &str, len: usize) -> Vec<u8> {
    let seed = name.bytes().fold(7u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(b)));
    (0..len as u32).map(|i| (i.wrapping_mul(2_654_435_761) ^ seed).to_le_bytes()[1]).collect()
}

fn sha256(b: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, b).as_ref().to_vec()
}

/// A directory of its own under the system's temporary one, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("braid-hq-{}-{tag}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A root holding the transfer case's files.
fn root() -> TempDir {
    let dir = TempDir::new("root");
    for (name, len) in FILES {
        std::fs::write(dir.0.join(name), contents(name, len)).expect("a file");
    }
    dir
}

/// Checks that `dir` holds every file of the transfer case, whole.
fn check_files(dir: &Path) {
    for (name, len) in FILES {
        let got = std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.len(), len, "{name}");
        assert_eq!(sha256(&got), sha256(&contents(name, len)), "{name}");
    }
}

/// Braid's `hq-interop` server on loopback (`retry`: a Retry before every handshake),
/// serving `root`; its address and certificate fingerprint.
async fn braid_server(root: &Path, retry: bool) -> (SocketAddr, [u8; 32]) {
    let identity = braid_io::tls::self_signed().expect("an identity");
    let policy = if retry { RetryPolicy::Always } else { RetryPolicy::UnderLoad };
    let ep = driver::listen_with(
        SocketAddr::new(LOOPBACK, 0),
        Arc::new(hq::config(&config(), false)),
        hq::server_crypto(&identity.crypto),
        policy,
    )
    .await
    .expect("listening");
    let addr = ep.local_addr();
    tokio::spawn(hq::serve(ep, root.to_path_buf()));
    (addr, identity.fingerprint)
}

/// A directory of the 60 files `fetches_many` asks for.
fn many_files(tag: &str) -> TempDir {
    let dir = TempDir::new(tag);
    for i in 0..60 {
        let n = format!("f{i}");
        std::fs::write(dir.0.join(&n), contents(&n, 100_000)).expect("a file");
    }
    dir
}

/// A NAT between a client and `server` on loopback: the client sends to the returned
/// address; its datagrams leave from an outside socket that is replaced by a new one (a new
/// source port, the old mapping forgotten) once `rebind_after` bytes went to the client.
/// Returns the front address and the task, which yields the outside ports it used.
async fn nat(
    server: SocketAddr,
    rebind_after: usize,
) -> (SocketAddr, tokio::task::JoinHandle<Vec<u16>>) {
    use tokio::net::UdpSocket;
    let front = UdpSocket::bind((LOOPBACK, 0)).await.expect("the NAT's front");
    let addr = front.local_addr().expect("its address");
    let task = tokio::spawn(async move {
        let mut outside = UdpSocket::bind((LOOPBACK, 0)).await.expect("an outside socket");
        let mut ports = vec![outside.local_addr().map_or(0, |a| a.port())];
        let (mut client, mut to_client) = (None, 0usize);
        let (mut a, mut b) = (vec![0u8; 2048], vec![0u8; 2048]);
        loop {
            tokio::select! {
                r = front.recv_from(&mut a) => {
                    let Ok((n, from)) = r else { continue };
                    client = Some(from);
                    let _ = outside.send_to(&a[..n], server).await;
                }
                r = outside.recv_from(&mut b) => {
                    let Ok((n, _)) = r else { continue };
                    if let Some(c) = client {
                        let _ = front.send_to(&b[..n], c).await;
                    }
                    to_client += n;
                    if ports.len() == 1 && to_client >= rebind_after {
                        outside = UdpSocket::bind((LOOPBACK, 0)).await.expect("a new socket");
                        ports.push(outside.local_addr().map_or(0, |a| a.port()));
                    }
                }
                () = tokio::time::sleep(Duration::from_secs(1)) => return ports,
            }
        }
    });
    (addr, task)
}

/// NEW_TOKEN (RFC 9000 §8.1.3), with our server asking every client for a Retry: quinn's
/// client, which keeps the token our server sends after the handshake, connects a second
/// time with it and is accepted without a Retry, its address validated by the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quinn_client_skips_our_retry_with_the_token_our_server_sent() {
    let root = root();
    let identity = braid_io::tls::self_signed().expect("an identity");
    let ep = Arc::new(
        driver::listen_with(
            SocketAddr::new(LOOPBACK, 0),
            Arc::new(hq::config(&config(), false)),
            hq::server_crypto(&identity.crypto),
            RetryPolicy::Always,
        )
        .await
        .expect("listening"),
    );
    let addr = ep.local_addr();
    let server = tokio::spawn(hq::serve(Arc::clone(&ep), root.0.clone()));
    // One quinn endpoint: its client configuration keeps the tokens it is given.
    let client = with_quinn::client(identity.fingerprint, false);
    for round in 1..=2u64 {
        let conn =
            client.connect(addr, "localhost").expect("connecting").await.expect("a handshake");
        let (mut send, mut recv) = conn.open_bi().await.expect("a stream");
        send.write_all(b"GET /a\r\n").await.expect("the request");
        send.finish().expect("finished");
        let data = recv.read_to_end(1 << 24).await.expect("the answer");
        assert!(data == contents("a", 100_000), "round {round}");
        // The NEW_TOKEN went out with the handshake's end, long before the answer's end.
        conn.close(0u32.into(), b"");
        let s = ep.stats();
        assert_eq!((s.accepted, s.retries_sent), (round, 1), "round {round}: {s:?}");
    }
    let s = ep.stats();
    assert_eq!((s.new_tokens_accepted, s.new_tokens_refused), (1, 0), "{s:?}");
    client.wait_idle().await;
    server.abort();
}

/// NEW_TOKEN the other way: quinn's server (validation tokens on, asking for a Retry
/// unless the address is validated) sends our client a token; our client's next
/// connection carries it and quinn finds the address validated (no Retry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_skips_a_quinn_servers_retry_with_its_token() {
    let (server, addr, fingerprint) = with_quinn::hq_endpoint();
    // Whether each incoming connection's address was validated (by a token).
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        while let Some(incoming) = server.accept().await {
            let validated = incoming.remote_address_validated();
            if !validated && !incoming.may_retry() {
                incoming.refuse();
                continue;
            }
            if !validated {
                let _ = seen_tx.send(false);
                incoming.retry().expect("a Retry");
                continue;
            }
            let _ = seen_tx.send(true);
            let Ok(conn) = incoming.await else { continue };
            tokio::spawn(async move {
                while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                    tokio::spawn(async move {
                        let _ = recv.read_to_end(4096).await;
                        send.write_all(&contents("a", 100_000)).await.expect("the answer");
                        send.finish().expect("finished");
                        let _ = send.stopped().await;
                    });
                }
            });
        }
    });
    let crypto = hq::client_crypto(&hq::Trust::Pinned(fingerprint), false).expect("TLS");
    let cfg = Arc::new(hq::config(&config(), false));
    let path = driver::PathSpec::to(addr, braid_transport::path::PathRole::Wired);
    let out = TempDir::new("token");
    let mut token = None;
    for round in 1..=2 {
        let options = driver::ConnectOptions { token: token.take(), ..Default::default() };
        let conn =
            driver::connect_with(Arc::clone(&cfg), crypto.clone(), vec![path.clone()], options)
                .await
                .expect("a handshake");
        let names = vec!["a".to_string()];
        tokio::time::timeout(Duration::from_secs(20), hq::fetch(&conn, &names, &out.0))
            .await
            .expect("within 20 s")
            .expect("the file");
        token = conn.take_new_token();
        assert!(token.is_some(), "round {round}: quinn sent no NEW_TOKEN");
        conn.close(0, b"").await;
    }
    // First: a Retry (not validated), then the connection (validated by the Retry's
    // token); second: validated at once by the NEW_TOKEN token.
    let mut validations = Vec::new();
    while let Ok(v) = seen.try_recv() {
        validations.push(v);
    }
    assert_eq!(validations, vec![false, true, true]);
    task.abort();
}

/// The runner's cases against quinn 0.11.
mod with_quinn {
    use super::*;
    use ::quinn as q;
    include!("interop_common/runner_cases.rs");

    fn with_cid_generator(
        c: &mut q::EndpointConfig,
        f: impl Fn() -> Box<dyn q::ConnectionIdGenerator> + Send + Sync + 'static,
    ) {
        c.cid_generator(f);
    }
}

/// The same cases against noq 1.4 (multipath off: QUIC v1).
mod with_noq {
    use super::*;
    use ::noq as q;
    include!("interop_common/runner_cases.rs");

    fn with_cid_generator(
        c: &mut q::EndpointConfig,
        f: impl Fn() -> Box<dyn q::ConnectionIdGenerator> + Send + Sync + 'static,
    ) {
        c.cid_generator(Arc::new(f));
    }
}
