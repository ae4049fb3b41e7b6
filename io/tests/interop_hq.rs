//! The QUIC interop runner's cases with quinn 0.11, both ways, on `hq-interop` (HTTP/0.9
//! over QUIC: `GET /NAME\r\n` on a client bidirectional stream, the file back, FIN), real
//! loopback sockets: handshake, transfer (1 MB + 5 × 100 kB, SHA-256 checked), retry,
//! keyupdate, chacha20, rebind-port (a NAT moves the client's port) and connectionmigration
//! (the client moves to a new socket on purpose, with a connection id never used before). Braid's side is `braid_io::hq`, what `braid interop
//! server|client` run; quinn's is written here as the runner's quinn endpoints behave.

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

/// quinn's client with the runner's ALPN; `chacha20`: that suite only.
fn quinn_client(fingerprint: [u8; 32], chacha20: bool) -> quinn::Endpoint {
    let mut tls = client_tls(fingerprint);
    tls.alpn_protocols = vec![hq::ALPN.to_vec()];
    if chacha20 {
        let mut p = rustls::crypto::ring::default_provider();
        p.cipher_suites = vec![rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256];
        let verifier = Arc::new(braid_transport::proto::crypto::PinnedCertVerifier::new(
            fingerprint,
            p.signature_verification_algorithms,
        ));
        tls = rustls::ClientConfig::builder_with_provider(Arc::new(p))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3")
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        tls.alpn_protocols = vec![hq::ALPN.to_vec()];
    }
    // Initial packets are always AES-128-GCM (RFC 9001 §5.2), whatever TLS negotiates.
    let initial = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|s| s.quic_suite())
        .expect("the Initial suite");
    let quic = quinn::crypto::rustls::QuicClientConfig::with_initial(Arc::new(tls), initial)
        .expect("a QUIC config");
    let mut client =
        quinn::Endpoint::client(SocketAddr::new(LOOPBACK, 0)).expect("a quinn endpoint");
    client.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    client
}

/// quinn fetches the transfer case's files from `addr` over one connection, all requests
/// at once as the runner's clients do, into `out`; with `key_update`, it updates its keys
/// first, so every request and acknowledgement travels under the next keys. Returns
/// quinn's connection statistics.
async fn quinn_fetches(
    addr: SocketAddr,
    fingerprint: [u8; 32],
    chacha20: bool,
    key_update: bool,
    out: &Path,
) -> quinn::ConnectionStats {
    let client = quinn_client(fingerprint, chacha20);
    let conn = client.connect(addr, "localhost").expect("connecting").await.expect("a handshake");
    if key_update {
        conn.force_key_update();
    }
    let mut tasks = Vec::new();
    for (name, _) in FILES {
        let conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            let (mut send, mut recv) = conn.open_bi().await.expect("a stream");
            send.write_all(format!("GET /{name}\r\n").as_bytes()).await.expect("the request");
            send.finish().expect("finished");
            (name, recv.read_to_end(1 << 24).await.expect("the answer to its FIN"))
        }));
    }
    for t in tasks {
        let (name, data) = t.await.expect("a fetch");
        std::fs::write(out.join(name), data).expect("written");
    }
    let stats = conn.stats();
    conn.close(0u32.into(), b"");
    client.wait_idle().await;
    stats
}

async fn quinn_client_case(retry: bool, chacha20: bool, key_update: bool) {
    let root = root();
    let (addr, fingerprint) = braid_server(&root.0, retry).await;
    let out = TempDir::new("out");
    let stats = tokio::time::timeout(
        Duration::from_secs(20),
        quinn_fetches(addr, fingerprint, chacha20, key_update, &out.0),
    )
    .await
    .expect("the transfer within 20 s");
    check_files(&out.0);
    assert!(stats.frame_rx.stream >= FILES.len() as u64, "{:?}", stats.frame_rx);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quinn_client_fetches_files_from_our_server() {
    // handshake + transfer.
    quinn_client_case(false, false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quinn_client_fetches_after_our_servers_retry() {
    quinn_client_case(true, false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quinn_client_fetches_with_chacha20_only() {
    quinn_client_case(false, true, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quinn_client_updates_its_keys_while_fetching_from_our_server() {
    quinn_client_case(false, false, true).await;
}

/// quinn fetches 60 files of 100 kB from `addr` over one connection, all requests at
/// once; once the first answer is complete, `mid` runs (the rest still on their way).
/// Every file must arrive intact and the connection stay open.
async fn quinn_fetches_many(
    client: &quinn::Endpoint,
    addr: SocketAddr,
    mid: impl FnOnce(&quinn::Endpoint),
) {
    let conn = client.connect(addr, "localhost").expect("connecting").await.expect("a handshake");
    let names: Vec<String> = (0..60).map(|i| format!("f{i}")).collect();
    let mut tasks = Vec::new();
    for n in names.clone() {
        let conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            let (mut send, mut recv) = conn.open_bi().await.expect("a stream");
            send.write_all(format!("GET /{n}\r\n").as_bytes()).await.expect("the request");
            send.finish().expect("finished");
            let data = recv.read_to_end(1 << 24).await.expect("the answer to its FIN");
            (n, data)
        }));
    }
    let first = tasks.remove(0).await.expect("the first fetch");
    let pending = tasks.iter().filter(|t| !t.is_finished()).count();
    mid(client);
    eprintln!("{pending} of 59 answers still on their way");
    assert!(pending > 0, "the transfer ended first");
    let mut got = vec![first];
    for t in tasks {
        got.push(
            tokio::time::timeout(Duration::from_secs(20), t)
                .await
                .expect("within 20 s")
                .expect("a fetch"),
        );
    }
    for (n, data) in got {
        assert!(data == contents(&n, 100_000), "{n}");
    }
    assert!(conn.close_reason().is_none(), "{:?}", conn.close_reason());
    conn.close(0u32.into(), b"");
    client.wait_idle().await;
}

/// A directory of the 60 files [`quinn_fetches_many`] asks for.
fn many_files(tag: &str) -> TempDir {
    let dir = TempDir::new(tag);
    for i in 0..60 {
        let n = format!("f{i}");
        std::fs::write(dir.0.join(&n), contents(&n, 100_000)).expect("a file");
    }
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quinn_client_behind_a_rebinding_nat_gets_every_file_from_our_server() {
    // The runner's rebind-port case: a NAT gives the client's flow a new source port while
    // the answers flow (the client itself does not know: same socket, same connection
    // id); our server validates the new address and goes on there.
    let dir = many_files("rebind");
    let (addr, fingerprint) = braid_server(&dir.0, false).await;
    let (front, nat) = nat(addr, 1_000_000).await;
    let client = quinn_client(fingerprint, false);
    quinn_fetches_many(&client, front, |_| {}).await;
    let ports = nat.await.expect("the NAT");
    assert_eq!(ports.len(), 2, "the NAT rebound once: {ports:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quinn_client_that_migrates_mid_transfer_gets_every_file_from_our_server() {
    // The runner's connectionmigration case: once the first answer is complete, quinn's
    // client moves to a new socket (an active migration): its packets from there carry
    // one of the ids our server issued and never seen from the old port (RFC 9000 §9.5),
    // and our server validates the new address and goes on there.
    let dir = many_files("migrate");
    let (addr, fingerprint) = braid_server(&dir.0, false).await;
    let (front, relay) = interop_common::relay(addr).await;
    let client = quinn_client(fingerprint, false);
    quinn_fetches_many(&client, front, |client| {
        let before = client.local_addr().expect("its address");
        let socket = std::net::UdpSocket::bind(SocketAddr::new(LOOPBACK, 0)).expect("a new socket");
        client.rebind(socket).expect("rebound");
        assert_ne!(client.local_addr().expect("its address").port(), before.port());
    })
    .await;
    interop_common::assert_migrated_with_new_ids(&relay.await.expect("the relay"));
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
    let client = quinn_client(identity.fingerprint, false);
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
    let (server, addr, fingerprint) = quinn_hq_endpoint();
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

/// A quinn server endpoint on loopback with the runner's ALPN: the endpoint, its address
/// and its certificate's fingerprint.
fn quinn_hq_endpoint() -> (quinn::Endpoint, SocketAddr, [u8; 32]) {
    let (mut tls, fingerprint) = server_tls();
    tls.alpn_protocols = vec![hq::ALPN.to_vec()];
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls).expect("a QUIC config");
    let server = quinn::Endpoint::server(
        quinn::ServerConfig::with_crypto(Arc::new(quic)),
        SocketAddr::new(LOOPBACK, 0),
    )
    .expect("a quinn server");
    let addr = server.local_addr().expect("its address");
    (server, addr, fingerprint)
}

/// quinn's `hq-interop` server on loopback serving the transfer case's files (from
/// memory); `retry`: it asks every client for a Retry first.
fn quinn_server(retry: bool) -> (SocketAddr, [u8; 32], tokio::task::JoinHandle<()>) {
    let (server, addr, fingerprint) = quinn_hq_endpoint();
    let task = tokio::spawn(async move {
        while let Some(incoming) = server.accept().await {
            if retry && !incoming.remote_address_validated() {
                incoming.retry().expect("a Retry");
                continue;
            }
            let Ok(conn) = incoming.await else { continue };
            tokio::spawn(async move {
                while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                    tokio::spawn(async move {
                        let line = recv.read_to_end(4096).await.expect("a request");
                        let line = String::from_utf8(line).expect("UTF-8");
                        let name = line.trim_end().strip_prefix("GET /").expect("a GET");
                        let len = FILES.iter().find(|f| f.0 == name).expect("a known file").1;
                        send.write_all(&contents(name, len)).await.expect("the answer");
                        send.finish().expect("finished");
                        let _ = send.stopped().await;
                    });
                }
            });
        }
    });
    (addr, fingerprint, task)
}

async fn braid_client_case(retry: bool, chacha20: bool, key_update: bool) {
    let (addr, fingerprint, server) = quinn_server(retry);
    let out = TempDir::new("out");
    let urls: Vec<String> = FILES.iter().map(|(n, _)| format!("https://{addr}/{n}")).collect();
    let crypto = hq::client_crypto(&hq::Trust::Pinned(fingerprint), chacha20).expect("TLS");
    let cfg = Arc::new(hq::config(&config(), key_update));
    let (at, names) = hq::server_of(&urls).await.expect("one server");
    assert_eq!(at, addr);
    let path = driver::PathSpec::to(addr, braid_transport::path::PathRole::Wired);
    let conn = driver::connect(cfg, crypto, vec![path]).await.expect("a handshake");
    let got = tokio::time::timeout(Duration::from_secs(20), hq::fetch(&conn, &names, &out.0))
        .await
        .expect("the transfer within 20 s")
        .expect("every file");
    assert_eq!(got, FILES.iter().map(|f| f.1 as u64).sum::<u64>());
    check_files(&out.0);
    let s = conn.stats().await.expect("statistics");
    if key_update {
        assert!(s.key_updates >= 1, "no key update: {}", s.key_updates);
    }
    conn.close(0, b"").await;
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_fetches_files_from_a_quinn_server() {
    braid_client_case(false, false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_fetches_after_a_quinn_servers_retry() {
    braid_client_case(true, false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_fetches_from_a_quinn_server_with_chacha20_only() {
    braid_client_case(false, true, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_updates_its_keys_while_fetching_from_a_quinn_server() {
    braid_client_case(false, false, true).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_migrates_mid_transfer_and_gets_every_file_from_a_quinn_server() {
    // The runner's connectionmigration case the other way, as `braid interop client
    // --migrate` runs it: once 64 KiB arrived, our client moves its path to a new socket;
    // its packets from there carry an id of quinn's never used from the old port, quinn
    // validates the new address, and the transfer completes.
    let (addr, fingerprint, server) = quinn_server(false);
    let (front, relay) = interop_common::relay(addr).await;
    let out = TempDir::new("migrate-client");
    let crypto = hq::client_crypto(&hq::Trust::Pinned(fingerprint), false).expect("TLS");
    let cfg = Arc::new(hq::config(&config(), false));
    let path = driver::PathSpec::to(front, braid_transport::path::PathRole::Wired);
    let conn = driver::connect(cfg, crypto, vec![path]).await.expect("a handshake");
    let before = conn.paths()[0].local;
    let names: Vec<String> = FILES.iter().map(|f| f.0.to_string()).collect();
    let (got, moved) = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(
            hq::fetch(&conn, &names, &out.0),
            hq::migrate_after(&conn, hq::MIGRATE_AFTER_BYTES),
        )
    })
    .await
    .expect("the transfer within 20 s");
    let moved = moved.expect("migrated");
    assert_ne!(moved, before);
    assert_eq!(conn.paths()[0].local, moved);
    assert_eq!(got.expect("every file"), FILES.iter().map(|f| f.1 as u64).sum::<u64>());
    check_files(&out.0);
    let s = conn.stats().await.expect("statistics");
    assert_eq!(s.migrated, 1);
    assert!(s.cids_retired >= 1, "the ids used at the old port are retired");
    conn.close(0, b"").await;
    interop_common::assert_migrated_with_new_ids(&relay.await.expect("the relay"));
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_behind_a_rebinding_nat_gets_every_file_from_a_quinn_server() {
    // The runner's rebind-port case the other way: our client's traffic leaves the NAT
    // from a new port after 300 kB of answers; quinn's server validates the new address
    // (its PATH_CHALLENGE, which our client answers) and the transfer completes.
    let (addr, fingerprint, server) = quinn_server(false);
    let (front, nat) = nat(addr, 300_000).await;
    let out = TempDir::new("rebind-client");
    let crypto = hq::client_crypto(&hq::Trust::Pinned(fingerprint), false).expect("TLS");
    let cfg = Arc::new(hq::config(&config(), false));
    let path = driver::PathSpec::to(front, braid_transport::path::PathRole::Wired);
    let conn = driver::connect(cfg, crypto, vec![path]).await.expect("a handshake");
    let names: Vec<String> = FILES.iter().map(|f| f.0.to_string()).collect();
    let got = tokio::time::timeout(Duration::from_secs(20), hq::fetch(&conn, &names, &out.0))
        .await
        .expect("the transfer within 20 s")
        .expect("every file");
    assert_eq!(got, FILES.iter().map(|f| f.1 as u64).sum::<u64>());
    check_files(&out.0);
    conn.close(0, b"").await;
    let ports = nat.await.expect("the NAT");
    assert_eq!(ports.len(), 2, "the NAT rebound once: {ports:?}");
    server.abort();
}
